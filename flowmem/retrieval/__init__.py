"""Retrieval, pure (no prefect, lancedb or openai): which served workflows a task gets.

Texts become vectors (`embed`); a workflow scores as its nearest example task (`nearest`, past a
size through an ANN: `ann`); the relevance floor, gap and composition (`serving`) and the cover
of a recurring task's past runs (`cover`, aligned by `align`) choose what is served together.
"""
