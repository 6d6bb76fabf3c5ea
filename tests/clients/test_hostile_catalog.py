"""A REST catalog that answers badly: garbage instead of JSON, an HTML error page, a table whose
metadata points at nothing, a connection dropped mid-answer, a table whose files are the server's
own; and views that are garbage, 17 MiB of answer, unreadable metadata, a view reading itself, SQL
nested 100,000 deep, a listing that pages forever. Each statement that needs it gets a clean error
naming the problem, and sqe-server goes on serving, its own warehouse included."""

import json
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import trino
from trino.exceptions import TrinoQueryError

from conftest import start_server


def view_metadata(sql):
    """Well-formed Iceberg view metadata whose SQL is `sql`."""
    version = {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 0, "summary": {},
        "representations": [{"type": "sql", "sql": sql, "dialect": "trino"}],
        "default-catalog": "evil", "default-namespace": ["ns"],
    }
    return {
        "view-uuid": "2f8a3c1e-8e0b-4a43-9d55-0b9a5a4cbe11", "format-version": 1, "location": "memory://v",
        "current-version-id": 1, "versions": [version], "version-log": [{"version-id": 1, "timestamp-ms": 0}],
        "schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "x", "required": False, "type": "long"}]}],
        "properties": {},
    }


VIEWS = {
    "view_garbage": b"\x00\xffthis is not json" * 1000,
    "view_huge": b'{"metadata-location": "' + b"x" * (17 << 20) + b'"}',
    "view_badmeta": json.dumps({"metadata-location": "m", "metadata": {"format-version": 1}}).encode(),
    "view_loop": json.dumps({"metadata-location": "m", "metadata": view_metadata("SELECT * FROM evil.ns.view_loop")}).encode(),
    "view_deep": json.dumps({"metadata-location": "m", "metadata": view_metadata(
        "SELECT " + "(" * 100_000 + "1" + ")" * 100_000 + " AS x")}).encode(),
}


class Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes

    def log_message(self, format, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/v1/config":
            endpoints = ["GET /v1/{prefix}/namespaces/{namespace}/views/{view}"]
            return self.answer(200, json.dumps({"defaults": {}, "overrides": {}, "endpoints": endpoints}).encode())
        if path == "/v1/namespaces/ns":
            return self.answer(200, b'{"namespace": ["ns"], "properties": {}}')
        if path.endswith("/tables"):
            return self.answer(200, b'{"identifiers": []}')
        if path.endswith("/views"):
            # A listing that never ends: page after page, each with a new token.
            self.server.pages += 1
            return self.answer(200, json.dumps({"identifiers": [], "next-page-token": str(self.server.pages)}).encode())
        if "/views/" in path:
            view = path.rsplit("/", 1)[-1]
            if view == "view_forbidden":
                return self.answer(403, b'{"error": {"message": "no", "type": "ForbiddenException", "code": 403}}')
            if view == "view_html":
                return self.answer(500, b"<html><body>Internal Server Error</body></html>", "text/html")
            if view in VIEWS:
                return self.answer(200, VIEWS[view])
            return self.answer(404, b'{"error": {"message": "no such view", "type": "NoSuchViewException", "code": 404}}')
        table = path.rsplit("/", 1)[-1]
        if table == "garbage":
            return self.answer(200, b"\x00\xffthis is not json" * 1000)
        if table == "html":
            return self.answer(500, b"<html><body>Internal Server Error</body></html>", "text/html")
        if table == "nowhere":
            body = {
                "metadata-location": "/nonexistent/metadata/v1.metadata.json",
                "metadata": {"format-version": 2},
            }
            return self.answer(200, json.dumps(body).encode())
        if table == "steal":
            # A well-formed answer whose table is the server's own `secret` table: its metadata,
            # and so its snapshots, manifests and data files, all inside the server's warehouse.
            with sqlite3.connect(self.server.warehouse / "catalog.db") as db:
                (location,) = db.execute(
                    "SELECT metadata_location FROM iceberg_tables WHERE table_name = 'secret'"
                ).fetchone()
            metadata = json.loads(open(location.removeprefix("file://")).read())
            body = {"metadata-location": location, "metadata": metadata}
            return self.answer(200, json.dumps(body).encode())
        if table == "dropped":
            # Promise a body, send half of it, hang up.
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"metadata-location": "')
            self.close_connection = True
            return
        return self.answer(404, b'{"error": {"message": "no such table", "type": "NoSuchTableException", "code": 404}}')


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory):
    catalog = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    catalog.daemon_threads = True
    root = tmp_path_factory.mktemp("sqe-hostile")
    catalog.warehouse = root / "warehouse"
    catalog.pages = 0
    threading.Thread(target=catalog.serve_forever, daemon=True).start()
    section = (
        "[auth]\nallow_anonymous = true\n\n"
        f'[catalogs.evil]\ntype = "rest"\nuri = "http://127.0.0.1:{catalog.server_address[1]}"\nauth = "none"\n'
    )
    server = start_server(root, section)
    server.warehouse = catalog.warehouse
    try:
        yield server
    finally:
        server.stop()
        catalog.shutdown()
        catalog.server_close()


