"""Quack beside Quack: a DuckDB 1.5.5 client reads the same rows (bigint, bigint, varchar) from
sqe-server's Quack endpoint and from DuckDB's own Quack server (`quack_serve`, in a process of its
own), in one run, the two taking turns; DuckDB reading its own table in process is shown for scale.

    bench/quack.py --sqe-server target/release/sqe-server [--rows 5000000] [--runs 5]

Each timed statement pulls every row to the client and sums it there:
    SELECT count(*), sum(a), sum(b), sum(length(c)) FROM quack_query(uri, 'SELECT a, b, c FROM bench')
and, through `ATTACH 'quack:…' AS r`, the same over `r.<schema>.bench` (DuckDB's scan of an attached
table). Prints the median and best of the runs for each, and SQE's time over DuckDB's.
Extensions load from their wheels (duckdb-extension-httpfs/-quack); nothing is downloaded.
"""

import argparse
import importlib
import os
import pathlib
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import duckdb

TOKEN = "bench-token-0123456789"


def load(con, name):
    module = importlib.import_module(f"duckdb_extension_{name}")
    path = pathlib.Path(module.__file__).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    con.execute(f"LOAD '{path}'")


def connect():
    con = duckdb.connect()
    load(con, "httpfs")
    load(con, "quack")
    return con


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def duckdb_rows(rows):
    return f"SELECT range AS a, range * 2 AS b, 'row-' || range AS c FROM range({rows})"


def sqe_rows(rows):
    return f"SELECT value AS a, value * 2 AS b, 'row-' || CAST(value AS VARCHAR) AS c FROM range({rows})"


def start_sqe(binary, root, rows):
    config = root / "sqe.toml"
    config.write_text(
        textwrap.dedent(
            f"""\
            [server]
            host = "127.0.0.1"
            http_port = 0
            flight_port = 0

            [catalog]
            warehouse = "{root / 'warehouse'}"

            [auth]
            allow_anonymous = false

            [[auth.static]]
            name = "bench"
            token_env = "BENCH_TOKEN"

            [quack]
            enabled = true
            port = 0
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQE_")}
    env["BENCH_TOKEN"] = TOKEN
    env.setdefault("RUST_LOG", "warn")
    process = subprocess.Popen(
        [binary, "--config", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    for line in process.stdout:
        match = re.search(r"quack listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            port = int(match.group(1))
            break
    else:
        sys.exit("sqe-server stopped before it served Quack")
    # Keep draining its output so that it never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
    uri = f"quack:127.0.0.1:{port}"
    con = connect()
    sql = f"CREATE TABLE bench AS {sqe_rows(rows)}"
    con.execute(f"FROM quack_query('{uri}', $${sql}$$, token => '{TOKEN}')").fetchall()
    con.close()
    return process, uri


DUCKDB_SERVER = """
import sys
sys.path.insert(0, {here!r})
from quack import connect
con = connect()
con.execute({create!r})
con.execute("SELECT * FROM quack_serve('{uri}', token => '{token}')").fetchall()
print("serving", flush=True)
sys.stdin.read()
"""


def start_duckdb(rows):
    uri = f"quack:127.0.0.1:{free_port()}"
    script = DUCKDB_SERVER.format(
        here=str(pathlib.Path(__file__).parent), create=f"CREATE TABLE bench AS {duckdb_rows(rows)}", uri=uri, token=TOKEN
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if process.stdout.readline().strip() != "serving":
        sys.exit("DuckDB's Quack server did not start")
    return process, uri


def timed(con, sql):
    start = time.perf_counter()
    answer = con.execute(sql).fetchall()
    return time.perf_counter() - start, answer


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sqe-server", required=True)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    root = pathlib.Path(tempfile.mkdtemp(prefix="sqe-quack-bench-"))
    sqe, sqe_uri = start_sqe(args.sqe_server, root, args.rows)
    duck, duck_uri = start_duckdb(args.rows)
    try:
        client = connect()
        client.execute(f"ATTACH '{sqe_uri}' AS sqe (TOKEN '{TOKEN}')")
        client.execute(f"ATTACH '{duck_uri}' AS duck (TOKEN '{TOKEN}')")
        local = connect()
        local.execute(f"CREATE TABLE bench AS {duckdb_rows(args.rows)}")
        totals = "count(*), sum(a), sum(b), sum(length(c))"
        statements = {
            ("quack_query", "SQE"): f"SELECT {totals} FROM quack_query('{sqe_uri}', 'SELECT a, b, c FROM bench', token => '{TOKEN}')",
            ("quack_query", "DuckDB"): f"SELECT {totals} FROM quack_query('{duck_uri}', 'SELECT a, b, c FROM bench', token => '{TOKEN}')",
            ("ATTACH scan", "SQE"): f'SELECT {totals} FROM sqe."default".bench',
            ("ATTACH scan", "DuckDB"): f"SELECT {totals} FROM duck.main.bench",
        }
        times = {key: [] for key in statements}
        in_process = []
        answers = set()
        for run in range(args.runs + 1):
            for key, sql in statements.items():
                seconds, answer = timed(client, sql)
                answers.add(tuple(answer))
                if run > 0:  # the first round warms up
                    times[key].append(seconds)
            seconds, answer = timed(local, f"SELECT {totals} FROM bench")
            answers.add(tuple(answer))
            if run > 0:
                in_process.append(seconds)
        if len(answers) != 1:
            sys.exit(f"the answers differ: {answers}")
        print(f"{args.rows:,} rows (bigint, bigint, varchar), {args.runs} runs after a warm-up, DuckDB {duckdb.__version__} client")
        print(f"answer: {answers.pop()}")
        print(f"{'':<14}{'SQE median':>12}{'DuckDB median':>15}{'SQE best':>10}{'DuckDB best':>13}{'SQE/DuckDB':>12}")
        for how in ("quack_query", "ATTACH scan"):
            s, d = times[(how, "SQE")], times[(how, "DuckDB")]
            ratio = statistics.median(s) / statistics.median(d)
            print(
                f"{how:<14}{statistics.median(s):>11.3f}s{statistics.median(d):>14.3f}s"
                f"{min(s):>9.3f}s{min(d):>12.3f}s{ratio:>11.2f}x"
            )
        print(f"DuckDB in process: median {statistics.median(in_process):.3f}s, best {min(in_process):.3f}s")
    finally:
        duck.stdin.close()
        duck.wait(timeout=30)
        sqe.terminate()
        sqe.wait(timeout=30)


if __name__ == "__main__":
    main()
