//! Schema evolution of one column or of a field inside a `row(…)` column: added, dropped,
//! renamed, widened, made nullable, commented. Each change keeps field ids as Iceberg means them
//! (a new field takes an id no column ever had; a renamed one keeps its id, so its old data stays
//! with it) and commits as a new schema on the condition that the schema it was made from is still
//! the table's current one.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTableOperation, ColumnOption, Expr, Value,
};
use iceberg::spec::{ListType, MapType, NestedField, NestedFieldRef, Schema, StructType, Type};
use iceberg::table::Table;
use iceberg::{TableRequirement, TableUpdate};
use sqe_sessions::{SqeError, SqeResult};

use crate::catalog::backend::CatalogRef;
use crate::error::from_iceberg;
use crate::names::normalize_ident;
use crate::statement::columns::ColumnAction;
use crate::types::{FieldIds, sql_to_iceberg, trino_type_name};

/// A change to the fields of one row (the table's top level, or a row column's).
type Edit = Box<dyn FnOnce(&mut Vec<NestedFieldRef>) -> SqeResult<()> + Send>;

/// The SQL parser's column changes as SQE's own (a path of one name), or None when `op` is not a
/// column change.
pub(crate) fn from_operation(
    op: &AlterTableOperation,
) -> Option<SqeResult<(Vec<String>, ColumnAction)>> {
    let change = match op {
        AlterTableOperation::AddColumn {
            column_def,
            if_not_exists,
            ..
        } => {
            let mut not_null = false;
            let mut comment = None;
            for option in &column_def.options {
                match &option.option {
                    ColumnOption::NotNull => not_null = true,
                    // What every added column reads as in the rows already written (dbt's
                    // snapshots add columns so).
                    ColumnOption::Null => {}
                    ColumnOption::Default(Expr::Value(v)) if v.value == Value::Null => {}
                    ColumnOption::Comment(c) => comment = Some(c.clone()),
                    other => {
                        return Some(Err(SqeError::unsupported(format!(
                            "ADD COLUMN … {other} is not supported"
                        ))));
                    }
                }
            }
            let action = ColumnAction::Add {
                data_type: column_def.data_type.clone(),
                if_not_exists: *if_not_exists,
                not_null,
                comment,
            };
            (vec![normalize_ident(&column_def.name)], action)
        }
        // SQE's dialect parses one column only (`DROP COLUMN a, b` is a syntax error).
        AlterTableOperation::DropColumn {
            column_names,
            if_exists,
            ..
        } if column_names.len() == 1 => (
            vec![normalize_ident(&column_names[0])],
            ColumnAction::Drop {
                if_exists: *if_exists,
            },
        ),
        AlterTableOperation::RenameColumn {
            old_column_name,
            new_column_name,
        } => (
            vec![normalize_ident(old_column_name)],
            ColumnAction::Rename {
                to: normalize_ident(new_column_name),
                if_exists: false,
            },
        ),
        AlterTableOperation::AlterColumn { column_name, op } => {
            let action = match op {
                AlterColumnOperation::SetDataType {
                    data_type,
                    using: None,
                    ..
                } => ColumnAction::SetDataType(data_type.clone()),
                // Every value stays valid; the reverse would need every row checked.
                AlterColumnOperation::DropNotNull => ColumnAction::DropNotNull,
                other => {
                    return Some(Err(SqeError::unsupported(format!(
                        "ALTER TABLE … ALTER COLUMN {other} is not supported: SET DATA TYPE (widening), DROP NOT NULL and COMMENT are"
                    ))));
                }
            };
            (vec![normalize_ident(column_name)], action)
        }
        _ => return None,
    };
    Some(Ok(change))
}

