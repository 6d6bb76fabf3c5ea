"""A real Iceberg REST catalog (lakana-server, PyPI `lakana-server`) behind a recording proxy, for the
token-passthrough tests.

lakana authenticates its own principals' tokens (`lakana_pat_...`), not the test IdP's JWTs. The proxy
stands between a client (SQE, pyiceberg) and lakana: for every request it verifies the caller's bearer
JWT against the test IdP's JWKS (issuer, audience "sqe", RS256, expiry), records who it was, and
forwards the request with THAT user's own lakana token. So lakana's per-principal grants still decide
for each user, and the record shows whose token every request carried.

    lakana:  env `dev` (storage root file://<tmp>/warehouse, namespaces bronze/silver/gold),
             alice: DATA_ENGINEER on dev.bronze; bob: VIEWER on dev.silver only (refused on bronze).
             env `s3dev` (storage root s3://<bucket>/warehouse on a real S3 server, moto_server),
             the same principals with the same grants on s3dev.bronze / s3dev.silver.
    proxy:   missing/invalid token -> 401 (not forwarded); valid JWT of a user with no lakana
             principal -> 403 (not forwarded); otherwise forwarded, answer relayed.
    views:   lakana 0.20 serves no view endpoints, and no REST catalog that does (Polaris, Nessie,
             Lakekeeper) can run here. So the proxy serves the REST spec's view endpoints itself
             (`ViewStore`: list, create, load, replace, drop, with the spec's request and answer
             shapes, paging when asked with `pageToken`, metadata files written under the
             environment's storage root) and adds them to lakana's `/v1/config` as `endpoints`.
             Whether a user may read a namespace's views is lakana's answer to that user's own
             `GET /v1/{prefix}/namespaces/{ns}`; writing them takes a DATA_ENGINEER grant there,
             as writing its tables does.

Clients connect with `uri=<proxy_url>` and `prefix=dev` (lakana's /v1/config gives no prefix), or
`prefix=s3dev` plus the S3 properties (`s3_properties()`): lakana vends no storage credentials (the
LoadTable `config` and `storage-credentials` are empty), so every engine reads and writes the bucket
with its own S3 settings.

S3: moto_server on 127.0.0.1 (any access key is accepted: moto does not check signatures). lakana
itself (which writes every table's metadata JSON) talks to moto directly; clients (`s3_endpoint`) go
through a TCP relay in front of it, so that `s3_outage()` can take the storage endpoint away from the
engines while moto, its in-memory objects (moto keeps no state across a restart) and the catalog stay
up.

Use it from a test module with `from rest_catalog import rest_catalog  # noqa: F401`.
"""

import base64
import copy
import json
import os
import secrets
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid
from collections import namedtuple
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

import jwt
import pytest
import requests

import v3_tables
from conftest import start

BIN = Path(sys.executable).parent
LAKANA_SERVER = str(BIN / "lakana-server")
LAKANA = str(BIN / "lakana")

ENVIRONMENT = "dev"
S3_ENVIRONMENT = "s3dev"
# Tables of format version 3, which lakana cannot keep: the proxy keeps them (v3_tables.py).
V3_ENVIRONMENT = "v3"
S3_BUCKET = "sqe-lake"
S3_REGION = "us-east-1"
S3_ACCESS_KEY = "sqe-test-access-key"
S3_SECRET_KEY = "sqe-test-secret-key"
NO_TOKEN = "<none>"
INVALID_TOKEN = "<invalid>"

# One proxied request: HTTP method, URL path (no query), the user whose token it carried (or
# NO_TOKEN / INVALID_TOKEN), and the status the proxy answered with.
Request = namedtuple("Request", "method path user status")

HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
    "transfer-encoding", "upgrade", "host", "authorization", "content-length",
}


class Records(list):
    """The proxy's record, in arrival order (appended from the proxy's threads)."""

    def snapshot(self) -> list:
        return list(self)

    def mark(self) -> int:
        """A position; `since(mark)` gives the requests made after it."""
        return len(self)

    def since(self, mark: int) -> list:
        return list(self)[mark:]


