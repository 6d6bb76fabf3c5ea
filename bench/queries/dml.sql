-- The dml suite of sqe-bench (bench/src/dml.rs, and peer.py dml for DuckDB): changes to TPC-H's
-- orders and lineitem, run in this order on both engines, each "step" section timed as one step;
-- the answers of the "check" sections must agree at the end. {parquet} is the directory of the
-- suite's Parquet files. New keys are the old ones plus 100,000,000 (TPC-H SF1's keys stay below
-- 6,000,001).

-- step rf1: TPC-H's refresh function 1, new orders and their lines (0.1% of each table)
INSERT INTO orders SELECT o_orderkey + 100000000, o_custkey, o_orderstatus, o_totalprice, o_orderdate, o_orderpriority, o_clerk, o_shippriority, o_comment FROM read_parquet('{parquet}/orders.parquet') WHERE o_orderkey % 1000 = 3;
INSERT INTO lineitem SELECT l_orderkey + 100000000, l_partkey, l_suppkey, l_linenumber, l_quantity, l_extendedprice, l_discount, l_tax, l_returnflag, l_linestatus, l_shipdate, l_commitdate, l_receiptdate, l_shipinstruct, l_shipmode, l_comment FROM read_parquet('{parquet}/lineitem.parquet') WHERE l_orderkey % 1000 = 3;

-- step rf2: TPC-H's refresh function 2, those orders and lines deleted again
DELETE FROM orders WHERE o_orderkey > 100000000;
DELETE FROM lineitem WHERE l_orderkey > 100000000;

-- step update: 1% of lineitem
UPDATE lineitem SET l_discount = l_discount + 0.01 WHERE l_orderkey % 100 = 7;

-- step merge: 100,000 source rows into orders, half of them matching
MERGE INTO orders USING (SELECT o_orderkey + CASE WHEN o_orderkey % 2 = 0 THEN 0 ELSE 100000000 END AS k, o_custkey AS c, o_totalprice AS p FROM read_parquet('{parquet}/orders.parquet') WHERE o_orderkey % 15 = 1) AS s ON orders.o_orderkey = s.k WHEN MATCHED THEN UPDATE SET o_totalprice = s.p + 1 WHEN NOT MATCHED THEN INSERT (o_orderkey, o_custkey, o_totalprice) VALUES (s.k, s.c, s.p);

-- step partition_delete: one whole partition of lineitem_p (partitioned by l_shipmode in SQE)
DELETE FROM lineitem_p WHERE l_shipmode = 'AIR';

-- check orders
SELECT count(*) AS n, sum(o_orderkey) AS keys, sum(o_totalprice) AS total, count(o_comment) AS comments FROM orders;

-- check lineitem
SELECT count(*) AS n, sum(l_orderkey) AS keys, sum(l_discount) AS discount FROM lineitem;

-- check lineitem_p
SELECT count(*) AS n, sum(l_orderkey) AS keys FROM lineitem_p;
