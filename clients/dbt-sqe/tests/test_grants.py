"""dbt-tests-adapter's grants suite: a model's `grants:` config applied with GRANT and REVOKE,
read back from information_schema.table_privileges."""

import os

import pytest
from dbt.tests.adapter.grants.test_incremental_grants import BaseIncrementalGrants
from dbt.tests.adapter.grants.test_model_grants import BaseModelGrants
from dbt.tests.adapter.grants.test_seed_grants import BaseSeedGrants
from dbt.tests.adapter.grants.test_snapshot_grants import BaseSnapshotGrants


@pytest.fixture(scope="module", autouse=True)
def grantees():
    """The suite grants to the users these name: the test IdP's."""
    names = {"DBT_TEST_USER_1": "alice", "DBT_TEST_USER_2": "bob", "DBT_TEST_USER_3": "carol"}
    before = {k: os.environ.get(k) for k in names}
    os.environ.update(names)
    yield
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class TestModelGrants(BaseModelGrants):
    pass


class TestIncrementalGrants(BaseIncrementalGrants):
    pass


class TestSeedGrants(BaseSeedGrants):
    def seeds_support_partial_refresh(self):
        # A seed's table is dropped and made again on every `dbt seed` (as with dbt-trino), and a
        # dropped table's grants go with it: dbt grants again.
        return False


class TestSnapshotGrants(BaseSnapshotGrants):
    pass


