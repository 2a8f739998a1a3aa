"""`math_domains_v1`: human-labelled math domains boost a page; denied domains drop.

The file has one domain per line, optionally followed by a label (`allow`, the default, `deny`, or
`neutral`) and a `# comment`. A listed domain covers its subdomains; the most specific listed suffix
of a page's host decides (allow `wikipedia.org` but deny `simple.wikipedia.org`; deny
`stackexchange.com` but allow `math.stackexchange.com`; `neutral` undoes a parent's label).

`mode: boost` (the default): the labels move the math classifier's threshold instead of gating.
A page from an allowed domain needs math__classifier_score >= `allowed_min_score`, any other page
>= `min_score`; a denied domain drops (`domain_denied`) whatever its score; others drop as
`low_math_score`. Rows without a URL are judged as unlisted. With `formula_min_score`, a page
whose reader sees many formulas (math__n_tags >= `formula_min_tags` and math__tag_density >=
`formula_min_tag_density` per 1,000 characters, from math_signals_v1) needs only that score: like a
reviewed domain, formula-rich visible math is evidence the classifier's text features miss on pages
that mix math with code (the lowest applicable threshold wins; a denied domain still drops). The default list ships in corpus/math/data/math_domains (its SOURCE.txt
has the criterion). `mode: gate` is the old allow-list: only allowed domains pass
(`domain_not_allowed`, `domain_denied`, `no_url`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from manifests.errors import ConfigError

from manifests.config import require
from ..registry import register
from ..stage import Filter, evidence
from .math_classifier import SCORE

DEFAULT_DOMAINS = Path(__file__).resolve().parents[1] / "math" / "data" / "math_domains" / "math_domains.txt"
LABELS = ("allow", "deny", "neutral")


def load_domain_labels(path: str | Path) -> dict[str, str]:
    labels = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"math_domains_v1: cannot read domains file {path}: {exc.strerror}") from exc
    for n, line in enumerate(lines, start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        label = parts[1].lower() if len(parts) > 1 else "allow"
        if label not in LABELS or len(parts) > 2:
            raise ConfigError(f"{path} line {n}: expected `domain [allow|deny|neutral]`, got {line!r}")
        labels[parts[0].lower().lstrip(".")] = label
    if not labels:
        raise ConfigError(f"{path}: no domains listed")
    return labels


def host_of(url: str | None) -> str | None:
    if not url:
        return None
    host = urlsplit(url if "//" in url else f"//{url}").hostname
    return host.lower().rstrip(".") if host else None


def label_for(host: str, labels: dict[str, str]) -> str | None:
    """The label of the most specific listed suffix of `host`, or None."""
    parts = host.split(".")
    for i in range(len(parts)):
        label = labels.get(".".join(parts[i:]))
        if label:
            return label
    return None


def url_label(url: str | None, labels: dict[str, str]) -> str | None:
    host = host_of(url)
    return label_for(host, labels) if host else None


@dataclass(frozen=True, kw_only=True)
class MathDomainsConfig:
    domains_file: str | None = None  # None: the list shipped in corpus/math/data/math_domains
    field: str = "url"
    mode: Literal["boost", "gate"] = "boost"
    min_score: float = 0.5  # boost: classifier threshold for pages from unlisted domains
    allowed_min_score: float = 0.2  # boost: the lower threshold for pages from allowed domains
    formula_min_score: float | None = None  # boost: the lower threshold for formula-rich pages (None: off)
    formula_min_tags: int = 5  # formula-rich: at least this many visible formulas ...
    formula_min_tag_density: float = 1.0  # ... and this many per 1,000 characters of page text

    def __post_init__(self):
        require(self.formula_min_score is None or 0.0 <= self.formula_min_score <= self.min_score,
                f"need 0 <= formula_min_score <= min_score; got {self.formula_min_score}, {self.min_score}")
        require(self.formula_min_tags >= 1 and self.formula_min_tag_density >= 0,
                f"formula_min_tags must be >= 1 and formula_min_tag_density >= 0; got {self.formula_min_tags}, "
                f"{self.formula_min_tag_density}")
        require(self.domains_file is None or bool(self.domains_file), "domains_file must name a file or be null")
        require(0.0 <= self.allowed_min_score <= self.min_score <= 1.0,
                f"need 0 <= allowed_min_score <= min_score <= 1; got {self.allowed_min_score}, {self.min_score}")


@register
class MathDomains(Filter):
    """Allowed domains lower the classifier threshold (boost) or gate; denied domains drop."""

    name = "math_domains_v1"
    Config = MathDomainsConfig

    def resources(self) -> dict:
        return {"domains": self.config.domains_file or DEFAULT_DOMAINS}

    def __init__(self, config=None):
        super().__init__(config)
        self._labels = load_domain_labels(self.config.domains_file or DEFAULT_DOMAINS)  # fails before any work

    def reasons(self, table: pa.Table) -> pa.Array:
        cfg = self.config
        if cfg.field not in table.schema.names:
            raise ConfigError(f"{self.name}: no column {cfg.field!r}; set `field:` to the URL column")
        urls = table.column(cfg.field).to_pylist()
        labels = [url_label(u, self._labels) for u in urls]
        if cfg.mode == "gate":
            reasons = ["no_url" if host_of(u) is None else None if lab == "allow" else
                       "domain_denied" if lab == "deny" else "domain_not_allowed" for u, lab in zip(urls, labels)]
        else:
            if SCORE not in table.schema.names:
                raise ConfigError(f"{self.name}: mode boost needs {SCORE}; run math_classifier_v1 before it")
            scores = pc.fill_null(table.column(SCORE), 0.0).to_pylist()
            rich = self._formula_rich(table)
            reasons = ["domain_denied" if lab == "deny" else
                       None if s >= min(cfg.allowed_min_score if lab == "allow" else cfg.min_score,
                                        cfg.formula_min_score if r else 1.0) else "low_math_score"
                       for lab, s, r in zip(labels, scores, rich)]
        return pa.array(reasons, pa.string())

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str | None]:
        """The host and its listed label; in boost mode the score and the threshold that applied:
        `{"host": "example.org", "label": null, "score": 0.31, "min": 0.5}`."""
        cfg = self.config
        urls = table.column(cfg.field).take(dropped).to_pylist()
        out = []
        if cfg.mode == "boost":
            scores = table.column(SCORE).take(dropped).to_pylist()
            rich_all = self._formula_rich(table)
            rich = [rich_all[i] for i in dropped.to_pylist()]
        for k, url in enumerate(urls):
            host = host_of(url)
            item = {"host": host, "label": label_for(host, self._labels) if host else None}
            if cfg.mode == "boost":
                lab = item["label"]
                item["score"] = scores[k]
                item["min"] = min(cfg.allowed_min_score if lab == "allow" else cfg.min_score,
                                  cfg.formula_min_score if rich[k] else 1.0)
            out.append(item)
        return evidence(out)

    def _formula_rich(self, table: pa.Table) -> list[bool]:
        cfg = self.config
        if cfg.formula_min_score is None:
            return [False] * table.num_rows
        missing = [c for c in ("math__n_tags", "math__tag_density") if c not in table.schema.names]
        if missing:
            raise ConfigError(f"{self.name}: formula_min_score needs {', '.join(missing)}; run math_signals_v1 before it")
        n_tags = pc.fill_null(table.column("math__n_tags"), 0).to_pylist()
        density = pc.fill_null(table.column("math__tag_density"), 0.0).to_pylist()
        return [n >= cfg.formula_min_tags and d >= cfg.formula_min_tag_density for n, d in zip(n_tags, density)]
