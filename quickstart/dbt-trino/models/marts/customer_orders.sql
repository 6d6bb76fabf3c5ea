-- One row per customer: what they ordered and kept, and how long they have been ordering.
with orders as (
    select * from {{ ref('stg_orders') }}
)
select
    c.customer_id,
    c.name,
    c.country,
    count(o.order_id) as orders,
    coalesce(sum(o.amount * o.kept), 0) as kept_amount,
    min(o.ordered_on) as first_order,
    max(o.ordered_on) as last_order,
    date_diff('day', min(o.ordered_on), max(o.ordered_on)) as days_active
from {{ ref('stg_customers') }} c
left join orders o on o.customer_id = c.customer_id
group by c.customer_id, c.name, c.country
