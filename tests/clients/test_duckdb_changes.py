"""SQE reads what DuckDB 1.5.5 changes, and DuckDB reads what SQE changes, through one REST catalog.

The catalog is the one test_rest_catalog.py uses (rest_catalog.py: lakana-server behind the recording
proxy that takes the test IdP's JWTs and forwards each with that user's own lakana token), and
sqe-server mounts it as `lake` by passthrough (test_rest_catalog.py's `sqe`). DuckDB 1.5.5 (its
httpfs, avro and iceberg extension wheels, loaded offline) attaches the same catalog with
`ATTACH 'dev' AS lake (TYPE iceberg, ENDPOINT …, SECRET …)`, the secret holding alice's IdP token.

For a table SQE creates (unpartitioned) and one partitioned by `grp`, with SQE changing rows in each
of its write modes (copy-on-write and merge-on-read):

- SQE inserts rows in two INSERTs; DuckDB reads exactly SQE's rows.
- DuckDB runs UPDATE (also one that moves a row to another partition), DELETE, MERGE INTO (update
  matched, insert unmatched) and MERGE INTO … WHEN MATCHED THEN DELETE; it writes position delete
  files (format v2, merge-on-read). After each, SQE's rows (over Trino HTTP, as alice) equal
  DuckDB's, row for row.
- SQE then runs DELETE, UPDATE and MERGE on what DuckDB left (copy-on-write: rewriting data files
  that DuckDB's delete files point into; merge-on-read: adding its own position deletes, checked in
  the snapshot summary); after each, DuckDB reads SQE's rows.
- DuckDB changes the table once more, over SQE's files, and SQE reads that too.

Format version 3: DuckDB creates a table with `'format-version' = '3'` in the catalog's environment
`v3` (the proxy keeps those tables: v3_tables.py says why) and changes its rows, writing deletion
vectors in Puffin files, which SQE applies; SQE then changes the rows in each of its write modes
(merge-on-read: deletion vectors merged with DuckDB's, and row lineage moved on as the spec says),
and DuckDB reads SQE's rows and changes them once more.

Every statement is also run on a plain in-memory DuckDB table (the model), so the rows are what the
statements say they are, not only the same in both engines; every catalog request of DuckDB's
changes carries alice's token (the proxy's record), one commit a statement.

What DuckDB 1.5.5 and lakana 0.20 need worked around:

- lakana's `/v1/config` names no prefix (`"overrides": {}`), and DuckDB 1.5.5's ATTACH takes none as
  an option (it takes the prefix only from the config's `overrides`/`defaults`), so without one it
  asks `/v1/namespaces/…`, which lakana answers 404 `{"detail":"Not Found"}`. `PrefixFront` stands in
  front of the proxy and adds `"prefix": "dev"` to the config's `overrides` (the REST spec's way for
  a catalog to name its prefix); every other request and answer it relays unchanged, the caller's
  Authorization included, so the proxy still verifies and records each request.
- DuckDB refuses DELETE (and MERGE … THEN DELETE) on a table whose `write.delete.mode` is
  copy-on-write: "Not implemented Error: DuckDB-Iceberg only supports merge-on-read for
  updates/deletes. Table Property 'write.delete.mode' is set to 'copy-on-write' for table …". So the
  table is merge-on-read while DuckDB changes it, and set to copy-on-write (pyiceberg, as alice)
  only for SQE's changes.
- lakana 0.20 requires each partition field's `field-id` in CreateTable (optional in the REST
  spec): SQE sends them (from 1000, as Iceberg's writers number them), so SQE creates both tables.
"""

import itertools
import json
import threading
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import duckdb
import pytest

from rest_catalog import ENVIRONMENT, HOP_BY_HOP, V3_ENVIRONMENT, ProxyHandler, rest_catalog  # noqa: F401
from test_quack import load
from test_rest_catalog import jwt_of, sqe, trino_sql, users  # noqa: F401

COLUMNS = "id, name, grp, amount"
MODES = ["copy-on-write", "merge-on-read"]
LAYOUTS = ["unpartitioned", "partitioned"]

