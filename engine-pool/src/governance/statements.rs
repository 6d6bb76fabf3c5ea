//! The governance statements that need a plan to check what they store: row filters (`CREATE
//! ROW FILTER`, `DROP ROW FILTER`, `SHOW ROW FILTERS`: a filter's condition is planned over its
//! table) and column masks and tags (`ALTER TABLE … ALTER COLUMN … SET MASK | DROP MASK | SET TAG
//! | UNSET TAG`, `ALTER TAG … SET MASK | DROP MASK`, `SHOW MASKS`, `SHOW TAGS`: a mask's
//! expression is planned over its table). Only a table's owner or an admin changes them.

use std::collections::HashMap;

use datafusion::arrow::compute::can_cast_types;
use datafusion::arrow::datatypes::DataType;
use sqe_sessions::{QueryResult, SqeError, SqeResult, quote_identifier};

use super::column_masks::{Mask, hash_key, read_masks, read_tag_masks, read_tags};
use super::model::Object;
use crate::context::Ctx;
use crate::names::resolve_name;
use crate::statement::policies::{MaskAction, MaskStatement, RowFilterKind, RowFilterStatement};

/// `CREATE ROW FILTER`, `DROP ROW FILTER`, `SHOW ROW FILTERS`: see the module doc.
pub(crate) async fn run_row_filter_statement(
    ctx: &Ctx<'_>,
    statement: RowFilterStatement,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    let RowFilterStatement {
        kind,
        name,
        table_name,
        rule,
    } = statement;
    let (catalog, schema, table) = resolve_name(session, &table_name)?;
    let object = Object::table(&catalog, &schema, &table);
    // Only a table's owner or an admin sees and changes its filters; to anyone else it is
    // as absent as a table they cannot see, or refused.
    ctx.governance.authorize_owner(session, &object, || {
        SqeError::not_found(format!("table '{object}' does not exist"))
    })?;
    let (_, _, _) = ctx.mounts.table(session, &table_name).await?;
    let handle = ctx.mounts.bind(session, &catalog)?;
    let db = ctx
        .governance
        .policy_db_of(&catalog, &handle)
        .ok_or_else(|| {
            SqeError::unsupported(format!(
                "catalog '{catalog}' keeps no row filters (only SQLite and PostgreSQL catalogs do)"
            ))
        })?;
    match (kind, name, rule) {
        (RowFilterKind::Create, Some(name), Some((condition, grantee_kind, grantee))) => {
            if name.len() > 255 || grantee.len() > 255 || condition.len() > 4000 {
                return Err(SqeError::invalid(
                    "a row filter's name and grantee are at most 255 characters, its condition 4000",
                ));
            }
            // The condition must be a boolean over the table's own columns.
            let check = format!(
                "SELECT count(*) FROM {catalog_q}.{schema_q}.{table_q} WHERE ({condition})",
                catalog_q = quote_identifier(&catalog),
                schema_q = quote_identifier(&schema),
                table_q = quote_identifier(&table),
            );
            Box::pin(ctx.planner.plan_sql(session, &check))
                .await
                .map_err(|e| {
                    SqeError::invalid(format!(
                        "row filter ({condition}) on {object}: {}",
                        e.message()
                    ))
                })?;
            let exists = !db
                .query(
                    "SELECT filter_name FROM sqe_row_filters WHERE catalog_name = $1
                     AND schema_name = $2 AND table_name = $3 AND filter_name = $4",
                    &[&catalog, &schema, &table, &name],
                )?
                .is_empty();
            if exists {
                return Err(SqeError::already_exists(format!(
                    "row filter '{name}' on {object} already exists"
                )));
            }
            db.execute(
                "INSERT INTO sqe_row_filters (catalog_name, schema_name, table_name, filter_name,
                 grantee_kind, grantee, expression) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &catalog,
                    &schema,
                    &table,
                    &name,
                    grantee_kind,
                    &grantee,
                    &condition,
                ],
            )?;
            Ok(QueryResult::empty())
        }
        (RowFilterKind::Drop { if_exists }, Some(name), _) => {
            let removed = db.execute(
                "DELETE FROM sqe_row_filters WHERE catalog_name = $1 AND schema_name = $2
                 AND table_name = $3 AND filter_name = $4",
                &[&catalog, &schema, &table, &name],
            )?;
            if removed == 0 && !if_exists {
                return Err(SqeError::not_found(format!(
                    "row filter '{name}' on {object} does not exist"
                )));
            }
            Ok(QueryResult::empty())
        }
        _ => {
            let rows: Vec<Vec<String>> = db
                .query(
                    "SELECT filter_name, grantee_kind, grantee, expression FROM sqe_row_filters
                     WHERE catalog_name = $1 AND schema_name = $2 AND table_name = $3
                     ORDER BY filter_name",
                    &[&catalog, &schema, &table],
                )?
                .into_iter()
                .map(|r| {
                    let mut r: Vec<String> = r.into_iter().map(Option::unwrap_or_default).collect();
                    if let Some(kind) = r.get_mut(1) {
                        *kind = kind.to_uppercase();
                    }
                    r
                })
                .collect();
            QueryResult::text(&["Filter", "Grantee Type", "Grantee", "Condition"], &rows)
        }
    }
}

