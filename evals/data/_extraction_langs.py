"""Language group (Latin, CJK, Cyrillic, Greek, other) and page kind (article, forum, other) of a gold page.

The group comes from the set's language label where it has one, else from the script that most letters of
the gold text (or snippets) are in. Page kinds other than article and forum (service, product, listing ...)
count as `other`.
"""

from __future__ import annotations

import unicodedata
from collections import Counter

LANG_GROUPS = ("Latin", "CJK", "Cyrillic", "Greek", "other")
_GROUP_OF_LANG = {**dict.fromkeys(("zh", "ja", "ko"), "CJK"),
                  **dict.fromkeys(("ru", "bg", "uk", "be", "sr", "mk", "kk"), "Cyrillic"), "el": "Greek"}
_SCRIPT_GROUP = {"LATIN": "Latin", "CJK": "CJK", "HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK",
                 "CYRILLIC": "Cyrillic", "GREEK": "Greek"}
_OTHER_KINDS = ("service", "product", "collection", "listing", "documentation", "unlabelled")


def script_group(text: str) -> str:
    """The group of the script most letters of `text` are in (a Unicode name's first word: LATIN, CJK ...)."""
    counts: Counter = Counter()
    for ch in text[:5000]:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            counts[_SCRIPT_GROUP.get(name.split(" ", 1)[0], "other")] += 1
    return counts.most_common(1)[0][0] if counts else "other"


def lang_group(lang: str | None, text: str) -> str:
    """Latin / CJK / Cyrillic / Greek / other from an ISO 639-1 code ('en-US' reads as 'en'), else the script."""
    code = (lang or "").split("-")[0].split("_")[0].lower()
    return _GROUP_OF_LANG.get(code) or script_group(text)


def page_kind(kind: str) -> str:
    """article / forum / other from a set's finer page types."""
    return "other" if kind in _OTHER_KINDS else kind
