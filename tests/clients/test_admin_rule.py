"""Who is an admin is one rule, and every protocol asks the engine for it: a principal holding one
of `[auth] admin_roles`; with none set, everyone when `[access] default = "allow"` and nobody when it
is `"deny"`. What an admin may do to another user's work is checked here over each protocol that
lets anyone do it, under all three settings:

- Trino HTTP: `DELETE /v1/query/{id}` of alice's running query, by bob (no roles) and by ada (the
  role `sqe_admin`).
- Flight SQL: CancelFlightInfo of alice's planned, unfetched result, by bob and by ada.
- MCP and DuckDB's Quack, which cancel nothing of anyone's: who reads alice's statements (her name
  and their text) in `system.runtime.queries`, which the engine shows its admins only.

A refusal is the answer for work that does not exist, and leaves alice's work as it was; a cancel
ends it. Each server has static principals only (alice, bob, ada), so no identity provider runs.
"""

import duckdb
import pyarrow as pa
import pyarrow.flight as flight
import pytest
import requests

from conftest import start_server
from flight_messages import field, parse, statement
from test_mcp import call, rows
from test_quack import find_quack_port, load

USERS = {"alice": [], "bob": [], "ada": ["sqe_admin"]}
TOKENS = {user: f"{user}-token-0123456789abcdef" for user in USERS}
NO_RESULT = "result not found (already fetched, or expired)"
# More rows than a first page or a parked result's first batches: the query is still running when
# it is cancelled.
LONG = "SELECT value FROM range(0, 20000)"

# (name, [auth] admin_roles, [access] default, who of bob and ada may end alice's work)
SETTINGS = [
    ("admin roles set", '["sqe_admin"]', "allow", {"ada"}),
    ("no admin roles, allow", "[]", "allow", {"bob", "ada"}),
    ("no admin roles, deny", "[]", "deny", set()),
]


def config(admin_roles, default):
    principals = "".join(
        f'[[auth.static]]\nname = "{user}"\ntoken_env = "{user.upper()}_TOKEN"\nroles = {roles}\n\n'
        for user, roles in USERS.items()
    ).replace("'", '"')
    return (
        f"[auth]\nallow_anonymous = false\nadmin_roles = {admin_roles}\n\n"
        + principals
        + f'[access]\ndefault = "{default}"\n\n'
        + "[mcp]\nenabled = true\n\n[quack]\nenabled = true\nport = 0\n"
    )


@pytest.fixture(scope="module", params=SETTINGS, ids=[s[0] for s in SETTINGS])
def setting(request, tmp_path_factory):
    name, admin_roles, default, enders = request.param
    env = {f"{user.upper()}_TOKEN": secret for user, secret in TOKENS.items()}
    root = tmp_path_factory.mktemp("sqe-admin-rule")
    s = start_server(root, config(admin_roles, default), env)
    find_quack_port(s)
    try:
        yield s, enders
    finally:
        s.stop()


def trino_headers(user):
    return {"X-Trino-User": user, "Authorization": f"Bearer {TOKENS[user]}"}


def finish(body, headers):
    """Follows nextUri to the end: the rows and the last page."""
    rows = list(body.get("data", []))
    while "nextUri" in body:
        r = requests.get(body["nextUri"], headers=headers, timeout=60)
        assert r.status_code == 200, (r.status_code, r.text)
        body = r.json()
        rows.extend(body.get("data", []))
    return rows, body


def test_who_may_kill_another_users_trino_query(setting):
    server, enders = setting
    base = f"http://127.0.0.1:{server.http_port}"
    alice = trino_headers("alice")
    for killer in ("bob", "ada"):
        r = requests.post(f"{base}/v1/statement", data=LONG.encode(), headers=alice, timeout=60)
        assert r.status_code == 200, r.text
        started = r.json()
        qid = started["id"]
        killed = requests.delete(f"{base}/v1/query/{qid}", headers=trino_headers(killer), timeout=30)
        if killer in enders:
            assert (killed.status_code, killed.text) == (204, ""), killer
            # The query is gone: its owner's next page is Trino's error for a killed query.
            gone = requests.get(started["nextUri"], headers=alice, timeout=30)
            assert gone.status_code == 200, (killer, gone.text)
            error = gone.json()["error"]
            assert (error["errorName"], error["errorCode"]) == ("ADMINISTRATIVELY_KILLED", 38), killer
        else:
            assert (killed.status_code, killed.text) == (404, f"query {qid} not found"), killer
            rows, last = finish(started, alice)
            assert "error" not in last, last.get("error")
            assert sorted(row[0] for row in rows) == list(range(20000)), killer


def test_who_may_cancel_another_users_flight_result(setting):
    server, enders = setting
    options = {
        user: flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {secret}".encode())], timeout=60)
        for user, secret in TOKENS.items()
    }
    with flight.FlightClient(f"grpc://127.0.0.1:{server.flight_port}") as client:
        for canceller in ("bob", "ada"):
            info = client.get_flight_info(statement(LONG), options["alice"])
            cancel = flight.Action("CancelFlightInfo", field(1, info.serialize()))
            answers = [r.body.to_pybytes() for r in client.do_action(cancel, options[canceller])]
            ticket = info.endpoints[0].ticket
            if canceller in enders:
                # CancelFlightInfoResult.status: CANCELLED (1); the result is gone.
                assert [parse(a) for a in answers] == [[(1, 1)]], canceller
                with pytest.raises(pa.ArrowKeyError) as gone:
                    client.do_get(ticket, options["alice"]).read_all()
                assert NO_RESULT in str(gone.value), canceller
            else:
                # NOT_CANCELLABLE (3), as for a result that does not exist; alice still reads hers.
                assert [parse(a) for a in answers] == [[(1, 3)]], canceller
                table = client.do_get(ticket, options["alice"]).read_all()
                assert table.column("value").to_pylist() == list(range(20000)), canceller


MARK = "SELECT 'alice was here' AS mark"
# Rows of alice's statement as the reader sees them: an admin sees its user and text; anyone else
# sees only that some statement exists.
READ_MARK = (
    "SELECT count(*) > 0 AS seen FROM system.runtime.queries "
    "WHERE \"user\" = 'alice' AND query = 'SELECT ''alice was here'' AS mark'"
)


def alice_runs_the_mark(server):
    rows, last = finish(
        requests.post(
            f"http://127.0.0.1:{server.http_port}/v1/statement",
            data=MARK.encode(),
            headers=trino_headers("alice"),
            timeout=60,
        ).json(),
        trino_headers("alice"),
    )
    assert "error" not in last, last.get("error")
    assert rows == [["alice was here"]]


def test_who_reads_another_users_statements_over_mcp(setting):
    server, enders = setting
    alice_runs_the_mark(server)
    for reader in ("bob", "ada"):
        seen = rows(call(server, TOKENS[reader], "execute_sql_readonly", {"sql": READ_MARK}))
        assert seen == [{"seen": reader in enders}], reader


def test_who_reads_another_users_statements_over_quack(setting):
    server, enders = setting
    alice_runs_the_mark(server)
    con = duckdb.connect()
    try:
        load(con, "httpfs")
        load(con, "quack")
        for reader in ("bob", "ada"):
            seen = con.execute(
                f"SELECT seen FROM quack_query('quack:127.0.0.1:{server.quack_port}', $${READ_MARK}$$, "
                f"token => '{TOKENS[reader]}')"
            ).fetchall()
            assert seen == [(reader in enders,)], reader
    finally:
        con.close()
