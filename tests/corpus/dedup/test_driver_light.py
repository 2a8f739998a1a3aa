"""The driver-light global builds (issue 22): the same drops as a single-process reference, whatever
the partition count, and every file on the storage filesystem (a non-local pyarrow filesystem works).

References are written here independently: a Python dict of first occurrences for exact/URL dedup,
and per-band Python buckets + networkx connected components for MinHash.
"""

from __future__ import annotations

import json
import random

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from corpus.dedup.components import star_components, write_edges
from corpus.dedup.drops import read_drops
from corpus.dedup.minhash import MinHasher
from corpus.dedup.spill import as_location, load_arrays
from corpus.dedup.urls import normalise_urls
from corpus.executors.local import LocalTaskMap
from corpus.registry import stage_class
from corpus.stages.dedup_exact import ExactDedupConfig, normalised
from manifests.storage import Location


def _tasks(workers: int, partitions: int | None) -> LocalTaskMap:
    tm = LocalTaskMap(workers)
    tm.partitions = partitions
    return tm


def _write_shards(root: Location, rows: list[dict], n_shards: int) -> list[Location]:
    root.mkdir()
    out = []
    per = -(-len(rows) // n_shards)
    for i in range(n_shards):
        loc = root.join(f"shard-{i:03d}.parquet")
        with loc.fs.open_output_stream(loc.path) as f:
            pq.write_table(pa.Table.from_pylist(rows[i * per:(i + 1) * per]), f)
        out.append(loc)
    return out


def _drop_ids(stage, shards, workdir, tasks) -> list[str]:
    return sorted(read_drops(stage.build(shards, workdir=workdir, tasks=tasks)).column("id").to_pylist())


def _c4_rows(shared_data) -> list[dict]:
    """Real C4 pages (../shared) with real URLs made up from their ids, plus planted copies: exact
    copies with case/space edits, the same URL in another form, and rows without text or URL."""
    path = shared_data / "web_text" / "llamafactory_demo" / "c4_demo.jsonl"
    docs = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]
    rng = random.Random(5)
    rows = [{"id": f"d{i}", "text": t, "url": f"https://site{i % 40}.example/p/{i % 7}"} for i, t in enumerate(docs)]
    for j in range(60):
        src = rows[rng.randrange(len(rows))]
        text = src["text"].upper() if j % 3 == 0 else "  " + src["text"].replace(" ", "   ") + " "
        rows.insert(rng.randrange(len(rows) + 1), {"id": f"c{j}", "text": text,
                                                   "url": src["url"].replace("https://", "http://www.") + "/#top"})
    rows += [{"id": "n0", "text": None, "url": None}, {"id": "n1", "text": None, "url": None}]
    return rows


def _first_occurrence_reference(rows: list[dict], keys: list) -> list[str]:
    seen, drops = set(), []
    for r, k in zip(rows, keys):
        if k is None:
            continue
        if k in seen:
            drops.append(r["id"])
        seen.add(k)
    return sorted(drops)


def test_exact_and_url_drops_equal_a_python_reference_for_any_partition_count(shared_data, tmp_path):
    rows = _c4_rows(shared_data)
    shards = _write_shards(as_location(tmp_path / "in"), rows, 5)
    text_keys = normalised(pa.chunked_array([pa.array([r["text"] for r in rows])]), ExactDedupConfig()).to_pylist()
    url_keys = normalise_urls(pa.array([r["url"] for r in rows])).to_pylist()
    want = {"exact_dedup_v1": _first_occurrence_reference(rows, text_keys),
            "url_dedup_v1": _first_occurrence_reference(rows, url_keys)}
    assert len(want["exact_dedup_v1"]) >= 60 and len(want["url_dedup_v1"]) >= 75  # the test has teeth
    for name, field in (("exact_dedup_v1", "text"), ("url_dedup_v1", "url")):
        stage = stage_class(name)({"field": field})
        for parts in (1, 3, 8):
            workers = 2 if parts == 3 else 1  # one run through the process pool
            got = _drop_ids(stage, shards, as_location(tmp_path / f"w-{name}-{parts}"), _tasks(workers, parts))
            assert got == want[name], (name, parts)