/// `ALTER TABLE … ALTER COLUMN … SET MASK | DROP MASK` and `SHOW MASKS ON …` (see the module
/// doc); None when `sql` is none of them.
pub(crate) async fn run_mask_statement(
    ctx: &Ctx<'_>,
    statement: MaskStatement,
) -> SqeResult<QueryResult> {
    let _session = ctx.session;
    match statement {
        MaskStatement::Table { table_name, action } => {
            mask_statement(ctx, table_name, action).await
        }
        MaskStatement::Tag { tag, mask, grantee } => tag_mask_statement(ctx, tag, mask, grantee),
    }
}

/// `ALTER TAG … SET MASK | DROP MASK`: the admins' (a tag spans tables).
fn tag_mask_statement(
    ctx: &Ctx<'_>,
    tag: String,
    mask: Option<Mask>,
    grantee: Option<(&'static str, String)>,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    if !ctx.governance.is_admin(&session.principal) {
        return Err(SqeError::new(
            sqe_sessions::ErrorCode::PermissionDenied,
            "Access Denied: only an admin sets a tag's masks",
        ));
    }
    let catalog = session.catalog.clone();
    let handle = ctx.mounts.bind(session, &catalog)?;
    let db = ctx
        .governance
        .policy_db_of(&catalog, &handle)
        .ok_or_else(|| {
            SqeError::unsupported(format!(
                "catalog '{catalog}' keeps no masks (only SQLite and PostgreSQL catalogs do)"
            ))
        })?;
    match (mask, grantee) {
        (Some(mask), Some((kind, grantee))) => {
            if let Mask::Custom(_) = mask {
                return Err(SqeError::unsupported(
                    "a tag's mask is one of NULL, REDACT, HASH, SHOW FIRST, SHOW LAST and TRUNCATE TO (an expression names one table's columns)",
                ));
            }
            if mask == Mask::Hash {
                hash_key(ctx.governance.mask_key(), db, &catalog, true)?;
            }
            let (mask_kind, argument) = mask.stored();
            db.execute(
                "DELETE FROM sqe_tag_masks WHERE catalog_name = $1 AND tag_name = $2
                 AND grantee_kind = $3 AND grantee = $4",
                &[&catalog, &tag, kind, &grantee],
            )?;
            db.execute(
                "INSERT INTO sqe_tag_masks (catalog_name, tag_name, grantee_kind, grantee,
                 mask_kind, argument) VALUES ($1, $2, $3, $4, $5, $6)",
                &[&catalog, &tag, kind, &grantee, mask_kind, &argument],
            )?;
        }
        (_, grantee) => {
            let removed = match &grantee {
                Some((kind, grantee)) => db.execute(
                    "DELETE FROM sqe_tag_masks WHERE catalog_name = $1 AND tag_name = $2
                     AND grantee_kind = $3 AND grantee = $4",
                    &[&catalog, &tag, kind, grantee],
                )?,
                None => db.execute(
                    "DELETE FROM sqe_tag_masks WHERE catalog_name = $1 AND tag_name = $2",
                    &[&catalog, &tag],
                )?,
            };
            if removed == 0 {
                return Err(SqeError::not_found(format!("tag '{tag}' has no such mask")));
            }
        }
    }
    Ok(QueryResult::empty())
}

