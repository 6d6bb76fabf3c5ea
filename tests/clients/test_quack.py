"""DuckDB's own client over Quack (duckdb 1.5.5 with its httpfs and quack extension wheels, loaded
offline): `quack_query` against sqe-server returns exact values of every type, streams large results
through concurrent fetches, checks each connection's token with the identity chain and runs as its
user (privileges hold), and a malformed message is an error answer while the server serves on.
Work in progress for issue 17: ATTACH, appends and the rest come next.
"""

import datetime
import decimal
import importlib
import pathlib
import time

import duckdb
import pytest
import requests

from conftest import start_server

TOKENS = {
    "ada": "ada-quack-token-0123456789",
    "alice": "alice-quack-token-0123456789",
    "bob": "bob-quack-token-0123456789",
}
CONFIG = (
    '[auth]\nallow_anonymous = false\nadmin_roles = ["sqe_admin"]\n\n'
    + "".join(
        f'[[auth.static]]\nname = "{u}"\ntoken_env = "{u.upper()}_TOKEN"\n'
        + ('roles = ["sqe_admin"]\n' if u == "ada" else "")
        + "\n"
        for u in TOKENS
    )
    + '[access]\ndefault = "deny"\n\n[quack]\nenabled = true\nport = 0\n'
)


@pytest.fixture(scope="module")
def sqe(tmp_path_factory):
    env = {f"{u.upper()}_TOKEN": t for u, t in TOKENS.items()}
    s = start_server(tmp_path_factory.mktemp("sqe-quack"), CONFIG, env)
    # The Quack port is printed after the other two (read on by another thread).
    deadline = time.monotonic() + 20
    while not hasattr(s, "quack_port"):
        for line in list(s.lines):
            if "quack listening on 127.0.0.1:" in line:
                s.quack_port = int(line.rsplit(":", 1)[1])
        if time.monotonic() > deadline:
            s.stop()
            pytest.fail("sqe-server did not say where Quack listens:\n" + s.log())
        time.sleep(0.05)
    try:
        yield s
    finally:
        s.stop()


def load(con, name):
    module = importlib.import_module(f"duckdb_extension_{name}")
    path = pathlib.Path(module.__file__).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    con.execute(f"LOAD '{path}'")


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    load(con, "httpfs")
    load(con, "quack")
    yield con
    con.close()


def remote(duck, sqe, user, sql, wrap="*"):
    """Rows of `SELECT wrap FROM quack_query(…)` run as `user`."""
    return duck.execute(
        f"SELECT {wrap} FROM quack_query('quack:127.0.0.1:{sqe.quack_port}', $${sql}$$, token => '{TOKENS[user]}')"
    ).fetchall()


def test_every_type_arrives_exactly(sqe, duck):
    sql = (
        "SELECT true AS b, CAST(1 AS TINYINT) AS i1, CAST(2 AS SMALLINT) AS i2, CAST(3 AS INTEGER) AS i4, "
        "CAST(4 AS BIGINT) AS i8, CAST(1.5 AS REAL) AS f4, CAST(2.25 AS DOUBLE) AS f8, "
        "CAST(12345678901234567.89 AS DECIMAL(38,2)) AS d38, CAST(3.14 AS DECIMAL(3,2)) AS d3, 'héllo' AS s, "
        "X'00ff' AS bl, DATE '2024-02-29' AS dt, TIME '12:34:56.789' AS t, "
        "TIMESTAMP '2024-01-02 03:04:05.123456' AS ts, TIMESTAMP '2024-01-02 03:04:05 UTC' AS tz, "
        "ARRAY[1, 2, NULL] AS l, ROW(1, 'x') AS st, MAP(ARRAY['k'], ARRAY[1]) AS m, "
        "CAST(NULL AS INTEGER) AS n, INTERVAL '3' DAY AS iv"
    )
    [row] = remote(duck, sqe, "alice", sql)
    assert row == (
        True, 1, 2, 3, 4, 1.5, 2.25, decimal.Decimal("12345678901234567.89"), decimal.Decimal("3.14"),
        "héllo", b"\x00\xff", datetime.date(2024, 2, 29), datetime.time(12, 34, 56, 789000),
        datetime.datetime(2024, 1, 2, 3, 4, 5, 123456),
        datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        [1, 2, None], {"c0": 1, "c1": "x"}, {"k": 1}, None, datetime.timedelta(days=3),
    )


def test_a_large_result_streams_through_concurrent_fetches(sqe, duck):
    rows = remote(duck, sqe, "alice", "SELECT value FROM range(1000000)", "count(*), sum(value), max(value)")
    assert rows == [(1000000, 499999500000, 999999)]


def test_each_connection_runs_as_its_token_says(sqe, duck):
    with pytest.raises(duckdb.InvalidInputException, match="Authentication failed: unknown token"):
        duck.execute(
            f"FROM quack_query('quack:127.0.0.1:{sqe.quack_port}', 'SELECT 1', token => 'not-a-known-token')"
        ).fetchall()
    remote(duck, sqe, "ada", "GRANT CREATE ON SCHEMA default TO USER alice")
    remote(duck, sqe, "alice", "CREATE TABLE notes AS SELECT 1 AS id, 'mine' AS text")
    assert remote(duck, sqe, "alice", "SELECT id, text FROM notes") == [(1, "mine")]
    with pytest.raises(duckdb.InvalidInputException, match="table 'iceberg.default.notes' not found"):
        remote(duck, sqe, "bob", "SELECT id, text FROM notes")
    assert remote(duck, sqe, "bob", "SELECT current_user AS u") == [("bob",)]


def test_malformed_messages_are_error_answers(sqe, duck):
    for port in (sqe.quack_port, sqe.http_port):
        for body in [b"", b"\xde\xad\xbe\xef", b"\x01\x00\x03" + b"\xff" * 64, b"\x01\x00\x09\xff\xff" * 1000]:
            r = requests.post(f"http://127.0.0.1:{port}/quack", data=body, timeout=10)
            assert r.status_code == 200 and r.headers["Content-Type"] == "application/vnd.duckdb"
            assert b"malformed Quack message" in r.content, r.content[:80]
    assert remote(duck, sqe, "alice", "SELECT 42 AS answer") == [(42,)]
