"""Owners' tables protected by default: on a server with an authenticator and no `[access]
default`, anyone signed in may read and create, and only the owner (whoever created the table or
its schema), a grantee or an admin may write to, alter or drop what someone else owns. Two users
of the test IdP (alice, bob) and ada, whose token carries the admin role, over Trino HTTP and
Flight SQL; refusals are Trino's PERMISSION_DENIED and Flight's PERMISSION_DENIED, naming the
table and the privilege.
"""

import pytest
from adbc_driver_manager import Error as AdbcError

from conftest import start_server, token
from test_privileges import flight_run, trino_refusal, trino_run

# No [access] section: the default with an authenticator.
CONFIG = (
    '[auth]\nallow_anonymous = false\nadmin_roles = ["sqe_admin"]\n\n'
    '[auth.oidc]\nissuer = "http://127.0.0.1:{port}"\naudience = "sqe"\nclient_id = "sqe"\n'
)


@pytest.fixture(scope="module")
def sqe(tmp_path_factory, idp):
    s = start_server(tmp_path_factory.mktemp("sqe-owner-default"), CONFIG.format(port=idp.port))
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def jwt(idp):
    return {u: token(idp.port, username=u, password=f"{u}-secret") for u in ("alice", "bob", "ada")}


def denied(what):
    return ("PERMISSION_DENIED", f"Access Denied: Cannot {what}")


def test_anyone_reads_and_creates_but_only_the_owner_changes(sqe, jwt):
    alice, bob = jwt["alice"], jwt["bob"]
    assert trino_run(sqe, "alice", alice, "CREATE TABLE sales AS SELECT 1 AS id") == [[1]]
    # Bob reads alice's table, and makes tables of his own.
    assert trino_run(sqe, "bob", bob, "SELECT id FROM sales") == [[1]]
    assert trino_run(sqe, "bob", bob, "CREATE TABLE bobs AS SELECT 7 AS id") == [[1]]
    # He changes nothing of hers.
    table = "iceberg.default.sales"
    assert trino_refusal(sqe, "bob", bob, "INSERT INTO sales VALUES (2)") == denied(f"insert into table {table}")
    assert trino_refusal(sqe, "bob", bob, "ALTER TABLE sales ADD COLUMN note varchar") == denied(
        f"alter table {table}"
    )
    assert trino_refusal(sqe, "bob", bob, "ALTER TABLE sales RENAME TO mine") == denied(f"alter table {table}")
    assert trino_refusal(sqe, "bob", bob, "DROP TABLE sales") == denied(f"drop table {table}")
    assert trino_refusal(sqe, "bob", bob, "DELETE FROM sales") == denied(f"delete from table {table}")
    assert trino_refusal(sqe, "bob", bob, "TRUNCATE TABLE sales") == denied(f"delete from table {table}")
    assert trino_refusal(sqe, "bob", bob, "DELETE FROM sales WHERE id = 1") == denied(f"delete from table {table}")
    assert trino_refusal(sqe, "bob", bob, "UPDATE sales SET id = 2") == denied(f"update table {table}")
    with pytest.raises(AdbcError) as e:
        flight_run(sqe, bob, "DELETE FROM sales")
    assert f"Access Denied: Cannot delete from table {table}" in str(e.value)
    with pytest.raises(AdbcError) as e:
        flight_run(sqe, bob, "UPDATE sales SET id = 2 WHERE id = 1")
    assert f"Access Denied: Cannot update table {table}" in str(e.value)
    with pytest.raises(AdbcError) as e:
        flight_run(sqe, bob, "INSERT INTO sales VALUES (3)")
    assert f"Access Denied: Cannot insert into table {table}" in str(e.value)
    assert trino_run(sqe, "alice", alice, "SELECT id FROM sales") == [[1]]
    # Nor does alice change his.
    assert trino_refusal(sqe, "alice", alice, "DROP TABLE bobs") == denied("drop table iceberg.default.bobs")
    # Her own table is hers to change.
    assert trino_run(sqe, "alice", alice, "INSERT INTO sales VALUES (4)") == [[1]]


def test_a_grantee_and_an_admin_may(sqe, jwt):
    alice, bob, ada = jwt["alice"], jwt["bob"], jwt["ada"]
    trino_run(sqe, "alice", alice, "CREATE TABLE shared AS SELECT 1 AS id")
    assert trino_refusal(sqe, "bob", bob, "INSERT INTO shared VALUES (2)")[0] == "PERMISSION_DENIED"
    trino_run(sqe, "alice", alice, "GRANT INSERT ON TABLE shared TO USER bob")
    assert trino_run(sqe, "bob", bob, "INSERT INTO shared VALUES (2)") == [[1]]
    # The grant is INSERT alone: dropping is still hers.
    assert trino_refusal(sqe, "bob", bob, "DROP TABLE shared") == denied("drop table iceberg.default.shared")
    # A grant of UPDATE lets him change her rows; of DELETE, remove them, all of them.
    assert trino_refusal(sqe, "bob", bob, "UPDATE shared SET id = 3 WHERE id = 2") == denied(
        "update table iceberg.default.shared"
    )
    trino_run(sqe, "alice", alice, "GRANT UPDATE ON TABLE shared TO USER bob")
    assert trino_run(sqe, "bob", bob, "UPDATE shared SET id = 3 WHERE id = 2") == [[1]]
    assert trino_run(sqe, "alice", alice, "SELECT id FROM shared ORDER BY id") == [[1], [3]]
    trino_run(sqe, "alice", alice, "GRANT DELETE ON TABLE shared TO USER bob")
    assert trino_run(sqe, "bob", bob, "DELETE FROM shared") == [[2]]
    assert trino_run(sqe, "alice", alice, "SELECT count(*) FROM shared") == [[0]]
    trino_run(sqe, "alice", alice, "INSERT INTO shared VALUES (1), (2)")
    # An admin may do anything to anyone's table.
    trino_run(sqe, "ada", ada, "ALTER TABLE shared ADD COLUMN note varchar")
    assert trino_run(sqe, "alice", alice, "SELECT id, note FROM shared ORDER BY id") == [[1, None], [2, None]]
    trino_run(sqe, "ada", ada, "DROP TABLE shared")
    assert trino_refusal(sqe, "alice", alice, "SELECT * FROM shared")[0] == "NOT_FOUND"


def test_a_schema_is_its_owners(sqe, jwt):
    alice, bob = jwt["alice"], jwt["bob"]
    trino_run(sqe, "alice", alice, "CREATE SCHEMA alices")
    trino_run(sqe, "alice", alice, "CREATE TABLE alices.t AS SELECT 1 AS id")
    assert trino_refusal(sqe, "bob", bob, "DROP SCHEMA alices CASCADE") == denied("drop schema iceberg.alices")
    assert trino_refusal(sqe, "bob", bob, "INSERT INTO alices.t VALUES (2)") == denied(
        "insert into table iceberg.alices.t"
    )
    assert trino_run(sqe, "bob", bob, "SELECT id FROM alices.t") == [[1]]
