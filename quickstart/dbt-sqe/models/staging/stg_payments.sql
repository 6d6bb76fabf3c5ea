-- Amounts arrive in cents.
select
    id as payment_id,
    order_id,
    payment_method,
    cast(cast(amount as decimal(12, 2)) / 100 as decimal(10, 2)) as amount
from {{ ref('raw_payments') }}
