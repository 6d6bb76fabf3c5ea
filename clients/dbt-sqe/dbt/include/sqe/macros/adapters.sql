{#-- SQE drops a schema with everything in it in one statement. --#}
{% macro sqe__drop_schema(relation) -%}
  {%- call statement('drop_schema') -%}
    drop schema if exists {{ relation.without_identifier() }} cascade
  {%- endcall -%}
{% endmacro %}
