"""SQE's row-level DELETE, UPDATE and MERGE, read back by independent readers: pyiceberg 0.12 (SqlCatalog
on the same warehouse) and DuckDB 1.5.5's iceberg extension (`iceberg_scan` of the table's current
metadata file), in both write modes: copy-on-write (the files are written again) and
merge-on-read (position delete files name the rows). Each reader must return exactly SQE's rows,
at the current snapshot and at the one before the last change.

The CLI binary is taken from $SQE_CLI (default: target/debug/sqe-cli).
"""

import contextlib
import importlib
import pathlib
import subprocess
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from test_pyiceberg_interop import SQE_CLI, catalog, sqe

MODES = ["copy-on-write", "merge-on-read"]

CHANGES = [
    "DELETE FROM s.t WHERE id = 2",
    # Unknown for NULL names: those rows stay.
    "DELETE FROM s.t WHERE name <> 'a' AND amount > 40",
    "UPDATE s.t SET grp = 'x', amount = amount * 2 WHERE id IN (4, 7)",
    "DELETE FROM s.t WHERE id IN (SELECT k FROM s.u)",
    "UPDATE s.t SET name = coalesce(name, 'none')",
    "MERGE INTO s.t USING (SELECT * FROM (VALUES (1, 'aa'), (9, 'i')) AS w(id, n)) AS v ON t.id = v.id "
    "WHEN MATCHED THEN UPDATE SET name = v.n WHEN NOT MATCHED THEN INSERT (id, name, grp) VALUES (v.id, v.n, 'y')",
]


def load(con, name):
    """Loads DuckDB extension `name` from its PyPI wheel (no download at run time)."""
    module = importlib.import_module(f"duckdb_extension_{name}")
    path = pathlib.Path(module.__file__).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    con.execute(f"LOAD '{path}'")


def sqe_rows(warehouse, sql):
    """SQE's rows for `sql` (id, name, grp, amount), typed as the other readers type them."""
    out = []
    for id_, name, grp, amount in sqe(warehouse, sql)[1:]:
        out.append(
            (
                int(id_),
                name if name != "" else None,
                grp if grp != "" else None,
                Decimal(amount) if amount != "" else None,
            )
        )
    return sorted(out, key=repr)


def maintain_fully(warehouse, table):
    """optimize, then every snapshot but the current one expired and the files nothing refers to
    removed (retentions 0s); returns the finished process."""
    return subprocess.run(
        [SQE_CLI, "--embedded", "--warehouse", str(warehouse), "--maintenance-min-retention", "0s",
         "-f", "csv", "--stop-on-error", "-e",
         f"ALTER TABLE {table} EXECUTE optimize; "
         f"ALTER TABLE {table} EXECUTE expire_snapshots(retention_threshold => '0s'); "
         f"ALTER TABLE {table} EXECUTE remove_orphan_files(retention_threshold => '0s')"],
        capture_output=True, text=True, timeout=600,
    )


def referenced_paths(table):
    """The local paths of every file a pyiceberg table's current snapshot and metadata refer to."""
    snapshot = table.current_snapshot()
    live = {task.file.file_path for task in table.scan().plan_files()}
    live |= {m.manifest_path for m in snapshot.manifests(table.io)}
    live |= {snapshot.manifest_list, table.metadata_location}
    live |= {e.metadata_file for e in table.metadata.metadata_log}
    return {p.removeprefix("file://") for p in live}


def duckdb_read(metadata_location, sql):
    """The rows of `sql`, which reads `iceberg_scan(?)`, over a table's metadata file in DuckDB."""
    con = duckdb.connect()
    try:
        load(con, "avro")
        load(con, "iceberg")
        return con.execute(sql, [metadata_location]).fetchall()
    finally:
        con.close()


def duckdb_rows(metadata_location):
    con = duckdb.connect()
    try:
        load(con, "avro")
        load(con, "iceberg")
        got = con.execute(
            "SELECT id, name, grp, amount FROM iceberg_scan(?)", [metadata_location]
        ).fetchall()
    finally:
        con.close()
    return sorted(((int(a), b, c, d) for a, b, c, d in got), key=repr)


@contextlib.contextmanager
def duckdb_over(table):
    """A DuckDB connection with the iceberg extension and a view `w` over `table` (`iceberg_scan` of
    its current metadata file)."""
    con = duckdb.connect()
    try:
        load(con, "avro")
        load(con, "iceberg")
        location = table.metadata_location.replace("'", "''")
        con.execute(f"CREATE VIEW w AS SELECT * FROM iceberg_scan('{location}')")
        yield con
    finally:
        con.close()


