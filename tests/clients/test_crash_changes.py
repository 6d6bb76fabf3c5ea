"""SQE's row-level changes survive `kill -9`: in a loop, an `sqe-cli` process runs a long script of
UPDATE, DELETE, INSERT and MERGE statements on a partitioned table and is killed with SIGKILL. The
kills take turns: after a random delay from spawn (5 to 800 ms: from start-up, before the catalog is
open, to the third or so change); near the end of a change, by the durations seen so far; and in the
commit itself, a few ms after a new manifest list (snap-*.avro) or table metadata file appears. After
each kill the table must:

  (a) read without error, in SQE and in pyiceberg (SqlCatalog on the same warehouse);
  (b) read as a whole snapshot, never a partial one: exactly the rows of the state before or after
      the statement that was running when the process died;
  (c) hold every change the killed process reported as done, and nothing it never ran.

The UPDATEs and the MERGE change every row of every partition (there are 4), so a commit that landed
in part would show up as rows with different values of `v`. Every statement changes the
table, so the test can tell how many statements committed; it tracks the exact expected rows after
each one. At the end, every snapshot of the table must be readable (no snapshot names a file a killed
process left missing), and the current lineage must be exactly the sequence of committed states, one
snapshot per committed statement, in SQE (`FOR VERSION AS OF`) and in pyiceberg.

How success is seen: with `-f csv` the CLI prints nothing for a write, so each change in the script is
followed by a marker `SELECT 'done-N'`, and the script runs with `--stop-on-error`. The CLI prints and
flushes each statement's rows as it finishes (checked: the markers arrive one by one through a pipe),
so a marker read from the killed process's stdout means its change returned success, and at most one
change (the one after the last marker) may have been in flight at the kill.

Both write modes are covered: copy-on-write (files rewritten) and merge-on-read (delete files).
The test prints (with -s) how many kills left a committed change unreported and how many left
metadata written but never committed, to show the kills do land in commits. Set SQE_CRASH_SEED to
replay a run's random choices (the timing itself cannot be replayed). After the kills, maintenance
(optimize, expire_snapshots, remove_orphan_files) must leave the table's folder holding exactly the
files its metadata refers to, and SQE, pyiceberg and DuckDB reading the last state. The CLI binary is
taken from $SQE_CLI (default: target/debug/sqe-cli).
"""

import csv
import io
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from test_pyiceberg_interop import SQE_CLI, catalog, sqe
from test_row_changes import duckdb_read, maintain_fully, referenced_paths

MODES = ["copy-on-write", "merge-on-read"]
ITERATIONS = 25  # kills per mode
SCRIPT_CHANGES = 30  # changes per script: more than a process can run before it is killed
MAX_DELAY = 0.8  # seconds before the kill, at most
GROUPS = 4  # partitions: g = id % GROUPS
START_ROWS = 12


# The changes, as SQL and as the same change on the expected rows ({id: (g, v)}). All rows always
# share one v. The cycle adds as many rows as it removes, so the table stays around START_ROWS rows.
def _update_all(rows):
    return {i: (g, v + 1) for i, (g, v) in rows.items()}


def _merge_update_all_and_add(rows):
    new = max(rows) + 1
    out = _update_all(rows)
    out[new] = (new % GROUPS, max(v for _, v in rows.values()) + 1)
    return out


def _delete_lowest(rows):
    out = dict(rows)
    del out[min(out)]
    return out


def _insert_one(rows):
    new = max(rows) + 1
    out = dict(rows)
    out[new] = (new % GROUPS, max(v for _, v in rows.values()))
    return out


