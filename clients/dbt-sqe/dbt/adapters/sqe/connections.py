"""Connections to SQE over Arrow Flight SQL (the ADBC Flight SQL driver), as the profile's user.

Every statement dbt sends runs through one ADBC cursor whose result is read to the end before
dbt looks at it, so that a write is done (and its row count known) whether dbt fetches or not.
The caller's credentials travel as the `authorization` header of every call: a static token, one
the profile's OAuth client obtains (and obtains again before it expires), or a user name and
password (HTTP Basic, which SQE exchanges at its identity provider).
"""

import base64
import hashlib
import re
import secrets
import threading
import time
import webbrowser
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlencode, urlparse

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import requests
import sqlparse
from dbt.adapters.contracts.connection import AdapterResponse, Credentials
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions.connection import FailedToConnectError
from dbt.adapters.sql import SQLConnectionManager
from dbt_common.exceptions import DbtConfigError, DbtDatabaseError, DbtRuntimeError

from dbt.adapters.sqe.__version__ import version

logger = AdapterLogger("SQE")

Options = adbc_driver_flightsql.DatabaseOptions
SOURCE_HEADER = "x-sqe-source"
METHODS = ("none", "token", "oauth", "authorization_code", "password")
# How long the browser sign-in (method authorization_code) may take.
SIGN_IN_SECONDS = 300
# The size of the record batches a seed goes to SQE in.
INGEST_BATCH_BYTES = 4 << 20
# The query tag of the model running on each of dbt's threads.
_model_tag = threading.local()


@dataclass
class SqeCredentials(Credentials):
    host: str = "127.0.0.1"
    port: int = 50051
    # none | token | oauth (client credentials) | authorization_code (a browser sign-in) |
    # password (checked by SQE)
    method: str = "none"
    user: Optional[str] = None
    password: Optional[str] = None
    token: Optional[str] = None
    token_uri: Optional[str] = None
    client_id: Optional[str] = None
    client_secret: Optional[str] = None
    scope: Optional[str] = None
    audience: Optional[str] = None
    # authorization_code: the IdP's authorization endpoint, and the port of the redirect URI
    # http://127.0.0.1:<port>/callback (0: any free port; name one the IdP has registered).
    authorize_uri: Optional[str] = None
    redirect_port: int = 0
    # The CA the identity provider's endpoints are checked against (default: the system's).
    idp_ca_file: Optional[str] = None
    tls: bool = False
    ca_file: Optional[str] = None
    tls_skip_verify: bool = False
    # Shown as the `source` of each statement in system.runtime.queries (a model's `query_tag`
    # config replaces it while the model runs).
    query_tag: Optional[str] = None
    timeout_seconds: Optional[float] = None
    # dbt-trino's macros ask this to choose the parameter marker; ADBC takes `?`.
    prepared_statements_enabled: bool = True

    _ALIASES = {"catalog": "database"}

    @property
    def type(self):
        return "sqe"

    @property
    def unique_field(self):
        return self.host

    def _connection_keys(self):
        return ("method", "host", "port", "user", "client_id", "database", "schema", "tls", "query_tag")

    def __post_init__(self):
        if self.method not in METHODS:
            raise DbtConfigError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        needs = {
            "token": ["token"],
            "oauth": ["token_uri", "client_id", "client_secret"],
            "authorization_code": ["authorize_uri", "token_uri", "client_id"],
            "password": ["user", "password"],
        }.get(self.method, [])
        missing = [name for name in needs if not getattr(self, name)]
        if missing:
            raise DbtConfigError(f"method '{self.method}' needs {', '.join(missing)} in the profile")
        if self.method != "none" and not self.tls and not is_loopback(self.host):
            raise DbtConfigError(
                f"method '{self.method}' would send credentials to {self.host} unencrypted: "
                "set tls: true (plain gRPC is for loopback addresses only)"
            )
        for name in ("token_uri", "authorize_uri"):
            uri = getattr(self, name)
            if uri and not uri.startswith("https://") and not is_loopback(urlparse(uri).hostname or ""):
                raise DbtConfigError(f"{name} must be an https:// address (or a loopback one): {uri}")

    @property
    def uri(self) -> str:
        scheme = "grpc+tls" if self.tls else "grpc"
        return f"{scheme}://{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


