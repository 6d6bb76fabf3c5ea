"""The DuckDB side of sqe-bench: DuckDB 1.5.5 generates a suite's data as Parquet files and runs the
suite's queries over those same files, so SQE's answers and times can be set beside an engine nobody
here wrote. Extensions load from their wheels (duckdb-extension-*), with auto-install off: nothing is
downloaded.

    peer.py gen SUITE --scale 1 --out DIR    # DIR/parquet/<table>.parquet and DIR/queries/<query>.sql
        # SUITE: tpch (dbgen), tpcds (dsdgen), ssb (SSB's tables derived from dbgen's, see
        # queries/ssb-tables.sql) or clickbench (a generated `hits`, see queries/clickbench-hits.sql)
    peer.py run --dir DIR --runs 3 [--query q01 ...]
        # DIR/duckdb/<query>.parquet (each answer) and DIR/duckdb/timings.json (median seconds)
    peer.py run --dir DIR --iceberg CATALOG_DB ...
        # the same over SQE's Iceberg tables (iceberg_scan of each table's current metadata file,
        # read from the SQLite catalog), into DIR/duckdb-iceberg/
    peer.py load --dir DIR
        # DIR/parquet/<table>.parquet into DIR/warehouse as Iceberg tables written by pyiceberg
        # (SQE's catalog layout; pyiceberg's own defaults: zstd, row groups of up to a million rows)
    peer.py chart --report DIR/report.json --out DIR/report.png
        # both engines' times per query as a bar chart
    peer.py dml --parquet DIR/parquet --out DIR/dml
        # the dml suite (queries/dml.sql) on DuckDB's own tables, loaded from the Parquet files into
        # a database file: DIR/dml/timings.json (seconds per step) and DIR/dml/<check>.parquet;
        # then again on Iceberg tables of a REST catalog (lakana-server, beside this python, run
        # under DIR/dml/iceberg): DIR/dml/timings-iceberg.json and DIR/dml/<check>-iceberg.parquet
"""

import argparse
import base64
import importlib
import json
import os
import re
import pathlib
import secrets
import shutil
import statistics
import subprocess
import sys
import threading
import time
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import duckdb


def connect():
    return duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})


def load_extension(con, name):
    module = importlib.import_module(f"duckdb_extension_{name}")
    path = pathlib.Path(module.__file__).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    con.execute(f"LOAD '{path}'")


QUERIES = pathlib.Path(__file__).parent / "queries"
SUITES = ("tpch", "ssb", "tpcds", "clickbench")


def generate(suite, scale, out):
    """Writes OUT/parquet/<table>.parquet and OUT/queries/<query>.sql; the queries come last, so a
    directory with queries holds complete data."""
    if suite not in SUITES:
        sys.exit(f"peer.py: unknown suite '{suite}' (one of {', '.join(SUITES)})")
    out = pathlib.Path(out)
    (out / "parquet").mkdir(parents=True, exist_ok=True)
    con = connect()
    queries = {}
    if suite == "tpch":
        load_extension(con, "tpch")
        con.execute(f"CALL dbgen(sf={scale})")
        tables = [t for (t,) in con.execute("SHOW TABLES").fetchall()]
        queries = {f"q{n:02}": q for n, q in con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall()}
    elif suite == "tpcds":
        load_extension(con, "tpcds")
        con.execute(f"CALL dsdgen(sf={scale})")
        tables = [t for (t,) in con.execute("SHOW TABLES").fetchall()]
        queries = {f"q{n:02}": q for n, q in con.execute("SELECT query_nr, query FROM tpcds_queries()").fetchall()}
        # q44 ranks averages, which Trino rounds to cents: items tie on a rank, and the query's
        # ORDER BY rnk leaves the tied rows in any order. Their names break the tie, for both engines.
        tied = "ORDER BY asceding.rnk\n"
        if tied not in queries["q44"]:
            sys.exit("peer.py: TPC-DS q44 no longer orders by asceding.rnk")
        queries["q44"] = queries["q44"].replace(tied, "ORDER BY asceding.rnk, i1.i_product_name, i2.i_product_name\n")
    elif suite == "ssb":
        load_extension(con, "tpch")
        con.execute(f"CALL dbgen(sf={scale})")
        con.execute((QUERIES / "ssb-tables.sql").read_text())
        con.execute("USE ssb")
        tables = ["customer", "dates", "lineorder", "part", "supplier"]
        queries = {f.stem: f.read_text() for f in sorted((QUERIES / "ssb").glob("*.sql"))}
    else:
        # ClickBench: scale 1 is a million rows (the published table has 100 million).
        con.execute(f"SET VARIABLE rows = {round(float(scale) * 1_000_000)}")
        con.execute((QUERIES / "clickbench-hits.sql").read_text())
        # Stored with lower-case names, as Trino stores them; the queries keep ClickBench's spelling,
        # which SQL folds to lower case when unquoted.
        names = [name for (name, *_) in con.execute("DESCRIBE hits").fetchall()]
        columns = ", ".join(f'"{name}" AS {name.lower()}' for name in names)
        con.execute(f"CREATE TABLE hits_lower AS SELECT {columns} FROM hits")
        con.execute("DROP TABLE hits")
        con.execute("ALTER TABLE hits_lower RENAME TO hits")
        tables = ["hits"]
        lines = [line for line in (QUERIES / "clickbench.sql").read_text().splitlines() if line.strip()]
        queries = {f"q{n:02}": q for n, q in enumerate(lines)}
    for table in tables:
        con.execute(f"COPY {table} TO '{out / 'parquet' / table}.parquet' (FORMAT parquet)")
    (out / "queries").mkdir(exist_ok=True)
    for name, query in queries.items():
        (out / "queries" / f"{name}.sql").write_text(query.strip() + "\n")


