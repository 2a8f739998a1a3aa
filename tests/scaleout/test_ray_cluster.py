"""Two Ray nodes on loopback that share nothing but an object store (issue 22, item 5).

The head and a second raylet run as separate `ray start` processes; the second one runs in its own
mount namespace (`unshare -m`) with empty tmpfs mounts over the checkout's packages and data and
over this test's folder, so it sees neither the code (it gets it from the runtime_env the driver
ships; only the virtualenv stays visible) nor any local data root. Inputs and the data root are on a moto S3 server. The cluster uses Ray's token
authentication. The second node is killed (SIGKILL, the whole process group) once the first task
has finished; Ray redoes what it lost on the head. The version must have the ids of a local run.
Everything started here is stopped here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.fs as pafs
import pytest
import yaml

from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline
from manifests import Catalog

from ..conftest import REPO
from .conftest import free_port

WEB = REPO / "configs" / "demo" / "30-web-filtered.yaml"
RAY = Path(sys.executable).with_name("ray")


def _can_unshare() -> bool:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


def _start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, env=env, cwd="/", stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen, tag: str) -> None:
    """Stop a node: its process group, then any process of ours it left (found by our unique temp dir)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(8)
            break
        except subprocess.TimeoutExpired:
            continue
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if tag.encode() in cmdline:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _wait_for_nodes(env: dict, address: str, n: int, timeout_s: float = 90) -> None:
    code = ("import ray, sys, time\n"
            f"ray.init(address={address!r}, include_dashboard=False, log_to_driver=False)\n"
            f"deadline = time.time() + {timeout_s}\n"
            f"while sum(1 for x in ray.nodes() if x['Alive']) < {n} and time.time() < deadline: time.sleep(0.5)\n"
            f"sys.exit(0 if sum(1 for x in ray.nodes() if x['Alive']) >= {n} else 1)\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True,
                          timeout=timeout_s + 60)
    assert done.returncode == 0, f"the cluster did not reach {n} nodes: {done.stderr[-2000:]}"


@pytest.mark.slow
@pytest.mark.ray
def test_two_nodes_sharing_only_an_object_store_give_the_local_ids(tmp_path, s3_server):
    pytest.importorskip("ray")
    if not _can_unshare():
        pytest.skip("needs root and unshare -m to give the second node its own mount namespace")
    cfg = yaml.safe_load(WEB.read_text())
    local_cfg = dict(cfg, input={**cfg["input"], "paths": [str(REPO / p) for p in cfg["input"]["paths"]]},
                     output={**cfg["output"], "root": str(tmp_path / "local")})
    local = run_pipeline(load_pipeline(local_cfg), progress=False)

    bucket = s3_server.bucket()
    for sub in ("cc_warc", "dolma_warc"):
        s3_server.upload(REPO / "data" / "samples" / sub, bucket, f"in/{sub}", "*.warc.gz")
    root = s3_server.uri(bucket, "root")
    cluster_cfg = dict(cfg, input={**cfg["input"], "paths": [s3_server.uri(bucket, "in/*/*.warc.gz")]},
                       output={**cfg["output"], "root": root},
                       executor={"kind": "ray", "workers": 0, "batch_rows": 256, "address": None})

    tag = f"/tmp/rs{uuid.uuid4().hex[:6]}"  # short: Ray's unix sockets live under it
    port = free_port()
    address = f"127.0.0.1:{port}"
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": uuid.uuid4().hex + uuid.uuid4().hex,
           "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": ""}
    cluster_cfg["executor"]["address"] = address
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(cluster_cfg))
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"]
    head = _start([str(RAY), "start", "--head", f"--port={port}", "--include-dashboard=false",
                   f"--temp-dir={tag}-h", *common], env, tmp_path / "head.log")
    hidden = " ".join(f"mount -t tmpfs none {d} &&" for d in
                      (REPO / "corpus", REPO / "manifests", REPO / "synth", REPO / "data", tmp_path))
    node2_script = (f"{hidden} test ! -e {REPO}/corpus/pipeline.py && test ! -e {tmp_path}/local && "
                    f"exec {RAY} start --address={address} --temp-dir={tag}-w {' '.join(common)}")
    node2 = None
    try:
        _wait_for_nodes(env, address, 1)
        node2 = _start(["unshare", "-m", "--propagation", "private", "sh", "-c", node2_script], env,
                       tmp_path / "node2.log")
        _wait_for_nodes(env, address, 2)

        driver_env = {**env, "PYTHONPATH": str(REPO)}
        no_token = {k: v for k, v in driver_env.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
        refused = subprocess.run([sys.executable, "-m", "manifests.main", "corpus", "run", str(config), "--no-progress"],
                                 cwd=REPO, env=no_token, capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0
        line = [x for x in refused.stderr.splitlines() if "requires token authentication" in x]
        assert line and "set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=" in line[0], refused.stderr[-2000:]
        driver = subprocess.Popen([sys.executable, "-m", "manifests.main", "corpus", "run", str(config), "--no-progress"],
                                  cwd=REPO, env=driver_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        fs = s3_server.fs()
        deadline = time.time() + 240
        while time.time() < deadline and driver.poll() is None:
            infos = fs.get_file_info(pafs.FileSelector(f"{bucket}/root/.staging", recursive=True, allow_not_found=True))
            if any("/tasks/" in i.path and i.path.endswith(".json") for i in infos):
                break
            time.sleep(0.2)
        if driver.poll() is not None:
            out, err = driver.communicate()
            pytest.fail(f"the run ended (exit {driver.returncode}) before the second node could be killed: "
                        f"{err[-3000:]}")
        os.killpg(node2.pid, signal.SIGKILL)  # the second node dies mid-run
        out, err = driver.communicate(timeout=300)
        (tmp_path / "driver.err").write_text(err)
        assert driver.returncode == 0, err[-3000:]
    finally:
        if node2 is not None:
            _stop(node2, f"{tag}-w")
        _stop(head, f"{tag}-h")

    version = Catalog(root).resolve("web-filtered")
    assert version.version_id == local.version.version_id
    assert version.read(columns=["id"]).column("id").to_pylist() == \
        local.version.read(columns=["id"]).column("id").to_pylist()
    assert Catalog(root).resolve("web-filtered.rejects").version_id == local.rejects.version_id
    assert version.verify() == []
