{#-- A relation's grants as SHOW GRANTS lists them (the adapter's standardize_grants_dict reads
     its Grantee and Privilege columns). --#}
{% macro sqe__get_show_grant_sql(relation) -%}
  show grants on table {{ relation }}
{%- endmacro %}
