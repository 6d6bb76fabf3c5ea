-- Every cent paid shows up once in the orders mart, and in the customers mart unless its order
-- went back: a row here is a failure.
with paid as (
    select sum(amount) as total from {{ ref('stg_payments') }}
),
ordered as (
    select
        sum(amount) as total,
        sum(case when status in ('returned', 'return_pending') then 0 else amount end) as kept
    from {{ ref('orders') }}
),
spent as (
    select sum(customer_lifetime_value) as total from {{ ref('customers') }}
)
select paid.total as paid, ordered.total as ordered, ordered.kept as kept, spent.total as spent
from paid cross join ordered cross join spent
where paid.total <> ordered.total or ordered.kept <> spent.total
