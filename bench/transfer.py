"""How fast a large result reaches a Python client, by protocol: one sqe-server, one query, its rows
fetched over Arrow Flight SQL (adbc-driver-flightsql, `fetch_arrow_table`), over Trino HTTP with
trino-python's default encodings (the spooling protocol, `json+zstd` first) and over Trino HTTP
with plain JSON pages (`encoding=None`). Each is timed from `execute` to the last row in the
client's hands, best of `--runs`, with the server's peak resident memory while it ran.

    .venv/bin/python bench/transfer.py --server target/release/sqe-server [--rows 10000000] [--runs 3]
"""

import argparse
import base64
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight
import requests
import trino
from trino.client import CompressedQueryDataDecoderFactory
from trino.mapper import RowMapperFactory


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Peak:
    """The most memory process `pid` held while the block ran, sampled every 10 ms."""

    def __init__(self, pid):
        self.pid, self.kib, self.done = pid, 0, threading.Event()

    def __enter__(self):
        self.kib = rss_kib(self.pid)
        self.thread = threading.Thread(target=self.sample)
        self.thread.start()
        return self

    def sample(self):
        while not self.done.is_set():
            self.kib = max(self.kib, rss_kib(self.pid))
            time.sleep(0.01)

    def __exit__(self, *_):
        self.done.set()
        self.thread.join()


def start(server, root):
    config = root / "sqe.toml"
    config.write_text(
        '[server]\nhost = "127.0.0.1"\nhttp_port = 0\nflight_port = 0\n\n'
        f'[catalog]\nwarehouse = "{root / "warehouse"}"\n\n[auth]\nallow_anonymous = true\n'
    )
    process = subprocess.Popen(
        [server, "--config", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    ports = {}
    for line in process.stdout:
        for kind in ("trino http", "flight sql"):
            m = re.search(kind + r" listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                ports[kind] = int(m.group(1))
        if len(ports) == 2:
            break
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
    return process, ports["trino http"], ports["flight sql"]


def over_flight(port, sql):
    with flight.connect(f"grpc://127.0.0.1:{port}") as conn:
        cur = conn.cursor()
        cur.execute(sql)
        return cur.fetch_arrow_table().num_rows


def over_trino(port, sql, **kwargs):
    cur = trino.dbapi.connect(host="127.0.0.1", port=port, user="alice", **kwargs).cursor()
    cur.execute(sql)
    return len(cur.fetchall())


def spooled_segments(port, sql):
    """The result as trino-python's default request receives it: its columns, and each segment's
    encoding, metadata and bytes (inline ones from their page, spooled ones fetched and
    acknowledged)."""
    headers = {"X-Trino-User": "alice", "X-Trino-Query-Data-Encoding": "json+zstd,json+lz4,json"}
    page = requests.post(f"http://127.0.0.1:{port}/v1/statement", data=sql, headers=headers).json()
    columns, segments = None, []
    while True:
        columns = columns or page.get("columns")
        for segment in (page.get("data") or {}).get("segments", []):
            if segment["type"] == "inline":
                raw = base64.b64decode(segment["data"])
            else:
                kept = {name: values[0] for name, values in segment["headers"].items()}
                raw = requests.get(segment["uri"], headers=kept).content
                requests.get(segment["ackUri"], headers=kept)
            segments.append((page["data"]["encoding"], segment["metadata"], raw))
        if "nextUri" not in page:
            return columns, segments
        page = requests.get(page["nextUri"], headers=headers).json()


def decoded_alone(columns, segments):
    """The rows trino-python makes of segments it already holds: its own decoder and row mapper,
    the floor of its time whatever the server does."""
    mapper = RowMapperFactory().create(columns=columns, legacy_primitive_types=False)
    factory = CompressedQueryDataDecoderFactory(mapper)
    rows = 0
    for encoding, metadata, raw in segments:
        rows += len(factory.create(encoding).decode(raw, metadata))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sql = f"SELECT value, concat('row ', CAST(value AS varchar)) AS label FROM range(0, {args.rows})"
    with tempfile.TemporaryDirectory() as root:
        process, http_port, flight_port = start(args.server, Path(root))
        try:
            ways = [
                ("Flight SQL (ADBC, Arrow)", lambda: over_flight(flight_port, sql)),
                ("Trino HTTP, spooling (trino-python default)", lambda: over_trino(http_port, sql)),
                ("Trino HTTP, plain JSON pages", lambda: over_trino(http_port, sql, encoding=None)),
            ]
            columns, segments = spooled_segments(http_port, sql)
            ways.append(
                (
                    "trino-python decoding the spooled segments alone (no server, no network)",
                    lambda: decoded_alone(columns, segments),
                )
            )
            results = []
            for name, fetch in ways:
                best, peak = None, 0
                for _ in range(args.runs):
                    with Peak(process.pid) as p:
                        t = time.perf_counter()
                        rows = fetch()
                        elapsed = time.perf_counter() - t
                    assert rows == args.rows, (name, rows)
                    best = elapsed if best is None else min(best, elapsed)
                    peak = max(peak, p.kib)
                results.append((name, best, peak))
                print(f"{name}: {best:.2f} s, server RSS peak {peak // 1024} MB", flush=True)
        finally:
            process.terminate()
            process.wait()
    base = results[0][1]
    print(f"\n{args.rows:,} rows: `{sql}`\n")
    print("| protocol | seconds (best of %d) | / Flight SQL | server RSS peak (MB) |" % args.runs)
    print("|---|---:|---:|---:|")
    for name, best, peak in results:
        print(f"| {name} | {best:.2f} | {best / base:.2f} | {peak // 1024} |")


if __name__ == "__main__":
    main()
