#!/usr/bin/env bash
# An agent over MCP: the test identity provider and sqe-server with its MCP endpoint on a fresh
# warehouse; then, as an agent host would, erin (whose token carries the write scope and the
# `writer` role) makes a table through execute_sql_change, and alice (read scope only) finds it,
# describes it, samples and queries it, and is refused a change.
#   quickstart/mcp/run.sh       (SQE_SERVER=path/to/sqe-server, PYTHON=path/to/python optional)
# Needs node with tests/idp installed (npm ci in tests/idp) and a Python with `mcp` (scripts/test
# makes both).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || { echo "python not found at $python (scripts/test makes .venv; or set PYTHON)"; exit 1; }
[ -d "$root/tests/idp/node_modules/oauth2-mock-server" ] || { echo "the test IdP is not installed: (cd tests/idp && npm ci)"; exit 1; }
work=$(mktemp -d)
server_pid=
idp_pid=
cleanup() {
  for pid in "$server_pid" "$idp_pid"; do
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${SQE_SERVER:-}" ]; then
  cargo build -q --manifest-path "$root/Cargo.toml" -p sqe-gateway --bin sqe-server
  SQE_SERVER="${CARGO_TARGET_DIR:-$root/target}/debug/sqe-server"
fi
# Waits for a line matching $2 in the log $1 of process $3.
wait_for() {
  for _ in $(seq 200); do
    grep -q "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || { cat "$1"; exit 1; }
    sleep 0.1
  done
  cat "$1"; exit 1
}

node "$root/tests/idp/idp.mjs" 0 > "$work/idp.log" 2>&1 &
idp_pid=$!
wait_for "$work/idp.log" "idp listening" "$idp_pid"
idp_port=$(sed -nE 's/.*idp listening on 127\.0\.0\.1:([0-9]+).*/\1/p' "$work/idp.log")

cat > "$work/sqe.toml" <<TOML
[server]
host = "127.0.0.1"
http_port = 0
flight_port = 0
[catalog]
warehouse = "$work/warehouse"
[auth]
allow_anonymous = false
[auth.oidc]
issuer = "http://127.0.0.1:$idp_port"
audience = "sqe"
[mcp]
enabled = true
allow_writes = true
write_roles = ["writer"]
TOML
"$SQE_SERVER" --config "$work/sqe.toml" > "$work/server.log" 2>&1 &
server_pid=$!
wait_for "$work/server.log" "mcp listening on" "$server_pid"
mcp_url=$(sed -nE 's/.*mcp listening on (http:[^ ]+).*/\1/p' "$work/server.log")

"$python" - "$mcp_url" "$idp_port" <<'PY' || { echo "-- server log:"; tail -30 "$work/server.log"; exit 1; }
import asyncio
import sys

import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

url, idp_port = sys.argv[1], sys.argv[2]


def token(user, scope):
    """The user's own token for this MCP endpoint (RFC 8707: its audience is the endpoint)."""
    form = {"grant_type": "password", "username": user, "password": f"{user}-secret", "resource": url, "scope": scope}
    response = requests.post(f"http://127.0.0.1:{idp_port}/token", data=form, timeout=10)
    response.raise_for_status()
    return response.json()["access_token"]


async def agent(user, scope, calls):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token(user, scope)}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        for name, args in calls:
            if name == "tools/list":
                tools = (await client.list_tools()).tools
                print(f"{user}: tools: {', '.join(sorted(t.name for t in tools))}")
                continue
            result = await client.call_tool(name, args)
            print(f"{user}: {name} {args}")
            if result.is_error:
                print(f"  refused: {result.content[0].text}")
            elif name == "table_stats":
                [[rows, files, _bytes]] = result.structured_content["rows"]
                print(f"  {rows} rows in {files} data files")
            elif name == "describe_table":
                for c in result.structured_content["columns"]:
                    print(f"  {c['name']} {c['type']}")
                print(f"  partitioning: {result.structured_content['partitioning']}")
            else:
                for line in result.content[0].text.splitlines():
                    print(f"  {line}")


asyncio.run(agent("erin", "sqe:read sqe:write", [
    ("execute_sql_change", {"sql": "CREATE TABLE rides WITH (partitioning = ARRAY['city']) AS SELECT * FROM (VALUES "
                                   "(1, 'Oslo', 12.50), (2, 'Rome', 7.25), (3, 'Oslo', 3.00)) AS v(id, city, fare)"}),
    ("execute_sql_change", {"sql": "INSERT INTO rides VALUES (4, 'Rome', 9.75)"}),
]))
asyncio.run(agent("alice", "sqe:read", [
    ("tools/list", {}),
    ("list_tables", {}),
    ("describe_table", {"table": "rides"}),
    ("table_stats", {"table": "rides"}),
    ("execute_sql_readonly", {"sql": "SELECT city, count(*) AS rides, sum(fare) AS fares FROM rides GROUP BY city ORDER BY city"}),
    ("execute_sql_readonly", {"sql": "DELETE FROM rides"}),
    ("execute_sql_change", {"sql": "DROP TABLE rides"}),
]))
PY
