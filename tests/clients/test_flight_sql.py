"""ADBC's Flight SQL driver (adbc-driver-flightsql) against sqe-server's Arrow Flight SQL endpoint."""

import os
import subprocess

import adbc_driver_flightsql.dbapi as flight_sql
import pytest
from adbc_driver_manager import AdbcStatusCode
from adbc_driver_manager import Error as AdbcError

from conftest import ROBOT_TOKEN, TARGET, token


def connect(server, **db_kwargs):
    return flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=db_kwargs)


def fetch(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params) if params is not None else cur.execute(sql)
        return cur.fetchall()


def test_execute_and_parameters(server):
    with connect(server) as conn:
        assert fetch(conn, "SELECT 1 AS a, 'x' AS b") == [(1, "x")]
        fetch(conn, "CREATE TABLE flight_t (id bigint, name varchar)")
        fetch(conn, "INSERT INTO flight_t VALUES (1, 'one'), (2, 'two'), (3, 'it''s')")
        assert fetch(conn, "SELECT name FROM flight_t WHERE id = ?", (2,)) == [("two",)]
        assert fetch(conn, "SELECT id FROM flight_t WHERE name = ?", ("it's",)) == [(3,)]
        with pytest.raises(AdbcError) as missing:
            fetch(conn, "SELECT * FROM no_such_table")
        assert "table 'iceberg.default.no_such_table' not found" in str(missing.value)
        assert fetch(conn, "SELECT count(*) FROM flight_t") == [(3,)]


def test_metadata_calls(server):
    with connect(server) as conn:
        fetch(conn, "CREATE SCHEMA IF NOT EXISTS meta")
        fetch(conn, "CREATE TABLE meta.things (id bigint, label varchar)")
        assert conn.adbc_get_table_types() == ["TABLE", "VIEW"]
        objects = conn.adbc_get_objects(depth="tables", catalog_filter="iceberg", db_schema_filter="meta").read_all()
        catalogs = objects.to_pylist()
        assert [c["catalog_name"] for c in catalogs] == ["iceberg"]
        schemas = catalogs[0]["catalog_db_schemas"]
        assert [s["db_schema_name"] for s in schemas] == ["meta"]
        assert [t["table_name"] for t in schemas[0]["db_schema_tables"]] == ["things"]
        schema = conn.adbc_get_table_schema("things", db_schema_filter="meta")
        assert schema.names == ["id", "label"]


def test_bearer_and_password_auth(secure_server, idp):
    with connect(secure_server, **{"adbc.flight.sql.authorization_header": f"Bearer {token(idp.port)}"}) as conn:
        assert fetch(conn, "SELECT current_user") == [("alice",)]
    with connect(secure_server, username="alice", password="alice-secret") as conn:
        assert fetch(conn, "SELECT current_user") == [("alice",)]
    with pytest.raises(AdbcError) as refused:
        with connect(secure_server, username="alice", password="wrong") as conn:
            fetch(conn, "SELECT 1")
    assert refused.value.status_code == AdbcStatusCode.UNAUTHENTICATED
    assert "UNAUTHENTICATED: [FlightSQL] invalid username or password (" in str(refused.value)
    with connect(secure_server, **{"adbc.flight.sql.authorization_header": f"Bearer {ROBOT_TOKEN}"}) as conn:
        assert fetch(conn, "SELECT current_user") == [("robot",)]


