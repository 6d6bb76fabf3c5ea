"""The Python `trino` client (DB-API) against sqe-server's Trino HTTP endpoint."""

import threading
import time
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
import trino
from trino.exceptions import TrinoUserError

from conftest import rss_growth


def connect(server, user="alice", **kwargs):
    return trino.dbapi.connect(
        host="127.0.0.1",
        port=server.http_port,
        user=user,
        catalog=kwargs.pop("catalog", "iceberg"),
        schema=kwargs.pop("schema", "default"),
        http_scheme="http",
        **kwargs,
    )


def run(server, sql, params=None, **kwargs):
    cur = connect(server, **kwargs).cursor()
    cur.execute(sql, params) if params is not None else cur.execute(sql)
    return cur.fetchall()


def test_select_literals_and_column_types(server):
    cur = connect(server).cursor()
    cur.execute("SELECT 1 AS a, 'x' AS b, CAST(2.5 AS double) AS c, true AS d")
    assert cur.fetchall() == [[1, "x", 2.5, True]]
    assert [(d[0], d[1]) for d in cur.description] == [
        ("a", "bigint"),
        ("b", "varchar"),
        ("c", "double"),
        ("d", "boolean"),
    ]


def test_json_columns_are_of_trinos_json_type(server):
    # The client learns the column is JSON and gets its text; a cast reads the JSON.
    cur = connect(server).cursor()
    cur.execute("""SELECT json_parse('{"a": [1, 2]}') AS j, CAST(json_extract('{"a": [1, 2]}', '$.a') AS ARRAY(INTEGER)) AS a, json_format(JSON '[]') AS t""")
    assert cur.fetchall() == [['{"a":[1,2]}', [1, 2], "[]"]]
    assert [(d[0], d[1]) for d in cur.description] == [("j", "json"), ("a", "array(integer)"), ("t", "varchar")]


def test_create_insert_select_with_trino_types(server):
    cur = connect(server).cursor()
    cur.execute("CREATE SCHEMA shop")
    assert cur.fetchall() == [[True]]
    cur.execute(
        "CREATE TABLE shop.orders (id bigint, customer varchar, amount decimal(10, 2), "
        "placed date, at timestamp, tags array(varchar))"
    )
    cur.fetchall()
    cur.execute(
        "INSERT INTO shop.orders VALUES "
        "(1, 'acme', 12.50, DATE '2026-11-02', TIMESTAMP '2026-11-02 09:15:00', ['a', 'b']), "
        "(2, 'globex', 7.00, DATE '2026-11-03', TIMESTAMP '2026-11-03 10:00:00.123456', [])"
    )
    assert cur.fetchall() == [[2]]
    assert cur.rowcount == 2
    rows = run(server, "SELECT * FROM shop.orders ORDER BY id")
    assert rows == [
        [1, "acme", Decimal("12.50"), date(2026, 11, 2), datetime(2026, 11, 2, 9, 15), ["a", "b"]],
        [2, "globex", Decimal("7.00"), date(2026, 11, 3), datetime(2026, 11, 3, 10, 0, 0, 123456), []],
    ]


def test_query_parameters(server):
    run(server, "CREATE TABLE params (id bigint, name varchar)")
    run(server, "INSERT INTO params VALUES (1, 'one'), (2, 'two'), (3, 'it''s')")
    assert run(server, "SELECT name FROM params WHERE id = ?", [2]) == [["two"]]
    assert run(server, "SELECT id FROM params WHERE name = ?", ["it's"]) == [[3]]
    assert run(server, "SELECT count(*) FROM params WHERE id > ? AND name <> ?", [1, "two"]) == [[1]]


def test_use_changes_the_clients_schema(server):
    conn = connect(server)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA IF NOT EXISTS other")
    cur.fetchall()
    cur.execute("CREATE TABLE other.only_here AS SELECT 42 AS answer")
    cur.fetchall()
    cur.execute("USE other")
    cur.fetchall()
    cur = conn.cursor()
    cur.execute("SELECT answer FROM only_here")
    assert cur.fetchall() == [[42]]


