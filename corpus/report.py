"""The end-of-run table: what each stage read, kept and dropped, by reason, and how fast."""

from __future__ import annotations

from manifests.manifest import StageStats


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    def line(cells):
        return "  ".join(str(c).rjust(w) if i and str(c).replace(",", "").replace(".", "").isdigit()
                         else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *[line(r) for r in rows]])


def stats_table(stats: list[StageStats]) -> str:
    rows = []
    for s in stats:
        rate = f"{s.rows_in / s.seconds:,.0f}" if s.seconds > 0 else "-"
        reasons = ", ".join(f"{r}={n:,}" for r, n in sorted(s.dropped.items(), key=lambda kv: -kv[1])) or "-"
        rows.append([s.name, f"{s.rows_in:,}", f"{s.rows_out:,}", f"{s.n_dropped:,}", rate, reasons])
        for key, n in sorted(s.counters.items()):
            rows.append(["", "", "", "", "", f"  {key}: {n:,}"])
    return format_table(["stage", "rows in", "kept", "dropped", "rows/s", "drop reasons / counters"], rows)
