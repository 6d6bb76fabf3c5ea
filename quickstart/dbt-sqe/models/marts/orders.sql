-- One row per order with what was paid by each method. Partitioned by the month of the order:
-- dbt-sqe takes Iceberg transforms as `partitioned_by`, dbt-trino as the `partitioning` property.
{% if target.type == 'sqe' %}
  {{ config(partitioned_by=['month(order_date)']) }}
{% else %}
  {{ config(properties={'partitioning': "ARRAY['month(order_date)']"}) }}
{% endif %}

{% set methods = ['credit_card', 'coupon', 'bank_transfer', 'gift_card'] %}

with paid as (
    select
        order_id,
        {% for method in methods -%}
        sum(case when payment_method = '{{ method }}' then amount else 0 end) as {{ method }}_amount,
        {% endfor -%}
        sum(amount) as amount
    from {{ ref('stg_payments') }}
    group by order_id
)

select
    o.order_id,
    o.customer_id,
    o.order_date,
    o.status,
    {% for method in methods -%}
    coalesce(p.{{ method }}_amount, 0) as {{ method }}_amount,
    {% endfor -%}
    coalesce(p.amount, 0) as amount
from {{ ref('stg_orders') }} as o
left join paid as p on p.order_id = o.order_id