def iceberg_error(status: int, kind: str, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()


# What the proxy says it serves (`/v1/config`'s `endpoints`): lakana's own, and the view endpoints.
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
]

# Views listed per page when a client asks for pages (`pageToken`).
VIEW_PAGE = 2


class BadRequest(Exception):
    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind = status, kind


def _require(condition, message):
    if not condition:
        raise BadRequest(400, "BadRequestException", message)


def _check_version(version) -> None:
    _require(isinstance(version, dict), "view-version must be an object")
    for key in ("version-id", "timestamp-ms", "schema-id", "summary", "representations", "default-namespace"):
        _require(key in version, f"view-version lacks {key}")
    _require(isinstance(version["summary"], dict), "summary must be an object")
    representations = version["representations"]
    _require(isinstance(representations, list) and representations, "representations must be a non-empty list")
    for r in representations:
        _require(
            isinstance(r, dict) and r.get("type") == "sql" and isinstance(r.get("sql"), str)
            and isinstance(r.get("dialect"), str),
            "a representation must be {type: sql, sql, dialect}",
        )
    _require(isinstance(version["default-namespace"], list), "default-namespace must be a list")


def _check_schema(schema) -> None:
    _require(isinstance(schema, dict) and schema.get("type") == "struct", "schema must be a struct")
    _require(isinstance(schema.get("fields"), list), "schema must have fields")


def _check_properties(properties) -> None:
    _require(
        isinstance(properties, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()),
        "properties must map strings to strings",
    )


