select
    id as order_id,
    customer_id,
    order_date,
    status,
    updated_at
from {{ ref('raw_orders') }}