def test_errors_are_trino_errors_and_the_server_keeps_serving(server):
    with pytest.raises(TrinoUserError) as syntax:
        run(server, "SELEC 1")
    assert syntax.value.error_name == "SYNTAX_ERROR"
    assert syntax.value.message == "syntax error: Expected: an SQL statement, found: SELEC at Line: 1, Column: 1"
    with pytest.raises(TrinoUserError) as missing:
        run(server, "SELECT * FROM no_such_table")
    assert missing.value.error_name == "NOT_FOUND"
    assert missing.value.message == "table 'iceberg.default.no_such_table' not found"
    run(server, "CREATE TABLE typed (id bigint)")
    with pytest.raises(TrinoUserError) as typed:
        run(server, "INSERT INTO typed VALUES ('x')")
    assert typed.value.message == "column 'id' of 'iceberg.default.typed' is bigint but the value is varchar"
    assert run(server, "SELECT 1") == [[1]]


def test_large_results_page_through_next_uri(server):
    rows = run(server, "SELECT value FROM range(0, 20000) ORDER BY value")
    assert len(rows) == 20000
    assert rows[0] == [0] and rows[-1] == [19999]
    assert sum(r[0] for r in rows) == 19999 * 20000 // 2


SPOOLED_QUERY = (
    "SELECT value, concat('row ', CAST(value AS varchar), ' é') AS label, "
    "CAST(value AS decimal(12, 2)) / 4 AS quarter, "
    "CASE WHEN value % 7 = 0 THEN NULL ELSE date_add('day', value % 365, DATE '2020-01-01') END AS day "
    "FROM range(0, 300000) ORDER BY value"
)


def test_each_spooling_encoding_brings_the_rows_of_the_plain_protocol(server):
    # trino-python asks for json+zstd, json+lz4 and json by default; `encoding=None` asks for none,
    # and gets plain pages.
    plain = run(server, SPOOLED_QUERY, encoding=None)
    assert len(plain) == 300000
    assert plain[0] == [0, "row 0 é", Decimal("0.00"), None]
    assert plain[8] == [8, "row 8 é", Decimal("2.00"), date(2020, 1, 9)]
    assert plain[-2] == [299998, "row 299998 é", Decimal("74999.50"), date(2020, 1, 1) + timedelta(days=299998 % 365)]
    assert plain[-1] == [299999, "row 299999 é", Decimal("74999.75"), None]
    for encoding in ["json+zstd", "json+lz4", "json", ["json+zstd", "json+lz4", "json"]]:
        assert run(server, SPOOLED_QUERY, encoding=encoding) == plain, encoding


def test_spooled_pages_carry_inline_segments_in_the_encoding_asked_for(server):
    import base64
    import json

    import lz4.block
    import requests

    def pages(encoding):
        headers = {"X-Trino-User": "alice"}
        if encoding:
            headers["X-Trino-Query-Data-Encoding"] = encoding
        page = requests.post(
            f"http://127.0.0.1:{server.http_port}/v1/statement",
            data="SELECT value, 'v' || CAST(value AS varchar) FROM range(0, 50000) ORDER BY value",
            headers=headers,
        ).json()
        assert "data" not in page
        while "nextUri" in page:
            page = requests.get(page["nextUri"], headers=headers).json()
            assert "error" not in page, page
            if "data" in page:
                yield page["data"]

    rows = []
    for data in pages("arrow, json+lz4"):
        assert data["encoding"] == "json+lz4"
        for segment in data["segments"]:
            # Short enough to ride in the page.
            assert segment["type"] == "inline"
            raw = base64.b64decode(segment["data"])
            meta = segment["metadata"]
            assert meta["segmentSize"] == len(raw)
            assert meta["rowOffset"] == len(rows)
            text = lz4.block.decompress(raw, uncompressed_size=meta["uncompressedSize"])
            assert len(text) == meta["uncompressedSize"] > len(raw)
            page_rows = json.loads(text)
            assert meta["rowsCount"] == len(page_rows)
            rows.extend(page_rows)
    assert rows == [[i, f"v{i}"] for i in range(50000)]

    # Nothing SQE speaks, or nothing asked: plain pages.
    for encoding in ["arrow", None]:
        plain = [row for data in pages(encoding) for row in data]
        assert plain == rows


