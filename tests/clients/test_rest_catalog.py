"""An Iceberg REST catalog reached with each caller's own token ("passthrough").

A real REST catalog (lakana-server) sits behind a recording proxy (rest_catalog.py) that accepts only
the test IdP's JWTs, records whose token every request carried, and forwards it with that user's own
lakana token; lakana lets alice create, write and read in namespace bronze and refuses bob there
(403 PermissionDenied). What is proven:

- The fixture itself: pyiceberg through the proxy works as alice and is refused as bob, each request
  recorded under the right user; the proxy refuses (401/403, not forwarded) what it cannot verify.
- sqe-server with `[catalogs.lake] type = "rest", auth = "passthrough"`: over Trino HTTP and over
  Flight SQL (ADBC), alice creates, inserts and reads `lake.bronze.*` and every catalog request made
  for her statements carries her token; bob's read is refused by the catalog and every request made
  for it carries his token; no request ever reaches the catalog without a user's token.
- SQE and pyiceberg read each other's rows through the same catalog, and SQE time-travels on a REST
  table to a snapshot id the catalog reports.
- Views live in the catalog through the REST spec's view endpoints (served by the fixture's proxy,
  as lakana has none): SQE creates, lists (over pages), reads, replaces and drops them with alice's
  token; pyiceberg reads SQE's view and SQE reads pyiceberg's; bob can neither read nor make views
  where lakana refuses him; a catalog whose config lists no view endpoints keeps none.
- A token that has expired gets an authentication error over both protocols and reaches no catalog,
  even right after the same user's live token made a client.
- The catalog going away: a statement that needs it fails naming the catalog and its endpoint, the
  server serves on, and once the catalog is back the next statement succeeds.
- Table data on a real S3 server (moto_server; environment `s3dev`, storage root s3://bucket/warehouse,
  the catalog vending no credentials): pyiceberg, then sqe-server (`[catalogs.s3lake]` with the S3
  FileIO properties), write and read there; the objects are in the bucket; SQE and pyiceberg read each
  other's rows; bob is refused; the S3 endpoint going away fails a read naming it, the server serves
  on, and the read succeeds once the endpoint is back.
"""

import csv
import io
import os
import re
import subprocess

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pytest
import requests
import trino
from adbc_driver_manager import Error as AdbcError
from pyiceberg.exceptions import ForbiddenError
from trino.auth import JWTAuthentication
from trino.exceptions import TrinoQueryError

from conftest import TARGET, start_server, token
from rest_catalog import INVALID_TOKEN, NO_TOKEN, V3_ENVIRONMENT, Request, rest_catalog  # noqa: F401

AUTH = (
    "[auth]\nallow_anonymous = false\n\n"
    '[auth.oidc]\nissuer = "http://127.0.0.1:{port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
)

# lakana refuses bob with 403 {"error": {"message": "'bob' may not READ_TABLE this.", "type":
# "PermissionDenied", "code": 403}} (READ_NAMESPACE if the namespace is asked first); SQE may word its
# error its own way but must carry the refusal.
REFUSAL = re.compile(r"may not READ_|PermissionDenied|Forbidden|\b403\b", re.IGNORECASE)

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def jwt_of(idp, user):
    return token(idp.port, username=user, password=f"{user}-secret")


def users(records):
    return {r.user for r in records}


def trino_sql(server, idp, user, sql):
    conn = trino.dbapi.connect(
        host="127.0.0.1",
        port=server.http_port,
        user=user,
        http_scheme="http",
        auth=JWTAuthentication(jwt_of(idp, user)),
        allow_insecure_auth=True,
    )
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


def flight_sql_rows(server, idp, user, sql):
    bearer = {"adbc.flight.sql.authorization_header": f"Bearer {jwt_of(idp, user)}"}
    with flight_sql.connect(f"grpc://127.0.0.1:{server.flight_port}", db_kwargs=bearer) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()


def serving(tmp_path_factory, idp, rest_catalog, name, toml):
    """sqe-server with OIDC (the test IdP) and `toml` added to its configuration, stopped when the
    module is done. `first_record` is where the proxy's record stood before the server started."""
    first_record = rest_catalog.records.mark()
    s = start_server(tmp_path_factory.mktemp(name), AUTH.format(port=idp.port) + toml)
    s.first_record = first_record
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def sqe(tmp_path_factory, idp, rest_catalog):
    """The REST catalog mounted as `lake`, by passthrough; its environment of format version 3 tables
    (kept by the proxy) as `v3lake`; and lakana itself, without the proxy (so without view endpoints)
    and without a token, as `plain`."""
    plain = f'[catalogs.plain]\ntype = "rest"\nuri = "{rest_catalog.lakana_url}"\nprefix = "dev"\nauth = "none"\n\n'
    v3 = rest_catalog.catalog_toml(name="v3lake", prefix=V3_ENVIRONMENT)
    yield from serving(tmp_path_factory, idp, rest_catalog, "sqe-rest", rest_catalog.catalog_toml() + v3 + plain)


# The fixture, with pyiceberg alone.


