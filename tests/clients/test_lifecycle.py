"""Work a client abandons gives its query slot back.

A Trino client that starts queries and never asks for a page, and a Flight SQL client that asks for
FlightInfos and never fetches the results, each hold a query slot per statement. The server's
reaper cancels them once their client has been silent for `client_timeout_secs` (Trino) or their
result has waited `result_timeout_secs` (Flight SQL). The server here has 32 slots, a 2-second
queue timeout and 3-second client and result timeouts, reaped every second: 40 abandoned
statements take all 32 slots (the other 8 give up in the queue with "server busy"), the registry
soon shows all of them ended, and then 32 new statements at once all run. Had a slot leaked, some of
those would wait in the queue and fail with "server busy" after 2 seconds.

On SIGTERM the server refuses new statements but serves what its clients are still reading, a
Trino result half-way through its pages, a planned Flight SQL result or a Quack result half-way
through its fetches, and then exits cleanly.

The module has its own servers (anonymous callers on loopback; each names its user).
"""

import secrets
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import adbc_driver_quack.dbapi as adbc_quack
import pyarrow as pa
import pyarrow.flight as flight
import pytest
import requests
import trino
from trino.exceptions import TrinoQueryError

from conftest import start_server
from flight_messages import statement

SLOTS = 32
ABANDONED = 40
BUSY = "server busy: no query slot freed up within 2s; try again later"
SERVER = "client_timeout_secs = 3\nreaper_interval_secs = 1\nresult_timeout_secs = 3\n"
CONFIG = (
    f"[auth]\nallow_anonymous = true\n\n[engine]\nmax_concurrent_queries = {SLOTS}\nqueue_timeout_secs = 2\n"
    # One user abandons them all: they may take every slot.
    f"max_running_per_user = {SLOTS}\n"
)
# How long the registry may take to show every abandoned statement ended.
SETTLE_SECS = 15


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("sqe-lifecycle"), CONFIG, server_toml=SERVER)
    try:
        yield s
    finally:
        s.stop()


def quote(text):
    return "'" + text.replace("'", "''") + "'"


def long_query():
    """A result far larger than anyone reads, unique to the test: its stream stops at the first
    batches nobody takes, holding its slot without working."""
    return f"SELECT value, '{secrets.token_hex(6)}' AS tag FROM range(0, 1000000000)"


def trino_cursor(server, user):
    return trino.dbapi.connect(
        host="127.0.0.1", port=server.http_port, user=user, catalog="iceberg", schema="default", http_scheme="http"
    ).cursor()


def trino_run(server, user, sql):
    cur = trino_cursor(server, user)
    cur.execute(sql)
    return cur.fetchall()


