"""One user cannot lock everyone else out of a shared server.

Two signed-in users of the test IdP, over Trino HTTP and Flight SQL. Bob holds as many query slots as
he can: Trino queries whose pages he stops reading, Flight SQL results he never fetches. Alice's
`SELECT 1` still answers within seconds, and Bob's statement past his share is refused with an error
naming the limit (`[engine] max_running_per_user`, `max_queued_per_user`). Two servers: one with
per-user limits (a result may sit unread for longer than the test), one where a single user may take
every slot, so that only a result left unread giving its slot back (`idle_slot_secs`) lets Alice in.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.flight as flight
import pytest
import requests

from conftest import start_server, token
from flight_messages import statement
from test_isolation import as_user, flight_client, headers_for, page, post
from test_privileges import flight_run, trino_run

AUTH = (
    '[auth]\nallow_anonymous = false\n\n'
    '[auth.oidc]\nissuer = "http://127.0.0.1:{port}"\naudience = "sqe"\nclient_id = "sqe"\n'
)
# Four slots, two of them one user's at most, and two statements of one user waiting; a result
# may sit unread for longer than a test takes.
SHARES = (
    "\n[engine]\nmax_concurrent_queries = 4\nmax_queued = 32\nqueue_timeout_secs = 60\n"
    "max_running_per_user = 2\nmax_queued_per_user = 2\nidle_slot_secs = 600\n"
)
# Two slots, both one user's if they like; a result unread for a second gives its slot back.
IDLE = (
    "\n[engine]\nmax_concurrent_queries = 2\nmax_queued = 32\nqueue_timeout_secs = 60\n"
    "max_running_per_user = 2\nmax_queued_per_user = 8\nidle_slot_secs = 1\n"
)
# Far more rows than anyone reads here: its stream stops at the first pages nobody takes.
LONG = "SELECT value FROM range(0, 1000000000)"
# How long Alice's SELECT 1 may take: without the limits she would wait the queue's 60 s.
PROMPT_SECS = 10
WAITING = (
    "too many statements of yours: 2 running and 2 waiting, the most one user may have waiting "
    "(max_queued_per_user = 2); wait for them to finish"
)


def serving(tmp_path_factory, idp, engine):
    """A server with the `[engine]` section `engine`, stopped when the test ends."""
    s = start_server(tmp_path_factory.mktemp("sqe-fair"), AUTH.format(port=idp.port) + engine)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def shares(tmp_path_factory, idp):
    yield from serving(tmp_path_factory, idp, SHARES)


@pytest.fixture
def idle(tmp_path_factory, idp):
    yield from serving(tmp_path_factory, idp, IDLE)


@pytest.fixture(scope="module")
def jwt(idp):
    return {u: token(idp.port, username=u, password=f"{u}-secret") for u in ("alice", "bob")}


def promptly(call):
    """`call()`'s answer, failing the test if it took more than PROMPT_SECS."""
    began = time.monotonic()
    answer = call()
    took = time.monotonic() - began
    assert took < PROMPT_SECS, f"took {took:.1f}s"
    return answer


def alice_is_served(server, jwt):
    assert promptly(lambda: trino_run(server, "alice", jwt["alice"], "SELECT 1")) == [[1]]
    assert promptly(lambda: flight_run(server, jwt["alice"], "SELECT 1 AS one")) == [{"one": 1}]


def first_rows(body, headers):
    """Follows a Trino query's pages until rows or an error come: (rows, the page)."""
    deadline = time.monotonic() + 60
    while "data" not in body and "error" not in body:
        assert "nextUri" in body and time.monotonic() < deadline, body
        body = page(body["nextUri"], headers)
    return body.get("data", []), body


def cancel(body, headers):
    r = requests.delete(body["nextUri"], headers=headers, timeout=30)
    assert r.status_code == 204, (r.status_code, r.text)


