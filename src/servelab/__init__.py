"""servelab: check that an AI-serving image is rebuildable and cheap to start."""

from __future__ import annotations

from collections.abc import Callable, Mapping

__version__ = "0.2.0"


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for *package* that imports a public name from its submodule on
    first use, so that importing a stage package costs nothing until a name is used (``servelab
    lint`` must not pay for the Docker SDK). *where* maps each name to its submodule's name."""

    def __getattr__(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        return getattr(importlib.import_module(f"{package}.{where[name]}"), name)

    return __getattr__
