"""Interoperability between SQE and pyiceberg on one shared warehouse.

SQE (`sqe-cli --embedded --warehouse DIR`) keeps its catalog in DIR/catalog.db
in pyiceberg's SqlCatalog layout, so pyiceberg's SqlCatalog pointed at the same
file must see SQE's tables, and SQE must see pyiceberg's.

Run from the repository root:
    pip install -r tests/clients/requirements.txt
    pytest -q tests/clients/test_pyiceberg_interop.py
The CLI binary is taken from $SQE_CLI (default: target/debug/sqe-cli).
"""

import csv
import io
import os
import subprocess
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan

SQE_CLI = os.environ.get(
    "SQE_CLI", str(Path(__file__).resolve().parents[2] / "target" / "debug" / "sqe-cli")
)


def sqe(warehouse: Path, sql: str) -> list[list[str]]:
    """Run `sql` with sqe-cli on `warehouse`; return the CSV output as rows (header first)."""
    result = subprocess.run(
        [SQE_CLI, "--embedded", "--warehouse", str(warehouse), "-f", "csv", "-e", sql],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        f"sqe-cli failed (exit {result.returncode}) running:\n{sql}\n"
        f"stderr:\n{result.stderr}\nstdout:\n{result.stdout}"
    )
    return list(csv.reader(io.StringIO(result.stdout)))


def catalog(warehouse: Path) -> SqlCatalog:
    return SqlCatalog(
        "iceberg",
        uri=f"sqlite:///{warehouse}/catalog.db",
        warehouse=f"file://{warehouse}",
    )


def rows(table: pa.Table, *columns: str) -> list[tuple]:
    """The table's rows as sorted tuples of the given columns."""
    data = table.select(list(columns)).to_pylist()
    return sorted(tuple(row[c] for c in columns) for row in data)


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    if not Path(SQE_CLI).is_file():
        pytest.fail(f"sqe-cli binary not found at {SQE_CLI} (build it, or set SQE_CLI)")
    return tmp_path


def test_pyiceberg_reads_unpartitioned_table_written_by_sqe(warehouse):
    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.t (id bigint, v varchar); "
        "INSERT INTO s.t VALUES (3, 'three'), (1, 'one'), (2, 'two')",
    )

    table = catalog(warehouse).load_table("s.t").scan().to_arrow()

    assert rows(table, "id", "v") == [(1, "one"), (2, "two"), (3, "three")]


def test_pyiceberg_reads_partitioned_table_written_by_sqe(warehouse):
    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.t (id bigint, v varchar, ts timestamp) "
        "WITH (partitioning = ARRAY['day(ts)', 'bucket(id, 4)']); "
        "INSERT INTO s.t VALUES "
        "(1, 'a', TIMESTAMP '2024-01-01 10:00:00'), "
        "(2, 'b', TIMESTAMP '2024-01-02 11:30:00'), "
        "(3, 'c', TIMESTAMP '2024-01-02 23:59:59'), "
        "(4, 'd', TIMESTAMP '2024-03-15 00:00:00')",
    )
    expected = [
        (1, "a", datetime(2024, 1, 1, 10, 0, 0)),
        (2, "b", datetime(2024, 1, 2, 11, 30, 0)),
        (3, "c", datetime(2024, 1, 2, 23, 59, 59)),
        (4, "d", datetime(2024, 3, 15, 0, 0, 0)),
    ]

    table = catalog(warehouse).load_table("s.t")
    spec_fields = [(f.name, str(f.transform)) for f in table.spec().fields]
    assert [t for _, t in spec_fields] == ["day", "bucket[4]"], spec_fields

    assert rows(table.scan().to_arrow(), "id", "v", "ts") == expected
    # pyiceberg prunes data files by projecting the filter onto the partition
    # values SQE recorded, so these also check SQE's bucket and day values.
    filtered = table.scan(row_filter=EqualTo("id", 2)).to_arrow()
    assert rows(filtered, "id", "v", "ts") == [expected[1]]
    jan_2 = And(
        GreaterThanOrEqual("ts", "2024-01-02T00:00:00"),
        LessThan("ts", "2024-01-03T00:00:00"),
    )
    filtered = table.scan(row_filter=jan_2).to_arrow()
    assert rows(filtered, "id", "v", "ts") == expected[1:3]


