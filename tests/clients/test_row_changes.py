"""SQE's row-level DELETE, UPDATE and MERGE, read back by independent readers: pyiceberg 0.12 (SqlCatalog
on the same warehouse) and DuckDB 1.5.5's iceberg extension (`iceberg_scan` of the table's current
metadata file), in both write modes: copy-on-write (the files are written again) and
merge-on-read (position delete files name the rows). Each reader must return exactly SQE's rows,
at the current snapshot and at the one before the last change.

The CLI binary is taken from $SQE_CLI (default: target/debug/sqe-cli).
"""

import importlib
import pathlib
from decimal import Decimal

import duckdb
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
