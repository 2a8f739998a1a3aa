"""Pages already extracted in this process, by payload: a byte-identical copy is not extracted again.

Crawls hold the same bytes under several URLs (http and https, a tracking parameter, a trailing slash,
mirrors); the end-to-end benchmark's input has 10% such copies. Extraction (corpus/web/extract.py) reads
only the payload, its Content-Type and, from the URL, whether it names a forum (`forum_url`): trafilatura
also gets the URL, but with links, images and metadata off (as we call it) it uses the URL for nothing but
log messages. So the key is (settings, payload digest, Content-Type, forum_url) and a hit returns exactly
what extracting the copy would. Only finished extractions are kept: a page that failed or ran out of time
is tried again, as before. Bounded by entries and by characters held.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from .extract import Page, forum_url

_MAX_ENTRIES = 50_000
_MAX_CHARS = 64 << 20


class PayloadCache:
    def __init__(self, max_entries: int = _MAX_ENTRIES, max_chars: int = _MAX_CHARS):
        self.pages: OrderedDict[tuple, Page] = OrderedDict()
        self.max_entries, self.max_chars = max_entries, max_chars
        self.chars = 0

    @staticmethod
    def key(settings, content: bytes, content_type: str | None, url: str | None) -> tuple:
        # sha256: a cryptographic digest (a crafted page must not collide with another), and with the CPU's SHA
        # instructions about twice as fast as blake2b on large payloads
        return settings, hashlib.sha256(content).digest(), len(content), content_type, forum_url(url)

    def get(self, key: tuple) -> Page | None:
        page = self.pages.get(key)
        if page is not None:
            self.pages.move_to_end(key)
        return page

    def put(self, key: tuple, page: Page) -> None:
        if key in self.pages:
            return
        self.pages[key] = page
        self.chars += len(page.text)
        while self.pages and (len(self.pages) > self.max_entries or self.chars > self.max_chars):
            _, old = self.pages.popitem(last=False)
            self.chars -= len(old.text)


PAGES = PayloadCache()  # one per process: tasks run one after another in a worker
