"""The MCP endpoint with the Python `mcp` SDK (Client in legacy mode) and tokens from the real test
IdP: an OAuth resource server that takes only tokens issued for it (audience = its URI, RFC 8707),
answers 401 with a link to its metadata document and 403 for a missing scope; every tool runs as
the token's user under the same privileges as Trino HTTP; execute_sql_readonly runs only reading
statements; changes need the write scope, a write role and the user's own privileges; a session id
belongs to its user; huge, deep and malformed input fails cleanly and bounded answers stay bounded.
"""

import asyncio
import json

import pytest
import requests
import trino
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import rss_kib, start_server, token
from test_privileges import trino_run

CONFIG = (
    '[auth]\nallow_anonymous = false\nadmin_roles = ["sqe_admin"]\n\n'
    '[auth.oidc]\nissuer = "http://127.0.0.1:{port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
    '[access]\ndefault = "deny"\n\n'
    '[mcp]\nenabled = true\nallow_writes = true\nwrite_roles = ["writer"]\nmax_rows = 1000\n'
)

READ_TOOLS = [
    "list_catalogs",
    "list_schemas",
    "list_tables",
    "describe_table",
    "table_snapshots",
    "sample_rows",
    "table_stats",
    "explain_query",
    "execute_sql_readonly",
]


@pytest.fixture(scope="module")
def sqe(tmp_path_factory, idp):
    s = start_server(tmp_path_factory.mktemp("sqe-mcp"), CONFIG.format(port=idp.port))
    try:
        yield s
    finally:
        s.stop()


def url(server):
    return f"http://127.0.0.1:{server.http_port}/mcp"


def mcp_token(idp, server, user, scope="sqe:read", **form):
    """A token of `user` for the MCP endpoint (its audience), with `scope`."""
    return token(idp.port, username=user, password=f"{user}-secret", resource=url(server), scope=scope, **form)


def mcp(server, secret, calls):
    """Opens an MCP session with `secret` and makes `calls` (name, arguments) in order; their
    results (or, for tools/list, the tool names)."""

    async def go():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
        async with http, Client(streamable_http_client(url(server), http_client=http), mode="legacy") as c:
            out = []
            for name, args in calls:
                if name == "tools/list":
                    out.append(sorted(t.name for t in (await c.list_tools()).tools))
                else:
                    out.append(await c.call_tool(name, args))
            return out

    return asyncio.run(go())


def call(server, secret, name, args=None):
    return mcp(server, secret, [(name, args or {})])[0]


def rows(result):
    """A result's rows as objects of their columns."""
    assert not result.is_error, result.content[0].text
    names = [c["name"] for c in result.structured_content["columns"]]
    return [dict(zip(names, row)) for row in result.structured_content["rows"]]


def refusal(result):
    assert result.is_error, result.structured_content
    return result.content[0].text


@pytest.fixture(scope="module")
def seeded(sqe, idp):
    ada = token(idp.port, username="ada", password="ada-secret")
    trino_run(
        sqe,
        "ada",
        ada,
        "CREATE TABLE trips WITH (partitioning = ARRAY['city']) AS SELECT * FROM (VALUES "
        "(1, 'Oslo', 12.5), (2, 'Rome', 7.25), (3, 'Oslo', 3.0)) AS v(id, city, fare)",
    )
    trino_run(sqe, "ada", ada, "CREATE TABLE hidden AS SELECT 42 AS answer")
    trino_run(sqe, "ada", ada, "GRANT SELECT ON TABLE trips TO USER alice")
    return ada


