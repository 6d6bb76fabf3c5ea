"""A real Hive Metastore 2.3 (Thrift) for the HMS catalog tests (test_hms_catalog.py).

The metastore is Hive's own `HiveMetaStore` server, from the jars PyPI `pyspark==4.3.0` ships
(hive-metastore-2.3.10 and friends), run by the machine's Java 17 (a JDK: it starts through a small
launcher given as a source file, see LAUNCHER). Its state lives in a fresh
temporary directory: conf/hive-site.xml, an embedded Derby database (metastore_db, schema created by
DataNucleus on first use) and the warehouse directory, where namespaces get their default location.

HMS listens on every interface and has no option against it, while test servers here may only be
reachable on 127.0.0.1. So it runs in a network namespace of its own (`unshare --net`, only `lo`,
brought up here), where no real interface exists, and is reached through two relays that meet on a
Unix socket in the temporary directory (the filesystem is the same in both namespaces):

    client -> 127.0.0.1:PORT (relay thread in this process)
           -> <tmp>/hms.sock (relay in the namespace: `python hms.py inside SOCK PORT -- java ...`)
           -> 127.0.0.1:9083 in the namespace (HMS)

The inner relay process also brings `lo` up and starts Java as its child, so the whole server is one
process group, stopped by its id (SIGTERM, then SIGKILL) when the context ends or startup fails.
Readiness is a real Thrift call, `get_all_databases`, answered through both relays.

    with HiveMetastore() as hms:
        hms.uri         # "thrift://127.0.0.1:PORT"
        hms.warehouse   # "file:///tmp/sqe-hms-.../warehouse"

Standard library only (the inner relay runs with no third-party package at all).
"""

import fcntl
import importlib.util
import os
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from xml.sax.saxutils import escape

HOST = "127.0.0.1"
INNER_PORT = 9083  # HMS's port inside its own namespace; nothing else listens there
START_TIMEOUT = 180  # seconds; it takes ~12-17 s on 2 busy cores (JVM, launcher compile, Derby schema)
JAVA_OPTIONS = ["-Xmx512m", "-XX:+UseSerialGC"]


def pyspark_jars() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed (pip install -r tests/clients/requirements.txt)")
    return Path(spec.origin).parent / "jars"


def hive_site(root: Path) -> str:
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "hive.metastore.warehouse.dir": f"file://{root / 'warehouse'}",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        # Hive's log4j2 async logger needs the LMAX disruptor, which is not among the jars.
        "hive.async.log.enabled": "false",
        # The default pool, BoneCP, is not among the jars (HMS falls back; the lock tables' pool does not).
        "datanucleus.connectionPoolingType": "HikariCP",
    }
    properties = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in settings.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{properties}</configuration>\n'


# DataNucleus creates the metastore's own tables, but not the ACID ones (TXNS, HIVE_LOCKS, ...) that
# lock() / check_lock() / unlock() use, and pyiceberg takes a table lock around every commit. Hive makes
# those only with hive.in.test=true, which also makes lock() refuse pyiceberg's requests (their
# operationType is UNSET). So HMS starts through this launcher (run by Java's source-file mode): it
# creates the ACID tables with Hive's own TxnDbUtil, then runs HiveMetaStore.main as usual.
LAUNCHER = """\
public class StartMetastore {
    public static void main(String[] args) throws Throwable {
        org.apache.hadoop.hive.metastore.txn.TxnDbUtil.prepDb(new org.apache.hadoop.hive.conf.HiveConf());
        org.apache.hadoop.hive.metastore.HiveMetaStore.main(args);
    }
}
"""


# Relays. Each connection is two threads copying bytes, one per direction.


def pump(source: socket.socket, sink: socket.socket):
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def splice(a: socket.socket, b: socket.socket):
    back = threading.Thread(target=pump, args=(b, a), daemon=True)
    back.start()
    pump(a, b)
    back.join()
    a.close()
    b.close()


class RelayHandler(socketserver.BaseRequestHandler):
    def handle(self):
        try:
            upstream = self.server.connect()
        except OSError:
            return
        splice(self.request, upstream)


class OuterRelay(socketserver.ThreadingTCPServer):
    """127.0.0.1:<free port> in this process -> the Unix socket."""

    daemon_threads = True

    def __init__(self, unix_path: str):
        self.unix_path = unix_path
        super().__init__((HOST, 0), RelayHandler)

    def connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.unix_path)
        return s


class InnerRelay(socketserver.ThreadingUnixStreamServer):
    """The Unix socket -> 127.0.0.1:port, inside the namespace."""

    daemon_threads = True

    def __init__(self, unix_path: str, port: int):
        self.port = port
        super().__init__(unix_path, RelayHandler)

    def connect(self) -> socket.socket:
        s = socket.create_connection((HOST, self.port), timeout=30)
        s.settimeout(None)  # a client may keep an idle connection open for as long as it likes
        return s


