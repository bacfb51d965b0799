"""LanceDB, imported without the REST client modules that a local or object-storage store
never uses.

`import lancedb` (0.40) imports `lance_namespace`, which imports models from the package
`lance_namespace_urllib3_client`. That package's `__init__` imports every one of its REST API
modules: about half of the ~1.1 s that `import lancedb` takes on the developers' machine
(`python -X importtime -c "import lancedb"`). Only a REST namespace calls those modules. Every
process that opens a store pays this once: a CLI command, the API, a flow, and the writer of
a short-lived agent, whose exit waits for it.

`load_lancedb()` first puts that package in `sys.modules` as a package whose own `__init__`
has not run yet. Its submodules import as usual, which is all `lance_namespace` asks of it
(`from lance_namespace_urllib3_client.models import ...`). The first attribute asked of the
package itself (`lance_namespace_urllib3_client.TableApi`, what a REST namespace reads) runs
its `__init__` then, on the same module object. A process that imported the package before
(another library, user code) keeps it as it is. tests/test_lance_import.py checks both sides:
a store used end to end without the API modules, and the package whole once asked.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType

__all__ = ["REST_CLIENT", "load_lancedb"]

REST_CLIENT = "lance_namespace_urllib3_client"
"""The package whose `__init__` is deferred."""

_installing = threading.Lock()


def load_lancedb() -> ModuleType:
    """The `lancedb` module, imported with the REST client package's `__init__` deferred
    (see the module docstring). Call it before anything imports `lancedb` or a submodule of
    it; it is cheap once done. The lock covers putting the package in place only: two threads
    importing LanceDB at once are ordered by Python's own import locks."""
    if "lancedb" not in sys.modules:
        with _installing:
            _defer_init(REST_CLIENT)
    return importlib.import_module("lancedb")


def _defer_init(name: str) -> None:
    """Put package `name` in `sys.modules` with its `__init__` run on first attribute access;
    nothing when it is already imported, or not an installed package."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    # `__spec__`, `__path__`, `__file__` and `__loader__` are set: what the import system asks
    # of a package to import its submodules never reaches `__getattr__`.
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    state = {"ran": False}
    running = threading.RLock()  # one thread runs the `__init__`; the others wait for it

    def __getattr__(attr: str) -> object:  # asked only for a name the module does not have yet
        with running:
            if not state["ran"]:
                state["ran"] = True  # an access from inside the `__init__` finds what it has set
                try:
                    loader.exec_module(module)
                except BaseException:
                    state["ran"] = False
                    raise
                if module.__dict__.get("__getattr__") is __getattr__:
                    del module.__dict__["__getattr__"]
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