def test_proxy_forwards_each_users_own_token_pyiceberg(rest_catalog, idp):
    records = rest_catalog.records
    mark = records.mark()
    alice = rest_catalog.pyiceberg(jwt_of(idp, "alice"))
    alice.create_table("bronze.t1", schema=SCHEMA).append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA))
    assert alice.load_table("bronze.t1").scan().to_arrow().to_pylist() == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
    ]
    by_alice = records.since(mark)
    assert users(by_alice) == {"alice"}
    assert Request("GET", "/v1/config", "alice", 200) in by_alice
    assert Request("POST", "/v1/dev/namespaces/bronze/tables", "alice", 200) in by_alice
    assert Request("POST", "/v1/dev/namespaces/bronze/tables/t1", "alice", 200) in by_alice
    assert list(rest_catalog.warehouse.rglob("*.parquet"))

    mark = records.mark()
    with pytest.raises(ForbiddenError, match=r"PermissionDenied: 'bob' may not READ_TABLE this\."):
        rest_catalog.pyiceberg(jwt_of(idp, "bob")).load_table("bronze.t1")
    by_bob = records.since(mark)
    assert by_bob == [
        Request("GET", "/v1/config", "bob", 200),
        Request("GET", "/v1/dev/namespaces/bronze/tables/t1", "bob", 403),
    ]


def test_proxy_refuses_what_it_cannot_verify(rest_catalog, idp):
    url = f"{rest_catalog.proxy_url}/v1/config"  # lakana itself answers this one without a token

    def status(authorization=None):
        headers = {"Authorization": authorization} if authorization else {}
        response = requests.get(url, headers=headers, timeout=30)
        return response.status_code, response.json()["error"]["type"]

    mark = rest_catalog.records.mark()
    assert status() == (401, "NotAuthorizedException")
    assert status("Bearer not-a-jwt") == (401, "NotAuthorizedException")
    assert status(f"Bearer {token(idp.port, expired='true')}") == (401, "NotAuthorizedException")
    assert status(f"Bearer {token(idp.port, aud='other')}") == (401, "NotAuthorizedException")
    # alice's own lakana token is good at lakana, but not an IdP token: the proxy does not take it.
    assert status(f"Bearer {rest_catalog.tokens['alice']}") == (401, "NotAuthorizedException")
    # ada is a real IdP user with no principal in the catalog.
    assert status(f"Bearer {jwt_of(idp, 'ada')}") == (403, "ForbiddenException")
    assert [r.user for r in rest_catalog.records.since(mark)] == [NO_TOKEN] + [INVALID_TOKEN] * 4 + ["ada"]


# sqe-server with the catalog mounted by passthrough.


def test_trino_alice_writes_and_reads_bob_is_refused_each_with_own_token(sqe, idp, rest_catalog):
    records = rest_catalog.records
    mark = records.mark()
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.events (id BIGINT, name VARCHAR)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.events VALUES (1, 'a'), (2, 'b')")
    assert trino_sql(sqe, idp, "alice", "SELECT * FROM lake.bronze.events ORDER BY id") == [[1, "a"], [2, "b"]]
    by_alice = records.since(mark)
    assert users(by_alice) == {"alice"}
    assert Request("POST", "/v1/dev/namespaces/bronze/tables", "alice", 200) in by_alice

    mark = records.mark()
    with pytest.raises(TrinoQueryError) as refused:
        trino_sql(sqe, idp, "bob", "SELECT * FROM lake.bronze.events")
    assert REFUSAL.search(str(refused.value)), str(refused.value)
    assert users(records.since(mark)) == {"bob"}

    assert not users(records.since(sqe.first_record)) & {NO_TOKEN, INVALID_TOKEN}


def test_flight_sql_alice_reads_bob_is_refused_each_with_own_token(sqe, idp, rest_catalog):
    records = rest_catalog.records
    mark = records.mark()
    flight_sql_rows(sqe, idp, "alice", "CREATE TABLE lake.bronze.flight_events (id BIGINT, name VARCHAR)")
    flight_sql_rows(sqe, idp, "alice", "INSERT INTO lake.bronze.flight_events VALUES (1, 'a'), (2, 'b')")
    rows = flight_sql_rows(sqe, idp, "alice", "SELECT * FROM lake.bronze.flight_events ORDER BY id")
    assert rows == [(1, "a"), (2, "b")]
    assert users(records.since(mark)) == {"alice"}

    mark = records.mark()
    with pytest.raises(AdbcError) as refused:
        flight_sql_rows(sqe, idp, "bob", "SELECT * FROM lake.bronze.flight_events")
    assert REFUSAL.search(str(refused.value)), str(refused.value)
    assert users(records.since(mark)) == {"bob"}

    assert not users(records.since(sqe.first_record)) & {NO_TOKEN, INVALID_TOKEN}


def test_sqe_and_pyiceberg_read_each_others_rows(sqe, idp, rest_catalog):
    mark = rest_catalog.records.mark()
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.from_sqe (id BIGINT, name VARCHAR)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.from_sqe VALUES (1, 'x'), (2, 'y')")
    pyiceberg = rest_catalog.pyiceberg(jwt_of(idp, "alice"))
    assert pyiceberg.load_table("bronze.from_sqe").scan().to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "name": "x"},
        {"id": 2, "name": "y"},
    ]

    table = pyiceberg.create_table("bronze.from_py", schema=SCHEMA)
    table.append(pa.table({"id": [10, 20, 30], "name": ["p", "q", None]}, schema=SCHEMA))
    assert trino_sql(sqe, idp, "alice", "SELECT id, name FROM lake.bronze.from_py ORDER BY id") == [
        [10, "p"],
        [20, "q"],
        [30, None],
    ]
    assert users(rest_catalog.records.since(mark)) == {"alice"}


