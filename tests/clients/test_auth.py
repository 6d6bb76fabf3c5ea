"""Authentication over Trino HTTP and Arrow Flight SQL against a real OIDC provider
(oauth2-mock-server, tests/idp): bearer JWTs checked against the issuer's JWKS, the password grant,
a service principal's client credentials, static tokens, and a clear refusal (401 over HTTP,
UNAUTHENTICATED over gRPC) for each kind of bad credential."""

import base64
import json
import shutil

import adbc_driver_flightsql.dbapi as flight_sql
import pytest
import trino
from adbc_driver_manager import AdbcStatusCode
from adbc_driver_manager import Error as AdbcError
from trino.auth import BasicAuthentication, JWTAuthentication
from trino.exceptions import HttpError

from conftest import IDP_DIR, ROBOT_TOKEN, start, token


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_token(idp_port):
    """The issuer's own claims for alice (audience sqe), re-wrapped with `alg: none` and no signature."""
    claims = json.loads(base64.urlsafe_b64decode(token(idp_port).split(".")[1] + "=="))
    header = b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{b64url(json.dumps(claims).encode())}."


def foreign_token():
    """A token from another issuer instance: signed by a key this issuer does not publish."""
    other = start([shutil.which("node"), str(IDP_DIR / "idp.mjs"), "0"], r"idp listening on 127\.0\.0\.1:(\d+)")
    try:
        return token(other.port)
    finally:
        other.stop()


def query(server, sql, user, auth=None):
    conn = trino.dbapi.connect(
        host="127.0.0.1",
        port=server.http_port,
        user=user,
        http_scheme="http",
        auth=auth,
        allow_insecure_auth=auth is not None,
    )
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


def refused(server, auth, user="alice"):
    with pytest.raises(HttpError) as e:
        query(server, "SELECT 1", user, auth)
    return str(e.value)


def test_bearer_token_runs_as_its_user(secure_server, idp):
    jwt = token(idp.port)
    assert query(secure_server, "SELECT current_user", "alice", JWTAuthentication(jwt)) == [["alice"]]


def test_password_grant_and_service_principal(secure_server):
    assert query(secure_server, "SELECT current_user", "alice", BasicAuthentication("alice", "alice-secret")) == [
        ["alice"]
    ]
    service = BasicAuthentication("etl-service", "etl-secret")
    assert query(secure_server, "SELECT current_user", "etl-service", service) == [["etl-service"]]


def test_static_token(secure_server):
    assert query(secure_server, "SELECT current_user", "robot", JWTAuthentication(ROBOT_TOKEN)) == [["robot"]]


def test_current_groups_are_the_callers_own(secure_server, idp):
    robot = JWTAuthentication(ROBOT_TOKEN)
    assert query(secure_server, "SELECT current_groups()", "robot", robot) == [[["sqe_admin"]]]
    # Another user in the same server sees their own (none), also when robot acts for them.
    alice = JWTAuthentication(token(idp.port))
    assert query(secure_server, "SELECT current_groups()", "alice", alice) == [[[]]]
    assert query(secure_server, "SELECT current_groups()", "carol", robot) == [[[]]]


def test_each_bad_credential_gets_401_saying_which(secure_server, idp):
    expired = token(idp.port, expired="true")
    assert refused(secure_server, JWTAuthentication(expired)) == "error 401: b'token expired'"

    other_audience = token(idp.port, aud="someone-else")
    assert refused(secure_server, JWTAuthentication(other_audience)) == "error 401: b'token audience is not accepted'"

    unsigned = unsigned_token(idp.port)
    assert refused(secure_server, JWTAuthentication(unsigned)) == "error 401: b\"token algorithm 'none' is not allowed\""

    assert (
        refused(secure_server, JWTAuthentication(foreign_token()))
        == "error 401: b'token is signed by a key the issuer does not publish'"
    )

    assert (
        refused(secure_server, BasicAuthentication("alice", "wrong"))
        == "error 401: b'invalid username or password'"
    )
    assert (
        refused(secure_server, None)
        == "error 401: b'authentication required: send a Bearer token or Basic credentials'"
    )
    # Others keep being served.
    assert query(secure_server, "SELECT 7", "alice", BasicAuthentication("alice", "alice-secret")) == [[7]]


def test_user_header_must_match_the_principal(secure_server, idp):
    with pytest.raises(HttpError) as e:
        query(secure_server, "SELECT 1", "bob", JWTAuthentication(token(idp.port)))
    assert str(e.value) == "error 403: b'Access Denied: user alice cannot impersonate user bob'"


def test_a_configured_impersonator_runs_as_the_user_it_names(secure_server):
    # `robot` is in [auth] impersonators: its query runs as carol, and the registry says so.
    assert query(secure_server, "SELECT current_user", "carol", JWTAuthentication(ROBOT_TOKEN)) == [["carol"]]
    rows = query(
        secure_server,
        "SELECT \"user\" FROM system.runtime.queries WHERE query = 'SELECT current_user' AND \"user\" = 'carol'",
        "robot",
        JWTAuthentication(ROBOT_TOKEN),
    )
    assert rows == [["carol"]]


def flight_query(server, sql, **db_kwargs):
    with flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=db_kwargs) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()


def bearer(jwt):
    return {"adbc.flight.sql.authorization_header": f"Bearer {jwt}"}


def test_each_bad_credential_over_flight_sql_is_unauthenticated_saying_which(secure_server, idp):
    # Expired and other-audience tokens and a wrong password over Flight SQL: test_flight_sql.py.
    cases = [
        (bearer(foreign_token()), "token is signed by a key the issuer does not publish"),
        (bearer(unsigned_token(idp.port)), "token algorithm 'none' is not allowed"),
        ({}, "authentication required: send a Bearer token or Basic credentials"),
    ]
    good = [
        (bearer(token(idp.port)), "alice"),
        ({"username": "bob", "password": "bob-secret"}, "bob"),
        (bearer(ROBOT_TOKEN), "robot"),
    ]
    for (bad, reason), (credentials, user) in zip(cases, good):
        with pytest.raises(AdbcError) as refused:
            flight_query(secure_server, "SELECT 1", **bad)
        assert refused.value.status_code == AdbcStatusCode.UNAUTHENTICATED
        assert f"UNAUTHENTICATED: [FlightSQL] {reason} (" in str(refused.value)
        # Others keep being served, as themselves.
        assert flight_query(secure_server, "SELECT current_user", **credentials) == [(user,)]