def s3_from_environment(con):
    """DuckDB reaches S3 with the settings of the standard AWS environment, as SQE does: a store of
    one's own (AWS_ENDPOINT_URL) path-style."""
    import os
    from urllib.parse import urlsplit

    load_extension(con, "httpfs")
    options = {
        "KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", ""),
        "SECRET": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        "REGION": os.environ.get("AWS_REGION", "us-east-1"),
    }
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        url = urlsplit(endpoint)
        options.update(ENDPOINT=url.netloc, URL_STYLE="path", USE_SSL=str(url.scheme == "https").lower())
    listed = ", ".join(f"{k} {v}" if k == "USE_SSL" else f"{k} '{v}'" for k, v in options.items())
    con.execute(f"CREATE SECRET (TYPE s3, {listed})")


def run(directory, runs, only, iceberg_catalog=None):
    directory = pathlib.Path(directory)
    results = directory / ("duckdb-iceberg" if iceberg_catalog else "duckdb")
    results.mkdir(exist_ok=True)
    con = connect()
    if iceberg_catalog:
        import sqlite3

        load_extension(con, "avro")
        load_extension(con, "iceberg")
        tables = sqlite3.connect(iceberg_catalog).execute(
            "SELECT table_name, metadata_location FROM iceberg_tables WHERE table_namespace = 'default'"
        ).fetchall()
        if any(location.startswith("s3://") for _, location in tables):
            s3_from_environment(con)
        for table, location in tables:
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM iceberg_scan('{location}')")
    else:
        for parquet in sorted((directory / "parquet").glob("*.parquet")):
            con.execute(f"CREATE VIEW {parquet.stem} AS SELECT * FROM read_parquet('{parquet}')")
    con.execute(TRINO_DECIMALS)
    timings = {}
    errors = {}
    for path in sorted((directory / "queries").glob("*.sql")):
        name = path.stem
        if only and name not in only:
            continue
        sql = for_duckdb(path.read_text().strip().rstrip(";"), directory.name.split("-")[0], name)
        try:
            con.execute(sql).fetchall()  # warm-up
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                con.execute(sql).fetchall()
                times.append(time.perf_counter() - start)
            timings[name] = statistics.median(times)
            con.execute(f"COPY ({sql}) TO '{results / name}.parquet' (FORMAT parquet)")
        except duckdb.Error as e:
            errors[name] = str(e)
    (results / "timings.json").write_text(
        json.dumps({"version": duckdb.__version__, "threads": con.execute("SELECT current_setting('threads')").fetchone()[0],
                    "seconds": timings, "errors": errors}, indent=1)
    )