def pyiceberg_rows(table, snapshot_id=None):
    data = table.scan(snapshot_id=snapshot_id).to_arrow().select(["id", "name", "grp", "amount"])
    return sorted(
        ((r["id"], r["name"], r["grp"], r["amount"]) for r in data.to_pylist()), key=repr
    )


@pytest.mark.parametrize("mode", MODES)
def test_readers_agree_after_each_change(tmp_path, mode):
    if not pathlib.Path(SQE_CLI).is_file():
        pytest.fail(f"sqe-cli binary not found at {SQE_CLI} (build it, or set SQE_CLI)")
    warehouse = tmp_path
    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.t (id bigint, name varchar, grp varchar, amount decimal(10,2)) "
        f"WITH (partitioning = ARRAY['grp'], \"write.delete.mode\" = '{mode}', \"write.update.mode\" = '{mode}', "
        f"\"write.merge.mode\" = '{mode}'); "
        "CREATE TABLE s.u (k bigint); "
        "INSERT INTO s.t VALUES (1, 'a', 'x', 10.50), (2, 'b', 'x', 20), (3, 'c', 'y', NULL), "
        "(4, NULL, 'y', 45.25), (5, 'e', NULL, 50); "
        "INSERT INTO s.t VALUES (6, 'f', 'z', 60), (7, 'g', 'y', 7), (8, NULL, 'x', 80); "
        "INSERT INTO s.u VALUES (3), (6)",
    )
    for change in CHANGES:
        before = sqe_rows(warehouse, "SELECT * FROM s.t")
        sqe(warehouse, change)
        after = sqe_rows(warehouse, "SELECT * FROM s.t")
        table = catalog(warehouse).load_table("s.t")
        assert pyiceberg_rows(table) == after, change
        assert duckdb_rows(table.metadata_location) == after, change
        # The snapshot before the change still reads as it was.
        parent = table.current_snapshot().parent_snapshot_id
        assert pyiceberg_rows(table, parent) == before, change
    assert after == [
        (1, "aa", "x", Decimal("10.50")),
        (4, "none", "x", Decimal("90.50")),
        (7, "g", "x", Decimal("14.00")),
        (8, "none", "x", Decimal("80.00")),
        (9, "i", "y", None),
    ]
    table = catalog(warehouse).load_table("s.t")
    deletes = sum(
        1 for task in table.scan().plan_files() for _ in task.delete_files
    )
    if mode == "merge-on-read":
        assert deletes > 0
        assert table.current_snapshot().summary["added-position-deletes"] == "1"
    else:
        assert deletes == 0
        assert table.current_snapshot().summary.operation.value == "overwrite"


WIDE_ROWS = (
    "SELECT a * 1000 + b, 'n' || cast(a * 1000 + b AS varchar), cast(a * 1000 + b AS decimal(10,2)) / 10, "
    "cast(b AS double), ARRAY['t' || cast(b % 3 AS varchar)] "
    "FROM (SELECT x AS a FROM unnest(sequence(0, 299)) AS u(x)) "
    "CROSS JOIN (SELECT y AS b FROM unnest(sequence(0, 999)) AS v(y))"
)

# Rows of every kind the changes below touch: ids ending in 006, 007, 008 and 500.
SAMPLE = "SELECT id, name, amount, f FROM s.w WHERE id % 1000 IN (6, 7, 8, 500)"
TOTALS = "SELECT count(*), sum(id), sum(amount), count(name), sum(f), count(tags) FROM s.w"


def number(value):
    return None if value in (None, "") else Decimal(str(value))


def every_reader(warehouse, where=""):
    """The sample rows and the totals (with `where` added to both) as SQE, pyiceberg and DuckDB
    read them; each reader's answer must equal SQE's."""
    sample = SAMPLE + (f" AND {where}" if where else "")
    totals = TOTALS + (f" WHERE {where}" if where else "")

    def typed(row):
        id_, name, amount, f = row
        return (int(id_), name or None, Decimal(amount) if amount else None, float(f))

    sqe_sample = sorted(typed(r) for r in sqe(warehouse, sample)[1:])
    [sqe_totals] = sqe(warehouse, totals)[1:]
    table = catalog(warehouse).load_table("s.w")
    arrow = (table.scan(row_filter=where) if where else table.scan()).to_arrow()
    with duckdb_over(table) as con:
        con.register("py", arrow)
        for name in ["w", "py"]:
            got_sample = con.execute(sample.replace("s.w", name)).fetchall()
            assert sorted(got_sample) == sqe_sample, name
            got_totals = con.execute(totals.replace("s.w", name)).fetchone()
            assert [number(v) for v in got_totals] == [number(v) for v in sqe_totals], name
    return sqe_sample, sqe_totals


