"""How fast `dbt seed` loads a large CSV file into SQE, by adapter: dbt-sqe (the file read by Arrow's
CSV reader, the rows sent as Arrow through Flight SQL bulk ingest) beside dbt-trino (the file read
by agate, the rows sent as INSERT statements of 1,000 rows each over Trino HTTP), one sqe-server,
the same file, in one run. Each is timed from starting `dbt seed` to its end (dbt's own start-up
included, the same for both), and the two tables are checked to hold the same rows.

    .venv-dbt/bin/python bench/dbt_seed.py --server target/release/sqe-server [--rows 1000000]
"""

import argparse
import datetime
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight
from transfer import start


def write_csv(path: Path, rows: int):
    """Orders-like rows: an id, a customer, an amount with cents, a day and a status."""
    rng = random.Random(7)
    statuses = ["placed", "shipped", "returned", "completed"]
    start = datetime.date(2024, 1, 1)
    with path.open("w") as f:
        f.write("id,customer_id,amount,ordered_at,status\n")
        for i in range(rows):
            day = start + datetime.timedelta(days=i % 700)
            f.write(f"{i},{rng.randint(1, 50000)},{rng.randint(100, 99999) / 100},{day},{statuses[i % 4]}\n")


def project(directory: Path, csv: Path, profile: str):
    (directory / "seeds").mkdir(parents=True)
    (directory / "seeds" / "orders.csv").symlink_to(csv)
    (directory / "dbt_project.yml").write_text("name: seedbench\nversion: '1.0'\nconfig-version: 2\nprofile: bench\n")
    (directory / "profiles.yml").write_text(profile)


def seed(dbt: Path, directory: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [str(dbt), "--no-use-colors", "seed", "--project-dir", str(directory), "--profiles-dir", str(directory)],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"dbt seed failed in {directory}:\n{done.stdout[-3000:]}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="the sqe-server binary")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    dbt = Path(sys.executable).parent / "dbt"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        csv = work / "orders.csv"
        write_csv(csv, args.rows)
        server, http_port, flight_port = start(args.server, work)
        try:
            project(
                work / "sqe",
                csv,
                "bench:\n  target: t\n  outputs:\n    t:\n      type: sqe\n      method: none\n"
                f"      host: 127.0.0.1\n      port: {flight_port}\n      database: iceberg\n"
                "      schema: by_sqe\n      threads: 1\n",
            )
            project(
                work / "trino",
                csv,
                "bench:\n  target: t\n  outputs:\n    t:\n      type: trino\n      method: none\n"
                f"      user: bench\n      host: 127.0.0.1\n      port: {http_port}\n      http_scheme: http\n"
                "      database: iceberg\n      schema: by_trino\n      threads: 1\n",
            )
            timings = {"dbt-sqe (Flight SQL, bulk ingest)": seed(dbt, work / "sqe")}
            timings["dbt-trino (Trino HTTP, INSERT)"] = seed(dbt, work / "trino")
            with flight.connect(f"grpc://127.0.0.1:{flight_port}", autocommit=True) as conn, conn.cursor() as cur:
                counts = {}
                for schema in ("by_sqe", "by_trino"):
                    cur.execute(f"SELECT count(*) FROM iceberg.{schema}.orders")
                    counts[schema] = cur.fetchone()[0]
                differ = []
                for a, b in (("by_sqe", "by_trino"), ("by_trino", "by_sqe")):
                    cur.execute(
                        f"SELECT count(*) FROM (SELECT * FROM iceberg.{a}.orders EXCEPT SELECT * FROM iceberg.{b}.orders)"
                    )
                    differ.append(cur.fetchone()[0])
        finally:
            server.terminate()
            server.wait()
    print(f"dbt seed of {args.rows:,} rows (5 columns), one sqe-server")
    print(f"{'adapter':<36} {'seconds':>9}")
    for name, seconds in timings.items():
        print(f"{name:<36} {seconds:9.1f}")
    ratio = timings["dbt-trino (Trino HTTP, INSERT)"] / timings["dbt-sqe (Flight SQL, bulk ingest)"]
    print(f"dbt-sqe is {ratio:.1f}x faster")
    same = counts["by_sqe"] == counts["by_trino"] == args.rows and differ == [0, 0]
    print(f"rows: {counts['by_sqe']:,} and {counts['by_trino']:,}; rows in one table only: {differ}: {'Match' if same else 'DIFFER'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
