"""Shared fixtures: the real sqe-server binary and a real OIDC identity provider, each started on
127.0.0.1 with fresh state and stopped by its PID."""

import contextlib
import threading
import time

import pytest
import requests

from servers import IDP_DIR, ROOT, SQE_SERVER, TARGET, Process, Server, start, start_idp, start_server  # noqa: F401


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
    p = start_idp()
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

