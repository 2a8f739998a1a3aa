"""CredData files labelled line by line (../shared/data/creddata_dev, read its SOURCE.txt) and the
line-level score CredData's own benchmark uses.

A scanner reports spans (character offsets into a file's text); each span marks the lines it touches.
A labelled line (a CredData meta row: file, line_start..line_end, T/F/X) is *hit* when a reported span
touches one of its lines. Recall = T rows hit / T rows; the false-hit rate = F and X rows hit / F and X
rows (CredData counts X, "other/undecided", on the false side). Reports on lines nobody labelled are
counted apart (`unlabelled_lines`): CredData calls them lost, neither true nor false.

`T rows hit with the value covered` is stricter: the reported span must cover the labelled value (what
redaction needs); it is given beside the line-level figure.

UUID: CredData labels random UUIDs as credentials (337 of 2,570 T rows in the development set); results
are given with them and without rows whose only category is UUID.
"""

from __future__ import annotations

import bisect
import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

CREDDATA = Path("creddata_dev") / "creddata_dev.jsonl.gz"


@dataclass(frozen=True)
class Row:
    file: int  # index into the file list
    line_start: int  # 1-based, inclusive
    line_end: int
    truth: str  # T, F or X
    label: str  # CredData category, colon-joined
    value_start: int  # character offsets in the start / end line; -1 = none / to the end
    value_end: int

    @property
    def uuid_only(self) -> bool:
        return self.label == "UUID"


@dataclass
class CredFile:
    id: str
    repo: str
    ext: str
    text: str


def load(shared: Path) -> tuple[list[CredFile], list[Row]]:
    path = shared / CREDDATA
    if not path.is_file():
        raise FileNotFoundError(f"{path}: CredData development set not found (see ../shared/data/README.md)")
    files, rows = [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {n}: not JSON ({e})") from None
            i = len(files)
            files.append(CredFile(rec["id"], rec["repo_id"], rec["ext"], rec["text"]))
            for s in rec["spans"]:
                rows.append(Row(i, s["line_start"], s["line_end"], s["ground_truth"], s["label"],
                                s["value_start"], s["value_end"]))
    return files, rows


def line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos >= 0:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def hit_lines(text: str, spans) -> tuple[set[int], list[tuple[int, int]]]:
    """1-based line numbers touched by spans (start, end); and the spans as (line, col) pairs."""
    starts = line_starts(text)
    lines: set[int] = set()
    for start, end in spans:
        first = bisect.bisect_right(starts, start)
        last = bisect.bisect_right(starts, max(start, end - 1))
        lines.update(range(first, last + 1))
    return lines, starts


def _value_covered(row: Row, text: str, starts: list[int], spans) -> bool:
    if row.value_start < 0:
        return False
    begin = starts[row.line_start - 1] + row.value_start
    end_line = starts[row.line_end - 1]
    if row.value_end < 0:
        nxt = text.find("\n", end_line)
        end = len(text) if nxt < 0 else nxt
    else:
        end = end_line + row.value_end
    return any(s <= begin and e >= end - 1 for s, e in spans) or \
        sum(max(0, min(e, end) - max(s, begin)) for s, e in spans) >= 0.8 * (end - begin)


def score(files: list[CredFile], rows: list[Row], detections: list[list[tuple[int, int]]],
          file_ids: set[int] | None = None, with_uuid: bool = True) -> dict:
    """Line-level counts over the rows of `file_ids` (all files when None)."""
    per_file = {}
    for i, f in enumerate(files):
        if file_ids is None or i in file_ids:
            per_file[i] = hit_lines(f.text, detections[i])
    out = {"T": 0, "T_hit": 0, "T_value": 0, "FX": 0, "FX_hit": 0, "unlabelled_lines": 0}
    labelled: dict[int, set[int]] = {}
    for r in rows:
        if r.file not in per_file or (not with_uuid and r.uuid_only):
            continue
        lines, starts = per_file[r.file]
        labelled.setdefault(r.file, set()).update(range(r.line_start, r.line_end + 1))
        hit = any(n in lines for n in range(r.line_start, r.line_end + 1))
        if r.truth == "T":
            out["T"] += 1
            out["T_hit"] += hit
            out["T_value"] += hit and _value_covered(r, files[r.file].text, starts, detections[r.file])
        else:
            out["FX"] += 1
            out["FX_hit"] += hit
    for i, (lines, _) in per_file.items():
        out["unlabelled_lines"] += len(lines - labelled.get(i, set()))
    out["recall"] = out["T_hit"] / out["T"] if out["T"] else None
    out["value_recall"] = out["T_value"] / out["T"] if out["T"] else None
    out["false_hit_rate"] = out["FX_hit"] / out["FX"] if out["FX"] else None
    hits = out["T_hit"] + out["FX_hit"]
    out["precision"] = out["T_hit"] / hits if hits else None
    return out


def repo_folds(files: list[CredFile], k: int = 5) -> list[list[str]]:
    """Repositories in k groups, by a stable hash of the repo id (no repository in two groups)."""
    repos = sorted({f.repo for f in files}, key=lambda r: zlib.crc32(r.encode()))
    return [repos[i::k] for i in range(k)]
