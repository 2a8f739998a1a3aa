"""URL normalisation for URL dedup, vectorised with pyarrow regexes.

Two URLs are the same page when they differ only in: scheme (http/https), letter case of the host,
a leading `www.`, a default port, the fragment, a trailing slash, or tracking parameters
(utm_*, fbclid, gclid). Query order is kept (it can matter to the server).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_TRACKING = r"(utm_[a-z]+|fbclid|gclid|mc_cid|mc_eid)"


def normalise_urls(urls: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    u = pc.utf8_trim_whitespace(urls)
    u = pc.replace_substring_regex(u, r"#.*$", "")  # fragment
    u = pc.replace_substring_regex(u, r"(?i)^[a-z][a-z0-9+.-]*://", "")  # scheme
    # lowercase the authority (up to the first / ? or end); the path keeps its case
    host = pc.extract_regex(u, r"^(?P<host>[^/?]*)(?P<rest>.*)$")
    hostpart = pc.utf8_lower(pc.struct_field(host, "host"))
    hostpart = pc.replace_substring_regex(hostpart, r"^www\.", "")
    hostpart = pc.replace_substring_regex(hostpart, r":(80|443)$", "")
    rest = pc.struct_field(host, "rest")
    rest = pc.replace_substring_regex(rest, r"([?&])" + _TRACKING + r"=[^&]*", r"\1")
    rest = pc.replace_substring_regex(rest, r"&&+", "&")
    rest = pc.replace_substring_regex(rest, r"\?&", "?")
    rest = pc.replace_substring_regex(rest, r"[?&]$", "")
    rest = pc.replace_substring_regex(rest, r"/+(\?|$)", r"\1")  # trailing slash of the path
    out = pc.binary_join_element_wise(hostpart, rest, "")
    empty = pc.equal(pc.utf8_length(out), 0)
    return pc.if_else(empty, pa.scalar(None, pa.string()), out)
