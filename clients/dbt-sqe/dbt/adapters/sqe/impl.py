"""The SQE adapter: dbt-trino's SQL (SQE speaks Trino's dialect) over Arrow Flight SQL."""

import os
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
from dbt.adapters.base.meta import available
from dbt.adapters.trino.impl import TrinoAdapter, TrinoConfig
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.sqe.connections import SqeConnectionManager, arrow_type_name, error_message


@dataclass
class SqeConfig(TrinoConfig):
    # Iceberg partition transforms, e.g. ["region", "day(ordered_at)", "bucket(id, 16)"].
    partitioned_by: Optional[List[str]] = None
    # The `source` of the model's statements in system.runtime.queries.
    query_tag: Optional[str] = None


class SqeAdapter(TrinoAdapter):
    ConnectionManager = SqeConnectionManager
    connections: SqeConnectionManager
    AdapterSpecificConfigs = SqeConfig

    @classmethod
    def date_function(cls):
        return "current_timestamp"

    def __init__(self, config, mp_context) -> None:
        super().__init__(config, mp_context)
        # Seed files read by `read_seed_file`, by path, until `ingest_seed_file` sends them.
        self._seed_files: dict = {}

    def valid_incremental_strategies(self):
        return ["append", "merge", "delete+insert", "insert_overwrite", "microbatch"]

    def pre_model_hook(self, config: Mapping[str, Any]) -> Optional[bool]:
        tag = config.get("query_tag")
        if tag is None:
            return None
        self.connections.set_model_tag(tag)
        return True

    def post_model_hook(self, config: Mapping[str, Any], context: Optional[bool]) -> None:
        if context:
            self.connections.set_model_tag(None)

    def standardize_grants_dict(self, grants_table) -> dict:
        """SHOW GRANTS' rows (Grantee, Grantee Type, Privilege as `GRANT SELECT` or `DENY SELECT`)
        as dbt's `grants:` config spells them: the users' grants."""
        grants: dict = {}
        for row in grants_table:
            kind, _, privilege = row["Privilege"].partition(" ")
            # dbt grants to users; a role's grants (and DENYs) are someone else's to manage.
            if kind != "GRANT" or row["Grantee Type"] != "USER":
                continue
            grants.setdefault(privilege.lower(), []).append(row["Grantee"])
        return grants

    @available
    def read_seed_file(self, model) -> List[Tuple[str, str]]:
        """Reads a seed's CSV file with Arrow's reader and gives its columns with the SQL types the
        table takes: the seed's `column_types` where given, else those the values read as (whole
        numbers INTEGER, or BIGINT past its range; other numbers DOUBLE; DATE; TIMESTAMP; BOOLEAN
        for true/false; VARCHAR). The rows wait for `ingest_seed_file`."""
        path = seed_path(model)
        overrides = dict(model["config"].get("column_types") or {})
        table = read_csv(path, model["config"].get("delimiter") or ",", set(overrides))
        self._seed_files[path] = table
        return [(name, overrides.get(name) or sql_type(column)) for name, column in zip(table.column_names, table.columns)]

    @available
    def seed_preview(self, model):
        """The first rows of the seed read by `read_seed_file`, for `dbt seed --show`."""
        from dbt_common.clients.agate_helper import table_from_data_flat

        table = self._seed_files[seed_path(model)].slice(0, 500)
        return table_from_data_flat(table.to_pylist(), table.column_names)

    @available
    def ingest_seed_file(self, relation, model) -> int:
        """Appends the seed's rows to `relation` (made with the types of `read_seed_file`) through
        Flight SQL bulk ingest, as Arrow in the table's own column types."""
        table = self._seed_files.pop(seed_path(model))
        if table.num_rows == 0:
            return 0
        handle = self.connections.get_thread_connection().handle
        cursor = handle.cursor()
        with self.connections.exception_handler(f"select * from {relation} limit 0"):
            cursor.execute(f"select * from {relation} limit 0")
        schema = cursor.table.schema
        columns = [cast_column(column, field, relation) for column, field in zip(table.columns, schema)]
        with self.connections.exception_handler(f"bulk ingest into {relation}"):
            handle.ingest(pa.Table.from_arrays(columns, schema=schema), relation.database, relation.schema, relation.identifier)
        return table.num_rows


def seed_path(model) -> str:
    return os.path.join(model["root_path"], model["original_file_path"])


def read_csv(path: str, delimiter: str, as_text: set) -> pa.Table:
    """A seed file as Arrow reads it: empty fields are NULL, true/false (any case) booleans, and
    the columns given a type by the seed's config read as text (cast to that type at ingest)."""
    text = {name: pa.string() for name in as_text}
    return pa_csv.read_csv(
        path,
        parse_options=pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
        convert_options=pa_csv.ConvertOptions(
            column_types=text,
            # What dbt's own seeds read as NULL.
            null_values=["", "null", "NULL", "Null"],
            strings_can_be_null=True,
            true_values=["true", "True", "TRUE"],
            false_values=["false", "False", "FALSE"],
        ),
    )


def sql_type(column: pa.ChunkedArray) -> str:
    """The SQL type of a column Arrow's CSV reader typed: whole numbers INTEGER where they fit,
    values with an offset TIMESTAMP(6) WITH TIME ZONE, and text (times, empty columns) VARCHAR."""
    t = column.type
    if pa.types.is_integer(t):
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        fits = low is None or (-(2**31) <= low and high < 2**31)
        return "INTEGER" if fits else "BIGINT"
    if pa.types.is_timestamp(t) and t.tz:
        return "TIMESTAMP(6) WITH TIME ZONE"
    if pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_date(t) or pa.types.is_timestamp(t):
        return arrow_type_name(t)
    return "VARCHAR"


def cast_column(column: pa.ChunkedArray, field: pa.Field, relation) -> pa.Array:
    """A column read from the file in the table's type (text to a declared type, through Arrow's
    casts); a value that does not convert is an error naming the column."""
    array = column.combine_chunks()
    if array.type == field.type:
        return array
    try:
        return pc.cast(array, field.type)
    except (pa.ArrowException, ValueError) as e:
        raise DbtDatabaseError(
            f"seed {relation}: column {field.name} cannot be read as {field.type}: {error_message(e)}"
        ) from e