def chunks(path):
    """Each column chunk of a Parquet file: (row group, column) -> (rows, compressed size,
    statistics)."""
    meta = pq.ParquetFile(path).metadata
    out = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            stats = column.statistics
            out[(g, column.path_in_schema)] = (
                group.num_rows,
                column.total_compressed_size,
                (stats.min, stats.max, stats.null_count) if stats and stats.has_min_max else None,
            )
    return out


def only_file(warehouse):
    table = catalog(warehouse).load_table("s.w")
    files = [task.file for task in table.scan().plan_files()]
    assert len(files) == 1, [f.file_path for f in files]
    return files[0]


def test_copy_on_write_writes_again_only_the_columns_a_change_sets(tmp_path):
    if not pathlib.Path(SQE_CLI).is_file():
        pytest.fail(f"sqe-cli binary not found at {SQE_CLI} (build it, or set SQE_CLI)")
    warehouse = tmp_path
    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.w (id bigint NOT NULL, name varchar, amount decimal(10,2), f double, tags array(varchar)); "
        f"INSERT INTO s.w {WIDE_ROWS}",
    )
    before = only_file(warehouse)
    old = chunks(before.file_path)
    # Three row groups of 131,072 rows at most: positions in each.
    assert sorted({g for g, _ in old}) == [0, 1, 2]

    sqe(warehouse, "UPDATE s.w SET amount = 99999.99, name = NULL WHERE id % 1000 = 7")
    after = only_file(warehouse)
    assert after.file_path != before.file_path
    new = chunks(after.file_path)
    assert new.keys() == old.keys()
    for key, (rows, size, stats) in old.items():
        if key[1] in ("name", "amount"):
            assert new[key][2] != stats, key
        else:
            # The columns it does not set are the same chunks.
            assert new[key] == (rows, size, stats), key
    # The set columns' metrics count the new values: 300 NULL names, amounts up to 99999.99.
    assert after.record_count == 300_000
    assert after.null_value_counts[2] == 300
    assert after.null_value_counts[3] == 0
    assert int.from_bytes(after.upper_bounds[3], "big", signed=True) == 9999999
    assert int.from_bytes(after.lower_bounds[3], "big", signed=True) == 0
    assert after.upper_bounds[2] == b"n99999"

    sample, totals = every_reader(warehouse)
    assert [r for r in sample if r[0] in (7, 299007)] == [
        (7, None, Decimal("99999.99"), 7.0),
        (299007, None, Decimal("99999.99"), 7.0),
    ]
    assert [number(v) for v in totals] == [
        300000, 44999850000, Decimal("4525499787.00"), 299700, 149850000, 300000
    ]
    # The new values are found through the bounds and the page index.
    every_reader(warehouse, "amount > 50000")
    every_reader(warehouse, "name IS NULL")
    assert sqe(warehouse, "SELECT count(*) FROM s.w WHERE amount > 50000")[1:] == [["300"]]

    # A MERGE's UPDATE clause: only its column is written again; a row it does not match keeps
    # all its values.
    sqe(
        warehouse,
        "MERGE INTO s.w USING (SELECT id AS k FROM s.w WHERE id % 1000 = 8) AS src ON w.id = src.k "
        "WHEN MATCHED AND src.k % 2000 = 8 THEN UPDATE SET f = -1 "
        "WHEN NOT MATCHED THEN INSERT (id) VALUES (src.k)",
    )
    merged = only_file(warehouse)
    newer = chunks(merged.file_path)
    for key, value in new.items():
        assert (newer[key] == value) == (key[1] != "f"), key
    # f is a double: its bounds are left out, its NaN count is known.
    assert 4 not in merged.lower_bounds and 4 not in merged.upper_bounds
    assert merged.nan_value_counts[4] == 0
    sample, _ = every_reader(warehouse)
    assert [r for r in sample if r[0] in (8, 1008, 2008)] == [
        (8, "n8", Decimal("0.80"), -1.0),
        (1008, "n1008", Decimal("100.80"), 8.0),
        (2008, "n2008", Decimal("200.80"), -1.0),
    ]
    every_reader(warehouse, "f < 0")

    # A NULL for a NOT NULL column is refused, and nothing changes.
    result = subprocess.run(
        [SQE_CLI, "--embedded", "--warehouse", str(warehouse), "-e", "UPDATE s.w SET id = NULL WHERE id = 6"],
        capture_output=True, text=True, timeout=300,
    )
    assert "NULL value not allowed for NOT NULL column: id" in result.stdout + result.stderr, result
    assert only_file(warehouse).file_path == merged.file_path

    # What cannot be written so is written whole, and reads the same: a MERGE that deletes rows
    # of the file, and an UPDATE after a column was added (the file lacks it).
    sqe(
        warehouse,
        "MERGE INTO s.w USING (VALUES 6, 1006) AS src(k) ON w.id = src.k "
        "WHEN MATCHED AND src.k = 6 THEN DELETE WHEN MATCHED THEN UPDATE SET name = 'six'",
    )
    table = catalog(warehouse).load_table("s.w")
    whole = [task.file for task in table.scan().plan_files()]
    assert merged.file_path not in [f.file_path for f in whole]
    assert sum(f.record_count for f in whole) == 299_999
    sqe(warehouse, "ALTER TABLE s.w ADD COLUMN extra integer; UPDATE s.w SET extra = 1, amount = 0 WHERE id % 1000 = 500")
    sample, totals = every_reader(warehouse)
    assert [r for r in sample if r[0] in (6, 1006, 500)] == [
        (500, "n500", Decimal("0.00"), 500.0),
        (1006, "six", Decimal("100.60"), 6.0),
    ]
    assert sqe(warehouse, "SELECT count(extra), sum(extra) FROM s.w")[1:] == [["300", "300"]]


