"""Framework integrations; each module imports its framework, so import the one you use.

- `flowmem.agents.integrations.openai_agents`: `FlowmemHooks`, `with_memory` (OpenAI Agents SDK).
- `flowmem.agents.integrations.langchain`: `FlowmemCallbackHandler` (LangChain callbacks).

A plain chat-completions tool loop needs no integration: see examples/openai_function_calling.py.
"""