class ViewStore:
    """Iceberg views kept as the REST spec says a catalog keeps them, by (prefix, namespace, name)."""

    def __init__(self, roots: dict):
        self.roots = roots  # prefix -> storage root (file:// only; views of other roots stay in memory)
        self.views = {}
        self.lock = threading.Lock()

    def _write(self, entry: dict, number: int) -> None:
        metadata = entry["metadata"]
        location = f"{metadata['location']}/metadata/{number:05d}-{uuid.uuid4()}.metadata.json"
        if location.startswith("file://"):
            path = Path(location.removeprefix("file://"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(metadata))
        entry["metadata-location"] = location

    def names(self, prefix: str, namespace: tuple) -> list:
        with self.lock:
            return sorted(n for (p, ns, n) in self.views if p == prefix and ns == namespace)

    def load(self, prefix: str, namespace: tuple, name: str) -> dict:
        with self.lock:
            entry = self.views.get((prefix, namespace, name))
            if entry is None:
                raise BadRequest(404, "NoSuchViewException", f"View does not exist: {'.'.join(namespace)}.{name}")
            return copy.deepcopy(entry)

    def create(self, prefix: str, namespace: tuple, request) -> dict:
        _require(isinstance(request, dict), "the request must be an object")
        for key in ("name", "schema", "view-version", "properties"):
            _require(key in request, f"CreateViewRequest lacks {key}")
        name = request["name"]
        _require(isinstance(name, str) and name, "name must be a non-empty string")
        _check_schema(request["schema"])
        _check_version(request["view-version"])
        _check_properties(request["properties"])
        now = int(time.time() * 1000)
        schema = {**request["schema"], "schema-id": 0}
        version = {**request["view-version"], "version-id": 1, "schema-id": 0}
        root = self.roots.get(prefix, "memory://")
        metadata = {
            "view-uuid": str(uuid.uuid4()),
            "format-version": 1,
            "location": request.get("location") or f"{root}/{'/'.join(namespace)}/{name}",
            "current-version-id": 1,
            "versions": [version],
            "version-log": [{"version-id": 1, "timestamp-ms": now}],
            "schemas": [schema],
            "properties": dict(request["properties"]),
        }
        with self.lock:
            key = (prefix, namespace, name)
            if key in self.views:
                raise BadRequest(409, "AlreadyExistsException", f"View already exists: {'.'.join(namespace)}.{name}")
            entry = {"metadata": metadata}
            self._write(entry, 0)
            self.views[key] = entry
            return copy.deepcopy(entry)

    def commit(self, prefix: str, namespace: tuple, name: str, request) -> dict:
        _require(isinstance(request, dict) and isinstance(request.get("updates"), list), "CommitViewRequest lacks updates")
        with self.lock:
            key = (prefix, namespace, name)
            if key not in self.views:
                raise BadRequest(404, "NoSuchViewException", f"View does not exist: {'.'.join(namespace)}.{name}")
            metadata = copy.deepcopy(self.views[key]["metadata"])
            for requirement in request.get("requirements") or []:
                _require(isinstance(requirement, dict), "a requirement must be an object")
                if requirement.get("type") != "assert-view-uuid":
                    raise BadRequest(400, "BadRequestException", f"unknown requirement {requirement.get('type')!r}")
                if requirement.get("uuid") != metadata["view-uuid"]:
                    raise BadRequest(409, "CommitFailedException", "Requirement failed: view UUID does not match")
            last_schema = last_version = None
            for update in request["updates"]:
                _require(isinstance(update, dict), "an update must be an object")
                action = update.get("action")
                if action == "add-schema":
                    _check_schema(update.get("schema"))
                    last_schema = max(s["schema-id"] for s in metadata["schemas"]) + 1
                    metadata["schemas"].append({**update["schema"], "schema-id": last_schema})
                elif action == "add-view-version":
                    version = update.get("view-version")
                    _check_version(version)
                    schema_id = version["schema-id"]
                    if schema_id == -1:
                        _require(last_schema is not None, "schema-id -1 without an added schema")
                        schema_id = last_schema
                    _require(any(s["schema-id"] == schema_id for s in metadata["schemas"]), f"no schema {schema_id}")
                    last_version = max(v["version-id"] for v in metadata["versions"]) + 1
                    metadata["versions"].append({**version, "version-id": last_version, "schema-id": schema_id})
                elif action == "set-current-view-version":
                    chosen = update.get("view-version-id")
                    if chosen == -1:
                        _require(last_version is not None, "view-version-id -1 without an added version")
                        chosen = last_version
                    _require(any(v["version-id"] == chosen for v in metadata["versions"]), f"no version {chosen}")
                    metadata["current-version-id"] = chosen
                    metadata["version-log"].append({"version-id": chosen, "timestamp-ms": int(time.time() * 1000)})
                elif action == "set-properties":
                    _check_properties(update.get("updates"))
                    metadata["properties"].update(update["updates"])
                elif action == "remove-properties":
                    removals = update.get("removals")
                    _require(isinstance(removals, list), "removals must be a list")
                    for k in removals:
                        metadata["properties"].pop(k, None)
                else:
                    raise BadRequest(400, "BadRequestException", f"unsupported view update {action!r}")
            entry = {"metadata": metadata}
            self._write(entry, len(metadata["version-log"]) - 1)
            self.views[key] = entry
            return copy.deepcopy(entry)

    def drop(self, prefix: str, namespace: tuple, name: str) -> None:
        with self.lock:
            if self.views.pop((prefix, namespace, name), None) is None:
                raise BadRequest(404, "NoSuchViewException", f"View does not exist: {'.'.join(namespace)}.{name}")


def view_route(path: str):
    """`(prefix, namespace, view or None)` of a view endpoint's path, else None."""
    parts = [unquote(p) for p in path.split("/")]
    # "", "v1", prefix, "namespaces", ns, "views"[, name]
    if len(parts) in (6, 7) and parts[1] == "v1" and parts[3] == "namespaces" and parts[5] == "views":
        return parts[2], tuple(parts[4].split("\x1f")), (parts[6] if len(parts) == 7 else None)
    return None


class Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, issuer: str, tokens: dict, records: Records, port: int = 0,
                 views: ViewStore = None, writers: dict = None, v3: v3_tables.TableStore = None):
        super().__init__(("127.0.0.1", port), ProxyHandler)
        # Set when the proxy stops: connections it still holds open are closed unanswered.
        self.down = False
        self.upstream = urlsplit(upstream)
        self.issuer = issuer
        self.jwks = jwt.PyJWKClient(f"{issuer}/jwks")
        self.tokens = tokens
        self.records = records
        self.views = views if views is not None else ViewStore({})
        self.writers = writers or {}  # (prefix, namespace) -> users who may write its views
        self.v3 = v3

    def user_of(self, authorization):
        """The verified user of an `Authorization` header, or NO_TOKEN / INVALID_TOKEN."""
        if not authorization:
            return NO_TOKEN
        scheme, _, credential = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            return INVALID_TOKEN
        try:
            key = self.jwks.get_signing_key_from_jwt(credential.strip())
            claims = jwt.decode(
                credential.strip(),
                key.key,
                algorithms=["RS256"],
                audience="sqe",
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError:
            return INVALID_TOKEN
        return claims.get("preferred_username") or INVALID_TOKEN


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Proxy

    def log_message(self, format, *args):
        pass

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status: int, body: bytes, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self):
        if self.server.down:
            self.close_connection = True
            return
        body = self._body()
        path = urlsplit(self.path).path
        user = self.server.user_of(self.headers.get("Authorization"))
        if user in (NO_TOKEN, INVALID_TOKEN):
            status, answer = 401, iceberg_error(401, "NotAuthorizedException", f"proxy: bearer token {user}")
            headers = [("Content-Type", "application/json"), ("WWW-Authenticate", "Bearer")]
        elif user not in self.server.tokens:
            status = 403
            answer = iceberg_error(403, "ForbiddenException", f"proxy: no catalog principal for {user!r}")
            headers = [("Content-Type", "application/json")]
        elif self.server.v3 is not None and (route := v3_tables.route(V3_ENVIRONMENT, path)) is not None:
            may_write = user in self.server.writers.get((V3_ENVIRONMENT, v3_tables.NAMESPACE), ())
            status, result = v3_tables.answer(self.server.v3, self.command, route, body, may_write)
            answer = b"" if result is None else json.dumps(result).encode()
            headers = [("Content-Type", "application/json")]
        elif (route := view_route(path)) is not None:
            status, answer = self._view(user, route, body)
            headers = [("Content-Type", "application/json")]
        else:
            status, answer, headers = self._forward(user, self.command, self.path, body)
            if path == "/v1/config" and status == 200:
                config = json.loads(answer)
                config["endpoints"] = ENDPOINTS
                answer = json.dumps(config).encode()
        self.server.records.append(Request(self.command, path, user, status))
        self._answer(status, answer, headers)

    def _forward(self, user, method, target, body=b""):
        """The request sent on to lakana with `user`'s own token: (status, body, headers)."""
        forward = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        forward["Authorization"] = f"Bearer {self.server.tokens[user]}"
        upstream = HTTPConnection(self.server.upstream.hostname, self.server.upstream.port, timeout=120)
        try:
            upstream.request(method, target, body=body or None, headers=forward)
            response = upstream.getresponse()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP | {"date", "server"}]
            return response.status, response.read(), headers
        finally:
            upstream.close()

    def _view(self, user, route, body):
        """A view endpoint, answered by the proxy's ViewStore once lakana lets `user` read the namespace."""
        prefix, namespace, name = route
        store = self.server.views
        ns_path = "/v1/" + "/".join(
            p.replace("\x1f", "%1F") for p in (prefix, "namespaces", "\x1f".join(namespace))
        )
        status, answer, _ = self._forward(user, "GET", ns_path)
        if status != 200:
            return status, answer
        writes = self.command in ("POST", "DELETE")
        if writes and user not in self.server.writers.get((prefix, namespace), ()):
            return 403, iceberg_error(403, "ForbiddenException", f"{user!r} may not write views in {'.'.join(namespace)}")
        try:
            if self.command == "GET" and name is None:
                names = store.names(prefix, namespace)
                query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
                result = {}
                if "pageToken" in query:
                    start = int(query["pageToken"][0] or 0)
                    if start + VIEW_PAGE < len(names):
                        result["next-page-token"] = str(start + VIEW_PAGE)
                    names = names[start:start + VIEW_PAGE]
                result["identifiers"] = [{"namespace": list(namespace), "name": n} for n in names]
                return 200, json.dumps(result).encode()
            if self.command == "GET":
                return 200, json.dumps(store.load(prefix, namespace, name)).encode()
            if self.command == "HEAD" and name is not None:
                store.load(prefix, namespace, name)
                return 204, b""
            if self.command == "DELETE" and name is not None:
                store.drop(prefix, namespace, name)
                return 204, b""
            if self.command != "POST":
                return 405, iceberg_error(405, "BadRequestException", f"{self.command} is not served here")
            try:
                request = json.loads(body)
            except ValueError:
                raise BadRequest(400, "BadRequestException", "the body is not JSON")
            if name is None:
                taken = isinstance(request, dict) and isinstance(request.get("name"), str) and self._forward(
                    user, "GET", f"{ns_path}/tables/{quote(request['name'], safe='')}"
                )[0] == 200
                if taken:
                    raise BadRequest(409, "AlreadyExistsException", f"Table already exists: {request['name']}")
                return 200, json.dumps(store.create(prefix, namespace, request)).encode()
            return 200, json.dumps(store.commit(prefix, namespace, name, request)).encode()
        except BadRequest as e:
            return e.status, iceberg_error(e.status, e.kind, str(e))

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle


