"""Stage lookup by versioned name. Stage modules register themselves with `@register`.

Every module under the packages in STAGE_PACKAGES can hold stages, so adding a stage is adding a file.
A lookup first imports only the modules whose source assigns the stage's name (`name = "web_extract_v1"`,
found by a text scan of the files, done once): importing every stage module costs ~0.3 CPU-s per process
(scipy's optimizer, the synthesis sandbox ...) that a web pipeline never uses. The scan is only a hint:
registration still happens at import, and a name it does not find, or finds in a module that does not
register it, makes the lookup import every module, as before.

A stage package that fails to import, or a stage module that fails for any reason but a missing third-party
package, is an error. A module whose optional third-party dependency is missing is remembered, and a lookup
that fails names it, so the error says which extra to install.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
from pathlib import Path

from manifests.errors import ConfigError

from .stage import Stage

STAGE_PACKAGES = ["corpus.stages", "synth.stages"]
_OWN_PACKAGES = {"manifests", "corpus", "synth", "training", "evals"}
_STAGES: dict[str, type[Stage]] = {}
_IMPORT_FAILURES: dict[str, str] = {}
_loaded = False
_DEFINED_IN: dict[str, list[str]] | None = None  # stage name -> the modules whose source assigns it
_NAME_ASSIGNMENT = re.compile(r"""^[ \t]+name\s*(?::[^=\n]*)?=\s*["']([A-Za-z0-9_]+)["']""", re.M)


def register(cls: type[Stage]) -> type[Stage]:
    name = getattr(cls, "name", None)
    if not name or not name.rsplit("_", 1)[-1].startswith("v"):
        raise TypeError(f"{cls.__name__}: a stage needs a versioned name like 'text_length_v1'; got {name!r}")
    if name in _STAGES and _STAGES[name] is not cls:
        raise TypeError(f"stage name {name!r} is registered twice ({_STAGES[name].__name__}, {cls.__name__})")
    _STAGES[name] = cls
    return cls


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for pkg_name in STAGE_PACKAGES:
        pkg = importlib.import_module(pkg_name)  # a stage package that does not import is an error
        for info in pkgutil.iter_modules(pkg.__path__):
            _import_stage_module(f"{pkg_name}.{info.name}")


def _import_stage_module(module: str) -> None:
    """Import one stage module; a missing optional third-party package is remembered, anything else raised."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not _optional_dependency(exc):
            raise
        _IMPORT_FAILURES[module] = str(exc)


def _defined_in() -> dict[str, list[str]]:
    global _DEFINED_IN
    if _DEFINED_IN is None:
        found: dict[str, list[str]] = {}
        for pkg_name in STAGE_PACKAGES:
            pkg = importlib.import_module(pkg_name)  # a stage package that does not import is an error
            for info in pkgutil.iter_modules(pkg.__path__):
                path = Path(getattr(info.module_finder, "path", "")) / f"{info.name}.py"
                if info.ispkg or not path.is_file():
                    continue
                module = f"{pkg_name}.{info.name}"
                for name in set(_NAME_ASSIGNMENT.findall(path.read_text(encoding="utf-8", errors="replace"))):
                    found.setdefault(name, []).append(module)
        _DEFINED_IN = found
    return _DEFINED_IN


def _import_defining(name: str) -> None:
    """Import the modules whose source names stage `name`."""
    for module in _defined_in().get(name, ()):
        _import_stage_module(module)


def _optional_dependency(exc: ModuleNotFoundError) -> bool:
    """A third-party package an extra installs (not one of ours: a broken import of ours is a bug)."""
    top = (exc.name or "").split(".")[0]
    return bool(top) and top not in _OWN_PACKAGES


def stage_class(name: str) -> type[Stage]:
    if name not in _STAGES and not _loaded:
        _import_defining(name)
    if name not in _STAGES:
        _load_all()
    if name in _STAGES:
        return _STAGES[name]
    close = difflib.get_close_matches(name, list(_STAGES), n=1)
    fix = f"did you mean {close[0]!r}?" if close else "run `cidermill corpus stages` for the list"
    missing = "".join(f"\n  ({m} could not be imported: {e})" for m, e in _IMPORT_FAILURES.items())
    raise ConfigError(f"unknown stage {name!r}; {fix}{missing}")


def all_stages() -> dict[str, type[Stage]]:
    _load_all()
    return dict(sorted(_STAGES.items()))
