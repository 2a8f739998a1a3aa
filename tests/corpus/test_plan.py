"""`cidermill corpus plan`: the projection's arithmetic, and the command on a real sample."""

from __future__ import annotations

import pytest

from manifests.main import main
from corpus.plan import CHECKED_MISS, PassCost, Sample, StageCost, bootstrap, project, with_interval
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


def _sample() -> Sample:
    passes = [PassCost([StageCost("read", 2.0, 1000, 1000),
                        StageCost("text_length_v1", 1.0, 1000, 800, warmup_seconds=0.5)], 5_000, 1_000, 1.0),
              PassCost([StageCost("exact_dedup_v1", 3.0, 800, 700, True, shuffle_bytes=4_000)], 4_000, 500, 0.5),
              PassCost([StageCost("decontaminate_v1", 1.0, 700, 690, True, 1_000, index_bytes=50_000_000,
                                  fixed_seconds=36.0)], 3_900, 10, 0.5)]
    return Sample(passes, sample_bytes=10_000, driver_seconds=4.0, startup_seconds=2.0,
                  driver_floor_bytes=100_000_000, driver_build_peak_bytes=300_000_000, id_bytes=100.0)


def test_projection_scales_with_bytes_and_cores_and_names_the_bound():
    kw = dict(node_gbps=8.0, task_bytes=1e9)
    small = project(_sample(), input_bytes=1e12, nodes=10, cores=10, **kw)
    big = project(_sample(), input_bytes=2e12, nodes=10, cores=10, **kw)
    rows = {r["stage"]: r for r in small["stages"]}
    # 1e12 / 1e4 = 1e8 times the sample, 1000 tasks of 1 GB on 100 cores: 10 waves of one task each
    assert rows["read"]["cpu_h"] == pytest.approx(2e8 / 3600)
    assert rows["read"]["wall_h"] == pytest.approx(10 * 2e8 / 1000 / 3600)
    # exact dedup: 3e8 CPU-s in 10 waves of 3e5 s + 4e11 shuffle bytes written and read at 10 x 1 GB/s
    assert rows["exact_dedup_v1"]["wall_h"] == pytest.approx((10 * 3e8 / 1000 + 2 * 4e11 / 1e10) / 3600)
    # the decontamination index is built once, not per byte
    assert rows["decontaminate_v1"]["cpu_h"] == pytest.approx((1e8 + 36) / 3600)
    assert {r["stage"]: r for r in big["stages"]}["read"]["cpu_h"] == pytest.approx(2 * rows["read"]["cpu_h"])
    assert small["bound"] == "exact_dedup_v1"
    # CPU: stages 7e8 + 36, writing 2e8, 100 workers' first calls in pass 0 (0.5 s), driver + forkserver 6 s
    assert small["cpu_h"] == pytest.approx((7e8 + 36 + 2e8 + 100 * 0.5 + 6) / 3600)
    # of which fixed, whatever the input size: the index 36 s, the first calls 100 x 0.5 s, driver + forkserver 6 s
    assert small["fixed_cpu_h"] == pytest.approx((36 + 100 * 0.5 + 6) / 3600) == big["fixed_cpu_h"]
    # staging until publish: every pass's output, state and rejects
    assert small["storage_bytes"] == pytest.approx((5_000 + 1_000 + 4_000 + 500 + 3_900 + 10) * 1e8
                                                   + 4_000 * 1e8 + 1_000 * 1e8 + 50_000_000)
    # driver: the larger of the loaded pipeline and the build peak, 1000 tasks, 100 B per output row
    assert small["driver_bytes"] == pytest.approx(300_000_000 + 1000 * 4096 + 100 * 690 * 1e8)
    assert big["driver_bytes"] - small["driver_bytes"] == pytest.approx(1000 * 4096 + 100 * 690 * 1e8)


def test_few_tasks_on_more_cores_run_in_one_wave_with_their_fixed_costs():
    plan = project(_sample(), input_bytes=20_000, nodes=1, cores=4, node_gbps=1e6, task_bytes=10_000)
    rows = {r["stage"]: r for r in plan["stages"]}
    assert plan["tasks"] == 2 and plan["workers"] == 2
    assert rows["read"]["wall_h"] == pytest.approx(2 * 2.0 / 2 / 3600)  # half the rows on each of 2 cores
    # pass 0's wall: first calls 0.5 s, the stages (3 s x 2 over 2 tasks), writing (1 s x 2 over 2)
    assert plan["passes"][0]["wall_h"] == pytest.approx((0.5 + 3.0 + 1.0) / 3600)


def test_bootstrap_interval_is_zero_for_identical_batches_and_covers_the_estimate_otherwise():
    s = _sample()
    s.batches = [(10, 1.0, 100)] * 20
    assert set(bootstrap(s)) == {(1.0, 1.0)}
    s.batches = [(10, 1.0 + (i % 5), 100 * (1 + i % 3)) for i in range(40)]
    plan = with_interval(s, input_bytes=1e12, nodes=10, cores=10, node_gbps=8.0, task_bytes=1e9)
    lo, hi = plan["cpu_h_interval"]
    assert lo < plan["cpu_h"] < hi


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
    assert "pass 1: output shards" in out and "driver memory:" in out and "total CPU:" in out
    assert "90%:" in out  # the plan says how sure it is: the sample's variation, and the misses of checked runs
    assert "with the misses of checked runs:" in out and "uncertainty: " in out
    assert "bounded by: " in out
    assert main(["corpus", "plan", str(cfg), "--input-bytes", "1TB", "--nodes", "0", "--cores-per-node", "1"]) == 2


def test_the_expected_range_is_the_interval_widened_by_the_checked_misses():
    s = _sample()
    s.batches = [(10, 1.0 + (i % 5), 100 * (1 + i % 3)) for i in range(40)]
    plan = with_interval(s, input_bytes=1e12, nodes=10, cores=10, node_gbps=8.0, task_bytes=1e9)
    for key, (below, above) in CHECKED_MISS.items():
        lo, hi = plan[f"{key}_interval"]
        assert plan[f"{key}_expected"] == pytest.approx((lo * (1 + min(below, 0)), hi * (1 + max(above, 0))))


def test_cache_entries_written_since_the_process_started_are_reported_as_cold(tmp_path, monkeypatch):
    import os
    import time

    from corpus.plan_measure import caches_written_by_this_process

    monkeypatch.setenv("CIDERMILL_CACHE", str(tmp_path))
    assert caches_written_by_this_process() == []
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "entry.npz").write_bytes(b"x")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "entry.npz").write_bytes(b"x")
    past = time.time() - 10 * 24 * 3600  # before this test process started
    os.utime(tmp_path / "old" / "entry.npz", (past, past))
    assert caches_written_by_this_process() == ["new"]
