{{ config(materialized='view') }}
-- Each customer's orders in time, with a running total.
select
    customer_id,
    order_id,
    ordered_on,
    amount,
    row_number() over (partition by customer_id order by ordered_on) as nth_order,
    sum(amount) over (partition by customer_id order by ordered_on rows between unbounded preceding and current row) as running_amount,
    lag(ordered_on) over (partition by customer_id order by ordered_on) as previous_order
from {{ ref('stg_orders') }}
