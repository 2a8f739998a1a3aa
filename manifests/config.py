"""The one config library: typed configs from plain mappings (YAML), with errors that name the file,
the key, the owner and the fix.

Every component owns a frozen, keyword-only dataclass. `build_config` maps a dict onto it one to
one: unknown keys (with a did-you-mean), missing keys and wrong types raise ConfigError before any
work starts, and a dataclass's own `__post_init__` checks (ValueError) are re-raised as ConfigError
with the owner named. `Size` and `Count` fields take `64MiB` / `6.3T`. Reading files and
command-line `--set key.path=value` overrides are in overrides.py (applied before validation, so an
override is checked exactly like the YAML it replaces).

Standard library only (PyYAML is imported when a file is read), so `manifests` keeps depending on
pyarrow alone and pipelines, mixtures and training configs all use this one copy.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from manifests.errors import ConfigError

_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4, "pb": 1000**5,
               "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "pib": 1024**5}
_SIZE = re.compile(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)([a-z]*)")
MAX_SIZE = 1024**6  # an exbibyte: anything larger is a typo, not a size


def parse_size(value: int | float | str, *, key: str, where: str) -> int:
    """`64MiB`, `1.5GB`, `100TB`, `5e12`, `4096` -> bytes (the one size parser: configs, `--gpu-mem`,
    `--input-bytes`). Negative, infinite, NaN or absurdly large sizes are errors, not numbers."""
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        m = _SIZE.fullmatch(value.strip().lower().replace(" ", ""))
        if m and m.group(2) in _SIZE_UNITS:
            number = float(m.group(1)) * _SIZE_UNITS[m.group(2)]
    if number is None or not 0 <= number <= MAX_SIZE:  # NaN fails both comparisons
        raise ConfigError(f"{key} in {where}: {value!r} is not a size; write e.g. 64MiB, 1GB, 100TB or 4096")
    return int(number)


_COUNT_UNITS = {"k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}


def parse_count(value: Any, *, key: str, where: str) -> int:
    """`6.3T`, `100B`, `2M`, `4096`, `1e9` -> an int (units are powers of 1000)."""
    if isinstance(value, bool):
        raise ConfigError(f"{key} in {where}: expected a count, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().lower().replace("_", "").replace(",", "")
        scale = _COUNT_UNITS.get(text[-1:], 1)
        number = text[:-1] if scale != 1 else text
        try:
            return int(round(float(number) * scale))
        except ValueError:
            pass
    raise ConfigError(f"{key} in {where}: {value!r} is not a count; write e.g. 6.3T, 100B, 2M or 4096")


# Field types that parse units: `seq_length: Count`, `shard_bytes: Size`.
Size = Annotated[int, parse_size]
Count = Annotated[int, parse_count]


def require(condition: bool, message: str) -> None:
    """For `__post_init__` checks: raise ValueError(message) unless condition holds."""
    if not condition:
        raise ValueError(message)


def number_problem(value: Any, *, gt=None, ge=None, lt=None, le=None, integer: bool = False) -> str | None:
    """Why `value` is not a finite number within the bounds (None when it is): `gt`/`ge` lower, `lt`/`le`
    upper bounds; NaN and infinities never pass, booleans are not numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number; got {value!r}"
    if integer and not isinstance(value, int):
        return f"must be a whole number; got {value!r}"
    if not math.isfinite(value):
        return f"must be a finite number; got {value}"
    for bound, ok, word in ((gt, lambda b: value > b, ">"), (ge, lambda b: value >= b, ">="),
                            (lt, lambda b: value < b, "<"), (le, lambda b: value <= b, "<=")):
        if bound is not None and not ok(bound):
            return f"must be {word} {bound}; got {value}"
    return None


def require_number(value: Any, name: str, *, where: str | None = None, **bounds) -> None:
    """Raise ConfigError("NAME must be > 0; got nan[ in WHERE]") unless `value` passes `number_problem`.
    The one numeric check of configs (`__post_init__`) and command-line options alike."""
    problem = number_problem(value, **bounds)
    if problem:
        raise ConfigError(f"{name} {problem}" + (f" in {where}" if where else ""))


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, *, key: str, where: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Annotated:
        _, parser = get_args(tp)[:2]
        return parser(value, key=key, where=where)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key=key, where=where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(f"{key} in {where}: {value!r} does not fit {_type_name(tp)}")
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            by_lower = {str(a).lower(): a for a in allowed}
            hint = difflib.get_close_matches(str(value).lower(), list(by_lower), n=1)
            fix = f"; did you mean {by_lower[hint[0]]!r}?" if hint else ""
            raise ConfigError(f"{key} in {where}: {value!r} is not one of {list(allowed)}{fix}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key} in {where}: expected a list, got {type(value).__name__} {value!r}")
        args = get_args(tp) or (Any,)
        if origin is tuple and args[-1] is not Ellipsis:  # fixed shape: tuple[float, str]
            if len(value) != len(args):
                raise ConfigError(f"{key} in {where}: expected {len(args)} items, got {len(value)}: {value!r}")
            return tuple(_coerce(v, t, key=f"{key}[{i}]", where=where) for i, (v, t) in enumerate(zip(value, args)))
        items = [_coerce(v, args[0], key=f"{key}[{i}]", where=where) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} in {where}: expected a mapping, got {type(value).__name__}")
        _, val_tp = get_args(tp) or (Any, Any)
        return {k: _coerce(v, val_tp, key=f"{key}.{k}", where=where) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return build_config(tp, value, where=f"{key} in {where}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key} in {where}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key} in {where}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and _YAML11_FLOAT.fullmatch(value.strip()):
            return float(value)  # PyYAML (YAML 1.1) reads `3e-4` as a string: what the user meant is a number
        raise ConfigError(f"{key} in {where}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key} in {where}: expected a string, got {value!r}")
    return value


_YAML11_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def check_keys(mapping: dict, known, *, where: str) -> None:
    """Unknown keys are a ConfigError with a did-you-mean (or the list of valid keys)."""
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), [str(k) for k in known], n=1)
            fix = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(sorted(known)) or '(none)'}"
            raise ConfigError(f"unknown key {key!r} in {where}; {fix}")


def build_config(cls: type, mapping: Any, *, where: str) -> Any:
    """Build the frozen dataclass `cls` from `mapping`, or raise ConfigError that says the fix."""
    if mapping is None:
        mapping = {}
    if dataclasses.is_dataclass(mapping) and isinstance(mapping, cls):
        return mapping
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where}: expected a mapping of options, got {type(mapping).__name__} {mapping!r}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls, include_extras=True)
    check_keys(mapping, fields, where=where)
    kwargs = {}
    for name, f in fields.items():
        if name in mapping:
            kwargs[name] = _coerce(mapping[name], hints[name], key=name, where=where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"missing key {name!r} in {where}; it has no default, add `{name}: ...`")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{exc} in {where}") from exc


def config_to_dict(config: Any) -> dict:
    """The canonical, JSON-safe form of a config dataclass (for manifests and cache keys)."""
    return dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config or {})
