"""How a workflow reads: names, descriptions, step texts and renderings, and the metrics that score it."""
