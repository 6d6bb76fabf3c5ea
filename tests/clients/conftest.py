"""Shared fixtures: the real sqe-server binary and a real OIDC identity provider, each started on
127.0.0.1 with fresh state and stopped by its PID."""

import contextlib
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
SQE_SERVER = os.environ.get("SQE_SERVER", str(TARGET / "debug" / "sqe-server"))
IDP_DIR = ROOT / "tests" / "idp"


class Process:
    def __init__(self, process: subprocess.Popen, port: int, seen=()):
        self.process = process
        self.port = port
        # Everything the process prints (stdout and stderr), read on by a thread so that a chatty
        # log never fills the pipe; tests read the log from here.
        self.lines = list(seen)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)

    def log(self) -> str:
        return "".join(self.lines)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(command, pattern, env=None, more=(), kind=Process) -> Process:
    """Starts `command` and waits for a line matching `pattern` (group 1: the port), then for one
    line matching each of `more`, whose ports go to `process.more_ports`."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    seen = []
    ports = []
    wanted = [pattern, *more]
    for line in process.stdout:
        seen.append(line)
        match = re.search(wanted[len(ports)], line)
        if match:
            ports.append(int(match.group(1)))
            if len(ports) == len(wanted):
                p = kind(process, ports[0], seen)
                p.more_ports = ports[1:]
                return p
    process.kill()
    pytest.fail(f"{command[0]} did not start:\n" + "".join(seen))


class Server(Process):
    @property
    def http_port(self):
        return self.port

    @property
    def flight_port(self):
        return self.more_ports[0]


def start_server(root: Path, auth_toml: str, env_extra=None, server_toml="") -> Server:
    """sqe-server on free ports over a warehouse in `root`; `auth_toml` is appended to the
    configuration (the [auth] section and any others), `server_toml` goes into [server]."""
    if not Path(SQE_SERVER).is_file():
        pytest.fail(f"sqe-server binary not found at {SQE_SERVER} (build it, or set SQE_SERVER)")
    config = root / "sqe.toml"
    config.write_text(
        f'[server]\nhost = "127.0.0.1"\nhttp_port = 0\nflight_port = 0\n{server_toml}\n'
        f'[catalog]\nwarehouse = "{root / "warehouse"}"\n\n'
        + auth_toml
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQE_")}
    env.update(env_extra or {})
    p = start(
        [SQE_SERVER, "--config", str(config)],
        r"trino http listening on 127\.0\.0\.1:(\d+)",
        env,
        more=[r"flight sql listening on 127\.0\.0\.1:(\d+)"],
        kind=Server,
    )
    return p


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("sqe-server"), "[auth]\nallow_anonymous = true\n")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def idp():
    """oauth2-mock-server (tests/idp), installed by scripts/test."""
    node = shutil.which("node")
    if node is None or not (IDP_DIR / "node_modules" / "oauth2-mock-server").is_dir():
        pytest.fail("the test IdP is not installed: run scripts/test (npm install in tests/idp)")
    p = start([node, str(IDP_DIR / "idp.mjs"), "0"], r"idp listening on 127\.0\.0\.1:(\d+)")
    try:
        yield p
    finally:
        p.stop()


ROBOT_TOKEN = "robot-token-0123456789abcdef"


@pytest.fixture(scope="module")
def secure_server(tmp_path_factory, idp):
    # robot may act for other users and is an admin (it reads everyone's queries).
    auth = (
        '[auth]\nallow_anonymous = false\nimpersonators = ["robot"]\nadmin_roles = ["sqe_admin"]\n\n'
        f'[auth.oidc]\nissuer = "http://127.0.0.1:{idp.port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
        '[[auth.static]]\nname = "robot"\ntoken_env = "ROBOT_TOKEN"\nroles = ["sqe_admin"]\n'
    )
    s = start_server(tmp_path_factory.mktemp("sqe-secure"), auth, {"ROBOT_TOKEN": ROBOT_TOKEN})
    try:
        yield s
    finally:
        s.stop()


def token(idp_port, **form):
    body = {"grant_type": "password", "username": "alice", "password": "alice-secret", **form}
    response = requests.post(f"http://127.0.0.1:{idp_port}/token", data=body, timeout=10)
    response.raise_for_status()
    return response.json()["access_token"]


def rss_kib(pid):
    """The resident memory of process `pid`, in KiB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@contextlib.contextmanager
def rss_growth(pid):
    """Samples the resident memory of process `pid` every 20 ms while the block runs; the list it
    yields holds, once the block ends, the most the process grew by, in KiB."""
    before = rss_kib(pid)
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    grown = []
    try:
        yield grown
    finally:
        done.set()
        sampler.join()
        grown.append(peak[0] - before)

