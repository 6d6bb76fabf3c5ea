{#-- Table properties of a model: `properties` as SQE's WITH (...) takes them, and the shorthands
     `partitioned_by` (Iceberg transforms: ["region", "day(ordered_at)", "bucket(id, 16)"]),
     `file_format` and `location`. A temporary table (an incremental model's new rows) keeps the
     partitioning but not a given location. --#}
{% macro properties(temporary=False) %}
  {%- set props = {} -%}
  {%- do props.update(config.get('properties') or {}) -%}
  {%- set partitioned_by = config.get('partitioned_by') -%}
  {%- if partitioned_by -%}
    {%- if 'partitioning' in props -%}
      {% do exceptions.raise_compiler_error("set either partitioned_by or properties.partitioning, not both") %}
    {%- endif -%}
    {%- if partitioned_by is string -%}{%- set partitioned_by = [partitioned_by] -%}{%- endif -%}
    {%- set quoted = [] -%}
    {%- for part in partitioned_by -%}{%- do quoted.append("'" ~ (part | replace("'", "''")) ~ "'") -%}{%- endfor -%}
    {%- do props.update({'partitioning': 'ARRAY[' ~ (quoted | join(', ')) ~ ']'}) -%}
  {%- endif -%}
  {%- set file_format = config.get('file_format') -%}
  {%- if file_format -%}
    {%- if 'format' in props -%}
      {% do exceptions.raise_compiler_error("set either file_format or properties.format, not both") %}
    {%- endif -%}
    {%- do props.update({'format': "'" ~ file_format ~ "'"}) -%}
  {%- endif -%}
  {%- if temporary and 'location' in props -%}
    {%- do props.pop('location') -%}
  {%- endif -%}
  {%- if props -%}
  WITH (
    {%- for key, value in props.items() %}
    {{ key }} = {{ value }}{{ "," if not loop.last }}
    {%- endfor %}
  )
  {%- endif -%}
{%- endmacro -%}
