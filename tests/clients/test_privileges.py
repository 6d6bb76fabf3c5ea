"""Privileges over the wire, on a server that denies what it does not grant (`[access] default =
"deny"`): alice's table is absent for bob over Trino HTTP and Flight SQL alike until alice grants
him SELECT; then he reads it and may not write or drop it; a DENY to a role wins; the errors are
Trino's PERMISSION_DENIED and Flight's PERMISSION_DENIED, with the message naming table and
privilege. The users are the test IdP's (alice, bob; ada's token carries the admin role).
"""

import adbc_driver_flightsql.dbapi as flight_sql
import pytest
import trino
from adbc_driver_manager import Error as AdbcError
from trino.auth import JWTAuthentication
from trino.exceptions import TrinoQueryError

from conftest import start_server, token

CONFIG = (
    '[auth]\nallow_anonymous = false\nadmin_roles = ["sqe_admin"]\n\n'
    '[auth.oidc]\nissuer = "http://127.0.0.1:{port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
    '[access]\ndefault = "deny"\n'
)


@pytest.fixture(scope="module")
def sqe(tmp_path_factory, idp):
    s = start_server(tmp_path_factory.mktemp("sqe-privileges"), CONFIG.format(port=idp.port))
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def jwt(idp):
    return {u: token(idp.port, username=u, password=f"{u}-secret") for u in ("alice", "bob", "ada")}


def trino_run(server, user, secret, sql):
    conn = trino.dbapi.connect(
        host="127.0.0.1",
        port=server.http_port,
        user=user,
        catalog="iceberg",
        schema="default",
        http_scheme="http",
        auth=JWTAuthentication(secret),
        allow_insecure_auth=True,
    )
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


def trino_refusal(server, user, secret, sql):
    with pytest.raises(TrinoQueryError) as e:
        trino_run(server, user, secret, sql)
    return e.value.error_name, e.value.message


def flight_run(server, secret, sql):
    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {secret}"}
    with flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=kwargs) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetch_arrow_table().to_pylist()


def flight_refusal(server, secret, sql):
    """The error's text, with its gRPC status (ADBC's status code) checked against the message."""
    with pytest.raises(AdbcError) as e:
        flight_run(server, secret, sql)
    text = str(e.value)
    expected = "UNAUTHORIZED" if "Access Denied" in text else "NOT_FOUND"
    assert e.value.status_code.name == expected, (e.value.status_code, text)
    return text


def flight_tables(server, secret, schema="default"):
    """The tables Flight SQL's GetTables lists in iceberg.<schema>."""
    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {secret}"}
    with flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=kwargs) as conn:
        objects = conn.adbc_get_objects(depth="tables", catalog_filter="iceberg", db_schema_filter=schema)
        rows = objects.read_all().to_pylist()
    return sorted(t["table_name"] for c in rows for s in c["catalog_db_schemas"] or [] for t in s["db_schema_tables"] or [])


