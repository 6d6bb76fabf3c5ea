"""dbt-tests-adapter's docs-generate suite: the catalog from information_schema, with SQE's
column types (Trino's spelling), table comments and owners."""

import pytest
from dbt.tests.adapter.basic import expected_catalog
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate, BaseDocsGenReferences


def sqe_catalog(project, profile_user):
    return expected_catalog.base_expected_catalog(
        project,
        role=None,
        id_type="integer",
        text_type="varchar",
        time_type="timestamp(6)",
        view_type="VIEW",
        table_type="BASE TABLE",
        model_stats=expected_catalog.no_stats(),
    )


class TestDocsGenerate(BaseDocsGenerate):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project, profile_user):
        return sqe_catalog(project, profile_user)


class TestDocsGenReferences(BaseDocsGenReferences):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project, profile_user):
        return expected_catalog.expected_references_catalog(
            project,
            role=None,
            id_type="integer",
            text_type="varchar",
            time_type="timestamp(6)",
            bigint_type="bigint",
            view_type="VIEW",
            table_type="BASE TABLE",
            model_stats=expected_catalog.no_stats(),
        )