def loopback_up():
    """`ip link set lo up`, without needing iproute2: SIOCGIFFLAGS, set IFF_UP, SIOCSIFFLAGS."""
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0))
        flags = struct.unpack("16sH", request[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def inside(unix_path: str, port: int, command: list) -> int:
    """The namespace side: lo up, the server as a child, the Unix-socket relay until the server exits."""
    loopback_up()
    server = subprocess.Popen(command)
    relay = InnerRelay(unix_path, port)
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    return server.wait()


# A minimal Thrift client (TBinaryProtocol, strict, unframed) for the readiness check.


def get_all_databases(port: int, timeout: float = 10) -> list:
    """ThriftHiveMetastore.get_all_databases() on 127.0.0.1:port; the database names."""
    name = b"get_all_databases"
    call = struct.pack(">Ii", 0x80010001, len(name)) + name + struct.pack(">i", 1) + b"\x00"  # CALL, seqid 1, no args
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(call)
        reader = s.makefile("rb")

        def take(fmt):
            size = struct.calcsize(fmt)
            data = reader.read(size)
            if len(data) != size:
                raise ConnectionError("HMS closed the connection")
            return struct.unpack(fmt, data)[0]

        def string():
            return reader.read(take(">i")).decode()

        if take(">I") != 0x80010002:  # REPLY (an EXCEPTION message is 0x80010003)
            raise ConnectionError("HMS did not answer get_all_databases with a reply")
        string(), take(">i")  # method name, seqid
        names = []
        while (field_type := take(">b")) != 0:  # result struct up to STOP
            field_id = take(">h")
            if field_id != 0 or field_type != 15:  # 0: success, list<string>; 1: MetaException
                raise ConnectionError(f"get_all_databases failed (result field {field_id})")
            take(">b")  # element type: string (11)
            names = [string() for _ in range(take(">i"))]
        return names


class HiveMetastore:
    def __init__(self, start_timeout: float = START_TIMEOUT):
        self.start_timeout = start_timeout
        self.root = None
        self.process = None
        self.relay = None
        self.port = None
        self.startup_seconds = None

    @property
    def uri(self) -> str:
        return f"thrift://{HOST}:{self.port}"

    @property
    def warehouse(self) -> str:
        return f"file://{self.root / 'warehouse'}"

    @property
    def log_path(self) -> Path:
        return self.root / "hms.log"

    def log(self, lines: int = 60) -> str:
        try:
            return "".join(self.log_path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        except OSError:
            return ""

    def peak_memory_kib(self) -> int | None:
        """VmHWM (peak resident set) of the Java process, in KiB."""
        try:
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
            for line in Path(f"/proc/{children[0]}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except (OSError, IndexError, ValueError):
            return None
        return None

    def __enter__(self):
        self.root = Path(tempfile.mkdtemp(prefix="sqe-hms-"))
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self):
        java = shutil.which("java", path=os.pathsep.join([f"{os.environ.get('JAVA_HOME', '')}/bin", os.environ.get("PATH", "")]))
        if java is None:
            raise RuntimeError("java not found (Hive Metastore 2.3 needs Java 17: apt-get install openjdk-17-jdk-headless)")
        jars = pyspark_jars()
        (self.root / "conf").mkdir()
        (self.root / "conf" / "hive-site.xml").write_text(hive_site(self.root))
        (self.root / "StartMetastore.java").write_text(LAUNCHER)
        unix_path = str(self.root / "hms.sock")
        server = [
            java, *JAVA_OPTIONS,
            "-Dhive.root.logger=console", f"-Dhive.log.dir={self.root}",  # Hive's log to stderr, not /tmp/<user>
            f"-Dderby.stream.error.file={self.root / 'derby.log'}",
            "-cp", f"{self.root / 'conf'}:{jars}/*",
            str(self.root / "StartMetastore.java"), "-p", str(INNER_PORT),
        ]
        unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--net", "--map-root-user"]
        command = [*unshare, sys.executable, str(Path(__file__).resolve()), "inside", unix_path, str(INNER_PORT), "--", *server]
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, cwd=self.root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped as one
            )
        self.relay = OuterRelay(unix_path)
        self.port = self.relay.server_address[1]
        threading.Thread(target=self.relay.serve_forever, daemon=True).start()
        while True:
            try:
                if "default" in get_all_databases(self.port):
                    self.startup_seconds = time.monotonic() - started
                    return
            except OSError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"Hive Metastore exited ({self.process.returncode}) while starting:\n{self.log()}")
            if time.monotonic() - started > self.start_timeout:
                raise RuntimeError(f"Hive Metastore did not answer within {self.start_timeout} s:\n{self.log()}")
            time.sleep(0.5)

    def __exit__(self, *exc):
        if self.relay is not None:
            self.relay.shutdown()
            self.relay.server_close()
            self.relay = None
        if self.process is not None:
            group = self.process.pid  # start_new_session: the group's id is the leader's pid
            for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                try:
                    os.killpg(group, sig)
                except ProcessLookupError:
                    break
                if self._group_gone(group, grace):
                    break
            self.process.wait()
            self.process = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
        return False

    def _group_gone(self, group: int, grace: float) -> bool:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self.process.poll()  # reap the leader, or it stays a zombie in the group
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.1)
        return False


if __name__ == "__main__":
    # python hms.py inside UNIX_SOCKET PORT -- COMMAND...
    if len(sys.argv) > 5 and sys.argv[1] == "inside" and sys.argv[4] == "--":
        sys.exit(inside(sys.argv[2], int(sys.argv[3]), sys.argv[5:]))
    sys.exit("usage: hms.py inside UNIX_SOCKET PORT -- COMMAND...")
