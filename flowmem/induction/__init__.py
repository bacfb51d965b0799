"""Induction, pure (no prefect, lancedb or openai): recorded runs become versioned workflows.

Grouped by stage: `cluster` (runs by task), `abstract` (runs to steps), `pitfalls` (what failed
runs teach), `render` (names, texts, metrics), `inducers` (the rule and the LLM inducer), `plan`
(what a run refits, induces and keeps). `base`, `literals` and `injection` are shared by all.
"""
