"""The real processes the client tests run against, each on 127.0.0.1 with fresh state and
stopped by its PID: sqe-server and the OIDC identity provider (tests/idp). Shared by the client
tests' fixtures (conftest.py) and dbt-sqe's adapter tests (clients/dbt-sqe/tests)."""

import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

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


def start_idp() -> Process:
    """oauth2-mock-server (tests/idp), installed by scripts/test."""
    node = shutil.which("node")
    if node is None or not (IDP_DIR / "node_modules" / "oauth2-mock-server").is_dir():
        pytest.fail("the test IdP is not installed: run scripts/test (npm install in tests/idp)")
    return start([node, str(IDP_DIR / "idp.mjs"), "0"], r"idp listening on 127\.0\.0\.1:(\d+)")


def make_certificate(d: Path):
    """A test CA and a server certificate it signed for 127.0.0.1 and localhost, in directory `d`:
    (CA certificate, server certificate, server key)."""
    ca, ca_key = d / "ca.pem", d / "ca.key"
    cert, key, csr, ext = d / "server.pem", d / "server.key", d / "server.csr", d / "server.ext"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "2", "-subj", "/CN=SQE test CA")
    openssl("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return ca, cert, key
