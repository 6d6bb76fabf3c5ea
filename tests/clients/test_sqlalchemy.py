"""The Python `trino` client (DB-API) and SQLAlchemy on top of it, against the secured sqe-server, once
with a bearer JWT from the OIDC provider (JWTAuthentication) and once with a password
(BasicAuthentication): create a table, insert, select with parameters, read the metadata through
SQLAlchemy's inspector, and cancel a long query."""

import threading
import time
import warnings
from datetime import datetime
from decimal import Decimal

import pytest
import sqlalchemy as sa
import trino
from sqlalchemy import types as satypes
from trino.auth import BasicAuthentication, JWTAuthentication
from trino.exceptions import TrinoUserError
from trino.sqlalchemy import datatype as trino_types

from conftest import token


@pytest.fixture(params=["jwt", "basic"])
def kind(request):
    return request.param


@pytest.fixture
def auth(kind, idp):
    if kind == "jwt":
        return JWTAuthentication(token(idp.port))
    return BasicAuthentication("alice", "alice-secret")


def connect(server, auth, schema="default"):
    return trino.dbapi.connect(
        host="127.0.0.1",
        port=server.http_port,
        user="alice",
        catalog="iceberg",
        schema=schema,
        http_scheme="http",
        auth=auth,
        allow_insecure_auth=True,
    )


def run(server, auth, sql, params=None, schema="default"):
    cur = connect(server, auth, schema).cursor()
    cur.execute(sql, params) if params is not None else cur.execute(sql)
    return cur.fetchall()


def engine(server, auth, schema="default"):
    return sa.create_engine(
        f"trino://alice@127.0.0.1:{server.http_port}/iceberg/{schema}",
        connect_args={"auth": auth, "http_scheme": "http", "allow_insecure_auth": True},
    )


@pytest.fixture
def new_schema(secure_server, idp):
    """Creates schemas that are dropped (with their tables) after the test, so that each test sees
    only `default` and `information_schema` besides its own."""
    created = []

    def create(name, auth):
        assert run(secure_server, auth, f"CREATE SCHEMA {name}") == [[True]]
        created.append(name)
        return name

    yield create
    for name in created:
        run(secure_server, JWTAuthentication(token(idp.port)), f"DROP SCHEMA {name} CASCADE")


ORDERS = (
    "CREATE TABLE orders (id bigint NOT NULL, customer varchar COMMENT 'who ordered', amount decimal(10, 2), "
    "at timestamp, tags array(varchar)) COMMENT 'orders placed'"
)
ORDERS_ROWS = (
    "INSERT INTO orders VALUES "
    "(1, 'acme', 12.50, TIMESTAMP '2026-11-02 09:15:00', ARRAY['a', 'b']), "
    "(2, 'globex', 7.00, TIMESTAMP '2026-11-03 10:00:00.123456', ARRAY[]), "
    "(3, NULL, NULL, NULL, NULL)"
)