def test_time_travel_on_a_rest_table(sqe, idp, rest_catalog):
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.versioned (id BIGINT, name VARCHAR)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.versioned VALUES (1, 'a'), (2, 'b')")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.versioned VALUES (3, 'c')")
    snapshots = trino_sql(
        sqe, idp, "alice", 'SELECT snapshot_id, parent_id FROM lake.bronze."versioned$snapshots" ORDER BY committed_at'
    )
    (first, no_parent), (second, parent) = snapshots
    assert (no_parent, parent) == (None, first)
    # The same snapshots as the catalog reports to pyiceberg.
    catalogued = rest_catalog.pyiceberg(jwt_of(idp, "alice")).load_table("bronze.versioned").snapshots()
    assert [s.snapshot_id for s in catalogued] == [first, second]

    sql = f"SELECT count(*) FROM lake.bronze.versioned FOR VERSION AS OF {first}"
    assert trino_sql(sqe, idp, "alice", sql) == [[2]]
    assert trino_sql(sqe, idp, "alice", "SELECT count(*) FROM lake.bronze.versioned") == [[3]]


def test_views_live_in_the_catalog_through_its_view_endpoints(sqe, idp, rest_catalog):
    records = rest_catalog.records
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.orders (id BIGINT, amount BIGINT)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.orders VALUES (1, 10), (2, 20), (3, 30)")
    mark = records.mark()
    body = "SELECT id, amount FROM orders WHERE amount > 15"
    trino_sql(sqe, idp, "alice", f"CREATE VIEW lake.bronze.big_orders COMMENT 'over 15' AS {body}")
    assert Request("POST", "/v1/dev/namespaces/bronze/views", "alice", 200) in records.since(mark)
    assert trino_sql(sqe, idp, "alice", "SELECT * FROM lake.bronze.big_orders ORDER BY id") == [[2, 20], [3, 30]]
    assert flight_sql_rows(sqe, idp, "alice", "SELECT * FROM lake.bronze.big_orders ORDER BY id") == [(2, 20), (3, 30)]
    for name in ("all_orders", "one_order"):
        trino_sql(sqe, idp, "alice", f"CREATE VIEW lake.bronze.{name} AS SELECT id FROM orders")
    # The proxy lists two views a page: three views take two pages.
    tables = [r[0] for r in trino_sql(sqe, idp, "alice", "SHOW TABLES FROM lake.bronze")]
    assert {"orders", "big_orders", "all_orders", "one_order"} <= set(tables), tables
    described = trino_sql(sqe, idp, "alice", "DESCRIBE lake.bronze.big_orders")
    assert [row[:2] for row in described] == [["id", "bigint"], ["amount", "bigint"]]
    # lakana refuses alice a listing of all namespaces; the metadata tables list the one she names.
    listed = trino_sql(
        sqe, idp, "alice",
        "SELECT table_name, view_definition FROM lake.information_schema.views "
        "WHERE table_schema = 'bronze' ORDER BY table_name",
    )
    assert listed == [["all_orders", "SELECT id FROM orders"], ["big_orders", body], ["one_order", "SELECT id FROM orders"]]
    kinds = trino_sql(
        sqe, idp, "alice",
        "SELECT table_name, table_type FROM lake.information_schema.tables WHERE table_schema IN ('bronze', 'gold') "
        "AND table_name IN ('orders', 'big_orders') ORDER BY table_name",
    )
    assert kinds == [["big_orders", "VIEW"], ["orders", "BASE TABLE"]]
    # A schema is listed as the catalog spells it, never as the query does.
    assert trino_sql(sqe, idp, "alice", "SELECT count(*) FROM lake.information_schema.tables WHERE table_schema = 'BRONZE'") == [[0]]
    columns_mark = records.mark()
    columns = trino_sql(
        sqe, idp, "alice",
        "SELECT column_name, data_type FROM lake.information_schema.columns "
        "WHERE table_schema = 'bronze' AND table_name = 'orders' ORDER BY ordinal_position",
    )
    assert columns == [["id", "bigint"], ["amount", "bigint"]]
    # Only the table asked about was read.
    loaded = {r.path for r in records.since(columns_mark) if "/tables/" in r.path or "/views/" in r.path}
    assert loaded <= {"/v1/dev/namespaces/bronze/tables/orders", "/v1/dev/namespaces/bronze/views/orders"}, loaded
    (created,) = trino_sql(sqe, idp, "alice", "SHOW CREATE VIEW lake.bronze.big_orders")[0]
    assert created == f"CREATE VIEW lake.bronze.big_orders COMMENT 'over 15' SECURITY INVOKER AS\n{body}"

    # Iceberg's view spec, as pyiceberg reads it from the catalog.
    view = rest_catalog.pyiceberg(jwt_of(idp, "alice")).load_view("bronze.big_orders")
    version = next(v for v in view.metadata.versions if v.version_id == view.metadata.current_version_id)
    (representation,) = version.representations
    assert (representation.root.sql, representation.root.dialect) == (body, "trino")
    assert (version.default_catalog, tuple(version.default_namespace)) == ("lake", ("bronze",))
    schema = next(s for s in view.metadata.schemas if s.schema_id == version.schema_id)
    assert [f.name for f in schema.fields] == ["id", "amount"]
    assert view.metadata.properties["comment"] == "over 15"
    assert view.metadata.properties["owner"] == "alice"

    # CREATE OR REPLACE adds a version and a schema; the comment goes with the old version.
    trino_sql(sqe, idp, "alice", "CREATE OR REPLACE VIEW lake.bronze.big_orders AS SELECT id FROM orders WHERE amount > 25")
    assert trino_sql(sqe, idp, "alice", "SELECT * FROM lake.bronze.big_orders") == [[3]]
    kept = rest_catalog.proxy.views.load("dev", ("bronze",), "big_orders")["metadata"]
    assert (len(kept["versions"]), kept["current-version-id"], len(kept["schemas"])) == (2, 2, 2)
    assert "comment" not in kept["properties"]
    with pytest.raises(TrinoQueryError) as taken:
        trino_sql(sqe, idp, "alice", "CREATE VIEW lake.bronze.big_orders AS SELECT 1 AS x")
    assert taken.value.error_name == "ALREADY_EXISTS", taken.value.message
    with pytest.raises(TrinoQueryError) as table:
        trino_sql(sqe, idp, "alice", "CREATE VIEW lake.bronze.orders AS SELECT 1 AS x")
    assert table.value.error_name == "ALREADY_EXISTS", table.value.message

    for name in ("big_orders", "all_orders", "one_order"):
        trino_sql(sqe, idp, "alice", f"DROP VIEW lake.bronze.{name}")
    assert rest_catalog.proxy.views.names("dev", ("bronze",)) == []
    with pytest.raises(TrinoQueryError) as gone:
        trino_sql(sqe, idp, "alice", "SELECT * FROM lake.bronze.big_orders")
    assert gone.value.error_name == "NOT_FOUND", gone.value.message
    assert users(records.since(mark)) == {"alice"}


