"""A local S3-compatible server (moto's server mode, from PyPI) for the object-store tests.

The fixture starts `python -m moto.server` on a free loopback port and stops it afterwards. Data
roots and inputs are then `s3://<bucket>/...?endpoint_override=127.0.0.1:<port>&scheme=http`,
read and written through pyarrow's S3FileSystem like any bucket. Credentials are dummies: moto
accepts any; they go in the environment, as on a real machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class S3Server:
    host: str
    port: int
    log: str  # the server's request log

    @property
    def query(self) -> str:
        return f"endpoint_override={self.host}:{self.port}&scheme=http"

    def uri(self, bucket: str, path: str = "") -> str:
        return f"s3://{bucket}/{path}".rstrip("/") + f"?{self.query}"

    def fs(self):
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(endpoint_override=f"{self.host}:{self.port}", scheme="http",
                                 allow_bucket_creation=True, allow_bucket_deletion=True)

    def bucket(self) -> str:
        """A new, empty bucket for one test."""
        name = f"t-{uuid.uuid4().hex[:12]}"
        self.fs().create_dir(name)
        return name

    def upload(self, local_dir, bucket: str, prefix: str, pattern: str = "*") -> None:
        """Copy the files of `local_dir` matching `pattern` to `s3://bucket/prefix/`."""
        from pathlib import Path

        fs = self.fs()
        for f in sorted(Path(local_dir).glob(pattern)):
            with fs.open_output_stream(f"{bucket}/{prefix}/{f.name}", compression=None) as out:
                out.write(f.read_bytes())


S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
          "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    pytest.importorskip("moto.server", reason="moto is installed by make (requirements/nodeps/test.txt)")
    for key, value in S3_ENV.items():
        os.environ.setdefault(key, value)
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"moto server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield S3Server("127.0.0.1", port, str(log))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
