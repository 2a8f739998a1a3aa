"""License filters for code (and for any dataset with a license column).

- `code_license_v1`: keeps rows whose `license` (an SPDX expression, from the repos reader or a
  dataset's own column) has some alternative fully inside the permissive set (OR: one branch,
  AND: every part, `X WITH exception`: X); drops the rest with `license:<expression>`
  (`license:unknown` when none was found, `license:ambiguous` when the detector marked its
  evidence as unresolved, e.g. a license file it cannot read or metadata contradicting the files).
- `license_select_v1`: the same decision for public/licensed datasets whose license column holds
  ids in any case (`cc-by-4.0`), lists, or names in words ("Creative Commons Attribution 3.0
  Unported License"): values become SPDX expressions first (ids directly, names through the
  license phrase index); a name that matches nothing is `unknown`.

The language filter `code_language_v1` is in code_language.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from manifests.config import require
from manifests.errors import ConfigError

from ..code.license import AMBIGUOUS, PERMISSIVE, UNKNOWN, is_allowed
from ..registry import register
from ..stage import Filter


@dataclass(frozen=True, kw_only=True)
class LicenseFilterConfig:
    allow: list[str] = field(default_factory=lambda: list(PERMISSIVE))  # SPDX ids or globs (`BSD-*`)
    field: str = "license"

    def __post_init__(self):
        require(bool(self.allow), "allow must list at least one SPDX id or glob, e.g. [MIT, Apache-2.0]")


def _license_column(table: pa.Table, name: str, stage: str) -> list:
    if name not in table.schema.names:
        raise ConfigError(f"{stage}: no column {name!r}; read repositories with `format: repos` "
                          f"or set `field:` to the dataset's license column")
    return table.column(name).to_pylist()


def _reasons(values: list, allow: list[str], canon) -> pa.Array:
    cache: dict = {}  # few distinct license values per batch: canonicalise and decide each once
    out = []
    for v in values:
        key = tuple(v) if isinstance(v, list) else v
        if key not in cache:
            expr = canon(v)
            cache[key] = (None if is_allowed(expr, allow) else
                          "license:ambiguous" if AMBIGUOUS in expr else f"license:{expr}")
        out.append(cache[key])
    return pa.array(out, pa.string())


@register
class CodeLicense(Filter):
    """Drops rows whose license is not in the permissive set, with the license as the reason."""

    name = "code_license_v1"
    Config = LicenseFilterConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        values = _license_column(table, self.config.field, self.name)
        return _reasons(values, self.config.allow, lambda v: v if isinstance(v, str) and v.strip() else UNKNOWN)


def _group(v: str) -> str:
    return f"({v})" if " " in v.strip() else v


@register
class LicenseSelect(Filter):
    """For public/licensed datasets: canonicalise the license column (case, `+`, lists) then select."""

    name = "license_select_v1"
    Config = LicenseFilterConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        from ..code.license import name_expression

        values = _license_column(table, self.config.field, self.name)

        def canon(v) -> str:
            if isinstance(v, list):
                v = " OR ".join(_group(str(x)) for x in v if x)
            if not isinstance(v, str) or not v.strip():
                return UNKNOWN
            return name_expression(v)  # SPDX ids in any case, names in words, CC NC/SA/ND parsed

        return _reasons(values, self.config.allow, canon)