def test_sqe_and_pyiceberg_read_each_others_writes(warehouse):
    py = catalog(warehouse)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])

    # pyiceberg creates and fills a table; SQE reads it.
    py.create_namespace("py")
    py_table = py.create_table("py.people", schema=schema)
    py_table.append(pa.table({"id": [2, 1], "name": ["bob", "alice"]}, schema=schema))

    assert sqe(warehouse, "SELECT id, name FROM py.people ORDER BY id") == [
        ["id", "name"],
        ["1", "alice"],
        ["2", "bob"],
    ]

    # SQE creates a table; pyiceberg appends to it; SQE sees old and new rows.
    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.t (id bigint, name varchar); "
        "INSERT INTO s.t VALUES (1, 'sqe-1'), (2, 'sqe-2')",
    )
    sqe_table = py.load_table("s.t")
    sqe_table.append(pa.table({"id": [3], "name": ["py-3"]}, schema=schema))

    assert sqe(warehouse, "SELECT id, name FROM s.t ORDER BY id") == [
        ["id", "name"],
        ["1", "sqe-1"],
        ["2", "sqe-2"],
        ["3", "py-3"],
    ]

    # SQE inserts into the pyiceberg-created table; pyiceberg sees every row.
    sqe(warehouse, "INSERT INTO py.people VALUES (3, 'carol')")

    people = py.load_table("py.people").scan().to_arrow()
    assert rows(people, "id", "name") == [(1, "alice"), (2, "bob"), (3, "carol")]


def test_sort_orders_are_shared_with_pyiceberg(warehouse):
    """SQE's sorted_by is the table's Iceberg sort order in pyiceberg's eyes, and a sort order
    pyiceberg gave a table is the one SQE writes its files in."""
    from pyiceberg.schema import Schema
    from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.t (id bigint, v varchar) WITH (sorted_by = ARRAY['v DESC', 'id']); "
        "INSERT INTO s.t VALUES (1, 'a'), (2, NULL), (3, 'c'), (4, 'a')",
    )
    table = catalog(warehouse).load_table("s.t")
    order = table.sort_order()
    assert [(f.source_id, f.direction, f.null_order) for f in order.fields] == [
        (2, SortDirection.DESC, NullOrder.NULLS_LAST),
        (1, SortDirection.ASC, NullOrder.NULLS_FIRST),
    ]
    # One data file, in that order (pyiceberg reads a file's rows as they are).
    assert len(table.inspect.files()) == 1
    assert table.scan().to_arrow()["id"].to_pylist() == [3, 1, 4, 2]

    py = catalog(warehouse)
    py.create_namespace("py")
    py.create_table(
        "py.o",
        schema=Schema(
            NestedField(1, "id", LongType(), required=False),
            NestedField(2, "v", StringType(), required=False),
        ),
        sort_order=SortOrder(
            SortField(
                source_id=1,
                transform=IdentityTransform(),
                direction=SortDirection.DESC,
                null_order=NullOrder.NULLS_FIRST,
            )
        ),
    )
    sqe(warehouse, "INSERT INTO py.o VALUES (1, 'x'), (NULL, 'n'), (3, 'z'), (2, 'y')")
    assert catalog(warehouse).load_table("py.o").scan().to_arrow()["id"].to_pylist() == [
        None,
        3,
        2,
        1,
    ]
    create = sqe(warehouse, "SHOW CREATE TABLE py.o")[1][0]
    assert "sorted_by = ARRAY['id DESC NULLS FIRST']" in create, create


def test_sqe_opens_catalog_created_by_pyiceberg(warehouse):
    # pyiceberg creates catalog.db before SQE has ever touched the warehouse.
    py = catalog(warehouse)
    py.create_namespace("ns")
    py.create_table("ns.items", schema=pa.schema([("id", pa.int64())]))
    assert (warehouse / "catalog.db").is_file()

    assert sqe(warehouse, "SHOW TABLES FROM ns") == [["Table"], ["items"]]


