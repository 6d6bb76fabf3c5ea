"""One server, several signed-in users: what a second user (bob) can do with what the first (alice)
left on the wire, and what any signed-in user can make the server do. These are the attacks a
second signed-in user would try, made the way an attacker makes them (raw HTTP with `requests`, raw
Flight calls with hand-encoded protobuf), each checked for its exact answer:

- Trino HTTP: another user's page URIs, cancel URIs and `DELETE /v1/query/{id}` answer exactly like
  a query that does not exist, and change nothing; the owner and an admin (ada by her token's role,
  robot by its static role) may kill a query.
- Flight SQL: another user's ticket, prepared-statement handle and session cookie are as missing as
  made-up ones, and closing or cancelling them changes nothing.
- `system.runtime.queries`: other users' rows show that a query exists, not its user, text, error
  or source; admins read everything.
- Files: a server reads and writes no local files unless `[files]` says so, never a warehouse, and
  an allowed directory cannot be climbed out of.
- A fault of the server's own files is an internal error whose details are in the log under the id
  the client is told, and nothing else.
- Oversized inputs, garbage on every route, and statements nested deeper than the engine plans are
  refused with a clean error; the server keeps serving (the last also embedded, in sqe-cli).
- What one user can make the server keep is capped: a statement longer than SQE runs is refused when
  it is prepared (Flight SQL, Trino's PREPARE), bob's prepared statements (a count and their bytes)
  and unread Trino queries, and a user's Flight sessions, stop at the `[server]` caps with an error
  naming the setting, alice beside him is not held, and the server's memory under a loop of the largest
  prepared statements stays within a stated bound.

The module has its own servers (`start_server` with OIDC, the static principal robot and the admin
role `sqe_admin`); the registry and the warehouse hold only what these tests made.
"""

import json
import os
import random
import re
import secrets
import string
import subprocess
import time

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pyarrow.flight as flight
import pytest
import requests
import trino
from adbc_driver_manager import AdbcStatusCode
from adbc_driver_manager import Error as AdbcError
from trino.auth import JWTAuthentication
from trino.exceptions import TrinoQueryError

from conftest import ROBOT_TOKEN, TARGET, rss_growth, start_server, token
from flight_messages import field, pack, parse, statement, unpack

SQE_CLI = os.environ.get("SQE_CLI", str(TARGET / "debug" / "sqe-cli"))

AUTH = (
    '[auth]\nallow_anonymous = false\nimpersonators = ["robot"]\nadmin_roles = ["sqe_admin"]\n\n'
    '[auth.oidc]\nissuer = "http://127.0.0.1:{port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
    '[[auth.static]]\nname = "robot"\ntoken_env = "ROBOT_TOKEN"\nroles = ["sqe_admin"]\n'
)

# The server's own answers (protocols/flight-sql/src/lib.rs, engine-pool/src/guard.rs,
# engine-pool/src/file_access.rs, sessions/src/sql_text.rs).
NO_RESULT = "result not found (already fetched, or expired)"
NO_PREPARED = "prepared statement not found (closed?)"
DEPTH = (
    "expression nests more than 1000 deep (a sum or an AND/OR chain of that many terms); split it, "
    "or use IN (…) for a long list of alternatives"
)
def wide(operations):
    return (
        f"query has {operations} set operations (UNION, INTERSECT, EXCEPT); SQE plans at most 1000; "
        "for many rows of constants use one VALUES list"
    )
LOCAL = (
    "{verb} local path '{path}' is not allowed on this server (add a directory that holds it to "
    "[files] allowed_local_prefixes, or set [files] allow_local_paths = true)"
)
WAREHOUSE = "{verb} '{path}' is not allowed: it is inside a catalog's warehouse, whose files belong to its tables"
TOO_MANY = (
    "{n} parameter values are more than the 65535 one statement may bind; load many rows with bulk "
    "ingest or INSERT … SELECT"
)
INTERNAL = re.compile(r"internal error ([0-9a-f]{12}); the log has the details")
# A query id in SQE's form that no query has.
MADE_UP_ID = "20200101_000000_99999_abcde"


def signed_in_server(root, idp, extra=""):
    s = start_server(root, AUTH.format(port=idp.port) + extra, {"ROBOT_TOKEN": ROBOT_TOKEN})
    s.root = root
    return s


@pytest.fixture(scope="module")
def sqe(tmp_path_factory, idp):
    """Defaults plus an authenticator: no [files] section."""
    s = signed_in_server(tmp_path_factory.mktemp("sqe-isolation"), idp)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def jwt(idp):
    """Each user's bearer token: alice and bob are plain users, ada's token carries the admin role,
    robot is the static principal with the admin role."""
    tokens = {u: token(idp.port, username=u, password=f"{u}-secret") for u in ("alice", "bob", "ada")}
    tokens["robot"] = ROBOT_TOKEN
    return tokens


def quote(text):
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


# --- Trino HTTP, raw ------------------------------------------------------------------------------


def headers_for(user, secret, **extra):
    return {"X-Trino-User": user, "Authorization": f"Bearer {secret}", **extra}


def base_url(server):
    return f"http://127.0.0.1:{server.http_port}"


def post(server, sql, headers):
    """POST /v1/statement; the first answer (id, nextUri)."""
    r = requests.post(f"{base_url(server)}/v1/statement", data=sql.encode(), headers=headers, timeout=60)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def page(uri, headers):
    r = requests.get(uri, headers=headers, timeout=60)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def finish(body, headers):
    """Follows nextUri from a statement's answer until it is absent: (all rows, the last page)."""
    rows = list(body.get("data", []))
    deadline = time.monotonic() + 120
    while "nextUri" in body:
        assert time.monotonic() < deadline, f"query {body['id']} did not end"
        body = page(body["nextUri"], headers)
        rows.extend(body.get("data", []))
    return rows, body


def attempt(method, uri, headers):
    """What a request gets: status, body text and content type."""
    r = requests.request(method, uri, headers=headers, timeout=30)
    return r.status_code, r.text, r.headers.get("content-type")


# --- Trino, through the client --------------------------------------------------------------------


def trino_run(server, user, secret, sql, params=None, **kwargs):
    conn = trino.dbapi.connect(
        host="127.0.0.1",
        port=server.http_port,
        user=user,
        catalog="iceberg",
        schema="default",
        http_scheme="http",
        auth=JWTAuthentication(secret),
        allow_insecure_auth=True,
        **kwargs,
    )
    cur = conn.cursor()
    cur.execute(sql, params) if params is not None else cur.execute(sql)
    return cur.fetchall()


def trino_refusal(server, user, secret, sql, params=None, **kwargs):
    """The error a statement ends with: (errorName, errorType, message)."""
    with pytest.raises(TrinoQueryError) as e:
        trino_run(server, user, secret, sql, params, **kwargs)
    return e.value.error_name, e.value.error_type, e.value.message


# --- Flight SQL, raw: a tiny protobuf encoder -----------------------------------------------------

SESSION_COOKIE = "arrow_flight_session_id"


def prepared_query(handle):
    return flight.FlightDescriptor.for_command(pack("CommandPreparedStatementQuery", field(1, handle)))


def set_options(**options):
    """SetSessionOptionsRequest: map<string, SessionOptionValue{string_value}>."""
    return b"".join(
        field(1, field(1, name.encode()) + field(2, field(1, value.encode()))) for name, value in options.items()
    )


def session_options(body):
    """GetSessionOptionsResult as {name: string value}."""
    options = {}
    for number, entry in parse(body):
        assert number == 1
        pair = dict(parse(entry))
        options[pair[1].decode()] = dict(parse(pair[2]))[1].decode()
    return options


class SessionCookies(flight.ClientMiddlewareFactory):
    """Collects the session ids the server hands out in `set-cookie`: pyarrow shows a response's
    headers only to client middleware. The cookie is sent back by hand, in the call options."""

    def __init__(self):
        super().__init__()
        self.handed_out = []

    def start_call(self, info):
        return _CookieReader(self)


class _CookieReader(flight.ClientMiddleware):
    def __init__(self, jar):
        super().__init__()
        self.jar = jar

    def sending_headers(self):
        return {}

    def received_headers(self, headers):
        for value in headers.get("set-cookie", []):
            name, _, rest = value.partition("=")
            if name == SESSION_COOKIE:
                self.jar.handed_out.append(rest.split(";")[0])


