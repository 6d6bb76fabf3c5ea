"""dbt-tests-adapter's suites against a real sqe-server (Flight SQL) whose users sign in at the
test identity provider (tests/idp); dbt connects as the OAuth client `etl-service` (client
credentials), so every statement runs as that service principal."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "clients"))

from harness import oauth_profile, start_sqe  # noqa: E402
from servers import start_idp  # noqa: E402

pytest_plugins = ["dbt.tests.fixtures.project"]


@pytest.fixture(scope="session")
def idp():
    p = start_idp()
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="session")
def sqe(tmp_path_factory, idp):
    s = start_sqe(tmp_path_factory.mktemp("sqe-dbt"), idp)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="class")
def dbt_profile_target(sqe, idp):
    # `user` is informational with OAuth (the token names the principal); the suites read it.
    return oauth_profile(sqe, idp, user="etl-service", threads=2)
