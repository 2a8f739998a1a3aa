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
    """A YAML config file as a mapping. A missing file, a byte that is not UTF-8, bad YAML, a key given twice
    in one mapping or a non-mapping is a one-line ConfigError naming the file and the line."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {path}: {exc.strerror}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"{path} line {line} column {col}: byte 0x{raw[exc.start]:02x} is not UTF-8; "
                          "save the file as UTF-8") from None
    data = load_yaml(text, where=str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {what} is a mapping of keys; got {type(data).__name__}")
    return data


def load_yaml(text: str, *, where: str) -> Any:
    """YAML text, parsed safely, refusing a key given twice in one mapping (PyYAML keeps the last one
    silently: a second `stages:` would replace the first). Errors are one line with the line number."""
    import yaml

    try:
        return yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: {_yaml_error_line(exc)}") from None


def _yaml_error_line(exc) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if problem is None:
        return f"not valid YAML ({' '.join(str(exc).split())})"
    where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
    context = getattr(exc, "context", None)
    if isinstance(exc, _unique_key_loader().DuplicateKey):
        return f"{where}{problem}"
    return f"{where}not valid YAML ({problem}{'; ' + context if context else ''})"


_LOADER = None  # built on first use: PyYAML is imported only when a file or a value is read


def _unique_key_loader():
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    class DuplicateKey(yaml.constructor.ConstructorError):
        pass

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                first: dict = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # `<<: *defaults` may be overridden by design
                    key = self.construct_object(key_node, deep=deep)
                    try:
                        seen = first.setdefault(key, key_node.start_mark)
                    except TypeError:
                        continue  # an unhashable key: PyYAML's own error follows
                    if seen is not key_node.start_mark:
                        raise DuplicateKey(
                            None, None, f"key {key!r} is given twice in one mapping (first at line "
                            f"{seen.line + 1}); YAML would keep only the second: remove or merge one",
                            key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

    UniqueKeyLoader.DuplicateKey = DuplicateKey
    _LOADER = UniqueKeyLoader
    return _LOADER


def parse_assignment(text: str) -> tuple[str, Any]:
    """`executor.workers=4` -> ("executor.workers", 4); the value is read as YAML (`[a, b]`, `null`, `1e-3`)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: write KEY.PATH=VALUE, e.g. --set executor.workers=4")
    value = load_yaml(raw, where=f"--set {text!r}: the value") if raw.strip() else ""
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
