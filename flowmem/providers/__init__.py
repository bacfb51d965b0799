"""Providers: the only modules that import an SDK.

`flowmem.providers.openai` holds `OpenAILLM` (the `flowmem.induction.base.LLM` protocol),
`OpenAIEmbedder` (the `flowmem.retrieval.embed.Embedder` protocol) and `llm_from_settings`.
Import it explicitly; importing this package imports no SDK.
"""