def test_a_trino_user_gets_his_share_of_the_slots_and_no_more(shares, jwt):
    bob = headers_for("bob", jwt["bob"])
    # Bob's first two run, the next two wait for his slots, the rest are refused before they run.
    bodies = [post(shares, LONG, bob) for _ in range(6)]
    running = [first_rows(body, bob) for body in bodies[:2]]
    assert [rows[0] for rows, _ in running] == [[0], [0]]
    for refused in bodies[4:]:
        _, last = first_rows(refused, bob)
        error = last["error"]
        assert (error["errorName"], error["errorType"], error["message"]) == (
            "GENERIC_INSUFFICIENT_RESOURCES",
            "INSUFFICIENT_RESOURCES",
            WAITING,
        )
        assert "nextUri" not in last

    alice_is_served(shares, jwt)

    # When Bob cancels one that runs, one of his waiting statements takes its slot.
    cancel(running[0][1], bob)
    rows, _ = first_rows(bodies[2], bob)
    assert rows[0] == [0]
    for body in (running[1][1], bodies[2], bodies[3]):
        cancel(body, bob)


def test_a_flight_user_gets_his_share_of_the_slots_and_no_more(shares, jwt):
    options = as_user(jwt["bob"])
    with flight_client(shares) as client:

        def plan(_):
            return client.get_flight_info(statement(LONG), options)

        with ThreadPoolExecutor(max_workers=4) as pool:
            # Two results are planned and wait for their DoGet, holding Bob's two slots; two
            # statements wait for them.
            planned = [pool.submit(plan, i) for i in range(2)]
            held = [f.result(timeout=60) for f in planned]
            waiting = [pool.submit(plan, i) for i in range(2)]
            # Alice sees that someone's statements wait (not whose, nor their text): Bob's.
            queued = "SELECT count(*) FROM system.runtime.queries WHERE state = 'QUEUED'"
            deadline = time.monotonic() + 30
            while trino_run(shares, "alice", jwt["alice"], queued) != [[2]]:
                assert time.monotonic() < deadline, "bob's statements never waited"
                time.sleep(0.1)
            # A fifth is refused at once, naming the limit.
            with pytest.raises(pa.ArrowInvalid) as e:
                client.get_flight_info(statement("SELECT 5"), options)
            assert WAITING in str(e.value), e.value
            assert "gRPC returned resource exhausted error" in str(e.value), e.value

            alice_is_served(shares, jwt)

            # Bob fetches a few rows of each held result and lets it go: his waiting statements
            # get the slots.
            for info in held:
                reader = client.do_get(info.endpoints[0].ticket, options)
                chunk = reader.read_chunk()
                assert chunk.data.column(0)[0].as_py() == 0
                reader.cancel()
            for f in waiting:
                info = f.result(timeout=60)
                reader = client.do_get(info.endpoints[0].ticket, options)
                assert reader.read_chunk().data.column(0)[0].as_py() == 0
                reader.cancel()


def test_a_result_left_unread_gives_its_slot_back(idle, jwt):
    bob = headers_for("bob", jwt["bob"])
    # Bob may take both slots, and does, reading the first page of each query and no more.
    bodies = [post(idle, LONG, bob) for _ in range(2)]
    firsts = [first_rows(body, bob) for body in bodies]
    assert [rows[0] for rows, _ in firsts] == [[0], [0]]

    alice_is_served(idle, jwt)

    # Bob reads on: his rows continue where they stopped, the query was paused, not restarted.
    rows, body = firsts[0]
    seen = len(rows)
    while seen < 50_000:
        body = page(body["nextUri"], bob)
        data = body.get("data", [])
        if data:
            assert data[0] == [seen]
            seen += len(data)
    cancel(body, bob)
    cancel(firsts[1][1], bob)

    # The same over Flight SQL: two results Bob never fetches.
    options = as_user(jwt["bob"])
    with flight_client(idle) as client:
        held = [client.get_flight_info(statement(LONG), options) for _ in range(2)]
        alice_is_served(idle, jwt)
        reader = client.do_get(held[0].endpoints[0].ticket, options)
        assert reader.read_chunk().data.column(0)[0].as_py() == 0
        reader.cancel()
