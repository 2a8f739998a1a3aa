"""Dataset names: the directory a version lives under, so they must be safe and unambiguous."""

from __future__ import annotations

import re

from .errors import ConfigError

REJECTS_SUFFIX = ".rejects"
_NAME = re.compile(r"[A-Za-z0-9._-]+")
# A name becomes part of file names (`.locks/run-<name>-<16 hex>.lock`, `<name>.rejects`), and a file name has at
# most 255 bytes on common filesystems; 128 leaves room for what is added around it.
MAX_NAME_CHARS = 128


def validate_name(name: object, *, where: str = "name", allow_rejects: bool = False) -> str:
    """Return `name` if it is a valid dataset name, else raise ConfigError saying why.

    Valid: one to 128 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-` (hidden entries and
    command-line options), and not ending in `.rejects` (that suffix names a run's dropped rows,
    so a user dataset with it would collide with another run's rejects).
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: a dataset name must be a non-empty string; got {name!r}")
    if len(name) > MAX_NAME_CHARS + (len(REJECTS_SUFFIX) if allow_rejects and name.endswith(REJECTS_SUFFIX) else 0):
        raise ConfigError(f"{where}: dataset name {name[:24]!r}... is {len(name)} characters; at most "
                          f"{MAX_NAME_CHARS} (it becomes part of file names)")
    if not _NAME.fullmatch(name):
        bad = sorted({c for c in name if not _NAME.fullmatch(c)})
        raise ConfigError(f"{where}: dataset name {name!r} has characters {''.join(bad)!r}; "
                          "use only letters, digits, '.', '_' and '-'")
    if name[0] in ".-":
        raise ConfigError(f"{where}: dataset name {name!r} must not start with {name[0]!r}")
    if name.endswith(REJECTS_SUFFIX) and not allow_rejects:
        raise ConfigError(f"{where}: dataset name {name!r} must not end in {REJECTS_SUFFIX!r} "
                          "(reserved for the rows a run drops)")
    if allow_rejects and name.endswith(REJECTS_SUFFIX):
        validate_name(name[: -len(REJECTS_SUFFIX)], where=where)
    return name


def is_valid_name(name: object) -> bool:
    try:
        validate_name(name, allow_rejects=True)
    except ConfigError:
        return False
    return True
