"""`flowmem bench`: the project's performance figures, measured side by side in one run."""
