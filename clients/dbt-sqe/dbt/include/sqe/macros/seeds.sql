{#-- Seeds: the CSV file read by Arrow's CSV reader (not agate's), the table made with the columns'
     types (the seed's column_types, else the types read), and the rows sent as Arrow through Flight
     SQL bulk ingest in one call. A seed table is made anew on every run (as with dbt-trino). --#}
{% materialization seed, adapter='sqe' %}
  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=model['alias']) -%}
  {%- set grant_config = config.get('grants') -%}
  {%- if old_relation is not none and old_relation.is_view -%}
    {{ exceptions.raise_compiler_error("Cannot seed to '{}', it is a view".format(old_relation.render())) }}
  {%- endif -%}
  {%- set columns = adapter.read_seed_file(model) -%}
  {%- do store_result('agate_table', response='OK', agate_table=adapter.seed_preview(model)) -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {%- if old_relation is not none -%}
    {{ adapter.drop_relation(old_relation) }}
  {%- endif -%}
  {%- set quote_columns = config.get('quote_columns', None) -%}
  {% set create_table_sql %}
    create table {{ this.render() }} (
      {%- for name, type in columns %}
      {{ adapter.quote_seed_column(name, quote_columns) }} {{ type }}{{ "," if not loop.last }}
      {%- endfor %}
    ) {{ properties() }}
  {% endset %}
  {% call statement('_') -%}
    {{ create_table_sql }}
  {%- endcall %}
  {%- set rows = adapter.ingest_seed_file(this, model) -%}

  {% call noop_statement('main', 'INSERT ' ~ rows, 'INSERT', rows) %}
    {{ create_table_sql }};
    -- {{ rows }} rows appended through Flight SQL bulk ingest
  {% endcall %}

  {% set target_relation = this.incorporate(type='table') %}
  {% do apply_grants(target_relation, grant_config, should_revoke=False) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
