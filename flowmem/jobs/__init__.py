"""The use cases: collect, ingest, induce, learn, report an outcome, cycle, evaluate.

Each is a plain function that takes a `Store`, the settings and its collaborators; the CLI,
the Prefect flows, the API, the MCP server and the demo call these and hold no logic of their
own. `factories` is the one place that chooses an inducer, an embedder or a store from the
settings. Importing this package imports none of its modules.
"""