def test_pyiceberg_tolerates_sqes_views(warehouse):
    """SQE keeps a view as a row of type VIEW: pyiceberg lists and loads only tables, and its
    writes leave the view alone."""
    sqe(
        warehouse,
        "CREATE TABLE t AS SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v(id, name);"
        "CREATE VIEW firsts AS SELECT name FROM t WHERE id = 1",
    )
    cat = catalog(warehouse)
    assert cat.list_tables("default") == [("default", "t")]
    with pytest.raises(Exception, match="does not exist"):
        cat.load_table("default.firsts")
    table = cat.load_table("default.t")
    table.append(pa.table({"id": pa.array([1], pa.int64()), "name": ["c"]}))
    assert sqe(warehouse, "SELECT name FROM firsts ORDER BY name") == [["name"], ["a"], ["c"]]
    cat.drop_table("default.t")
    assert sqe(warehouse, "SHOW TABLES") == [["Table"], ["firsts"]]


def test_pyiceberg_reads_what_sqes_delete_and_truncate_leave(warehouse):
    """SQE's DELETE of every row and its TRUNCATE commit snapshots that remove files (manifests
    rewritten with DELETED entries): pyiceberg reads no rows at them, every row at the snapshots
    before, and the summaries SQE wrote."""
    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.t (id bigint, part varchar) WITH (partitioning = ARRAY['part']); "
        "INSERT INTO s.t VALUES (1, 'a'), (2, 'b'); "
        "INSERT INTO s.t VALUES (3, 'a'); "
        "DELETE FROM s.t",
    )
    table = catalog(warehouse).load_table("s.t")
    assert table.scan().to_arrow().num_rows == 0
    deleted = table.current_snapshot()
    assert deleted.summary.operation.value == "delete"
    assert deleted.summary["deleted-data-files"] == "3"
    assert deleted.summary["deleted-records"] == "3"
    assert deleted.summary["total-records"] == "0"
    before = table.scan(snapshot_id=deleted.parent_snapshot_id).to_arrow()
    assert rows(before, "id", "part") == [(1, "a"), (2, "b"), (3, "a")]

    # pyiceberg appends after the delete; SQE truncates; pyiceberg reads nothing again.
    schema = table.schema().as_arrow()
    table.append(pa.table({"id": [4], "part": ["c"]}, schema=schema))
    assert sqe(warehouse, "SELECT id, part FROM s.t") == [["id", "part"], ["4", "c"]]
    sqe(warehouse, "TRUNCATE TABLE s.t")
    table = catalog(warehouse).load_table("s.t")
    assert table.scan().to_arrow().num_rows == 0
    assert table.current_snapshot().summary["deleted-records"] == "1"
    # Two appends, the delete, pyiceberg's append, the truncate.
    in_order = sorted(table.snapshots(), key=lambda s: s.sequence_number)
    assert [s.summary.operation.value for s in in_order] == ["append", "append", "delete", "append", "delete"]

    # A DELETE of one partition drops its files; pyiceberg reads the other partitions' rows.
    sqe(warehouse, "INSERT INTO s.t VALUES (5, 'a'), (6, 'b'), (7, 'a'); DELETE FROM s.t WHERE part = 'a'")
    table = catalog(warehouse).load_table("s.t")
    assert rows(table.scan().to_arrow(), "id", "part") == [(6, "b")]
    assert table.current_snapshot().summary["deleted-records"] == "2"