def _minhash_reference(texts: list[str], cfg) -> dict[int, int]:
    """Old single-process algorithm, written out: per band, Python buckets by the band's values,
    an edge from the bucket's first row to each other member if the full signatures agree on at
    least `min_similarity`; networkx components; each row maps to its component's first row."""
    sig, has = MinHasher(cfg.params).signatures(pa.array(texts))
    g = nx.Graph()
    for b in range(cfg.bands):
        first: dict[tuple, int] = {}
        for i in np.flatnonzero(has).tolist():
            key = tuple(sig[i, b * cfg.rows:(b + 1) * cfg.rows].tolist())
            if key not in first:
                first[key] = i
            elif (sig[first[key]] == sig[i]).mean() >= cfg.min_similarity:
                g.add_edge(first[key], i)
    return {i: min(c) for c in nx.connected_components(g) for i in c if i != min(c)}


def _near_dup_rows(c4_docs) -> list[dict]:
    rng = random.Random(3)
    docs = [d["text"] for d in c4_docs if len(d["text"].split()) >= 80][:90]
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(docs)]
    for j in range(25):  # near copies (0.5-1.5% of words replaced), some of copies
        src = rows[rng.randrange(len(rows))]["text"]
        words = src.split(" ")
        words = [w if rng.random() > 0.005 * (1 + j % 3) else f"zq{rng.randrange(10**6)}" for w in words]
        rows.insert(rng.randrange(len(rows) + 1), {"id": f"c{j}", "text": " ".join(words)})
    rows.append({"id": "e0", "text": ""})
    return rows


def test_minhash_drops_and_kept_ids_equal_the_reference_for_any_partition_count(tmp_path, c4_docs):
    rows = _near_dup_rows(c4_docs)
    stage = stage_class("minhash_dedup_v1")({"batch_rows": 40})
    ref = _minhash_reference([r["text"] for r in rows], stage.config)
    want = sorted((rows[i]["id"], rows[k]["id"]) for i, k in ref.items())
    assert len(want) >= 20
    shards = _write_shards(as_location(tmp_path / "in"), rows, 4)
    for parts in (1, 3, 8):
        workers = 2 if parts == 3 else 1
        state = stage.build(shards, workdir=as_location(tmp_path / f"w{parts}"), tasks=_tasks(workers, parts))
        got = sorted((r["id"], r["kept_id"]) for r in read_drops(state).to_pylist())
        assert got == want, parts


def test_star_components_equal_networkx_on_random_graphs(tmp_path):
    rng = np.random.default_rng(0)
    for trial in range(4):
        n, e = int(rng.integers(2, 400)), int(rng.integers(0, 500))
        a, b = rng.integers(0, n, e) * 5 + 1, rng.integers(0, n, e) * 5 + 1  # sparse, non-contiguous labels
        g = nx.Graph()
        g.add_edges_from(zip(a.tolist(), b.tolist()))
        want = {x: min(c) for c in nx.connected_components(g) for x in c if x != min(c)}
        for parts in (1, 3, 8):
            cc = as_location(tmp_path / f"cc-{trial}-{parts}")
            for p in range(parts):  # edges start spread over `parts` writers
                sel = np.arange(e) % parts == p
                write_edges(cc, "ls", 0, p, a[sel], b[sel], parts, both_directions=True)
            files, _ = star_components(_tasks(1, parts), cc, parts)
            got = {}
            for f in files:
                z = load_arrays(f)
                got.update(zip(z["node"].tolist(), z["root"].tolist()))
            assert got == want, (trial, parts)


def test_a_long_chain_converges_to_its_first_node(tmp_path):
    order = np.random.default_rng(1).permutation(300)  # a path graph visited in random label order
    cc = as_location(tmp_path / "cc")
    write_edges(cc, "ls", 0, 0, order[:-1], order[1:], 4, both_directions=True)
    for p in range(1, 4):
        write_edges(cc, "ls", 0, p, np.zeros(0, np.int64), np.zeros(0, np.int64), 4, both_directions=True)
    files, rounds = star_components(_tasks(1, 4), cc, 4)
    roots = np.concatenate([load_arrays(f)["root"] for f in files])
    assert len(roots) == 299 and set(roots.tolist()) == {0} and rounds < 40


