"""A table written to for a long time, then maintained, against an oracle.

500 small appends and 100 row-level changes (DELETE and UPDATE, merge-on-read and copy-on-write in
turn) go to a partitioned SQE table in one sqe-cli session; DuckDB runs the same statements on its
own in-memory table, the oracle. After every 100 statements, and after maintenance (optimize,
expire_snapshots, remove_orphan_files), SQE's rows equal the oracle's; after maintenance the
table's folder holds exactly the files its one live snapshot and metadata refer to, a handful of
data files, and pyiceberg and DuckDB's iceberg extension read the oracle's rows too.

The full run takes minutes on a debug build, so the test suite runs a run of the same shape at 150
appends and 30 changes; SQE_LONG_LIVED=full runs 500 and 100.

Run from the repository root:
    pip install -r tests/clients/requirements.txt
    [SQE_LONG_LIVED=full] pytest -q tests/clients/test_long_lived_table.py
The CLI binary is taken from $SQE_CLI (default: target/debug/sqe-cli).
"""

import os
import random
from pathlib import Path

import duckdb

from test_pyiceberg_interop import SQE_CLI, catalog, sqe
from test_row_changes import duckdb_read, maintain_fully, referenced_paths

FULL = os.environ.get("SQE_LONG_LIVED") == "full"
APPENDS = 500 if FULL else 150
CHANGES = 100 if FULL else 30
GROUPS = 4


def statements(seed: int) -> list[tuple[str, bool]]:
    """The run's statements in order, each with whether the oracle runs it too (the table's
    write-mode switches are SQE's alone)."""
    rng = random.Random(seed)
    out: list[tuple[str, bool]] = []
    next_id = 0
    changes = 0
    for n in range(APPENDS):
        values = []
        for _ in range(rng.randint(1, 3)):
            values.append(f"({next_id}, {rng.randrange(GROUPS)}, 'v{next_id}')")
            next_id += 1
        out.append((f"INSERT INTO s.t VALUES {', '.join(values)}", True))
        if n % 5 == 4 and changes < CHANGES:
            if changes % 25 == 0:
                mode = "merge-on-read" if changes % 50 == 0 else "copy-on-write"
                out.append((
                    f"ALTER TABLE s.t SET PROPERTIES \"write.delete.mode\" = '{mode}', "
                    f"\"write.update.mode\" = '{mode}'",
                    False,
                ))
            low = rng.randrange(max(next_id - 40, 1))
            k = rng.randrange(7)
            if changes % 2 == 0:
                out.append((
                    f"DELETE FROM s.t WHERE id % 7 = {k} AND id BETWEEN {low} AND {low + 30}",
                    True,
                ))
            else:
                g = rng.randrange(GROUPS)
                out.append((
                    f"UPDATE s.t SET v = concat(v, '+{changes}') WHERE g = {g} AND id % 3 = {k % 3}",
                    True,
                ))
            changes += 1
    assert changes == CHANGES
    return out


def sqe_rows(warehouse: Path) -> list[tuple]:
    return [(int(i), int(g), v) for i, g, v in sqe(warehouse, "SELECT id, g, v FROM s.t ORDER BY id")[1:]]


def test_appends_and_row_changes_then_maintenance_match_the_oracle(tmp_path):
    warehouse = tmp_path
    if not Path(SQE_CLI).is_file():
        raise AssertionError(f"sqe-cli binary not found at {SQE_CLI} (build it, or set SQE_CLI)")
    seed = 45
    sqe(
        warehouse,
        "CREATE SCHEMA s; CREATE TABLE s.t (id bigint, g integer, v varchar) "
        "WITH (partitioning = ARRAY['g'])",
    )
    oracle = duckdb.connect()
    oracle.execute("CREATE SCHEMA s; CREATE TABLE s.t (id BIGINT, g INTEGER, v VARCHAR)")
    run = statements(seed)
    # In batches of 100 statements, one sqe-cli session each; the rows agree after each batch.
    for start in range(0, len(run), 100):
        batch = run[start:start + 100]
        sqe(warehouse, "; ".join(sql for sql, _ in batch))
        for sql, both in batch:
            if both:
                oracle.execute(sql)
        want = oracle.execute("SELECT id, g, v FROM s.t ORDER BY id").fetchall()
        assert sqe_rows(warehouse) == want, f"seed {seed}: statements {start}..{start + len(batch)}"
    want = oracle.execute("SELECT id, g, v FROM s.t ORDER BY id").fetchall()
    assert any("+" in v for _, _, v in want), "no UPDATE changed a row"

    table = catalog(warehouse).load_table("s.t")
    files_before = len(list(table.scan().plan_files()))
    # Appends merge manifests once a snapshot would list 100 (Iceberg's default): however many
    # commits, a scan plans from at most that many.
    manifests = table.current_snapshot().manifests(table.io)
    assert 1 < len(manifests) <= 100, len(manifests)
    folder = Path(table.location().removeprefix("file://"))
    out = maintain_fully(warehouse, "s.t")
    assert out.returncode == 0, f"maintenance failed:\n{out.stderr}"

    table = catalog(warehouse).load_table("s.t")
    assert len(list(table.snapshots())) == 1
    tasks = list(table.scan().plan_files())
    assert not any(task.delete_files for task in tasks), "delete files left after optimize"
    # One file per partition at most is left of hundreds.
    assert files_before > 100, files_before
    assert len(tasks) <= GROUPS, [t.file.file_path for t in tasks]
    live = referenced_paths(table)
    on_disk = {str(p) for p in folder.rglob("*") if p.is_file()}
    assert on_disk == live, f"left {sorted(on_disk - live)[:10]}, missing {sorted(live - on_disk)[:10]}"

    assert sqe_rows(warehouse) == want
    got = table.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["g"], r["v"]) for r in got) == want
    got = duckdb_read(table.metadata_location, "SELECT id, g, v FROM iceberg_scan(?) ORDER BY id")
    assert [tuple(r) for r in got] == want