UPDATE = ("UPDATE s.t SET v = v + 1", _update_all)
MERGE = (
    "MERGE INTO s.t USING (SELECT id, v + 1 AS nv FROM s.t "
    "UNION ALL SELECT max(id) + 1, max(v) + 1 FROM s.t) AS src ON t.id = src.id "
    "WHEN MATCHED THEN UPDATE SET v = src.nv "
    f"WHEN NOT MATCHED THEN INSERT (id, g, v) VALUES (src.id, src.id % {GROUPS}, src.nv)",
    _merge_update_all_and_add,
)
DELETE = ("DELETE FROM s.t WHERE id = (SELECT min(id) FROM s.t)", _delete_lowest)
INSERT = (f"INSERT INTO s.t SELECT max(id) + 1, (max(id) + 1) % {GROUPS}, max(v) FROM s.t", _insert_one)
CYCLE = [UPDATE, MERGE, UPDATE, DELETE, UPDATE, INSERT, UPDATE, DELETE]

SELECT = "SELECT id, g, v FROM s.t"


def as_rows(csv_rows):
    """CSV rows (header first) of (id, g, v) as the expected-rows mapping."""
    assert csv_rows and csv_rows[0] == ["id", "g", "v"], csv_rows
    return {int(i): (int(g), int(v)) for i, g, v in csv_rows[1:]}


def pyiceberg_rows(table, snapshot_id=None):
    data = table.scan(snapshot_id=snapshot_id).to_arrow().select(["id", "g", "v"]).to_pylist()
    return {r["id"]: (r["g"], r["v"]) for r in data}


def describe(rows):
    """A short account of rows for failure messages: count, distinct v, ids."""
    return f"{len(rows)} rows, v in {sorted({v for _, v in rows.values()})}, ids {sorted(rows)}"


