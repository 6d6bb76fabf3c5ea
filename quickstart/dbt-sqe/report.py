"""What the jaffle shop's tables hold after both days, whether dbt-sqe's tables (schema jaffle_sqe)
equal dbt-trino's (jaffle_trino), and who ran the statements, read from the server over Flight
SQL with TLS as an administrator (who may read every user's rows of system.runtime.queries).

    python report.py FLIGHT_PORT CA_FILE     (the administrator's token in JAFFLE_ADMIN_TOKEN)
"""

import os
import sys

import adbc_driver_flightsql.dbapi as flight_sql

port, ca_file = int(sys.argv[1]), sys.argv[2]
options = {
    "adbc.flight.sql.client_option.tls_root_certs": open(ca_file).read(),
    "adbc.flight.sql.authorization_header": f"Bearer {os.environ['JAFFLE_ADMIN_TOKEN']}",
    # A session (cookies) keeps the schema USE chose for the statements after it.
    "adbc.flight.sql.rpc.with_cookie_middleware": "true",
}
conn = flight_sql.connect(f"grpc+tls://127.0.0.1:{port}", db_kwargs=options, autocommit=True)
cur = conn.cursor()


def rows(sql):
    cur.execute(sql)
    return cur.fetchall()


def text(value):
    return "NULL" if value is None else str(value)


def show(sql):
    print(sql)
    for row in rows(sql):
        print("  " + " | ".join(text(v) for v in row))


def one(sql):
    return rows(sql)[0][0]


cur.execute("USE iceberg.jaffle_sqe")

print("-- rows in jaffle_sqe (built by dbt-sqe) after day 2")
tables = [name for (name,) in rows(
    "SELECT table_name FROM iceberg.information_schema.tables WHERE table_schema = 'jaffle_sqe' ORDER BY table_name")]
for name in tables:
    print(f"  {name}: {one(f'SELECT count(*) FROM {name}')}")

print("-- the marts")
show("SELECT customer_id, first_name, last_name, number_of_orders, customer_lifetime_value, first_order, "
     "most_recent_order FROM customers ORDER BY customer_lifetime_value DESC, customer_id LIMIT 5")
show("SELECT customer_id, email, number_of_orders, customer_lifetime_value FROM customers "
     "WHERE customer_id IN (7, 41) ORDER BY customer_id")
show("SELECT status, count(*) AS orders, sum(amount) AS amount FROM orders GROUP BY status ORDER BY status")
show("SELECT date_format(date_add('month', partition.order_date_month, DATE '1970-01-01'), '%Y-%m') AS month, "
     "record_count FROM \"orders$partitions\" ORDER BY 1")

print("-- the incremental model (merge on order_id): the orders day 2 added or changed")
show("SELECT order_id, customer_id, order_date, first_status, status, updated_at FROM order_status "
     "WHERE updated_at >= TIMESTAMP '2025-04-02 00:00:00' ORDER BY order_id")

print("-- the snapshot: customers with more than one version, and the new one")
show("SELECT customer_id, email, dbt_valid_from, dbt_valid_to FROM customers_snapshot WHERE customer_id IN "
     "(SELECT customer_id FROM customers_snapshot GROUP BY customer_id HAVING count(*) > 1) "
     "OR dbt_valid_from >= TIMESTAMP '2025-04-02 00:00:00' ORDER BY customer_id, dbt_valid_from")

print("-- jaffle_sqe (dbt-sqe over Flight SQL) against jaffle_trino (dbt-trino over Trino's HTTP)")


def listing(sql, schema):
    return rows(sql.format(schema=schema))


relations = "SELECT table_name, table_type FROM iceberg.information_schema.tables WHERE table_schema = '{schema}' ORDER BY 1"
columns = ("SELECT table_name, ordinal_position, column_name, data_type FROM iceberg.information_schema.columns "
           "WHERE table_schema = '{schema}' ORDER BY 1, 2")
same = listing(relations, "jaffle_sqe") == listing(relations, "jaffle_trino")
print(f"  the same tables and views: {'yes' if same else 'NO'}")
same = listing(columns, "jaffle_sqe") == listing(columns, "jaffle_trino")
print(f"  the same columns and types: {'yes' if same else 'NO'}")
for name in tables:
    a, b = f"iceberg.jaffle_sqe.{name}", f"iceberg.jaffle_trino.{name}"
    counts = (one(f"SELECT count(*) FROM {a}"), one(f"SELECT count(*) FROM {b}"))
    only_sqe = one(f"SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b})")
    only_trino = one(f"SELECT count(*) FROM (SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a})")
    verdict = "equal" if counts[0] == counts[1] and only_sqe == only_trino == 0 else (
        f"DIFFERENT: {counts[0]} rows against {counts[1]}, {only_sqe} only in jaffle_sqe, "
        f"{only_trino} only in jaffle_trino")
    print(f"  {name}: {verdict}")

print("-- who ran the statements (system.runtime.queries; all but this report's own)")
# The registry keeps the last 1000 finished statements: below that, it has forgotten none.
kept = one("SELECT count(*) FROM system.runtime.queries")
print(f"  every statement since the server started is still listed: {'yes' if kept < 1000 else 'NO'}")
show("SELECT \"user\", source, state FROM system.runtime.queries WHERE \"user\" <> 'admin' "
     "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
print("-- the sources of model order_status's statements on target sqe (its query_tag: jaffle-order-status)")
show("SELECT DISTINCT source FROM system.runtime.queries WHERE \"user\" <> 'admin' "
     "AND query LIKE '%\"target_name\": \"sqe\", \"node_id\": \"model.jaffle.order_status\"%' ORDER BY 1")

cur.close()
conn.close()
