//! A table's sort order, in Trino's words: `WITH (sorted_by = ARRAY['c', 'd DESC NULLS FIRST'])`
//! and `ALTER TABLE t SET PROPERTIES sorted_by = ARRAY[…]` (an empty array: unsorted from now on).
//! Each field is a column of the table, ascending with nulls first unless it says otherwise;
//! DESC puts nulls last unless it says otherwise (Iceberg's and Trino's defaults).
//!
//! Every data file a write makes is sorted by the table's order (files.rs): INSERT, CREATE TABLE
//! AS, INSERT OVERWRITE, UPDATE's and MERGE's new files, copy-on-write rewrites and optimize. A
//! copy-on-write that patches a file in place (patch.rs) keeps its rows where they were, so it
//! is never used to set a column of the order. A table another
//! engine sorted by a transform (`bucket(id, 4)`, `day(ts)`) or a nested field is sorted by the
//! fields before the first such one: Iceberg lets a writer sort by less than the order, never by
//! something else.

use datafusion::common::{Column, DFSchema};
use datafusion::logical_expr::{Expr as DFExpr, SortExpr};
use iceberg::spec::{
    NullOrder, Schema, SortDirection, SortField, SortOrder, TableMetadata, Transform,
};
use sqe_sessions::{SqeError, SqeResult};

use crate::names::sql_name;

/// The sort order `entries` (the strings of `sorted_by`) name in `schema`.
pub(crate) fn sort_order(schema: &Schema, entries: &[String]) -> SqeResult<SortOrder> {
    let mut fields: Vec<SortField> = Vec::with_capacity(entries.len());
    for entry in entries {
        let field = sort_field(schema, entry)?;
        if fields.iter().any(|f| f.source_id == field.source_id) {
            return Err(SqeError::invalid(format!(
                "sorted_by names column '{}' more than once",
                column(entry).0
            )));
        }
        fields.push(field);
    }
    match fields.is_empty() {
        true => Ok(SortOrder::unsorted_order()),
        false => Ok(SortOrder {
            order_id: 1,
            fields,
        }),
    }
}

/// One entry of `sorted_by`: a column (double-quoted if its name needs it), then optionally ASC or
/// DESC and NULLS FIRST or NULLS LAST.
fn sort_field(schema: &Schema, entry: &str) -> SqeResult<SortField> {
    let (name, rest) = column(entry);
    let bad = || {
        SqeError::invalid(format!(
            "sorted_by entry '{entry}' is not a column optionally followed by ASC or DESC and NULLS FIRST or NULLS LAST"
        ))
    };
    if name.is_empty() {
        return Err(bad());
    }
    let words: Vec<String> = rest
        .split_whitespace()
        .map(|w| w.to_ascii_uppercase())
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let (direction, nulls) = match words.as_slice() {
        [] => (SortDirection::Ascending, None),
        ["ASC"] => (SortDirection::Ascending, None),
        ["DESC"] => (SortDirection::Descending, None),
        ["NULLS", n] => (SortDirection::Ascending, Some(*n)),
        ["ASC", "NULLS", n] => (SortDirection::Ascending, Some(*n)),
        ["DESC", "NULLS", n] => (SortDirection::Descending, Some(*n)),
        _ => return Err(bad()),
    };
    let null_order = match (nulls, direction) {
        (Some("FIRST"), _) => NullOrder::First,
        (Some("LAST"), _) => NullOrder::Last,
        (Some(_), _) => return Err(bad()),
        (None, SortDirection::Ascending) => NullOrder::First,
        (None, SortDirection::Descending) => NullOrder::Last,
    };
    let field = schema.as_struct().field_by_name(&name).ok_or_else(|| {
        SqeError::invalid(format!(
            "sorted_by names column '{name}', which the table does not have"
        ))
    })?;
    if !field.field_type.is_primitive() {
        return Err(SqeError::invalid(format!(
            "sorted_by cannot sort by column '{name}': it is a row, an array or a map"
        )));
    }
    Ok(SortField {
        source_id: field.id,
        transform: Transform::Identity,
        direction,
        null_order,
    })
}

