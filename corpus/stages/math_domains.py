"""`math_domains_v1`: keep pages from human-labelled math domains (an allow-list file).

The file has one domain per line, optionally followed by a label (`allow`, the default, or
`deny`) and a `# comment`. A listed domain covers its subdomains; the most specific listed suffix
of a page's host decides (allow `wikipedia.org` but deny `simple.wikipedia.org`; deny
`stackexchange.com` but allow `math.stackexchange.com`). Drops `domain_not_allowed`,
`domain_denied`, `no_url`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from manifests.errors import ConfigError

from ..config import require
from ..registry import register
from ..stage import Filter


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
        if label not in ("allow", "deny") or len(parts) > 2:
            raise ConfigError(f"{path} line {n}: expected `domain [allow|deny]`, got {line!r}")
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


@dataclass(frozen=True, kw_only=True)
class MathDomainsConfig:
    domains_file: str  # e.g. data/samples/math/math_domains.txt
    field: str = "url"

    def __post_init__(self):
        require(bool(self.domains_file), "domains_file must name a file of labelled domains")


@register
class MathDomains(Filter):
    """Keeps rows whose URL host is an allowed (labelled) math domain."""

    name = "math_domains_v1"
    Config = MathDomainsConfig

    def __init__(self, config=None):
        super().__init__(config)
        self._labels = load_domain_labels(self.config.domains_file)  # read once; fails before any work

    def reasons(self, table: pa.Table) -> pa.Array:
        if self.config.field not in table.schema.names:
            raise ConfigError(f"{self.name}: no column {self.config.field!r}; set `field:` to the URL column")
        out = []
        for url in table.column(self.config.field).to_pylist():
            host = host_of(url)
            label = label_for(host, self._labels) if host else None
            out.append("no_url" if host is None else None if label == "allow" else
                       "domain_denied" if label == "deny" else "domain_not_allowed")
        return pa.array(out, pa.string())