def test_sqe_reads_a_view_pyiceberg_made(sqe, idp, rest_catalog):
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField
    from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.py_base (id BIGINT)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.py_base VALUES (1), (2), (3)")
    sql = "SELECT id * 10 AS tens FROM py_base WHERE id < 3"
    rest_catalog.pyiceberg(jwt_of(idp, "alice")).create_view(
        "bronze.py_view",
        schema=Schema(NestedField(1, "tens", LongType(), required=False)),
        view_version=ViewVersion(
            schema_id=0,
            representations=[ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect="trino"))],
            default_namespace=["bronze"],
        ),
    )
    assert trino_sql(sqe, idp, "alice", "SELECT tens FROM lake.bronze.py_view ORDER BY tens") == [[10], [20]]
    trino_sql(sqe, idp, "alice", "DROP VIEW lake.bronze.py_view")
    assert not rest_catalog.pyiceberg(jwt_of(idp, "alice")).view_exists("bronze.py_view")


def test_bob_can_neither_read_nor_make_views_where_the_catalog_refuses_him(sqe, idp, rest_catalog):
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.secret_base (id BIGINT)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.secret_base VALUES (7395146)")
    trino_sql(sqe, idp, "alice", "CREATE VIEW lake.bronze.secret_view AS SELECT id FROM secret_base")
    records = rest_catalog.records
    mark = records.mark()
    for sql in (
        "SELECT * FROM lake.bronze.secret_view",
        "CREATE VIEW lake.bronze.bobs AS SELECT 1 AS x",
        "DROP VIEW lake.bronze.secret_view",
        # bob may read silver, but writing views there takes more than VIEWER.
        "CREATE VIEW lake.silver.bobs AS SELECT 1 AS x",
    ):
        with pytest.raises(TrinoQueryError) as refused:
            trino_sql(sqe, idp, "bob", sql)
        assert refused.value.error_name in ("PERMISSION_DENIED", "NOT_FOUND"), (sql, refused.value.message)
        assert "7395146" not in refused.value.message
    assert users(records.since(mark)) == {"bob"}
    assert rest_catalog.proxy.views.names("dev", ("silver",)) == []
    assert "bobs" not in rest_catalog.proxy.views.names("dev", ("bronze",))
    assert trino_sql(sqe, idp, "alice", "SELECT * FROM lake.bronze.secret_view") == [[7395146]]
    trino_sql(sqe, idp, "alice", "DROP VIEW lake.bronze.secret_view")


def test_a_catalog_listing_no_view_endpoints_keeps_no_views(sqe, idp):
    """lakana alone (`plain`, no proxy): its /v1/config lists no endpoints, so it keeps no views."""
    with pytest.raises(TrinoQueryError) as refused:
        trino_sql(sqe, idp, "alice", "CREATE VIEW plain.bronze.v AS SELECT 1 AS x")
    assert refused.value.error_name == "NOT_SUPPORTED", refused.value.message
    assert "catalog 'plain' does not serve Iceberg's view endpoints" in refused.value.message


@pytest.fixture(scope="module")
def sqe_store(tmp_path_factory, idp, rest_catalog):
    """The REST catalog mounted as `lake`, its policies kept in `[access] store` (the catalog keeps
    none); the store outlives a restart of the server."""
    store = tmp_path_factory.mktemp("policy-store") / "policies.db"
    toml = rest_catalog.catalog_toml() + f'\n[access]\nstore = "{store}"\n'
    yield lambda: serving(tmp_path_factory, idp, rest_catalog, "sqe-rest-store", toml)


def test_a_rest_catalogs_policies_live_in_the_configured_store(sqe_store, idp):
    server = sqe_store()
    sqe = next(server)
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.governed (id BIGINT, email VARCHAR)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.governed VALUES (1, 'ada@example.com'), (2, 'bo@example.com')")
    for sql in (
        "ALTER TABLE lake.bronze.governed ALTER COLUMN email SET MASK SHOW FIRST 2 FOR USER alice",
        "CREATE ROW FILTER one ON lake.bronze.governed USING (id = 1) FOR USER alice",
        "GRANT SELECT ON TABLE lake.bronze.governed TO USER bob",
    ):
        trino_sql(sqe, idp, "alice", sql)
    governed = "SELECT id, email FROM lake.bronze.governed ORDER BY id"
    assert trino_sql(sqe, idp, "alice", governed) == [[1, "adx@xxxxxxx.xxx"]]
    assert flight_sql_rows(sqe, idp, "alice", governed) == [(1, "adx@xxxxxxx.xxx")]
    grants = trino_sql(sqe, idp, "alice", "SHOW GRANTS ON TABLE lake.bronze.governed")
    assert [g[:6] for g in grants] == [["bob", "USER", "lake", "bronze", "governed", "GRANT SELECT"]]
    # The store outlives the server.
    next(server, None)
    server = sqe_store()
    sqe = next(server)
    assert trino_sql(sqe, idp, "alice", governed) == [[1, "adx@xxxxxxx.xxx"]]
    trino_sql(sqe, idp, "alice", "DROP TABLE lake.bronze.governed")
    next(server, None)