# Statements with `{t}` for the table's name (`lake.bronze.<name>` in SQE and DuckDB, `m` in the
# model). Rows go in with SQE, in two INSERTs.
INSERTS = [
    "INSERT INTO {t} VALUES (1, 'a', 'x', 1.5), (2, 'b', 'y', 2.5), (3, 'c', 'x', 3.5), (4, 'd', 'y', 4.5)",
    "INSERT INTO {t} VALUES (5, NULL, 'x', NULL), (6, 'f', 'z', 6.5), (7, 'g', 'y', 7.5), (8, 'h', 'x', 8.5)",
]
# What DuckDB changes.
DUCKDB_CHANGES = [
    "UPDATE {t} SET amount = amount * 10 WHERE id IN (2, 6)",
    # Moves row 3 from partition x to partition w.
    "UPDATE {t} SET grp = 'w', name = upper(name) WHERE id = 3",
    "DELETE FROM {t} WHERE id = 1",
    # Unknown for the NULL name: row 5 stays.
    "DELETE FROM {t} WHERE name <> 'g' AND amount > 60",
    "MERGE INTO {t} AS t USING (SELECT * FROM (VALUES (5, 'e'), (7, 'gg'), (9, 'i')) AS v(id, n)) AS v "
    "ON t.id = v.id WHEN MATCHED THEN UPDATE SET name = v.n "
    "WHEN NOT MATCHED THEN INSERT (id, name, grp, amount) VALUES (v.id, v.n, 'y', 9.5)",
    "MERGE INTO {t} AS t USING (SELECT * FROM (VALUES (8), (10)) AS v(id)) AS v "
    "ON t.id = v.id WHEN MATCHED THEN DELETE",
]
# What SQE changes after DuckDB did.
SQE_CHANGES = [
    "DELETE FROM {t} WHERE id = 4",
    "UPDATE {t} SET amount = coalesce(amount, 0) + 1, grp = 'x' WHERE grp IN ('w', 'y')",
    "MERGE INTO {t} AS t USING (SELECT * FROM (VALUES (7, 'seven'), (11, 'k')) AS v(id, n)) AS v "
    "ON t.id = v.id WHEN MATCHED THEN UPDATE SET name = v.n "
    "WHEN NOT MATCHED THEN INSERT (id, name, grp, amount) VALUES (v.id, v.n, 'z', 11.5)",
]
# What DuckDB changes once more, over SQE's changes (in merge-on-read, over SQE's delete files).
DUCKDB_AFTER_SQE = [
    "UPDATE {t} SET name = name || '!' WHERE grp = 'x'",
    "DELETE FROM {t} WHERE id = 11",
]


class PrefixFront(ThreadingHTTPServer):
    """Relays every request to `upstream` (the proxy) unchanged, and adds `"prefix": prefix` to the
    `overrides` of a `/v1/config` answer (see the module docstring)."""

    daemon_threads = True

    def __init__(self, upstream: str, prefix: str):
        super().__init__(("127.0.0.1", 0), PrefixFrontHandler)
        self.upstream = urlsplit(upstream)
        self.prefix = prefix

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class PrefixFrontHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: PrefixFront

    def log_message(self, format, *args):
        pass

    def _handle(self):
        body = ProxyHandler._body(self)  # plain or chunked, as the proxy reads it
        forward = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP - {"authorization"}}
        upstream = HTTPConnection(self.server.upstream.hostname, self.server.upstream.port, timeout=120)
        try:
            upstream.request(self.command, self.path, body=body or None, headers=forward)
            response = upstream.getresponse()
            status, answer = response.status, response.read()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP | {"date", "server"}]
        finally:
            upstream.close()
        if urlsplit(self.path).path == "/v1/config" and status == 200:
            config = json.loads(answer)
            config.setdefault("overrides", {})["prefix"] = self.server.prefix
            answer = json.dumps(config).encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle


def attached(rest_catalog, idp, environment, name):
    """DuckDB with the catalog's `environment` attached as `name`, presenting alice's IdP token; and
    the front that names the environment's prefix for it."""
    front = PrefixFront(rest_catalog.proxy_url, environment)
    threading.Thread(target=front.serve_forever, daemon=True).start()
    con = duckdb.connect()
    try:
        for extension in ("httpfs", "avro", "iceberg"):
            load(con, extension)
        con.execute(f"CREATE SECRET alice_token (TYPE iceberg, TOKEN '{jwt_of(idp, 'alice')}')")
        # lakana vends no storage credentials: DuckDB reads and writes the file:// root itself.
        con.execute(
            f"ATTACH '{environment}' AS {name} (TYPE iceberg, ENDPOINT '{front.url}', SECRET alice_token, "
            "ACCESS_DELEGATION_MODE 'none')"
        )
        yield con
    finally:
        con.close()
        front.shutdown()
        front.server_close()


@pytest.fixture(scope="module")
def duck(rest_catalog, idp):
    """DuckDB with the catalog attached as `lake`, presenting alice's IdP token."""
    yield from attached(rest_catalog, idp, ENVIRONMENT, "lake")


@pytest.fixture(scope="module")
def duck_v3(rest_catalog, idp):
    """DuckDB with the environment of format version 3 tables attached as `v3lake`, as SQE mounts it."""
    yield from attached(rest_catalog, idp, V3_ENVIRONMENT, "v3lake")


def rows(result):
    """Rows as tuples, sorted by id (unique in every table here)."""
    return sorted((tuple(r) for r in result), key=lambda r: r[0])


