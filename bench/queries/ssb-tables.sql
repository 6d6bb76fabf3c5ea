-- The Star Schema Benchmark's five tables, derived from TPC-H's (after dbgen) the way SSB's own
-- generator derives them: lineorder from lineitem, orders and partsupp; the dimensions from customer,
-- supplier and part with their nation and region names; dates from the calendar of the orders.
CREATE SCHEMA ssb;
CREATE TABLE ssb.customer AS
SELECT c_custkey, c_name, c_address,
       rpad(left(n_name, 9), 9, ' ') || (c_custkey % 10)::VARCHAR AS c_city,
       n_name AS c_nation, r_name AS c_region, c_phone, c_mktsegment
FROM customer, nation, region
WHERE c_nationkey = n_nationkey AND n_regionkey = r_regionkey
ORDER BY c_custkey;
CREATE TABLE ssb.supplier AS
SELECT s_suppkey, s_name, s_address,
       rpad(left(n_name, 9), 9, ' ') || (s_suppkey % 10)::VARCHAR AS s_city,
       n_name AS s_nation, r_name AS s_region, s_phone
FROM supplier, nation, region
WHERE s_nationkey = n_nationkey AND n_regionkey = r_regionkey
ORDER BY s_suppkey;
-- TPC-H's brand 'Brand#MN' is manufacturer M's category N; SSB gives each category 40 brands.
CREATE TABLE ssb.part AS
SELECT p_partkey, p_name,
       'MFGR#' || right(p_mfgr, 1) AS p_mfgr,
       'MFGR#' || right(p_brand, 2) AS p_category,
       'MFGR#' || right(p_brand, 2) || lpad(((p_partkey - 1) % 40 + 1)::VARCHAR, 2, '0') AS p_brand1,
       split_part(p_name, ' ', 1) AS p_color, p_type, p_size, p_container
FROM part
ORDER BY p_partkey;
CREATE TABLE ssb.dates AS
SELECT CAST(strftime(d, '%Y%m%d') AS INTEGER) AS d_datekey,
       strftime(d, '%B %-d, %Y') AS d_date,
       dayname(d) AS d_dayofweek,
       monthname(d) AS d_month,
       year(d)::INTEGER AS d_year,
       (year(d) * 100 + month(d))::INTEGER AS d_yearmonthnum,
       strftime(d, '%b%Y') AS d_yearmonth,
       (dayofweek(d) + 1)::INTEGER AS d_daynuminweek,
       day(d)::INTEGER AS d_daynuminmonth,
       dayofyear(d)::INTEGER AS d_daynuminyear,
       month(d)::INTEGER AS d_monthnuminyear,
       (((dayofyear(d) - 1) // 7) + 1)::INTEGER AS d_weeknuminyear,
       CASE WHEN month(d) IN (12, 1) THEN 'Christmas' WHEN month(d) IN (6, 7, 8) THEN 'Summer'
            WHEN month(d) IN (3, 4, 5) THEN 'Spring' ELSE 'Fall' END AS d_sellingseason,
       dayofweek(d) = 6 AS d_lastdayinweekfl,
       last_day(d) = d AS d_lastdayinmonthfl,
       (month(d) = 12 AND day(d) = 25) OR (month(d) = 1 AND day(d) = 1) AS d_holidayfl,
       dayofweek(d) BETWEEN 1 AND 5 AS d_weekdayfl
FROM (SELECT CAST(range AS DATE) AS d FROM range(DATE '1992-01-01', DATE '1999-01-01', INTERVAL 1 DAY));
CREATE TABLE ssb.lineorder AS
SELECT l_orderkey AS lo_orderkey, l_linenumber AS lo_linenumber, o_custkey AS lo_custkey,
       l_partkey AS lo_partkey, l_suppkey AS lo_suppkey,
       CAST(strftime(o_orderdate, '%Y%m%d') AS INTEGER) AS lo_orderdate,
       o_orderpriority AS lo_orderpriority, o_shippriority AS lo_shippriority,
       CAST(l_quantity AS INTEGER) AS lo_quantity,
       l_extendedprice AS lo_extendedprice,
       o_totalprice AS lo_ordtotalprice,
       CAST(l_discount * 100 AS INTEGER) AS lo_discount,
       CAST(l_extendedprice * (1 - l_discount) AS DECIMAL(15, 2)) AS lo_revenue,
       ps_supplycost AS lo_supplycost,
       CAST(l_tax * 100 AS INTEGER) AS lo_tax,
       CAST(strftime(l_commitdate, '%Y%m%d') AS INTEGER) AS lo_commitdate,
       l_shipmode AS lo_shipmode
FROM lineitem, orders, partsupp
WHERE l_orderkey = o_orderkey AND l_partkey = ps_partkey AND l_suppkey = ps_suppkey
ORDER BY lo_orderkey, lo_linenumber;