def flight_client(server, *middleware):
    return flight.FlightClient(f"grpc://127.0.0.1:{server.flight_port}", middleware=list(middleware))


def as_user(secret, cookie=None, timeout=60):
    headers = [(b"authorization", f"Bearer {secret}".encode())]
    if cookie is not None:
        headers.append((b"cookie", f"{SESSION_COOKIE}={cookie}".encode()))
    return flight.FlightCallOptions(headers=headers, timeout=timeout)


def fetch(client, options, descriptor) -> pa.Table:
    info = client.get_flight_info(descriptor, options)
    return client.do_get(info.endpoints[0].ticket, options).read_all()


def act(client, options, kind, body=b""):
    """A DoAction's result bodies."""
    return [r.body.to_pybytes() for r in client.do_action(flight.Action(kind, body), options)]


def get_options(client, options):
    (body,) = act(client, options, "GetSessionOptions")
    return session_options(body)


def adbc_fetch(server, secret, sql):
    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {secret}"}
    with flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=kwargs) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()


# --- 1. Trino HTTP ownership ----------------------------------------------------------------------

ROWS = 20_000
LONG = f"SELECT value FROM range(0, {ROWS})"


def test_another_user_can_neither_read_nor_cancel_a_trino_query(sqe, jwt):
    alice = headers_for("alice", jwt["alice"])
    bob = headers_for("bob", jwt["bob"])
    base = base_url(sqe)
    first = post(sqe, LONG, alice)
    qid = first["id"]
    queued = re.fullmatch(
        rf"{re.escape(base)}/v1/statement/queued/{re.escape(qid)}/([0-9a-f]{{64}})/1", first["nextUri"]
    )
    assert queued, first["nextUri"]
    slug = queued.group(1)

    # Alice reads the first page; the query goes on at executing/…/2 (20,000 rows take several pages).
    first_page = page(first["nextUri"], alice)
    executing = f"{base}/v1/statement/executing/{qid}/{slug}/2"
    assert first_page["nextUri"] == executing
    assert "error" not in first_page

    # What a query that does not exist answers, and what everything of alice's answers bob: the same.
    missing = attempt("GET", f"{base}/v1/statement/executing/{MADE_UP_ID}/{slug}/2", bob)
    assert missing == (404, f"query {MADE_UP_ID} not found", "text/plain; charset=utf-8")
    as_missing = (404, f"query {qid} not found", "text/plain; charset=utf-8")
    assert attempt("GET", first["nextUri"], bob) == as_missing
    assert attempt("GET", executing, bob) == as_missing
    # Naming alice in X-Trino-User does not help bob (he may not impersonate): the same 404.
    assert attempt("GET", executing, headers_for("alice", jwt["bob"])) == as_missing
    # The right id with a wrong slug is missing too, even for alice.
    assert attempt("GET", f"{base}/v1/statement/executing/{qid}/{'0' * 64}/2", alice) == as_missing

    # Bob's cancels answer as for any query (204) and do nothing.
    assert attempt("DELETE", executing, bob)[:2] == (204, "")
    assert attempt("DELETE", first["nextUri"], bob)[:2] == (204, "")

    rows, last = finish(first_page, alice)
    assert "error" not in last, last["error"]
    assert last["stats"]["state"] == "FINISHED"
    assert sorted(r[0] for r in rows) == list(range(ROWS))


def test_another_user_gets_no_spooled_page_and_odd_encodings_get_plain_pages(sqe, jwt):
    """A spooled page's rows ride its owner's page URIs: bob, asking for the same encodings, gets a
    missing query, and so does his heartbeat. A huge or malformed encoding list is answered with plain pages, and the server
    goes on."""
    import base64
    import json

    import zstandard

    spooled = {"X-Trino-Query-Data-Encoding": "json+zstd,json+lz4,json"}
    alice = headers_for("alice", jwt["alice"], **spooled)
    bob = headers_for("bob", jwt["bob"], **spooled)
    first = post(sqe, "SELECT value FROM range(0, 5000)", alice)
    assert attempt("GET", first["nextUri"], bob) == (404, f"query {first['id']} not found", "text/plain; charset=utf-8")
    rows, body = [], page(first["nextUri"], alice)
    while True:
        if "data" in body:
            assert body["data"]["encoding"] == "json+zstd"
            for segment in body["data"]["segments"]:
                assert segment["type"] == "inline"
                raw = base64.b64decode(segment["data"])
                if "uncompressedSize" in segment["metadata"]:
                    raw = zstandard.ZstdDecompressor().decompress(raw)
                rows.extend(r[0] for r in json.loads(raw))
        if "nextUri" not in body:
            break
        assert attempt("GET", body["nextUri"], bob)[0] == 404
        # A heartbeat (trino-python's HEAD while it downloads a segment) takes no page: the GET
        # after it still brings every row. Bob's gets a missing query.
        assert requests.head(body["nextUri"], headers=alice, timeout=30).status_code == 200
        assert requests.head(body["nextUri"], headers=bob, timeout=30).status_code == 404
        body = page(body["nextUri"], alice)
    assert rows == list(range(5000))

    for odd in [",".join(["json+gzip"] * 20_000), ",, ,json+zstd ;", "json+zstd;level=19"]:
        headers = headers_for("alice", jwt["alice"], **{"X-Trino-Query-Data-Encoding": odd})
        rows, last = finish(post(sqe, "SELECT value FROM range(0, 3)", headers), headers)
        assert "error" not in last, last
        assert rows == [[0], [1], [2]], odd
    assert finish(post(sqe, "SELECT 1", alice), alice)[1]["stats"]["state"] == "FINISHED"


# Rows that hardly compress (about 60 bytes each as zstd), so that a segment of 20,000 rows or
# more is kept by the gateway (over 1 MiB as sent).
NOISY = (
    "SELECT value, "
    + ", ".join(f"lower(to_hex(md5(to_utf8(CAST(value + {i} AS varchar))))) AS h{i}" for i in range(3))
    + " FROM range(0, 300000) ORDER BY value"
)


def noisy_rows():
    import hashlib

    md5 = lambda n: hashlib.md5(str(n).encode()).hexdigest()  # noqa: E731
    return [[i, md5(i), md5(i + 1), md5(i + 2)] for i in range(300000)]


def segment_rows(segment, raw):
    import zstandard

    if "uncompressedSize" in segment["metadata"]:
        raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=segment["metadata"]["uncompressedSize"])
    return json.loads(raw)


