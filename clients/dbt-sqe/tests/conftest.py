"""dbt-tests-adapter's suites against a real sqe-server (Flight SQL) whose users sign in at the
test identity provider (tests/idp); dbt connects as the OAuth client `etl-service` (client
credentials), so every statement runs as that service principal."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "clients"))

from servers import start_idp, start_server  # noqa: E402

pytest_plugins = ["dbt.tests.fixtures.project"]

# An administrator's static token, for checks outside dbt (system.runtime.queries of every user).
ADMIN_TOKEN = "dbt-tests-admin-0123456789abcdef"


@pytest.fixture(scope="session")
def idp():
    p = start_idp()
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="session")
def sqe(tmp_path_factory, idp):
    auth = (
        '[auth]\nallow_anonymous = false\nadmin_roles = ["sqe_admin"]\n\n'
        f'[auth.oidc]\nissuer = "http://127.0.0.1:{idp.port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
        '[[auth.static]]\nname = "admin"\ntoken_env = "ADMIN_TOKEN"\nroles = ["sqe_admin"]\n'
    )
    s = start_server(tmp_path_factory.mktemp("sqe-dbt"), auth, {"ADMIN_TOKEN": ADMIN_TOKEN})
    s.admin_token = ADMIN_TOKEN
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="class")
def dbt_profile_target(sqe, idp):
    return {
        "type": "sqe",
        "method": "oauth",
        "host": "127.0.0.1",
        "port": sqe.flight_port,
        "token_uri": f"http://127.0.0.1:{idp.port}/token",
        "client_id": "etl-service",
        "client_secret": "etl-secret",
        # Informational with OAuth (the token names the principal); the suites read it.
        "user": "etl-service",
        "database": "iceberg",
        "threads": 2,
    }
