"""Where the executor hashes, A/B in one process: executor_overhead.py's identity pipeline with 1 worker,
hashing after the fact (before issue 44: each shard read back and hashed once closed, a Parquet input hashed
by a second read after decoding, both on the task's thread) against the current code (hashed as written /
while read, in threads when a core is free), and plain pyarrow for the ratio.

The three run interleaved, round by round, in one process on the same inputs, so a busy machine's load
changes hit all three alike; besides wall time it prints the CPU of the task's own (main) thread, which is
the critical path when a core is free, and of the whole process.

    .venv/bin/python benchmarks/executor_hashing_ab.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import executor_overhead as eo  # noqa: E402
from corpus.readers.parquet import ParquetReader  # noqa: E402
from manifests import shards  # noqa: E402
from manifests.manifest import ShardInfo  # noqa: E402

CURRENT = (shards.ShardWriter._open, shards.ShardWriter._close_shard)


def _open_after_the_fact(self) -> None:
    """The writer as it was: straight to the file, no hashing on the way."""
    name = f"{self.prefix}-{len(self._shards):03d}.parquet"
    self._final = self.directory.join(name)
    self._tmp = self.directory.join(f"{name}.tmp-{os.getpid()}")
    self.directory.mkdir()
    self._sink = self._stream = self._tmp.fs.open_output_stream(self._tmp.path, compression=None)
    self._writer = pq.ParquetWriter(self._stream, self._schema, **shards.write_options())
    self._rows_in_shard = 0


def _close_after_the_fact(self) -> None:
    """...and the closed shard read back to hash it."""
    self._writer.close()
    self._sink.close()
    self._tmp.move_to(self._final)
    sha, n_bytes = self._final.sha256()
    rel = f"{self.relative_dir}/{self._final.name}" if self.relative_dir else self._final.name
    self._shards.append(ShardInfo(path=rel, rows=self._rows_in_shard, bytes=n_bytes, sha256=sha))
    self._writer = self._stream = self._sink = self._tmp = self._final = None


def _use(kind: str) -> None:
    new = kind == "new"
    shards.ShardWriter._open, shards.ShardWriter._close_shard = (
        CURRENT if new else (_open_after_the_fact, _close_after_the_fact))
    ParquetReader.digest_while_reading = new


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cm-hash-ab-"))
    try:
        paths = eo.make_inputs(tmp, 4, 25000)
        for kind in ("old", "new"):  # warm: imports, page cache
            _use(kind)
            eo.ours(tmp, tmp / f"warm-{kind}", 1)
        eo.baseline(paths, tmp / "warm-base", 1)
        runs: dict[str, list[tuple[float, float, float]]] = {"pyarrow": [], "old": [], "new": []}
        load = os.getloadavg()[0]
        for r in range(args.rounds):
            order = ["pyarrow", "old", "new"] if r % 2 == 0 else ["new", "old", "pyarrow"]
            for kind in order:
                out = tmp / f"{kind}-{r}"
                cpu, thread, start = eo._cpu(), time.thread_time(), time.perf_counter()
                if kind == "pyarrow":
                    eo.baseline(paths, out, 1)
                else:
                    _use(kind)
                    eo.ours(tmp, out, 1)
                runs[kind].append((time.perf_counter() - start, time.thread_time() - thread, eo._cpu() - cpu))
                shutil.rmtree(out, ignore_errors=True)
        _use("new")
        print(f"{args.rounds} rounds, 1 worker, {os.cpu_count()} cores, load average {load:.1f} -> "
              f"{os.getloadavg()[0]:.1f}; ratios to pyarrow")
        for label, i in (("wall", 0), ("main-thread CPU", 1), ("process CPU", 2)):
            for name, f in (("best", min), ("median", statistics.median)):
                b, o, n = (f(x[i] for x in runs[k]) for k in ("pyarrow", "old", "new"))
                print(f"  {label:16} {name:6}  pyarrow {b:.3f} s   hashed after {o:.3f} s ({o / b:.2f}x)   "
                      f"hashed on the way {n:.3f} s ({n / b:.2f}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