/// The column an entry names (lower-cased unless double-quoted) and the rest of it.
fn column(entry: &str) -> (String, &str) {
    let entry = entry.trim();
    if let Some(quoted) = entry.strip_prefix('"') {
        // `""` inside a quoted name is one `"`.
        let mut name = String::new();
        let mut chars = quoted.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '"' {
                name.push(c);
            } else if chars.peek().is_some_and(|(_, n)| *n == '"') {
                name.push('"');
                chars.next();
            } else {
                return (name, &quoted[i + 1..]);
            }
        }
        return (String::new(), "");
    }
    match entry.split_once(char::is_whitespace) {
        Some((name, rest)) => (name.to_lowercase(), rest),
        None => (entry.to_lowercase(), ""),
    }
}

/// The table's default sort order as `sorted_by` spells it (empty when unsorted), for SHOW CREATE
/// TABLE: the defaults are left out.
pub(crate) fn sorted_by(metadata: &TableMetadata) -> Vec<String> {
    let schema = metadata.current_schema();
    metadata
        .default_sort_order()
        .fields
        .iter()
        .map(|f| {
            let name = match schema.name_by_field_id(f.source_id) {
                Some(name) if f.transform == Transform::Identity => sql_name(name),
                Some(name) => format!("{}({})", f.transform, sql_name(name)),
                None => format!("<field {}>", f.source_id),
            };
            let direction = match f.direction {
                SortDirection::Ascending => "",
                SortDirection::Descending => " DESC",
            };
            let nulls = match (f.direction, f.null_order) {
                (SortDirection::Ascending, NullOrder::First)
                | (SortDirection::Descending, NullOrder::Last) => "",
                (_, NullOrder::First) => " NULLS FIRST",
                (_, NullOrder::Last) => " NULLS LAST",
            };
            format!("{name}{direction}{nulls}")
        })
        .collect()
}

/// What a write sorts its rows by (a plan whose columns are the table's, `columns`): the table's
/// default order, up to its first field that is not a top-level column as it is (see the module's
/// words). Empty when the table is unsorted.
pub(crate) fn write_order(metadata: &TableMetadata, columns: &DFSchema) -> Vec<SortExpr> {
    let schema = metadata.current_schema();
    let top_level = schema.as_struct().fields();
    metadata
        .default_sort_order()
        .fields
        .iter()
        .map_while(|f| {
            let name = &top_level
                .iter()
                .find(|c| c.id == f.source_id)
                .filter(|_| f.transform == Transform::Identity)?
                .name;
            let column = columns.qualified_field_with_unqualified_name(name).ok()?;
            Some(SortExpr::new(
                DFExpr::Column(Column::from(column)),
                f.direction == SortDirection::Ascending,
                f.null_order == NullOrder::First,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{NestedField, PrimitiveType, Type};

    use super::*;

    fn schema() -> Schema {
        let field = |id, name: &str| {
            Arc::new(NestedField::optional(
                id,
                name,
                Type::Primitive(PrimitiveType::Long),
            ))
        };
        Schema::builder()
            .with_fields(vec![field(1, "id"), field(2, "Mixed Case")])
            .build()
            .unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn entries_in_trinos_words() {
        let s = schema();
        let order = |entries: &[&str]| {
            sort_order(
                &s,
                &entries.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            )
            .map(|o| {
                o.fields
                    .iter()
                    .map(|f| (f.source_id, f.direction, f.null_order))
                    .collect::<Vec<_>>()
            })
            .map_err(|e| e.message().to_string())
        };
        use NullOrder::{First, Last};
        use SortDirection::{Ascending as Asc, Descending as Desc};
        assert_eq!(order(&["ID"]), Ok(vec![(1, Asc, First)]));
        assert_eq!(order(&["id desc"]), Ok(vec![(1, Desc, Last)]));
        assert_eq!(order(&["id ASC NULLS LAST"]), Ok(vec![(1, Asc, Last)]));
        assert_eq!(
            order(&["\"Mixed Case\" DESC NULLS FIRST", "id"]),
            Ok(vec![(2, Desc, First), (1, Asc, First)])
        );
        assert_eq!(order(&[]), Ok(vec![]));
        assert_eq!(
            order(&["id sideways"]),
            Err("sorted_by entry 'id sideways' is not a column optionally followed by ASC or DESC and NULLS FIRST or NULLS LAST".into())
        );
        assert_eq!(
            order(&["nope"]),
            Err("sorted_by names column 'nope', which the table does not have".into())
        );
        assert_eq!(
            order(&["id", "ID DESC"]),
            Err("sorted_by names column 'id' more than once".into())
        );
    }
}
