"""Iceberg tables in a real Hive Metastore 2.3, written by pyiceberg's HiveCatalog and read by SQE.

HMS runs for real (hms.py: Hive's own HiveMetaStore from pyspark's jars, embedded Derby, in a
network namespace of its own, reached on 127.0.0.1 through a relay). pyiceberg 0.12.0's HiveCatalog
writes `sales.orders` into it: a namespace (an HMS database, location <warehouse>/sales.db), a table
(an EXTERNAL_TABLE whose parameters say table_type=ICEBERG and point at the current metadata JSON),
and two appends, each a snapshot committed under an HMS table lock.

Beside it, `sales.plain` is a Hive table (no table_type=ICEBERG), made through HMS's own Thrift API,
and two views made the same way: `sales.recent` as Trino keeps a view (VIRTUAL_VIEW, its definition as
base64 JSON in the view text) and `sales.legacy` as Hive keeps one (HiveQL text).

SQE reads them through HMS embedded (`ATTACH 'thrift://…' AS hive (TYPE hms)` in sqe-cli) and as a
server mount (`[catalogs.hive] type = "hms"`): listings show the Iceberg table only, the rows and both
snapshots are pyiceberg's, a Hive table and every write are refused with a clear message (and no
file written), a mount without `locations` may not read local files, and a metastore that cannot be
reached is named in the error while the server serves on.

Note for readers of the HMS entries: HMS 2.3 writes locations in Hadoop's form, `file:/tmp/...` (one
slash), not `file:///tmp/...`.
"""

import base64
import csv
import datetime
import io
import json
import os
import socket
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
import trino
from hive_metastore.ThriftHiveMetastore import Client
from hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table
from pyiceberg.catalog.hive import HiveCatalog
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport
from trino.exceptions import TrinoQueryError

from conftest import TARGET, start_server

from hms import HiveMetastore

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("item", pa.string()),
        ("price", pa.float64()),
        ("day", pa.date32()),
        ("sold_at", pa.timestamp("us")),
    ]
)


def order(id, item, price, day, hour):
    return {
        "id": id,
        "item": item,
        "price": price,
        "day": datetime.date(2024, 3, day),
        "sold_at": datetime.datetime(2024, 3, day, hour, 30, 15, 250000),
    }


FIRST = [order(1, "apple", 0.5, 1, 9), order(2, "pear", 0.75, 1, 10), order(3, "plum", 1.25, 2, 11)]
SECOND = [order(4, "kiwi", 2.0, 3, 12), order(5, "fig", 3.5, 4, 13)]


def catalog(hms: HiveMetastore) -> HiveCatalog:
    # hive2-compatible: columns typed for HMS 2.3 (a timestamptz column would otherwise be declared
    # `timestamp with local time zone`, which HMS 2.3 refuses).
    return HiveCatalog("hive", uri=hms.uri, warehouse=hms.warehouse, **{"hive.hive2-compatible": "true"})


def hms_client(hms: HiveMetastore, call):
    """`call(client)` on a plain Thrift client of HMS (not through pyiceberg)."""
    transport = TBufferedTransport(TSocket("127.0.0.1", hms.port))
    transport.open()
    try:
        return call(Client(TBinaryProtocol(transport)))
    finally:
        transport.close()


def hms_table(hms: HiveMetastore, db: str, name: str):
    """The table's HMS entry, as get_table returns it."""
    return hms_client(hms, lambda c: c.get_table(db, name))


def create_hive_table(hms: HiveMetastore, db: str, name: str):
    """A plain Hive table (text files, no Iceberg parameters), as Hive itself would register it."""
    local = hms.warehouse.removeprefix("file://")
    table = Table(
        tableName=name,
        dbName=db,
        owner="root",
        tableType="EXTERNAL_TABLE",
        parameters={"EXTERNAL": "TRUE"},
        partitionKeys=[],
        sd=StorageDescriptor(
            cols=[FieldSchema("id", "bigint", None)],
            location=f"file:{local}/{db}.db/{name}",
            inputFormat="org.apache.hadoop.mapred.TextInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", parameters={}),
            parameters={},
        ),
    )
    hms_client(hms, lambda c: c.create_table(table))