class OAuthToken:
    """An OAuth 2.0 token for one client, shared by dbt's threads and fetched again once it is
    about to expire: by the client-credentials grant (method oauth), or by a browser sign-in with
    PKCE and then its refresh token (method authorization_code)."""

    _sources: Dict[Tuple, "OAuthToken"] = {}
    _sources_lock = threading.Lock()

    def __init__(self, credentials: SqeCredentials):
        self._credentials = credentials
        self._lock = threading.Lock()
        self._token: Optional[str] = None
        self._expires_at = 0.0
        self._lifetime = 0.0
        self._refresh_token: Optional[str] = None

    @classmethod
    def of(cls, credentials: SqeCredentials) -> "OAuthToken":
        key = (
            credentials.method,
            credentials.token_uri,
            credentials.client_id,
            credentials.client_secret,
            credentials.scope,
            credentials.audience,
        )
        with cls._sources_lock:
            if key not in cls._sources:
                cls._sources[key] = cls(credentials)
            return cls._sources[key]

    def current(self) -> Tuple[str, float]:
        """The token and when it expires (seconds since the epoch): a new one once half its life
        is gone, so that a statement starting now has that half to finish in (its result is
        fetched with the token it started with)."""
        with self._lock:
            if self._token is None or self._expires_at - time.time() < self._lifetime / 2:
                self._fetch()
            return self._token, self._expires_at

    def _fetch(self):
        c = self._credentials
        if c.method == "authorization_code":
            body = (self._refresh_token and self._post(self._refresh_form(), refused_ok=True)) or self._post(
                self._browser_sign_in()
            )
        else:
            form = {"grant_type": "client_credentials", "client_id": c.client_id, "client_secret": c.client_secret}
            if c.scope:
                form["scope"] = c.scope
            if c.audience:
                form["audience"] = c.audience
            body = self._post(form)
        self._token = body["access_token"]
        self._refresh_token = body.get("refresh_token") or self._refresh_token
        # Without expires_in, assume an hour.
        self._lifetime = float(body.get("expires_in") or 3600)
        self._expires_at = self._started + self._lifetime

    def _post(self, form: Dict[str, str], refused_ok: bool = False) -> Optional[dict]:
        """The token endpoint's answer to `form`; None if it refused and `refused_ok`."""
        c = self._credentials
        verify = c.idp_ca_file or True
        self._started = time.time()
        try:
            response = requests.post(c.token_uri, data=form, timeout=30, verify=verify)
        except requests.RequestException as e:
            raise FailedToConnectError(f"could not reach the token endpoint {c.token_uri}: {e}") from e
        if response.status_code != 200:
            if refused_ok:
                return None
            raise FailedToConnectError(
                f"the token endpoint {c.token_uri} refused client '{c.client_id}': "
                f"HTTP {response.status_code} {response.text[:300]}"
            )
        body = response.json()
        if "access_token" not in body:
            raise FailedToConnectError(f"the token endpoint {c.token_uri} sent no access_token")
        return body

    def _refresh_form(self) -> Dict[str, str]:
        c = self._credentials
        form = {"grant_type": "refresh_token", "refresh_token": self._refresh_token, "client_id": c.client_id}
        if c.client_secret:
            form["client_secret"] = c.client_secret
        return form

    def _browser_sign_in(self) -> Dict[str, str]:
        """Sends the user's browser to the authorization endpoint and waits for the redirect to
        http://127.0.0.1:<port>/callback: the authorization-code grant with PKCE (S256)."""
        c = self._credentials
        verifier = secrets.token_urlsafe(64)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state = secrets.token_urlsafe(24)
        received: Dict[str, str] = {}

        class Callback(BaseHTTPRequestHandler):
            # A connection that sends nothing is dropped, so the wait can end.
            timeout = 5

            def do_GET(self):
                url = urlparse(self.path)
                answer = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/callback" and answer.get("state") == state:
                    received.update(answer)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.end_headers()
                self.wfile.write(b"Signed in to SQE for dbt: this window may be closed.")

            def log_message(self, *args):
                pass

        listener = HTTPServer(("127.0.0.1", c.redirect_port), Callback)
        listener.timeout = 1
        redirect_uri = f"http://127.0.0.1:{listener.server_address[1]}/callback"
        params = {
            "response_type": "code",
            "client_id": c.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        if c.scope:
            params["scope"] = c.scope
        url = c.authorize_uri + ("&" if "?" in c.authorize_uri else "?") + urlencode(params)
        # The address goes to the log only where there is no browser to open: it holds the
        # sign-in's state. A browser opens beside the listener (some wait for their window).
        try:
            browser = webbrowser.get()
        except webbrowser.Error:
            browser = None
        if browser is None:
            logger.info(f"SQE: open this address to sign in: {url}")
        else:
            threading.Thread(target=browser.open, args=(url,), daemon=True).start()
        deadline = time.time() + SIGN_IN_SECONDS
        try:
            while "code" not in received and "error" not in received and time.time() < deadline:
                listener.handle_request()
        finally:
            listener.server_close()
        if "error" in received:
            raise FailedToConnectError(f"the sign-in at {c.authorize_uri} failed: {received['error']}")
        if "code" not in received:
            raise FailedToConnectError(f"no sign-in at {c.authorize_uri} within {SIGN_IN_SECONDS} seconds")
        form = {
            "grant_type": "authorization_code",
            "code": received["code"],
            "redirect_uri": redirect_uri,
            "client_id": c.client_id,
            "code_verifier": verifier,
        }
        if c.client_secret:
            form["client_secret"] = c.client_secret
        return form


class SqeHandle:
    """One ADBC connection. Its credentials go with each statement as call headers: the current
    OAuth token (renewed while the connection, and the server's session behind its cookie, stay),
    a static token, or the user's password (SQE exchanges it at its identity provider)."""

    def __init__(self, credentials: SqeCredentials):
        self.credentials = credentials
        self.source = credentials.query_tag or f"dbt-sqe-{version}"
        self._running = None
        self._connection = flight_sql.connect(credentials.uri, db_kwargs=self._database_options(), autocommit=True)

    def _database_options(self) -> Dict[str, str]:
        c = self.credentials
        options: Dict[str, str] = {}
        if c.tls and c.ca_file:
            with open(c.ca_file) as f:
                options[Options.TLS_ROOT_CERTS.value] = f.read()
        if c.tls and c.tls_skip_verify:
            options[Options.TLS_SKIP_VERIFY.value] = "true"
        if c.timeout_seconds:
            for option in (Options.TIMEOUT_QUERY, Options.TIMEOUT_FETCH, Options.TIMEOUT_UPDATE):
                options[option.value] = str(c.timeout_seconds)
        # Keeps the server's session (USE, SET SESSION) from one statement to the next.
        options[Options.WITH_COOKIE_MIDDLEWARE.value] = "true"
        return options

    def authorization(self) -> Optional[str]:
        c = self.credentials
        if c.method == "token":
            return f"Bearer {c.token}"
        if c.method in ("oauth", "authorization_code"):
            token, _ = OAuthToken.of(c).current()
            return f"Bearer {token}"
        if c.method == "password":
            pair = base64.b64encode(f"{c.user}:{c.password}".encode()).decode()
            return f"Basic {pair}"
        return None

    def statement(self):
        """An ADBC cursor whose calls carry the caller's credentials and the query tag."""
        cursor = self._connection.cursor()
        headers = {Options.RPC_CALL_HEADER_PREFIX.value + SOURCE_HEADER: self.current_source}
        authorization = self.authorization()
        if authorization is not None:
            headers[Options.RPC_CALL_HEADER_PREFIX.value + "authorization"] = authorization
        cursor.adbc_statement.set_options(**headers)
        return cursor

    def cursor(self):
        return SqeCursor(self)

    @property
    def current_source(self) -> str:
        """The model's query tag while one runs on this thread, else the profile's."""
        return getattr(_model_tag, "value", None) or self.source

    def ingest(self, table: pa.Table, catalog: str, schema: str, name: str):
        """Appends `table` to catalog.schema.name through Flight SQL bulk ingest, in record
        batches of about INGEST_BATCH_BYTES (a gRPC message has a size limit; SQE's is 16 MiB)."""
        if table.num_rows > 0:
            row_bytes = max(1, table.nbytes // table.num_rows)
            rows = max(1, INGEST_BATCH_BYTES // row_bytes)
            table = pa.Table.from_batches(table.to_batches(max_chunksize=rows), schema=table.schema)
        cursor = self.statement()
        try:
            cursor.adbc_ingest(name, table, mode="append", catalog_name=catalog, db_schema_name=schema)
        finally:
            cursor.close()

    def cancel(self):
        running = self._running
        if running is not None:
            running.adbc_cancel()

    def close(self):
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None

    def commit(self):
        pass

    def rollback(self):
        pass


class SqeCursor:
    """The result of one statement, read whole as Arrow."""

    def __init__(self, handle: SqeHandle):
        self._handle = handle
        self.sql = ""
        self.table: Optional[pa.Table] = None
        self._rows: Optional[List[tuple]] = None
        self._position = 0

    def execute(self, sql: str, bindings=None):
        self.sql = sql
        cursor = self._handle.statement()
        self._handle._running = cursor
        try:
            if bindings:
                cursor.execute(sql, parameters=bindings)
            else:
                cursor.execute(sql)
            self.table = cursor.fetch_arrow_table()
        finally:
            self._handle._running = None
            cursor.close()
        self._rows = None
        self._position = 0

    @property
    def description(self):
        if self.table is None:
            return None
        return [(f.name, f.type, None, None, None, None, f.nullable) for f in self.table.schema]

    def _all(self) -> List[tuple]:
        if self._rows is None:
            columns = [column.to_pylist() for column in self.table.columns] if self.table is not None else []
            self._rows = list(zip(*columns)) if columns else []
        return self._rows

    def fetchall(self):
        rows = self._all()[self._position :]
        self._position += len(rows)
        return rows

    def fetchmany(self, size):
        rows = self._all()[self._position : self._position + size]
        self._position += len(rows)
        return rows

    def fetchone(self):
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    @property
    def statement_kind(self) -> str:
        """The statement's first keyword (after comments), as Trino's update type names it."""
        words = without_comments(self.sql).split()
        if not words:
            return "SUCCESS"
        first = words[0].upper()
        if first in ("CREATE", "DROP", "ALTER"):
            rest = [w.upper() for w in words[1:] if w.upper() not in ("OR", "REPLACE")]
            return f"{first} {rest[0]}" if rest else first
        return first

    @property
    def rows_affected(self) -> int:
        """Rows a write changed: SQE answers INSERT, UPDATE, DELETE and MERGE with one `rows`."""
        if self.statement_kind in ("INSERT", "UPDATE", "DELETE", "MERGE") and self.table is not None:
            if self.table.num_rows == 1 and self.table.column_names == ["rows"]:
                return int(self.table.column(0)[0].as_py())
        return -1


@dataclass
class SqeAdapterResponse(AdapterResponse):
    query: str = ""


def without_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.S)


def error_message(e: Exception) -> str:
    """The server's own words from an ADBC error, without the driver's wrapping."""
    message = str(e)
    message = re.sub(r"^[A-Z_]+: \[FlightSQL\] ", "", message)
    message = re.sub(r" \([A-Za-z]+; [A-Za-z]+\)$", "", message)
    return message


class SqeConnectionManager(SQLConnectionManager):
    TYPE = "sqe"

    def __init__(self, profile, mp_context, behavior_flags=None) -> None:
        super().__init__(profile, mp_context)

    @contextmanager
    def exception_handler(self, sql):
        try:
            yield
        except adbc_driver_manager.Error as e:
            message = error_message(e)
            if isinstance(e, adbc_driver_manager.OperationalError) and (
                "connection refused" in message.lower() or "Unavailable" in str(e)
            ):
                raise FailedToConnectError(message) from e
            logger.debug(f"SQE error: {message}")
            raise DbtDatabaseError(message) from e
        except DbtRuntimeError:
            raise
        except Exception as e:
            raise DbtRuntimeError(str(e)) from e

    # Every statement commits on its own: dbt's transactions are bookkeeping only.
    def add_begin_query(self):
        pass

    def add_commit_query(self):
        pass

    @classmethod
    def open(cls, connection):
        if connection.state == "open":
            return connection
        try:
            connection.handle = SqeHandle(connection.credentials)
        except adbc_driver_manager.Error as e:
            raise FailedToConnectError(f"could not connect to SQE at {connection.credentials.uri}: {error_message(e)}") from e
        connection.state = "open"
        return connection

    @classmethod
    def get_response(cls, cursor: SqeCursor) -> SqeAdapterResponse:
        code = cursor.statement_kind
        rows = cursor.rows_affected
        message = code if rows < 0 else f"{code} ({rows:_} rows)"
        return SqeAdapterResponse(_message=message, code=code, rows_affected=rows, query=cursor.sql)

    def cancel(self, connection):
        if connection.handle is not None:
            connection.handle.cancel()

    def add_query(self, sql, auto_begin=True, bindings=None, abridge_sql_log=False):
        # dbt hands over scripts of several statements; SQE runs one per call.
        statements = [s.strip().rstrip(";") for s in sqlparse.split(sql)]
        statements = [s for s in statements if without_comments(s).strip()]
        if not statements:
            raise DbtRuntimeError(f"an empty statement was sent to SQE:\n{sql}")
        connection = cursor = None
        for statement in statements:
            connection, cursor = super().add_query(statement, auto_begin, bindings, abridge_sql_log)
        return connection, cursor

    @classmethod
    def data_type_code_to_name(cls, type_code) -> str:
        return arrow_type_name(type_code)

    def set_model_tag(self, tag: Optional[str]):
        """The query tag of the model about to run on this thread (None: the profile's again).
        dbt opens a thread's connection only at its first statement, so the tag waits here."""
        _model_tag.value = tag


def arrow_type_name(t: Any) -> str:
    """The SQL type name (Trino's spelling) of an Arrow type."""
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_int8(t):
        return "TINYINT"
    if pa.types.is_int16(t):
        return "SMALLINT"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_float32(t):
        return "REAL"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_decimal(t):
        return "DECIMAL"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "VARCHAR"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "VARBINARY"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_time(t):
        return "TIME"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP WITH TIME ZONE" if t.tz else "TIMESTAMP"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "ARRAY"
    if pa.types.is_map(t):
        return "MAP"
    if pa.types.is_struct(t):
        return "ROW"
    return str(t).upper()