def _memory_root():
    """A pyarrow filesystem with no local paths at all (fsspec's in-memory filesystem): any
    `open`/`os.path` use on a global stage's state would miss its files."""
    fsspec = pytest.importorskip("fsspec")
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    return Location(PyFileSystem(FSSpecHandler(fsspec.filesystem("memory"))), "/bucket/root")


def test_every_global_stage_runs_on_a_non_local_filesystem_with_the_local_result(tmp_path, c4_docs):
    rows = _near_dup_rows(c4_docs)
    rows[5] = {**rows[5], "text": rows[2]["text"]}  # an exact copy too
    rows[7] = {**rows[7], "text": "Intro. " + c4_docs[0]["text"][:50] + " " +
               "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins "
               "for her friends every day with four."}  # from the first GSM8K test question
    local_shards = _write_shards(as_location(tmp_path / "in"), rows, 3)
    mem = _memory_root()
    mem_shards = _write_shards(mem.join("in"), rows, 3)
    stages = [stage_class("exact_dedup_v1")({}), stage_class("minhash_dedup_v1")({}),
              stage_class("decontaminate_v1")({"benchmarks": ["gsm8k"]})]
    for stage in stages:
        local = read_drops(stage.build(local_shards, workdir=as_location(tmp_path / stage.name),
                                       tasks=_tasks(1, 3)))
        state = stage.build(mem_shards, workdir=mem.join("work", stage.name), tasks=_tasks(1, 3))
        assert all(loc.fs is mem.fs for loc in state)  # the state lives on that filesystem
        remote = read_drops(state)
        assert remote.to_pylist() == local.to_pylist() and remote.num_rows >= 1, stage.name
        kept = stage.bind(state)(pq.read_table(mem_shards[0].path, filesystem=mem.fs))
        assert kept.stats.rows_out == pq.read_table(local_shards[0].path).num_rows - sum(kept.stats.dropped.values())
    written = mem.fs.get_file_info(pafs.FileSelector("/bucket/root/work", recursive=True))
    assert any(i.path.endswith(".npz") for i in written) and not (tmp_path / "bucket").exists()


def test_a_missing_partition_file_is_an_error_naming_it(tmp_path, c4_docs):
    from manifests.errors import FatalError

    rows = _near_dup_rows(c4_docs)[:30]
    shards = _write_shards(as_location(tmp_path / "in"), rows, 2)
    stage = stage_class("exact_dedup_v1")({})
    tm = _tasks(1, 2)
    outdir = as_location(tmp_path / "w").join("exact_dedup")
    from corpus.dedup import keyed

    tm.map(lambda item: keyed._hash_shard(item, stage=stage, outdir=outdir, partitions=2), list(enumerate(shards)))
    outdir.join("keys-0001", "00001.parquet").delete()
    with pytest.raises(FatalError, match=r"keys-0001/00001.parquet is missing"):
        keyed._first_in_partition(1, outdir=outdir, n_shards=2, name="exact_dedup_v1")


@pytest.mark.slow
def test_on_ray_the_index_is_broadcast_through_the_object_store_with_the_local_result(tmp_path, c4_docs):
    pytest.importorskip("ray")
    from corpus.executors.ray import RayShared, RayTaskMap, _ensure_ray

    rows = [{"id": f"d{i}", "text": d["text"]} for i, d in enumerate(c4_docs[:40])]
    rows[3] = {"id": "q", "text": "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning "
                                  "and bakes muffins for her friends every day with four."}
    shards = _write_shards(as_location(tmp_path / "in"), rows, 2)
    stage = stage_class("decontaminate_v1")({"benchmarks": ["gsm8k"]})
    local = read_drops(stage.build(shards, workdir=as_location(tmp_path / "l"), tasks=_tasks(1, None)))
    import ray

    # a cluster of our own: plain ray.init() joins any `ray start` cluster already running on this machine
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    _ensure_ray(None, 2)  # the executor's Ray Data settings (ordered results)
    try:
        tasks = RayTaskMap(2)
        assert isinstance(tasks.broadcast([1, 2]), RayShared)
        on_ray = read_drops(stage.build(shards, workdir=as_location(tmp_path / "r"), tasks=tasks))
    finally:
        ray.shutdown()
    assert on_ray.to_pylist() == local.to_pylist() and on_ray.column("id").to_pylist() == ["q"]
