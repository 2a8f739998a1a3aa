"""An evaluation's result: named tables of rows, optional pass/fail against stated targets."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


@dataclass
class EvalReport:
    name: str
    tables: dict[str, list[dict]] = field(default_factory=dict)  # title -> rows (same keys per row)
    notes: list[str] = field(default_factory=list)
    targets: dict[str, bool] = field(default_factory=dict)  # "recall >= 0.95" -> met?

    @property
    def passed(self) -> bool | None:
        return all(self.targets.values()) if self.targets else None

    def to_text(self) -> str:
        from corpus.report import format_table

        out = [f"# eval {self.name}"]
        for title, rows in self.tables.items():
            if not rows:
                continue
            headers = list(rows[0])
            cells = [[_fmt(r.get(h)) for h in headers] for r in rows]
            out += ["", f"## {title}", format_table(headers, cells)]
        for target, ok in self.targets.items():
            out.append(f"{'PASS' if ok else 'FAIL'}  {target}")
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out)

    def to_markdown(self) -> str:
        out = [f"# eval {self.name}"]
        for title, rows in self.tables.items():
            if not rows:
                continue
            headers = list(rows[0])
            out += ["", f"## {title}", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            out += ["| " + " | ".join(_fmt(r.get(h)) for h in headers) + " |" for r in rows]
        if self.targets:
            out += [""] + [f"- {'PASS' if ok else 'FAIL'}: {t}" for t, ok in self.targets.items()]
        out += [f"- note: {n}" for n in self.notes]
        return "\n".join(out) + "\n"


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return "" if v is None else str(v)


def save_report(report: EvalReport, folder: str) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    base = os.path.join(folder, report.name)
    with open(base + ".json", "w") as f:
        json.dump({"name": report.name, "tables": report.tables, "notes": report.notes,
                   "targets": report.targets}, f, indent=1, default=str)
    with open(base + ".md", "w") as f:
        f.write(report.to_markdown())
    return [base + ".json", base + ".md"]
