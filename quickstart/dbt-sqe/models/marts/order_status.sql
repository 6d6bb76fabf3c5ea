-- Each order's latest status, merged in: a day's run reads only the orders changed since the
-- last one, inserts the new and updates the changed. `first_status` is left as first loaded
-- (merge_update_columns), so a changed order shows where it started.
{{ config(
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='order_id',
    merge_update_columns=['status', 'updated_at'],
    query_tag='jaffle-order-status'
) }}

select
    order_id,
    customer_id,
    order_date,
    status,
    status as first_status,
    updated_at
from {{ ref('stg_orders') }}
{% if is_incremental() %}
where updated_at > (select max(updated_at) from {{ this }})
{% endif %}
