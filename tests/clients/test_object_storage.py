"""Tables of SQE's own warehouse whose files live in S3 (a real S3 server: moto_server).

The catalog stays the warehouse's SQLite file; a table created `WITH (location = 's3://…')` keeps its
metadata, manifests and data in the bucket. The S3 settings come from the standard environment
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`), as for any AWS
tool. What is proven:

- the shell creates, appends to, reads and drops such a table; the objects appear in the bucket and
  go with DROP TABLE;
- pyiceberg's SqlCatalog on the same warehouse reads SQE's rows from S3;
- on a server a table location in a bucket is allowed only under `[files] allowed_object_prefixes`;
- what a server keeps of a table's files in memory is served to a query only while the store still
  serves the file to that query's own credentials;
- maintenance of a table in S3 (optimize, expire_snapshots, remove_orphan_files) leaves exactly the
  objects its snapshot refers to, and nothing beside the table's folder goes.
"""

import csv
import io
import os
import subprocess

import pytest
import trino
from pyiceberg.catalog.sql import SqlCatalog
from trino.exceptions import TrinoQueryError

from conftest import TARGET, start_server
from rest_catalog import S3_ACCESS_KEY, S3_BUCKET, S3_REGION, S3_SECRET_KEY, start_moto


@pytest.fixture(scope="module")
def s3():
    process, endpoint = start_moto()
    try:
        yield endpoint
    finally:
        process.stop()


def aws_env(endpoint):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SQE_"))}
    env.update(
        AWS_ACCESS_KEY_ID=S3_ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=S3_SECRET_KEY,
        AWS_REGION=S3_REGION,
        AWS_ENDPOINT_URL=endpoint,
    )
    return env


def s3_client(endpoint):
    import boto3

    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY, region_name=S3_REGION,
    )


def s3_catalog(warehouse, endpoint):
    """pyiceberg's SqlCatalog on the warehouse's SQLite file, reading the bucket."""
    return SqlCatalog(
        "iceberg",
        uri=f"sqlite:///{warehouse / 'catalog.db'}",
        warehouse=f"file://{warehouse}",
        **{
            "s3.endpoint": endpoint, "s3.access-key-id": S3_ACCESS_KEY,
            "s3.secret-access-key": S3_SECRET_KEY, "s3.region": S3_REGION,
        },
    )


def keys(endpoint, prefix):
    listed = s3_client(endpoint).list_objects_v2(Bucket=S3_BUCKET, Prefix=prefix)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def run_shell(warehouse, endpoint, sql, *options):
    """The shell on `warehouse` with S3 settings in its environment, running `sql`."""
    cli = os.environ.get("SQE_CLI", str(TARGET / "debug" / "sqe-cli"))
    return subprocess.run(
        [cli, "--embedded", "--warehouse", str(warehouse), *options, "-f", "csv", "-e", sql],
        capture_output=True, text=True, timeout=300, env=aws_env(endpoint),
    )


def shell(warehouse, endpoint, sql, *options):
    result = run_shell(warehouse, endpoint, sql, *options)
    assert result.returncode == 0, result.stderr
    return list(csv.reader(io.StringIO(result.stdout)))


def test_a_warehouse_table_lives_in_s3(tmp_path, s3):
    warehouse = tmp_path / "w"
    location = f"s3://{S3_BUCKET}/embedded/orders"
    rows = shell(
        warehouse, s3,
        f"CREATE TABLE orders WITH (location = '{location}') AS "
        "SELECT * FROM (VALUES (1, 'apple'), (2, 'pear')) AS v(id, item); "
        "INSERT INTO orders VALUES (3, 'plum'); "
        "SELECT id, item FROM orders ORDER BY id; "
        'SELECT count(*) AS n FROM "orders$snapshots"',
    )
    assert rows[-6:] == [["id", "item"], ["1", "apple"], ["2", "pear"], ["3", "plum"], ["n"], ["2"]]
    stored = keys(s3, "embedded/orders/")
    assert any(k.startswith("embedded/orders/metadata/") and k.endswith(".metadata.json") for k in stored), stored
    assert len([k for k in stored if k.startswith("embedded/orders/data/") and k.endswith(".parquet")]) == 2, stored
    assert not any((warehouse / "default").glob("orders*")), "no local files for a table in S3"

    # pyiceberg, on the same SQLite catalog, reads the table from S3.
    table = s3_catalog(warehouse, s3).load_table("default.orders")
    assert table.metadata_location.startswith(location + "/metadata/")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "item": "apple"}, {"id": 2, "item": "pear"}, {"id": 3, "item": "plum"},
    ]

    shell(warehouse, s3, "DROP TABLE orders")
    assert keys(s3, "embedded/orders/") == []


