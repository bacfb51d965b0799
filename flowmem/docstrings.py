"""Field descriptions from attribute docstrings, read when a JSON schema is made.

Pydantic's `use_attribute_docstrings` reads each model class's source when the class is made
(on Python 3.11 by walking the frames and `inspect.getmodule`, whose first call maps every
loaded module to its file): 20–45 ms of an agent's start for the models it loads. A model whose
`json_schema_extra` is `attribute_descriptions` gets the same schema, its source read only
when a schema is made (an API's OpenAPI, a tool's input, an LLM's output schema).
"""

from __future__ import annotations

from typing import Any

__all__ = ["attribute_descriptions"]


def attribute_descriptions(schema: dict[str, Any], cls: type) -> None:
    """A model's JSON schema with each field's attribute docstring as its description, as
    pydantic's `use_attribute_docstrings` gives it (a subclass's own docstring over its
    base's; a field given a description keeps it): a model's `json_schema_extra`."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        docs.update(_attribute_docs(klass))
    fields = getattr(cls, "model_fields", {})
    for name, prop in schema.get("properties", {}).items():
        field = fields.get(name)
        if name in docs and isinstance(prop, dict) and (field is None or field.description is None):
            prop.setdefault("description", docs[name])


_DOCS: dict[type, dict[str, str]] = {}


def _attribute_docs(cls: type) -> dict[str, str]:
    """The strings right after a class's own annotated attributes, cleaned as pydantic cleans
    them (`inspect.cleandoc`), from its source; read once a class."""
    found = _DOCS.get(cls)
    if found is None:
        import ast
        import inspect
        import textwrap

        found = {}
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError, SyntaxError):  # no source (built in, interactive)
            tree = ast.Module(body=[], type_ignores=[])
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found[node.target.id] = inspect.cleandoc(after.value.value)
        _DOCS[cls] = found
    return found
