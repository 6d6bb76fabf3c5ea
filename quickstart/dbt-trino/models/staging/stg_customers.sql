select
    customer_id,
    name,
    country,
    cast(signup_date as date) as signed_up_on
from {{ ref('customers') }}