def create_view(hms: HiveMetastore, db: str, name: str, original_text: str, parameters: dict):
    """A VIRTUAL_VIEW entry, as Trino (or Hive) registers a view: no location, one dummy column."""
    view = Table(
        tableName=name,
        dbName=db,
        owner="alice",
        tableType="VIRTUAL_VIEW",
        parameters=parameters,
        partitionKeys=[],
        viewOriginalText=original_text,
        viewExpandedText="/* Presto View */",
        sd=StorageDescriptor(
            cols=[FieldSchema("dummy", "string", None)],
            location="",
            serdeInfo=SerDeInfo(parameters={}),
            parameters={},
        ),
    )
    hms_client(hms, lambda c: c.create_table(view))


def create_trino_view(hms: HiveMetastore, db: str, name: str, sql: str, columns: list):
    definition = {
        "originalSql": sql,
        "catalog": "hive",
        "schema": db,
        "columns": [{"name": n, "type": t} for n, t in columns],
        "owner": "alice",
        "runAsInvoker": False,
    }
    encoded = base64.b64encode(json.dumps(definition).encode()).decode()
    create_view(hms, db, name, f"/* Presto View: {encoded} */", {"presto_view": "true", "comment": "Presto View"})


@pytest.fixture(scope="module")
def hive():
    """HMS with `sales.orders` written by pyiceberg: FIRST, then SECOND (two snapshots)."""
    with HiveMetastore() as hms:
        writer = catalog(hms)
        writer.create_namespace("sales")
        orders = writer.create_table("sales.orders", schema=SCHEMA)
        orders.append(pa.Table.from_pylist(FIRST, schema=SCHEMA))
        orders.append(pa.Table.from_pylist(SECOND, schema=SCHEMA))
        create_hive_table(hms, "sales", "plain")
        create_trino_view(
            hms, "sales", "recent", "SELECT id, item, price FROM orders WHERE id > 3",
            [("id", "bigint"), ("item", "varchar"), ("price", "double")],
        )
        create_view(hms, "sales", "legacy", "SELECT id FROM sales.plain", {})
        yield hms


def test_pyiceberg_reads_back_its_table(hive):
    table = catalog(hive).load_table("sales.orders")
    assert len(table.snapshots()) == 2
    assert table.scan().to_arrow().sort_by("id").to_pylist() == FIRST + SECOND

    entry = hms_table(hive, "sales", "orders")
    assert (entry.dbName, entry.tableName, entry.tableType) == ("sales", "orders", "EXTERNAL_TABLE")
    assert entry.parameters["table_type"] == "ICEBERG"
    assert entry.parameters["EXTERNAL"] == "TRUE"
    assert entry.parameters["metadata_location"] == table.metadata_location
    assert entry.parameters["previous_metadata_location"] != table.metadata_location
    assert entry.sd.location == table.location()
    assert entry.sd.location.startswith("file:/") and entry.sd.location.endswith("/warehouse/sales.db/orders")
    assert [(c.name, c.type) for c in entry.sd.cols] == [
        ("id", "bigint"), ("item", "string"), ("price", "double"), ("day", "date"), ("sold_at", "timestamp"),
    ]




def csv_rows(rows):
    """FIRST/SECOND rows as SQE's shell prints them in CSV."""
    return [
        [str(r["id"]), r["item"], str(r["price"]), r["day"].isoformat(), r["sold_at"].isoformat(timespec="milliseconds")]
        for r in rows
    ]


