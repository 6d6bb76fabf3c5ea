{#-- How a table model takes the place of what its name holds (dbt-trino's `on_table_exists`):
     `rename` (the default) builds the new table beside the old, renames the old away and the new
     in, then drops the old; `drop` drops first; `skip` keeps an existing table; `replace` asks for
     CREATE OR REPLACE TABLE. A view in the model's place is dropped first, as dbt does for
     incremental models (SQE renames tables, not views). --#}
{% macro on_table_exists_logic(on_table_exists, existing_relation, intermediate_relation, backup_relation, target_relation) -%}
  {%- set existing = existing_relation -%}
  {%- if existing is not none and existing.is_view and on_table_exists != 'skip' -%}
    {{ adapter.drop_relation(existing) }}
    {%- set existing = none -%}
  {%- endif -%}
  {%- if on_table_exists == 'rename' and existing is not none -%}
    {% call statement('main') -%}
      {{ create_table_as(False, intermediate_relation, sql) }}
    {%- endcall %}
    {{ adapter.rename_relation(existing, backup_relation) }}
    {{ adapter.rename_relation(intermediate_relation, target_relation) }}
    {{ drop_relation_if_exists(backup_relation) }}
  {%- else -%}
    {%- if on_table_exists == 'drop' and existing is not none -%}
      {{ adapter.drop_relation(existing) }}
    {%- endif -%}
    {%- set mode = on_table_exists if on_table_exists in ('replace', 'skip') else none -%}
    {% call statement('main') -%}
      {{ create_table_as(False, target_relation, sql, mode) }}
    {%- endcall %}
  {%- endif -%}
{%- endmacro %}

{#-- Grants stay with a name in SQE (a table renamed into a model's place takes those of the name),
     so dbt compares them with the model's `grants:` and revokes the ones no longer wanted. --#}
{% macro sqe__copy_grants() %}
  {{ return(True) }}
{% endmacro %}
