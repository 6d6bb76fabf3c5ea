"""A JDBC-style Iceberg catalog on a real PostgreSQL, shared by sqe-server and pyiceberg's SqlCatalog.

PostgreSQL 15 runs for real (postgres.py: initdb + pg_ctl as an unprivileged user, 127.0.0.1, trust
auth). The catalog lives in pyiceberg's own tables, `iceberg_tables` and `iceberg_namespace_properties`,
with catalog_name = the mount name. sqe-server mounts it as

    [catalogs.pg]
    type = "jdbc"
    uri = "postgresql://postgres@127.0.0.1:PORT/DB"
    warehouse = "/abs/warehouse"        # new tables at <warehouse>/<schema>/<table>

and pyiceberg opens the same database as SqlCatalog("pg", uri="postgresql+psycopg2://...",
warehouse="file:///abs/warehouse"). What is proven:

- The fixture itself: pyiceberg alone creates a namespace and a table on PostgreSQL, appends and reads
  back; psql shows the catalog rows pyiceberg wrote.
- sqe-server on a fresh database (so SQE creates the catalog tables) creates a schema and a table,
  writes and reads; pyiceberg reads SQE's rows and SQE reads pyiceberg's, both ways, on tables either
  made; SHOW SCHEMAS / SHOW TABLES list them.
- SQE and pyiceberg appending to one table in turn lose no commit: a pyiceberg commit prepared before
  an SQE commit fails its compare-and-swap on the catalog row and is retried on top of SQE's; every
  append is a snapshot on one linear history and the count is the sum.
- PostgreSQL going away: a statement that needs it fails naming the catalog and PostgreSQL's address,
  the server serves on, and once PostgreSQL is back the next statement succeeds.
- DROP TABLE and DROP SCHEMA through SQE remove them from the catalog pyiceberg sees.
"""

import logging

import pyarrow as pa
import pytest
import trino
from pyiceberg.catalog.sql import SqlCatalog
from trino.exceptions import TrinoQueryError

from conftest import start_server
from postgres import postgres  # noqa: F401

# The database sqe-server's catalog `pg` lives in: fresh, so SQE is the one creating the catalog tables.
SQE_DB = "sqe_catalog"

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])

# pyiceberg's SqlCatalog columns (schema v1), which SQE's catalog tables must have too.
ICEBERG_TABLES_COLUMNS = {
    "catalog_name", "table_namespace", "table_name", "metadata_location", "previous_metadata_location", "iceberg_type",
}
NAMESPACE_PROPERTIES_COLUMNS = {"catalog_name", "namespace", "property_key", "property_value"}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    """Where the tables' files go, for pyiceberg (file://<path>) and SQE (<path>) alike."""
    return tmp_path_factory.mktemp("pg-warehouse")


@pytest.fixture(scope="module")
def sqe_pg(tmp_path_factory, postgres, warehouse):  # noqa: F811
    """Anonymous sqe-server on loopback with database SQE_DB mounted as catalog `pg`."""
    postgres.create_database(SQE_DB)
    mount = postgres.catalog_toml("pg", warehouse, SQE_DB)
    s = start_server(tmp_path_factory.mktemp("sqe-pg"), "[auth]\nallow_anonymous = true\n" + mount)
    try:
        yield s
    finally:
        s.stop()


def sql(server, statement):
    conn = trino.dbapi.connect(host="127.0.0.1", port=server.http_port, user="alice")
    cur = conn.cursor()
    cur.execute(statement)
    return cur.fetchall()


def pyiceberg(postgres, warehouse, dbname=SQE_DB) -> SqlCatalog:  # noqa: F811
    """pyiceberg's SqlCatalog named `pg` on `dbname` (a new engine each time: no pooled connection
    outlives a PostgreSQL restart)."""
    return SqlCatalog("pg", uri=postgres.sqlalchemy_uri_of(dbname), warehouse=f"file://{warehouse}")


def plain_path(location: str) -> str:
    return location.removeprefix("file://")


def column_names(postgres, table, dbname):  # noqa: F811
    rows = postgres.psql(
        f"SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '{table}'",
        dbname=dbname,
    )
    return {r[0] for r in rows}


# The fixture, with pyiceberg alone.