def test_drop_table_is_the_catalogs_to_allow(sqe, idp, rest_catalog):
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.doomed (id BIGINT)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.doomed VALUES (1)")
    records = rest_catalog.records
    mark = records.mark()
    with pytest.raises(TrinoQueryError) as refused:
        trino_sql(sqe, idp, "bob", "DROP TABLE lake.bronze.doomed")
    assert REFUSAL.search(refused.value.message), refused.value.message
    assert trino_sql(sqe, idp, "alice", "SELECT id FROM lake.bronze.doomed") == [[1]]

    trino_sql(sqe, idp, "alice", "DROP TABLE lake.bronze.doomed")
    # bob was refused before any delete (he may not even read the table); alice's went through.
    dropped = [r for r in records.since(mark) if r.method == "DELETE"]
    assert [(r.path.split("?")[0], r.user, r.status) for r in dropped] == [
        ("/v1/dev/namespaces/bronze/tables/doomed", "alice", 204),
    ]
    assert not rest_catalog.pyiceberg(jwt_of(idp, "alice")).table_exists("bronze.doomed")
    with pytest.raises(TrinoQueryError) as gone:
        trino_sql(sqe, idp, "alice", "SELECT id FROM lake.bronze.doomed")
    assert gone.value.error_name == "NOT_FOUND", gone.value.message


def test_delete_and_truncate_commit_through_the_catalog_with_the_callers_token(sqe, idp, rest_catalog):
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.emptied (id BIGINT, name VARCHAR)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.emptied VALUES (1, 'a'), (2, 'b')")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.emptied VALUES (3, 'c')")
    records = rest_catalog.records
    mark = records.mark()
    # bob, whom the catalog refuses, removes nothing.
    for statement in ("DELETE FROM lake.bronze.emptied", "TRUNCATE TABLE lake.bronze.emptied"):
        with pytest.raises(TrinoQueryError) as refused:
            trino_sql(sqe, idp, "bob", statement)
        assert REFUSAL.search(refused.value.message), refused.value.message
    assert users(records.since(mark)) == {"bob"}

    mark = records.mark()
    assert trino_sql(sqe, idp, "alice", "DELETE FROM lake.bronze.emptied") == [[3]]
    commits = [r for r in records.since(mark) if r.method == "POST"]
    assert [(r.path, r.user, r.status) for r in commits] == [
        ("/v1/dev/namespaces/bronze/tables/emptied", "alice", 200),
    ]
    table = rest_catalog.pyiceberg(jwt_of(idp, "alice")).load_table("bronze.emptied")
    assert table.scan().to_arrow().num_rows == 0
    deleted = table.current_snapshot()
    assert (deleted.summary.operation.value, deleted.summary["deleted-records"]) == ("delete", "3")
    assert table.scan(snapshot_id=deleted.parent_snapshot_id).to_arrow().num_rows == 3

    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.emptied VALUES (4, 'd')")
    trino_sql(sqe, idp, "alice", "TRUNCATE TABLE lake.bronze.emptied")
    assert trino_sql(sqe, idp, "alice", "SELECT count(*) FROM lake.bronze.emptied") == [[0]]
    assert users(records.since(mark)) == {"alice"}