def test_sqe_changes_columns_of_files_pyiceberg_wrote(tmp_path):
    """pyarrow's files (through pyiceberg) have no page index and store decimals in fixed-length
    bytes: a bigint column is written again alone, a decimal one (SQE would store it as an int64)
    with the whole file; every reader reads both."""
    if not pathlib.Path(SQE_CLI).is_file():
        pytest.fail(f"sqe-cli binary not found at {SQE_CLI} (build it, or set SQE_CLI)")
    warehouse = tmp_path
    sqe(warehouse, "CREATE SCHEMA s")
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("qty", pa.int64()),
            pa.field("name", pa.string()),
            pa.field("price", pa.decimal128(10, 2)),
        ]
    )
    table = catalog(warehouse).create_table("s.p", schema=schema)
    table.append(
        pa.table(
            {
                "id": list(range(300)),
                "qty": [i if i % 7 else None for i in range(300)],
                "name": [f"p{i}" for i in range(300)],
                "price": [Decimal(i) / 4 for i in range(300)],
            },
            schema=schema,
        )
    )
    [written] = [task.file for task in table.scan().plan_files()]
    old = chunks(written.file_path)
    assert not pq.ParquetFile(written.file_path).metadata.row_group(0).column(0).has_offset_index

    sqe(warehouse, "UPDATE s.p SET qty = coalesce(qty, -1) * 10 WHERE id % 3 = 0")
    [patched] = [task.file for task in catalog(warehouse).load_table("s.p").scan().plan_files()]
    new = chunks(patched.file_path)
    for key, value in old.items():
        assert (new[key] == value) == (key[1] != "qty"), key
    assert patched.null_value_counts[2] == 43 - 15
    assert int.from_bytes(patched.upper_bounds[2], "little", signed=True) == 2970

    sqe(warehouse, "UPDATE s.p SET price = price + 1 WHERE id < 5")
    current = catalog(warehouse).load_table("s.p")
    files = [task.file for task in current.scan().plan_files()]
    assert patched.file_path not in [f.file_path for f in files]

    def typed(row):
        id_, qty, name, price = row
        return (int(id_), int(qty) if qty else None, name, Decimal(price))

    expected = [
        (
            i,
            (i if i % 7 else -1) * 10 if i % 3 == 0 else (i if i % 7 else None),
            f"p{i}",
            Decimal(i) / 4 + (1 if i < 5 else 0),
        )
        for i in range(300)
    ]
    assert sorted(typed(r) for r in sqe(warehouse, "SELECT * FROM s.p")[1:]) == expected
    arrow = current.scan().to_arrow()
    assert sorted(tuple(r.values()) for r in arrow.to_pylist()) == expected
    with duckdb_over(current) as con:
        got = con.execute("SELECT id, qty, name, price FROM w").fetchall()
    assert sorted(got) == expected

    # A column made nullable after its files were written keeps REQUIRED in them: a NULL set there
    # goes the general way, and every reader reads it.
    with current.update_schema() as update:
        update.update_column("id", required=False)
    sqe(warehouse, "UPDATE s.p SET id = NULL, qty = 5 WHERE id = 299")
    current = catalog(warehouse).load_table("s.p")
    assert sqe(warehouse, "SELECT count(*), count(id), sum(qty) FROM s.p WHERE id IS NULL")[1:] == [
        ["1", "0", "5"]
    ]
    assert current.scan(row_filter="id IS NULL").to_arrow().to_pylist() == [
        {"id": None, "qty": 5, "name": "p299", "price": Decimal("74.75")}
    ]
    with duckdb_over(current) as con:
        got = con.execute("SELECT id, qty, name, price FROM w WHERE id IS NULL").fetchall()
    assert got == [(None, 5, "p299", Decimal("74.75"))]
