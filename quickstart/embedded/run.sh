#!/usr/bin/env bash
# The embedded quickstart: a persistent Iceberg warehouse used by two separate sqe-cli processes.
# Creates a table from a CSV, queries it, adds rows, travels back in time and lists the snapshots.
#   quickstart/embedded/run.sh            (uses a fresh temporary warehouse)
#   WAREHOUSE=~/my-wh quickstart/embedded/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
warehouse=${WAREHOUSE:-$(mktemp -d)}
if [ -n "${SQE_CLI:-}" ]; then
  sqe() { "$SQE_CLI" --embedded --warehouse "$warehouse" "$@"; }
else
  sqe() { cargo run -q --manifest-path "$here/../../Cargo.toml" -p sqe-cli -- --embedded --warehouse "$warehouse" "$@"; }
fi

echo "-- first process: load the CSV into an Iceberg table, partitioned by day"
sqe -e "
CREATE SCHEMA shop;
CREATE TABLE shop.orders WITH (partitioning = ARRAY['day(ordered_at)']) AS
  SELECT order_id, customer, region, CAST(amount AS decimal(10, 2)) AS amount, CAST(ordered_at AS timestamp) AS ordered_at
  FROM read_csv('$here/orders.csv');
SELECT region, count(*) AS orders, sum(amount) AS revenue FROM shop.orders GROUP BY region ORDER BY region;
"

echo "-- second process: the table is still there; add two orders"
sqe -e "
INSERT INTO shop.orders VALUES
  (6, 'globex', 'US', 18.00, TIMESTAMP '2026-11-06 10:00:00'),
  (7, 'acme', 'EU', 250.00, TIMESTAMP '2026-11-06 14:20:00');
SELECT count(*) AS orders_now FROM shop.orders;
"

echo "-- third process: time travel to the first snapshot, and the snapshot history"
sqe -e "
SELECT count(*) AS orders_then
FROM shop.orders FOR VERSION AS OF (SELECT snapshot_id FROM shop.\"orders\$snapshots\" WHERE parent_id IS NULL);
SELECT operation, summary['added-records'] AS added_records, summary['total-records'] AS total_records
FROM shop.\"orders\$snapshots\" ORDER BY committed_at;
SELECT partition.ordered_at_day AS day, record_count FROM shop.\"orders\$partitions\" ORDER BY day;
"
