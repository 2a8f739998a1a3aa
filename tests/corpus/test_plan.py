"""`cidermill corpus plan`: the projection's arithmetic, and the command on a real sample."""

from __future__ import annotations

import pytest

from manifests.main import main
from corpus.plan import PassCost, StageCost, project
from manifests.config import parse_size
from manifests.errors import ConfigError

from ..conftest import write_jsonl


def test_sizes_parse_with_decimal_and_binary_units():
    size = lambda text: parse_size(text, key="--input-bytes", where="the command line")  # noqa: E731
    assert size("100TB") == 100e12
    assert size("424.7TiB") == int(424.7 * 2**40)
    assert size("5e12") == 5e12
    for bad in ("100 furlongs", "infTB", "nan", "-3GB", "1e40"):
        with pytest.raises(ConfigError, match=f"--input-bytes in the command line: '{bad}' is not a size"):
            size(bad)


def _passes() -> list[PassCost]:
    return [PassCost([StageCost("read", 2.0, 1000, 1000), StageCost("text_length_v1", 1.0, 1000, 800)], 5_000),
            PassCost([StageCost("exact_dedup_v1", 3.0, 800, 700, True, shuffle_bytes=4_000)], 4_000),
            PassCost([StageCost("decontaminate_v1", 1.0, 700, 690, True, 1_000, index_bytes=50_000_000,
                                fixed_seconds=36.0)], 3_900)]


def test_projection_scales_with_bytes_and_cores_and_names_the_bound():
    kw = dict(node_gbps=8.0, driver_floor_bytes=100_000_000, task_bytes=1e9)
    small = project(_passes(), 10_000, input_bytes=1e12, nodes=10, cores=10, **kw)
    big = project(_passes(), 10_000, input_bytes=2e12, nodes=10, cores=10, **kw)
    rows = {r["stage"]: r for r in small["stages"]}
    # 1e12 / 1e4 = 1e8 times the sample: read took 2 s -> 2e8 CPU-s on 100 cores, no shuffle
    assert rows["read"]["cpu_h"] == pytest.approx(2e8 / 3600)
    assert rows["read"]["wall_h"] == pytest.approx(2e8 / 100 / 3600)
    # exact dedup: 3e8 CPU-s over 100 cores + 4e11 shuffle bytes written and read at 10 x 1 GB/s
    assert rows["exact_dedup_v1"]["wall_h"] == pytest.approx((3e8 / 100 + 2 * 4e11 / 1e10) / 3600)
    # the decontamination index is built once, not per byte
    assert rows["decontaminate_v1"]["cpu_h"] == pytest.approx((1e8 + 36) / 3600)
    assert {r["stage"]: r for r in big["stages"]}["read"]["cpu_h"] == pytest.approx(2 * rows["read"]["cpu_h"])
    assert small["bound"] == "exact_dedup_v1"
    assert small["passes"][1]["state_bytes"] == pytest.approx(4e11)
    # driver: floor + 1000 tasks of 1 GB + the index (twice: built, then pickled for the broadcast)
    assert small["driver_bytes"] == 100_000_000 + 1000 * 4096 + 2 * 50_000_000
    assert big["driver_bytes"] - small["driver_bytes"] == 1000 * 4096  # rows do not enter it


@pytest.mark.slow  # times global builds on the sample tiled to 20k rows
def test_plan_command_measures_a_sample_and_prints_every_stage(tmp_path, c4_docs, capsys):
    docs = [{"text": d["text"]} for d in c4_docs[:80]]
    sample = write_jsonl(tmp_path / "sample.jsonl", docs + docs[:20])  # 20 exact copies
    cfg = tmp_path / "p.yaml"
    cfg.write_text(f"name: p\ninput: {{format: jsonl, paths: [{sample}]}}\noutput: {{root: {tmp_path / 'root'}}}\n"
                   "stages:\n  - text_length_v1: {min_chars: 1}\n  - exact_dedup_v1: {}\n")
    assert main(["corpus", "plan", str(cfg), "--input-bytes", "100TB", "--nodes", "8", "--cores-per-node", "16"]) == 0
    out = capsys.readouterr().out
    assert "plan for 100.0 TB of input on 8 nodes x 16 cores" in out
    line = next(x for x in out.splitlines() if " exact_dedup_v1 " in x)
    assert " 80.0% " in line  # 20 of 100 rows were copies
    assert "pass 1: intermediate storage" in out and "driver memory:" in out
    assert "bounded by: " in out
    assert main(["corpus", "plan", str(cfg), "--input-bytes", "1TB", "--nodes", "0", "--cores-per-node", "1"]) == 2