def sqe_cli(server, *args, stdin=None):
    cli = os.environ.get("SQE_CLI", str(TARGET / "debug" / "sqe-cli"))
    return subprocess.run(
        [cli, "--host", "127.0.0.1", "--port", str(server.flight_port), "-f", "csv", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_shell_in_remote_mode(secure_server):
    by_token = sqe_cli(secure_server, "--token", ROBOT_TOKEN, "-e", "SELECT 1 AS one, current_user AS who")
    assert (by_token.returncode, by_token.stdout, by_token.stderr) == (0, "one,who\n1,robot\n", "")
    by_password = sqe_cli(secure_server, "--user", "alice", "-e", "SELECT current_user AS who", stdin="alice-secret\n")
    assert (by_password.returncode, by_password.stdout) == (0, "who\nalice\n")
    refused = sqe_cli(secure_server, "--token", "not-a-token", "-e", "SELECT 1")
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", "Error: malformed token\n")


def test_bad_tokens_are_unauthenticated_with_the_reason(secure_server, idp):
    cases = {
        token(idp.port, expired="true"): "token expired",
        token(idp.port, aud="someone-else"): "token audience is not accepted",
    }
    for bad, reason in cases.items():
        with pytest.raises(AdbcError) as refused:
            with connect(secure_server, **{"adbc.flight.sql.authorization_header": f"Bearer {bad}"}) as conn:
                fetch(conn, "SELECT 1")
        assert refused.value.status_code == AdbcStatusCode.UNAUTHENTICATED
        assert f"UNAUTHENTICATED: [FlightSQL] {reason} (" in str(refused.value)
        # Others keep being served, as themselves.
        with connect(secure_server, username="bob", password="bob-secret") as conn:
            assert fetch(conn, "SELECT current_user") == [("bob",)]


def test_bulk_ingest_creates_appends_and_replaces(server):
    import pyarrow as pa

    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None]})
    with connect(server) as conn:
        with conn.cursor() as cur:
            assert cur.adbc_ingest("ingested", data, mode="create") == 3
            assert fetch(conn, "SELECT id, name FROM ingested ORDER BY id") == [(1, "a"), (2, "b"), (3, None)]
            # Appending matches columns by name, whatever their order in the batch.
            more = pa.table({"name": ["d"], "id": pa.array([4], pa.int64())})
            assert cur.adbc_ingest("ingested", more, mode="append") == 1
            assert fetch(conn, "SELECT id, name FROM ingested WHERE id = 4") == [(4, "d")]
            with pytest.raises(AdbcError) as exists:
                cur.adbc_ingest("ingested", data, mode="create")
            assert "table 'iceberg.default.ingested' already exists" in str(exists.value)
            with pytest.raises(AdbcError) as missing:
                cur.adbc_ingest("not_there", data, mode="append")
            assert "table 'iceberg.default.not_there' does not exist" in str(missing.value)
            assert cur.adbc_ingest("ingested", data.slice(0, 1), mode="replace") == 1
            assert fetch(conn, "SELECT id, name FROM ingested") == [(1, "a")]
            # A type that cannot go into the column is refused, and nothing is written.
            wrong = pa.table({"id": ["not a number"], "name": ["x"]})
            with pytest.raises(AdbcError) as refused:
                cur.adbc_ingest("ingested", wrong, mode="append")
            assert "varchar" in str(refused.value), str(refused.value)
            assert fetch(conn, "SELECT count(*) FROM ingested") == [(1,)]
            fetch(conn, "CREATE SCHEMA IF NOT EXISTS landing")
            assert cur.adbc_ingest("elsewhere", data, mode="create_append", db_schema_name="landing") == 3
            assert cur.adbc_ingest("elsewhere", data, mode="create_append", db_schema_name="landing") == 3
            assert fetch(conn, "SELECT count(*) FROM landing.elsewhere") == [(6,)]


def test_executemany_binds_every_row(server):
    with connect(server) as conn:
        fetch(conn, "CREATE TABLE many (id bigint, name varchar)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO many VALUES (?, ?)", [(1, "a"), (2, "b"), (3, "c")])
        assert fetch(conn, "SELECT id, name FROM many ORDER BY id") == [(1, "a"), (2, "b"), (3, "c")]


