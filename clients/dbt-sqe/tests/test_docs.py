"""dbt-tests-adapter's docs-generate suite: the catalog from information_schema, with SQE's
column types (Trino's spelling), table comments and owners."""

import pytest
from dbt.tests.adapter.basic import expected_catalog
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate, BaseDocsGenReferences

# What SQE's catalog says of the suite's tables and views (no owner role, no statistics).
SQE_TYPES = {
    "role": None,
    "id_type": "integer",
    "text_type": "varchar",
    "time_type": "timestamp(6)",
    "view_type": "VIEW",
    "table_type": "BASE TABLE",
}


class TestDocsGenerate(BaseDocsGenerate):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        return expected_catalog.base_expected_catalog(project, model_stats=expected_catalog.no_stats(), **SQE_TYPES)


class TestDocsGenReferences(BaseDocsGenReferences):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        return expected_catalog.expected_references_catalog(
            project, bigint_type="bigint", model_stats=expected_catalog.no_stats(), **SQE_TYPES
        )
