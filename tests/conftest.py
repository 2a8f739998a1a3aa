"""Shared fixtures: paths to bundled and shared real data, small real documents.

Tests that read the project's shared data (../shared/data, or CIDERMILL_SHARED_DATA) request the
`shared_data` fixture (directly or through another fixture) or carry `@pytest.mark.shared_data`;
either way they are marked `shared_data`, skip when the folder is absent (a user's machine), and are
counted in the summary. When the folder is present, such a test that still skips fails the run:
a silently skipped real-data test is a hole in CI.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "samples"
FIXTURES = REPO / "tests" / "fixtures"
SHARED_DATA = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def c4_docs() -> list[dict]:
    """The 300 real C4 documents bundled with the demo."""
    with gzip.open(SAMPLES / "c4" / "c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def have_shared_data() -> bool:
    return SHARED_DATA.is_dir()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not have_shared_data():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (set CIDERMILL_SHARED_DATA)")
    return SHARED_DATA


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.shared_data)


def pytest_runtest_setup(item):
    if item.get_closest_marker("shared_data") and not have_shared_data():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (set CIDERMILL_SHARED_DATA)")


_SHARED_OUTCOMES: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": []}


def pytest_runtest_logreport(report):
    if "shared_data" not in report.keywords or hasattr(report, "wasxfail"):
        return
    if report.when == "setup" and report.skipped or report.when == "call" and report.skipped:
        _SHARED_OUTCOMES["skipped"].append(f"{report.nodeid}: {report.longrepr[-1] if report.longrepr else ''}")
    elif report.when == "call":
        _SHARED_OUTCOMES["passed" if report.passed else "failed"].append(report.nodeid)
    elif report.failed:
        _SHARED_OUTCOMES["failed"].append(report.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    o = _SHARED_OUTCOMES
    if not any(o.values()):
        return
    where = f"present at {SHARED_DATA}" if have_shared_data() else f"absent ({SHARED_DATA})"
    terminalreporter.write_line(f"shared-data tests: {len(o['passed'])} passed, {len(o['failed'])} failed, "
                                f"{len(o['skipped'])} skipped; shared data {where}")
    if have_shared_data() and o["skipped"]:
        terminalreporter.write_line("ERROR: shared data is present but these shared-data tests skipped:", red=True)
        for line in o["skipped"]:
            terminalreporter.write_line(f"  {line}", red=True)


def pytest_sessionfinish(session, exitstatus):
    if have_shared_data() and _SHARED_OUTCOMES["skipped"] and session.exitstatus == 0:
        session.exitstatus = 1


def write_jsonl(path: Path, records: list[dict], *, compress: str | None = None) -> Path:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    if compress == "gz":
        data = gzip.compress(data)
    elif compress == "zst":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path
