{#-- insert_overwrite: the new rows replace the partitions they fall in (SQE's INSERT OVERWRITE,
     Spark's dynamic partition overwrite); an unpartitioned table is replaced whole. --#}
{% macro sqe__get_incremental_insert_overwrite_sql(arg_dict) %}
  {%- set target = arg_dict["target_relation"] -%}
  {%- set source = arg_dict["temp_relation"] -%}
  {%- set columns = get_quoted_csv(arg_dict["dest_columns"] | map(attribute="name")) -%}
  {%- if arg_dict["incremental_predicates"] -%}
    {% do exceptions.raise_compiler_error("incremental_predicates do not apply to the insert_overwrite strategy: it replaces the partitions the new rows fall in") %}
  {%- endif -%}
  insert overwrite {{ target }} ({{ columns }})
  select {{ columns }} from {{ source }}
{% endmacro %}

{#-- Without a strategy, a model with a unique_key is merged on it (as most warehouses' adapters
     do); without one, its new rows are appended. --#}
{% macro sqe__get_incremental_default_sql(arg_dict) %}
  {%- if arg_dict["unique_key"] -%}
    {% do return(get_incremental_merge_sql(arg_dict)) %}
  {%- else -%}
    {% do return(get_incremental_append_sql(arg_dict)) %}
  {%- endif -%}
{% endmacro %}