def test_pyiceberg_reads_sqes_branches_and_tags(warehouse):
    """A branch SQE made and wrote to, and a tag: pyiceberg sees them in the table's refs, reads the
    branch's rows at its head and the tag's at its snapshot, and main's rows without the branch's."""
    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.t (id bigint, v varchar); "
        "INSERT INTO s.t VALUES (1, 'a'); "
        "ALTER TABLE s.t CREATE TAG first RETAIN 7 DAYS; "
        "ALTER TABLE s.t CREATE BRANCH dev WITH SNAPSHOT RETENTION 2 SNAPSHOTS; "
        "INSERT INTO s.t.branch_dev VALUES (2, 'b'); "
        "INSERT INTO s.t VALUES (3, 'c')",
    )
    table = catalog(warehouse).load_table("s.t")
    refs = table.metadata.refs
    assert sorted(refs) == ["dev", "first", "main"]
    assert refs["first"].snapshot_ref_type.value == "tag"
    assert refs["first"].max_ref_age_ms == 7 * 86_400_000
    assert refs["dev"].snapshot_ref_type.value == "branch"
    assert refs["dev"].min_snapshots_to_keep == 2
    assert rows(table.scan().to_arrow(), "id", "v") == [(1, "a"), (3, "c")]
    dev = table.snapshot_by_name("dev")
    assert rows(table.scan(snapshot_id=dev.snapshot_id).to_arrow(), "id", "v") == [(1, "a"), (2, "b")]
    first = table.snapshot_by_name("first")
    assert rows(table.scan(snapshot_id=first.snapshot_id).to_arrow(), "id", "v") == [(1, "a")]
    # The branch's snapshot follows the tagged one; main's does too, apart from it.
    assert dev.parent_snapshot_id == first.snapshot_id
    assert table.current_snapshot().parent_snapshot_id == first.snapshot_id
    assert sqe(warehouse, "SELECT id FROM s.t FOR VERSION AS OF 'dev' ORDER BY id") == [["id"], ["1"], ["2"]]

    # Row changes on the branch, merge-on-read and copy-on-write: pyiceberg reads them (and the
    # branch's position deletes) at the branch's head, and main's rows are as they were.
    sqe(
        warehouse,
        "ALTER TABLE s.t SET PROPERTIES \"write.delete.mode\" = 'merge-on-read'; "
        "INSERT INTO s.t.branch_dev VALUES (4, 'd'), (5, 'e'); "
        "UPDATE s.t.branch_dev SET v = 'B' WHERE id = 2; "
        "MERGE INTO s.t.branch_dev AS t USING (VALUES (5, 'E'), (6, 'f')) AS n (id, v) ON t.id = n.id "
        "WHEN MATCHED THEN UPDATE SET v = n.v WHEN NOT MATCHED THEN INSERT VALUES (n.id, n.v); "
        "INSERT INTO s.t.branch_dev VALUES (7, 'g'), (8, 'h'); "
        "DELETE FROM s.t.branch_dev WHERE id = 7",
    )
    table = catalog(warehouse).load_table("s.t")
    assert rows(table.scan().to_arrow(), "id", "v") == [(1, "a"), (3, "c")]
    dev = table.snapshot_by_name("dev")
    want = [(1, "a"), (2, "B"), (4, "d"), (5, "E"), (6, "f"), (8, "h")]
    assert rows(table.scan(snapshot_id=dev.snapshot_id).to_arrow(), "id", "v") == want
    assert dev.summary["added-position-deletes"] == "1"
    assert sqe(warehouse, "SELECT id, v FROM s.t FOR VERSION AS OF 'dev' ORDER BY id")[1:] == [
        [str(i), v] for i, v in want
    ]