def test_create_insert_and_select_with_parameters(secure_server, kind, auth, new_schema):
    schema = new_schema(f"shop_{kind}", auth)
    cur = connect(secure_server, auth, schema).cursor()
    cur.execute(ORDERS)
    assert cur.fetchall() == [[True]]
    cur.execute(ORDERS_ROWS)
    assert cur.fetchall() == [[3]]
    assert cur.rowcount == 3
    assert run(secure_server, auth, "SELECT * FROM orders ORDER BY id", schema=schema) == [
        [1, "acme", Decimal("12.50"), datetime(2026, 11, 2, 9, 15), ["a", "b"]],
        [2, "globex", Decimal("7.00"), datetime(2026, 11, 3, 10, 0, 0, 123456), []],
        [3, None, None, None, None],
    ]

    # qmark parameters through the DB-API: the client sends PREPARE/EXECUTE.
    def select(sql, params):
        return run(secure_server, auth, sql, params, schema)

    assert select("SELECT id, customer FROM orders WHERE amount >= ? ORDER BY id", [Decimal("7.00")]) == [
        [1, "acme"],
        [2, "globex"],
    ]
    assert select("SELECT id FROM orders WHERE at = ?", [datetime(2026, 11, 3, 10, 0, 0, 123456)]) == [[2]]
    assert select("SELECT amount, tags FROM orders WHERE customer = ? AND id < ?", ["acme", 5]) == [
        [Decimal("12.50"), ["a", "b"]]
    ]
    assert select("SELECT id FROM orders WHERE tags = ?", [["a", "b"]]) == [[1]]
    assert select("SELECT count(*) FROM orders WHERE customer IS NULL AND id = ?", [3]) == [[1]]

    # Bind parameters through SQLAlchemy's text().
    with engine(secure_server, auth, schema).connect() as conn:
        rows = conn.execute(
            sa.text("SELECT * FROM orders WHERE amount > :least AND at < :before ORDER BY id"),
            {"least": Decimal("5.00"), "before": datetime(2026, 11, 4)},
        ).all()
        assert rows == [
            (1, "acme", Decimal("12.50"), datetime(2026, 11, 2, 9, 15), ["a", "b"]),
            (2, "globex", Decimal("7.00"), datetime(2026, 11, 3, 10, 0, 0, 123456), []),
        ]
        assert conn.execute(sa.text("SELECT id FROM orders WHERE customer = :who"), {"who": "globex"}).all() == [
            (2,)
        ]
        assert conn.execute(sa.text("SELECT id FROM orders WHERE cardinality(tags) = :n"), {"n": 2}).all() == [(1,)]
        assert conn.execute(sa.text("SELECT current_user")).scalar() == "alice"


def test_the_inspector_reads_schemas_tables_and_columns(secure_server, kind, auth, new_schema):
    inspector = sa.inspect(engine(secure_server, auth))
    assert sorted(inspector.get_schema_names()) == ["default", "information_schema"]
    schema = new_schema(f"meta_{kind}", auth)
    run(secure_server, auth, ORDERS, schema=schema)
    run(secure_server, auth, "CREATE TABLE notes (body varchar)", schema=schema)

    # A fresh inspector: an inspector caches what it has read.
    inspector = sa.inspect(engine(secure_server, auth))
    assert sorted(inspector.get_schema_names()) == ["default", "information_schema", schema]
    assert sorted(inspector.get_table_names(schema=schema)) == ["notes", "orders"]
    assert inspector.get_table_names(schema="no_such_schema") == []
    assert inspector.get_view_names(schema=schema) == []

    columns = inspector.get_columns("orders", schema=schema)
    assert [(c["name"], c["nullable"], c["default"], c["comment"]) for c in columns] == [
        ("id", False, None, None),
        ("customer", True, None, "who ordered"),
        ("amount", True, None, None),
        ("at", True, None, None),
        ("tags", True, None, None),
    ]
    types = [c["type"] for c in columns]
    assert [type(t) for t in types] == [
        satypes.BIGINT,
        satypes.VARCHAR,
        satypes.DECIMAL,
        trino_types.TIMESTAMP,
        satypes.ARRAY,
    ]
    assert (types[2].precision, types[2].scale) == (10, 2)
    assert types[3].precision == 6
    assert type(types[4].item_type) is satypes.VARCHAR
    dialect = inspector.bind.dialect
    assert [t.compile(dialect=dialect) for t in types] == [
        "BIGINT",
        "VARCHAR",
        "DECIMAL(10, 2)",
        "TIMESTAMP(6)",
        "ARRAY(VARCHAR)",
    ]

    assert inspector.has_table("orders", schema=schema) is True
    assert inspector.has_table("no_such_table", schema=schema) is False
    assert inspector.has_table("orders", schema="no_such_schema") is False
    with pytest.raises(sa.exc.NoSuchTableError):
        inspector.get_columns("no_such_table", schema=schema)
    assert inspector.get_table_comment("orders", schema=schema) == {"text": "orders placed"}
    assert inspector.get_table_comment("notes", schema=schema) == {"text": None}
    assert inspector.get_pk_constraint("orders", schema=schema) == {"name": None, "constrained_columns": []}
    assert inspector.get_foreign_keys("orders", schema=schema) == []