def test_another_user_cannot_fetch_or_acknowledge_a_spooled_segment(sqe, jwt):
    """A large segment is kept by the gateway, and its page names its URI and a key header, for its
    owner alone; she fetches it without credentials, as trino-python does. Bob presenting the URI
    (with his token, with or without her key, naming her or not), anyone without the key, and
    made-up, huge and malformed handles get the answer of a segment that does not exist, and their
    acknowledgements remove nothing. Her acknowledgement removes it."""
    import base64

    alice = headers_for("alice", jwt["alice"], **{"X-Trino-Query-Data-Encoding": "json+zstd"})
    bob = headers_for("bob", jwt["bob"])
    body = post(sqe, NOISY, alice)
    segments = []
    while "nextUri" in body:
        body = page(body["nextUri"], alice)
        assert "error" not in body, body
        if "data" in body:
            assert body["data"]["encoding"] == "json+zstd"
            segments.extend(body["data"]["segments"])
    spooled = [s for s in segments if s["type"] == "spooled"]
    assert spooled, [s["type"] for s in segments]
    first = spooled[0]
    ((name, (key,)),) = first["headers"].items()
    as_missing = (404, "segment not found", "text/plain; charset=utf-8")

    assert attempt("GET", first["uri"], {**bob, name: key}) == as_missing
    assert attempt("GET", first["uri"], bob) == as_missing
    # Naming alice in X-Trino-User does not help bob (he may not impersonate).
    assert attempt("GET", first["uri"], {**headers_for("alice", jwt["bob"]), name: key}) == as_missing
    for keyless in [{}, {name: "0" * len(key)}, {name: key[:-1]}, {name: "k" * 20_000}, {"X-Trino-User": "alice"}]:
        assert attempt("GET", first["uri"], keyless) == as_missing, keyless
    for method in ("GET", "DELETE"):
        assert attempt(method, first["ackUri"], {**bob, name: key}) == as_missing
        assert attempt(method, first["ackUri"], {}) == as_missing
    base = base_url(sqe)
    for handle in ["0" * 64, "x" * 30_000, "..%2F..%2Fv1%2Finfo", first["uri"].rsplit("/", 1)[1] + "0"]:
        for route in ("download", "ack"):
            assert attempt("GET", f"{base}/v1/spooled/{route}/{handle}", {name: key}) == as_missing, handle
    # A handle that is not UTF-8 is a bad request.
    status, text, _ = attempt("GET", f"{base}/v1/spooled/download/%00%ff", {name: key})
    assert (status, text.split(":")[0]) == (400, "Invalid URL")

    # Alice, without credentials as her client fetches, and with her own token.
    r = requests.get(first["uri"], headers={"X-Trino-User": "alice", name: key}, timeout=60)
    assert (r.status_code, r.headers["content-type"]) == (200, "application/octet-stream")
    assert len(r.content) == first["metadata"]["segmentSize"]
    r2 = requests.get(first["uri"], headers={**alice, name: key}, timeout=60)
    assert r2.status_code == 200 and r2.content == r.content
    rows = []
    for segment in segments:
        if segment["type"] == "inline":
            raw = base64.b64decode(segment["data"])
        else:
            ((n, (k,)),) = segment["headers"].items()
            raw = requests.get(segment["uri"], headers={n: k}, timeout=60).content
        assert segment["metadata"]["rowOffset"] == len(rows)
        rows.extend(segment_rows(segment, raw))
    assert rows == noisy_rows()

    assert attempt("GET", first["ackUri"], {name: key})[0] == 200
    assert attempt("GET", first["uri"], {name: key}) == as_missing
    assert attempt("GET", first["ackUri"], {name: key}) == as_missing
    assert finish(post(sqe, "SELECT 1", alice), alice)[1]["stats"]["state"] == "FINISHED"


def test_a_cancelled_query_leaves_no_segment_behind(sqe, jwt):
    """Segments kept for a query its owner cancels are dropped with it."""
    alice = headers_for("alice", jwt["alice"], **{"X-Trino-Query-Data-Encoding": "json+zstd"})
    # Eight segments or more, which no page takes all of: the query is still open after the first.
    body = post(sqe, NOISY.replace("range(0, 300000) ORDER BY value", "range(0, 2000000)"), alice)
    spooled = []
    while "nextUri" in body and not spooled:
        body = page(body["nextUri"], alice)
        spooled = [s for s in body.get("data", {}).get("segments", []) if s["type"] == "spooled"]
    assert spooled and "nextUri" in body, "the query ended before a segment was kept"
    keys = [{k: v[0] for k, v in s["headers"].items()} for s in spooled]
    assert [attempt("GET", s["uri"], k)[0] for s, k in zip(spooled, keys)] == [200] * len(spooled)
    assert attempt("DELETE", body["nextUri"], alice)[0] == 204
    assert [attempt("GET", s["uri"], k)[0] for s, k in zip(spooled, keys)] == [404] * len(spooled)


def test_trino_python_reads_spooled_segments_as_a_signed_in_user(sqe, jwt, monkeypatch):
    """trino-python fetches and acknowledges kept segments without its credentials; a signed-in
    server hands them over all the same, both users read their own rows, and each segment fetched
    is gone once acknowledged."""
    from trino.client import SpooledSegment

    fetched = []
    download = SpooledSegment.data.fget

    def counted(segment):
        fetched.append((segment.uri, {k: v[0] for k, v in segment.headers.items()}))
        return download(segment)

    monkeypatch.setattr(SpooledSegment, "data", property(counted))
    for user in ("alice", "bob"):
        fetched.clear()
        rows = trino_run(sqe, user, jwt[user], NOISY, encoding="json+zstd")
        assert rows == noisy_rows()
        assert fetched, "no segment was spooled"
        # trino-python acknowledges in the background.
        deadline = time.monotonic() + 30
        for uri, headers in fetched:
            while requests.get(uri, headers=headers, timeout=30).status_code != 404:
                assert time.monotonic() < deadline, f"{uri} was not acknowledged"
                time.sleep(0.1)


def test_only_the_owner_or_an_admin_kills_a_trino_query(sqe, jwt):
    alice = headers_for("alice", jwt["alice"])
    base = base_url(sqe)

    def kill(qid, who):
        r = requests.delete(f"{base}/v1/query/{qid}", headers=headers_for(who, jwt[who]), timeout=30)
        return r.status_code, r.text

    first = post(sqe, LONG, alice)
    qid = first["id"]
    assert kill(qid, "bob") == (404, f"query {qid} not found")
    assert kill(MADE_UP_ID, "bob") == (404, f"query {MADE_UP_ID} not found")
    rows, last = finish(first, alice)
    assert "error" not in last, last["error"]
    assert sorted(r[0] for r in rows) == list(range(ROWS))

    # Alice herself, ada (admin by her token's role) and robot (admin by its static role) may.
    for killer in ("alice", "ada", "robot"):
        started = post(sqe, LONG, alice)
        qid = started["id"]
        assert kill(qid, killer) == (204, ""), killer
        # The query is gone: its owner's next page says why, as Trino's does (her own cancel, or
        # an admin's kill); anyone else still gets a missing query's 404.
        status, text = attempt("GET", started["nextUri"], alice)[:2]
        assert status == 200, (killer, status, text)
        error = json.loads(text)["error"]
        expected = (
            ("USER_CANCELED", 3, "Query was canceled")
            if killer == "alice"
            else ("ADMINISTRATIVELY_KILLED", 38, "Query killed. No message provided.")
        )
        assert (error["errorName"], error["errorCode"], error["message"]) == expected, killer
        bob = headers_for("bob", jwt["bob"])
        assert attempt("GET", started["nextUri"], bob)[:2] == (404, f"query {qid} not found"), killer
        assert kill(qid, killer) == (404, f"query {qid} not found"), killer


def test_a_cancelled_trino_query_tells_its_owner_and_nobody_else(sqe, jwt):
    alice = headers_for("alice", jwt["alice"])
    bob = headers_for("bob", jwt["bob"])
    started = post(sqe, LONG, alice)
    qid = started["id"]
    first_page = page(started["nextUri"], alice)
    # Alice's client cancels on its next page's URI, as the Trino client does on close.
    assert attempt("DELETE", first_page["nextUri"], alice)[:2] == (204, "")
    as_missing = (404, f"query {qid} not found", "text/plain; charset=utf-8")
    assert attempt("GET", first_page["nextUri"], bob) == as_missing
    status, text = attempt("GET", first_page["nextUri"], alice)[:2]
    assert status == 200, text
    body = json.loads(text)
    assert body["stats"]["state"] == "FAILED"
    assert "nextUri" not in body
    error = body["error"]
    assert (error["errorName"], error["errorCode"], error["errorType"], error["message"]) == (
        "USER_CANCELED",
        3,
        "USER_ERROR",
        "Query was canceled",
    )
    # The wrong slug is still a missing query, even for alice.
    wrong = first_page["nextUri"].replace(first_page["nextUri"].split("/")[-2], "0" * 64)
    assert attempt("GET", wrong, alice) == as_missing


# --- 2. Flight SQL ownership ----------------------------------------------------------------------


def test_another_user_cannot_fetch_or_cancel_a_flight_result(sqe, jwt):
    alice, bob = as_user(jwt["alice"]), as_user(jwt["bob"])
    with flight_client(sqe) as client:
        info = client.get_flight_info(statement("SELECT value FROM range(0, 5000) ORDER BY value"), alice)
        ticket = info.endpoints[0].ticket
        with pytest.raises(pa.ArrowKeyError) as refused:
            client.do_get(ticket, bob).read_all()
        assert NO_RESULT in str(refused.value)
        # A made-up ticket of the same shape answers the same.
        forged = flight.Ticket(pack("TicketStatementQuery", field(1, secrets.token_hex(32).encode())))
        with pytest.raises(pa.ArrowKeyError) as made_up:
            client.do_get(forged, bob).read_all()
        assert NO_RESULT in str(made_up.value)

        # Bob's CancelFlightInfo of alice's FlightInfo: NOT_CANCELLABLE (3), and the result stays.
        cancelled = act(client, bob, "CancelFlightInfo", field(1, info.serialize()))
        assert [parse(b) for b in cancelled] == [[(1, 3)]]

        table = client.do_get(ticket, alice).read_all()
        assert table.column("value").to_pylist() == list(range(5000))
        # A result is fetched once.
        with pytest.raises(pa.ArrowKeyError) as again:
            client.do_get(ticket, alice).read_all()
        assert NO_RESULT in str(again.value)