class Relay(socketserver.ThreadingTCPServer):
    """A plain TCP relay on 127.0.0.1 to an upstream port (bytes pass unchanged, so S3 signatures over
    the Host header still hold). `stop()` closes the listener and every connection it holds open."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream_port: int, port: int = 0):
        self.upstream_port = upstream_port
        self.open = set()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", port), RelayHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def stop(self):
        self.shutdown()
        self.server_close()
        with self.lock:
            for conn in self.open:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            self.open.clear()


class RelayHandler(socketserver.BaseRequestHandler):
    server: Relay

    def handle(self):
        try:
            upstream = socket.create_connection(("127.0.0.1", self.server.upstream_port), timeout=30)
        except OSError:
            return
        upstream.settimeout(None)
        with self.server.lock:
            self.server.open.update((self.request, upstream))

        def pump(source, sink):
            try:
                while data := source.recv(65536):
                    sink.sendall(data)
            except OSError:
                pass
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        back = threading.Thread(target=pump, args=(upstream, self.request), daemon=True)
        back.start()
        pump(self.request, upstream)
        back.join()
        with self.server.lock:
            self.server.open.discard(self.request)
            self.server.open.discard(upstream)
        upstream.close()


@dataclass
class RestCatalog:
    proxy_url: str
    lakana_url: str
    admin_token: str
    records: Records
    warehouse: Path
    tokens: dict = field(default_factory=dict)  # user -> that user's own lakana PAT
    prefix: str = ENVIRONMENT
    proxy: Proxy = None
    # The S3-backed environment `s3_prefix` (storage root s3://<s3_bucket>/warehouse). `s3_endpoint`
    # is what engines use (the relay); lakana itself uses `s3_direct_endpoint` (moto).
    s3_prefix: str = S3_ENVIRONMENT
    s3_endpoint: str = None
    s3_direct_endpoint: str = None
    s3_access_key: str = S3_ACCESS_KEY
    s3_secret_key: str = S3_SECRET_KEY
    s3_region: str = S3_REGION
    s3_bucket: str = S3_BUCKET
    s3_relay: Relay = None

    @property
    def s3_root(self) -> str:
        return f"s3://{self.s3_bucket}/warehouse"

    def s3_properties(self) -> dict:
        """The FileIO properties an engine needs for the S3 environment (iceberg-rust / pyiceberg names)."""
        return {
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.s3_access_key,
            "s3.secret-access-key": self.s3_secret_key,
            "s3.region": self.s3_region,
            "s3.path-style-access": "true",
        }

    def s3_client(self):
        """A boto3 S3 client on moto directly (unaffected by `s3_outage()`)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.s3_direct_endpoint,
            aws_access_key_id=self.s3_access_key,
            aws_secret_access_key=self.s3_secret_key,
            region_name=self.s3_region,
        )

    def s3_keys(self, prefix: str = "warehouse/") -> list:
        """Every object key in the bucket under `prefix` (an `s3://bucket/...` location works too)."""
        if prefix.startswith("s3://"):
            prefix = prefix.removeprefix(f"s3://{self.s3_bucket}/")
        pages = self.s3_client().get_paginator("list_objects_v2").paginate(Bucket=self.s3_bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    @contextmanager
    def s3_outage(self):
        """The engines' S3 endpoint goes away (nothing listens on its port, open connections are
        dropped) and comes back on the same port, with the same objects, when the block ends. moto
        itself and the catalog stay up."""
        old = self.s3_relay
        old.stop()
        try:
            yield
        finally:
            self.s3_relay = Relay(old.upstream_port, old.port)

    @contextmanager
    def outage(self):
        """The catalog's endpoint goes away (nothing listens on its port, open connections are
        dropped) and comes back on the same port when the block ends."""
        old = self.proxy
        old.down = True
        old.shutdown()
        old.server_close()
        try:
            yield
        finally:
            self.proxy = Proxy(self.lakana_url, old.issuer, old.tokens, old.records, old.server_address[1],
                               old.views, old.writers, old.v3)
            threading.Thread(target=self.proxy.serve_forever, daemon=True).start()

    def catalog_toml(self, name="lake", prefix=None, properties=None) -> str:
        """The sqe-server section mounting this catalog (through the proxy) as `name`, for the
        environment `prefix` (default `dev`), with string `properties` (e.g. `s3_properties()`) in
        `[catalogs.NAME.properties]`; its tables' files may be in the environment's storage root."""
        prefix = prefix or self.prefix
        root = self.s3_root if prefix == self.s3_prefix else f"file://{self.warehouse}"
        toml = (
            f'[catalogs.{name}]\ntype = "rest"\nuri = {toml_string(self.proxy_url)}\n'
            f'prefix = {toml_string(prefix)}\nauth = "passthrough"\n'
            f"locations = [{toml_string(root)}]\n"
        )
        if properties:
            toml += f"\n[catalogs.{name}.properties]\n"
            toml += "".join(f"{toml_string(k)} = {toml_string(str(v))}\n" for k, v in properties.items())
        return toml + "\n"

    def pyiceberg(self, bearer: str, name="lake", prefix=None, properties=None):
        """A pyiceberg RestCatalog through the proxy, presenting `bearer` (an IdP JWT), for the
        environment `prefix` (default `dev`), with extra catalog `properties` (e.g. `s3_properties()`)."""
        from pyiceberg.catalog.rest import RestCatalog as PyIcebergRest

        return PyIcebergRest(
            name, uri=self.proxy_url, token=bearer, prefix=prefix or self.prefix, **(properties or {})
        )


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def lakana_cli(env: dict, *args) -> dict:
    result = subprocess.run([LAKANA, "--output", "json", *args], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"lakana {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


def start_lakana(root: Path):
    """lakana-server on a free port over a sqlite DB in `root`; returns (process, url, admin token)."""
    key_id, secret = secrets.token_hex(8), secrets.token_hex(16)
    env = {
        **os.environ,
        "LAKANA_DATABASE__URL": f"sqlite:///{root / 'lakana.db'}",
        "LAKANA_BOOTSTRAP_PAT_KEY_ID": key_id,
        "LAKANA_BOOTSTRAP_PAT_SECRET": secret,
        "LAKANA_SECRETS__MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        "LAKANA_HOST": "127.0.0.1",
        "LAKANA_PORT": "0",
    }
    migrate = subprocess.run([LAKANA_SERVER, "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, f"lakana-server migrate failed:\n{migrate.stdout}\n{migrate.stderr}"
    process = start([LAKANA_SERVER], r"Uvicorn running on http://127\.0\.0\.1:(\d+)", env)
    url = f"http://127.0.0.1:{process.port}"
    admin = f"lakana_pat_{key_id}_{secret}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"{url}/api/v1/whoami", headers={"Authorization": f"Bearer {admin}"}, timeout=5).ok:
                return process, url, admin
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline:
            process.stop()
            pytest.fail("lakana-server did not answer:\n" + process.log())
        time.sleep(0.2)


def start_moto() -> tuple:
    """moto_server on a free port of 127.0.0.1 with the bucket created; returns (process, endpoint)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for key in [k for k in env if k.startswith("AWS_")]:
        del env[key]
    process = start([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", "0"],
                    r"Running on http://127\.0\.0\.1:(\d+)", env)
    endpoint = f"http://127.0.0.1:{process.port}"
    import boto3

    deadline = time.monotonic() + 60
    while True:
        try:
            boto3.client(
                "s3", endpoint_url=endpoint, aws_access_key_id=S3_ACCESS_KEY,
                aws_secret_access_key=S3_SECRET_KEY, region_name=S3_REGION,
            ).create_bucket(Bucket=S3_BUCKET)
            return process, endpoint
        except Exception:  # noqa: BLE001 - not answering yet
            if time.monotonic() > deadline:
                process.stop()
                pytest.fail("moto_server did not answer:\n" + process.log())
            time.sleep(0.2)


@pytest.fixture(scope="module")
def rest_catalog(tmp_path_factory, idp):
    root = tmp_path_factory.mktemp("lakana")
    warehouse = root / "warehouse"
    moto, s3_direct = start_moto()
    relay = lakana = proxy = None
    try:
        relay = Relay(moto.port)
        lakana, lakana_url, admin = start_lakana(root)
        cli = {**os.environ, "LAKANA_URL": lakana_url, "LAKANA_TOKEN": admin, "XDG_CONFIG_HOME": str(root / "xdg")}
        lakana_cli(cli, "env", "create", ENVIRONMENT, "--storage-root", f"file://{warehouse}")
        lakana_cli(
            cli, "env", "create", S3_ENVIRONMENT, "--storage-root", f"s3://{S3_BUCKET}/warehouse",
            "--option", f"s3.endpoint={s3_direct}",
            "--option", f"s3.access-key-id={S3_ACCESS_KEY}",
            "--option", f"s3.secret-access-key={S3_SECRET_KEY}",
            "--option", f"s3.region={S3_REGION}",
        )
        tokens = {}
        for user in ("alice", "bob"):
            lakana_cli(cli, "principal", "create", user, "--type", "user")
            tokens[user] = lakana_cli(cli, "token", "issue", user, f"{user}-pat")["token"]
        grants = {"alice": ("DATA_ENGINEER", "bronze"), "bob": ("VIEWER", "silver")}
        for environment in (ENVIRONMENT, S3_ENVIRONMENT):
            for user, (role, namespace) in grants.items():
                lakana_cli(cli, "grant", "create", "--kind", "NAMESPACE", "--principal", user, "--role", role,
                           "--env", environment, "--ns", namespace)
        records = Records()
        views = ViewStore({ENVIRONMENT: f"file://{warehouse}"})
        writers = {
            (environment, (namespace,)): {user}
            for environment in (ENVIRONMENT, S3_ENVIRONMENT)
            for user, (role, namespace) in grants.items()
            if role == "DATA_ENGINEER"
        }
        writers[(V3_ENVIRONMENT, v3_tables.NAMESPACE)] = {"alice"}
        v3 = v3_tables.TableStore(f"file://{warehouse}/{V3_ENVIRONMENT}")
        proxy = Proxy(lakana_url, f"http://127.0.0.1:{idp.port}", tokens, records, views=views, writers=writers,
                      v3=v3)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        catalog = RestCatalog(
            proxy_url=f"http://127.0.0.1:{proxy.server_address[1]}",
            lakana_url=lakana_url,
            admin_token=admin,
            records=records,
            warehouse=warehouse,
            tokens=tokens,
            proxy=proxy,
            s3_endpoint=f"http://127.0.0.1:{relay.port}",
            s3_direct_endpoint=s3_direct,
            s3_relay=relay,
        )
        yield catalog
        proxy, relay = catalog.proxy, catalog.s3_relay
    finally:
        if proxy is not None:
            proxy.shutdown()
            proxy.server_close()
        if lakana is not None:
            lakana.stop()
        if relay is not None:
            relay.stop()
        moto.stop()
