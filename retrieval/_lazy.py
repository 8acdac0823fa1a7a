"""Names a package exports, imported on first use (PEP 562), so that a process that only searches does not pay
for the imports of the build (numpy, multiprocessing) or of the evaluation."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, object]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that imports ``name`` from the module ``exports[name]``
    (relative to the package) on first access and keeps it in ``namespace``."""

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(exports[name], package), name)
        namespace[name] = value
        return value

    return __getattr__


def callable_as(package: str, module: str, name: str) -> None:
    """Make the module ``package`` callable as the function ``name`` of ``module`` (imported at the call), for a
    package that has a function's name one floor up (``retrieval.search``)."""
    import sys

    class _Callable(type(sys.modules[package])):
        def __call__(self, *args, **kwargs):
            return getattr(import_module(module), name)(*args, **kwargs)

    sys.modules[package].__class__ = _Callable