def test_row_level_changes_commit_through_the_catalog_with_the_callers_token(sqe, idp, rest_catalog):
    """UPDATE, DELETE and MERGE of single rows, in both write modes: every catalog request carries
    the caller's own token, bob (whom the catalog refuses) changes nothing, and pyiceberg through
    the catalog reads SQE's rows."""
    for mode in ("copy-on-write", "merge-on-read"):
        name = f"lake.bronze.rows_{mode.replace('-', '_')}"
        trino_sql(
            sqe,
            idp,
            "alice",
            f"CREATE TABLE {name} (id BIGINT, name VARCHAR) WITH (\"write.delete.mode\" = '{mode}', "
            f"\"write.update.mode\" = '{mode}', \"write.merge.mode\" = '{mode}')",
        )
        trino_sql(sqe, idp, "alice", f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        records = rest_catalog.records
        mark = records.mark()
        for statement in (
            f"UPDATE {name} SET name = 'x'",
            f"DELETE FROM {name} WHERE id = 1",
            f"MERGE INTO {name} t USING (VALUES (2)) AS v(id) ON t.id = v.id WHEN MATCHED THEN DELETE",
        ):
            with pytest.raises(TrinoQueryError) as refused:
                trino_sql(sqe, idp, "bob", statement)
            assert REFUSAL.search(refused.value.message), refused.value.message
        assert users(records.since(mark)) == {"bob"}

        mark = records.mark()
        assert trino_sql(sqe, idp, "alice", f"UPDATE {name} SET name = upper(name) WHERE id >= 2") == [[2]]
        assert trino_sql(sqe, idp, "alice", f"DELETE FROM {name} WHERE id = 1") == [[1]]
        assert trino_sql(
            sqe,
            idp,
            "alice",
            f"MERGE INTO {name} t USING (VALUES (2, 'bb'), (4, 'd')) AS v(id, name) ON t.id = v.id "
            "WHEN MATCHED THEN UPDATE SET name = v.name WHEN NOT MATCHED THEN INSERT VALUES (v.id, v.name)",
        ) == [[2]]
        assert users(records.since(mark)) == {"alice"}
        expected = [[2, "bb"], [3, "C"], [4, "d"]]
        assert trino_sql(sqe, idp, "alice", f"SELECT * FROM {name} ORDER BY id") == expected
        table = rest_catalog.pyiceberg(jwt_of(idp, "alice")).load_table(name.removeprefix("lake."))
        assert sorted([r["id"], r["name"]] for r in table.scan().to_arrow().to_pylist()) == expected


def test_alter_table_commits_a_new_schema_through_the_catalog(sqe, idp, rest_catalog):
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.evolving (id BIGINT, name VARCHAR)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.evolving VALUES (1, 'a')")
    records = rest_catalog.records
    mark = records.mark()
    trino_sql(sqe, idp, "alice", "ALTER TABLE lake.bronze.evolving ADD COLUMN score DOUBLE")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.evolving VALUES (2, 'b', 0.5)")
    trino_sql(sqe, idp, "alice", "ALTER TABLE lake.bronze.evolving RENAME COLUMN name TO label")
    trino_sql(sqe, idp, "alice", "ALTER TABLE lake.bronze.evolving DROP COLUMN score")
    assert trino_sql(sqe, idp, "alice", "SELECT * FROM lake.bronze.evolving ORDER BY id") == [[1, "a"], [2, "b"]]
    assert users(records.since(mark)) == {"alice"}

    table = rest_catalog.pyiceberg(jwt_of(idp, "alice")).load_table("bronze.evolving")
    assert [s.schema_id for s in table.schemas().values()] == [0, 1, 2, 3]
    assert [(f.field_id, f.name) for f in table.schema().fields] == [(1, "id"), (2, "label")]
    assert table.scan().to_arrow().sort_by("id").to_pylist() == [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}]

    # bob may not change it: the catalog's refusal, and the schema stays.
    with pytest.raises(TrinoQueryError) as refused:
        trino_sql(sqe, idp, "bob", "ALTER TABLE lake.bronze.evolving ADD COLUMN x BIGINT")
    assert REFUSAL.search(refused.value.message), refused.value.message
    table = rest_catalog.pyiceberg(jwt_of(idp, "alice")).load_table("bronze.evolving")
    assert [f.name for f in table.schema().fields] == ["id", "label"]


def test_an_expired_token_is_refused_and_reaches_no_catalog(sqe, idp, rest_catalog):
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.expiry (id BIGINT)")
    assert trino_sql(sqe, idp, "alice", "SELECT count(*) FROM lake.bronze.expiry") == [[0]]
    mark = rest_catalog.records.mark()
    expired = token(idp.port, username="alice", password="alice-secret", expired="true")

    conn = trino.dbapi.connect(
        host="127.0.0.1",
        port=sqe.http_port,
        user="alice",
        http_scheme="http",
        auth=JWTAuthentication(expired),
        allow_insecure_auth=True,
    )
    with pytest.raises(trino.exceptions.HttpError, match="401.*token expired"):
        conn.cursor().execute("SELECT count(*) FROM lake.bronze.expiry")

    bearer = {"adbc.flight.sql.authorization_header": f"Bearer {expired}"}
    with pytest.raises(AdbcError, match="UNAUTHENTICATED.*token expired"):
        with flight_sql.connect(f"grpc://127.0.0.1:{sqe.flight_port}", db_kwargs=bearer) as conn:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM lake.bronze.expiry")
    assert rest_catalog.records.since(mark) == []


def test_a_catalog_outage_names_the_catalog_and_the_server_serves_on(sqe, idp, rest_catalog):
    trino_sql(sqe, idp, "alice", "CREATE TABLE lake.bronze.outage (id BIGINT)")
    trino_sql(sqe, idp, "alice", "INSERT INTO lake.bronze.outage VALUES (7)")
    with rest_catalog.outage():
        for _ in range(2):
            with pytest.raises(TrinoQueryError) as down:
                trino_sql(sqe, idp, "alice", "SELECT id FROM lake.bronze.outage")
            assert f"catalog 'lake' cannot be reached at {rest_catalog.proxy_url}" in str(down.value)
            assert down.value.error_type == "EXTERNAL"
        # Everything that does not need the catalog goes on.
        assert trino_sql(sqe, idp, "alice", "SELECT 40 + 2") == [[42]]
    assert trino_sql(sqe, idp, "alice", "SELECT id FROM lake.bronze.outage") == [[7]]


# Table data on S3 (moto_server), through the same catalog (environment s3dev).


def s3_pyiceberg(rest_catalog, idp, user):
    return rest_catalog.pyiceberg(
        jwt_of(idp, user), prefix=rest_catalog.s3_prefix, properties=rest_catalog.s3_properties()
    )


def ensure_s3t(rest_catalog, idp):
    """`bronze.s3t` as test_proxy_s3_environment_pyiceberg writes it (so either test runs alone)."""
    alice = s3_pyiceberg(rest_catalog, idp, "alice")
    if not alice.table_exists("bronze.s3t"):
        alice.create_table("bronze.s3t", schema=SCHEMA).append(
            pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA)
        )
    return alice.load_table("bronze.s3t")


@pytest.fixture(scope="module")
def sqe_s3(tmp_path_factory, idp, rest_catalog):
    """The S3-backed environment mounted as `s3lake`, by passthrough, with the S3 FileIO properties
    (the catalog vends none)."""
    mount = rest_catalog.catalog_toml(
        "s3lake", prefix=rest_catalog.s3_prefix, properties=rest_catalog.s3_properties()
    )
    yield from serving(tmp_path_factory, idp, rest_catalog, "sqe-s3", mount)