def test_pyiceberg_on_postgres(postgres, warehouse):  # noqa: F811
    assert postgres.uri == f"postgresql://postgres@127.0.0.1:{postgres.port}/iceberg"
    assert postgres.sqlalchemy_uri == f"postgresql+psycopg2://postgres@127.0.0.1:{postgres.port}/iceberg"
    assert postgres.psql("SELECT current_setting('listen_addresses'), current_setting('port'), current_database()") == [
        ["127.0.0.1", str(postgres.port), "iceberg"]
    ]
    assert postgres.psql("SHOW server_version_num")[0][0].startswith("15")

    catalog = SqlCatalog("pg", uri=postgres.sqlalchemy_uri, warehouse=f"file://{warehouse}")
    catalog.create_namespace("sales")
    schema = pa.schema([("id", pa.int64()), ("item", pa.string())])
    orders = catalog.create_table("sales.orders", schema=schema)
    orders.append(pa.table({"id": [1, 2], "item": ["apple", "pear"]}, schema=schema))

    loaded = SqlCatalog("pg", uri=postgres.sqlalchemy_uri, warehouse=f"file://{warehouse}").load_table("sales.orders")
    assert loaded.scan().to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "item": "apple"},
        {"id": 2, "item": "pear"},
    ]
    assert plain_path(loaded.location()) == str(warehouse / "sales" / "orders")
    assert list((warehouse / "sales" / "orders" / "data").glob("*.parquet"))

    # What pyiceberg keeps in PostgreSQL, as psql sees it.
    assert postgres.psql(
        "SELECT catalog_name, table_namespace, table_name, metadata_location, iceberg_type FROM iceberg_tables"
    ) == [["pg", "sales", "orders", loaded.metadata_location, "TABLE"]]
    assert postgres.psql(
        "SELECT catalog_name, namespace, property_key, property_value FROM iceberg_namespace_properties"
    ) == [["pg", "sales", "exists", "true"]]
    assert column_names(postgres, "iceberg_tables", "iceberg") == ICEBERG_TABLES_COLUMNS
    assert column_names(postgres, "iceberg_namespace_properties", "iceberg") == NAMESPACE_PROPERTIES_COLUMNS


# sqe-server with the catalog mounted as `pg`.


def test_sqe_writes_pyiceberg_reads_and_back(sqe_pg, postgres, warehouse):  # noqa: F811
    sql(sqe_pg, "CREATE SCHEMA pg.shop")
    sql(sqe_pg, "CREATE TABLE pg.shop.items (id BIGINT, name VARCHAR)")
    sql(sqe_pg, "INSERT INTO pg.shop.items VALUES (1, 'a'), (2, 'b')")
    assert sql(sqe_pg, "SELECT id, name FROM pg.shop.items ORDER BY id") == [[1, "a"], [2, "b"]]

    # SQE made pyiceberg's catalog tables and keeps its table there, under catalog_name 'pg'.
    assert column_names(postgres, "iceberg_tables", SQE_DB) >= ICEBERG_TABLES_COLUMNS
    assert column_names(postgres, "iceberg_namespace_properties", SQE_DB) >= NAMESPACE_PROPERTIES_COLUMNS
    rows = postgres.psql(
        "SELECT catalog_name, table_namespace, table_name, metadata_location FROM iceberg_tables",
        dbname=SQE_DB,
    )
    assert [r[:3] for r in rows] == [["pg", "shop", "items"]]
    assert plain_path(rows[0][3]).startswith(f"{warehouse}/shop/items/metadata/"), rows

    catalog = pyiceberg(postgres, warehouse)
    assert ("shop",) in catalog.list_namespaces()
    items = catalog.load_table("shop.items")
    assert plain_path(items.location()) == str(warehouse / "shop" / "items")
    assert items.scan().to_arrow().sort_by("id").to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]

    items.append(pa.table({"id": [3], "name": ["c"]}, schema=SCHEMA))
    assert sql(sqe_pg, "SELECT id, name FROM pg.shop.items ORDER BY id") == [[1, "a"], [2, "b"], [3, "c"]]

    from_py = catalog.create_table("shop.from_py", schema=SCHEMA)
    from_py.append(pa.table({"id": [10, 20, 30], "name": ["p", "q", None]}, schema=SCHEMA))
    assert sql(sqe_pg, "SELECT id, name FROM pg.shop.from_py ORDER BY id") == [[10, "p"], [20, "q"], [30, None]]

    assert "shop" in [r[0] for r in sql(sqe_pg, "SHOW SCHEMAS FROM pg")]
    assert sorted(r[0] for r in sql(sqe_pg, "SHOW TABLES FROM pg.shop")) == ["from_py", "items"]


