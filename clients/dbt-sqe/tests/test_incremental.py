"""dbt-tests-adapter's incremental suites: unique keys (merge, delete+insert), on_schema_change,
merge_exclude_columns, incremental predicates and microbatch; and insert_overwrite, which the
suite has no class for."""

import pytest
from dbt.tests.adapter.incremental.test_incremental_merge_exclude_columns import BaseMergeExcludeColumns
from dbt.tests.adapter.incremental.test_incremental_microbatch import BaseMicrobatch
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import BaseIncrementalOnSchemaChange
from dbt.tests.adapter.incremental.test_incremental_predicates import BaseIncrementalPredicates
from dbt.tests.adapter.incremental.test_incremental_unique_id import (
    BaseIncrementalUniqueKey,
    seeds__add_new_rows_sql,
    seeds__duplicate_insert_sql,
    seeds__seed_csv,
)
from dbt.tests.util import run_dbt


def typed_dates(sql: str) -> str:
    """The suite inserts text into a DATE column; Trino's SQL (and so SQE) wants a DATE literal."""
    return sql.replace("'2022-02-14'", "DATE '2022-02-14'").replace("'2022-02-01'", "DATE '2022-02-01'")


class TestIncrementalUniqueKey(BaseIncrementalUniqueKey):
    @pytest.fixture(scope="class")
    def seeds(self):
        return {
            "duplicate_insert.sql": typed_dates(seeds__duplicate_insert_sql),
            "seed.csv": seeds__seed_csv,
            "add_new_rows.sql": typed_dates(seeds__add_new_rows_sql),
        }


class TestIncrementalOnSchemaChange(BaseIncrementalOnSchemaChange):
    pass


class TestMergeExcludeColumns(BaseMergeExcludeColumns):
    pass


class TestIncrementalPredicatesDeleteInsert(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+incremental_predicates": ["id != 2"], "+incremental_strategy": "delete+insert"}}


class TestIncrementalPredicatesMerge(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {
            "models": {
                "+incremental_predicates": ["dbt_internal_dest.id != 2"],
                "+incremental_strategy": "merge",
            }
        }


class TestMicrobatch(BaseMicrobatch):
    pass


insert_overwrite_sql = """
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partitioned_by=['day']) }}
{% if not is_incremental() %}
select * from (values (1, 'a', 'mon'), (2, 'b', 'mon'), (3, 'c', 'tue')) as t(id, msg, day)
{% else %}
select * from (values (4, 'd', 'tue'), (5, 'e', 'wed')) as t(id, msg, day)
{% endif %}
"""


class TestInsertOverwrite:
    @pytest.fixture(scope="class")
    def models(self):
        return {"overwritten.sql": insert_overwrite_sql}

    def test_new_rows_replace_the_partitions_they_fall_in(self, project):
        run_dbt(["run"])
        run_dbt(["run"])
        rows = project.run_sql(f"select id, msg, day from {project.test_schema}.overwritten order by id", fetch="all")
        # Monday's rows stay; Tuesday's row 3 is replaced by row 4; Wednesday is new.
        assert [tuple(r) for r in rows] == [(1, "a", "mon"), (2, "b", "mon"), (4, "d", "tue"), (5, "e", "wed")]
