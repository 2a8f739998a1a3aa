"""License filters for code (and for any dataset with a license column).

- `code_license_v1` on rows of the repos reader (`license_inputs` column: what the repository's license
  files, metadata, READMEs and REUSE files say, license_inputs.py): decides each repository's license
  once (corpus/code/license.py) and then each file's (corpus/code/license_files.py: its own SPDX tag,
  REUSE annotations, its folder's license file, an artifact license, else the repository's), writes
  `license`, `license_method`, `license_evidence` and drops the carried inputs. On a dataset whose
  `license` column is already filled it decides from that column.
- The decision: a row is kept when some alternative of its expression lies fully inside `allow` (OR: one
  branch, AND: every part, `X WITH exception`: X); the rest drop with `license:<expression>`
  (`license:unknown` when none was found, `license:ambiguous` when the evidence is unresolved). Every
  dropped row carries `drop_detail`: JSON with the expression, the rule that gave it, the files it came
  from and how the repository's license was decided.
- `license_select_v1`: the same decision for public/licensed datasets whose license column holds ids in
  any case (`cc-by-4.0`), lists, or names in words ("Creative Commons Attribution 3.0 Unported License"):
  values become SPDX expressions first (ids directly, names through the license phrase index); a name
  that matches nothing is `unknown`.

The language filter `code_language_v1` is in code_language.py.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from manifests.errors import ConfigError

from ..code.license_expr import AMBIGUOUS, PERMISSIVE, UNKNOWN, is_allowed
from ..registry import register
from ..stage import Stage, StageResult, drop_by_reason, with_columns

INPUTS = "license_inputs"  # the repos reader's column (corpus/code/license_inputs.py)
_REPOSITORY_CACHE: OrderedDict = OrderedDict()  # inputs digest -> decided repository; a repository spans batches
_CACHE_SIZE = 256


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


def _reason(expr: str, allow: list[str]) -> str | None:
    if is_allowed(expr, allow):
        return None
    return "license:ambiguous" if AMBIGUOUS in expr else f"license:{expr}"


def _with_details(result: StageResult, details: list[str | None]) -> StageResult:
    """Attach each dropped row's `drop_detail` (rejects keep the input's row order)."""
    if result.rejects is not None:
        dropped = [d for d in details if d is not None]
        result.rejects = with_columns(result.rejects, {"drop_detail": pa.array(dropped, pa.string())})
    return result


def _column_decision(stage: Stage, table: pa.Table, canon) -> StageResult:
    """Decide from a license column that is already filled (a dataset's own, or given to the repos reader)."""
    values = _license_column(table, stage.config.field, stage.name)
    cache: dict = {}  # few distinct license values per batch: canonicalise and decide each once
    reasons, details = [], []
    for v in values:
        key = tuple(v) if isinstance(v, list) else v
        if key not in cache:
            expr = canon(v)
            reason = _reason(expr, stage.config.allow)
            cache[key] = (reason, None if reason is None else json.dumps(
                {"expression": expr, "rule": "column", "field": stage.config.field, "value": v}, ensure_ascii=False))
        reasons.append(cache[key][0])
        details.append(cache[key][1])
    return _with_details(drop_by_reason(stage.name, table, pa.array(reasons, pa.string())), details)


def _repository(blob: str):
    """The decided repository for one `license_inputs` document (memoised: the same repository comes back
    in every batch it spans)."""
    from ..code.license_files import decide_repository
    from ..code.license_index import load_index
    from ..code.license_inputs import unpack

    key = hashlib.sha256(blob.encode("utf-8")).digest()
    if key in _REPOSITORY_CACHE:
        _REPOSITORY_CACHE.move_to_end(key)
        return _REPOSITORY_CACHE[key]
    try:
        inputs = unpack(blob)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"code_license_v1: column {INPUTS!r} is not the repos reader's JSON ({exc})") from None
    repo = decide_repository(inputs, index=load_index())
    _REPOSITORY_CACHE[key] = repo
    while len(_REPOSITORY_CACHE) > _CACHE_SIZE:
        _REPOSITORY_CACHE.popitem(last=False)
    return repo