/// Makes the change `action` to the column or field at `path` of `table`.
pub(crate) async fn evolve(
    catalog: &CatalogRef,
    table: &Table,
    path: &[String],
    action: ColumnAction,
) -> SqeResult<()> {
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    let (parents, name) = match path.split_last() {
        Some((name, parents)) => (parents, name.as_str()),
        None => return Err(SqeError::invalid("a column name is required")),
    };
    let shown = path.join(".");
    // The struct the change happens in: the table's top level, or the row `parents` names.
    let siblings = fields_at(schema.as_struct().fields(), parents)?;
    let existing = siblings.iter().find(|f| f.name == name).cloned();
    let missing = || SqeError::not_found(format!("column '{shown}' does not exist"));
    let mut ids = FieldIds::after(metadata.last_column_id());
    let edit: Edit = match action {
        ColumnAction::Add {
            data_type,
            if_not_exists,
            not_null,
            comment,
        } => {
            if existing.is_some() {
                if if_not_exists {
                    return Ok(());
                }
                return Err(SqeError::already_exists(format!(
                    "column '{shown}' already exists"
                )));
            }
            if not_null {
                return Err(SqeError::unsupported(format!(
                    "column '{shown}' cannot be added as NOT NULL: the rows already written have no value for it"
                )));
            }
            let id = ids.fresh();
            let ty = sql_to_iceberg(&data_type, &mut ids)?;
            let mut field = NestedField::optional(id, name, ty);
            field.doc = comment;
            Box::new(move |fields| {
                fields.push(Arc::new(field));
                Ok(())
            })
        }
        ColumnAction::Drop { if_exists } => {
            let Some(field) = existing else {
                return if if_exists { Ok(()) } else { Err(missing()) };
            };
            refuse_dropping(table, &field, &shown)?;
            if siblings.len() == 1 {
                return Err(SqeError::invalid(match parents.is_empty() {
                    true => {
                        "cannot drop every column of a table; drop the table instead".to_string()
                    }
                    false => format!(
                        "cannot drop '{shown}': it is the only field of '{}'",
                        parents.join(".")
                    ),
                }));
            }
            Box::new(move |fields| {
                fields.retain(|f| f.id != field.id);
                Ok(())
            })
        }
        ColumnAction::Rename { to, if_exists } => {
            let Some(field) = existing else {
                return if if_exists { Ok(()) } else { Err(missing()) };
            };
            if siblings.iter().any(|f| f.name == to) {
                let mut taken = parents.to_vec();
                taken.push(to);
                return Err(SqeError::already_exists(format!(
                    "column '{}' already exists",
                    taken.join(".")
                )));
            }
            // Same field id, new name: data written under the old name stays with this column.
            let mut renamed = (*field).clone();
            renamed.name = to;
            replace(renamed)
        }
        ColumnAction::SetDataType(data_type) => {
            let field = existing.ok_or_else(missing)?;
            let to = sql_to_iceberg(&data_type, &mut ids)?;
            if to == *field.field_type {
                return Ok(());
            }
            if !widens(&field.field_type, &to) {
                return Err(SqeError::invalid(format!(
                    "cannot change column '{shown}' from {} to {}: Iceberg widens integer to bigint, real to double and decimal(p, s) to a larger precision only",
                    trino_type_name(&field.field_type),
                    trino_type_name(&to)
                )));
            }
            let mut widened = (*field).clone();
            *widened.field_type = to;
            replace(widened)
        }
        ColumnAction::DropNotNull => {
            let field = existing.ok_or_else(missing)?;
            if !field.required {
                return Ok(());
            }
            let mut nullable = (*field).clone();
            nullable.required = false;
            replace(nullable)
        }
        ColumnAction::Comment(doc) => {
            let field = existing.ok_or_else(missing)?;
            if field.doc == doc {
                return Ok(());
            }
            let mut commented = (*field).clone();
            commented.doc = doc;
            replace(commented)
        }
    };
    let fields = edit_at(schema.as_struct().fields(), parents, edit)?;
    commit_schema(catalog, table, fields).await
}

/// An edit that puts `field` where the field with its id was.
fn replace(field: NestedField) -> Edit {
    Box::new(move |fields| {
        for f in fields.iter_mut() {
            if f.id == field.id {
                *f = Arc::new(field);
                return Ok(());
            }
        }
        Err(SqeError::internal("the field to replace is gone"))
    })
}

/// A field a table cannot lose: one its partitioning, its identifier fields or its sort order uses,
/// or a row holding one.
fn refuse_dropping(table: &Table, field: &NestedField, shown: &str) -> SqeResult<()> {
    let metadata = table.metadata();
    let mut ids = vec![field.id];
    let mut i = 0;
    while i < ids.len() {
        let ty = metadata
            .current_schema()
            .field_by_id(ids[i])
            .map(|f| f.field_type.clone());
        if let Some(ty) = ty {
            ids.extend(children(&ty).iter().map(|f| f.id));
        }
        i += 1;
    }
    let partitioned = metadata
        .default_partition_spec()
        .fields()
        .iter()
        .any(|f| ids.contains(&f.source_id));
    if partitioned {
        return Err(SqeError::invalid(format!(
            "cannot drop partition column '{shown}'"
        )));
    }
    if metadata
        .current_schema()
        .identifier_field_ids()
        .any(|id| ids.contains(&id))
    {
        return Err(SqeError::invalid(format!(
            "cannot drop identifier column '{shown}'"
        )));
    }
    let sorted = metadata
        .default_sort_order()
        .fields
        .iter()
        .any(|f| ids.contains(&f.source_id));
    if sorted {
        return Err(SqeError::invalid(format!(
            "cannot drop column '{shown}': the table's sort order uses it"
        )));
    }
    Ok(())
}

/// The fields directly inside `ty`: a row's fields, a list's element, a map's key and value.
fn children(ty: &Type) -> Vec<NestedFieldRef> {
    match ty {
        Type::Struct(s) => s.fields().to_vec(),
        Type::List(l) => vec![l.element_field.clone()],
        Type::Map(m) => vec![m.key_field.clone(), m.value_field.clone()],
        Type::Primitive(_) => Vec::new(),
    }
}

