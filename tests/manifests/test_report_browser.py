"""The report page in a real browser: headless Chromium with no network loads it, runs its script without a
console error, fetches nothing, and shows what the manifest and the rejects hold."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from manifests.report import write_report
from tests.system_deps import require_chromium

from .test_report import build, parse

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--virtual-time-budget=3000"]
# a probe appended to a copy of the page: every resource the page fetched, and which reason sections show
PROBE = ("<script>document.body.dataset.resources=JSON.stringify(performance.getEntriesByType('resource')"
         ".map(function(e){return e.name}));document.body.dataset.shown=JSON.stringify(Array.from("
         "document.querySelectorAll('section.reason')).filter(function(s){return s.style.display!=='none'})"
         ".map(function(s){return s.dataset.key}));</script>")


def open_page(chromium: str, page: Path, tmp_path: Path, *extra: str) -> tuple[str, list[str]]:
    """(the DOM after scripts ran, the console lines) of `page` in headless Chromium."""
    run = subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *extra, "--dump-dom",
                          page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    return run.stdout, console


def test_the_console_probe_sees_errors(tmp_path):
    """The check below is not vacuous: a page with a script error is caught by the same means."""
    chromium = require_chromium()
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('boom'); undefined_function();</script></body></html>")
    _, console = open_page(chromium, bad, tmp_path)
    assert any("boom" in line for line in console) and any("undefined_function" in line for line in console)


def test_the_report_renders_in_chromium_without_errors_or_fetches(tmp_path, c4_docs):
    chromium = require_chromium()
    catalog, ref, _ = build(tmp_path, c4_docs)
    page = write_report(catalog, ref, tmp_path / "reports", samples=3)
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom, console = open_page(chromium, probed, tmp_path)
    assert console == []
    resources = json.loads(re.search(r'data-resources="([^"]*)"', dom).group(1).replace("&quot;", '"'))
    shown = json.loads(re.search(r'data-shown="([^"]*)"', dom).group(1).replace("&quot;", '"'))
    assert resources == []
    reasons = catalog.resolve(ref).manifest.stats
    first = max(((s.name, r, n) for s in reasons for r, n in s.dropped.items()), key=lambda x: x[2])
    assert shown == [f"{first[0]}:{first[1]}"]  # the script shows the most frequent reason first
    rendered = tmp_path / "rendered.html"
    rendered.write_text(dom, encoding="utf-8")
    p = parse(rendered)  # what the browser holds after scripts: the manifest's funnel and every reason
    version = catalog.resolve(ref)
    assert p.funnel == {s.name: [s.rows_in, s.rows_out] for s in version.manifest.stats}
    assert set(p.sections) == {f"{s.name}:{r}" for s in version.manifest.stats for r in s.dropped}
    assert all(p.sections.values()) and p.marks
    shot = tmp_path / "report.png"
    subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=1300,1800",
                    f"--screenshot={shot}", page.resolve().as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 20_000  # a real rendering, not a blank page
