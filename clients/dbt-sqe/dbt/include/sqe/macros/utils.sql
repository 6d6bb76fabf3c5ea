{#-- dbt's cross-database macros where SQE's Trino SQL wants other words than dbt-trino's. --#}

{#-- datediff counts the datepart boundaries between two instants (dbt's meaning): the distance
     between both instants truncated to the datepart. Microseconds are kept (timestamp(6)). --#}
{% macro sqe__datediff(first_date, second_date, datepart) -%}
  {%- set part = datepart | lower | replace("'", "") | trim -%}
  {%- set a = "cast(" ~ first_date ~ " as timestamp(6))" -%}
  {%- set b = "cast(" ~ second_date ~ " as timestamp(6))" -%}
  {%- if part == 'microsecond' -%}
    (date_diff('millisecond', date_trunc('millisecond', {{ a }}), date_trunc('millisecond', {{ b }})) * 1000
      + cast(format_datetime({{ b }}, 'SSSSSS') as bigint) % 1000
      - cast(format_datetime({{ a }}, 'SSSSSS') as bigint) % 1000)
  {%- elif part in ('millisecond', 'second', 'minute', 'hour', 'day', 'week', 'month', 'quarter', 'year') -%}
    date_diff('{{ part }}', date_trunc('{{ part }}', {{ a }}), date_trunc('{{ part }}', {{ b }}))
  {%- else -%}
    {% if execute %}{{ exceptions.raise_compiler_error("datediff: unsupported datepart " ~ datepart) }}{% endif %}
  {%- endif -%}
{%- endmacro %}

{#-- An empty array has the element type asked for, so that it concatenates with others. --#}
{% macro sqe__array_construct(inputs, data_type) -%}
  {%- if inputs -%}
    array[ {{ inputs | join(' , ') }} ]
  {%- else -%}
    cast(array[] as array({{ data_type }}))
  {%- endif -%}
{%- endmacro %}
