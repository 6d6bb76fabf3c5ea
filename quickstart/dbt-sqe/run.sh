#!/usr/bin/env bash
# A jaffle shop built twice over, on one sqe-server with TLS on both listeners and OIDC sign-in:
#   day 1 and day 2 through dbt-sqe (Arrow Flight SQL), signed in as the OAuth client etl-service
#     (client credentials at the test identity provider, tests/idp), into schema jaffle_sqe;
#   day 1 and day 2 through dbt-trino (Trino's HTTP protocol, `method: jwt`) with a token of the
#     same client, into schema jaffle_trino;
# then what the tables hold, whether both schemas hold the same, and who ran the statements.
#   quickstart/dbt-sqe/run.sh          (DBT=path/to/dbt, SQE_SERVER=path/to/sqe-server optional)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dbt=${DBT:-$root/.venv-dbt/bin/dbt}
[ -x "$dbt" ] || { echo "dbt not found at $dbt (scripts/test installs it in .venv-dbt; or set DBT)"; exit 1; }
dbt=$(cd "$(dirname "$dbt")" && pwd)/$(basename "$dbt")
python=$(dirname "$dbt")/python
"$python" -c 'import dbt.adapters.sqe, dbt.adapters.trino' 2>/dev/null ||
  { echo "dbt-sqe and dbt-trino are not both installed beside $dbt (pip install -e clients/dbt-sqe)"; exit 1; }
[ -d "$root/tests/idp/node_modules/oauth2-mock-server" ] ||
  { echo "the test identity provider is not installed (npm install in tests/idp)"; exit 1; }
work=$(mktemp -d)
idp_pid=
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [ -n "$idp_pid" ]; then kill "$idp_pid" 2>/dev/null || true; wait "$idp_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${SQE_SERVER:-}" ]; then
  cargo build -q --manifest-path "$root/Cargo.toml" -p sqe-gateway --bin sqe-server
  SQE_SERVER="${CARGO_TARGET_DIR:-$root/target}/debug/sqe-server"
fi
# requests lets these override the CA file a client names (the trino client names ours).
unset REQUESTS_CA_BUNDLE CURL_CA_BUNDLE

# waits for "<what> listening on 127.0.0.1:PORT" in a log and prints PORT.
listening() {
  local log=$1 what=$2 pid=$3
  for _ in $(seq 300); do
    port=$(sed -nE "s/.*$what listening on 127\.0\.0\.1:([0-9]+).*/\1/p" "$log" | head -1)
    [ -n "$port" ] && { echo "$port"; return; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "no '$what listening' in $log:" >&2; cat "$log" >&2; exit 1
}

# A test CA and a certificate it signs for 127.0.0.1, for both of the server's listeners.
tls=$work/tls
mkdir "$tls"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$tls/ca.key" -out "$tls/ca.pem" -days 2 -subj "/CN=jaffle test CA" 2>/dev/null
openssl req "${ec[@]}" -keyout "$tls/server.key" -out "$tls/server.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$tls/server.ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
  -out "$tls/server.pem" -days 2 -extfile "$tls/server.ext" 2>/dev/null

# The identity provider: OAuth clients (etl-service/etl-secret) and users, tokens for audience sqe.
node "$root/tests/idp/idp.mjs" 0 > "$work/idp.log" 2>&1 &
idp_pid=$!
idp_port=$(listening "$work/idp.log" idp "$idp_pid")

# sqe-server: TLS, OIDC bearer tokens from the IdP, and a static token for an administrator who
# reads everyone's statements in system.runtime.queries.
admin_token=$("$python" -c 'import secrets; print(secrets.token_hex(24))')
cat > "$work/sqe.toml" <<TOML
[server]
host = "127.0.0.1"
http_port = 0
flight_port = 0

[server.tls]
cert_file = "$tls/server.pem"
key_file = "$tls/server.key"

[catalog]
warehouse = "$work/warehouse"

[auth]
allow_anonymous = false
admin_roles = ["sqe_admin"]

[auth.oidc]
issuer = "http://127.0.0.1:$idp_port"
audience = "sqe"
client_id = "sqe"

[[auth.static]]
name = "admin"
token_env = "JAFFLE_ADMIN_TOKEN"
roles = ["sqe_admin"]
TOML
JAFFLE_ADMIN_TOKEN=$admin_token "$SQE_SERVER" --config "$work/sqe.toml" > "$work/server.log" 2>&1 &
server_pid=$!
http_port=$(listening "$work/server.log" "trino http" "$server_pid")
flight_port=$(listening "$work/server.log" "flight sql" "$server_pid")

# dbt writes target/ and logs/ next to the project: a copy keeps the checkout clean.
cp -r "$here" "$work/project"
cd "$work/project"
export JAFFLE_TOKEN_URI="http://127.0.0.1:$idp_port/token"
export JAFFLE_CLIENT_ID=etl-service JAFFLE_CLIENT_SECRET=etl-secret
export JAFFLE_FLIGHT_PORT=$flight_port JAFFLE_HTTP_PORT=$http_port JAFFLE_CA_FILE=$tls/ca.pem

run_dbt() {
  if ! "$dbt" "$@" --profiles-dir . > "$work/dbt.log" 2>&1; then
    cat "$work/dbt.log"; echo "-- server log:"; tail -50 "$work/server.log"; exit 1
  fi
  # What each seed, model and snapshot did (sorted: two threads finish them in either order) and
  # dbt's summary, without colours, times and node numbers.
  sed -E 's/\x1b\[[0-9;]*m//g; s/^[0-9:]+ +//' "$work/dbt.log" > "$work/dbt.txt"
  sed -nE 's/^[0-9]+ of [0-9]+ (OK .*) \.+ \[(.*) in [0-9.]+s\]$/  \1 [\2]/p' "$work/dbt.txt" | sort
  grep -E "^(Completed successfully|Done\. PASS)" "$work/dbt.txt" || true
}
day() {
  "$python" generate.py "$1" seeds
}

echo "-- day 1: dbt build --target sqe (dbt-sqe, Flight SQL over TLS, OAuth client credentials)"
day 1
run_dbt build --target sqe
echo "-- day 2: new orders, two orders moved on, a changed email and a new customer; dbt build --target sqe"
day 2
run_dbt build --target sqe

# dbt-trino takes a token as it is: the same client's, from the same grant.
JAFFLE_JWT=$("$python" - <<'PY'
import os

import requests

response = requests.post(
    os.environ["JAFFLE_TOKEN_URI"],
    data={
        "grant_type": "client_credentials",
        "client_id": os.environ["JAFFLE_CLIENT_ID"],
        "client_secret": os.environ["JAFFLE_CLIENT_SECRET"],
    },
    timeout=30,
)
response.raise_for_status()
print(response.json()["access_token"])
PY
)
export JAFFLE_JWT
echo "-- day 1: dbt build --target trino (dbt-trino, Trino's HTTP over TLS, the client's JWT)"
day 1
run_dbt build --target trino
echo "-- day 2: dbt build --target trino"
day 2
run_dbt build --target trino

JAFFLE_ADMIN_TOKEN=$admin_token "$python" report.py "$flight_port" "$tls/ca.pem"