def test_another_user_cannot_use_or_close_a_prepared_statement(sqe, jwt):
    alice, bob = as_user(jwt["alice"]), as_user(jwt["bob"])
    sql = b"SELECT current_user AS who, 42 AS answer"
    with flight_client(sqe) as client:
        request = pack("ActionCreatePreparedStatementRequest", field(1, sql))
        (created,) = act(client, alice, "CreatePreparedStatement", request)
        handle = dict(parse(unpack(created, "ActionCreatePreparedStatementResult")))[1]
        assert re.fullmatch(rb"[0-9a-f]{64}", handle), handle

        with pytest.raises(pa.ArrowKeyError) as refused:
            client.get_flight_info(prepared_query(handle), bob)
        assert NO_PREPARED in str(refused.value)
        # Bob's close answers like any close, and closes nothing.
        close = pack("ActionClosePreparedStatementRequest", field(1, handle))
        assert act(client, bob, "ClosePreparedStatement", close) == []

        assert fetch(client, alice, prepared_query(handle)).to_pylist() == [{"who": "alice", "answer": 42}]
        assert act(client, alice, "ClosePreparedStatement", close) == []
        with pytest.raises(pa.ArrowKeyError) as closed:
            client.get_flight_info(prepared_query(handle), alice)
        assert NO_PREPARED in str(closed.value)


def test_another_user_cannot_take_over_a_flight_session(sqe, jwt):
    schema = f"iso_{secrets.token_hex(4)}"
    trino_run(sqe, "alice", jwt["alice"], f"CREATE SCHEMA {schema}")
    trino_run(sqe, "alice", jwt["alice"], f"CREATE TABLE {schema}.marker (v varchar)")
    trino_run(sqe, "alice", jwt["alice"], f"INSERT INTO {schema}.marker VALUES ('alice only')")
    cookies = SessionCookies()
    with flight_client(sqe, cookies) as client:
        # SetSessionOptions answers no errors and hands out a session cookie.
        assert act(client, as_user(jwt["alice"]), "SetSessionOptions", set_options(schema=schema)) == [b""]
        (cookie,) = cookies.handed_out
        assert re.fullmatch(r"[0-9a-f]{64}", cookie), cookie
        alice = as_user(jwt["alice"], cookie)
        assert get_options(client, alice) == {"catalog": "iceberg", "schema": schema}
        assert fetch(client, alice, statement("SELECT v FROM marker")).to_pylist() == [{"v": "alice only"}]

        # Bob presenting alice's cookie is in a fresh session with the defaults.
        bob = as_user(jwt["bob"], cookie)
        assert get_options(client, bob) == {"catalog": "iceberg", "schema": "default"}
        with pytest.raises(pa.ArrowKeyError) as elsewhere:
            client.get_flight_info(statement("SELECT v FROM marker"), bob)
        assert "table 'iceberg.default.marker' not found" in str(elsewhere.value)
        # His CloseSession says CLOSED (1), as for any session, and closes nothing.
        assert [parse(b) for b in act(client, bob, "CloseSession")] == [[(1, 1)]]
        # His SetSessionOptions through the cookie makes a session of his own, with its own cookie.
        assert act(client, bob, "SetSessionOptions", set_options(schema="default")) == [b""]
        assert len(cookies.handed_out) == 2 and cookies.handed_out[1] != cookie

        assert get_options(client, alice) == {"catalog": "iceberg", "schema": schema}
        assert fetch(client, alice, statement("SELECT v FROM marker")).to_pylist() == [{"v": "alice only"}]


# --- 3. system.runtime.queries --------------------------------------------------------------------

REGISTRY = (
    'SELECT query_id, state, "user", query, rows, error_message, source, "end" IS NOT NULL AS ended '
    "FROM system.runtime.queries WHERE {where} ORDER BY query_id"
)


def test_the_registry_shows_other_users_queries_without_their_text(sqe, jwt):
    tag = secrets.token_hex(6)
    alice_ok = f"SELECT 'alice {tag}' AS t"
    alice_bad = f"SELECT * FROM missing_{tag}"
    bob_ok = f"SELECT 'bob {tag}' AS t"
    missing = f"table 'iceberg.default.missing_{tag}' not found"
    assert trino_run(sqe, "alice", jwt["alice"], alice_ok, source="alice-app") == [[f"alice {tag}"]]
    assert trino_refusal(sqe, "alice", jwt["alice"], alice_bad, source="alice-app") == (
        "NOT_FOUND",
        "USER_ERROR",
        missing,
    )
    assert trino_run(sqe, "bob", jwt["bob"], bob_ok, source="bob-app") == [[f"bob {tag}"]]

    def registry(user, where):
        return trino_run(sqe, user, jwt[user], REGISTRY.format(where=where))

    own = registry("alice", f"query IN ({quote(alice_ok)}, {quote(alice_bad)})")
    in_full = [
        ["FINISHED", "alice", alice_ok, 1, None, "alice-app", True],
        ["FAILED", "alice", alice_bad, 0, missing, "alice-app", True],
    ]
    assert [r[1:] for r in own] == in_full
    ids = [r[0] for r in own]
    alices = ", ".join(quote(i) for i in ids)

    # Bob sees that alice's queries exist (state, rows, times) and nothing else; his own in full.
    seen_by_bob = registry("bob", f"query_id IN ({alices}) OR query = {quote(bob_ok)}")
    assert [r[1:] for r in seen_by_bob] == [
        ["FINISHED", None, None, 1, None, None, True],
        ["FAILED", None, None, 0, None, None, True],
        ["FINISHED", "bob", bob_ok, 1, None, "bob-app", True],
    ]
    assert [r[0] for r in seen_by_bob[:2]] == ids
    # Searching alice's text or her name finds nothing. (The pattern is split so that this
    # statement's own text does not hold it.)
    hunt = f"SELECT count(*) FROM system.runtime.queries WHERE query LIKE ('%alice ' || '{tag}%') OR \"user\" = 'alice'"
    assert trino_run(sqe, "bob", jwt["bob"], hunt) == [[0]]
    # Over Flight SQL the same.
    over_flight = adbc_fetch(sqe, jwt["bob"], REGISTRY.format(where=f"query_id IN ({alices})"))
    assert [r[1:] for r in over_flight] == [
        ("FINISHED", None, None, 1, None, None, True),
        ("FAILED", None, None, 0, None, None, True),
    ]

    # Admins read everything: ada by her token's role, robot by its static role, either protocol.
    for admin in ("ada", "robot"):
        assert registry(admin, f"query_id IN ({alices})") == own, admin
    assert [list(r) for r in adbc_fetch(sqe, jwt["ada"], REGISTRY.format(where=f"query_id IN ({alices})"))] == own


# --- 4. Files -------------------------------------------------------------------------------------