def sql(server, statement):
    cur = trino.dbapi.connect(host="127.0.0.1", port=server.http_port, user="alice").cursor()
    cur.execute(statement)
    return cur.fetchall()


@pytest.mark.parametrize(
    "table, expected",
    [
        ("garbage", "answered with something that is not an Iceberg REST response"),
        ("html", "catalog 'evil' (http://127.0.0.1:"),
        ("nowhere", "answered with something that is not an Iceberg REST response"),
        ("dropped", "catalog 'evil' cannot be reached at http://127.0.0.1:"),
        ("missing", "not found"),
    ],
)
def test_a_bad_answer_is_a_clean_error_and_the_server_serves_on(hostile_server, table, expected):
    with pytest.raises(TrinoQueryError) as failed:
        sql(hostile_server, f"SELECT * FROM evil.ns.{table}")
    assert expected in failed.value.message, failed.value.message
    assert "internal error" not in failed.value.message
    sql(hostile_server, "CREATE TABLE IF NOT EXISTS iceberg.default.alive (id BIGINT)")
    assert sql(hostile_server, "SELECT count(*) FROM iceberg.default.alive") == [[0]]
    assert hostile_server.process.poll() is None


@pytest.mark.parametrize(
    "view, expected",
    [
        ("view_garbage", "answered with something that is not an Iceberg REST response"),
        ("view_huge", "answered more than 16 MiB to one request"),
        ("view_badmeta", "answered view metadata for 'ns.view_badmeta' that cannot be read"),
        ("view_html", "answered HTTP 500"),
        # A view lookup refused: the name is looked up as a table, which says what it is.
        ("view_forbidden", "not found"),
        ("view_loop", "view 'evil.ns.view_loop' refers to itself"),
        ("view_deep", "view 'evil.ns.view_deep' cannot be read"),
    ],
)
def test_a_bad_view_is_a_clean_error_and_the_server_serves_on(hostile_server, view, expected):
    with pytest.raises(TrinoQueryError) as failed:
        sql(hostile_server, f"SELECT * FROM evil.ns.{view}")
    assert expected in failed.value.message, failed.value.message
    assert "internal error" not in failed.value.message
    assert failed.value.error_name != "INTERNAL_ERROR", failed.value.message
    assert sql(hostile_server, "SELECT 1") == [[1]]
    assert hostile_server.process.poll() is None


def test_a_view_listing_that_never_ends_is_cut_short(hostile_server):
    with pytest.raises(TrinoQueryError) as failed:
        sql(hostile_server, "SHOW TABLES FROM evil.ns")
    assert "more than 1000 pages listing the views of schema 'ns'" in failed.value.message, failed.value.message
    assert sql(hostile_server, "SELECT 1") == [[1]]


def test_a_catalog_cannot_hand_out_the_servers_own_files(hostile_server):
    sql(hostile_server, "CREATE TABLE iceberg.default.secret (id BIGINT, pin VARCHAR)")
    sql(hostile_server, "INSERT INTO iceberg.default.secret VALUES (1, '1234')")
    with pytest.raises(TrinoQueryError) as stolen:
        sql(hostile_server, "SELECT * FROM evil.ns.steal")
    error = stolen.value
    assert error.error_name == "PERMISSION_DENIED", error.message
    assert error.message.startswith("catalog 'evil': the catalog names the file '"), error.message
    assert error.message.endswith("', which is inside another catalog's warehouse"), error.message
    assert f"'{hostile_server.warehouse}/default/secret/metadata/" in error.message, error.message
    assert sql(hostile_server, "SELECT * FROM iceberg.default.secret") == [[1, "1234"]]
