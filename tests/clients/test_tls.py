"""TLS on both listeners: the trino client over https and ADBC over grpc+tls, each checking the
server's certificate against the test CA, with bearer tokens and passwords sent only encrypted."""

import subprocess

import adbc_driver_flightsql.dbapi as flight_sql
import pytest
import requests
import trino
from trino.auth import BasicAuthentication, JWTAuthentication

from conftest import ROBOT_TOKEN, start_server, token
from servers import make_certificate


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, idp, certificate):
    _, cert, key = certificate
    auth = (
        f'[server.tls]\ncert_file = "{cert}"\nkey_file = "{key}"\n\n'
        "[auth]\nallow_anonymous = false\n\n"
        f'[auth.oidc]\nissuer = "http://127.0.0.1:{idp.port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
        '[[auth.static]]\nname = "robot"\ntoken_env = "ROBOT_TOKEN"\n'
    )
    s = start_server(tmp_path_factory.mktemp("sqe-tls"), auth, {"ROBOT_TOKEN": ROBOT_TOKEN})
    try:
        yield s
    finally:
        s.stop()


def trino_query(server, cert, sql, user, auth):
    conn = trino.dbapi.connect(
        host="127.0.0.1", port=server.http_port, user=user, http_scheme="https", auth=auth, verify=str(cert)
    )
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


def test_trino_over_https(tls_server, certificate, idp, monkeypatch):
    cert, _, _ = certificate  # the CA's certificate
    # requests lets these variables override a session's own CA file (the trino client sets one).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    jwt = JWTAuthentication(token(idp.port))
    assert trino_query(tls_server, cert, "SELECT current_user", "alice", jwt) == [["alice"]]
    basic = BasicAuthentication("bob", "bob-secret")
    assert trino_query(tls_server, cert, "SELECT current_user", "bob", basic) == [["bob"]]
    assert requests.get(f"https://127.0.0.1:{tls_server.http_port}/health", verify=str(cert), timeout=10).text == "ok"
    # Plain HTTP is not answered on a TLS port.
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://127.0.0.1:{tls_server.http_port}/health", timeout=10)


def test_flight_sql_over_tls(tls_server, certificate):
    cert, _, _ = certificate  # the CA's certificate
    options = {"adbc.flight.sql.client_option.tls_root_certs": cert.read_text()}
    uri = f"grpc+tls://127.0.0.1:{tls_server.flight_port}"
    bearer = {**options, "adbc.flight.sql.authorization_header": f"Bearer {ROBOT_TOKEN}"}
    with flight_sql.connect(uri, db_kwargs=bearer) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_user")
        assert cur.fetchall() == [("robot",)]
    with flight_sql.connect(uri, db_kwargs={**options, "username": "alice", "password": "alice-secret"}) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT current_user")
            assert cur.fetchall() == [("alice",)]


def test_the_shell_over_tls(tls_server, certificate):
    import os

    from conftest import TARGET

    ca, _, _ = certificate
    cli = os.environ.get("SQE_CLI", str(TARGET / "debug" / "sqe-cli"))
    base = [cli, "--host", "127.0.0.1", "--port", str(tls_server.flight_port), "-f", "csv"]
    ok = subprocess.run(
        [*base, "--tls-ca", str(ca), "--token", ROBOT_TOKEN, "-e", "SELECT current_user AS who"],
        capture_output=True, text=True, timeout=120,
    )
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "who\nrobot\n", "")
    # Without TLS the server does not answer; with the public roots its certificate is not trusted.
    plain = subprocess.run([*base, "--token", ROBOT_TOKEN, "-e", "SELECT 1"], capture_output=True, text=True, timeout=120)
    assert (plain.returncode, plain.stderr) == (
        1,
        f"Error: cannot connect to 127.0.0.1:{tls_server.flight_port}: no answer over plain gRPC "
        "(does the server use TLS? then connect with --tls or --tls-ca)\n",
    )
    untrusted = subprocess.run(
        [*base, "--tls", "--token", ROBOT_TOKEN, "-e", "SELECT 1"], capture_output=True, text=True, timeout=120
    )
    assert (untrusted.returncode, untrusted.stderr) == (
        1,
        f"Error: cannot connect to 127.0.0.1:{tls_server.flight_port}: transport error: invalid peer certificate: UnknownIssuer\n",
    )
