"""dbt-sqe's own behaviour, beyond dbt-tests-adapter's suites: who the statements run as, the
query tag, seeds through bulk ingest, each sign-in method, TLS, the token's refresh, and clear
errors for a missing privilege, a refused client and a huge query tag."""

import os
import subprocess
import sys
import time
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import pytest
import requests
import yaml
from harness import oauth_profile, start_sqe
from servers import make_certificate

DBT = Path(sys.executable).parent / "dbt"
Options = adbc_driver_flightsql.DatabaseOptions


def profile(sqe, idp, schema, **more):
    return oauth_profile(sqe, idp, schema=schema, **more)


def dbt(directory: Path, target: dict, files: dict, *args, env=None):
    """Writes a project of `files` (a dbt_project.yml among them replaces the plain one) with one
    profile (`target`) into `directory` and runs dbt there: (exit code, everything dbt printed)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "dbt_project.yml").write_text("name: probe\nversion: '1.0'\nconfig-version: 2\nprofile: probe\n")
    profile = {"probe": {"target": "t", "outputs": {"t": target}}}
    (directory / "profiles.yml").write_text(yaml.safe_dump(profile))
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    done = subprocess.run(
        [str(DBT), "--no-use-colors", *args, "--project-dir", str(directory), "--profiles-dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    return done.returncode, done.stdout + done.stderr


def query(sqe, sql, tls_ca=None):
    """The rows of `sql`, run as the server's administrator."""
    uri = f"grpc+tls://127.0.0.1:{sqe.flight_port}" if tls_ca else f"grpc://127.0.0.1:{sqe.flight_port}"
    options = {Options.AUTHORIZATION_HEADER.value: f"Bearer {sqe.admin_token}"}
    if tls_ca:
        options[Options.TLS_ROOT_CERTS.value] = Path(tls_ca).read_text()
    with flight_sql.connect(uri, db_kwargs=options, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def password_token(idp, user):
    body = {"grant_type": "password", "username": user, "password": f"{user}-secret"}
    response = requests.post(f"http://127.0.0.1:{idp.port}/token", data=body, timeout=10)
    response.raise_for_status()
    return response.json()["access_token"]


def test_every_statement_runs_as_the_oauth_client_and_carries_the_query_tag(sqe, idp, tmp_path):
    files = {
        "seeds/people.csv": "id,name\n1,ada\n2,grace\n",
        "models/plain.sql": "{{ config(materialized='view') }} select id, upper(name) as name from {{ ref('people') }}",
        "models/tagged.sql": "{{ config(materialized='table', query_tag='nightly-load') }} select * from {{ ref('plain') }}",
    }
    code, out = dbt(tmp_path, profile(sqe, idp, "tagging"), files, "build")
    assert code == 0, out
    statements = query(sqe, "SELECT \"user\", source, query FROM system.runtime.queries WHERE query LIKE '%\"tagging\"%' AND query NOT LIKE '%system.runtime%'")
    assert statements
    assert {user for user, _, _ in statements} == {"etl-service"}
    # dbt's query comment names the model each statement is for.
    tagged = [source for _, source, text in statements if '"node_id": "model.probe.tagged"' in text]
    assert tagged and set(tagged) == {"nightly-load"}
    plain = [source for _, source, text in statements if '"node_id": "model.probe.plain"' in text]
    assert plain and set(plain) == {"dbt-sqe-0.1.0"}
    # The seed's rows went as Arrow through bulk ingest: no INSERT statement carried them.
    assert not [text for _, _, text in statements if text.lstrip().lower().startswith("insert")]
    assert query(sqe, "SELECT id, name FROM iceberg.tagging.tagged ORDER BY id") == [(1, "ADA"), (2, "GRACE")]


def test_seed_values_keep_their_types_through_bulk_ingest(sqe, idp, tmp_path):
    files = {
        "seeds/kinds.csv": (
            "id,price,ratio,day,at,ok,code,label,seen\n"
            "1,10.50,0.25,2024-02-29,2024-02-29 13:14:15,true,007,it's,2024-02-29T13:14:15+02:00\n"
            "2,,1.5,,,false,,null,\n"
            '3,7.00,-2,1999-12-31,1999-12-31 23:59:59,,120,"two\nlines",1999-12-31T23:59:59Z\n'
        ),
        "dbt_project.yml": (
            "name: probe\nversion: '1.0'\nconfig-version: 2\nprofile: probe\n"
            "seeds:\n  probe:\n    kinds:\n      +column_types:\n        price: decimal(10,2)\n        code: varchar\n"
        ),
    }
    code, out = dbt(tmp_path, profile(sqe, idp, "seeded"), files, "seed")
    assert code == 0, out
    rows = query(
        sqe,
        "SELECT id, CAST(price AS varchar), ratio, CAST(day AS varchar), CAST(at AS varchar), ok, code, label, "
        "to_unixtime(seen) FROM iceberg.seeded.kinds ORDER BY id",
    )
    assert rows == [
        (1, "10.50", 0.25, "2024-02-29", "2024-02-29 13:14:15.000000", True, "007", "it's", 1709205255.0),
        (2, None, 1.5, None, None, False, None, None, None),
        (3, "7.00", -2.0, "1999-12-31", "1999-12-31 23:59:59.000000", None, "120", "two\nlines", 946684799.0),
    ]
    types = query(
        sqe,
        "SELECT column_name, data_type FROM iceberg.information_schema.columns "
        "WHERE table_schema = 'seeded' AND table_name = 'kinds' ORDER BY ordinal_position",
    )
    assert types == [
        ("id", "integer"),
        ("price", "decimal(10,2)"),
        ("ratio", "double"),
        ("day", "date"),
        ("at", "timestamp(6)"),
        ("ok", "boolean"),
        ("code", "varchar"),
        ("label", "varchar"),
        ("seen", "timestamp(6) with time zone"),
    ]


def test_password_and_token_sign_ins_run_as_their_user(sqe, idp, tmp_path):
    model = {"models/who.sql": "{{ config(materialized='table') }} select current_user as who"}
    password = {**profile(sqe, idp, "alices"), "method": "password", "user": "alice", "password": "alice-secret"}
    code, out = dbt(tmp_path / "password", password, model, "run")
    assert code == 0, out
    assert query(sqe, "SELECT who FROM iceberg.alices.who") == [("alice",)]
    token = {**profile(sqe, idp, "bobs"), "method": "token", "token": password_token(idp, "bob")}
    code, out = dbt(tmp_path / "token", token, model, "run")
    assert code == 0, out
    assert query(sqe, "SELECT who FROM iceberg.bobs.who") == [("bob",)]


def test_a_model_without_the_privilege_fails_naming_the_table_and_the_privilege(sqe, idp, tmp_path):
    model = {"models/ledger.sql": "{{ config(materialized='table') }} select 1 as entry"}
    code, out = dbt(tmp_path / "owner", profile(sqe, idp, "books"), model, "run")
    assert code == 0, out
    # Carol may read etl-service's table but not replace it: the owner's table is untouched.
    carol = {**profile(sqe, idp, "books"), "method": "password", "user": "carol", "password": "carol-secret"}
    code, out = dbt(tmp_path / "intruder", carol, model, "run")
    assert code == 1
    # dbt's error names the privilege (renaming is altering) and the table.
    denied = [line.strip() for line in out.splitlines() if "Access Denied" in line]
    assert "Access Denied: Cannot alter table iceberg.books.ledger" in denied, out
    assert query(sqe, "SELECT entry FROM iceberg.books.ledger") == [(1,)]


def test_a_refused_client_fails_with_the_token_endpoints_answer(sqe, idp, tmp_path):
    wrong = profile(sqe, idp, "nowhere", client_secret="not-the-secret")
    code, out = dbt(tmp_path, wrong, {}, "debug")
    assert code == 1
    assert "the token endpoint" in out and "refused client 'etl-service': HTTP 400" in out, out


def test_the_token_is_renewed_at_half_its_life_and_the_session_stays(sqe, idp, monkeypatch):
    from dbt.adapters.sqe import connections
    from dbt.adapters.sqe.connections import OAuthToken, SqeCredentials, SqeHandle

    def run(handle, sql):
        cursor = handle.cursor()
        cursor.execute(sql)
        return cursor.fetchall()

    credentials = SqeCredentials.from_dict(profile(sqe, idp, "refresh"))
    handle = SqeHandle(credentials)
    run(handle, "CREATE SCHEMA IF NOT EXISTS iceberg.refresh")
    run(handle, "USE iceberg.refresh")
    _, first = OAuthToken.of(credentials).current()
    # The clock moves on until less than half the token's life is left: the next statement goes
    # with a new token, on the same connection, in the same session (its USE holds).
    later = (first - time.time()) / 2 + 5

    class Clock:
        @staticmethod
        def time():
            return time.time() + later

    monkeypatch.setattr(connections, "time", Clock)
    assert run(handle, "SELECT current_user, current_schema") == [("etl-service", "refresh")]
    _, renewed = OAuthToken.of(credentials).current()
    assert renewed > first
    handle.close()


def test_credentials_never_go_unencrypted_to_another_host(tmp_path, idp, sqe):
    far = {**profile(sqe, idp, "far"), "host": "sqe.example.com"}
    code, out = dbt(tmp_path / "far", far, {}, "debug")
    assert code == 1
    assert "method 'oauth' would send credentials to sqe.example.com unencrypted: set tls: true" in out, out
    idp_in_clear = {**profile(sqe, idp, "far"), "token_uri": "http://idp.example.com/token"}
    code, out = dbt(tmp_path / "idp", idp_in_clear, {}, "debug")
    assert code == 1
    assert "token_uri must be an https:// address (or a loopback one): http://idp.example.com/token" in out, out


def test_a_huge_query_tag_is_cut_and_the_server_keeps_serving(sqe, idp, tmp_path):
    tag = "t" * 6000
    model = {"models/tagged_big.sql": "{{ config(materialized='view', query_tag='" + tag + "') }} select 1 as one"}
    code, out = dbt(tmp_path, profile(sqe, idp, "bigtag"), model, "run")
    assert code == 0, out
    sources = query(sqe, "SELECT DISTINCT source FROM system.runtime.queries WHERE query LIKE '%\"tagged_big\"%' AND query NOT LIKE '%system.runtime%'")
    assert sources == [("t" * 256,)]
    assert query(sqe, "SELECT 1") == [(1,)]


@pytest.fixture(scope="module")
def tls_sqe(tmp_path_factory, idp):
    ca, cert, key = make_certificate(tmp_path_factory.mktemp("tls"))
    s = start_sqe(tmp_path_factory.mktemp("sqe-dbt-tls"), idp, tls=(cert, key))
    s.ca = ca
    try:
        yield s
    finally:
        s.stop()


def test_over_tls_the_server_is_checked_against_the_ca_file(tls_sqe, idp, tmp_path):
    model = {"models/secure.sql": "{{ config(materialized='table') }} select 'sealed' as word"}
    good = profile(tls_sqe, idp, "sealed", tls=True, ca_file=str(tls_sqe.ca))
    code, out = dbt(tmp_path / "good", good, model, "run")
    assert code == 0, out
    assert query(tls_sqe, "SELECT word FROM iceberg.sealed.secure", tls_ca=tls_sqe.ca) == [("sealed",)]
    # Without the CA the server's certificate is not trusted: no statement is sent.
    unchecked = profile(tls_sqe, idp, "unsealed", tls=True)
    code, out = dbt(tmp_path / "unchecked", unchecked, model, "run")
    assert code != 0
    assert "certificate" in out, out


def test_partitioning_and_properties_come_from_the_model_config(sqe, idp, tmp_path):
    model = {
        "models/events.sql": (
            "{{ config(materialized='table', partitioned_by=['bucket(id, 4)', 'day'], "
            "properties={'\"write.update.mode\"': \"'merge-on-read'\"}) }} "
            "select id, day from (values (1, 'mon'), (2, 'tue')) as t(id, day)"
        ),
        "models/clash.sql": (
            "{{ config(materialized='table', partitioned_by=['id'], properties={'partitioning': \"ARRAY['id']\"}) }} "
            "select 1 as id"
        ),
    }
    code, out = dbt(tmp_path, profile(sqe, idp, "parted"), model, "run")
    assert code == 1
    assert "set either partitioned_by or properties.partitioning, not both" in out, out
    [(ddl,)] = query(sqe, "SHOW CREATE TABLE iceberg.parted.events")
    assert "partitioning = ARRAY['bucket(id, 4)', 'day']" in ddl, ddl
    assert query(sqe, 'SELECT key, value FROM iceberg.parted."events$properties"') == [("write.update.mode", "merge-on-read")]
    assert query(sqe, "SELECT id, day FROM iceberg.parted.events ORDER BY id") == [(1, "mon"), (2, "tue")]


def test_a_seed_larger_than_one_message_goes_in_batches(sqe, idp, tmp_path):
    # About 20 MB as Arrow: more than one gRPC message may carry (16 MiB).
    rows = 600_000
    lines = "".join(f"{i},{i % 97},customer-{i:08d}\n" for i in range(rows))
    files = {"seeds/large.csv": "id,bucket,name\n" + lines}
    code, out = dbt(tmp_path, profile(sqe, idp, "large"), files, "seed")
    assert code == 0, out
    assert query(sqe, "SELECT count(*), count(DISTINCT name), sum(id), max(bucket) FROM iceberg.large.large") == [
        (rows, rows, rows * (rows - 1) // 2, 96)
    ]


def test_a_browser_sign_in_runs_as_the_user_who_signed_in(sqe, idp, tmp_path):
    # The "browser" follows the authorization endpoint's redirect back to dbt-sqe's listener, as
    # a browser would once its user signed in (the test IdP signs everyone in as johndoe).
    opener = tmp_path / "browser.py"
    opener.write_text("import sys, urllib.request\nurllib.request.urlopen(sys.argv[1], timeout=30).read()\n")
    env = {**os.environ, "BROWSER": f"{sys.executable} {opener} %s"}
    browsing = {
        **profile(sqe, idp, "browsed"),
        "method": "authorization_code",
        "authorize_uri": f"http://127.0.0.1:{idp.port}/authorize",
        "client_id": "dbt-desktop",
        "client_secret": None,
    }
    model = {"models/who.sql": "{{ config(materialized='table') }} select current_user as who"}
    code, out = dbt(tmp_path / "p", browsing, model, "run", env=env)
    assert code == 0, out
    # The address (with the sign-in's state) is shown only where no browser opened.
    assert "/authorize?" not in out, out
    assert query(sqe, "SELECT who FROM iceberg.browsed.who") == [("johndoe",)]
