from dbt.adapters.base import AdapterPlugin

from dbt.adapters.sqe.connections import SqeConnectionManager, SqeCredentials  # noqa: F401
from dbt.adapters.sqe.impl import SqeAdapter
from dbt.include import sqe

Plugin = AdapterPlugin(
    adapter=SqeAdapter,  # type: ignore
    credentials=SqeCredentials,
    include_path=sqe.PACKAGE_PATH,
    # SQE speaks Trino's SQL: macros dispatch sqe__ first, then trino__, then default__.
    dependencies=["trino"],
)