def shell(tmp_path, sql):
    """sqe-cli --embedded running `sql`: (exit code, CSV rows printed, error text)."""
    cli = os.environ.get("SQE_CLI", str(TARGET / "debug" / "sqe-cli"))
    result = subprocess.run(
        [cli, "--embedded", "--warehouse", str(tmp_path / "w"), "-f", "csv", "-e", sql],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, list(csv.reader(io.StringIO(result.stdout))), result.stderr


def data_files(hms: HiveMetastore) -> set:
    return set((Path(hms.warehouse.removeprefix("file://")) / "sales.db" / "orders" / "data").iterdir())


def test_the_shell_reads_pyicebergs_table_through_hms(hive, tmp_path):
    first = catalog(hive).load_table("sales.orders").snapshots()[0].snapshot_id
    attach = f"ATTACH '{hive.uri}' AS hive (TYPE hms); "
    code, rows, err = shell(
        tmp_path,
        attach
        + "SHOW SCHEMAS FROM hive; SHOW TABLES FROM hive.sales; "
        + "SELECT id, item, price, day, sold_at FROM hive.sales.orders ORDER BY id; "
        + f"SELECT count(*) AS n FROM hive.sales.orders FOR VERSION AS OF {first}; "
        + 'SELECT count(*) AS n FROM hive.sales."orders$snapshots"',
    )
    assert code == 0, err
    assert rows == (
        [["Schema"], ["default"], ["information_schema"], ["sales"]]
        + [["Table"], ["orders"], ["recent"]]
        + [["id", "item", "price", "day", "sold_at"]]
        + csv_rows(FIRST + SECOND)
        + [["n"], ["3"]]
        + [["n"], ["2"]]
    )


def test_the_shell_is_refused_writes_and_hive_tables(hive, tmp_path):
    attach = f"ATTACH '{hive.uri}' AS hive (TYPE hms); "
    before = data_files(hive)
    read_only = (
        "catalog 'hive' is a Hive Metastore, which SQE reads but does not change: {} is not possible "
        "through it yet (iceberg-rust 0.10.1 cannot commit through HMS); use pyiceberg, Spark or Trino for that"
    )
    cases = [
        (
            "INSERT INTO hive.sales.orders SELECT * FROM hive.sales.orders",
            read_only.format("writing to a table"),
        ),
        ("CREATE TABLE hive.sales.more (id BIGINT)", read_only.format("creating a table")),
        ("DROP TABLE hive.sales.orders", read_only.format("dropping a table")),
        (
            "SELECT * FROM hive.sales.plain",
            "'hive.sales.plain' is a Hive table, not an Iceberg table: SQE reads only Iceberg tables from a Hive Metastore",
        ),
        ("SELECT * FROM hive.sales.nothing", "hive.sales.nothing"),
    ]
    for statement, expected in cases:
        code, _, err = shell(tmp_path, attach + statement)
        assert code != 0 and expected in err, (statement, err)
    assert data_files(hive) == before
    table = catalog(hive).load_table("sales.orders")
    assert len(table.snapshots()) == 2
    assert table.scan().to_arrow().sort_by("id").to_pylist() == FIRST + SECOND


def test_views_trino_keeps_in_hms_are_read(hive, tmp_path):
    attach = f"ATTACH '{hive.uri}' AS hive (TYPE hms); "
    code, rows, err = shell(
        tmp_path,
        attach
        + "SELECT * FROM hive.sales.recent ORDER BY id; "
        + "SELECT r.item, o.day FROM hive.sales.recent r JOIN hive.sales.orders o ON r.id = o.id ORDER BY r.id; "
        + "SHOW CREATE VIEW hive.sales.recent",
    )
    assert code == 0, err
    assert rows[:6] == [
        ["id", "item", "price"], ["4", "kiwi", "2.0"], ["5", "fig", "3.5"],
        ["item", "day"], ["kiwi", "2024-03-03"], ["fig", "2024-03-04"],
    ]
    assert "SELECT id, item, price FROM orders WHERE id > 3" in "\n".join(",".join(r) for r in rows[6:]), rows
    for statement, expected in [
        (
            "SELECT * FROM hive.sales.legacy",
            "'hive.sales.legacy' is a Hive view (HiveQL): SQE reads the views Trino and Iceberg keep in a Hive Metastore, not Hive's own",
        ),
        (
            "CREATE VIEW hive.sales.mine AS SELECT 1 AS x",
            "catalog 'hive' is a Hive Metastore, which SQE reads but does not change",
        ),
    ]:
        code, _, err = shell(tmp_path, attach + statement)
        assert code != 0 and expected in err, (statement, err)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sqe_hive(tmp_path_factory, hive):
    """Anonymous sqe-server mounting the metastore three times: `hive` with its warehouse declared as
    where the tables live, `bare` with nothing declared, and `gone` at a port nobody listens on."""
    mounts = (
        "[auth]\nallow_anonymous = true\n\n"
        f'[catalogs.hive]\ntype = "hms"\nuri = "{hive.uri}"\nlocations = ["{hive.warehouse}"]\n\n'
        f'[catalogs.bare]\ntype = "hms"\nuri = "{hive.uri}"\n\n'
        f'[catalogs.gone]\ntype = "hms"\nuri = "thrift://127.0.0.1:{free_port()}"\n'
    )
    server = start_server(tmp_path_factory.mktemp("sqe-hms"), mounts)
    try:
        yield server
    finally:
        server.stop()


def trino_sql(server, statement):
    cur = trino.dbapi.connect(host="127.0.0.1", port=server.http_port, user="alice").cursor()
    cur.execute(statement)
    return cur.fetchall()


def trino_error(server, statement):
    with pytest.raises(TrinoQueryError) as failed:
        trino_sql(server, statement)
    return failed.value.error_name, failed.value.message


def test_a_server_mount_reads_and_joins_hms_tables(sqe_hive):
    rows = trino_sql(sqe_hive, "SELECT id, item FROM hive.sales.orders ORDER BY id")
    assert rows == [[r["id"], r["item"]] for r in FIRST + SECOND]
    trino_sql(sqe_hive, "CREATE TABLE iceberg.default.stock (item VARCHAR, units BIGINT)")
    trino_sql(sqe_hive, "INSERT INTO iceberg.default.stock VALUES ('apple', 10), ('fig', 3)")
    joined = trino_sql(
        sqe_hive,
        "SELECT o.id, s.units FROM hive.sales.orders o JOIN iceberg.default.stock s ON o.item = s.item ORDER BY o.id",
    )
    assert joined == [[1, 10], [5, 3]]
    assert trino_sql(sqe_hive, "SHOW TABLES FROM hive.sales") == [["orders"], ["recent"]]
    name, message = trino_error(sqe_hive, "SHOW TABLES FROM hive.nowhere")
    assert name == "NOT_FOUND" and "nowhere" in message, (name, message)
    name, message = trino_error(sqe_hive, "INSERT INTO hive.sales.orders SELECT * FROM hive.sales.orders")
    assert name == "NOT_SUPPORTED", message


def test_a_mount_without_locations_reads_no_local_file(sqe_hive, hive):
    name, message = trino_error(sqe_hive, "SELECT * FROM bare.sales.orders")
    assert name == "PERMISSION_DENIED", message
    metadata = hive.warehouse.removeprefix("file://") + "/sales.db/orders/metadata/"
    assert message.startswith(f"catalog 'bare': the catalog names the file 'file:{metadata}"), message
    assert message.endswith("which is outside the places its tables may keep files on this server"), message


def test_an_unreachable_metastore_is_named_and_the_server_serves_on(sqe_hive):
    name, message = trino_error(sqe_hive, "SELECT * FROM gone.sales.orders")
    assert name == "GENERIC_EXTERNAL_ERROR", message
    assert "catalog 'gone' cannot be reached at thrift://127.0.0.1:" in message, message
    assert trino_sql(sqe_hive, "SELECT count(*) FROM hive.sales.orders") == [[5]]