def test_a_table_is_its_owners_until_granted(sqe, jwt):
    alice, bob, ada = jwt["alice"], jwt["bob"], jwt["ada"]
    assert trino_refusal(sqe, "alice", alice, "CREATE TABLE sales AS SELECT 1 AS id, 10 AS amount") == (
        "PERMISSION_DENIED",
        "Access Denied: Cannot create tables in schema iceberg.default",
    )
    trino_run(sqe, "ada", ada, "GRANT CREATE ON SCHEMA default TO USER alice")
    trino_run(sqe, "alice", alice, "CREATE TABLE sales AS SELECT 1 AS id, 10 AS amount")
    assert trino_run(sqe, "alice", alice, "SELECT id, amount FROM sales") == [[1, 10]]

    # Absent for bob, over both protocols, with the text of a table that does not exist.
    missing = trino_refusal(sqe, "bob", bob, "SELECT * FROM nope")
    assert trino_refusal(sqe, "bob", bob, "SELECT * FROM sales") == (
        missing[0],
        "table 'iceberg.default.sales' not found",
    )
    assert trino_run(sqe, "bob", bob, "SHOW TABLES") == []
    listing = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'default'"
    assert trino_run(sqe, "bob", bob, listing) == []
    assert trino_run(sqe, "alice", alice, listing) == [["sales"]]
    assert flight_tables(sqe, bob) == []
    assert flight_tables(sqe, alice) == ["sales"]
    message = flight_refusal(sqe, bob, "SELECT * FROM sales")
    assert "table 'iceberg.default.sales' not found" in message, message

    # Granted SELECT: bob reads, and may not write, drop or pass it on.
    trino_run(sqe, "alice", alice, "GRANT SELECT ON TABLE sales TO USER bob")
    assert trino_run(sqe, "bob", bob, "SELECT id, amount FROM sales") == [[1, 10]]
    assert flight_run(sqe, bob, "SELECT id, amount FROM sales") == [{"id": 1, "amount": 10}]
    assert trino_refusal(sqe, "bob", bob, "INSERT INTO sales VALUES (2, 20)") == (
        "PERMISSION_DENIED",
        "Access Denied: Cannot insert into table iceberg.default.sales",
    )
    message = flight_refusal(sqe, bob, "DROP TABLE sales")
    assert "Access Denied: Cannot drop table iceberg.default.sales" in message, message
    assert trino_refusal(sqe, "bob", bob, "GRANT SELECT ON TABLE sales TO USER ada") == (
        "PERMISSION_DENIED",
        "Access Denied: Cannot grant privileges on iceberg.default.sales",
    )

    # A DENY wins over the grant.
    trino_run(sqe, "alice", alice, "DENY SELECT ON TABLE sales TO USER bob")
    assert trino_refusal(sqe, "bob", bob, "SELECT * FROM sales") == (
        "PERMISSION_DENIED",
        "Access Denied: Cannot select from table iceberg.default.sales",
    )
    assert trino_run(sqe, "ada", ada, "SHOW GRANTS ON TABLE sales") == [
        ["bob", "USER", "iceberg", "default", "sales", "DENY SELECT", "NO"],
        ["bob", "USER", "iceberg", "default", "sales", "GRANT SELECT", "NO"],
    ]
    # REVOKE takes back a GRANT and a DENY alike.
    trino_run(sqe, "alice", alice, "REVOKE SELECT ON TABLE sales FROM USER bob")
    assert trino_refusal(sqe, "bob", bob, "SELECT * FROM sales")[1] == "table 'iceberg.default.sales' not found"
    assert trino_run(sqe, "ada", ada, "SHOW GRANTS ON TABLE sales") == []
    # The server serves on, and the admin reads everything.
    assert trino_run(sqe, "ada", ada, "SELECT count(*) FROM sales") == [[1]]


def test_session_functions_answer_per_user(sqe, jwt):
    assert trino_run(sqe, "ada", jwt["ada"], "SELECT current_user, is_role_in_session('sqe_admin')") == [
        ["ada", True]
    ]
    assert trino_run(sqe, "bob", jwt["bob"], "SELECT current_user, is_role_in_session('sqe_admin')") == [
        ["bob", False]
    ]


def test_malformed_grants_fail_cleanly(sqe, jwt):
    ada = jwt["ada"]
    huge = "GRANT SELECT ON TABLE sales TO " + ", ".join(f"USER u{i}" for i in range(5000))
    assert trino_refusal(sqe, "ada", ada, huge.replace("sales", "nope")) == (
        "NOT_FOUND",
        "table 'iceberg.default.nope' does not exist",
    )
    assert trino_refusal(sqe, "ada", ada, "GRANT SELECT ON TABLE nope TO GROUP g")[0] in (
        "NOT_SUPPORTED",
        "SYNTAX_ERROR",
    )
    assert trino_run(sqe, "ada", ada, "SELECT 1") == [[1]]