def test_proxy_s3_environment_pyiceberg(rest_catalog, idp):
    records = rest_catalog.records
    mark = records.mark()
    before = set(rest_catalog.s3_keys())
    table = ensure_s3t(rest_catalog, idp)
    assert table.scan().to_arrow().to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    assert table.location().startswith(f"{rest_catalog.s3_root}/")
    assert table.metadata_location.startswith(f"{table.location()}/metadata/")
    by_alice = records.since(mark)
    assert users(by_alice) == {"alice"}
    assert Request("POST", "/v1/s3dev/namespaces/bronze/tables", "alice", 200) in by_alice
    assert Request("POST", "/v1/s3dev/namespaces/bronze/tables/s3t", "alice", 200) in by_alice

    # Everything is in the bucket: the data pyiceberg wrote, the metadata lakana wrote.
    written = set(rest_catalog.s3_keys(table.location())) - before
    assert any(k.endswith(".parquet") for k in written), written
    assert any(k.endswith(".metadata.json") for k in written), written
    assert all(k.startswith("warehouse/") for k in written), written

    mark = records.mark()
    with pytest.raises(ForbiddenError, match=r"PermissionDenied: 'bob' may not READ_TABLE this\."):
        s3_pyiceberg(rest_catalog, idp, "bob").load_table("bronze.s3t")
    assert records.since(mark) == [
        Request("GET", "/v1/config", "bob", 200),
        Request("GET", "/v1/s3dev/namespaces/bronze/tables/s3t", "bob", 403),
    ]


def test_sqe_on_s3_through_rest_catalog(sqe_s3, idp, rest_catalog):
    records = rest_catalog.records
    mark = records.mark()
    before = set(rest_catalog.s3_keys())
    trino_sql(sqe_s3, idp, "alice", "CREATE TABLE s3lake.bronze.s3_events (id BIGINT, name VARCHAR)")
    trino_sql(sqe_s3, idp, "alice", "INSERT INTO s3lake.bronze.s3_events VALUES (1, 'a'), (2, 'b')")
    rows = trino_sql(sqe_s3, idp, "alice", "SELECT * FROM s3lake.bronze.s3_events ORDER BY id")
    assert rows == [[1, "a"], [2, "b"]]
    by_alice = records.since(mark)
    assert users(by_alice) == {"alice"}
    assert Request("POST", "/v1/s3dev/namespaces/bronze/tables", "alice", 200) in by_alice

    # SQE's files are in the bucket, under the table's location.
    pyiceberg = s3_pyiceberg(rest_catalog, idp, "alice")
    table = pyiceberg.load_table("bronze.s3_events")
    assert table.location().startswith(f"{rest_catalog.s3_root}/")
    written = set(rest_catalog.s3_keys(table.location())) - before
    assert any(k.endswith(".parquet") for k in written), written
    assert any(k.endswith(".avro") for k in written), written  # manifest and manifest list
    # pyiceberg reads SQE's rows, and SQE reads pyiceberg's.
    assert table.scan().to_arrow().sort_by("id").to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    ensure_s3t(rest_catalog, idp)
    assert trino_sql(sqe_s3, idp, "alice", "SELECT id, name FROM s3lake.bronze.s3t ORDER BY id") == [
        [1, "a"],
        [2, "b"],
    ]

    mark = records.mark()
    with pytest.raises(TrinoQueryError) as refused:
        trino_sql(sqe_s3, idp, "bob", "SELECT * FROM s3lake.bronze.s3_events")
    assert REFUSAL.search(str(refused.value)), str(refused.value)
    assert users(records.since(mark)) == {"bob"}

    assert not users(records.since(sqe_s3.first_record)) & {NO_TOKEN, INVALID_TOKEN}


def test_s3_outage_names_the_endpoint(sqe_s3, idp, rest_catalog):
    trino_sql(sqe_s3, idp, "alice", "CREATE TABLE s3lake.bronze.s3_outage (id BIGINT)")
    trino_sql(sqe_s3, idp, "alice", "INSERT INTO s3lake.bronze.s3_outage VALUES (7)")
    endpoint = rest_catalog.s3_endpoint.removeprefix("http://")  # 127.0.0.1:PORT
    with rest_catalog.s3_outage():
        # The catalog still answers (lakana reaches moto directly); the data files cannot be read.
        for _ in range(2):
            with pytest.raises(TrinoQueryError) as down:
                trino_sql(sqe_s3, idp, "alice", "SELECT id FROM s3lake.bronze.s3_outage")
            assert endpoint in str(down.value), str(down.value)
            assert down.value.error_type == "EXTERNAL", str(down.value)
        # Everything that does not need the storage goes on.
        assert trino_sql(sqe_s3, idp, "alice", "SELECT 40 + 2") == [[42]]
    assert trino_sql(sqe_s3, idp, "alice", "SELECT id FROM s3lake.bronze.s3_outage") == [[7]]