def test_a_server_puts_tables_only_in_allowed_buckets(tmp_path, s3):
    files = f'\n[files]\nallowed_object_prefixes = ["s3://{S3_BUCKET}/served/"]\n'
    server = start_server(tmp_path, "[auth]\nallow_anonymous = true\n" + files, env_extra=aws_env(s3))
    try:
        cur = trino.dbapi.connect(host="127.0.0.1", port=server.http_port, user="alice").cursor()
        cur.execute(f"CREATE TABLE t WITH (location = 's3://{S3_BUCKET}/served/t') AS SELECT 1 AS id")
        cur.fetchall()
        cur.execute("SELECT id FROM t")
        assert cur.fetchall() == [[1]]
        assert keys(s3, "served/t/metadata/")
        with pytest.raises(TrinoQueryError) as refused:
            cur.execute(f"CREATE TABLE u WITH (location = 's3://{S3_BUCKET}/elsewhere/u') AS SELECT 1 AS id")
            cur.fetchall()
        assert refused.value.error_name == "PERMISSION_DENIED", refused.value.message
        assert "allowed_object_prefixes" in refused.value.message, refused.value.message
        assert keys(s3, "elsewhere/") == []
    finally:
        server.stop()


def test_cached_table_files_are_served_only_while_the_store_serves_them(tmp_path, s3):
    files = f'\n[files]\nallowed_object_prefixes = ["s3://{S3_BUCKET}/cached/"]\n'
    server = start_server(tmp_path, "[auth]\nallow_anonymous = true\n" + files, env_extra=aws_env(s3))
    try:
        cur = trino.dbapi.connect(host="127.0.0.1", port=server.http_port, user="alice").cursor()
        cur.execute(
            f"CREATE TABLE kept WITH (location = 's3://{S3_BUCKET}/cached/kept') AS "
            "SELECT * FROM (VALUES (1, 'apple'), (2, 'pear')) AS v(id, item)"
        )
        cur.fetchall()
        # The second read is served from what the first one kept.
        for _ in range(2):
            cur.execute("SELECT id, item FROM kept ORDER BY id")
            assert cur.fetchall() == [[1, "apple"], [2, "pear"]]
        data = [k for k in keys(s3, "cached/kept/data/") if k.endswith(".parquet")]
        assert len(data) == 1, data

        s3_client(s3).delete_object(Bucket=S3_BUCKET, Key=data[0])
        # The file is gone from the bucket: an error naming it, not the rows it had.
        with pytest.raises(TrinoQueryError) as gone:
            cur.execute("SELECT id, item FROM kept ORDER BY id")
            cur.fetchall()
        assert data[0].rsplit("/", 1)[1] in gone.value.message, gone.value.message
        cur.execute("SELECT 40 + 2")
        assert cur.fetchall() == [[42]]
    finally:
        server.stop()


def put_parquet(endpoint, key, table):
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink)
    s3_client(endpoint).put_object(Bucket=S3_BUCKET, Key=key, Body=sink.getvalue())