class Tables:
    """One table as SQE and DuckDB see it, and its model: a table `m` of a plain in-memory DuckDB
    that every statement is run on too."""

    def __init__(self, sqe, idp, duck, name, catalog="lake"):
        self.sqe, self.idp, self.duck = sqe, idp, duck
        self.name = f"{catalog}.bronze.{name}"
        self.model = duckdb.connect()
        self.model.execute("CREATE TABLE m (id BIGINT, name VARCHAR, grp VARCHAR, amount DOUBLE)")

    def by_sqe(self, statement):
        trino_sql(self.sqe, self.idp, "alice", statement.format(t=self.name))
        self.model.execute(statement.format(t="m"))

    def by_duckdb(self, statement):
        self.duck.execute(statement.format(t=self.name))
        self.model.execute(statement.format(t="m"))

    def sqe_rows(self):
        return rows(trino_sql(self.sqe, self.idp, "alice", f"SELECT {COLUMNS} FROM {self.name}"))

    def duckdb_rows(self):
        return rows(self.duck.execute(f"SELECT {COLUMNS} FROM {self.name}").fetchall())

    def model_rows(self):
        return rows(self.model.execute(f"SELECT {COLUMNS} FROM m").fetchall())

    def assert_agree(self, after):
        """SQE's rows equal DuckDB's, row for row, and both are the model's."""
        expected = self.model_rows()
        duckdb_rows = self.duckdb_rows()
        sqe_rows = self.sqe_rows()
        assert sqe_rows == duckdb_rows, f"after {after!r}: SQE {sqe_rows} != DuckDB {duckdb_rows}"
        assert duckdb_rows == expected, f"after {after!r}: DuckDB {duckdb_rows} != model {expected}"


def modes(mode):
    """SQE's write modes, for DELETE, UPDATE and MERGE, as table properties."""
    return {f"write.{op}.mode": mode for op in ("delete", "update", "merge")}


def create(sqe, idp, rest_catalog, name, layout):
    """The table `bronze.<name>`, merge-on-read (DuckDB refuses to DELETE from a copy-on-write table:
    module docstring)."""
    properties = modes("merge-on-read")
    with_ = ", ".join(f'"{k}" = \'{v}\'' for k, v in properties.items())
    if layout == "partitioned":
        # SQE sends the partition fields' ids (lakana requires them).
        with_ = f"partitioning = ARRAY['grp'], {with_}"
    trino_sql(
        sqe, idp, "alice",
        f"CREATE TABLE lake.bronze.{name} (id BIGINT, name VARCHAR, grp VARCHAR, amount DOUBLE) WITH ({with_})",
    )


def pyiceberg_table(rest_catalog, idp, name):
    return rest_catalog.pyiceberg(jwt_of(idp, "alice")).load_table(f"bronze.{name}")


def set_modes(rest_catalog, idp, name, mode):
    """Sets the table's write modes (a commit through the proxy, as alice)."""
    with pyiceberg_table(rest_catalog, idp, name).transaction() as change:
        change.set_properties(modes(mode))


def summary(rest_catalog, idp, name):
    """The current snapshot's summary, as the catalog has it."""
    return pyiceberg_table(rest_catalog, idp, name).current_snapshot().summary


@pytest.mark.parametrize("layout,mode", list(itertools.product(LAYOUTS, MODES)))
def test_sqe_and_duckdb_read_each_others_row_changes(sqe, idp, rest_catalog, duck, layout, mode):
    name = f"duck_{layout}_{mode.replace('-', '_')}"
    create(sqe, idp, rest_catalog, name, layout)
    tables = Tables(sqe, idp, duck, name)

    for statement in INSERTS:
        tables.by_sqe(statement)
    tables.assert_agree("SQE's inserts")
    assert len(tables.model_rows()) == 8

    # DuckDB changes SQE's rows; SQE reads DuckDB's rows after each change.
    records = rest_catalog.records
    mark = records.mark()
    position_deletes = 0
    for statement in DUCKDB_CHANGES:
        before = tables.sqe_rows()
        tables.by_duckdb(statement)
        tables.assert_agree(statement)
        assert tables.sqe_rows() != before, f"{statement!r} changed nothing"
        position_deletes += int(summary(rest_catalog, idp, name).get("added-position-deletes") or 0)
    # DuckDB wrote position delete files (merge-on-read), and SQE applied them.
    assert position_deletes > 0
    # Every catalog request of this stretch carried alice's token, DuckDB's commits among them.
    requests = records.since(mark)
    assert users(requests) == {"alice"}
    table_path = f"/v1/{ENVIRONMENT}/namespaces/bronze/tables/{name}"
    commits = [r for r in requests if r.method == "POST" and r.path == table_path]
    assert len(commits) == len(DUCKDB_CHANGES), requests

    # SQE changes DuckDB's rows, in its write mode; DuckDB reads SQE's rows after each change.
    set_modes(rest_catalog, idp, name, mode)
    for statement in SQE_CHANGES:
        before = tables.duckdb_rows()
        tables.by_sqe(statement)
        tables.assert_agree(statement)
        assert tables.duckdb_rows() != before, f"{statement!r} changed nothing"
        added = summary(rest_catalog, idp, name).get("added-position-deletes")
        if mode == "merge-on-read":
            assert int(added or 0) > 0, f"{statement!r} wrote no position deletes"
        else:
            assert added is None, f"{statement!r} wrote position deletes in copy-on-write"

    # DuckDB changes the table once more, over what SQE wrote.
    set_modes(rest_catalog, idp, name, "merge-on-read")
    for statement in DUCKDB_AFTER_SQE:
        tables.by_duckdb(statement)
        tables.assert_agree(statement)
    tables.model.close()