def test_cancel_a_long_query(server):
    cur = connect(server).cursor()
    outcome = {}

    def long_query():
        try:
            cur.execute("SELECT count(*) FROM range(0, 3000000000) a, range(0, 4) b")
            outcome["rows"] = cur.fetchall()
        except Exception as e:  # the cancelled query ends with an error
            outcome["error"] = e

    t = threading.Thread(target=long_query)
    t.start()
    time.sleep(1.5)
    cur.cancel()
    t.join(timeout=30)
    assert not t.is_alive(), "the cancelled query did not stop"
    # No count arrives: the query ends with Trino's cancellation error.
    assert "rows" not in outcome, outcome
    error = outcome["error"]
    assert isinstance(error, TrinoUserError), repr(error)
    assert (error.error_name, error.error_code, error.message) == ("USER_CANCELED", 3, "Query was canceled")
    assert run(server, "SELECT 2") == [[2]]


def test_concurrent_clients(server):
    results = {}

    def client(n):
        results[n] = [run(server, f"SELECT {n} * {i}", user=f"user{n}")[0][0] for i in range(5)]

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == {n: [n * i for i in range(5)] for n in range(8)}


def test_the_registry_shows_each_query_with_its_user(server):
    run(server, "SELECT 41 AS marker", user="registry-user", source="nightly-report")
    # Each user reads their own queries' text (tests/clients/test_isolation.py has the others').
    rows = run(
        server,
        "SELECT \"user\", state, source FROM system.runtime.queries WHERE query = 'SELECT 41 AS marker'",
        user="registry-user",
    )
    assert rows == [["registry-user", "FINISHED", "nightly-report"]]


def test_time_zones_reach_the_client_as_trino_sends_them(server):
    from zoneinfo import ZoneInfo

    # A zoned literal comes back as that wall-clock time in that zone.
    rows = run(server, "SELECT TIMESTAMP '2024-01-01 12:00:00.123 Europe/Berlin', TIMESTAMP '2024-01-01 12:00 +05:30'")
    berlin, offset = rows[0]
    assert berlin == datetime(2024, 1, 1, 12, 0, 0, 123000, tzinfo=ZoneInfo("Europe/Berlin"))
    assert offset.utcoffset().total_seconds() == 5.5 * 3600 and offset.hour == 12

    # The client's zone (X-Trino-Time-Zone) is the session's: timestamps without a zone are read in it.
    conn = connect(server, timezone="Asia/Tokyo")
    cur = conn.cursor()
    cur.execute(
        "SELECT current_timezone(), timezone(current_timestamp), "
        "TIMESTAMP '2024-01-01 12:00' AT TIME ZONE 'UTC'"
    )
    zone, now_zone, utc = cur.fetchall()[0]
    assert (zone, now_zone) == ("Asia/Tokyo", "Asia/Tokyo")
    assert utc == datetime(2024, 1, 1, 3, 0, tzinfo=ZoneInfo("UTC"))

    # SET TIME ZONE travels back to the client as Trino's session property, and stays for the
    # connection's next statements.
    cur.execute("SET TIME ZONE 'America/New_York'")
    cur.fetchall()
    cur.execute("SELECT current_timezone(), hour(TIMESTAMP '2024-07-01 12:00' AT TIME ZONE 'UTC')")
    assert cur.fetchall() == [["America/New_York", 16]]

    # A zone that does not exist is the query's error (sent as a raw header: the client would
    # refuse it itself); the server goes on serving.
    import requests

    url = f"http://127.0.0.1:{server.http_port}/v1/statement"
    headers = {"X-Trino-User": "alice", "X-Trino-Time-Zone": "Mars/Olympus_Mons"}
    page = requests.post(url, data="SELECT 1", headers=headers, timeout=30).json()
    while "error" not in page and page.get("nextUri"):
        page = requests.get(page["nextUri"], headers=headers, timeout=30).json()
    assert page["error"]["message"] == "Time zone not supported: Mars/Olympus_Mons"
    with pytest.raises(TrinoUserError, match="Time zone not supported: Nowhere"):
        run(server, "SET TIME ZONE 'Nowhere'")
    assert run(server, "SELECT 1") == [[1]]


