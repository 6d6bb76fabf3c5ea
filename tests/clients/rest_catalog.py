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
import json
import os
import secrets
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections import namedtuple
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import jwt
import pytest
import requests

from conftest import start

BIN = Path(sys.executable).parent
LAKANA_SERVER = str(BIN / "lakana-server")
LAKANA = str(BIN / "lakana")

ENVIRONMENT = "dev"
S3_ENVIRONMENT = "s3dev"
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


class Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, issuer: str, tokens: dict, records: Records, port: int = 0):
        super().__init__(("127.0.0.1", port), ProxyHandler)
        # Set when the proxy stops: connections it still holds open are closed unanswered.
        self.down = False
        self.upstream = urlsplit(upstream)
        self.issuer = issuer
        self.jwks = jwt.PyJWKClient(f"{issuer}/jwks")
        self.tokens = tokens
        self.records = records

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
        else:
            forward = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            forward["Authorization"] = f"Bearer {self.server.tokens[user]}"
            upstream = HTTPConnection(self.server.upstream.hostname, self.server.upstream.port, timeout=120)
            try:
                upstream.request(self.command, self.path, body=body or None, headers=forward)
                response = upstream.getresponse()
                status, answer = response.status, response.read()
                headers = [
                    (k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP | {"date", "server"}
                ]
            finally:
                upstream.close()
        self.server.records.append(Request(self.command, path, user, status))
        self._answer(status, answer, headers)

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
            self.proxy = Proxy(self.lakana_url, old.issuer, old.tokens, old.records, old.server_address[1])
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
        proxy = Proxy(lakana_url, f"http://127.0.0.1:{idp.port}", tokens, records)
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
