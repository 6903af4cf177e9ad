"""Lazy public APIs (PEP 562): a package lists what it exports and from where; a module is imported on the
first use of one of its names, so `import hardmax` and `hardmax --help` stay fast."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict,
                 extra: Iterable[str] = ()) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` for a package whose names live in `exports` (name -> module).

    Usage, in a package's `__init__.py`: ``__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS,
    globals())``. `extra` names are defined in the package itself. A looked-up name is stored in
    `namespace` (the package's globals), so later lookups do not come back here.
    """
    names = sorted([*exports, *extra])

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return names

    return names, __getattr__, __dir__
