"""The report page: one self-contained HTML file (inline CSS, a few lines of inline script, SVG charts drawn
here). Nothing on the page is fetched: no external URL appears in any `src` or `href`, and data values (a
row's source URL included) are text, escaped."""

from __future__ import annotations

import json
from html import escape

from . import svg
from .collect import SHOWN_CHARS, Histogram, ReportData, Sample
from .evidence import highlights

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2329;background:#f6f7f9}
main{max-width:1280px;margin:0 auto;padding:16px 24px 64px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dde1e6}
h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;background:#fff;margin:6px 0}td,th{padding:3px 8px;border:1px solid #e3e6ea;
text-align:left;vertical-align:top}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#6b7480}.chart text{font-size:12px;fill:#1d2329}.chart{background:#fff;border:1px solid #e3e6ea}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:16px}.hists{display:flex;flex-wrap:wrap;gap:12px}
.hist{background:#fff;border:1px solid #e3e6ea;padding:6px 8px}
.sample{background:#fff;border:1px solid #e3e6ea;border-left:4px solid #d9534f;margin:8px 0;padding:6px 10px}
.sample.kept{border-left-color:#3b7dd8}.sample header{font-size:12px;color:#4a525c;word-break:break-all}
.text{white-space:pre-wrap;font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;max-height:320px;
overflow:auto;background:#fbfbfc;border:1px solid #eef0f2;padding:6px;margin-top:4px}
pre.detail{font-size:12px;background:#fff7e6;border:1px solid #f3e0b5;padding:4px 6px;margin:4px 0;
white-space:pre-wrap;word-break:break-all}
mark{background:#ffd54f;padding:0 1px}mark.window{background:#ffe9e8}mark.span{background:#ffb3a7}
.fields{font-size:12px;color:#4a525c}.fields span{margin-right:10px}
select{font-size:14px;padding:2px 4px}code{font-size:12.5px}
"""

SCRIPT = """
(function(){var sel=document.getElementById('reason');if(!sel)return;
function show(){var v=sel.value;document.querySelectorAll('section.reason').forEach(function(s){
s.style.display=(v==='*'||s.dataset.key===v)?'':'none';});}
sel.addEventListener('change',show);show();})();
"""


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


def marked_text(text: str, detail: dict | None) -> tuple[str, str]:
    """(HTML of the text with its evidence marked, a note on what was cut). At most SHOWN_CHARS characters are
    shown, starting a little before the first mark."""
    marks = highlights(text, detail)
    start = 0
    if len(text) > SHOWN_CHARS and marks:
        start = max(0, min(marks[0][0] - SHOWN_CHARS // 4, len(text) - SHOWN_CHARS))
    end = min(len(text), start + SHOWN_CHARS)
    note = f"{len(text):,} characters; showing {start:,}–{end:,}" if (start or end < len(text)) else ""
    out, pos = [], start
    for s, e, label, kind in marks:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        out.append(escape(text[pos:s]))
        out.append(f'<mark class="{kind}" title="{escape(label)}">{escape(text[s:e])}</mark>')
        pos = e
    out.append(escape(text[pos:end]))
    return "".join(out), note


def _sample_html(x: Sample, *, kept: bool) -> str:
    body, note = marked_text(x.text, x.detail)
    fields = "".join(f"<span>{escape(k)}=<b>{escape(str(v))}</b></span>" for k, v in x.fields.items()
                     if v is not None)
    detail = (f'<pre class="detail">{escape(json.dumps(x.detail, ensure_ascii=False, indent=1))}</pre>'
              if x.detail else ("" if kept else '<p class="muted">no drop_detail recorded by this stage</p>'))
    head = f"id <code>{escape(x.id)}</code>" + (f" · {escape(x.source)}" if x.source else "")
    return (f'<article class="sample{" kept" if kept else ""}" data-id="{escape(x.id)}"><header>{head}</header>'
            f'<div class="fields">{fields}</div>{detail}'
            f'<div class="text">{body}</div>{f"<p class=muted>{escape(note)}</p>" if note else ""}</article>')


def _funnel(data: ReportData) -> str:
    rows = []
    for s in data.funnel:
        dropped = s["rows_in"] - s["rows_out"]
        share = f"{dropped / s['rows_in']:.1%}" if s["rows_in"] else "-"
        rate = f"{s['rows_in'] / s['seconds']:,.0f}" if s["seconds"] > 0 else "-"
        reasons = ", ".join(f"{escape(r)}={n:,}" for r, n in sorted(s["dropped"].items(), key=lambda x: -x[1]))
        rows.append(f'<tr data-stage="{escape(s["name"])}"><td>{escape(s["name"])}</td>'
                    f'<td class="n rows-in">{s["rows_in"]:,}</td><td class="n rows-out">{s["rows_out"]:,}</td>'
                    f'<td class="n">{dropped:,}</td><td class="n">{share}</td><td class="n">{s["seconds"]:.2f}</td>'
                    f'<td class="n">{rate}</td><td>{reasons}</td></tr>')
    return (svg.funnel(data.funnel) + '<table id="funnel"><tr><th>stage</th><th class=n>rows in</th>'
            '<th class=n>rows out</th><th class=n>dropped</th><th class=n>share</th><th class=n>seconds</th>'
            '<th class=n>rows/s</th><th>drop reasons</th></tr>' + "".join(rows) + "</table>")


def _reasons(data: ReportData) -> str:
    if not data.reasons:
        return "<p>No row was dropped.</p>"
    chart = svg.bars([(f"{s}: {r}", n) for s, r, n in data.reasons[:40]])
    rows = "".join(f'<tr><td>{escape(s)}</td><td>{escape(r)}</td><td class="n">{n:,}</td></tr>'
                   for s, r, n in data.reasons)
    return chart + f"<table><tr><th>stage</th><th>reason</th><th class=n>rows</th></tr>{rows}</table>"


def _samples(data: ReportData) -> str:
    keys = [(s, r) for s, r, _ in data.reasons if (s, r) in data.dropped_samples]
    keys += [k for k in sorted(data.dropped_samples) if k not in keys]
    options = "".join(f'<option value="{escape(s)}:{escape(r)}">{escape(s)}: {escape(r)} '
                      f'({len(data.dropped_samples[(s, r)])})</option>' for s, r in keys)
    sections = []
    for s, r in keys:
        items = "".join(_sample_html(x, kept=False) for x in data.dropped_samples[(s, r)])
        sections.append(f'<section class="reason" data-key="{escape(s)}:{escape(r)}"><h3>dropped by '
                        f'{escape(s)}: <code>{escape(r)}</code></h3>{items}</section>')
    kept = "".join(_sample_html(x, kept=True) for x in data.kept_samples) or "<p>No rows kept.</p>"
    picker = (f'<p>Drop reason: <select id="reason">{options}<option value="*">all reasons</option></select></p>'
              if keys else ("<p>No rejects were written for this version (output.rejects: false).</p>"
                            if data.rejects is None else "<p>No dropped rows.</p>"))
    return (f'{picker}<div class="grid"><div id="dropped">{"".join(sections)}</div>'
            f'<div id="kept"><h3>kept rows</h3>{kept}</div></div>')


def _hist(h: Histogram) -> str:
    if h.kind == "category":
        chart = svg.bars([(v, c) for v, c in h.values], width=360, color=svg.KEPT, label_w=120)
    else:
        chart = svg.histogram(h.bins, compare=h.compare)
    legend = " (blue kept, red dropped; each scaled to its own total)" if h.compare else ""
    nulls = f", {h.nulls:,} null" if h.nulls else ""
    return (f'<div class="hist" data-column="{escape(h.column)}"><b>{escape(h.column)}</b>'
            f'<div class="muted">{h.n:,} rows sampled{nulls}{legend}</div>{chart}</div>')


def _lineage(data: ReportData) -> str:
    m = data.version.manifest
    parts = []
    if data.parents:
        items = "".join(
            f'<li>{escape(p["ref"])} (not in this catalog)</li>' if p.get("missing") else
            f'<li><a href="{escape(report_name(p["name"], p["version_id"]))}">{escape(p["ref"])}</a></li>'
            for p in data.parents)
        parts.append(f"<h3>parents</h3><ul>{items}</ul>")
    p = m.pipeline
    if p is not None:
        parts.append(f"<h3>pipeline <code>{escape(p.name)}</code></h3><p>code revision <code>"
                     f"{escape(p.code_revision)}</code></p>")
        inp = p.config.get("input") if isinstance(p.config, dict) else None
        if inp:
            parts.append(f'<p>input</p><pre class="detail">{escape(json.dumps(inp, indent=1))}</pre>')
        stages = "".join(f'<details><summary><code>{escape(s.get("name", "?"))}</code></summary><pre class="detail">'
                         f'{escape(json.dumps({k: v for k, v in s.items() if k != "name"}, indent=1))}</pre>'
                         f'</details>' for s in p.stages)
        parts.append(f"<h3>stages, configs and resources</h3>{stages}")
    counters = [(s["name"], k, v) for s in data.funnel for k, v in sorted(s["counters"].items())]
    if counters:
        rows = "".join(f"<tr><td>{escape(s)}</td><td>{escape(k)}</td><td class=n>{v:,}</td></tr>"
                       for s, k, v in counters)
        parts.append(f"<h3>stage counters</h3><table>{rows}</table>")
    if m.errors:
        rows = "".join(f"<tr><td>{escape(str(e.get('input', '')))}</td><td>{escape(str(e.get('reason', '')))}</td>"
                       f"</tr>" for e in m.errors[:50])
        parts.append(f"<h3>input errors ({len(m.errors)})</h3><table>{rows}</table>")
    return "".join(parts) or "<p>No lineage recorded.</p>"


def _diff(d: dict) -> str:
    removed = "".join(f"<tr><td>{escape(k)}</td><td class=n>{v:,}</td></tr>"
                      for k, v in sorted(d["removed_by_reason"].items(), key=lambda x: -x[1]))
    deltas = "".join(
        f"<tr><td>{escape(s['stage'])}</td><td class=n>{s['rows_out']:+,}</td><td>"
        + ", ".join(f"{escape(r)} {v:+,}" for r, v in s["dropped"].items() if v) + "</td></tr>"
        for s in d["stats_delta"])
    return (f'<p>against <code>{escape(d["base"])}</code>: {d["rows_base"]:,} → {d["rows"]:,} rows; '
            f'<b id="diff-added">{d["added"]:,}</b> added, <b id="diff-removed">{d["removed"]:,}</b> removed '
            f'(by id).</p>' + (f"<h3>removed rows, by the reason this run gave</h3><table>{removed}</table>"
                               if removed else "")
            + f"<h3>per-stage deltas</h3><table><tr><th>stage</th><th class=n>rows out</th><th>drops</th></tr>"
            f"{deltas}</table>")


def report_name(name: str, version_id: str) -> str:
    """The file name of a version's page; parents' pages are linked by the same rule, in the same folder."""
    return f"{name}@{version_id[:12]}.html"


def render(data: ReportData, *, samples: int, seed: int) -> str:
    v, m = data.version, data.version.manifest
    rejects = (f"<tr><td>rejects</td><td><code>{escape(data.rejects.name)}@{escape(data.rejects.version_id[:12])}"
               f"</code>, {data.rejects.manifest.rows:,} rows</td></tr>" if data.rejects is not None else "")
    meta = (f"<table><tr><td>version</td><td><code>{escape(v.version_id)}</code></td></tr>"
            f"<tr><td>created</td><td>{escape(m.created_at)}</td></tr>"
            f"<tr><td>rows</td><td id=rows>{m.rows:,}</td></tr><tr><td>bytes</td><td>{_fmt_bytes(m.bytes)}</td></tr>"
            f"<tr><td>shards</td><td>{len(m.shards):,}</td></tr>{rejects}"
            f"<tr><td>columns</td><td>{escape(', '.join(m.schema.names))}</td></tr>"
            f"<tr><td>this page</td><td>{samples} samples per reason, seed {seed}; "
            f"{data.sample_rows_read:,} rows read</td></tr></table>")
    hists = "".join(_hist(h) for h in data.histograms) or "<p>No numeric columns.</p>"
    diff = f"<h2>diff</h2>{_diff(data.diff)}" if data.diff else ""
    title = f"{v.name}@{v.version_id[:12]}"
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head>'
            f'<body><main><h1>{escape(title)}</h1>{meta}'
            f'<h2>funnel</h2>{_funnel(data)}<h2>drops by reason</h2>{_reasons(data)}'
            f'<h2>samples: dropped (with the evidence that decided) and kept</h2>{_samples(data)}'
            f'<h2>columns</h2><div class="hists">{hists}</div>{diff}<h2>lineage</h2>{_lineage(data)}'
            f'</main><script>{SCRIPT}</script></body></html>')
