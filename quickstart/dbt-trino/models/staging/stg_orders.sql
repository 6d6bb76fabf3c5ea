-- One row per order, typed. An amount that is not a number becomes NULL (try_cast), not an error.
select
    order_id,
    customer_id,
    cast(ordered_at as date) as ordered_on,
    date_trunc('month', cast(ordered_at as date)) as order_month,
    date_add('day', 30, cast(ordered_at as date)) as pay_by,
    status,
    try_cast(amount as decimal(10, 2)) as amount,
    if(status = 'returned', 0, 1) as kept,
    json_extract_scalar(payload, '$.channel') as channel,
    json_extract_scalar(payload, '$.coupon') as coupon,
    tags
from {{ ref('orders') }}