class Run:
    """sqe-cli running `script` in the background, its stdout read line by line as it comes."""

    def __init__(self, warehouse, script):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [SQE_CLI, "--embedded", "--warehouse", str(warehouse), "-f", "csv", "--stop-on-error", "-e", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.markers = []  # (seconds since start, marker line), as they arrive
        self.first_marker = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("done-"):
                self.markers.append((time.monotonic() - self.started, line.strip()))
                self.first_marker.set()

    def wait_first_marker(self):
        """Waits until the first change is reported done, or the process has ended."""
        deadline = time.monotonic() + 60
        while not self.first_marker.wait(0.01) and self.proc.poll() is None:
            assert time.monotonic() < deadline, "no change done in 60 s"

    def kill(self):
        """SIGKILLs the process; returns (exit code, stderr)."""
        # Unless poll() has reaped it, the pid is still the process's own, even if it has exited.
        if self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        # What it wrote before it died is still in the pipe: the reader gets it all before EOF.
        self.reader.join(timeout=60)
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode, err


@pytest.mark.parametrize("mode", MODES)
def test_kill_during_changes_leaves_a_whole_snapshot_with_every_reported_change(tmp_path, mode):
    if not Path(SQE_CLI).is_file():
        pytest.fail(f"sqe-cli binary not found at {SQE_CLI} (build it, or set SQE_CLI)")
    seed = int(os.environ.get("SQE_CRASH_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    warehouse = tmp_path
    sqe(
        warehouse,
        "CREATE SCHEMA s; "
        "CREATE TABLE s.t (id bigint, g bigint, v bigint) "
        f"WITH (partitioning = ARRAY['g'], \"write.update.mode\" = '{mode}', "
        f"\"write.delete.mode\" = '{mode}', \"write.merge.mode\" = '{mode}'); "
        f"INSERT INTO s.t SELECT x, x % {GROUPS}, 0 FROM UNNEST(sequence(1, {START_ROWS})) AS u(x)",
    )
    # states[k]: the expected rows after k committed changes (states[0]: after the INSERT).
    states = [{i: (i % GROUPS, 0) for i in range(1, START_ROWS + 1)}]
    assert as_rows(sqe(warehouse, SELECT)) == states[0]
    metadata_dir = Path(catalog(warehouse).load_table("s.t").location().removeprefix("file://")) / "metadata"
    reported = 0  # changes reported done, over all iterations
    attempted = 0  # changes started at most (reported ones plus one in flight per kill)
    in_flight_landed = 0  # kills after which the unreported in-flight change had committed
    gaps = []  # seconds between consecutive markers: how long a change takes

    for iteration in range(ITERATIONS):
        where = f"seed {seed}, mode {mode}, iteration {iteration}"
        done = len(states) - 1  # changes committed so far
        changes = [CYCLE[(done + n) % len(CYCLE)] for n in range(SCRIPT_CHANGES)]
        script = "; ".join(f"{sql}; SELECT 'done-{n}'" for n, (sql, _) in enumerate(changes))

        run = Run(warehouse, script)
        how = ("blind", "aimed", "manifest list", "metadata")[iteration % 4]
        if how == "blind":
            # Anywhere from start-up (catalog not yet open) to the second or third change.
            time.sleep(rng.uniform(0.005, MAX_DELAY))
        elif how == "aimed":
            # Near the end of the second change, where it writes metadata and commits: after the
            # first marker, most of a change's recent duration.
            run.wait_first_marker()
            recent = sorted(gaps[-8:]) or [0.25]
            time.sleep(recent[len(recent) // 2] * rng.uniform(0.6, 1.1))
        else:
            # In the commit: just after the change's new manifest list (snap-*.avro) or new
            # table metadata file appears, before or while the catalog is pointed at it.
            pattern = "snap-*.avro" if how == "manifest list" else "*.metadata.json"
            seen = set(metadata_dir.glob(pattern))
            if rng.random() < 0.5:
                run.wait_first_marker()  # the second change's commit, not the first's
                seen = set(metadata_dir.glob(pattern))
            deadline = time.monotonic() + 60
            while set(metadata_dir.glob(pattern)) <= seen and run.proc.poll() is None:
                assert time.monotonic() < deadline, f"{where}: no new {pattern} in 60 s"
                time.sleep(0.0005)
            time.sleep(rng.uniform(0, 0.005))
        killed_at = time.monotonic() - run.started
        code, err = run.kill()
        for (t0, _), (t1, _) in zip(run.markers, run.markers[1:]):
            gaps.append(t1 - t0)

        # The process must have died by the kill, not by an error of its own (--stop-on-error would
        # end the script at a failing change, e.g. one broken by what an earlier kill left behind).
        assert code == -signal.SIGKILL, f"{where}: sqe-cli exited {code} before the kill\nstderr:\n{err}"
        assert "Error" not in err, f"{where}: a change failed before the kill:\n{err}"
        markers = [line for _, line in run.markers]
        assert markers == [f"done-{n}" for n in range(len(markers))], f"{where}: markers {markers}"
        assert len(markers) < SCRIPT_CHANGES, f"{where}: the script finished before the kill"
        ok = len(markers)
        reported += ok
        attempted += ok + 1

        # (a) SQE reads the table after the crash.
        got = as_rows(sqe(warehouse, f"{SELECT} ORDER BY id"))
        # (b) + (c) It is exactly the state before or after the change that was in flight, and has
        # every change reported done.
        before = states[-1]
        for _, apply in changes[:ok]:
            states.append(apply(states[-1]))
        after_in_flight = changes[ok][1](states[-1])
        if got == after_in_flight:
            states.append(after_in_flight)
            in_flight_landed += 1
        assert got == states[-1], (
            f"{where}: killed ({how}) after {killed_at * 1000:.0f} ms with {ok} change(s) reported done; "
            f"the table reads as neither the state after them nor the one after the change in flight\n"
            f"got:      {describe(got)}\nexpected: {describe(states[-1])}\n"
            f"or:       {describe(after_in_flight)}\nbefore the process: {describe(before)}"
        )
        assert len({v for _, v in got.values()}) == 1, f"{where}: rows of two snapshots: {describe(got)}"
        # Over all iterations: no fewer changes than reported done, no more than were started.
        assert reported <= len(states) - 1 <= attempted, (where, reported, len(states) - 1, attempted)

        # (d) pyiceberg reads the same rows.
        table = catalog(warehouse).load_table("s.t")
        assert pyiceberg_rows(table) == got, f"{where}: pyiceberg disagrees with SQE"

    # Every snapshot reads (no snapshot names a missing file), and the lineage of the current one is
    # the sequence of committed states: one snapshot per committed change, none lost, none extra.
    table = catalog(warehouse).load_table("s.t")
    by_id = {s.snapshot_id: s for s in table.snapshots()}
    for snapshot_id in by_id:
        pyiceberg_rows(table, snapshot_id)
    lineage = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        lineage.append(snapshot.snapshot_id)
        snapshot = by_id.get(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    lineage.reverse()
    assert len(lineage) == len(states), (
        f"seed {seed}, mode {mode}: {len(lineage)} snapshots in the lineage, {len(states)} committed states"
    )
    for k, snapshot_id in enumerate(lineage):
        assert pyiceberg_rows(table, snapshot_id) == states[k], f"seed {seed}, mode {mode}: snapshot {k}"
    # SQE reads every snapshot of the lineage by time travel, in one process.
    out = subprocess.run(
        [SQE_CLI, "--embedded", "--warehouse", str(warehouse), "-f", "csv", "--stop-on-error", "-e",
         "; ".join(f"{SELECT} FOR VERSION AS OF {sid} ORDER BY id" for sid in lineage)],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, f"seed {seed}, mode {mode}: time travel failed:\n{out.stderr}"
    results = []
    for row in csv.reader(io.StringIO(out.stdout)):
        if row == ["id", "g", "v"]:
            results.append([row])
        else:
            results[-1].append(row)
    assert [as_rows(r) for r in results] == states, f"seed {seed}, mode {mode}: time travel"
    # Not a check, an account of what the kills hit: metadata files no commit took are from kills
    # in a commit, after the new metadata was written and before the catalog pointed at it.
    taken = {Path(e.metadata_file).name for e in table.metadata.metadata_log}
    taken.add(Path(table.metadata_location).name)
    stray = [f for f in metadata_dir.glob("*.metadata.json") if f.name not in taken]
    print(
        f"{mode}: seed {seed}, {ITERATIONS} kills, {len(states) - 1} changes committed, "
        f"{reported} reported done, {in_flight_landed} committed but unreported at the kill, "
        f"{len(stray)} metadata files written but not committed"
    )

    # Maintenance after the kills: a compaction, then every snapshot but the current one expired and
    # what the killed processes left removed. The table's folder then holds exactly the files its
    # current snapshot and metadata refer to, and SQE, pyiceberg and DuckDB read the last state.
    folder = Path(table.location().removeprefix("file://"))
    left_behind = {str(p) for p in folder.rglob("*") if p.is_file()}
    out = maintain_fully(warehouse, "s.t")
    assert out.returncode == 0, f"seed {seed}, mode {mode}: maintenance failed:\n{out.stderr}"
    table = catalog(warehouse).load_table("s.t")
    assert len(list(table.snapshots())) == 1, f"seed {seed}, mode {mode}"
    tasks = list(table.scan().plan_files())
    assert not any(task.delete_files for task in tasks), f"seed {seed}, mode {mode}: deletes left"
    live = referenced_paths(table)
    on_disk = {str(p) for p in folder.rglob("*") if p.is_file()}
    assert on_disk == live, (
        f"seed {seed}, mode {mode}: left {sorted(on_disk - live)}, missing {sorted(live - on_disk)}"
    )
    assert len(left_behind - on_disk) > 0, f"seed {seed}, mode {mode}: maintenance removed nothing"
    assert as_rows(sqe(warehouse, f"{SELECT} ORDER BY id")) == states[-1], f"seed {seed}, mode {mode}"
    assert pyiceberg_rows(table) == states[-1], f"seed {seed}, mode {mode}: pyiceberg after maintenance"
    got = duckdb_read(table.metadata_location, "SELECT id, g, v FROM iceberg_scan(?)")
    assert {i: (g, v) for i, g, v in got} == states[-1], f"seed {seed}, mode {mode}: DuckDB after maintenance"