def test_readers_agree_across_partition_evolution_and_maintenance(warehouse):
    """Files under three partition specs, a merge-on-read DELETE across them, then optimize and
    expire_snapshots: after each step pyiceberg and DuckDB's iceberg extension read SQE's rows."""
    from test_row_changes import duckdb_read

    def agree(step):
        want = sqe(warehouse, "SELECT id, p FROM s.e ORDER BY id")[1:]
        want = [(int(i), p) for i, p in want]
        table = catalog(warehouse).load_table("s.e")
        assert rows(table.scan().to_arrow(), "id", "p") == want, step
        got = duckdb_read(table.metadata_location, "SELECT id, p FROM iceberg_scan(?) ORDER BY id")
        assert [(int(i), p) for i, p in got] == want, step
        return table

    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.e (id bigint, p varchar) WITH (\"write.delete.mode\" = 'merge-on-read'); "
        "INSERT INTO s.e VALUES (1, 'x'), (2, 'y'), (3, 'x')",
    )
    agree("unpartitioned")
    sqe(
        warehouse,
        "ALTER TABLE s.e SET PROPERTIES partitioning = ARRAY['p']; "
        "INSERT INTO s.e VALUES (4, 'x'), (5, 'y'), (6, 'z')",
    )
    table = agree("by p")
    assert sorted(spec.spec_id for spec in table.specs().values()) == [0, 1]
    sqe(
        warehouse,
        "ALTER TABLE s.e SET PROPERTIES partitioning = ARRAY['bucket(id, 2)']; "
        "INSERT INTO s.e VALUES (7, 'x'), (8, 'w')",
    )
    agree("by bucket")
    sqe(warehouse, "DELETE FROM s.e WHERE p = 'y'")
    agree("after the delete")
    result = subprocess.run(
        [SQE_CLI, "--embedded", "--warehouse", str(warehouse), "--maintenance-min-retention", "0s",
         "-f", "csv", "-e",
         "ALTER TABLE s.e EXECUTE optimize; "
         "ALTER TABLE s.e EXECUTE expire_snapshots(retention_threshold => '0s')"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    table = agree("after maintenance")
    assert len(list(table.snapshots())) == 1
    assert not any(task.delete_files for task in table.scan().plan_files())
    assert {task.file.spec_id for task in table.scan().plan_files()} == {2}


def test_sqe_drops_the_statistics_another_engine_wrote(warehouse):
    """pyiceberg records a statistics file (as Trino's ANALYZE leaves one, with a theta sketch's
    NDV); SQE reads the table as before, remove_orphan_files keeps the file while the metadata names
    it, drop_extended_stats takes it out of the metadata, and remove_orphan_files then deletes it."""
    from pyiceberg.table.statistics import BlobMetadata, StatisticsFile

    sqe(warehouse, "CREATE SCHEMA s; CREATE TABLE s.st (id bigint); INSERT INTO s.st VALUES (1), (2), (2)")
    table = catalog(warehouse).load_table("s.st")
    snapshot = table.current_snapshot()
    stats = Path(table.location().removeprefix("file://")) / "metadata" / f"stats-{snapshot.snapshot_id}.puffin"
    stats.write_bytes(b"PFA1 not read by anyone here")
    blob = BlobMetadata(
        type="apache-datasketches-theta-v1", snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number, fields=[1], properties={"ndv": "2"},
    )
    with table.update_statistics() as update:
        update.set_statistics(StatisticsFile(
            snapshot_id=snapshot.snapshot_id, statistics_path=f"file://{stats}",
            file_size_in_bytes=stats.stat().st_size, file_footer_size_in_bytes=8, blob_metadata=[blob],
        ))
    assert [s.statistics_path for s in catalog(warehouse).load_table("s.st").metadata.statistics] == [f"file://{stats}"]

    def maintain(procedure):
        result = subprocess.run(
            [SQE_CLI, "--embedded", "--warehouse", str(warehouse), "--maintenance-min-retention", "0s",
             "-f", "csv", "-e", f"ALTER TABLE s.st EXECUTE {procedure}"],
            capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, result.stderr

    assert sqe(warehouse, "SELECT count(*), count(DISTINCT id) FROM s.st")[1:] == [["3", "2"]]
    maintain("remove_orphan_files(retention_threshold => '0s')")
    assert stats.exists()
    maintain("drop_extended_stats")
    assert catalog(warehouse).load_table("s.st").metadata.statistics == []
    maintain("remove_orphan_files(retention_threshold => '0s')")
    assert not stats.exists()
    assert rows(catalog(warehouse).load_table("s.st").scan().to_arrow(), "id") == [(1,), (2,), (2,)]


def test_readers_agree_after_type_widening(warehouse):
    """Columns widened by SQE (integer to bigint, real to double, decimal to a larger precision) read
    in their new types by pyiceberg and DuckDB, over files written before and after."""
    from decimal import Decimal

    from test_row_changes import duckdb_read

    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.w (i integer, r real, d decimal(5,2)); "
        "INSERT INTO s.w VALUES (2147483647, REAL '1.5', 123.45); "
        "ALTER TABLE s.w ALTER COLUMN i SET DATA TYPE bigint; "
        "ALTER TABLE s.w ALTER COLUMN r SET DATA TYPE double; "
        "ALTER TABLE s.w ALTER COLUMN d SET DATA TYPE decimal(12,2); "
        "INSERT INTO s.w VALUES (9000000000, 2.25, 1234567890.12)",
    )
    want = [(2147483647, 1.5, Decimal("123.45")), (9000000000, 2.25, Decimal("1234567890.12"))]
    table = catalog(warehouse).load_table("s.w")
    assert str(table.schema().find_field("i").field_type) == "long"
    assert rows(table.scan().to_arrow(), "i", "r", "d") == want
    assert duckdb_read(table.metadata_location, "SELECT i, r, d FROM iceberg_scan(?) ORDER BY i") == want


def test_readers_agree_after_nested_evolution(warehouse):
    """Fields of a row column added, renamed, dropped and added back under an old name, by SQE:
    pyiceberg and DuckDB resolve them by field id as SQE does (a re-added field is NULL in the old
    file, never the dropped field's values), before and after a merge-on-read DELETE and optimize."""
    from test_row_changes import duckdb_read

    def agree(step):
        want = sqe(warehouse, "SELECT id, r.label, r.x, r.z FROM s.n ORDER BY id")[1:]
        want = [
            (int(i), label or None, int(x) if x else None, int(z) if z else None)
            for i, label, x, z in want
        ]
        table = catalog(warehouse).load_table("s.n")
        got = [
            (row["id"], row["r"]["label"], row["r"]["x"], row["r"]["z"])
            for row in table.scan().to_arrow().to_pylist()
        ]
        assert sorted(got) == want, step
        got = duckdb_read(
            table.metadata_location,
            "SELECT id, r.label, r.x, r.z FROM iceberg_scan(?) ORDER BY id",
        )
        assert [tuple(row) for row in got] == want, step
        return want

    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.n (id integer, r row(x integer, y varchar)) "
        "WITH (\"write.delete.mode\" = 'merge-on-read'); "
        "INSERT INTO s.n VALUES (1, CAST(ROW(10, 'a') AS row(x integer, y varchar))), "
        "(2, CAST(ROW(20, 'b') AS row(x integer, y varchar))); "
        "ALTER TABLE s.n ADD COLUMN r.z bigint; "
        "ALTER TABLE s.n RENAME COLUMN r.y TO label; "
        "ALTER TABLE s.n DROP COLUMN r.x; "
        "ALTER TABLE s.n ADD COLUMN r.x integer; "
        "INSERT INTO s.n (id, r) VALUES (3, CAST(ROW('c', 30, 300) AS row(label varchar, z bigint, x integer)))",
    )
    assert agree("evolved") == [(1, "a", None, None), (2, "b", None, None), (3, "c", 300, 30)]
    table = catalog(warehouse).load_table("s.n")
    r = table.schema().find_field("r").field_type
    assert [(f.name, str(f.field_type)) for f in r.fields] == [
        ("label", "string"), ("z", "long"), ("x", "int"),
    ]
    sqe(warehouse, "DELETE FROM s.n WHERE id = 2")
    assert agree("after a merge-on-read delete") == [(1, "a", None, None), (3, "c", 300, 30)]
    sqe(warehouse, "ALTER TABLE s.n EXECUTE optimize")
    assert agree("after optimize") == [(1, "a", None, None), (3, "c", 300, 30)]


def test_readers_agree_on_format_version_3(warehouse):
    """A format version 3 table SQE writes: copy-on-write changes, merge-on-read ones as deletion
    vectors (one replacing another), a MERGE, and optimize. pyiceberg and DuckDB read SQE's rows
    after each step, pyiceberg reads the vectors SQE wrote, and the table's row lineage adds up:
    every snapshot's new rows took ids from the table's next row id on."""
    from test_row_changes import duckdb_read

    def agree(step):
        want = [(int(i), p) for i, p in sqe(warehouse, "SELECT id, p FROM s.v ORDER BY id")[1:]]
        table = catalog(warehouse).load_table("s.v")
        assert table.format_version == 3, step
        assert rows(table.scan().to_arrow(), "id", "p") == want, step
        got = duckdb_read(table.metadata_location, "SELECT id, p FROM iceberg_scan(?) ORDER BY id")
        assert [(int(i), p) for i, p in got] == want, step
        return want, table

    def first_row_ids(table):
        """Each live data file's first row id: its own, or the one it inherits from its manifest
        (the manifest's, plus the rows of the entries before it that inherit theirs). Read with
        DuckDB's avro reader: pyiceberg 0.12 reads manifest lists without their first row ids."""
        import duckdb
        from test_quack import load

        con = duckdb.connect()
        try:
            load(con, "avro")
            listed = con.execute(
                "SELECT manifest_path, content, first_row_id FROM read_avro(?)",
                [table.current_snapshot().manifest_list],
            ).fetchall()
            ids = {}
            for manifest, content, next_id in listed:
                if content != 0:
                    continue
                entries = con.execute(
                    "SELECT status, data_file.file_path, data_file.record_count, "
                    "data_file.first_row_id FROM read_avro(?)",
                    [manifest],
                ).fetchall()
                for status, path, records, own in entries:
                    if status == 2:
                        continue
                    if own is None:
                        own, next_id = next_id, next_id + records
                    ids[path] = (own, records)
            return ids
        finally:
            con.close()

    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.v (id bigint, p varchar) WITH (format_version = 3, partitioning = ARRAY['p']); "
        "INSERT INTO s.v VALUES (1, 'a'), (2, 'a'), (3, 'b'), (4, 'b'); "
        "INSERT INTO s.v VALUES (5, 'a'), (6, 'b')",
    )
    inserted = first_row_ids(catalog(warehouse).load_table("s.v"))
    assert sorted(inserted.values()) == [(0, 2), (2, 2), (4, 1), (5, 1)]
    sqe(warehouse, "DELETE FROM s.v WHERE id = 2; UPDATE s.v SET p = 'b' WHERE id = 1")
    want, table = agree("copy-on-write")
    # The files the changes left keep their rows' ids (their manifest was written again); the
    # new file's rows have new ones.
    changed = first_row_ids(table)
    kept = {path: ids for path, ids in changed.items() if path in inserted}
    assert kept == {path: ids for path, ids in inserted.items() if path in changed}
    assert len(kept) == 3
    assert [ids for path, ids in changed.items() if path not in inserted][0][0] >= 6
    assert want == [(1, "b"), (3, "b"), (4, "b"), (5, "a"), (6, "b")]
    sqe(
        warehouse,
        "ALTER TABLE s.v SET PROPERTIES \"write.delete.mode\" = 'merge-on-read', "
        "\"write.update.mode\" = 'merge-on-read', \"write.merge.mode\" = 'merge-on-read'; "
        "DELETE FROM s.v WHERE id = 3; "
        "DELETE FROM s.v WHERE id = 4; "
        "UPDATE s.v SET id = id * 10 WHERE id IN (5, 6)",
    )
    want, table = agree("deletion vectors")
    assert want == [(1, "b"), (50, "a"), (60, "b")]
    vectors = [
        f for f in table.inspect.files().to_pylist() if f["content"] == 1
    ]
    assert sorted(f["file_format"] for f in vectors) == ["PUFFIN"] * 3
    assert sorted(f["record_count"] for f in vectors) == [1, 1, 2]
    sqe(
        warehouse,
        "MERGE INTO s.v t USING (VALUES (50, 'z'), (7, 'c')) AS n (id, p) ON t.id = n.id "
        "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (n.id, n.p)",
    )
    assert agree("merge")[0] == [(1, "b"), (7, "c"), (60, "b")]
    sqe(warehouse, "ALTER TABLE s.v EXECUTE optimize")
    want, table = agree("optimize")
    assert want == [(1, "b"), (7, "c"), (60, "b")]
    assert [f for f in table.inspect.files().to_pylist() if f["content"] == 1] == []

    # Row lineage: snapshots in order, each first row id where the one before left off.
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
    next_row_id = 0
    for snapshot in snapshots:
        assert snapshot.first_row_id == next_row_id, snapshot
        next_row_id += snapshot.added_rows
    assert table.metadata.next_row_id == next_row_id

