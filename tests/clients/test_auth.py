"""Authentication over Trino HTTP against a real OIDC provider (oauth2-mock-server, tests/idp):
bearer JWTs checked against the issuer's JWKS, the password grant, a service principal's client
credentials, static tokens, and a clear 401 for each kind of bad credential."""

import base64
import json
import shutil

import pytest
import trino
from trino.auth import BasicAuthentication, JWTAuthentication
from trino.exceptions import HttpError

from conftest import IDP_DIR, ROBOT_TOKEN, start, token

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


def test_each_bad_credential_gets_401_saying_which(secure_server, idp):
    expired = token(idp.port, expired="true")
    assert refused(secure_server, JWTAuthentication(expired)) == "error 401: b'token expired'"

    other_audience = token(idp.port, aud="someone-else")
    assert refused(secure_server, JWTAuthentication(other_audience)) == "error 401: b'token audience is not accepted'"

    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=").decode()
    claims = json.loads(base64.urlsafe_b64decode(other_audience.split(".")[1] + "=="))
    claims["aud"] = "sqe"
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    unsigned = f"{header}.{payload}."
    assert refused(secure_server, JWTAuthentication(unsigned)) == "error 401: b\"token algorithm 'none' is not allowed\""

    # A token from another issuer instance: signed by a key this issuer does not publish.
    other = start([shutil.which("node"), str(IDP_DIR / "idp.mjs"), "0"], r"idp listening on 127\.0\.0\.1:(\d+)")
    try:
        foreign = token(other.port)
    finally:
        other.stop()
    assert (
        refused(secure_server, JWTAuthentication(foreign))
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