@pytest.mark.parametrize("mode", MODES)
def test_sqe_and_duckdb_change_each_others_format_version_3_tables(sqe, idp, rest_catalog, duck_v3, mode):
    """A table of format version 3 that DuckDB creates and fills: DuckDB's changes write deletion
    vectors (Puffin), which SQE applies; SQE's changes (merge-on-read: its own deletion vectors,
    merged with DuckDB's) DuckDB reads; and so on once more."""
    name = f"duck_v3_{mode.replace('-', '_')}"
    duck_v3.execute(
        f"CREATE TABLE v3lake.bronze.{name} (id BIGINT, name VARCHAR, grp VARCHAR, amount DOUBLE) "
        "WITH ('format-version' = '3')"
    )
    tables = Tables(sqe, idp, duck_v3, name, catalog="v3lake")
    for statement in INSERTS:
        tables.by_duckdb(statement)
    tables.assert_agree("DuckDB's inserts")
    store = rest_catalog.proxy.v3

    def current():
        metadata = store.load(name)["metadata"]
        assert metadata["format-version"] == 3
        return metadata, next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])

    vectors = 0
    for statement in DUCKDB_CHANGES:
        tables.by_duckdb(statement)
        tables.assert_agree(statement)
        vectors += int(current()[1]["summary"].get("added-position-deletes") or 0)
    # DuckDB wrote deletion vectors, in Puffin files, and SQE applied them.
    assert vectors > 0
    assert list((rest_catalog.warehouse / V3_ENVIRONMENT / "bronze" / name / "data").glob("*.puffin"))

    def set_modes_by_sqe(mode):
        pairs = ", ".join(f'"{k}" = \'{v}\'' for k, v in modes(mode).items())
        trino_sql(sqe, idp, "alice", f"ALTER TABLE {tables.name} SET PROPERTIES {pairs}")

    set_modes_by_sqe(mode)
    for statement in SQE_CHANGES:
        before_rows = tables.duckdb_rows()
        next_row_id = current()[0]["next-row-id"]
        tables.by_sqe(statement)
        tables.assert_agree(statement)
        assert tables.duckdb_rows() != before_rows, f"{statement!r} changed nothing"
        metadata, snapshot = current()
        # Row lineage: SQE's snapshot starts at the table's next row id and moves it on by its rows.
        assert snapshot["first-row-id"] == next_row_id
        assert metadata["next-row-id"] == next_row_id + snapshot["added-rows"]
    set_modes_by_sqe("merge-on-read")
    for statement in DUCKDB_AFTER_SQE:
        tables.by_duckdb(statement)
        tables.assert_agree(statement)
    tables.model.close()


def test_format_version_3_types_sqe_cannot_read_are_refused_by_name(sqe, idp, duck_v3):
    """DuckDB writes tables with format version 3's variant and geometry types, which iceberg-rust
    0.10 cannot load: SQE names the column and its type, and blames neither the catalog nor the
    table's other columns."""
    for name, column, kind in [("v3_variant", "v VARIANT", "variant"), ("v3_geometry", "g GEOMETRY", "geometry(ogc:crs84)")]:
        duck_v3.execute(
            f"CREATE TABLE v3lake.bronze.{name} (id BIGINT, {column}) WITH ('format-version' = '3')"
        )
        duck_v3.execute(f"INSERT INTO v3lake.bronze.{name} SELECT 1, NULL")
        with pytest.raises(Exception) as refused:
            trino_sql(sqe, idp, "alice", f"SELECT id FROM v3lake.bronze.{name}")
        expected = (
            f"catalog 'v3lake' answered with a table whose column '{column.split()[0]}' is of type {kind}, "
            "which SQE does not read yet"
        )
        assert expected in str(refused.value), refused.value
    # The server goes on serving.
    assert trino_sql(sqe, idp, "alice", "SELECT 1") == [[1]]
