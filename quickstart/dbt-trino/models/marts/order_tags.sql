-- One row per tag of an order.
select
    o.order_id,
    t.tag,
    t.position
from {{ ref('stg_orders') }} o
cross join unnest(split(o.tags, ';')) with ordinality as t(tag, position)
where o.tags is not null
