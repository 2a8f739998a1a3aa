"""The project's error classes; each one tells the caller what to do next.

- ConfigError: bad configuration, raised before any work starts. Fix the config.
- ShardError: one input file or output shard is broken; recorded, the run goes on.
- RecordError: one record is broken; counted as a drop, the task goes on.
- RetryableError: a transient failure the executor may retry.
- FatalError: the run cannot go on.
- ManifestError: a dataset version is missing, malformed, tampered with or unsafe.
"""

from __future__ import annotations


class CidermillError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigError(CidermillError, ValueError):
    """A configuration value is wrong. The message names the key, the component and the fix."""


class ShardError(CidermillError):
    """A whole file or shard could not be read or written."""

    def __init__(self, path: str, reason: str, *, records_read: int | None = None):
        self.path = path
        self.reason = reason
        self.records_read = records_read
        where = f" after {records_read} records" if records_read is not None else ""
        super().__init__(f"{path}: {reason}{where}")


class RecordError(CidermillError):
    """One record could not be parsed; `where` is a line number, byte offset or record id."""

    def __init__(self, path: str, where: str, reason: str):
        self.path = path
        self.where = where
        self.reason = reason
        super().__init__(f"{path} [{where}]: {reason}")


class RetryableError(CidermillError):
    """A transient failure (I/O hiccup, remote timeout); executors retry these."""


class FatalError(CidermillError):
    """The run must stop; the message says why."""


class ManifestError(CidermillError):
    """A dataset version is missing, malformed, unsafe or does not match its shards."""