def all_at_once(n, call):
    """`call(i)` for i in 0..n, all started together; the answers in order."""
    start = threading.Barrier(n)

    def run(i):
        start.wait(timeout=60)
        return call(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def settled(server, user, sql):
    """Waits until the registry shows `ABANDONED` statements with text `sql`, none queued or
    running; returns how they ended, as a Counter of (state, error_message). While the slots are
    still held, the reading statement itself may find the server busy; it asks again."""
    reader = f"SELECT state, error_message FROM system.runtime.queries WHERE query = {quote(sql)}"
    deadline = time.monotonic() + SETTLE_SECS
    states = Counter()
    while time.monotonic() < deadline:
        try:
            states = Counter((state, error) for state, error in trino_run(server, user, reader))
        except TrinoQueryError as e:
            if e.message != BUSY:
                raise
            continue
        ended = all(state not in ("QUEUED", "RUNNING") for state, _ in states)
        if sum(states.values()) == ABANDONED and ended:
            return states
        time.sleep(0.25)
    pytest.fail(f"after {SETTLE_SECS}s the abandoned statements are still {dict(states)}")


# All 40 begin together: 32 take the slots, 8 wait in the queue and give up after its 2 s, a second
# before the reaper's first chance (3 s of silence) to free a slot.
HOW_THEY_END = Counter({("CANCELLED", None): SLOTS, ("FAILED", BUSY): ABANDONED - SLOTS})


def test_abandoned_trino_queries_give_back_their_slots(lifecycle):
    sql = long_query()
    url = f"http://127.0.0.1:{lifecycle.http_port}/v1/statement"
    for _ in range(ABANDONED):
        r = requests.post(url, data=sql.encode(), headers={"X-Trino-User": "leaver"}, timeout=30)
        assert r.status_code == 200, r.text
        assert "nextUri" in r.json()
    # ... and never asks for a page.
    assert settled(lifecycle, "leaver", sql) == HOW_THEY_END

    answers = all_at_once(SLOTS, lambda i: trino_run(lifecycle, "returner", f"SELECT {i} AS n"))
    assert answers == [[[i]] for i in range(SLOTS)]


def test_unfetched_flight_results_give_back_their_slots(lifecycle):
    sql = long_query()
    descriptor = statement(sql)
    options = flight.FlightCallOptions(timeout=60)
    with flight.FlightClient(f"grpc://127.0.0.1:{lifecycle.flight_port}") as client:

        def leave(_):
            try:
                client.get_flight_info(descriptor, options)
                return "parked"
            except pa.ArrowException as e:
                return "busy" if BUSY in str(e) else str(e)

        # The results are never fetched.
        assert Counter(all_at_once(ABANDONED, leave)) == Counter({"parked": SLOTS, "busy": ABANDONED - SLOTS})
        # Flight SQL callers without credentials run as `anonymous`, who reads their own rows.
        assert settled(lifecycle, "anonymous", sql) == HOW_THEY_END

        def run(i):
            info = client.get_flight_info(statement(f"SELECT {i} AS n"), options)
            return client.do_get(info.endpoints[0].ticket, options).read_all().to_pylist()

        assert all_at_once(SLOTS, run) == [[{"n": i}] for i in range(SLOTS)]


def test_a_statement_given_up_while_it_waits_for_a_slot_still_ends(lifecycle):
    """A Flight SQL client that stops waiting (its call's deadline passes) while its statement waits
    for a slot: the statement is registered and queued, then the call goes away. Its registry row
    must still end (as CANCELLED, like any statement its caller dropped); a row left QUEUED would
    never end, and would count as running for ever (a shutdown would wait its whole grace for it)."""
    holder = long_query()
    url = f"http://127.0.0.1:{lifecycle.http_port}/v1/statement"
    # Abandoned Trino queries take every slot (the reaper frees them after 3 s of silence).
    for _ in range(SLOTS):
        r = requests.post(url, data=holder.encode(), headers={"X-Trino-User": "anonymous"}, timeout=30)
        assert r.status_code == 200, r.text
    waiter = f"SELECT '{secrets.token_hex(6)}' AS waited"
    with flight.FlightClient(f"grpc://127.0.0.1:{lifecycle.flight_port}") as client:
        with pytest.raises(flight.FlightTimedOutError):
            client.get_flight_info(statement(waiter), flight.FlightCallOptions(timeout=1))

    reader = (
        "SELECT query, state FROM system.runtime.queries "
        f"WHERE query IN ({quote(holder)}, {quote(waiter)})"
    )
    deadline = time.monotonic() + SETTLE_SECS
    states = Counter()
    while time.monotonic() < deadline:
        try:
            states = Counter((q == waiter, state) for q, state in trino_run(lifecycle, "anonymous", reader))
        except TrinoQueryError as e:
            if e.message != BUSY:
                raise
            continue
        if sum(states.values()) == SLOTS + 1 and all(s not in ("QUEUED", "RUNNING") for _, s in states):
            break
        time.sleep(0.25)
    # (is it the waiter, state)
    assert states == Counter({(False, "CANCELLED"): SLOTS, (True, "CANCELLED"): 1})


DRAINING = "the server is shutting down and accepts no new statements"


def terminate(server):
    """Sends SIGTERM and returns the server's "shutting down" log line once it is written."""
    server.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [line for line in server.lines if "shutting down" in line]
        if lines:
            return lines[0]
        time.sleep(0.1)
    pytest.fail("no shutdown line in the log:\n" + server.log())


def test_on_sigterm_running_queries_finish_and_new_ones_are_refused(tmp_path):
    """SIGTERM while a client is half-way through a result: new statements are refused, the
    client still reads every row, and then the server exits on its own, cleanly."""
    s = start_server(tmp_path, "[auth]\nallow_anonymous = true\n", server_toml="shutdown_grace_secs = 60\n")
    try:
        cur = trino_cursor(s, "alice")
        # Many pages, even of the spooling protocol's 256k rows: trino-python reads one page ahead
        # of the rows it hands out, and the query must still be open when the signal comes.
        cur.execute("SELECT value FROM range(0, 2000000)")
        first = cur.fetchone()
        # Alice's query was still open when the signal came.
        assert "trino_queries=1" in terminate(s)
        with pytest.raises(TrinoQueryError) as refused:
            trino_run(s, "bob", "SELECT 1")
        assert refused.value.message == DRAINING
        rest = cur.fetchall()
        assert [first[0]] + [r[0] for r in rest] == list(range(0, 2000000))
        assert s.process.wait(timeout=30) == 0
        assert "sqe-server stopped" in s.log()
    finally:
        s.stop()


def test_on_sigterm_a_planned_flight_result_can_still_be_fetched(tmp_path):
    """SIGTERM between a Flight SQL client's GetFlightInfo and its DoGet: the result is still
    served, a new statement is refused, and then the server exits cleanly."""
    s = start_server(tmp_path, "[auth]\nallow_anonymous = true\n", server_toml="shutdown_grace_secs = 60\n")
    try:
        options = flight.FlightCallOptions(timeout=30)
        with flight.FlightClient(f"grpc://127.0.0.1:{s.flight_port}") as client:
            info = client.get_flight_info(statement("SELECT value FROM range(0, 100000)"), options)
            assert "flight_results=1" in terminate(s)
            with pytest.raises(pa.ArrowException) as refused:
                client.get_flight_info(statement("SELECT 1"), options)
            assert DRAINING in str(refused.value)
            rows = client.do_get(info.endpoints[0].ticket, options).read_all()
            assert rows.column("value").to_pylist() == list(range(0, 100000))
        assert s.process.wait(timeout=30) == 0
        assert "sqe-server stopped" in s.log()
    finally:
        s.stop()


QUACK_TOKEN = "alice-quack-token-0123456789"


def test_on_sigterm_a_quack_result_being_read_is_read_to_its_end(tmp_path):
    """SIGTERM while DuckDB's ADBC driver is half-way through a Quack result, which it fetches a
    request at a time: the shutdown waits for the unread result as for the other protocols', the
    client reads every row, and then the server exits cleanly."""
    auth = (
        '[auth]\nallow_anonymous = false\n\n[[auth.static]]\nname = "alice"\ntoken_env = "ALICE_TOKEN"\n\n'
        "[quack]\nenabled = true\nport = 0\n"
    )
    s = start_server(tmp_path, auth, {"ALICE_TOKEN": QUACK_TOKEN}, server_toml="shutdown_grace_secs = 60\n")
    try:
        deadline = time.monotonic() + 20
        port = None
        while port is None and time.monotonic() < deadline:
            port = next(
                (int(line.rsplit(":", 1)[1]) for line in list(s.lines) if "quack listening on 127.0.0.1:" in line),
                None,
            )
            time.sleep(0.05)
        assert port is not None, s.log()
        uri = f"quack://127.0.0.1:{port}"
        rows = 3_000_000
        with adbc_quack.connect(uri, db_kwargs={"adbc.quack.token": QUACK_TOKEN}, autocommit=True) as con:
            cur = con.cursor()
            cur.execute(f"SELECT value FROM range(0, {rows})")
            reader = cur.fetch_record_batch()
            first = reader.read_next_batch()
            assert "quack_results=1" in terminate(s)
            rest = reader.read_all()
            values = first.column(0).to_pylist() + rest.column(0).to_pylist()
            assert values == list(range(0, rows))
        assert s.process.wait(timeout=30) == 0
        assert "sqe-server stopped" in s.log()
    finally:
        s.stop()
