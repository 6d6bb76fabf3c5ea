"""Many clients at once: 50 concurrent clients, half over Trino HTTP (the `trino` package) and half over
Arrow Flight SQL (ADBC), as four principals (alice and bob with their own OIDC tokens, `robot` with its
static token, the service principal etl-service with its client id and secret), each running 20
queries whose answers are specific to the client. Every answer must be exactly right, and the query
registry (`system.runtime.queries`) must show the queries with the user who ran them.

The module has its own server (`secure_server` is module-scoped): the registry holds only what this
test ran."""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import adbc_driver_flightsql.dbapi as flight_sql
import trino
from trino.auth import BasicAuthentication, JWTAuthentication

from conftest import ROBOT_TOKEN, token

CLIENTS = 50
QUERIES = 20
# engine-pool/src/admission.rs: finished queries kept for system.runtime.queries.
KEEP_FINISHED = 1000

# The table every client reads: k = 1..200, v a function of k.
ROWS = [(k, 3 * k + k % 7) for k in range(1, 201)]
SETUP = [
    "CREATE SCHEMA conc",
    "CREATE TABLE conc.items (k bigint, v bigint)",
    "INSERT INTO conc.items VALUES " + ", ".join(f"({k}, {v})" for k, v in ROWS),
]
READER = 'SELECT query_id, state, "user", query, rows, error_message FROM system.runtime.queries'


def trino_cursor(server, user, auth):
    conn = trino.dbapi.connect(
        host="127.0.0.1",
        port=server.http_port,
        user=user,
        catalog="iceberg",
        schema="default",
        http_scheme="http",
        auth=auth,
        allow_insecure_auth=True,
    )
    return conn.cursor()


def as_robot(server, sql):
    cur = trino_cursor(server, "robot", JWTAuthentication(ROBOT_TOKEN))
    cur.execute(sql)
    return cur.fetchall()


def workload(client):
    """The client's queries and their exact answers. Odd ones read the table through a filter that
    depends on the client and the query; all carry a tag (client * 1000 + i) that makes each SQL text
    and answer unique."""
    for i in range(QUERIES):
        tag = client * 1000 + i
        if i % 2 == 0:
            yield f"SELECT current_user, {client} * 1000 + {i}", (tag,)
        else:
            low, step = client + 1, i % 7 + 2
            chosen = [v for k, v in ROWS if k >= low and k % step == 0]
            sql = (
                f"SELECT current_user, {client} * 1000 + {i}, count(*), sum(v) "
                f"FROM conc.items WHERE k >= {low} AND k % {step} = 0"
            )
            yield sql, (tag, len(chosen), sum(chosen))


def test_fifty_concurrent_clients_over_both_protocols(secure_server, idp):
    for sql in SETUP:
        as_robot(secure_server, sql)

    def credentials(client):
        """(user, protocol, how it signs in): even clients speak Trino HTTP, odd ones Flight SQL; the
        principals rotate over pairs of clients so each protocol sees all four."""
        protocol = "trino" if client % 2 == 0 else "flight"
        user = ["alice", "bob", "robot", "etl-service"][(client // 2) % 4]
        if user in ("alice", "bob"):
            return user, protocol, ("bearer", token(idp.port, username=user, password=f"{user}-secret"))
        if user == "robot":
            return user, protocol, ("bearer", ROBOT_TOKEN)
        return user, protocol, ("password", "etl-secret")

    clients = [credentials(c) for c in range(CLIENTS)]
    start = threading.Barrier(CLIENTS)

    def run(client):
        try:
            return queries(client)
        except BaseException:
            start.abort()  # the others stop waiting for this one
            raise

    def queries(client):
        user, protocol, (kind, secret) = clients[client]
        answers = []
        if protocol == "trino":
            auth = JWTAuthentication(secret) if kind == "bearer" else BasicAuthentication(user, secret)
            cur = trino_cursor(secure_server, user, auth)
            start.wait(timeout=60)
            for sql, _ in workload(client):
                cur.execute(sql)
                answers.append((sql, [tuple(r) for r in cur.fetchall()]))
            return answers
        kwargs = (
            {"adbc.flight.sql.authorization_header": f"Bearer {secret}"}
            if kind == "bearer"
            else {"username": user, "password": secret}
        )
        with flight_sql.connect(f"grpc://127.0.0.1:{secure_server.flight_port}", db_kwargs=kwargs) as conn:
            start.wait(timeout=60)
            for sql, _ in workload(client):
                with conn.cursor() as cur:
                    cur.execute(sql)
                    answers.append((sql, cur.fetchall()))
        return answers

    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        results = list(pool.map(run, range(CLIENTS)))

    expected_user = {}
    for client, answers in enumerate(results):
        user = clients[client][0]
        expected = [(sql, [(user, *answer)]) for sql, answer in workload(client)]
        assert answers == expected, f"client {client} ({clients[client][1]}, {user})"
        expected_user.update({sql: user for sql, _ in expected})
    assert len(expected_user) == CLIENTS * QUERIES

    registry = as_robot(secure_server, READER)
    # Each query once under its own id (Trino's query ids for Trino clients, the engine's for the
    # others); the reader, still running, is the only query not finished.
    assert len({r[0] for r in registry}) == len(registry)
    assert [r[1:4] for r in registry if r[1] == "RUNNING"] == [["RUNNING", "robot", READER]]
    finished = [r for r in registry if r[1] != "RUNNING"]
    assert [r[1] for r in finished] == ["FINISHED"] * len(finished)
    assert all(r[5] is None for r in finished)

    # The registry keeps the newest KEEP_FINISHED finished queries: exactly the 1000 client queries,
    # each once, with its own user (the older setup statements have gone).
    assert len(finished) == KEEP_FINISHED
    assert {r[3]: r[2] for r in finished} == expected_user
    assert all(r[4] == 1 for r in finished)
    assert Counter(r[2] for r in finished) == {"alice": 280, "bob": 240, "robot": 240, "etl-service": 240}