def for_duckdb(sql, suite=None, name=None):
    """The suites' queries are SQE's SQL (Trino's); where DuckDB spells the same thing otherwise,
    its spelling: a regexp_replace replacement names a group as `$1` in Trino (Java), `\\1` in
    DuckDB (RE2). Where DuckDB computes a decimal average or quotient in doubles, and the query
    compares, ranks or computes further with it, the TPC-DS query is given Trino's decimal rules
    spelled out (TRINO_DECIMALS, TPCDS_DECIMALS)."""
    def group_refs(m):
        return m.group(1) + re.sub(r"\$(\d)", r"\\\1", m.group(2)) + m.group(3)
    sql = re.sub(r"(regexp_replace\(.*?,\s*'(?:[^']|'')*'\s*,\s*')((?:[^']|'')*)(')", group_refs, sql,
                 flags=re.IGNORECASE | re.DOTALL)
    if suite == "tpcds":
        for pattern, replacement in TPCDS_DECIMALS.get(name, ()):
            sql, n = re.subn(pattern, replacement, sql)
            if n == 0:
                sys.exit(f"peer.py: TPC-DS {name} no longer contains {pattern!r}")
    return sql


# Trino's decimal rules as DuckDB macros, exact in 128-bit integers. Trino averages a decimal(p, s)
# into a decimal(p, s), and divides two decimals (an integer counts as a decimal of scale 0) at the
# larger of their scales, both rounded half away from zero; DuckDB does both in doubles.
TRINO_DECIMALS = """
CREATE MACRO trino_round(n, d) AS sign(n) * sign(d) * ((2 * abs(n) + abs(d)) // (2 * abs(d)));
-- avg of a decimal of scale 2, from its sum and count
CREATE MACRO trino_avg2(total, n) AS
    CAST(trino_round(CAST(total * 100 AS HUGEINT), n) AS DECIMAL(38, 0)) * 0.01;
-- a / b at scale s, where unit = 10^-s and f = 10^s, and neither has more than s decimals
CREATE MACRO trino_div(a, b, f, unit) AS
    CAST(trino_round(CAST(a * f AS HUGEINT) * f, CAST(b * f AS HUGEINT)) AS DECIMAL(38, 0)) * unit;
"""

# The windowed average of a sum of prices (decimal(7, 2)), and the deviation from it.
_WINDOW_AVG2 = (r"avg\((sum\(\w+\))\)\s*OVER\s*(\([^)]*\))", r"trino_avg2(sum(\1) OVER \2, count(\1) OVER \2)")
_DEVIATION = (r"(?i)abs\s*\((sum_sales - (avg_\w+))\)\s*/\s*\2", r"trino_div(abs(\1), \2, 100, 0.01)")

TPCDS_DECIMALS = {
    "q27": [(r"avg\((agg[234])\)", r"trino_avg2(sum(\1), count(\1))")],
    "q44": [(r"avg\(ss_net_profit\)", r"trino_avg2(sum(ss_net_profit), count(ss_net_profit))")],
    "q47": [_WINDOW_AVG2, _DEVIATION],
    "q53": [_WINDOW_AVG2, _DEVIATION],
    "q57": [_WINDOW_AVG2, _DEVIATION],
    "q58": [(r"(\w+_item_rev)/\(\(ss_item_rev\+cs_item_rev\+ws_item_rev\)/3\)",
             r"trino_div(\1, trino_div(ss_item_rev+cs_item_rev+ws_item_rev, 3, 100, 0.01), 100, 0.01)"),
            (r"\(ss_item_rev\+cs_item_rev\+ws_item_rev\)/3 average",
             r"trino_div(ss_item_rev+cs_item_rev+ws_item_rev, 3, 100, 0.01) average")],
    "q61": [(r"cast\(promotions AS decimal\(15,4\)\)/cast\(total AS decimal\(15,4\)\)",
             r"trino_div(cast(promotions AS decimal(15,4)), cast(total AS decimal(15,4)), 10000, 0.0001)")],
    "q63": [_WINDOW_AVG2, _DEVIATION],
    "q66": [(r"sum\((\w+_sales)/w_warehouse_sq_ft\)", r"sum(trino_div(\1, w_warehouse_sq_ft, 100, 0.01))")],
    "q83": [(r"\((\w\w_item_qty)\*1\.0000\)/\((sr_item_qty\+cr_item_qty\+wr_item_qty)\)/3\.0000",
             r"trino_div(trino_div(\1*1.0000, \2, 10000, 0.0001), 3.0000, 10000, 0.0001)"),
            (r"\((sr_item_qty\+cr_item_qty\+wr_item_qty)\)/3\.0 average", r"trino_div(\1, 3.0, 10, 0.1) average")],
    "q89": [_WINDOW_AVG2, _DEVIATION],
}