def test_a_server_reads_and_writes_no_local_file_by_default(sqe, jwt, tmp_path):
    alice = jwt["alice"]
    table = f"owned_{secrets.token_hex(4)}"
    trino_run(sqe, "alice", alice, f"CREATE TABLE {table} (a bigint)")
    trino_run(sqe, "alice", alice, f"INSERT INTO {table} VALUES (1), (2), (3)")
    warehouse = sqe.root / "warehouse"
    data_files = sorted((warehouse / "default" / table / "data").rglob("*.parquet"))
    assert data_files
    data_file = data_files[0]
    target = tmp_path / "x.parquet"
    stolen = warehouse / "default" / "stolen.parquet"
    every_table = f"{warehouse}/default/*/data/*.parquet"
    cases = [
        ("SELECT * FROM read_csv('/etc/passwd')", LOCAL.format(verb="reading", path="/etc/passwd")),
        ("SELECT * FROM '/etc/passwd'", LOCAL.format(verb="reading", path="/etc/passwd")),
        (f"SELECT * FROM read_parquet('{data_file}')", WAREHOUSE.format(verb="reading", path=data_file)),
        (
            f"SELECT * FROM read_parquet('file://{data_file}')",
            WAREHOUSE.format(verb="reading", path=f"file://{data_file}"),
        ),
        (f"SELECT * FROM read_parquet('{every_table}')", WAREHOUSE.format(verb="reading", path=every_table)),
        (
            f"SELECT * FROM read_csv('{warehouse}/catalog.db')",
            WAREHOUSE.format(verb="reading", path=f"{warehouse}/catalog.db"),
        ),
        (f"COPY (SELECT 1) TO '{target}'", LOCAL.format(verb="writing", path=target)),
        (f"COPY (SELECT 1) TO '{stolen}'", WAREHOUSE.format(verb="writing", path=stolen)),
    ]
    for sql, message in cases:
        assert trino_refusal(sqe, "alice", alice, sql) == ("PERMISSION_DENIED", "USER_ERROR", message), sql
    assert not target.exists()
    assert not stolen.exists()
    # Over Flight SQL: PERMISSION_DENIED, with the same words.
    with flight_client(sqe) as client:
        with pytest.raises(flight.FlightUnauthorizedError) as refused:
            fetch(client, as_user(alice), statement("SELECT * FROM read_csv('/etc/passwd')"))
    assert LOCAL.format(verb="reading", path="/etc/passwd") in str(refused.value)
    # The table itself reads as ever.
    assert trino_run(sqe, "alice", alice, f"SELECT a FROM {table} ORDER BY a") == [[1], [2], [3]]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A directory the files server allows: a CSV file, and a link out of it to /etc."""
    d = tmp_path_factory.mktemp("shared")
    (d / "people.csv").write_text("id,name\n1,one\n2,two\n")
    (d / "etc").symlink_to("/etc")
    return d


@pytest.fixture(scope="module")
def files_server(tmp_path_factory, idp, shared):
    s = signed_in_server(
        tmp_path_factory.mktemp("sqe-files"), idp, f'\n[files]\nallowed_local_prefixes = ["{shared}"]\n'
    )
    try:
        yield s
    finally:
        s.stop()


def test_an_allowed_directory_opens_only_itself(files_server, shared, jwt):
    alice = jwt["alice"]
    rows = trino_run(files_server, "alice", alice, f"SELECT id, name FROM read_csv('{shared}/people.csv') ORDER BY id")
    assert rows == [[1, "one"], [2, "two"]]
    # Writing there is allowed too, and reads back.
    out = shared / "out.parquet"
    assert trino_run(files_server, "alice", alice, f"COPY (SELECT 7 AS a) TO '{out}'") == [[1]]
    assert trino_run(files_server, "alice", alice, f"SELECT a FROM read_parquet('{out}')") == [[7]]
    # Nothing outside it: not directly, not by climbing out with .., not through a link.
    for path in ["/etc/passwd", f"{shared}/../../../../../../../etc/passwd", f"{shared}/etc/passwd"]:
        assert trino_refusal(files_server, "alice", alice, f"SELECT * FROM read_csv('{path}')") == (
            "PERMISSION_DENIED",
            "USER_ERROR",
            LOCAL.format(verb="reading", path=path),
        ), path
    warehouse_file = files_server.root / "warehouse" / "catalog.db"
    assert trino_refusal(files_server, "alice", alice, f"SELECT * FROM read_csv('{warehouse_file}')") == (
        "PERMISSION_DENIED",
        "USER_ERROR",
        WAREHOUSE.format(verb="reading", path=warehouse_file),
    )


# --- 5. Internal errors ---------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOG_LINE_START = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def logged_events(server, error_id, timeout=10):
    """The log events (a line starting with a timestamp, with any lines that continue it) that name
    `error_id`; waits for the log reader up to `timeout` seconds."""
    named = re.compile(rf'error_id="?{error_id}"?')
    deadline = time.monotonic() + timeout
    while True:
        events = []
        for line in ANSI.sub("", server.log()).splitlines():
            if LOG_LINE_START.match(line) or not events:
                events.append(line)
            else:
                events[-1] += "\n" + line
        found = [e for e in events if named.search(e)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_a_broken_data_file_is_an_internal_error_whose_details_are_in_the_log(sqe, jwt):
    alice = jwt["alice"]
    table = f"broken_{secrets.token_hex(4)}"
    trino_run(sqe, "alice", alice, f"CREATE TABLE {table} (a bigint)")
    trino_run(sqe, "alice", alice, f"INSERT INTO {table} VALUES " + ", ".join(f"({i})" for i in range(1000)))
    files = sorted((sqe.root / "warehouse" / "default" / table / "data").rglob("*.parquet"))
    assert files
    for f in files:
        os.truncate(f, f.stat().st_size // 2)

    name, kind, message = trino_refusal(sqe, "alice", alice, f"SELECT sum(a) FROM {table}")
    assert (name, kind) == ("GENERIC_INTERNAL_ERROR", "INTERNAL_ERROR")
    over_trino = INTERNAL.fullmatch(message)
    assert over_trino, message
    with flight_client(sqe) as client:
        with pytest.raises(flight.FlightInternalError) as broken:
            fetch(client, as_user(alice), statement(f"SELECT sum(a) FROM {table}"))
    over_flight = INTERNAL.search(str(broken.value))
    assert over_flight, str(broken.value)
    assert over_flight.group(1) != over_trino.group(1)

    # Each id is logged once, at ERROR, with what failed: the Parquet file.
    for error_id in (over_trino.group(1), over_flight.group(1)):
        events = logged_events(sqe, error_id)
        assert len(events) == 1, (error_id, events)
        assert " ERROR " in events[0] and "parquet" in events[0].lower(), events[0]
    assert trino_run(sqe, "alice", alice, "SELECT 1") == [[1]]


# --- 7. Bounded inputs, garbage -------------------------------------------------------------------


def test_oversized_inputs_are_refused_and_the_server_goes_on(sqe, jwt):
    alice = jwt["alice"]
    # A body larger than the 4 MiB the statement route reads: 413 before it is read whole.
    r = requests.post(
        f"{base_url(sqe)}/v1/statement", data=b"x" * (5 << 20), headers=headers_for("alice", alice), timeout=60
    )
    assert r.status_code == 413
    # Headers are bounded by the HTTP server: one of 1 MiB, or 200 of them, get 431.
    huge = headers_for("alice", alice, **{"X-Trino-Client-Info": "x" * (1 << 20)})
    assert requests.post(f"{base_url(sqe)}/v1/statement", data=b"SELECT 1", headers=huge, timeout=60).status_code == 431
    many_headers = headers_for("alice", alice, **{f"X-Extra-{i}": "x" for i in range(200)})
    assert (
        requests.post(f"{base_url(sqe)}/v1/statement", data=b"SELECT 1", headers=many_headers, timeout=60).status_code
        == 431
    )

    long_sql = "SELECT '" + "x" * (2_000_000 - 9) + "'"
    assert len(long_sql) == 2_000_000
    assert trino_refusal(sqe, "alice", alice, long_sql) == (
        "GENERIC_USER_ERROR",
        "USER_ERROR",
        "statement is 2000000 bytes long, more than the 1000000 bytes SQE accepts",
    )

    with flight_client(sqe) as client:
        # 10 MB is within gRPC's 16 MiB message limit: the engine's own length limit refuses it.
        ten_mb = "SELECT '" + "x" * (10_000_000 - 9) + "'"
        with pytest.raises(pa.ArrowInvalid) as too_long:
            client.get_flight_info(statement(ten_mb), as_user(alice))
        assert "statement is 10000000 bytes long, more than the 1000000 bytes SQE accepts" in str(too_long.value)
        # 20 MB is past the message limit: refused while decoding (tonic answers OUT_OF_RANGE).
        twenty_mb = "SELECT '" + "x" * 20_000_000 + "'"
        with pytest.raises(pa.ArrowInvalid) as too_big:
            client.get_flight_info(statement(twenty_mb), as_user(alice))
        assert "decoded message length too large" in str(too_big.value)
        assert "the limit is: 16777216 bytes" in str(too_big.value)

    # 100,000 parameters: the client's EXECUTE IMMEDIATE … USING, then its legacy PREPARE + EXECUTE
    # (the statement in X-Trino-Prepared-Statement, the values in EXECUTE … USING).
    many = [1] * 100_000
    refused = ("GENERIC_USER_ERROR", "USER_ERROR", TOO_MANY.format(n=100_000))
    assert trino_refusal(sqe, "alice", alice, "SELECT ?", many) == refused
    assert trino_refusal(sqe, "alice", alice, "SELECT ?", many, legacy_prepared_statements=True) == refused

    assert trino_run(sqe, "alice", alice, "SELECT 1") == [[1]]
    with flight_client(sqe) as client:
        assert fetch(client, as_user(alice), statement("SELECT 1 AS one")).to_pylist() == [{"one": 1}]


FLIGHT_SQL_ACTIONS = {
    "CreatePreparedStatement": "ActionCreatePreparedStatementRequest",
    "ClosePreparedStatement": "ActionClosePreparedStatementRequest",
    "CreatePreparedSubstraitPlan": "ActionCreatePreparedSubstraitPlanRequest",
    "BeginTransaction": "ActionBeginTransactionRequest",
    "EndTransaction": "ActionEndTransactionRequest",
    "BeginSavepoint": "ActionBeginSavepointRequest",
    "EndSavepoint": "ActionEndSavepointRequest",
    "CancelQuery": "ActionCancelQueryRequest",
}
FLIGHT_ACTIONS = ["SetSessionOptions", "GetSessionOptions", "CloseSession", "CancelFlightInfo"]
COMMANDS = [
    "CommandStatementQuery",
    "CommandPreparedStatementQuery",
    "CommandStatementUpdate",
    "CommandPreparedStatementUpdate",
    "CommandStatementIngest",
    "CommandGetCatalogs",
    "CommandGetDbSchemas",
    "CommandGetTables",
    "CommandGetTableTypes",
    "CommandGetSqlInfo",
    "CommandGetPrimaryKeys",
    "CommandGetXdbcTypeInfo",
    "TicketStatementQuery",
]
TRINO_HEADERS = [
    "X-Trino-User",
    "X-Trino-Catalog",
    "X-Trino-Schema",
    "X-Trino-Session",
    "X-Trino-Time-Zone",
    "X-Trino-Prepared-Statement",
    "X-Trino-Client-Tags",
    "X-Trino-Source",
    "Cookie",
]
# Answers that mean the server did not answer at all.
TRANSPORT_FAILURES = (flight.FlightUnavailableError, flight.FlightTimedOutError)
PRINTABLE = string.ascii_letters + string.digits + string.punctuation
SEGMENT = string.ascii_letters + string.digits + "-_"


class Garbage:
    """The fuzz loop's calls: each either must be refused, or may answer; every one must come back
    from the server (an error from the client, or a status below 500)."""

    def __init__(self, server, secret, client, rng):
        self.rng = rng
        self.client = client
        self.options = as_user(secret, timeout=30)
        self.secret = secret
        self.headers = headers_for("alice", secret)
        self.base = base_url(server)

    def data(self, most=256):
        return self.rng.randbytes(self.rng.choice([0, 1, 2, 8, 64, most]))

    def text(self, most=64):
        return "".join(self.rng.choice(PRINTABLE) for _ in range(self.rng.randint(1, most)))

    def segment(self):
        return "".join(self.rng.choice(SEGMENT) for _ in range(self.rng.choice([1, 5, 27, 64, 300])))

    def json_value(self, depth=0):
        r = self.rng.random()
        if depth > 3 or r < 0.3:
            return self.rng.choice([None, True, 12, -3.5, self.text(16)])
        if r < 0.65:
            return [self.json_value(depth + 1) for _ in range(self.rng.randint(0, 4))]
        return {self.text(8): self.json_value(depth + 1) for _ in range(self.rng.randint(0, 4))}

    # Flight: calls that must be refused.

    def refused(self, what, call):
        try:
            call()
        except TRANSPORT_FAILURES as e:
            pytest.fail(f"{what}: no answer from the server: {e}")
        except pa.ArrowException:
            return
        pytest.fail(f"{what}: garbage was accepted")

    def answered(self, what, call):
        try:
            return call()
        except TRANSPORT_FAILURES as e:
            pytest.fail(f"{what}: no answer from the server: {e}")
        except pa.ArrowException:
            return None

    def raw_ticket(self):
        ticket = flight.Ticket(self.data())
        self.refused("do_get(random ticket)", lambda: self.client.do_get(ticket, self.options).read_all())

    def raw_command(self):
        descriptor = flight.FlightDescriptor.for_command(self.data())
        self.refused("get_flight_info(random command)", lambda: self.client.get_flight_info(descriptor, self.options))

    def path_descriptor(self):
        descriptor = flight.FlightDescriptor.for_path(self.segment(), self.segment())
        self.refused("get_flight_info(path)", lambda: self.client.get_flight_info(descriptor, self.options))

    def raw_action_body(self):
        kind = self.rng.choice(sorted(FLIGHT_SQL_ACTIONS))
        body = self.data()
        self.refused(f"{kind}(random body)", lambda: act(self.client, self.options, kind, body))

    def unknown_action(self):
        kind = "x-" + self.segment()
        with pytest.raises(pa.ArrowInvalid) as refused:
            act(self.client, self.options, kind, self.data())
        assert f"unknown action '{kind}'" in str(refused.value)

    def random_cookie(self):
        options = flight.FlightCallOptions(
            headers=[(b"authorization", f"Bearer {self.secret}".encode()), (b"cookie", self.text().encode())],
            timeout=30,
        )
        assert get_options(self.client, options) == {"catalog": "iceberg", "schema": "default"}

    # Flight: well-formed envelopes with random contents, which may be answered.

    def typed_command(self):
        command = pack(self.rng.choice(COMMANDS), self.data())
        descriptor = flight.FlightDescriptor.for_command(command)
        info = self.answered("get_flight_info(typed)", lambda: self.client.get_flight_info(descriptor, self.options))
        if info is not None:
            for endpoint in info.endpoints:
                ticket = endpoint.ticket
                self.answered("do_get(its ticket)", lambda: self.client.do_get(ticket, self.options).read_all())

    def typed_ticket(self):
        ticket = flight.Ticket(pack(self.rng.choice(COMMANDS), self.data()))
        self.answered("do_get(typed)", lambda: self.client.do_get(ticket, self.options).read_all())

    def typed_action_body(self):
        kind, request = self.rng.choice(sorted(FLIGHT_SQL_ACTIONS.items()))
        body = pack(request, self.data())
        self.answered(f"{kind}(typed)", lambda: act(self.client, self.options, kind, body))

    def flight_action(self):
        kind = self.rng.choice(FLIGHT_ACTIONS)
        body = self.data()
        self.answered(f"{kind}(random body)", lambda: act(self.client, self.options, kind, body))

    # Trino HTTP.

    def outcome(self, response):
        """The end of a statement the server took: its rows, or its error (which must be the
        user's)."""
        assert response.status_code < 500, (response.status_code, response.text)
        if response.status_code != 200:
            return None
        rows, last = finish(response.json(), self.headers)
        if "error" in last:
            assert last["error"]["errorType"] == "USER_ERROR", last["error"]
            return "error"
        return rows

    def post(self, body, headers=None):
        return requests.post(
            f"{self.base}/v1/statement", data=body, headers=headers or self.headers, timeout=30
        )

    def json_body(self):
        body = json.dumps(self.rng.choice([[self.json_value()], {"q": self.json_value()}]))
        assert self.outcome(self.post(body.encode())) == "error", body

    def binary_body(self):
        body = self.data(4096)
        response = self.post(body)
        assert response.status_code in (200, 400), (response.status_code, response.text)
        if response.status_code == 200:
            assert self.outcome(response) == "error", body

    def junk_header(self):
        headers = {**self.headers, self.rng.choice(TRINO_HEADERS): self.text()}
        assert self.outcome(self.post(b"SELECT 1", headers)) in (None, "error", [[1]]), headers

    def page_uri(self):
        token = self.rng.choice([str(self.rng.randint(0, 10**6)), self.segment()])
        qid = self.segment()
        uri = f"{self.base}/v1/statement/{self.rng.choice(['queued', 'executing'])}/{qid}/{self.segment()}/{token}"
        numeric = token.isdigit()
        got = attempt("GET", uri, self.headers)
        assert got[0] == (404 if numeric else 400), (uri, got)
        if numeric:
            assert got[1] == f"query {qid} not found"
        assert attempt("DELETE", uri, self.headers)[0] == (204 if numeric else 400), uri

    def kill(self):
        qid = self.segment()
        got = attempt("DELETE", f"{self.base}/v1/query/{qid}", self.headers)
        assert got[:2] == (404, f"query {qid} not found")


def test_garbage_on_every_route_fails_cleanly_and_the_server_goes_on(sqe, jwt):
    alice = jwt["alice"]
    with flight_client(sqe) as client:
        garbage = Garbage(sqe, alice, client, random.Random(20261105))
        calls = [
            garbage.raw_ticket,
            garbage.raw_command,
            garbage.path_descriptor,
            garbage.raw_action_body,
            garbage.unknown_action,
            garbage.random_cookie,
            garbage.typed_command,
            garbage.typed_ticket,
            garbage.typed_action_body,
            garbage.flight_action,
            garbage.json_body,
            garbage.binary_body,
            garbage.junk_header,
            garbage.page_uri,
            garbage.kill,
        ]
        for i in range(200):
            calls[i % len(calls)]()
        assert fetch(client, as_user(alice), statement("SELECT 1 AS one")).to_pylist() == [{"one": 1}]
    assert trino_run(sqe, "alice", alice, "SELECT 1") == [[1]]
    assert sqe.process.poll() is None
    assert "panicked" not in sqe.log()


# --- 8. Deep statements ---------------------------------------------------------------------------


def deep_sum(terms):
    return "SELECT " + " + ".join(["1"] * terms) + " AS total"


def wide_union(branches):
    return " UNION ALL ".join(["SELECT 1 AS n"] + [f"SELECT {i}" for i in range(2, branches + 1)])


def test_deep_statements_over_trino(sqe, jwt):
    alice = jwt["alice"]
    for terms in (2_000, 20_000):
        assert trino_refusal(sqe, "alice", alice, deep_sum(terms)) == ("GENERIC_USER_ERROR", "USER_ERROR", DEPTH)
    assert trino_run(sqe, "alice", alice, deep_sum(900)) == [[900]]
    rows = trino_run(sqe, "alice", alice, wide_union(1_001))
    assert sorted(r[0] for r in rows) == list(range(1, 1_002))
    for branches in (1_002, 5_000):
        assert trino_refusal(sqe, "alice", alice, wide_union(branches)) == (
            "GENERIC_USER_ERROR",
            "USER_ERROR",
            wide(branches - 1),
        )
    assert trino_run(sqe, "alice", alice, "SELECT 1") == [[1]]


def test_deep_statements_over_flight_sql(sqe, jwt):
    alice = jwt["alice"]
    for terms in (2_000, 20_000):
        with pytest.raises(AdbcError) as refused:
            adbc_fetch(sqe, alice, deep_sum(terms))
        assert refused.value.status_code == AdbcStatusCode.INVALID_ARGUMENT
        assert f"INVALID_ARGUMENT: [FlightSQL] {DEPTH} (" in str(refused.value)
    assert adbc_fetch(sqe, alice, deep_sum(900)) == [(900,)]
    rows = adbc_fetch(sqe, alice, wide_union(1_001))
    assert sorted(r[0] for r in rows) == list(range(1, 1_002))
    for branches in (1_002, 5_000):
        with pytest.raises(AdbcError) as refused:
            adbc_fetch(sqe, alice, wide_union(branches))
        assert f"INVALID_ARGUMENT: [FlightSQL] {wide(branches - 1)} (" in str(refused.value)
    assert adbc_fetch(sqe, alice, "SELECT 1 AS one") == [(1,)]


def embedded(tmp_path, sql):
    """sqe-cli, embedded, on a warehouse of its own; the statement goes in a file (a 1,000-branch
    union is long for one argument)."""
    if not os.path.isfile(SQE_CLI):
        pytest.fail(f"sqe-cli binary not found at {SQE_CLI} (build it, or set SQE_CLI)")
    script = tmp_path / f"statement-{secrets.token_hex(4)}.sql"
    script.write_text(sql)
    warehouse = tmp_path / "warehouse"
    result = subprocess.run(
        [SQE_CLI, "--embedded", "--warehouse", str(warehouse), "-f", "csv", "--file", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, result.stdout, result.stderr


def test_deep_statements_embedded(tmp_path):
    assert embedded(tmp_path, deep_sum(20_000)) == (1, "", f"Error: {DEPTH}\n")
    assert embedded(tmp_path, deep_sum(900)) == (0, "total\n900\n", "")
    code, out, err = embedded(tmp_path, wide_union(1_001))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "n"
    assert sorted(int(v) for v in lines[1:]) == list(range(1, 1_002))
    for branches in (1_002, 5_000):
        assert embedded(tmp_path, wide_union(branches)) == (1, "", f"Error: {wide(branches - 1)}\n")


# --- 9. What one user can make the server keep ----------------------------------------------------

# The defaults of [server] (sqe.toml.example) and the refusals naming them
# (protocols/flight-sql/src/lib.rs, protocols/trino/src/lib.rs, sessions/src/handles.rs).
MAX_PREPARED = 256
MAX_PREPARED_BYTES = 64 << 20
MAX_FLIGHT_SESSIONS = 64
MAX_TRINO_QUERIES = 64
CLOSE_PREPARED = (
    "close one (ClosePreparedStatement), or wait until one has been unused for [server] "
    "prepared_statement_idle_secs"
)
TOO_MANY_PREPARED = (
    "bob holds 256 Flight SQL prepared statements, the most one user may ([server] "
    f"max_prepared_statements_per_user): {CLOSE_PREPARED}"
)
TOO_MANY_PREPARED_BYTES = (
    "bob's Flight SQL prepared statements hold {held} bytes, and {adding} more would take them past the "
    "67108864 bytes one user's may hold ([server] max_prepared_statement_bytes_per_user): " + CLOSE_PREPARED
)
TOO_MANY_SESSIONS = (
    "dave holds 64 Flight SQL sessions, the most one user may ([server] max_flight_sessions_per_user): "
    "close one (CloseSession), or wait until one has been unused for an hour"
)
TOO_MANY_QUERIES = (
    "bob holds 64 Trino queries whose last page is unread, the most one user may ([server] "
    "max_trino_queries_per_user): read one to its end or cancel it, or wait until one has been unpolled "
    "for [server] client_timeout_secs"
)
# The resident memory one user's loop of the largest prepared statements may add to a fresh server:
# the 64 MiB his statements may hold, and what the allocator keeps of the messages that carried
# them (README states the figure measured: 84 to 112 MiB in a debug build, as the allocator varies).
# Five rounds that kept their statements would take 320 MiB.
RSS_BOUND_MIB = 160


def too_long(n):
    return f"statement is {n} bytes long, more than the 1000000 bytes SQE accepts"


def select_one_of(n):
    """`SELECT 1` padded with a comment to exactly `n` bytes."""
    head = "SELECT 1 AS one --"
    return head + "x" * (n - len(head))


def create_prepared(client, options, sql):
    """CreatePreparedStatement's handle."""
    request = pack("ActionCreatePreparedStatementRequest", field(1, sql.encode()))
    (created,) = act(client, options, "CreatePreparedStatement", request)
    return dict(parse(unpack(created, "ActionCreatePreparedStatementResult")))[1]


def close_prepared(client, options, handle):
    assert act(client, options, "ClosePreparedStatement", pack("ActionClosePreparedStatementRequest", field(1, handle))) == []


def adbc_prepared(server, secret, sql):
    """`sql` prepared and run through ADBC, as a driver does with parameters: its rows."""
    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {secret}"}
    with flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=kwargs) as conn:
        with conn.cursor() as cur:
            cur.adbc_prepare(sql)
            cur.execute(sql)
            return cur.fetchall()


def test_a_statement_too_long_to_run_is_refused_when_it_is_prepared(sqe, jwt):
    huge = select_one_of(15_000_000)
    # ADBC's prepare, and the raw action: refused at once, with the engine's words.
    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {jwt['bob']}"}
    with flight_sql.connect(f"grpc://127.0.0.1:{sqe.flight_port}", db_kwargs=kwargs) as conn:
        with conn.cursor() as cur:
            with pytest.raises(AdbcError) as refused:
                cur.adbc_prepare(huge)
    assert refused.value.status_code == AdbcStatusCode.INVALID_ARGUMENT
    assert f"INVALID_ARGUMENT: [FlightSQL] {too_long(15_000_000)} (" in str(refused.value)
    with flight_client(sqe) as client:
        with pytest.raises(pa.ArrowInvalid) as raw:
            create_prepared(client, as_user(jwt["bob"]), huge)
        assert too_long(15_000_000) in str(raw.value)
        # The longest statement SQE runs is prepared, and runs.
        handle = create_prepared(client, as_user(jwt["bob"]), select_one_of(1_000_000))
        assert fetch(client, as_user(jwt["bob"]), prepared_query(handle)).to_pylist() == [{"one": 1}]
        close_prepared(client, as_user(jwt["bob"]), handle)
    # Trino's prepared statements live in the client's headers, but a PREPARE's answer carries the
    # statement until it is read: refused there, not by an oversized header later.
    long_sql = "SELECT ? AS p --" + "x" * 1_500_000
    assert trino_refusal(sqe, "bob", jwt["bob"], long_sql, [1], legacy_prepared_statements=True) == (
        "GENERIC_USER_ERROR",
        "USER_ERROR",
        too_long(len(long_sql)),
    )
    # The server goes on, for both of them.
    assert adbc_prepared(sqe, jwt["alice"], "SELECT 1 AS one") == [(1,)]
    assert adbc_fetch(sqe, jwt["bob"], "SELECT 1 AS one") == [(1,)]
    assert trino_run(sqe, "bob", jwt["bob"], "SELECT ? AS p", [7], legacy_prepared_statements=True) == [[7]]


def test_bobs_prepared_statements_are_capped_and_alice_is_not_held(sqe, jwt):
    bob = as_user(jwt["bob"])
    with flight_client(sqe) as client:
        # 5,000 prepares, as fast as he can: the first 256 are kept, every one after is refused.
        kept, refusals = [], []
        started = time.monotonic()
        for i in range(5_000):
            try:
                kept.append(create_prepared(client, bob, f"SELECT {i} AS n"))
            except pa.ArrowException as e:
                refusals.append(str(e))
        took = time.monotonic() - started
        assert len(kept) == MAX_PREPARED
        assert len(refusals) == 5_000 - MAX_PREPARED
        assert all(TOO_MANY_PREPARED in r for r in refusals), refusals[0]
        # What he holds still runs; alice, signed in beside him, prepares and runs.
        assert fetch(client, bob, prepared_query(kept[255])).to_pylist() == [{"n": 255}]
        assert adbc_prepared(sqe, jwt["alice"], "SELECT 1 AS one") == [(1,)]
        assert create_prepared(client, as_user(jwt["alice"]), "SELECT 2") != b""
        # Closing one makes room for one.
        close_prepared(client, bob, kept.pop(0))
        kept.append(create_prepared(client, bob, "SELECT 5000 AS n"))
        with pytest.raises(pa.ArrowException) as again:
            create_prepared(client, bob, "SELECT 5001 AS n")
        assert TOO_MANY_PREPARED in str(again.value)
        for handle in kept:
            close_prepared(client, bob, handle)
        assert adbc_prepared(sqe, jwt["bob"], "SELECT 3 AS n") == [(3,)]
    print(f"5,000 prepares in {took:.1f} s")


def test_the_memory_of_prepared_statements_is_bounded(tmp_path, idp, jwt):
    """On a server of its own, so that the figure is a fresh server's (README states it)."""
    server = signed_in_server(tmp_path, idp)
    try:
        bob = as_user(jwt["bob"])
        largest = select_one_of(1_000_000)
        most = MAX_PREPARED_BYTES // 1_000_000
        with flight_client(server) as client:
            assert adbc_fetch(server, jwt["alice"], "SELECT 1 AS one") == [(1,)]
            close_prepared(client, bob, create_prepared(client, bob, largest))
            with rss_growth(server.process.pid) as grown:
                # The largest statements SQE runs, as many as bob may hold, five times over.
                for _ in range(5):
                    handles = [create_prepared(client, bob, largest) for _ in range(most)]
                    with pytest.raises(pa.ArrowException) as full:
                        create_prepared(client, bob, largest)
                    assert TOO_MANY_PREPARED_BYTES.format(held=most * 1_000_000, adding=1_000_000) in str(
                        full.value
                    )
                    # They run (and a run keeps nothing more).
                    assert fetch(client, bob, prepared_query(handles[-1])).to_pylist() == [{"one": 1}]
                    for handle in handles:
                        close_prepared(client, bob, handle)
                # 15 MB statements, which once took 15 MB each for an hour: refused, kept nowhere.
                for _ in range(20):
                    with pytest.raises(pa.ArrowInvalid):
                        create_prepared(client, bob, select_one_of(15_000_000))
            assert create_prepared(client, as_user(jwt["alice"]), largest) != b""
        assert adbc_fetch(server, jwt["alice"], "SELECT 1 AS one") == [(1,)]
    finally:
        server.stop()
    print(f"the server grew by {grown[0] / 1024:.0f} MiB")
    assert grown[0] < RSS_BOUND_MIB * 1024, f"the server grew by {grown[0] // 1024} MiB"


def test_a_users_flight_sessions_are_capped(sqe, idp, jwt):
    # dave, whom no other test here signs in, so that he starts with no session.
    dave_token = token(idp.port, username="dave", password="dave-secret")
    dave = as_user(dave_token)
    cookies = SessionCookies()
    with flight_client(sqe, cookies) as client:
        # Each SetSessionOptions without a cookie opens a session of its own.
        for _ in range(MAX_FLIGHT_SESSIONS):
            assert act(client, dave, "SetSessionOptions", set_options(schema="default")) == [b""]
        assert len(set(cookies.handed_out)) == MAX_FLIGHT_SESSIONS
        with pytest.raises(pa.ArrowException) as refused:
            act(client, dave, "SetSessionOptions", set_options(schema="default"))
        assert TOO_MANY_SESSIONS in str(refused.value)
        # Alice opens hers; dave's own sessions still answer.
        assert act(client, as_user(jwt["alice"]), "SetSessionOptions", set_options(schema="default")) == [b""]
        assert get_options(client, as_user(dave_token, cookies.handed_out[0])) == {
            "catalog": "iceberg",
            "schema": "default",
        }
        for cookie in cookies.handed_out[:MAX_FLIGHT_SESSIONS]:
            assert [parse(b) for b in act(client, as_user(dave_token, cookie), "CloseSession")] == [[(1, 1)]]
        assert act(client, dave, "SetSessionOptions", set_options(schema="default")) == [b""]


def test_bobs_unread_trino_queries_are_capped(sqe, jwt):
    bob = headers_for("bob", jwt["bob"])
    # PREPAREs need no query slot: only the cap stops them. Each answer waits to be read.
    started = [post(sqe, f"PREPARE q{i} FROM SELECT {i}", bob) for i in range(MAX_TRINO_QUERIES)]
    refused = post(sqe, "PREPARE extra FROM SELECT 1", bob)
    assert "nextUri" not in refused
    assert (refused["error"]["errorName"], refused["error"]["errorType"], refused["error"]["message"]) == (
        "GENERIC_INSUFFICIENT_RESOURCES",
        "INSUFFICIENT_RESOURCES",
        TOO_MANY_QUERIES,
    )
    # A query past the cap never runs: the table it would have made is not there.
    table = f"iso_refused_{secrets.token_hex(4)}"
    refused = post(sqe, f"CREATE TABLE {table} (v int)", bob)
    assert refused["error"]["message"] == TOO_MANY_QUERIES
    assert trino_run(sqe, "alice", jwt["alice"], "SELECT 1") == [[1]]
    # Reading one to its end makes room for one.
    finish(started.pop(0), bob)
    rows, last = finish(post(sqe, f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{table}'", bob), bob)
    assert (rows, "error" in last) == ([[0]], False)
    for body in started:
        finish(body, bob)
    assert trino_run(sqe, "bob", jwt["bob"], "SELECT 2") == [[2]]
