"""The end-to-end benchmark's input past its pool of real pages (benchmarks/e2e_input.py): every later round is
distinct pages with the same markup, words and length, and the pool's duplicates stay duplicates within a round."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import e2e_input  # noqa: E402
from e2e_input import Page, variant  # noqa: E402

BODY = (b"<html><head><title>A page about the river and its bridges</title>"
        b"<script>var words = 'do not touch these words at all';</script>"
        b"<style>p { color: red; font-size: 12px; margin: 0 }</style></head><body>"
        b"<p>The river runs past the old mill and under three stone bridges before the sea.</p>\n"
        b"<!-- a comment that stays as it is, word for word -->"
        b"<p>\xe4\xb8\xad\xe6\x96\x87\xe7\x9a\x84\xe4\xb8\x80\xe6\xae\xb5\xe8\xaf\x9d\xe5\x9c\xa8\xe8\xbf\x99\xe9\x87\x8c\xe3\x80\x82</p>"
        b"<p>Short one.</p></body></html>")


def _page(body: bytes = BODY, head: str = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n", **kw) -> Page:
    return Page(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body, "https://example.org/a/b?x=1", "t", **kw)


def _parts(block: bytes) -> tuple[list[bytes], list[bytes]]:
    body = block.partition(b"\r\n\r\n")[2]
    parts = e2e_input._MARKUP.split(body)
    return parts[1::2], parts[0::2]  # markup (scripts, styles, comments, tags), text runs


def test_a_variant_keeps_markup_length_and_words_and_changes_the_text():
    page = _page()
    v = variant(page, 1)
    assert v is not None and v.block != page.block
    assert len(v.block) == len(page.block)  # the HTTP Content-Length stands
    assert v.block.partition(b"\r\n\r\n")[0] == page.block.partition(b"\r\n\r\n")[0]
    markup, texts = _parts(page.block)
    v_markup, v_texts = _parts(v.block)
    assert v_markup == markup  # scripts, styles, comments and tags byte for byte
    for a, b in zip(texts, v_texts):
        if not a.isascii():
            continue  # below
        assert sorted(a.split()) == sorted(b.split())  # the same words
        if len(a.split()) >= 4:
            assert a.split()[0] == b.split()[0] and a.split()[-1] == b.split()[-1]
    assert texts[-1] == v_texts[-1] or len(texts[-1].split()) < 4  # "Short one." is left alone
    # a run without spaces: its characters but the first and last in another order
    zh = next(t for t in texts if not t.isascii())
    zh_v = v_texts[texts.index(zh)]
    assert zh_v != zh and sorted(zh_v.decode()) == sorted(zh.decode())
    assert zh_v.decode()[0] == zh.decode()[0] and zh_v.decode()[-1] == zh.decode()[-1]
    assert v.url == "https://example.org/r1/a/b?x=1"


def test_rounds_differ_and_copies_within_a_round_stay_copies():
    page = _page()
    r1, r1_again, r2 = variant(page, 1), variant(_page(), 1), variant(page, 2)
    assert r1.block == r1_again.block  # an exact duplicate of the pool stays one in the same round
    assert r1.block != r2.block
    # a near duplicate (one more paragraph) shares every unchanged run with its original's variant
    near = _page(BODY.replace(b"<p>Short one.</p>", b"<p>Updated 3 March 2024, 10:00.</p><p>Short one.</p>"))
    same = set(_parts(r1.block)[1]) & set(_parts(variant(near, 1).block)[1])
    assert any(b"river" in t for t in same)


def test_what_cannot_be_varied_safely_is_repeated_as_it_is():
    assert variant(_page(head="HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"), 1) is None
    assert variant(_page(head="HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"), 1) is None
    assert variant(_page(html=False), 1) is None
    assert variant(_page(b"<html><body><p>ok</p></body></html>"), 1) is None  # nothing to reorder


def test_write_warcs_goes_round_the_pool_with_variants(tmp_path, monkeypatch):
    pool = [_page(BODY.replace(b"river", f"river{i}".encode())) for i in range(3)]
    for i, p in enumerate(pool):
        p.group = i
    pool.append(_page(html=False))
    pool[-1].group = 3
    monkeypatch.setattr(e2e_input, "build_pool", lambda **kw: (pool, {}))
    out = e2e_input.write_warcs(tmp_path / "in", docs=10, files=2)
    assert out["pool"] == 4 and out["variants"] == 5 and out["repeats_unchanged"] == 1
    rows = [__import__("json").loads(x) for x in (tmp_path / "in-records.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [0] * 4 + [1] * 4 + [2] * 2
    # a variant is a group of its own; the unchanged repeat stays in its original's
    assert [r["group"] for r in rows] == [0, 1, 2, 3, 4, 5, 6, 3, 8, 9]
    assert sum(bool(re.match(r"https://example.org/r[12]/", r["url"])) for r in rows) == 5
