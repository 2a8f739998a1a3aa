"""Input readers by format name."""

from __future__ import annotations

from manifests.errors import ConfigError

from .base import InputFile, Reader, stable_id, stable_ids
from .jsonl import JsonlReader
from .parquet import ParquetReader
from .repos import ReposReader
from .warc import WarcReader

READERS: dict[str, type[Reader]] = {r.format: r for r in (JsonlReader, ParquetReader, WarcReader, ReposReader)}
DIRECTORY_FORMATS = frozenset({"repos"})  # formats whose inputs may be directories (a folder of repositories)


def make_reader(fmt: str, options: dict | None = None) -> Reader:
    if fmt not in READERS:
        raise ConfigError(f"input.format {fmt!r} is not known; use one of {sorted(READERS)}")
    return READERS[fmt](options or {})


__all__ = ["DIRECTORY_FORMATS", "InputFile", "READERS", "Reader", "make_reader", "stable_id", "stable_ids"]