async fn mask_statement(
    ctx: &Ctx<'_>,
    table_name: datafusion::sql::sqlparser::ast::ObjectName,
    action: MaskAction,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    let (catalog, schema, table) = resolve_name(session, &table_name)?;
    let object = Object::table(&catalog, &schema, &table);
    ctx.governance.authorize_owner(session, &object, || {
        SqeError::not_found(format!("table '{object}' does not exist"))
    })?;
    let (_, _, loaded) = ctx.mounts.table(session, &table_name).await?;
    let current = loaded.metadata().current_schema().clone();
    let handle = ctx.mounts.bind(session, &catalog)?;
    let db = ctx
        .governance
        .policy_db_of(&catalog, &handle)
        .ok_or_else(|| {
            SqeError::unsupported(format!(
                "catalog '{catalog}' keeps no column masks (only SQLite and PostgreSQL catalogs do)"
            ))
        })?;
    let field = |name: &str| {
        current
            .as_struct()
            .fields()
            .iter()
            .find(|f| f.name == name)
            .cloned()
            .ok_or_else(|| {
                SqeError::not_found(format!("column '{name}' does not exist in table {object}"))
            })
    };
    let keys = |field_id: i32| {
        [
            catalog.clone(),
            schema.clone(),
            table.clone(),
            field_id.to_string(),
        ]
    };
    let names: HashMap<i32, String> = current
        .as_struct()
        .fields()
        .iter()
        .map(|f| (f.id, f.name.clone()))
        .collect();
    let tags = read_tags(db, &catalog)?
        .remove(&(schema.clone(), table.clone()))
        .unwrap_or_default();
    match action {
        MaskAction::Tag { column, tag, set } => {
            let field = field(&column)?;
            let [c, s, t, id] = keys(field.id);
            db.execute(
                "DELETE FROM sqe_column_tags WHERE catalog_name = $1 AND schema_name = $2
                 AND table_name = $3 AND field_id = $4 AND tag_name = $5",
                &[&c, &s, &t, &id, &tag],
            )?;
            if set {
                db.execute(
                    "INSERT INTO sqe_column_tags (catalog_name, schema_name, table_name,
                     field_id, tag_name) VALUES ($1, $2, $3, $4, $5)",
                    &[&c, &s, &t, &id, &tag],
                )?;
            }
        }
        MaskAction::ShowTags => {
            let mut rows: Vec<Vec<String>> = tags
                .into_iter()
                .filter_map(|(id, tag)| Some(vec![names.get(&id)?.clone(), tag]))
                .collect();
            rows.sort();
            return QueryResult::text(&["Column", "Tag"], &rows);
        }
        MaskAction::Set {
            column,
            mask,
            grantee,
        } => {
            let field = field(&column)?;
            let arrow = iceberg::arrow::type_to_arrow_type(&field.field_type)
                .map_err(crate::error::from_iceberg)?;
            check_mask(ctx, &object, &column, &arrow, &mask).await?;
            if mask == Mask::Hash {
                hash_key(ctx.governance.mask_key(), db, &catalog, true)?;
            }
            let (kind, argument) = mask.stored();
            let [c, s, t, id] = keys(field.id);
            db.execute(
                "DELETE FROM sqe_column_masks WHERE catalog_name = $1 AND schema_name = $2
                 AND table_name = $3 AND field_id = $4 AND grantee_kind = $5 AND grantee = $6",
                &[&c, &s, &t, &id, grantee.0, &grantee.1],
            )?;
            db.execute(
                "INSERT INTO sqe_column_masks (catalog_name, schema_name, table_name, field_id,
                 grantee_kind, grantee, mask_kind, argument) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[&c, &s, &t, &id, grantee.0, &grantee.1, kind, &argument],
            )?;
        }
        MaskAction::Drop { column, grantee } => {
            let field = field(&column)?;
            let [c, s, t, id] = keys(field.id);
            let removed = match &grantee {
                Some((kind, name)) => db.execute(
                    "DELETE FROM sqe_column_masks WHERE catalog_name = $1 AND schema_name = $2
                     AND table_name = $3 AND field_id = $4 AND grantee_kind = $5 AND grantee = $6",
                    &[&c, &s, &t, &id, kind, name],
                )?,
                None => db.execute(
                    "DELETE FROM sqe_column_masks WHERE catalog_name = $1 AND schema_name = $2
                     AND table_name = $3 AND field_id = $4",
                    &[&c, &s, &t, &id],
                )?,
            };
            if removed == 0 {
                return Err(SqeError::not_found(format!(
                    "column '{column}' of {object} has no such mask"
                )));
            }
        }
        MaskAction::Show => {
            let tag_masks = read_tag_masks(db, &catalog)?;
            let mut rows: Vec<Vec<String>> = read_masks(db, &catalog)?
                .remove(&(schema.clone(), table.clone()))
                .unwrap_or_default()
                .into_iter()
                // A dropped column's masks are kept by id but shown no more.
                .filter_map(|(id, kind, grantee, mask)| {
                    Some(vec![
                        names.get(&id)?.clone(),
                        mask.to_string(),
                        kind.to_uppercase(),
                        grantee,
                    ])
                })
                .collect();
            // And those the columns' tags bring.
            for (id, tag) in tags {
                let Some(column) = names.get(&id) else {
                    continue;
                };
                for (kind, grantee, mask) in tag_masks.get(&tag).into_iter().flatten() {
                    rows.push(vec![
                        column.clone(),
                        format!("{mask} (tag {tag})"),
                        kind.to_uppercase(),
                        grantee.clone(),
                    ]);
                }
            }
            rows.sort();
            return QueryResult::text(&["Column", "Mask", "Grantee Type", "Grantee"], &rows);
        }
    }
    Ok(QueryResult::empty())
}