def test_joins_and_create_table_as_across_catalogs(sqe, idp, rest_catalog):
    """The server's own warehouse (`iceberg`) and the REST catalog (`lake`) in one statement, both
    ways round."""
    mark = rest_catalog.records.mark()
    trino_sql(sqe, idp, "alice", "CREATE TABLE iceberg.default.labels (id BIGINT, label VARCHAR)")
    trino_sql(sqe, idp, "alice", "INSERT INTO iceberg.default.labels VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    assert trino_sql(
        sqe, idp, "alice", "CREATE TABLE lake.bronze.copied AS SELECT id, label FROM iceberg.default.labels WHERE id < 3"
    ) == [[2]]
    joined = "SELECT c.id, l.label FROM lake.bronze.copied c JOIN iceberg.default.labels l ON c.id = l.id ORDER BY c.id"
    assert trino_sql(sqe, idp, "alice", joined) == [[1, "one"], [2, "two"]]
    trino_sql(sqe, idp, "alice", "CREATE TABLE iceberg.default.from_lake AS SELECT * FROM lake.bronze.copied WHERE id = 2")
    assert trino_sql(sqe, idp, "alice", "SELECT * FROM iceberg.default.from_lake") == [[2, "two"]]
    assert users(rest_catalog.records.since(mark)) == {"alice"}


@pytest.fixture(scope="module")
def sqe_attach(tmp_path_factory, idp, rest_catalog):
    """No REST catalog mounted, but sessions may ATTACH the one behind the proxy."""
    files = (
        f'\n[files]\nallowed_catalog_uris = ["{rest_catalog.proxy_url}"]\n'
        f'allowed_local_prefixes = ["{rest_catalog.warehouse}"]\n'
    )
    yield from serving(tmp_path_factory, idp, rest_catalog, "sqe-attach", files)


def test_attach_is_the_sessions_own_and_passes_its_token(sqe_attach, idp, rest_catalog):
    table = rest_catalog.pyiceberg(jwt_of(idp, "alice")).create_table("bronze.attached", schema=SCHEMA)
    table.append(pa.table({"id": [5, 6], "name": ["e", "f"]}, schema=SCHEMA))

    def flight_session(user):
        kwargs = {
            "adbc.flight.sql.authorization_header": f"Bearer {jwt_of(idp, user)}",
            "adbc.flight.sql.rpc.with_cookie_middleware": "true",
        }
        conn = flight_sql.connect(f"grpc://127.0.0.1:{sqe_attach.flight_port}", db_kwargs=kwargs)
        conn.adbc_current_db_schema = "default"  # the server hands the session its cookie
        return conn

    def fetch(conn, statement):
        with conn.cursor() as cur:
            cur.execute(statement)
            return cur.fetchall()

    records = rest_catalog.records
    with flight_session("alice") as alice, flight_session("bob") as bob:
        mark = records.mark()
        fetch(alice, f"ATTACH '{rest_catalog.proxy_url}' AS mylake (TYPE iceberg, PREFIX 'dev')")
        assert fetch(alice, "SELECT id, name FROM mylake.bronze.attached ORDER BY id") == [(5, "e"), (6, "f")]
        assert ("mylake",) in fetch(alice, "SHOW CATALOGS")
        assert users(records.since(mark)) == {"alice"}

        mark = records.mark()
        with pytest.raises(AdbcError) as unseen:
            fetch(bob, "SELECT id FROM mylake.bronze.attached")
        assert "mylake.bronze.attached" in str(unseen.value)
        assert ("mylake",) not in fetch(bob, "SHOW CATALOGS")
        assert records.since(mark) == []

        fetch(alice, "DETACH mylake")
        with pytest.raises(AdbcError):
            fetch(alice, "SELECT id FROM mylake.bronze.attached")

    with pytest.raises(TrinoQueryError) as trino_refused:
        trino_sql(sqe_attach, idp, "alice", f"ATTACH '{rest_catalog.proxy_url}' AS t (PREFIX 'dev')")
    assert trino_refused.value.error_name == "NOT_SUPPORTED"
    assert "Trino's protocol keeps none between statements" in trino_refused.value.message


def test_the_embedded_shell_reaches_the_rest_catalog_with_a_secret(tmp_path, idp, rest_catalog):
    """sqe-cli --embedded: a bearer secret holds alice's token, ATTACH uses it, and the catalog sees
    alice on every request; the shell travels back to its first snapshot, and pyiceberg reads what
    the shell wrote."""
    cli = os.environ.get("SQE_CLI", str(TARGET / "debug" / "sqe-cli"))
    mark = rest_catalog.records.mark()
    sql = (
        f"CREATE SECRET lake_token (TYPE bearer, TOKEN '{jwt_of(idp, 'alice')}'); "
        f"ATTACH '{rest_catalog.proxy_url}' AS lake (TYPE iceberg, PREFIX 'dev', SECRET lake_token); "
        "CREATE TABLE lake.bronze.from_shell (id BIGINT, name VARCHAR); "
        "INSERT INTO lake.bronze.from_shell VALUES (1, 'x'), (2, 'y'); "
        "INSERT INTO lake.bronze.from_shell VALUES (3, 'z'); "
        "SELECT id, name FROM lake.bronze.from_shell ORDER BY id; "
        # Time travel to the first snapshot, found through the metadata table.
        "SELECT count(*) AS n FROM lake.bronze.from_shell FOR VERSION AS OF "
        '(SELECT snapshot_id FROM lake.bronze."from_shell$snapshots" WHERE parent_id IS NULL)'
    )
    result = subprocess.run(
        [cli, "--embedded", "--warehouse", str(tmp_path / "w"), "-f", "csv", "-e", sql],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert list(csv.reader(io.StringIO(result.stdout)))[-6:] == [
        ["id", "name"], ["1", "x"], ["2", "y"], ["3", "z"], ["n"], ["2"],
    ]
    assert users(rest_catalog.records.since(mark)) == {"alice"}
    table = rest_catalog.pyiceberg(jwt_of(idp, "alice")).load_table("bronze.from_shell")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "name": "x"}, {"id": 2, "name": "y"}, {"id": 3, "name": "z"},
    ]
