-- One row per customer: when they ordered, how often, and what they spent on orders they kept.
with per_customer as (
    select
        customer_id,
        min(order_date) as first_order,
        max(order_date) as most_recent_order,
        count(*) as number_of_orders,
        sum(case when status in ('returned', 'return_pending') then 0 else amount end) as lifetime_value
    from {{ ref('orders') }}
    group by customer_id
)

select
    c.customer_id,
    c.first_name,
    c.last_name,
    c.email,
    o.first_order,
    o.most_recent_order,
    date_diff('day', o.first_order, o.most_recent_order) as days_active,
    coalesce(o.number_of_orders, 0) as number_of_orders,
    cast(coalesce(o.lifetime_value, 0) as decimal(12, 2)) as customer_lifetime_value
from {{ ref('stg_customers') }} as c
left join per_customer as o on o.customer_id = c.customer_id
