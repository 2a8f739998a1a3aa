"""BFCL-style AST check of a predicted call against a ground truth with allowed values.

BFCL's possible answers list, per function, each parameter's acceptable values (`""` in the list
means the parameter may be omitted). A prediction matches when the function name is the same, no
parameter outside the ground truth is passed, every parameter that may not be omitted is present,
and each passed value is among the acceptable ones (numbers compare by value, strings case- and
surrounding-space-insensitively, lists and dicts element-wise). Parallel calls match as a set.
"""

from __future__ import annotations

from typing import Any


def _norm(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        return v.strip().lower()
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def _value_matches(value: Any, allowed: Any) -> bool:
    """One value against one acceptable value; nested dicts list acceptable values per key again."""
    if isinstance(allowed, dict):
        if not isinstance(value, dict) or set(value) - set(allowed):
            return False
        for k, options in allowed.items():
            options = options if isinstance(options, list) else [options]
            if k not in value:
                if "" not in options:
                    return False
            elif not any(_value_matches(value[k], o) for o in options if o != ""):
                return False
        return True
    if isinstance(allowed, list) and allowed and all(isinstance(a, dict) for a in allowed):
        return (isinstance(value, list) and len(value) == len(allowed)
                and all(_value_matches(v, a) for v, a in zip(value, allowed)))
    return _norm(value) == _norm(allowed)


def call_matches(name: str, args: dict, truth: dict[str, dict[str, list]]) -> bool:
    (t_name, t_params), = truth.items()
    if name != t_name or not isinstance(args, dict):
        return False
    if set(args) - set(t_params):
        return False
    for param, allowed in t_params.items():
        if param not in args:
            if "" not in allowed:
                return False
            continue
        if not any(_value_matches(args[param], a) for a in allowed if a != "" or args[param] == ""):
            return False
    return True


def calls_match(pred: list[dict], truths: list[dict]) -> bool:
    """Every ground-truth call matched by exactly one predicted call, none left over."""
    if len(pred) != len(truths):
        return False
    left = list(range(len(pred)))
    for t in truths:
        hit = next((i for i in left if call_matches(pred[i].get("name", ""), pred[i].get("arguments", {}), t)), None)
        if hit is None:
            return False
        left.remove(hit)
    return True


def first_choice(truth: dict[str, dict[str, list]]) -> dict:
    """A concrete call from a ground truth: the first acceptable value of each parameter."""
    (name, params), = truth.items()
    return {"name": name, "arguments": {p: _concrete(vals[0]) for p, vals in params.items() if vals and vals[0] != ""}}


def _concrete(v: Any) -> Any:
    if isinstance(v, dict):  # nested: each key again lists acceptable values
        return {k: _concrete(o[0]) if isinstance(o, list) else o for k, o in v.items()
                if not (isinstance(o, list) and (not o or o[0] == ""))}
    if isinstance(v, list):
        return [_concrete(x) if isinstance(x, dict) else x for x in v]
    return v