def test_timestamps_and_intervals_have_trinos_types_and_text(server):
    # A literal's precision is its fraction's digits; intervals are Trino's two interval types,
    # which the client reads as a timedelta and a relativedelta.
    from datetime import timedelta

    from dateutil.relativedelta import relativedelta

    cur = connect(server).cursor()
    cur.execute(
        "SELECT TIMESTAMP '2024-01-02 03:04:05' AS s, TIMESTAMP '2024-01-02 03:04:05.250' AS ms, "
        "localtimestamp AS lt, INTERVAL '2 03:04:05.678' DAY TO SECOND AS ds, "
        "INTERVAL '-1-2' YEAR TO MONTH AS ym, "
        "TIMESTAMP '2024-01-02 00:00:00' - TIMESTAMP '2024-01-01 12:00:00.500' AS diff"
    )
    [[s, ms, lt, ds, ym, diff]] = cur.fetchall()
    assert [(d[0], d[1]) for d in cur.description] == [
        ("s", "timestamp(0)"),
        ("ms", "timestamp(3)"),
        ("lt", "timestamp(3)"),
        ("ds", "interval day to second"),
        ("ym", "interval year to month"),
        ("diff", "interval day to second"),
    ]
    assert (s, ms) == (datetime(2024, 1, 2, 3, 4, 5), datetime(2024, 1, 2, 3, 4, 5, 250000))
    assert lt.microsecond % 1000 == 0
    assert ds == timedelta(days=2, hours=3, minutes=4, seconds=5, milliseconds=678)
    assert ym == relativedelta(years=-1, months=-2)
    assert diff == timedelta(hours=11, minutes=59, seconds=59, milliseconds=500)


def test_each_value_keeps_its_own_time_zone(server):
    # Texts with their own offsets or zones, read from a column: one column of
    # `timestamp(3) with time zone` whose values each arrive in their own zone.
    from zoneinfo import ZoneInfo

    cur = connect(server).cursor()
    cur.execute(
        "SELECT from_iso8601_timestamp(s) AS ts, CAST(z AS TIMESTAMP WITH TIME ZONE) AS named "
        "FROM (VALUES ('2020-05-11T23:15:05.250+01:00', '2020-05-11 23:15:05 Asia/Tokyo'), "
        "('2020-05-11T23:15:05-05:00', '2020-05-11 23:15:05 America/New_York')) t(s, z) ORDER BY ts"
    )
    rows = cur.fetchall()
    assert [(d[0], d[1]) for d in cur.description] == [
        ("ts", "timestamp(3) with time zone"),
        ("named", "timestamp(3) with time zone"),
    ]
    assert [[v.hour for v in row] for row in rows] == [[23, 23], [23, 23]]
    assert [[v.utcoffset().total_seconds() / 3600 for v in row] for row in rows] == [[1, 9], [-5, -4]]
    assert rows[0][0] == datetime(2020, 5, 11, 22, 15, 5, 250000, tzinfo=ZoneInfo("UTC"))
    assert rows[1][1] == datetime(2020, 5, 11, 23, 15, 5, tzinfo=ZoneInfo("America/New_York"))


def test_wide_rows_come_in_short_pages(server):
    # 200 rows of a megabyte, made by the engine as one batch: pages of about 8 MB, not one of
    # 200 MB of JSON built beside the batch.
    with rss_growth(server.process.pid) as grown:
        cur = connect(server).cursor()
        cur.execute("SELECT length(w), substr(w, 1, 3) FROM (SELECT repeat('x', 1000000) AS w FROM range(200))")
        lengths = cur.fetchall()
        cur.execute("SELECT repeat('x', 1000000) AS w FROM range(200)")
        total = sum(len(row[0]) for row in cur.fetchall())
    assert lengths == [[1000000, "xxx"]] * 200
    assert total == 200 * 1000000
    assert grown[0] < 450 * 1024, f"the server grew by {grown[0] // 1024} MB"