def post(server, body, secret=None, headers=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if secret:
        h["Authorization"] = f"Bearer {secret}"
    h.update(headers or {})
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(url(server), data=data, headers=h, timeout=30)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def test_the_resource_names_its_issuer_and_refuses_other_tokens(sqe, idp):
    metadata = requests.get(
        f"http://127.0.0.1:{sqe.http_port}/.well-known/oauth-protected-resource/mcp", timeout=10
    ).json()
    assert metadata["resource"] == url(sqe)
    assert metadata["authorization_servers"] == [f"http://127.0.0.1:{idp.port}"]
    assert metadata["scopes_supported"] == ["sqe:read", "sqe:write"]

    # No token: 401 linking the metadata document, which names the IdP.
    r = post(sqe, INITIALIZE)
    assert r.status_code == 401
    challenge = r.headers["WWW-Authenticate"]
    link = f'resource_metadata="http://127.0.0.1:{sqe.http_port}/.well-known/oauth-protected-resource/mcp"'
    assert challenge.startswith("Bearer ") and link in challenge and 'scope="sqe:read"' in challenge
    # A token for another audience (SQE's Trino and Flight tokens), an expired one, a forged one.
    for secret, reason in [
        (token(idp.port, username="alice", password="alice-secret", scope="sqe:read"), "token audience is not accepted"),
        (mcp_token(idp, sqe, "alice", expired="true"), "token expired"),
        ("not.a.token", "malformed token"),
    ]:
        r = post(sqe, INITIALIZE, secret)
        assert r.status_code == 401, r.text
        assert 'error="invalid_token"' in r.headers["WWW-Authenticate"], r.headers
        assert reason in r.text
    # The right audience without the scope: 403 insufficient_scope.
    r = post(sqe, INITIALIZE, mcp_token(idp, sqe, "alice", scope="openid"))
    assert r.status_code == 403
    assert 'error="insufficient_scope"' in r.headers["WWW-Authenticate"]
    # An MCP token is no token for Trino HTTP.
    with pytest.raises(trino.exceptions.HttpError, match="401: b'token audience is not accepted'"):
        trino_run(sqe, "alice", mcp_token(idp, sqe, "alice"), "SELECT 1")


def test_read_tools_answer_as_the_user(sqe, idp, seeded):
    alice = mcp_token(idp, sqe, "alice")
    tools, catalogs, schemas, tables = mcp(
        sqe,
        alice,
        [("tools/list", {}), ("list_catalogs", {}), ("list_schemas", {}), ("list_tables", {})],
    )
    assert tools == sorted(READ_TOOLS + ["execute_sql_change"])
    assert {"Catalog": "iceberg"} in rows(catalogs)
    assert {"Schema": "default"} in rows(schemas)
    # alice may see trips, not hidden.
    assert rows(tables) == [{"Table": "trips"}]

    described = call(sqe, alice, "describe_table", {"table": "trips"})
    assert not described.is_error, described.content[0].text
    info = described.structured_content
    assert [(c["name"], c["type"]) for c in info["columns"]] == [
        ("id", "bigint"),
        ("city", "varchar"),
        ("fare", "decimal(4,2)"),
    ]
    assert info["partitioning"] == ["partition key (city)"]
    assert info["current_snapshot"]["operation"] == "append"

    snapshots = rows(call(sqe, alice, "table_snapshots", {"table": "trips"}))
    assert [s["operation"] for s in snapshots] == ["append"]
    assert snapshots[0]["snapshot_id"] == info["current_snapshot"]["snapshot_id"]
    sizes = 'SELECT sum(file_size_in_bytes) AS b FROM "trips$files"'
    size = rows(call(sqe, alice, "execute_sql_readonly", {"sql": sizes}))[0]["b"]
    assert size > 0
    assert rows(call(sqe, alice, "table_stats", {"table": "trips"})) == [{"rows": 3, "files": 2, "bytes": size}]
    sample = rows(call(sqe, alice, "sample_rows", {"table": "trips", "limit": 2}))
    assert len(sample) == 2 and set(sample[0]) == {"id", "city", "fare"}

    result = call(sqe, alice, "execute_sql_readonly", {"sql": "SELECT city, sum(fare) AS total FROM trips GROUP BY city ORDER BY city"})
    assert rows(result) == [{"city": "Oslo", "total": "15.50"}, {"city": "Rome", "total": "7.25"}]
    assert result.structured_content["truncated"] is False
    assert "Oslo" in result.content[0].text and "2 rows" in result.content[0].text
    plan = call(sqe, alice, "explain_query", {"sql": "SELECT city FROM trips WHERE fare > 5"})
    assert not plan.is_error, plan.content[0].text
    text = plan.content[0].text
    assert text.startswith("logical_plan\n") and "physical_plan\n" in text and "trips" in text, text
    assert "never runs it" in refusal(call(sqe, alice, "explain_query", {"sql": "ANALYZE SELECT 1"}))

    # What alice may not see does not exist for her here either.
    for name, args in [
        ("describe_table", {"table": "hidden"}),
        ("sample_rows", {"table": "hidden"}),
        ("execute_sql_readonly", {"sql": "SELECT * FROM hidden"}),
    ]:
        assert "NOT_FOUND: table 'iceberg.default.hidden'" in refusal(call(sqe, alice, name, args)), name


def test_readonly_runs_only_reading_statements(sqe, idp, seeded):
    alice = mcp_token(idp, sqe, "alice")
    for sql, message in [
        ("DROP TABLE trips", "not a read-only statement: DROP TABLE changes data or state"),
        ("SELECT 1; DROP TABLE trips", "a read-only statement is exactly one statement, not 2"),
        (
            "WITH gone AS (DELETE FROM trips RETURNING *) SELECT * FROM gone",
            "not a read-only statement: a query with a data-modifying part changes data or state",
        ),
        ("INSERT INTO trips VALUES (4, 'Oslo', 1.0)", "not a read-only statement: INSERT INTO"),
    ]:
        assert message in refusal(call(sqe, alice, "execute_sql_readonly", {"sql": sql})), sql
    assert rows(call(sqe, alice, "execute_sql_readonly", {"sql": "SELECT count(*) AS n FROM trips"})) == [{"n": 3}]


def test_changes_need_the_scope_a_role_and_the_privilege(sqe, idp, seeded):
    change = {"sql": "CREATE TABLE erins AS SELECT 1 AS x"}
    # A read token; the write scope without a write role; both, without the privilege.
    alice = mcp_token(idp, sqe, "alice")
    assert "changes need the scope sqe:write" in refusal(call(sqe, alice, "execute_sql_change", change))
    bob = mcp_token(idp, sqe, "bob", scope="sqe:read sqe:write")
    assert "changes need one of the roles [writer], which bob does not hold" in refusal(
        call(sqe, bob, "execute_sql_change", change)
    )
    erin = mcp_token(idp, sqe, "erin", scope="sqe:read sqe:write")
    assert "PERMISSION_DENIED: Access Denied: Cannot create tables in schema iceberg.default" in refusal(
        call(sqe, erin, "execute_sql_change", change)
    )
    # Nor does she change ada's rows: a table she may not see is one that does not exist to her.
    for sql in [
        "DELETE FROM trips WHERE id = 1",
        "UPDATE trips SET fare = 0",
        "MERGE INTO trips USING (VALUES (1)) AS v(id) ON trips.id = v.id WHEN MATCHED THEN DELETE",
    ]:
        assert refusal(call(sqe, erin, "execute_sql_change", {"sql": sql})) == (
            "NOT_FOUND: table 'iceberg.default.trips' does not exist"
        ), sql
    trino_run(sqe, "ada", seeded, "GRANT CREATE ON SCHEMA default TO USER erin")
    done = call(sqe, erin, "execute_sql_change", change)
    assert not done.is_error, done.content[0].text
    inserted = call(sqe, erin, "execute_sql_change", {"sql": "INSERT INTO erins VALUES (2)"})
    assert inserted.structured_content["update_count"] == 1
    # Row-level changes count the rows they changed.
    for sql, count in [
        ("UPDATE erins SET x = x * 10 WHERE x = 2", 1),
        ("MERGE INTO erins USING (VALUES (1), (3)) AS v(x) ON erins.x = v.x "
         "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (v.x)", 2),
    ]:
        changed = call(sqe, erin, "execute_sql_change", {"sql": sql})
        assert changed.structured_content["update_count"] == count, sql
    erin_trino = token(idp.port, username="erin", password="erin-secret")
    assert trino_run(sqe, "erin", erin_trino, "SELECT x FROM erins ORDER BY x") == [[3], [20]]


def test_a_session_belongs_to_its_user(sqe, idp, seeded):
    alice, bob = mcp_token(idp, sqe, "alice"), mcp_token(idp, sqe, "bob")
    opened = post(sqe, INITIALIZE, alice)
    assert opened.status_code == 200, opened.text
    session = opened.headers["Mcp-Session-Id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post(sqe, initialized, alice, headers).status_code == 202
    own = post(sqe, listing, alice, headers)
    assert own.status_code == 200 and "execute_sql_readonly" in own.text
    # bob with alice's session id gets what an unknown session gets.
    stolen = post(sqe, listing, bob, headers)
    unknown = post(sqe, listing, bob, {**headers, "Mcp-Session-Id": "0" * 32})
    assert (stolen.status_code, stolen.text) == (unknown.status_code, unknown.text) == (404, unknown.text)
    # Nor may he close it.
    requests.delete(url(sqe), headers={**headers, "Authorization": f"Bearer {bob}"}, timeout=10)
    assert post(sqe, listing, alice, headers).status_code == 200


def test_hostile_input_fails_cleanly(sqe, idp, seeded):
    alice = mcp_token(idp, sqe, "alice")
    # Malformed JSON-RPC bodies: refused, the server serves on.
    for body in [b"{not json", b"[]", b'{"jsonrpc": "2.0", "id": 1, "method": 7}', b"\xff\xfe" * 1000]:
        r = post(sqe, body, alice)
        assert 400 <= r.status_code < 500, (body[:20], r.status_code, r.text)
    too_big = post(sqe, b'{"x": "' + b"a" * (2 << 20) + b'"}', alice)
    assert too_big.status_code == 413
    # A 4 KB-deep statement and unknown tools or arguments: errors, not crashes.
    deep = "SELECT " + "(" * 4096 + "1" + ")" * 4096
    message = refusal(call(sqe, alice, "execute_sql_readonly", {"sql": deep}))
    assert message.startswith(("INVALID_INPUT", "RESOURCE_EXHAUSTED")), message
    assert "must be a positive integer" in refusal(call(sqe, alice, "sample_rows", {"table": "trips", "limit": -1}))
    assert "'table' must be a name" in refusal(call(sqe, alice, "sample_rows", {"table": "x" * 300}))
    # A cell of 65,000 lines beside a 131,000-character one (a table drawn with each line padded
    # to the widest would take 8.5 GB), and a 300,000-character column name: small text, or refused.
    sql = "SELECT repeat(chr(10), 65000) AS a, repeat('x', 131000) AS b"
    tall = call(sqe, alice, "execute_sql_readonly", {"sql": sql})
    assert len(tall.content[0].text) < 2000, len(tall.content[0].text)
    assert [len(v) for v in tall.structured_content["rows"][0]] == [65000, 131000]
    wide = call(sqe, alice, "execute_sql_readonly", {"sql": f'SELECT 1 AS "{"n" * 300000}"'})
    assert "column names and types alone take more than 262144 bytes" in refusal(wide)
    assert rows(call(sqe, alice, "execute_sql_readonly", {"sql": "SELECT 1 AS one"})) == [{"one": 1}]


def test_an_mcp_token_is_for_mcp_alone(tmp_path_factory, idp):
    """Even where Trino HTTP takes tokens of any audience, a token issued for the MCP endpoint
    is not one of them: an agent's read token cannot run statements there."""
    config = (
        f'[auth]\nallow_anonymous = false\n\n[auth.oidc]\nissuer = "http://127.0.0.1:{idp.port}"\n\n'
        "[mcp]\nenabled = true\n"
    )
    s = start_server(tmp_path_factory.mktemp("sqe-mcp-any-audience"), config)
    try:
        agent = mcp_token(idp, s, "alice")
        with pytest.raises(trino.exceptions.HttpError, match="token audience is not accepted"):
            trino_run(s, "alice", agent, "SELECT 1")
        anyone = token(idp.port, username="alice", password="alice-secret", aud="anything")
        assert trino_run(s, "alice", anyone, "SELECT 1") == [[1]]
        assert rows(call(s, agent, "execute_sql_readonly", {"sql": "SELECT 1 AS one"})) == [{"one": 1}]
    finally:
        s.stop()


def test_a_huge_answer_is_cut_with_a_notice(sqe, idp, seeded):
    alice = mcp_token(idp, sqe, "alice")
    before = rss_kib(sqe.process.pid)
    result = call(sqe, alice, "execute_sql_readonly", {"sql": "SELECT value, value * 2 AS twice FROM range(10000000)"})
    answer = result.structured_content
    assert answer["row_count"] == 1000 and answer["truncated"] is True
    assert answer["notice"] == "the result was cut at 1000 rows (the server's bound): it has more"
    assert answer["columns"] == [{"name": "value", "type": "Int64"}, {"name": "twice", "type": "Int64"}]
    assert all(twice == 2 * value for value, twice in answer["rows"])
    assert "NOTICE: the result was cut at 1000 rows" in result.content[0].text
    # Ten million rows were never held: the server grew by less than 200 MB.
    assert rss_kib(sqe.process.pid) - before < 200 * 1024
    # The byte bound (256 KiB of JSON rows) cuts wide rows sooner, and the text with them.
    wide = call(sqe, alice, "execute_sql_readonly", {"sql": "SELECT repeat('x', 100000) AS w FROM range(100)"})
    assert wide.structured_content["row_count"] == 2
    assert wide.structured_content["notice"] == (
        "the result was cut at 2 rows, 262144 bytes of JSON (the server's bound): it has more"
    )
    assert len(wide.content[0].text) < 262144 + 1000


STATIC_READER = "static-reader-token-0123456789"
STATIC_WRITER = "static-writer-token-0123456789"


@pytest.fixture(scope="module")
def static_sqe(tmp_path_factory):
    """A server without an identity provider: MCP takes the static principals' tokens."""
    config = (
        "[auth]\nallow_anonymous = false\n\n"
        '[[auth.static]]\nname = "reader"\ntoken_env = "READER_TOKEN"\n\n'
        '[[auth.static]]\nname = "loader"\ntoken_env = "WRITER_TOKEN"\nroles = ["writer"]\n'
        'scopes = ["sqe:read", "sqe:write"]\n\n'
        '[mcp]\nenabled = true\nallow_writes = true\nwrite_roles = ["writer"]\n'
    )
    env = {"READER_TOKEN": STATIC_READER, "WRITER_TOKEN": STATIC_WRITER}
    s = start_server(tmp_path_factory.mktemp("sqe-mcp-static"), config, env)
    try:
        yield s
    finally:
        s.stop()


def test_static_tokens_without_an_identity_provider(static_sqe):
    made = call(static_sqe, STATIC_WRITER, "execute_sql_change", {"sql": "CREATE TABLE t AS SELECT 1 AS x"})
    assert made.structured_content["update_count"] == 1
    # A static principal without scopes reads, and may not change.
    assert rows(call(static_sqe, STATIC_READER, "execute_sql_readonly", {"sql": "SELECT x FROM t"})) == [{"x": 1}]
    assert "changes need the scope sqe:write" in refusal(
        call(static_sqe, STATIC_READER, "execute_sql_change", {"sql": "DROP TABLE t"})
    )
    r = post(static_sqe, INITIALIZE, "not-a-static-token-at-all")
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["WWW-Authenticate"]
    # The metadata document names no authorization server: there is none.
    metadata = requests.get(
        f"http://127.0.0.1:{static_sqe.http_port}/.well-known/oauth-protected-resource", timeout=10
    ).json()
    assert metadata["authorization_servers"] == []


def test_browsers_from_other_origins_are_refused(sqe, idp, seeded):
    alice = mcp_token(idp, sqe, "alice")
    r = post(sqe, INITIALIZE, alice, {"Origin": "https://evil.example"})
    assert r.status_code == 403, r.text
    r = post(sqe, INITIALIZE, alice, {"Host": "evil.example"})
    assert r.status_code == 403, r.text
    assert post(sqe, INITIALIZE, alice).status_code == 200
