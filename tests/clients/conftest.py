"""Shared fixtures: the real sqe-server binary, started on 127.0.0.1 with a fresh warehouse."""

import os
import re
import subprocess
from pathlib import Path

import pytest

TARGET = Path(os.environ.get("CARGO_TARGET_DIR", Path(__file__).resolve().parents[2] / "target"))
SQE_SERVER = os.environ.get("SQE_SERVER", str(TARGET / "debug" / "sqe-server"))


class Server:
    def __init__(self, process: subprocess.Popen, http_port: int, warehouse: Path):
        self.process = process
        self.http_port = http_port
        self.warehouse = warehouse


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not Path(SQE_SERVER).is_file():
        pytest.fail(f"sqe-server binary not found at {SQE_SERVER} (build it, or set SQE_SERVER)")
    root = tmp_path_factory.mktemp("sqe-server")
    warehouse = root / "warehouse"
    config = root / "sqe.toml"
    config.write_text(
        f'[server]\nhost = "127.0.0.1"\nhttp_port = 0\n\n[catalog]\nwarehouse = "{warehouse}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQE_")}
    process = subprocess.Popen(
        [SQE_SERVER, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    port = None
    seen = []
    for line in process.stdout:
        seen.append(line)
        match = re.search(r"trino http listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            port = int(match.group(1))
            break
    if port is None:
        process.kill()
        pytest.fail("sqe-server did not start:\n" + "".join(seen))
    try:
        yield Server(process, port, warehouse)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