def test_row_changes_with_parameters(server):
    """UPDATE, DELETE and MERGE through prepared statements with bound parameters, and the row
    count executeUpdate reports."""
    with connect(server) as conn:
        fetch(conn, "CREATE TABLE changed (id bigint, name varchar)")
        fetch(conn, "INSERT INTO changed VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        with conn.cursor() as cur:
            cur.executemany("UPDATE changed SET name = ? WHERE id = ?", [("A", 1), ("it's", 3)])
            # A statement with parameters runs as a query: its count comes back as its one row.
            cur.execute("DELETE FROM changed WHERE id = ?", (2,))
            assert cur.fetchall() == [(1,)]
            cur.execute(
                "MERGE INTO changed t USING (VALUES (?, ?)) AS v(id, name) ON t.id = v.id "
                "WHEN MATCHED THEN UPDATE SET name = v.name WHEN NOT MATCHED THEN INSERT VALUES (v.id, v.name)",
                (4, "d"),
            )
            assert cur.fetchall() == [(1,)]
            cur.adbc_statement.set_sql_query("UPDATE changed SET name = upper(name) WHERE id > 2")
            assert cur.adbc_statement.execute_update() == 2
        assert fetch(conn, "SELECT id, name FROM changed ORDER BY id") == [(1, "A"), (3, "IT'S"), (4, "D")]


def test_server_info(server):
    with connect(server) as conn:
        info = conn.adbc_get_info()
        assert (info["vendor_name"], info["vendor_arrow_version"]) == ("SQE", "58")
        assert info["vendor_version"].count(".") == 2


def test_session_catalog_and_schema_persist_with_the_session_cookie(server):
    with connect(server) as conn:
        fetch(conn, "CREATE SCHEMA IF NOT EXISTS sess")
        fetch(conn, "CREATE TABLE IF NOT EXISTS sess.marker (v varchar)")
        fetch(conn, "INSERT INTO sess.marker VALUES ('in sess')")
    with connect(server, **{"adbc.flight.sql.rpc.with_cookie_middleware": "true"}) as conn:
        conn.adbc_current_db_schema = "sess"
        assert conn.adbc_current_db_schema == "sess"
        assert fetch(conn, "SELECT v FROM marker") == [("in sess",)]
        # USE moves the session as well.
        fetch(conn, "USE iceberg.default")
        assert conn.adbc_current_db_schema == "default"
        with pytest.raises(AdbcError):
            fetch(conn, "SELECT v FROM marker")
        with pytest.raises(AdbcError) as bad:
            conn.adbc_current_db_schema = "no_such_schema"
        assert "schema" in str(bad.value)
        assert conn.adbc_current_db_schema == "default"
    # Without the cookie every call starts from the defaults.
    with connect(server) as conn:
        fetch(conn, "USE iceberg.sess")
        with pytest.raises(AdbcError):
            fetch(conn, "SELECT v FROM marker")


@pytest.mark.parametrize("auth", ["bearer", "password"])
def test_the_whole_workflow_as_an_authenticated_user(secure_server, idp, auth):
    """What a user does over ADBC, signed in with a bearer token or with a username and password:
    every statement runs as that user."""
    import pyarrow as pa

    kwargs = (
        {"adbc.flight.sql.authorization_header": f"Bearer {token(idp.port)}"}
        if auth == "bearer"
        else {"username": "alice", "password": "alice-secret"}
    )
    schema = f"wf_{auth}"
    with connect(secure_server, **kwargs) as conn:
        assert fetch(conn, "SELECT current_user") == [("alice",)]
        fetch(conn, f"CREATE SCHEMA {schema}")
        fetch(conn, f"CREATE TABLE {schema}.t (id bigint, name varchar)")
        fetch(conn, f"INSERT INTO {schema}.t VALUES (1, 'one'), (2, 'two')")
        assert fetch(conn, f"SELECT name FROM {schema}.t WHERE id = ?", (2,)) == [("two",)]
        objects = conn.adbc_get_objects(depth="tables", catalog_filter="iceberg", db_schema_filter=schema).read_all()
        tables = objects.to_pylist()[0]["catalog_db_schemas"][0]["db_schema_tables"]
        assert [t["table_name"] for t in tables] == ["t"]
        assert conn.adbc_get_table_types() == ["TABLE", "VIEW"]
        with conn.cursor() as cur:
            data = pa.table({"id": pa.array([7, 8], pa.int64()), "note": ["x", None]})
            assert cur.adbc_ingest("loaded", data, mode="create", db_schema_name=schema) == 2
        assert fetch(conn, f"SELECT id, note FROM {schema}.loaded ORDER BY id") == [(7, "x"), (8, None)]
        users = fetch(
            conn,
            f"SELECT DISTINCT \"user\" FROM system.runtime.queries WHERE query LIKE '%{schema}%'",
        )
        assert users == [("alice",)]


def test_strings_arrive_as_classic_arrow_strings(server):
    # The engine scans strings as Utf8View; the wire carries Arrow's classic string type, which
    # every Flight SQL client reads.
    with connect(server) as conn:
        fetch(conn, "CREATE TABLE wire_types (id bigint, name varchar)")
        fetch(conn, "INSERT INTO wire_types VALUES (1, 'a')")
        with conn.cursor() as cur:
            cur.execute("SELECT id, name, CAST(id AS varchar) AS t FROM wire_types")
            table = cur.fetch_arrow_table()
        assert [str(t) for t in table.schema.types] == ["int64", "string", "string"]
        assert table.to_pylist() == [{"id": 1, "name": "a", "t": "1"}]


def test_a_zone_per_value_arrives_as_the_instant_and_its_zone(server):
    # Arrow's timestamp has one zone for a column: a column whose values each keep their own zone
    # arrives as a struct of the instant (UTC) and the zone's name; one with a single zone as a
    # timestamp in that zone.
    from datetime import datetime, timezone

    with connect(server) as conn:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT from_iso8601_timestamp(s) AS each, TIMESTAMP '2020-05-11 23:15:05.000 Asia/Tokyo' AS one "
                "FROM (VALUES '2020-05-11T23:15:05+01:00', '2020-05-11T23:15:05-05:00') t(s) ORDER BY each"
            )
            table = cur.fetch_arrow_table()
    assert [str(t) for t in table.schema.types] == [
        "struct<instant: timestamp[ms, tz=UTC], zone: string>",
        "timestamp[ms, tz=Asia/Tokyo]",
    ]
    each = table.column("each").to_pylist()
    assert [(v["instant"], v["zone"]) for v in each] == [
        (datetime(2020, 5, 11, 22, 15, 5, tzinfo=timezone.utc), "+01:00"),
        (datetime(2020, 5, 12, 4, 15, 5, tzinfo=timezone.utc), "-05:00"),
    ]
