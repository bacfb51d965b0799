"""The inducers: the rule inducer (the default), the LLM inducer with its validator, and a test double."""