def load(directory):
    """Writes each Parquet file of DIR/parquet as table iceberg.default.<name> with pyiceberg, as a
    user's pipeline would: the catalog SQE opens, files laid out by pyiceberg's writer."""
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    directory = pathlib.Path(directory)
    warehouse = directory / "warehouse"
    warehouse.mkdir(exist_ok=True)
    catalog = SqlCatalog("iceberg", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    if ("default",) not in catalog.list_namespaces():
        catalog.create_namespace("default")
    existing = {name for (_, name) in catalog.list_tables("default")}
    for parquet in sorted((directory / "parquet").glob("*.parquet")):
        if parquet.stem in existing:
            continue
        start = time.perf_counter()
        data = pq.read_table(parquet)
        table = catalog.create_table(f"default.{parquet.stem}", schema=data.schema)
        table.append(data)
        print(f"pyiceberg loaded {parquet.stem} in {time.perf_counter() - start:.1f}s", file=sys.stderr)


def chart(report_path, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = json.loads(pathlib.Path(report_path).read_text())
    rows = [q for q in report["queries"] if q["sqe_seconds"] is not None and q["duckdb_seconds"] is not None]
    names = [q["query"] for q in rows]
    width = 0.28
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.6), 4.5))
    xs = range(len(names))
    version = report["duckdb"].get("version") or ""
    ax.bar([x - width for x in xs], [q["sqe_seconds"] for q in rows], width, label="SQE on Iceberg tables")
    ax.bar(list(xs), [q["duckdb_seconds"] for q in rows], width, label=f"DuckDB {version} on Parquet files")
    ax.bar([x + width for x in xs], [q.get("duckdb_iceberg_seconds") or 0 for q in rows], width,
           label=f"DuckDB {version} on the same Iceberg tables")
    ax.set_xticks(list(xs), names, rotation=90)
    ax.set_ylabel("seconds (median)")
    total = report["total"]
    ax.set_title(f"{report['suite']} scale {report['scale']}: SQE {total['sqe_seconds']:.2f}s, "
                 f"DuckDB {total['duckdb_seconds']:.2f}s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def dml_sections(parquet):
    """queries/dml.sql as (kind, name, statements): kind is 'step' or 'check'."""
    text = (QUERIES / "dml.sql").read_text().replace("{parquet}", str(parquet))
    sections = []
    for line in text.splitlines():
        head = re.match(r"^-- (step|check) (\w+)", line)
        if head:
            sections.append((head.group(1), head.group(2), []))
        elif sections and line.strip() and not line.startswith("--"):
            sections[-1][2].append(line.strip().rstrip(";"))
    return sections


def dml(parquet, out):
    """The dml suite on DuckDB's own tables (a database file, as SQE's warehouse is files), then on
    Iceberg tables (dml_iceberg)."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    database = out / "duckdb.db"
    for stale in (database, out / "duckdb.db.wal"):
        stale.unlink(missing_ok=True)
    con = duckdb.connect(str(database), config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for table, source in (("orders", "orders"), ("lineitem", "lineitem"), ("lineitem_p", "lineitem")):
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM read_parquet('{parquet}/{source}.parquet')")
    con.execute("CHECKPOINT")
    timings = {}
    for kind, name, statements in dml_sections(parquet):
        if kind == "step":
            start = time.perf_counter()
            for sql in statements:
                con.execute(sql)
            timings[name] = time.perf_counter() - start
        else:
            con.execute(f"COPY ({statements[0]}) TO '{out / name}.parquet' (FORMAT parquet)")
    (out / "timings.json").write_text(json.dumps(timings, indent=1))
    con.close()
    database.unlink(missing_ok=True)
    dml_iceberg(parquet, out)


# lakana's environment for the dml suite's tables; it makes the namespaces bronze, silver and gold.
LAKANA_ENVIRONMENT = "dev"


def dml_iceberg(parquet, out):
    """The dml suite by DuckDB on Iceberg tables, which its iceberg extension changes only through a
    REST catalog (merge-on-read: position delete files): lakana-server with its sqlite DB and the
    warehouse in OUT/iceberg, the tables made and loaded by pyiceberg (DuckDB's CREATE TABLE is a
    staged create, which lakana refuses). Writes OUT/timings-iceberg.json (seconds per step, or
    {"error": DuckDB's message} for a step it refuses) and OUT/<check>-iceberg.parquet. When the run
    cannot happen at all, the timings hold only "error"; the native run's files stand either way."""
    root = out.resolve() / "iceberg"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for stale in out.glob("*-iceberg.parquet"):
        stale.unlink()
    server = front = None
    try:
        server, url, token = start_lakana(root)
        lakana_cli(url, token, root, "env", "create", LAKANA_ENVIRONMENT, "--storage-root", f"file://{root}/warehouse")
        dml_iceberg_tables(parquet, url, token)
        front = PrefixFront(url, LAKANA_ENVIRONMENT)
        threading.Thread(target=front.serve_forever, daemon=True).start()
        con = connect()
        for name in ("httpfs", "avro", "iceberg"):
            load_extension(con, name)
        con.execute(f"CREATE SECRET lakana (TYPE iceberg, TOKEN '{token}')")
        # lakana vends no storage credentials: DuckDB reads and writes the file:// warehouse itself.
        con.execute(f"ATTACH '{LAKANA_ENVIRONMENT}' AS lake (TYPE iceberg, ENDPOINT '{front.url}', "
                    "SECRET lakana, ACCESS_DELEGATION_MODE 'none')")
        con.execute("USE lake.bronze")
        timings = {}
        for kind, name, statements in dml_sections(parquet):
            if kind == "step":
                start = time.perf_counter()
                try:
                    for sql in statements:
                        con.execute(sql)
                    timings[name] = time.perf_counter() - start
                except duckdb.Error as e:
                    timings[name] = {"error": str(e)}
                    print(f"peer.py dml (Iceberg): step {name}: {e}", file=sys.stderr)
            else:
                con.execute(f"COPY ({statements[0]}) TO '{out / name}-iceberg.parquet' (FORMAT parquet)")
        con.close()
    except Exception as e:  # whatever the failure, it ends this run only, not the native one's
        timings = {"error": f"{type(e).__name__}: {e}"}
        print(f"peer.py dml (Iceberg): {timings['error']}", file=sys.stderr)
    finally:
        if front is not None:
            front.shutdown()
            front.server_close()
        if server is not None:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    (out / "timings-iceberg.json").write_text(json.dumps(timings, indent=1))
    shutil.rmtree(root, ignore_errors=True)


def start_lakana(root):
    """lakana-server on a free port of 127.0.0.1 over a sqlite DB in ROOT, its output in
    ROOT/lakana.log (where it names the port); returns (process, url, admin token)."""
    server = pathlib.Path(sys.executable).parent / "lakana-server"
    if not server.is_file():
        raise RuntimeError(f"{server} not found (PyPI lakana[server]==0.20.0)")
    key_id, secret = secrets.token_hex(8), secrets.token_hex(16)
    env = {
        **os.environ,
        "LAKANA_DATABASE__URL": f"sqlite:///{root / 'lakana.db'}",
        "LAKANA_BOOTSTRAP_PAT_KEY_ID": key_id,
        "LAKANA_BOOTSTRAP_PAT_SECRET": secret,
        "LAKANA_SECRETS__MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        "LAKANA_HOST": "127.0.0.1",
        "LAKANA_PORT": "0",
    }
    log = root / "lakana.log"
    with log.open("w") as output:
        if subprocess.run([server, "migrate"], env=env, stdout=output, stderr=subprocess.STDOUT, timeout=300).returncode:
            raise RuntimeError(f"lakana-server migrate failed:\n{log.read_text()[-2000:]}")
        process = subprocess.Popen([server], env=env, stdout=output, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        port = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", log.read_text())
        if port:
            return process, f"http://127.0.0.1:{port.group(1)}", f"lakana_pat_{key_id}_{secret}"
        time.sleep(0.2)
    process.kill()
    process.wait()
    raise RuntimeError(f"lakana-server did not start:\n{log.read_text()[-2000:]}")


def lakana_cli(url, token, root, *args):
    """The lakana CLI (beside this python) as lakana's admin, its profile files kept in ROOT."""
    env = {**os.environ, "LAKANA_URL": url, "LAKANA_TOKEN": token, "XDG_CONFIG_HOME": str(root / "xdg")}
    command = [pathlib.Path(sys.executable).parent / "lakana", "--output", "json", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"lakana {' '.join(args)}: {done.stdout}{done.stderr}")


def dml_iceberg_tables(parquet, url, token):
    """orders, lineitem and lineitem_p (partitioned by l_shipmode) in bronze, made and loaded from
    the Parquet files by pyiceberg: format version 2, snappy, merge-on-read (DuckDB refuses to
    change a copy-on-write table), as SQE's tables are made in the suite."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.io.pyarrow import pyarrow_to_schema
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    catalog = RestCatalog("lakana", uri=url, token=token, prefix=LAKANA_ENVIRONMENT)
    properties = {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")}
    properties.update({"format-version": "2", "write.parquet.compression-codec": "snappy"})
    for table, source, partition in (("orders", "orders", None), ("lineitem", "lineitem", None),
                                     ("lineitem_p", "lineitem", "l_shipmode")):
        start = time.perf_counter()
        data = pq.read_table(f"{parquet}/{source}.parquet")
        # Field ids 1, 2, ... in column order, so that the partition field can name its source.
        schema = pyarrow_to_schema(pa.schema(
            [f.with_metadata({"PARQUET:field_id": str(i)}) for i, f in enumerate(data.schema, 1)]))
        spec = UNPARTITIONED_PARTITION_SPEC
        if partition:
            spec = PartitionSpec(PartitionField(schema.find_field(partition).field_id, 1000, IdentityTransform(), partition))
        catalog.create_table(f"bronze.{table}", schema, partition_spec=spec, properties=properties).append(data)
        print(f"pyiceberg loaded {table} in {time.perf_counter() - start:.1f}s", file=sys.stderr)


# The REST endpoints lakana 0.20 serves. It has no POST /v1/{prefix}/transactions/commit (404), which
# DuckDB uses for its commits unless /v1/config's endpoints leave it out; then it commits each table
# by itself, as lakana does serve.
LAKANA_ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/tables/rename",
]


class PrefixFront(ThreadingHTTPServer):
    """A relay on 127.0.0.1 to lakana for DuckDB, which takes a REST catalog's prefix only from
    /v1/config's overrides, where lakana names none: it adds "prefix" there, and lakana's endpoints
    (LAKANA_ENDPOINTS, which lakana does not list), and passes every other request and answer on
    unchanged."""

    daemon_threads = True

    def __init__(self, upstream, prefix):
        super().__init__(("127.0.0.1", 0), PrefixFrontHandler)
        self.upstream = urlsplit(upstream)
        self.prefix = prefix

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class PrefixFrontHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers of one connection, not to be passed on (http.client sets its own length and host).
    HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailers", "upgrade", "host", "content-length"}

    def log_message(self, format, *args):
        pass

    def relay(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        upstream = HTTPConnection(self.server.upstream.hostname, self.server.upstream.port, timeout=600)
        try:
            upstream.request(self.command, self.path, body=body or None,
                             headers={k: v for k, v in self.headers.items() if k.lower() not in self.HOP})
            response = upstream.getresponse()
            status, answer = response.status, response.read()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in self.HOP | {"date", "server"}]
        finally:
            upstream.close()
        if urlsplit(self.path).path == "/v1/config" and status == 200:
            config = json.loads(answer)
            config.setdefault("overrides", {})["prefix"] = self.server.prefix
            config["endpoints"] = LAKANA_ENDPOINTS
            answer = json.dumps(config).encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = relay


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gen")
    g.add_argument("suite")
    g.add_argument("--scale", required=True)
    g.add_argument("--out", required=True)
    r = sub.add_parser("run")
    r.add_argument("--dir", required=True)
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--query", action="append", default=[])
    r.add_argument("--iceberg", help="SQE's catalog.db: read its Iceberg tables instead of the Parquet files")
    w = sub.add_parser("load")
    w.add_argument("--dir", required=True)
    d = sub.add_parser("dml")
    d.add_argument("--parquet", required=True)
    d.add_argument("--out", required=True)
    c = sub.add_parser("chart")
    c.add_argument("--report", required=True)
    c.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "gen":
        generate(args.suite, args.scale, args.out)
    elif args.command == "run":
        run(args.dir, args.runs, set(args.query), args.iceberg)
    elif args.command == "load":
        load(args.dir)
    elif args.command == "dml":
        dml(args.parquet, args.out)
    else:
        chart(args.report, args.out)


if __name__ == "__main__":
    main()
