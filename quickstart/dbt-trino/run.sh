#!/usr/bin/env bash
# dbt over Trino's HTTP protocol: sqe-server on a fresh warehouse, `dbt build` (seeds, view and
# table models, dbt's tests) twice, `dbt docs generate`, then what the models hold.
#   quickstart/dbt-trino/run.sh          (DBT=path/to/dbt, SQE_SERVER=path/to/sqe-server optional)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dbt=${DBT:-$root/.venv-dbt/bin/dbt}
[ -x "$dbt" ] || { echo "dbt not found at $dbt (scripts/test installs it in .venv-dbt; or set DBT)"; exit 1; }
dbt=$(cd "$(dirname "$dbt")" && pwd)/$(basename "$dbt")
python=$(dirname "$dbt")/python
work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${SQE_SERVER:-}" ]; then
  cargo build -q --manifest-path "$root/Cargo.toml" -p sqe-gateway --bin sqe-server
  SQE_SERVER="${CARGO_TARGET_DIR:-$root/target}/debug/sqe-server"
fi
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/sqe.toml" <<TOML
[server]
host = "127.0.0.1"
http_port = $port
flight_port = 0
[catalog]
warehouse = "$work/warehouse"
[auth]
allow_anonymous = true
TOML
"$SQE_SERVER" --config "$work/sqe.toml" > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  grep -q "trino http listening" "$work/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 0.1
done

# dbt writes target/ and logs/ next to the project: a copy keeps the checkout clean.
cp -r "$here" "$work/project"
cd "$work/project"
export SQE_DBT_PORT=$port
run_dbt() {
  if ! "$dbt" "$@" --profiles-dir . > "$work/dbt.log" 2>&1; then
    cat "$work/dbt.log"; echo "-- server log:"; tail -50 "$work/server.log"; exit 1
  fi
  # dbt's summary lines, without their colours and times.
  sed -E 's/\x1b\[[0-9;]*m//g; s/^[0-9:]+ +//' "$work/dbt.log" |
    grep -E "^(Completed successfully|Done\. PASS|Catalog written)" | sed -E 's/ to .*//' || true
}
echo "-- dbt build (seeds, views, tables, tests)"
run_dbt build
echo "-- dbt build again: tables are replaced, views redefined"
run_dbt build
echo "-- dbt docs generate"
run_dbt docs generate
"$python" - <<'PY'
import json

catalog = json.load(open("target/catalog.json"))
assert not catalog.get("errors"), catalog["errors"]
for key, node in sorted(catalog["nodes"].items()):
    meta = node["metadata"]
    print(f"  {key}: {meta['type']}, {len(node['columns'])} columns")
PY

echo "-- what the models hold"
"$python" - "$port" <<'PY'
import sys
import trino

conn = trino.dbapi.connect(host="127.0.0.1", port=int(sys.argv[1]), user="dbt", catalog="iceberg", schema="shop")
cur = conn.cursor()
for sql in [
    "SELECT customer_id, name, orders, kept_amount, first_order, last_order, days_active FROM customer_orders ORDER BY customer_id",
    "SELECT order_id, tag, position FROM order_tags ORDER BY order_id, position",
    "SELECT order_id, nth_order, running_amount FROM ranked_orders WHERE customer_id = 1 ORDER BY nth_order",
    "SELECT order_id, order_month, pay_by, amount, channel, coupon FROM stg_orders ORDER BY order_id",
    "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'shop' ORDER BY table_name",
]:
    print(sql)
    cur.execute(sql)
    for row in cur.fetchall():
        print("  " + " | ".join("NULL" if v is None else str(v) for v in row))
PY