def test_two_writers_do_not_lose_rows(sqe_pg, postgres, warehouse, caplog):  # noqa: F811
    sql(sqe_pg, "CREATE SCHEMA pg.duo")
    sql(sqe_pg, "CREATE TABLE pg.duo.shared (id BIGINT, name VARCHAR)")
    catalog = pyiceberg(postgres, warehouse)
    expected = []
    with caplog.at_level(logging.WARNING, logger="pyiceberg"):
        for turn in range(3):
            sqe_id, py_id = 2 * turn + 1, 2 * turn + 2
            # pyiceberg loads the table, then SQE commits before pyiceberg does: pyiceberg's
            # compare-and-swap on the catalog row must fail (SQE moved it on), and pyiceberg retries
            # on top of SQE's snapshot, so neither append is lost.
            py_handle = catalog.load_table("duo.shared")
            sql(sqe_pg, f"INSERT INTO pg.duo.shared VALUES ({sqe_id}, 'sqe')")
            py_handle.append(pa.table({"id": [py_id], "name": ["py"]}, schema=SCHEMA))
            expected += [[sqe_id, "sqe"], [py_id, "py"]]
    refused = [r for r in caplog.records if "Commit failed due to a concurrent update" in r.getMessage()]
    assert len(refused) == 3, [r.getMessage() for r in caplog.records]

    assert sql(sqe_pg, "SELECT count(*) FROM pg.duo.shared") == [[6]]
    assert sql(sqe_pg, "SELECT id, name FROM pg.duo.shared ORDER BY id") == expected
    table = catalog.load_table("duo.shared")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == [{"id": i, "name": n} for i, n in expected]
    # One linear history, one snapshot per append, each on top of the one before.
    # iceberg-rust writes the snapshot list in no particular order; the chain is by sequence number.
    snapshots = sorted(table.snapshots(), key=lambda s: s.sequence_number)
    assert len(snapshots) == 6
    assert [s.parent_snapshot_id for s in snapshots] == [None] + [s.snapshot_id for s in snapshots[:-1]]
    assert table.current_snapshot().snapshot_id == snapshots[-1].snapshot_id
    # Still one catalog row, pointing at the metadata both writers last agreed on.
    assert postgres.psql(
        "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'duo' AND table_name = 'shared'",
        dbname=SQE_DB,
    ) == [[table.metadata_location]]


def test_postgres_outage_is_named_and_the_server_serves_on(sqe_pg, postgres):  # noqa: F811
    sql(sqe_pg, "CREATE SCHEMA pg.down")
    sql(sqe_pg, "CREATE TABLE pg.down.outage (id BIGINT)")
    sql(sqe_pg, "INSERT INTO pg.down.outage VALUES (7)")
    assert sql(sqe_pg, "SELECT id FROM pg.down.outage") == [[7]]
    with postgres.outage():
        # Twice: once on the connections SQE held when PostgreSQL went, once on a new attempt.
        for _ in range(2):
            with pytest.raises(TrinoQueryError) as down:
                sql(sqe_pg, "SELECT id FROM pg.down.outage")
            message = str(down.value)
            assert "catalog 'pg'" in message, message
            assert f"127.0.0.1:{postgres.port}" in message, message
            assert down.value.error_type == "EXTERNAL", message
        # Everything that does not need the catalog goes on.
        assert sql(sqe_pg, "SELECT 40 + 2") == [[42]]
    assert sql(sqe_pg, "SELECT id FROM pg.down.outage") == [[7]]


def test_drop_table_and_schema(sqe_pg, postgres, warehouse):  # noqa: F811
    sql(sqe_pg, "CREATE SCHEMA pg.gone")
    sql(sqe_pg, "CREATE TABLE pg.gone.t (id BIGINT)")
    sql(sqe_pg, "INSERT INTO pg.gone.t VALUES (1)")
    catalog = pyiceberg(postgres, warehouse)
    catalog.create_table("gone.from_py", schema=SCHEMA)
    assert sorted(catalog.list_tables("gone")) == [("gone", "from_py"), ("gone", "t")]

    sql(sqe_pg, "DROP TABLE pg.gone.t")
    sql(sqe_pg, "DROP TABLE pg.gone.from_py")  # one pyiceberg made
    assert not catalog.table_exists("gone.t")
    assert not catalog.table_exists("gone.from_py")
    assert catalog.list_tables("gone") == []
    assert sql(sqe_pg, "SHOW TABLES FROM pg.gone") == []

    sql(sqe_pg, "DROP SCHEMA pg.gone")
    assert not catalog.namespace_exists("gone")
    assert ("gone",) not in catalog.list_namespaces()
    assert "gone" not in [r[0] for r in sql(sqe_pg, "SHOW SCHEMAS FROM pg")]
    assert postgres.psql("SELECT count(*) FROM iceberg_tables WHERE table_namespace = 'gone'", dbname=SQE_DB) == [["0"]]
    assert postgres.psql(
        "SELECT count(*) FROM iceberg_namespace_properties WHERE namespace = 'gone'", dbname=SQE_DB
    ) == [["0"]]
