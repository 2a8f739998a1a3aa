"""A labelled set of math / non-math web pages, built from real documents in ../shared/data.

How it is built (deterministic, nothing downloaded):
- math (label 1):
  * MATH test problems with their solutions (hendrycks MATH, MIT; first `n_math` by index), each
    rendered into one of four real-world page shapes in turn: a StackExchange-style Q&A page
    (schema.org QAPage microdata, `$...$` source text, the MathJax config script such sites load),
    a blog with MathJax v2 `<script type="math/tex">` formulas, a KaTeX-rendered page (MathML with
    a TeX annotation plus KaTeX's HTML copy), and a bare page with `$...$` text and no math
    scripts at all;
  * GSM8K test word problems with solutions as bare pages (math without LaTeX: the hard case);
  * the two real math pages among the Mozilla Readability test pages, labelled by hand
    (`mathjax`: MathJax 3 MathML demo; `wikipedia-3`: "Hermitian matrix").
- not math (label 0):
  * C4 documents 200-299 (the classifier trains on 0-199) as bare pages;
  * the other 128 Readability test pages (news, blogs, docs; real HTML; `quanta-1`, a popular
    science story that loads MathJax, and `toc-missing`, SQL with `$$`, are labelled 0 by hand);
  * the HTML responses of the bundled Common Crawl and wget WARCs.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

from evals.shared import shared_data

READABILITY_MATH = {"mathjax", "wikipedia-3"}
STYLES = ("qa", "mathjax2", "katex", "bare")
_INLINE = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\[(.+?)\\\]|\\\((.+?)\\\)", re.DOTALL)


def _paragraphs(text: str) -> str:
    return "\n".join(f"<p>{p}</p>" for p in text.split("\n") if p.strip())


def _math_html(text: str, style: str) -> str:
    """Escape text and render its `$...$` formulas the way `style` pages carry them."""
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        tex = next(g for g in m.groups() if g is not None)
        display = m.group(1) is not None or m.group(3) is not None
        if style == "mathjax2":
            mode = "; mode=display" if display else ""
            out.append(f'<span class="MathJax_Preview">{html.escape(tex)}</span>'
                       f'<script type="math/tex{mode}">{html.escape(tex)}</script>')
        elif style == "katex":
            out.append('<span class="katex"><span class="katex-mathml"><math xmlns="http://www.w3.org/1998/Math/'
                       f'MathML"><semantics><mrow></mrow><annotation encoding="application/x-tex">'
                       f'{html.escape(tex)}</annotation></semantics></math></span>'
                       f'<span class="katex-html" aria-hidden="true">{html.escape(tex)}</span></span>')
        else:  # qa and bare pages ship the TeX source; a client-side renderer (if any) draws it
            out.append(html.escape(m.group(0)))
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def render_qa_page(title: str, question: str, answers: list[tuple[str, int, bool]], *, qid: int) -> str:
    """A StackExchange-style QAPage: question + answers (text, votes, accepted) with microdata."""
    parts = []
    for i, (text, votes, accepted) in enumerate(answers):
        prop = "acceptedAnswer" if accepted else "suggestedAnswer"
        cls = "answer js-answer accepted-answer" if accepted else "answer js-answer"
        parts.append(f'<div id="answer-{qid * 10 + i}" class="{cls}" data-answerid="{qid * 10 + i}" '
                     f'data-score="{votes}" itemprop="{prop}" itemscope itemtype="https://schema.org/Answer">'
                     f'<div class="js-vote-count" itemprop="upvoteCount" data-value="{votes}">{votes}</div>'
                     f'<div class="s-prose js-post-body" itemprop="text">{_paragraphs(_math_html(text, "qa"))}'
                     f'</div></div>')
    return (f'<!DOCTYPE html><html><head><title>{html.escape(title)}</title>'
            '<script type="text/x-mathjax-config">MathJax.Hub.Config({"HTML-CSS": {preferredFont: "TeX"}, '
            'tex2jax: {inlineMath: [["$", "$"]]}});</script></head><body>'
            f'<div id="mainbar" itemscope itemtype="https://schema.org/QAPage"><div id="question-header">'
            f'<h1 itemprop="name">{html.escape(title)}</h1></div>'
            f'<div id="question" class="question" data-questionid="{qid}" itemprop="mainEntity" itemscope '
            f'itemtype="https://schema.org/Question"><div class="s-prose js-post-body" itemprop="text">'
            f'{_paragraphs(_math_html(question, "qa"))}</div><div id="answers">{"".join(parts)}</div>'
            f'</div></div></body></html>')


def render_page(title: str, text: str, style: str) -> str:
    head = f"<title>{html.escape(title)}</title>"
    if style == "mathjax2":
        head += '<script src="https://cdn.example.org/mathjax/2.7.7/MathJax.js?config=TeX-AMS_HTML"></script>'
    elif style == "katex":
        head += '<link rel="stylesheet" href="https://cdn.example.org/katex/0.16.9/katex.min.css">'
    return (f"<!DOCTYPE html><html><head>{head}</head><body><article><h1>{html.escape(title)}</h1>"
            f"{_paragraphs(_math_html(text, style))}</article></body></html>")


def math_rows(n_math: int = 200, n_gsm8k: int = 60) -> list[dict]:
    bench = shared_data("benchmarks")
    rows = []
    with open(bench / "math_eval_harness" / "math" / "test.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= n_math:
                break
            rec = json.loads(line)
            style = STYLES[i % len(STYLES)]
            title = f"{rec['type']} question {i}"
            if style == "qa":
                page = render_qa_page(title, rec["problem"], [(rec["solution"], 3 + i % 7, True)], qid=i)
            else:
                page = render_page(title, rec["problem"] + "\n" + rec["solution"], style)
            rows.append({"id": f"math-{i}", "html": page, "label": 1, "origin": f"MATH/{style}",
                         "url": f"https://math.stackexchange.com/questions/{100000 + i}" if style == "qa"
                         else f"https://blog.example.org/math/{i}"})
    with open(bench / "gsm8k" / "test.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= n_gsm8k:
                break
            rec = json.loads(line)
            answer = re.sub(r"<<[^>]*>>", "", rec["answer"])
            rows.append({"id": f"gsm8k-{i}", "html": render_page(f"Word problem {i}", rec["question"] + "\n" + answer,
                                                                 "bare"),
                         "label": 1, "origin": "GSM8K/bare", "url": f"https://homework.example.org/q/{i}"})
    return rows


def web_rows(*, c4_range: tuple[int, int] = (200, 300), warc: bool = True) -> list[dict]:
    rows = []
    c4 = shared_data("web_text", "llamafactory_demo", "c4_demo.jsonl").read_text(encoding="utf-8").splitlines()
    for i in range(*c4_range):
        text = json.loads(c4[i])["text"]
        rows.append({"id": f"c4-{i}", "html": render_page(text[:60], text, "bare"), "label": 0, "origin": "C4",
                     "url": f"https://c4.example.org/doc/{i}"})
    pages = shared_data("web_extraction", "mozilla_readability", "test-pages")
    for folder in sorted(p for p in pages.iterdir() if (p / "source.html").exists()):
        rows.append({"id": f"readability-{folder.name}", "html": (folder / "source.html").read_bytes().decode(
            "utf-8", "replace"), "label": int(folder.name in READABILITY_MATH),
            "origin": "readability/math" if folder.name in READABILITY_MATH else "readability",
            "url": f"https://readability.example.org/{folder.name}"})
    if warc:
        rows += _warc_rows()
    return rows


def _warc_rows() -> list[dict]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    rows = []
    repo = Path(__file__).resolve().parents[2]
    for path in sorted(repo.glob("data/samples/*_warc/*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, record_types=WarcRecordType.response):
                ctype = rec.http_headers.get("Content-Type", "") if rec.http_headers else ""
                if "html" not in ctype:
                    continue
                body = rec.reader.read()
                rows.append({"id": f"warc-{path.stem}-{len(rows)}", "html": body.decode("utf-8", "replace"),
                             "label": 0, "origin": "warc", "url": rec.headers.get("WARC-Target-URI", "")})
    return rows


def labelled_set() -> list[dict]:
    return math_rows() + web_rows()


# Real pages only (no rendered benchmark text): the 130 Readability test pages, the 990 pages of
# trafilatura's extraction benchmark, the HTML responses of the bundled WARCs, and 611 documentation
# pages from 31 Debian packages (evals/data/math_pages: labels.tsv has each page's label and reason).
# Web-page math labels by reading: the Readability math pages above and trafilatura's
# `en.wikipedia.org.tsne.html` (t-SNE article, 34 formulas). Reading covered the Readability pages and
# the 40 trafilatura pages with the most math signals (visible formulas, math symbols, LaTeX commands);
# the other trafilatura pages (news, shops, recipes, law, forums in de/en/fr/zh/pl) are labelled 0 from
# their site and opening text.
TRAFILATURA_MATH = {"en.wikipedia.org.tsne.html"}
SPLITS = ("train", "dev", "heldout")


def web_split(url: str) -> str:
    """trafilatura's pages split by site (host hash) into thirds: `train` (the math classifier may train
    on them), `dev` (thresholds are tuned on it) and `heldout` (reported, never tuned on)."""
    host = (urlsplit(url).hostname or url).lower().removeprefix("www.")
    return SPLITS[hashlib.blake2b(host.encode(), digest_size=4).digest()[0] % 3]


def trafilatura_rows() -> list[dict]:
    from corpus.math.html_math import decode_markup

    rows = []
    base = shared_data("web_extraction", "trafilatura_eval")
    gold = json.loads((base / "evaldata.json").read_text(encoding="utf-8"))
    for url, rec in sorted(gold.items()):
        path = base / "files" / rec["file"]
        if not path.exists():
            continue
        label = int(rec["file"] in TRAFILATURA_MATH)
        rows.append({"id": f"trafilatura-{rec['file']}", "html": decode_markup(path.read_bytes()), "label": label,
                     "origin": "trafilatura/math" if label else "trafilatura",
                     "url": url if url.startswith("http") else "", "split": web_split(url or rec["file"])})
    return rows


def debian_rows(*, include_ambiguous: bool = False) -> list[dict]:
    """The shipped Debian documentation pages; split by package (evals/data/math_pages/labels.tsv)."""
    from evals.data.build_math_pages import load_pages

    rows = []
    for page in load_pages():
        if page["label"] == "ambiguous" and not include_ambiguous:
            continue
        label = page["label"] if page["label"] == "ambiguous" else int(page["label"])
        rows.append({"id": f"debian-{page['id']}", "html": page["html"], "label": label, "url": "",
                     "origin": f"debian/{page['package']}", "split": page["split"]})
    return rows


def real_rows(*, splits: tuple[str, ...] = ("dev", "heldout")) -> list[dict]:
    """Real pages of the given splits. Readability pages and WARC responses are `dev`; trafilatura's
    pages by site (web_split); Debian pages by package. `train` pages are the ones the shipped math
    classifier was trained on (evals/data/build_math_train_pages.py): never evaluate on them."""
    rows = [dict(r, split="dev") for r in web_rows(c4_range=(0, 0))]
    rows += trafilatura_rows() + debian_rows()
    return [r for r in rows if r["split"] in splits]


def demo_rows() -> list[dict]:
    """The bundled demo sample (data/samples/math/pages.jsonl.gz): redistributable pages only.

    MATH test problems 4000-4023 (MIT) in the four page shapes, GSM8K test 1000-1005 (MIT) and
    bundled C4 documents 0-19 (ODC-By, from data/samples/c4); no third-party web pages.
    """
    bench = shared_data("benchmarks")
    rows = []
    with open(bench / "math_eval_harness" / "math" / "test.jsonl", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f][4000:4024]
    for i, rec in enumerate(recs):
        style = STYLES[i % len(STYLES)]
        title = f"{rec['type']} question {4000 + i}"
        if style == "qa":
            page = render_qa_page(title, rec["problem"], [(rec["solution"], 5 + i, True),
                                                           ("Check the problem statement again.", -1, False)],
                                  qid=4000 + i)
            url = f"https://math.stackexchange.com/questions/{104000 + i}"
        else:
            page, url = render_page(title, rec["problem"] + "\n" + rec["solution"], style), \
                f"https://mathblog.example.org/{4000 + i}"
        rows.append({"html": page, "url": url, "origin": f"MATH/{style}", "label": 1})
    with open(bench / "gsm8k" / "test.jsonl", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f][1000:1006]
    for i, rec in enumerate(recs):
        answer = re.sub(r"<<[^>]*>>", "", rec["answer"])
        rows.append({"html": render_page(f"Word problem {1000 + i}", rec["question"] + "\n" + answer, "bare"),
                     "url": f"https://homework.example.org/q/{1000 + i}", "origin": "GSM8K/bare", "label": 1})
    repo = Path(__file__).resolve().parents[2]
    with gzip.open(repo / "data" / "samples" / "c4" / "c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f][:20]
    for i, doc in enumerate(docs):
        rows.append({"html": render_page(doc["text"][:60], doc["text"], "bare"), "url": doc.get("url") or
                     f"https://c4.example.org/doc/{i}", "origin": "C4", "label": 0})
    return rows


def write_jsonl_gz(rows: list[dict], path: str | Path) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    import sys

    out = sys.argv[1] if len(sys.argv) > 1 else "data/samples/math/pages.jsonl.gz"
    rows = demo_rows()
    write_jsonl_gz(rows, out)
    print(f"wrote {len(rows)} pages ({sum(r['label'] for r in rows)} math) to {out}")