def test_reflecting_a_partitioned_table_finds_no_index(secure_server, idp, new_schema):
    """The dialect reads `"t$partitions"` for get_indexes and, when it has Trino's Iceberg shape
    (partition row(...), record_count, file_count, total_size, data row(...)), reports no index."""
    auth = JWTAuthentication(token(idp.port))
    new_schema("parts", auth)
    run(
        secure_server,
        auth,
        "CREATE TABLE parts.sales (id bigint, region varchar) WITH (partitioning = ARRAY['region'])",
    )
    run(secure_server, auth, "INSERT INTO parts.sales VALUES (1, 'eu'), (2, 'us')")
    sales = engine(secure_server, auth, "parts")
    assert sa.inspect(sales).get_indexes("sales", schema="parts") == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. SAWarning: index key 'partition' was not located in columns
        table = sa.Table("sales", sa.MetaData(), autoload_with=sales, schema="parts")
    assert [c.name for c in table.columns] == ["id", "region"]
    assert table.indexes == set()


def test_a_failed_statement_is_an_error_and_its_cursor_closes(secure_server, kind, auth):
    with engine(secure_server, auth).connect() as conn:
        with pytest.raises(sa.exc.ProgrammingError) as failed:
            conn.execute(sa.text("SELECT * FROM no_such_table WHERE id = :id"), {"id": 1})
    error = failed.value.orig
    assert (error.error_name, error.message) == ("NOT_FOUND", "table 'iceberg.default.no_such_table' not found")
    # Closing the cursor of a failed query (SQLAlchemy does it after every error) sends DELETE for the
    # query's last nextUri; Trino answers 204 for a query that has ended but that it still knows.
    cur = connect(secure_server, auth).cursor()
    with pytest.raises(TrinoUserError):
        cur.execute("SELECT * FROM no_such_table")
    cur.close()


LONG_QUERY = "SELECT count(*) AS {marker} FROM range(0, 3000000000) a, range(0, 4) b"


def registry(server, auth, sql):
    return run(server, auth, 'SELECT "user", state FROM system.runtime.queries WHERE query = ?', [sql])


def test_cancel_a_long_query(secure_server, kind, auth):
    sql = LONG_QUERY.format(marker=f"cancel_{kind}")
    cur = connect(secure_server, auth).cursor()
    outcome = {}

    def long_query():
        try:
            cur.execute(sql)
            outcome["rows"] = cur.fetchall()
        except Exception as e:  # the cancelled query must end with an error
            outcome["error"] = e

    t = threading.Thread(target=long_query)
    t.start()
    deadline = time.monotonic() + 30
    while cur.query_id is None or registry(secure_server, auth, sql) != [["alice", "RUNNING"]]:
        assert time.monotonic() < deadline, f"the query never showed as running: {registry(secure_server, auth, sql)}"
        time.sleep(0.1)
    time.sleep(2)
    # Still running seconds later: a long query.
    assert t.is_alive()
    assert registry(secure_server, auth, sql) == [["alice", "RUNNING"]]

    cur.cancel()
    t.join(timeout=30)
    assert not t.is_alive(), "the cancelled query did not stop"
    deadline = time.monotonic() + 10
    while registry(secure_server, auth, sql) == [["alice", "RUNNING"]] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert registry(secure_server, auth, sql) == [["alice", "CANCELLED"]]
    # The server keeps serving, the same user.
    assert run(secure_server, auth, "SELECT current_user") == [["alice"]]

    # The client learns that its query was cancelled, as from Trino: the page it was waiting for,
    # or the next one it asks for, says USER_CANCELED (not FINISHED without rows).
    assert "error" in outcome, f"the cancelled query ended without an error: {outcome}"
    error = outcome["error"]
    assert isinstance(error, TrinoUserError), repr(error)
    assert (error.error_name, error.error_type, error.query_id) == ("USER_CANCELED", "USER_ERROR", cur.query_id)
