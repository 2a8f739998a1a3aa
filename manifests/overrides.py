"""Config files and command-line overrides, before validation by the config library (config.py).

`read_yaml` reads a config file (errors name the file); `apply_overrides` applies `--set key.path=value`
overrides to the parsed mapping, so an override then goes through exactly the checks the YAML does.
Standard library only (PyYAML is imported when a file or a value is read).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from .errors import ConfigError


def read_yaml(path: str | Path, *, what: str = "config") -> dict:
    """A YAML config file as a mapping; a missing file, bad YAML or a non-mapping is a ConfigError naming the file."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {what} is a mapping of keys; got {type(data).__name__}")
    return data


def parse_assignment(text: str) -> tuple[str, Any]:
    """`executor.workers=4` -> ("executor.workers", 4); the value is read as YAML (`[a, b]`, `null`, `1e-3`)."""
    import yaml

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: write KEY.PATH=VALUE, e.g. --set executor.workers=4")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {text!r}: the value is not valid YAML ({exc})") from exc
    return key, value


def apply_overrides(data: dict, overrides: dict[str, Any] | list[str], *, where: str) -> dict:
    """Set dotted keys in a parsed config (a copy is returned; nothing else is changed).

    `a.b.c` walks mappings; in a list of one-key mappings (a pipeline's `stages`) a part picks the item
    with that key (`stages.text_length_v1.min_words`), and a number picks by position. A missing
    intermediate mapping is created, so the override is then validated like the same key in the YAML."""
    import copy

    out = copy.deepcopy(data)
    items = overrides.items() if isinstance(overrides, dict) else (parse_assignment(o) for o in overrides)
    for key, value in items:
        parts = key.split(".")
        node: Any = out
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            at = ".".join(parts[: depth + 1])
            if isinstance(node, list):
                for i, item in enumerate(node):  # `- normalize_text_v1` (no options) becomes a one-key mapping
                    if item == part:
                        node[i] = {part: {}}
                named = [i for i, item in enumerate(node) if isinstance(item, dict) and part in item]
                if part.isdigit() and int(part) < len(node):
                    index, inner = int(part), None
                elif len(named) == 1:
                    index, inner = named[0], part
                else:
                    keys = [str(next(iter(it))) for it in node if isinstance(it, dict) and len(it) == 1]
                    close = difflib.get_close_matches(part, keys, n=1)
                    fix = f"did you mean {close[0]!r}?" if close else f"items: {keys or list(range(len(node)))}"
                    why = "is named twice" if len(named) > 1 else "names no item"
                    raise ConfigError(f"--set {key}: {at!r} {why} in the list in {where}; {fix}")
                if inner is None:
                    if last:
                        node[index] = value
                    node = node[index]
                    continue
                if last:
                    node[index][inner] = value
                    continue
                if node[index][inner] is None:
                    node[index][inner] = {}
                node = node[index][inner]
                continue
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {'.'.join(parts[:depth])!r} in {where} is a "
                                  f"{type(node).__name__}, not a mapping of options")
            if last:
                node[part] = value
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
    return out