def _detail(path: str, got, repo) -> str:
    det = repo.detection
    files = {e.path: e.expression for e in det.evidence if e.role != "header"}
    return json.dumps({"file": path, "expression": got.expression, "rule": got.rule, "source": got.source,
                       "repository": {"expression": det.expression, "how": det.how,
                                      "decided_by": [e.path for e in det.evidence if e.decided][:8],
                                      "files": dict(list(files.items())[:12]),
                                      **({"not_code": det.scoped} if det.scoped else {}),
                                      **({"problems": repo.problems} if repo.problems else {})}},
                      ensure_ascii=False)


@register
class CodeLicense(Stage):
    """Decides each file's license (repos reader rows) or reads a license column; drops the non-permissive."""

    name = "code_license_v1"
    Config = LicenseFilterConfig

    def apply(self, table: pa.Table) -> StageResult:
        if self.config.field in table.schema.names or INPUTS not in table.schema.names:
            return _column_decision(self, table, lambda v: v if isinstance(v, str) and v.strip() else UNKNOWN)
        from ..code.license_inputs import HEAD_CHARS

        if "path" not in table.schema.names or "text" not in table.schema.names:
            raise ConfigError(f"{self.name}: rows with {INPUTS!r} need `path` and `text` (read with `format: repos`)")
        inputs = table.column(INPUTS).combine_chunks()
        if isinstance(inputs, pa.DictionaryArray):
            blobs, which = inputs.dictionary.to_pylist(), inputs.indices.to_pylist()
        else:
            values = inputs.to_pylist()
            blobs = list(dict.fromkeys(values))
            at = {b: i for i, b in enumerate(blobs)}
            which = [at[v] for v in values]
        repos = [_repository(b) if b is not None else None for b in blobs]
        heads = pc.utf8_slice_codeunits(table.column("text"), 0, HEAD_CHARS).to_pylist()
        licenses, methods, evidence, reasons, details = [], [], [], [], []
        rules: Counter = Counter()
        for path, head, w in zip(table.column("path").to_pylist(), heads, which):
            repo = repos[w] if w is not None else None
            if repo is None:  # a row without the reader's inputs: nothing was read for it
                got_expr, method, line = UNKNOWN, "none", "no license inputs for this row"
                reason, detail = "license:unknown", json.dumps({"file": path, "expression": UNKNOWN, "rule": "none"})
            else:
                got = repo.for_file(path or "", head or "")
                det = repo.detection
                got_expr = got.expression
                method = got.rule if got.rule != "repository" else "+".join(
                    sorted({e.method for e in det.evidence if e.decided} or {det.status}))
                line = det.explain() if got.rule == "repository" else \
                    f"{got.rule} {got.source}={got.expression}; repository: {det.explain()}"
                reason = _reason(got_expr, self.config.allow)
                detail = None if reason is None else _detail(path, got, repo)
                rules[got.rule.split("+")[0]] += 1
            licenses.append(got_expr)
            methods.append(method)
            evidence.append(line)
            reasons.append(reason)
            details.append(detail)
        out = with_columns(table.drop_columns([INPUTS]), {
            "license": pa.array(licenses, pa.string()), "license_method": pa.array(methods, pa.string()),
            "license_evidence": pa.array(evidence, pa.string())})
        result = _with_details(drop_by_reason(self.name, out, pa.array(reasons, pa.string())), details)
        result.stats.counters.update({f"files_by_{r.replace('-', '_')}": n for r, n in sorted(rules.items())})
        return result


def _group(v: str) -> str:
    return f"({v})" if " " in v.strip() else v


@register
class LicenseSelect(Stage):
    """For public/licensed datasets: canonicalise the license column (case, `+`, lists) then select."""

    name = "license_select_v1"
    Config = LicenseFilterConfig

    def apply(self, table: pa.Table) -> StageResult:
        from ..code.license_file import name_expression

        def canon(v) -> str:
            if isinstance(v, list):
                v = " OR ".join(_group(str(x)) for x in v if x)
            if not isinstance(v, str) or not v.strip():
                return UNKNOWN
            return name_expression(v)  # SPDX ids in any case, names in words, CC NC/SA/ND parsed

        return _column_decision(self, table, canon)


__all__ = ["CodeLicense", "LicenseSelect", "INPUTS"]