def test_file_functions_read_s3_with_the_environment_or_a_secret(tmp_path, s3):
    import pyarrow as pa

    put_parquet(s3, "files/a.parquet", pa.table({"id": [1, 2], "name": ["x", "y"]}))
    put_parquet(s3, "files/b.parquet", pa.table({"id": [3], "name": ["z"]}))
    query = (
        f"SELECT id, name FROM read_parquet('s3://{S3_BUCKET}/files/*.parquet') ORDER BY id; "
        f"SELECT count(*) AS n FROM 's3://{S3_BUCKET}/files/a.parquet'"
    )
    expected = [["id", "name"], ["1", "x"], ["2", "y"], ["3", "z"], ["n"], ["2"]]
    # The standard environment.
    assert shell(tmp_path / "env", s3, query) == expected

    # No AWS environment at all: the session's secret.
    cli = os.environ.get("SQE_CLI", str(TARGET / "debug" / "sqe-cli"))
    secret = (
        f"CREATE SECRET store (TYPE s3, KEY_ID '{S3_ACCESS_KEY}', SECRET '{S3_SECRET_KEY}', "
        f"REGION '{S3_REGION}', ENDPOINT '{s3}', URL_STYLE 'path'); "
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SQE_"))}
    result = subprocess.run(
        [cli, "--embedded", "--warehouse", str(tmp_path / "w"), "-f", "csv", "-e", secret + query],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 0, result.stderr
    assert list(csv.reader(io.StringIO(result.stdout))) == expected

    # A key that is not there: an error naming it, and the shell goes on.
    result = subprocess.run(
        [cli, "--embedded", "--warehouse", str(tmp_path / "w"), "-f", "csv", "-e",
         secret + f"SELECT * FROM read_parquet('s3://{S3_BUCKET}/files/missing.parquet'); SELECT 1 AS one"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert "files/missing.parquet" in result.stderr, result.stderr
    assert list(csv.reader(io.StringIO(result.stdout))) == [["one"], ["1"]]


def test_a_persistent_secret_serves_later_shells(tmp_path, s3):
    import pyarrow as pa

    put_parquet(s3, "kept/a.parquet", pa.table({"id": [7]}))
    cli = os.environ.get("SQE_CLI", str(TARGET / "debug" / "sqe-cli"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SQE_"))}
    env["SQE_SECRETS_KEY"] = "a passphrase long enough for the tests"

    def run(sql, key=True):
        e = dict(env) if key else {k: v for k, v in env.items() if k != "SQE_SECRETS_KEY"}
        return subprocess.run(
            [cli, "--embedded", "--warehouse", str(tmp_path / "w"), "-f", "csv", "-e", sql],
            capture_output=True, text=True, timeout=300, env=e,
        )

    made = run(
        f"CREATE PERSISTENT SECRET store (TYPE s3, KEY_ID '{S3_ACCESS_KEY}', SECRET '{S3_SECRET_KEY}', "
        f"REGION '{S3_REGION}', ENDPOINT '{s3}', URL_STYLE 'path')"
    )
    assert made.returncode == 0, made.stderr
    sealed = (tmp_path / "w" / "secrets.json").read_text()
    assert S3_SECRET_KEY not in sealed and S3_ACCESS_KEY not in sealed

    later = run(f"SHOW SECRETS; SELECT id FROM read_parquet('s3://{S3_BUCKET}/kept/a.parquet')")
    assert later.returncode == 0, later.stderr
    assert list(csv.reader(io.StringIO(later.stdout))) == [
        ["name", "type", "scope"], ["store", "s3", "persistent"], ["id"], ["7"],
    ]
    # Without the key the shell has no persistent secret to list.
    keyless = run("SHOW SECRETS", key=False)
    assert keyless.returncode == 0, keyless.stderr
    assert list(csv.reader(io.StringIO(keyless.stdout))) == [["name", "type", "scope"]]


def test_maintenance_in_s3_leaves_the_live_files_only(tmp_path, s3):
    """A table in S3 after merge-on-read deletes, and objects nothing refers to (what a killed write
    leaves: data, a manifest, a metadata file half written), some in a folder named like the
    table's (`t2`, `t.bak`): optimize, expire_snapshots and remove_orphan_files leave exactly the
    objects the table's one snapshot and metadata refer to; the neighbours stay; the rows are the
    same for SQE and pyiceberg."""
    from test_row_changes import referenced_paths

    warehouse = tmp_path / "w"
    location = f"s3://{S3_BUCKET}/maint/t"
    shell(
        warehouse, s3,
        f"CREATE TABLE t (id bigint, p varchar) WITH (location = '{location}', "
        "partitioning = ARRAY['p'], \"write.delete.mode\" = 'merge-on-read'); "
        "INSERT INTO t VALUES (1, 'a'), (2, 'a'), (3, 'b'); "
        "INSERT INTO t VALUES (4, 'a'), (5, 'b'); "
        "INSERT INTO t VALUES (6, 'b'); "
        "DELETE FROM t WHERE id IN (2, 5)",
    )
    client = s3_client(s3)
    orphans = ["maint/t/data/p=a/killed.parquet", "maint/t/metadata/killed-m0.avro",
               "maint/t/metadata/99999-killed.metadata.json"]
    neighbours = ["maint/t2/data/x.parquet", "maint/t.bak", "maint/tx/metadata/y.avro"]
    for key in orphans + neighbours:
        client.put_object(Bucket=S3_BUCKET, Key=key, Body=b"not what it says")

    maintained = shell(
        warehouse, s3,
        "ALTER TABLE t EXECUTE optimize; "
        "ALTER TABLE t EXECUTE expire_snapshots(retention_threshold => '0s'); "
        "ALTER TABLE t EXECUTE remove_orphan_files(retention_threshold => '0s')",
        "--maintenance-min-retention", "0s", "--stop-on-error",
    )
    counts = dict(row for row in maintained if len(row) == 2)
    assert int(counts["deleted_files_count"]) >= len(orphans), counts

    table = s3_catalog(warehouse, s3).load_table("default.t")
    prefix = f"s3://{S3_BUCKET}/"
    live = sorted(p.removeprefix(prefix) for p in referenced_paths(table))
    assert keys(s3, "maint/t/") == live
    assert all(not k.endswith("-deletes.parquet") for k in live), live
    for key in neighbours:
        assert keys(s3, key) == [key]
    want = [[str(i), p] for i, p in [(1, "a"), (3, "b"), (4, "a"), (6, "b")]]
    assert shell(warehouse, s3, "SELECT id, p FROM t ORDER BY id")[1:] == want
    assert sorted(
        (r["id"], r["p"]) for r in table.scan().to_arrow().to_pylist()
    ) == [(1, "a"), (3, "b"), (4, "a"), (6, "b")]


def test_orphans_in_s3_are_not_removed_where_another_table_lives(tmp_path, s3):
    """A metadata file of another table in the table's folder in S3 (a table whose location is
    inside this one's): remove_orphan_files refuses by name, and removes nothing."""
    warehouse = tmp_path / "w"
    shell(
        warehouse, s3,
        f"CREATE TABLE o (id bigint) WITH (location = 's3://{S3_BUCKET}/shared/o'); "
        "INSERT INTO o VALUES (1)",
    )
    client = s3_client(s3)
    other = "shared/o/inner/metadata/00000-x.metadata.json"
    orphan = "shared/o/data/killed.parquet"
    client.put_object(Bucket=S3_BUCKET, Key=other, Body=b'{"format-version": 2, "table-uuid": "other"}')
    client.put_object(Bucket=S3_BUCKET, Key=orphan, Body=b"junk")
    result = run_shell(
        warehouse, s3, "ALTER TABLE o EXECUTE remove_orphan_files(retention_threshold => '0s')",
        "--maintenance-min-retention", "0s",
    )
    assert result.returncode != 0
    assert (
        f"s3://{S3_BUCKET}/{other} is a metadata file of another table (table-uuid other)"
        in result.stderr
    ), result.stderr
    assert keys(s3, orphan) == [orphan]
    assert keys(s3, other) == [other]
