"""A real PostgreSQL 15 server for the JDBC-style Iceberg catalog tests (test_jdbc_catalog.py).

`initdb` makes a fresh cluster in a temporary directory (trust auth, superuser `postgres`, UTF8, C
locale); `pg_ctl` starts it listening on 127.0.0.1 only, on a free port, with its Unix socket inside
the data directory; database `iceberg` is created with `psql`. At the end `pg_ctl stop -m fast`, and
the postmaster is killed by its PID if that fails.

PostgreSQL refuses to run as root, and the tests run as root (CI too). Then the cluster belongs to an
unprivileged user: `nobody` if it exists (else a system user `sqepg` is created once), and initdb /
pg_ctl run as that user through `runuser -u USER --` (or `setpriv` if there is no runuser). The
temporary directory is made under /tmp (not pytest's root-only tmp tree) and chowned to that user.
Clients (psql, SQE, pyiceberg) connect over TCP as `postgres` and need no password.

The fixture yields a `Postgres`: `host`, `port`, `user`, `dbname`, `uri`
("postgresql://postgres@127.0.0.1:PORT/iceberg"), `sqlalchemy_uri` (the same for pyiceberg's
SqlCatalog, driver psycopg2), `uri_of(db)` / `sqlalchemy_uri_of(db)`, `create_database(name)`,
`psql(sql)` (rows as lists of strings, NULL as None), `catalog_toml(name, warehouse)` (an SQE
`[catalogs.NAME] type = "jdbc"` section) and `outage()`, a context manager that stops the server and
starts it again on the same port and data directory.

Use it from a test module with `from postgres import postgres  # noqa: F401`.
"""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

# Where initdb / pg_ctl are looked for: $SQE_PG_BIN, /usr/local/bin, $PATH, then Debian's
# /usr/lib/postgresql/<version>/bin (the `postgresql` package puts them only there).
SEARCH_PATH = os.pathsep.join(
    [os.environ.get("SQE_PG_BIN", ""), "/usr/local/bin", os.environ.get("PATH", "")]
    + [str(p) for p in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)]
)


def program(name: str) -> str:
    found = shutil.which(name, path=SEARCH_PATH)
    if found is None:
        pytest.fail(f"{name} not found (install PostgreSQL 15: apt-get install postgresql, or set SQE_PG_BIN)")
    return found

HOST = "127.0.0.1"
SUPERUSER = "postgres"
DATABASE = "iceberg"
FALLBACK_OS_USER = "sqepg"
SEPARATOR = "\x1f"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def os_user():
    """The unprivileged account the cluster runs as when we are root: `nobody`, or `sqepg`
    (created here, once, if neither exists)."""
    for name in ("nobody", FALLBACK_OS_USER):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", FALLBACK_OS_USER], check=True)
    return pwd.getpwnam(FALLBACK_OS_USER)


def as_user(account) -> list:
    """The command prefix that runs a program as `account` (nothing when we are not root)."""
    if account is None:
        return []
    if shutil.which("runuser"):
        return ["runuser", "-u", account.pw_name, "--"]
    return ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", "--"]


class Postgres:
    def __init__(self, root: Path, account):
        self.root = root
        self.data_dir = root / "data"
        self.log_path = root / "postgres.log"
        self.account = account
        self.host = HOST
        self.port = free_port()
        self.user = SUPERUSER
        self.dbname = DATABASE

    # Addresses.

    def uri_of(self, dbname: str) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    def sqlalchemy_uri_of(self, dbname: str) -> str:
        return f"postgresql+psycopg2://{self.user}@{self.host}:{self.port}/{dbname}"

    @property
    def uri(self) -> str:
        return self.uri_of(self.dbname)

    @property
    def sqlalchemy_uri(self) -> str:
        return self.sqlalchemy_uri_of(self.dbname)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def catalog_toml(self, name: str, warehouse, dbname: str | None = None) -> str:
        """An SQE catalog section mounting this database as `name`, new tables' files under `warehouse`."""
        return (
            f"\n[catalogs.{name}]\n"
            'type = "jdbc"\n'
            f'uri = "{self.uri_of(dbname or self.dbname)}"\n'
            f'warehouse = "{warehouse}"\n'
        )

    # Running it.

    def _run(self, *command, check=True, timeout=120):
        result = subprocess.run(
            [*as_user(self.account), *command],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            pytest.fail(f"{' '.join(map(str, command))} failed ({result.returncode}):\n{result.stdout}\n{self.log()}")
        return result

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def init(self):
        self._run(program("initdb"), "-D", self.data_dir, "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--locale=C")
        settings = (
            "\n# sqe tests\n"
            f"listen_addresses = '{HOST}'\n"
            f"port = {self.port}\n"
            f"unix_socket_directories = '{self.data_dir}'\n"
            # Throwaway data: no need to wait for the disk.
            "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
        )
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            conf.write(settings)

    def start(self):
        self._run(program("pg_ctl"), "-D", self.data_dir, "-l", self.log_path, "-w", "-t", "60", "start")

    def pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def stop(self):
        pid = self.pid()
        if pid is None:
            return
        result = self._run(program("pg_ctl"), "-D", self.data_dir, "-m", "fast", "-w", "-t", "30", "stop", check=False)
        if result.returncode != 0:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            (self.data_dir / "postmaster.pid").unlink(missing_ok=True)

    @contextmanager
    def outage(self):
        """PostgreSQL is down inside the block; it comes back on the same port with the same data."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    # Talking to it.

    def psql(self, sql: str, dbname: str | None = None) -> list:
        """Runs `sql` with psql over TCP; the rows, each a list of strings (None for NULL)."""
        result = subprocess.run(
            [
                program("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-P", "null=\\N", "-F", SEPARATOR,
                "-h", self.host, "-p", str(self.port), "-U", self.user, "-d", dbname or self.dbname, "-c", sql,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql failed ({result.returncode}) on {sql!r}: {result.stderr}")
        return [
            [None if value == "\\N" else value for value in line.split(SEPARATOR)]
            for line in result.stdout.splitlines()
            if line
        ]

    def create_database(self, name: str):
        self.psql(f'CREATE DATABASE "{name}"', dbname="postgres")


@contextmanager
def running_postgres():
    account = os_user() if os.geteuid() == 0 else None
    # Not under pytest's tmp tree: that is root-only (0700), and the cluster's user must reach it.
    root = Path(tempfile.mkdtemp(prefix="sqe-pg-", dir="/tmp" if account else None))
    if account:
        os.chown(root, account.pw_uid, account.pw_gid)
    pg = Postgres(root, account)
    try:
        pg.init()
        pg.start()
        pg.create_database(pg.dbname)
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres():
    with running_postgres() as pg:
        yield pg