/// The fields of the row at `parents` (the top level when empty). A step into an array is its
/// `element`, into a map its `key` or `value`, as Spark names them.
fn fields_at(fields: &[NestedFieldRef], parents: &[String]) -> SqeResult<Vec<NestedFieldRef>> {
    let mut fields = fields.to_vec();
    let mut ty: Option<Type> = None;
    for (depth, step) in parents.iter().enumerate() {
        let shown = || parents[..=depth].join(".");
        let next = match &ty {
            None | Some(Type::Struct(_)) => fields.iter().find(|f| f.name == *step).cloned(),
            Some(Type::List(l)) if step == "element" => Some(l.element_field.clone()),
            Some(Type::Map(m)) if step == "key" => Some(m.key_field.clone()),
            Some(Type::Map(m)) if step == "value" => Some(m.value_field.clone()),
            Some(_) => None,
        };
        let next = next
            .ok_or_else(|| SqeError::not_found(format!("column '{}' does not exist", shown())))?;
        fields = children(&next.field_type);
        ty = Some((*next.field_type).clone());
    }
    match ty {
        None | Some(Type::Struct(_)) => Ok(fields),
        Some(other) => Err(SqeError::invalid(format!(
            "'{}' is of type {}, not a row: a field can be changed only inside a row",
            parents.join("."),
            trino_type_name(&other)
        ))),
    }
}

/// `fields` with `edit` made to the fields of the row at `parents` (found by [`fields_at`]).
fn edit_at(
    fields: &[NestedFieldRef],
    parents: &[String],
    edit: Edit,
) -> SqeResult<Vec<NestedFieldRef>> {
    let mut fields = fields.to_vec();
    let Some((step, rest)) = parents.split_first() else {
        edit(&mut fields)?;
        return Ok(fields);
    };
    let at = fields
        .iter()
        .position(|f| f.name == *step)
        .ok_or_else(|| SqeError::internal("a row found before is gone"))?;
    let mut parent = (*fields[at]).clone();
    *parent.field_type = edit_type(&parent.field_type, rest, edit)?;
    fields[at] = Arc::new(parent);
    Ok(fields)
}

fn edit_type(ty: &Type, path: &[String], edit: Edit) -> SqeResult<Type> {
    let inside = |field: &NestedFieldRef, edit: Edit| -> SqeResult<NestedFieldRef> {
        let mut field = (**field).clone();
        *field.field_type = edit_type(&field.field_type, &path[1..], edit)?;
        Ok(Arc::new(field))
    };
    Ok(match (ty, path.first().map(String::as_str)) {
        (Type::Struct(s), _) => Type::Struct(StructType::new(edit_at(s.fields(), path, edit)?)),
        (Type::List(l), Some("element")) => Type::List(ListType {
            element_field: inside(&l.element_field, edit)?,
        }),
        (Type::Map(m), Some("key")) => Type::Map(MapType {
            key_field: inside(&m.key_field, edit)?,
            value_field: m.value_field.clone(),
        }),
        (Type::Map(m), Some("value")) => Type::Map(MapType {
            key_field: m.key_field.clone(),
            value_field: inside(&m.value_field, edit)?,
        }),
        _ => return Err(SqeError::internal("a row found before is gone")),
    })
}

/// Whether Iceberg lets a column of type `from` become `to` with its files as they are: int to
/// long, float to double, and a decimal to a larger precision of the same scale.
fn widens(from: &Type, to: &Type) -> bool {
    use iceberg::spec::PrimitiveType as P;
    match (from, to) {
        (Type::Primitive(from), Type::Primitive(to)) => match (from, to) {
            (P::Int, P::Long) | (P::Float, P::Double) => true,
            (
                P::Decimal {
                    precision: p1,
                    scale: s1,
                },
                P::Decimal {
                    precision: p2,
                    scale: s2,
                },
            ) => s1 == s2 && p2 > p1,
            _ => false,
        },
        _ => false,
    }
}

/// Makes `fields` the table's schema: a new schema with the next free schema id, made current, on
/// the condition that the current schema is still the one the change was made from. (iceberg-rust
/// 0.10.1's own schema change sends its new schema under id 0, which a REST catalog that checks
/// refuses: the id is taken.)
async fn commit_schema(
    catalog: &CatalogRef,
    table: &Table,
    fields: Vec<NestedFieldRef>,
) -> SqeResult<()> {
    let metadata = table.metadata();
    let current = metadata.current_schema();
    let next_id = metadata
        .schemas_iter()
        .map(|s| s.schema_id())
        .max()
        .unwrap_or(0)
        + 1;
    let schema = Schema::builder()
        .with_schema_id(next_id)
        .with_fields(fields)
        .with_identifier_field_ids(current.identifier_field_ids())
        .build()
        .map_err(from_iceberg)?;
    catalog
        .commit_updates(
            table.identifier(),
            vec![TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: current.schema_id(),
            }],
            vec![
                TableUpdate::AddSchema { schema },
                TableUpdate::SetCurrentSchema { schema_id: -1 },
            ],
        )
        .await
        .map_err(from_iceberg)?;
    Ok(())
}
