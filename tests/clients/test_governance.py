"""The governance matrix (tests/fixtures/governance.json) over the wire: every persona runs every
case over Trino HTTP, over Flight SQL, over MCP (execute_sql_readonly) and over Quack (DuckDB's own
client's quack_query; a case's writes go over Trino HTTP for both) with their own token from the
test IdP, and gets the same exact rows as embedded
(tests/hardening.rs). ada's token carries the admin role, carol's the
`support` role whose columns are masked, bob gets the `analyst` role (row-filtered) from the catalog,
dave holds nothing and sees nothing, in Flight's GetTables too.
"""

import datetime
import json
from pathlib import Path

import duckdb
import pytest

from conftest import start_server, token
from test_mcp import call, mcp_token, rows
from test_privileges import flight_run, flight_tables, trino_run
from test_quack import duck, find_quack_port  # noqa: F401 - duck is a fixture used here

MATRIX = json.loads((Path(__file__).parent.parent / "fixtures" / "governance.json").read_text())
PERSONAS = list(MATRIX["personas"])

CONFIG = (
    '[auth]\nallow_anonymous = false\nadmin_roles = ["sqe_admin"]\n\n'
    '[auth.oidc]\nissuer = "http://127.0.0.1:{port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
    '[access]\ndefault = "deny"\n\n'
    '[files]\nallowed_local_prefixes = ["{files}"]\n\n'
    '[mcp]\nenabled = true\n\n'
    '[quack]\nenabled = true\nport = 0\n'
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return tmp_path_factory.mktemp("governance-files")


@pytest.fixture(scope="module")
def sqe(tmp_path_factory, idp, files):
    root = tmp_path_factory.mktemp("sqe-governance")
    s = start_server(root, CONFIG.replace("{port}", str(idp.port)).replace("{files}", str(files)))
    find_quack_port(s)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def jwt(idp):
    return {u: token(idp.port, username=u, password=f"{u}-secret") for u in PERSONAS}


@pytest.fixture(scope="module")
def mcp_jwt(idp, sqe):
    return {u: mcp_token(idp, sqe, u) for u in PERSONAS}


@pytest.fixture(scope="module")
def seeded(sqe, jwt):
    for sql in MATRIX["setup"]:
        trino_run(sqe, "ada", jwt["ada"], sql)
    rows = trino_run(
        sqe, "ada", jwt["ada"], 'SELECT snapshot_id FROM gov."customers$snapshots" ORDER BY committed_at LIMIT 1'
    )
    return str(rows[0][0])


def cell(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, datetime.date):
        return v.isoformat()
    return str(v)


def run_trino(sqe, jwt, persona, sql):
    return ["|".join(cell(v) for v in row) for row in trino_run(sqe, persona, jwt[persona], sql)]


def run_flight(sqe, jwt, persona, sql):
    return ["|".join(cell(v) for v in row.values()) for row in flight_run(sqe, jwt[persona], sql)]


def mcp_runner(mcp_jwt, statements):
    """Runs a case's last statement with MCP's execute_sql_readonly, the others over Trino HTTP."""
    last = statements[-1]

    def run(sqe, jwt, persona, sql):
        if sql != last:
            return run_trino(sqe, jwt, persona, sql)
        result = call(sqe, mcp_jwt[persona], "execute_sql_readonly", {"sql": sql})
        if result.is_error:
            raise RuntimeError(result.content[0].text)
        return ["|".join(cell(v) for v in row) for row in result.structured_content["rows"]]

    return run


def quack_runner(duck, statements):
    """Runs a case's last statement with DuckDB's quack_query, the others over Trino HTTP."""
    last = statements[-1]

    def run(sqe, jwt, persona, sql):
        if sql != last:
            return run_trino(sqe, jwt, persona, sql)
        rows = duck.execute(
            f"FROM quack_query('quack:127.0.0.1:{sqe.quack_port}', $1, token => $2)", [sql, jwt[persona]]
        ).fetchall()
        return ["|".join(cell(v) for v in row) for row in rows]

    return run


@pytest.mark.parametrize("protocol", ["trino", "flight", "mcp", "quack"])
@pytest.mark.parametrize("persona", PERSONAS)
def test_the_governance_matrix_holds(sqe, jwt, mcp_jwt, duck, files, seeded, protocol, persona):
    for case in MATRIX["cases"]:
        statements = [
            s.replace("{tag}", f"{protocol}_{persona}").replace("{dir}", str(files)).replace("{first_snapshot}", seeded)
            for s in case["sql"]
        ]
        run = {
            "trino": run_trino,
            "flight": run_flight,
            "mcp": mcp_runner(mcp_jwt, statements),
            "quack": quack_runner(duck, statements),
        }[protocol]
        expected = case[persona]
        got, error = [], None
        for sql in statements:
            try:
                got = run(sqe, jwt, persona, sql)
            except Exception as e:  # noqa: BLE001 - both clients' errors carry the server's message
                error = str(e)
                break
        if isinstance(expected, dict):
            assert error is not None, f"{case['name']} as {persona}: expected an error, got {got}"
            assert expected["error"] in error, f"{case['name']} as {persona}: {error}"
        else:
            assert error is None, f"{case['name']} as {persona}: {error}"
            assert got == expected, f"{case['name']} as {persona}"


def test_the_outsider_lists_nothing(sqe, jwt, mcp_jwt, seeded):
    assert flight_tables(sqe, jwt["dave"], "gov") == []
    listed = call(sqe, mcp_jwt["dave"], "list_tables", {"schema": "gov"})
    assert not listed.is_error and listed.structured_content["rows"] == []
    assert run_trino(sqe, jwt, "dave", "SHOW TABLES FROM gov") == []
    assert {"customers", "orders", "spend"} <= set(flight_tables(sqe, jwt["carol"], "gov"))


def test_sample_rows_are_filtered_and_masked(sqe, jwt, mcp_jwt, seeded):
    """sample_rows gives a persona what their own query over Trino HTTP gives."""
    for persona in ("bob", "carol"):
        for table, columns in (("orders", "id, region, amount"), ("customers", "id, name, email, phone, born")):
            result = call(sqe, mcp_jwt[persona], "sample_rows", {"schema": "gov", "table": table, "limit": 100})
            sampled = sorted("|".join(cell(r[c.strip()]) for c in columns.split(",")) for r in rows(result))
            over_trino = sorted(run_trino(sqe, jwt, persona, f"SELECT {columns} FROM gov.{table}"))
            assert sampled == over_trino, (persona, table)


def test_a_persona_cannot_change_the_policies(sqe, jwt, seeded):
    for persona in ("bob", "carol"):
        for sql in (
            "ALTER TABLE gov.customers ALTER COLUMN phone DROP MASK",
            "DROP ROW FILTER eu ON gov.orders",
            "SHOW MASKS ON gov.customers",
        ):
            with pytest.raises(Exception) as e:
                trino_run(sqe, persona, jwt[persona], sql)
            assert "only the owner of iceberg.gov." in str(e.value), (persona, sql, str(e.value))


def test_an_expired_token_is_refused_over_quack(sqe, idp, duck, seeded):
    expired = token(idp.port, username="alice", password="alice-secret", expired="true")
    with pytest.raises(duckdb.InvalidInputException, match="Authentication failed: token expired"):
        duck.execute(f"FROM quack_query('quack:127.0.0.1:{sqe.quack_port}', 'SELECT 1', token => $1)", [expired])