/// Refuses a mask that cannot keep the column's type.
async fn check_mask(
    ctx: &Ctx<'_>,
    object: &Object,
    column: &str,
    t: &DataType,
    mask: &Mask,
) -> SqeResult<()> {
    let session = ctx.session;
    if !mask.fits(t) {
        return Err(SqeError::invalid(format!(
            "mask {mask} does not fit column '{column}' of type {t} (see SHOW MASKS in the README for which masks fit which types)"
        )));
    }
    let Mask::Custom(sql) = mask else {
        return Ok(());
    };
    if sql.len() > 4000 {
        return Err(SqeError::invalid(
            "a mask's expression is at most 4000 characters",
        ));
    }
    let check = format!(
        "SELECT ({sql}) FROM {}.{}.{}",
        quote_identifier(&object.catalog),
        quote_identifier(&object.schema),
        quote_identifier(object.table.as_deref().unwrap_or_default()),
    );
    let (_, plan) = Box::pin(ctx.planner.plan_sql(session, &check))
        .await
        .map_err(|e| SqeError::invalid(format!("mask {mask} on {object}: {}", e.message())))?;
    let made = plan.schema().field(0).data_type().clone();
    if !can_cast_types(&made, t) {
        return Err(SqeError::invalid(format!(
            "mask {mask} gives {made}, which cannot be cast to column '{column}' of type {t}"
        )));
    }
    Ok(())
}