def test_a_row_filter_holds_on_both_protocols(sqe, jwt):
    alice, bob = jwt["alice"], jwt["bob"]
    trino_run(sqe, "ada", jwt["ada"], "GRANT CREATE ON SCHEMA default TO USER alice")
    trino_run(
        sqe,
        "alice",
        alice,
        "CREATE TABLE orders AS SELECT * FROM (VALUES (1, 'eu'), (2, 'us'), (3, 'eu')) AS v(id, region)",
    )
    trino_run(sqe, "alice", alice, "GRANT SELECT ON TABLE orders TO USER bob")
    trino_run(sqe, "alice", alice, "CREATE ROW FILTER eu ON orders USING (region = 'eu') FOR USER bob")
    assert trino_run(sqe, "bob", bob, "SELECT id FROM orders ORDER BY id") == [[1], [3]]
    assert flight_run(sqe, bob, "SELECT id FROM orders ORDER BY id") == [{"id": 1}, {"id": 3}]
    assert trino_run(sqe, "bob", bob, "SELECT count(*) FROM orders WHERE region = 'us'") == [[0]]
    assert trino_run(sqe, "alice", alice, "SELECT count(*) FROM orders") == [[3]]
    # With DELETE and UPDATE he changes the rows he sees and no other, on either protocol; a
    # condition on the rows his filter hides matches none; TRUNCATE would remove them: refused.
    trino_run(sqe, "alice", alice, "GRANT DELETE ON TABLE orders TO USER bob")
    trino_run(sqe, "alice", alice, "GRANT UPDATE ON TABLE orders TO USER bob")
    assert trino_run(sqe, "bob", bob, "UPDATE orders SET id = id * 10 WHERE region = 'us' OR id = 1") == [[1]]
    assert trino_run(sqe, "bob", bob, "DELETE FROM orders WHERE region = 'us'") == [[0]]
    assert trino_refusal(sqe, "bob", bob, "TRUNCATE TABLE orders") == (
        "PERMISSION_DENIED",
        "Access Denied: Cannot truncate table iceberg.default.orders: a row filter or a column mask "
        "applies to you on it; DELETE FROM removes the rows you see",
    )
    assert flight_update(sqe, bob, "DELETE FROM orders") == 2
    assert trino_run(sqe, "alice", alice, "SELECT id, region FROM orders") == [[2, "us"]]
    assert trino_refusal(sqe, "bob", bob, "DROP ROW FILTER eu ON orders") == (
        "PERMISSION_DENIED",
        "Access Denied: only the owner of iceberg.default.orders or an admin may do this",
    )


def flight_update(server, secret, sql):
    """The row count Flight SQL's executeUpdate reports for `sql`."""
    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {secret}"}
    with flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=kwargs) as conn:
        with conn.cursor() as cur:
            cur.adbc_statement.set_sql_query(sql)
            return cur.adbc_statement.execute_update()


def flight_columns(server, secret, table, schema="default"):
    """The columns of a table as Flight SQL's GetTables (with its schema) shows them."""
    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {secret}"}
    with flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=kwargs) as conn:
        return conn.adbc_get_table_schema(table, catalog_filter="iceberg", db_schema_filter=schema).names


def test_a_reader_by_columns_sees_only_those_columns(sqe, jwt):
    alice, bob = jwt["alice"], jwt["bob"]
    trino_run(sqe, "ada", jwt["ada"], "GRANT CREATE ON SCHEMA default TO USER alice")
    trino_run(
        sqe,
        "alice",
        alice,
        "CREATE TABLE payroll AS SELECT * FROM (VALUES (1, 'Ada', 100)) AS v(id, name, salary)",
    )
    trino_run(sqe, "alice", alice, "GRANT SELECT (id, name) ON TABLE payroll TO USER bob")
    assert trino_run(sqe, "bob", bob, "SELECT id, name FROM payroll") == [[1, "Ada"]]
    assert trino_refusal(sqe, "bob", bob, "SELECT * FROM payroll") == (
        "PERMISSION_DENIED",
        "Access Denied: Cannot select from columns [salary] in table iceberg.default.payroll",
    )
    describe = "DESCRIBE payroll"
    assert [r[0] for r in trino_run(sqe, "bob", bob, describe)] == ["id", "name"]
    assert [r[0] for r in trino_run(sqe, "alice", alice, describe)] == ["id", "name", "salary"]
    columns = "SELECT column_name FROM information_schema.columns WHERE table_name = 'payroll'"
    assert trino_run(sqe, "bob", bob, columns) == [["id"], ["name"]]
    assert flight_columns(sqe, bob, "payroll") == ["id", "name"]
    assert flight_columns(sqe, alice, "payroll") == ["id", "name", "salary"]
