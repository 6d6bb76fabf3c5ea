//! Column masks: what a user or a role sees in place of a column's values.
//!
//! ```sql
//! ALTER TABLE t ALTER COLUMN c SET MASK <mask> FOR {USER | ROLE} name
//! ALTER TABLE t ALTER COLUMN c DROP MASK [FOR {USER | ROLE} name]
//! SHOW MASKS ON t
//! ALTER TAG tag SET MASK <mask> FOR {USER | ROLE} name       -- an admin's
//! ALTER TAG tag DROP MASK [FOR {USER | ROLE} name]
//! ALTER TABLE t ALTER COLUMN c {SET | UNSET} TAG tag          -- the table owner's
//! SHOW TAGS ON t
//! ```
//!
//! A tag's masks apply to every column it is set on, kept (like the tags) by field id; a column's
//! own mask wins over its tags', and a mask that does not fit a column's type shows NULL.
//!
//! A mask keeps the column's type. The vocabulary:
//!
//! | mask | shows | columns |
//! |---|---|---|
//! | `NULL` | NULL | any |
//! | `REDACT ['text']` | the text (`xxxx` if none) for each non-NULL value | text |
//! | `HASH` | a keyed hash (HMAC-SHA256, as hex text or folded into the integer) | text, int, bigint |
//! | `SHOW FIRST n`, `SHOW LAST n` | the first or last n characters, letters and digits of the rest as `x` | text |
//! | `TRUNCATE TO {YEAR \| MONTH \| DAY}` | the date or timestamp cut to the unit | date, timestamp |
//! | `USING (expression)` | the expression over the row's columns, cast to the column's type | any |
//!
//! HASH keys each column apart: its key is derived from the catalog's key (`[access]
//! mask_key_env`'s, or a random one the catalog makes and keeps in its database when the first HASH
//! mask is set), the table's UUID and the column's field id. Equal values of one column hash alike
//! (DISTINCT, GROUP BY and self-joins still work), but no other table, not even one whose owner
//! masks it with HASH for themselves, can serve as a dictionary of its hashes. A hash hides a value
//! from a large domain; a column of few values (ages, flags) is better masked otherwise.
//!
//! Masks are kept by the column's Iceberg field id: a renamed column stays masked, and a column
//! dropped and added again under its old name starts unmasked. The table's owner (or an admin) sets
//! them. When masks for the caller's user and for their roles name one column, the user's wins,
//! then the first role by name. Row filters (row_filters.rs) see the raw values (as Trino's do);
//! everything else in a statement sees only the masked ones: each scan of the table is followed by
//! a projection that masks the columns, and since the masks are volatile no condition on a masked
//! column is moved below them, so neither a predicate nor the files' statistics ever meet a raw
//! value.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int32Array, Int64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{DFSchemaRef, Result as DFResult, ScalarValue, plan_err};
use datafusion::execution::SessionState;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility, lit,
    when,
};
use sqe_sessions::{SqeError, SqeResult};

use crate::catalog::policy_store::PolicyDb;

/// What a mask shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mask {
    Null,
    Redact(String),
    Hash,
    ShowFirst(u32),
    ShowLast(u32),
    Truncate(&'static str),
    Custom(String),
}

impl Mask {
    /// (kind, argument) as the policy table keeps them.
    pub(crate) fn stored(&self) -> (&'static str, String) {
        match self {
            Mask::Null => ("null", String::new()),
            Mask::Redact(text) => ("redact", text.clone()),
            Mask::Hash => ("hash", String::new()),
            Mask::ShowFirst(n) => ("show_first", n.to_string()),
            Mask::ShowLast(n) => ("show_last", n.to_string()),
            Mask::Truncate(unit) => ("truncate", unit.to_string()),
            Mask::Custom(sql) => ("custom", sql.clone()),
        }
    }

    pub(crate) fn from_stored(kind: &str, argument: &str) -> Option<Mask> {
        Some(match kind {
            "null" => Mask::Null,
            "redact" => Mask::Redact(argument.to_string()),
            "hash" => Mask::Hash,
            "show_first" => Mask::ShowFirst(argument.parse().ok()?),
            "show_last" => Mask::ShowLast(argument.parse().ok()?),
            "truncate" => Mask::Truncate(unit(argument)?),
            "custom" => Mask::Custom(argument.to_string()),
            _ => return None,
        })
    }

    /// Whether the mask fits a column of type `t` (a custom one is checked by planning it).
    pub(crate) fn fits(&self, t: &DataType) -> bool {
        let text = matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8);
        match self {
            Mask::Null | Mask::Custom(_) => true,
            Mask::Redact(_) | Mask::ShowFirst(_) | Mask::ShowLast(_) => text,
            Mask::Hash => text || matches!(t, DataType::Int32 | DataType::Int64),
            Mask::Truncate(_) => matches!(t, DataType::Date32 | DataType::Timestamp(..)),
        }
    }
}

impl std::fmt::Display for Mask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mask::Null => write!(f, "NULL"),
            Mask::Redact(text) => write!(f, "REDACT '{}'", text.replace('\'', "''")),
            Mask::Hash => write!(f, "HASH"),
            Mask::ShowFirst(n) => write!(f, "SHOW FIRST {n}"),
            Mask::ShowLast(n) => write!(f, "SHOW LAST {n}"),
            Mask::Truncate(unit) => write!(f, "TRUNCATE TO {}", unit.to_uppercase()),
            Mask::Custom(sql) => write!(f, "USING ({sql})"),
        }
    }
}

pub(crate) fn unit(word: &str) -> Option<&'static str> {
    ["year", "month", "day"]
        .into_iter()
        .find(|u| u.eq_ignore_ascii_case(word))
}

/// One stored mask: (field id, grantee kind, grantee, mask).
pub(crate) type Rule = (i32, String, String, Mask);

/// A catalog's column tags: (field id, tag) by (schema, table).
pub(crate) type Tags = HashMap<(String, String), Vec<(i32, String)>>;

/// One mask of a tag: (grantee kind, grantee, mask).
pub(crate) type TagMask = (String, String, Mask);

/// Every mask of `catalog`, by (schema, table).
pub(crate) fn read_masks(
    db: &dyn PolicyDb,
    catalog: &str,
) -> SqeResult<HashMap<(String, String), Vec<Rule>>> {
    let rows = db.query(
        "SELECT schema_name, table_name, field_id, grantee_kind, grantee, mask_kind, argument
         FROM sqe_column_masks WHERE catalog_name = $1 ORDER BY grantee_kind DESC, grantee",
        &[catalog],
    )?;
    let mut masks: HashMap<(String, String), Vec<Rule>> = HashMap::new();
    for r in rows.into_iter().filter(|r| r.len() == 7) {
        let t: Vec<String> = r.into_iter().map(Option::unwrap_or_default).collect();
        // A row this build cannot read masks the column entirely (never shows it raw).
        let mask = Mask::from_stored(&t[5], &t[6]).unwrap_or(Mask::Null);
        let Ok(field_id) = t[2].parse() else {
            continue;
        };
        masks
            .entry((t[0].clone(), t[1].clone()))
            .or_default()
            .push((field_id, t[3].clone(), t[4].clone(), mask));
    }
    Ok(masks)
}

/// Every column tag of `catalog`: (field id, tag) by (schema, table).
pub(crate) fn read_tags(db: &dyn PolicyDb, catalog: &str) -> SqeResult<Tags> {
    let rows = db.query(
        "SELECT schema_name, table_name, field_id, tag_name FROM sqe_column_tags
         WHERE catalog_name = $1 ORDER BY tag_name",
        &[catalog],
    )?;
    let mut tags: Tags = HashMap::new();
    for r in rows.into_iter().filter(|r| r.len() == 4) {
        let t: Vec<String> = r.into_iter().map(Option::unwrap_or_default).collect();
        let Ok(field_id) = t[2].parse() else {
            continue;
        };
        tags.entry((t[0].clone(), t[1].clone()))
            .or_default()
            .push((field_id, t[3].clone()));
    }
    Ok(tags)
}

/// Every tag's masks in `catalog`: (grantee kind, grantee, mask) by tag, users' first.
pub(crate) fn read_tag_masks(
    db: &dyn PolicyDb,
    catalog: &str,
) -> SqeResult<HashMap<String, Vec<TagMask>>> {
    let rows = db.query(
        "SELECT tag_name, grantee_kind, grantee, mask_kind, argument FROM sqe_tag_masks
         WHERE catalog_name = $1 ORDER BY grantee_kind DESC, grantee",
        &[catalog],
    )?;
    let mut masks: HashMap<String, Vec<TagMask>> = HashMap::new();
    for r in rows.into_iter().filter(|r| r.len() == 5) {
        let t: Vec<String> = r.into_iter().map(Option::unwrap_or_default).collect();
        let mask = Mask::from_stored(&t[3], &t[4]).unwrap_or(Mask::Null);
        masks
            .entry(t[0].clone())
            .or_default()
            .push((t[1].clone(), t[2].clone(), mask));
    }
    Ok(masks)
}

/// The hash key of `catalog`: the configured one, else the catalog's own (made on first need when
/// `make` is set).
pub(crate) fn hash_key(
    configured: Option<&[u8]>,
    db: &dyn PolicyDb,
    catalog: &str,
    make: bool,
) -> SqeResult<Option<Vec<u8>>> {
    if let Some(key) = configured {
        return Ok(Some(key.to_vec()));
    }
    let read = || -> SqeResult<Option<Vec<u8>>> {
        let rows = db.query(
            "SELECT key_hex FROM sqe_mask_keys WHERE catalog_name = $1",
            &[catalog],
        )?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next().flatten())
            .and_then(|hex| from_hex(&hex)))
    };
    if let Some(key) = read()? {
        return Ok(Some(key));
    }
    if !make {
        return Ok(None);
    }
    let mut key = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
        .map_err(|_| SqeError::internal("no randomness for a mask key"))?;
    db.execute(
        "INSERT INTO sqe_mask_keys (catalog_name, key_hex) VALUES ($1, $2)",
        &[catalog, &to_hex(&key)],
    )?;
    // Read back: a concurrent first HASH mask may have made the key first.
    read()
}

/// The HASH key of one column: the catalog's key, the table's UUID and the field id.
pub(crate) fn column_hash_key(catalog_key: &[u8], table_uuid: &str, field_id: i32) -> Vec<u8> {
    hmac(catalog_key, format!("{table_uuid}/{field_id}").as_bytes())
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The masking functions. They are in no function registry (no statement can name one), and
/// volatile, so that no optimizer rule moves a condition on a masked column below the mask.
#[derive(Debug, PartialEq, Eq, Hash)]
struct MaskFn {
    op: Op,
    signature: Signature,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Op {
    /// Marks a mask SQE built from other expressions.
    Applied,
    ShowFirst(usize),
    ShowLast(usize),
    Hash(Vec<u8>),
}

impl MaskFn {
    fn call(op: Op, arg: Expr) -> Expr {
        let udf = ScalarUDF::new_from_impl(MaskFn {
            op,
            signature: Signature::any(1, Volatility::Volatile),
        });
        Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(udf), vec![arg]))
    }
}

impl ScalarUDFImpl for MaskFn {
    fn name(&self) -> &str {
        "sqe_column_mask"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DFResult<DataType> {
        match args {
            [t] => Ok(t.clone()),
            _ => plan_err!("sqe_column_mask takes one argument"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return plan_err!("sqe_column_mask takes one argument");
        };
        if self.op == Op::Applied {
            return Ok(value.clone());
        }
        let array = value.to_array(args.number_rows)?;
        let t = array.data_type().clone();
        let masked: ArrayRef = match (&self.op, &t) {
            (Op::Hash(key), DataType::Int64) => {
                let Some(a) = array.as_any().downcast_ref::<Int64Array>() else {
                    return plan_err!("sqe_column_mask: not a bigint");
                };
                let hashed: Int64Array = a
                    .iter()
                    .map(|v| v.map(|v| fold::<8>(&hmac(key, &v.to_be_bytes())) as i64))
                    .collect();
                Arc::new(hashed)
            }
            (Op::Hash(key), DataType::Int32) => {
                let Some(a) = array.as_any().downcast_ref::<Int32Array>() else {
                    return plan_err!("sqe_column_mask: not an int");
                };
                let hashed: Int32Array = a
                    .iter()
                    .map(|v| v.map(|v| fold::<4>(&hmac(key, &v.to_be_bytes())) as i32))
                    .collect();
                Arc::new(hashed)
            }
            (op, _) => {
                let text = cast(&array, &DataType::Utf8)?;
                let Some(text) = text.as_any().downcast_ref::<StringArray>() else {
                    return plan_err!("sqe_column_mask: not text");
                };
                let masked: StringArray =
                    text.iter().map(|v| v.map(|s| mask_text(op, s))).collect();
                cast(&masked, &t)?
            }
        };
        Ok(ColumnarValue::Array(masked))
    }
}

/// The first `N` bytes of a hash as an unsigned integer.
fn fold<const N: usize>(tag: &[u8]) -> u64 {
    tag.iter()
        .take(N)
        .fold(0u64, |v, b| (v << 8) | u64::from(*b))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    ring::hmac::sign(&key, data).as_ref().to_vec()
}

fn mask_text(op: &Op, s: &str) -> String {
    let hide = |c: char| if c.is_alphanumeric() { 'x' } else { c };
    match op {
        Op::ShowFirst(n) => s
            .chars()
            .enumerate()
            .map(|(i, c)| if i < *n { c } else { hide(c) })
            .collect(),
        Op::ShowLast(n) => {
            let shown_from = s.chars().count().saturating_sub(*n);
            s.chars()
                .enumerate()
                .map(|(i, c)| if i >= shown_from { c } else { hide(c) })
                .collect()
        }
        Op::Hash(key) => to_hex(&hmac(key, s.as_bytes())),
        Op::Applied => s.to_string(),
    }
}

/// Whether `expr` is (or holds) a mask SQE placed.
pub(crate) fn is_mask(expr: &Expr) -> bool {
    let mut found = false;
    let _ = datafusion::common::tree_node::TreeNode::apply(expr, |e| {
        if let Expr::ScalarFunction(f) = e
            && (f.func.inner().as_ref() as &dyn Any).is::<MaskFn>()
        {
            found = true;
            return Ok(datafusion::common::tree_node::TreeNodeRecursion::Stop);
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    });
    found
}

/// The masked value of `column` (of type `t`, in a scan whose columns are `schema`).
pub(crate) fn masked(
    mask: &Mask,
    column: Expr,
    t: &DataType,
    state: &SessionState,
    schema: &DFSchemaRef,
    key: Option<&[u8]>,
) -> DFResult<Expr> {
    let typed_null = || ScalarValue::try_from(t).map(lit);
    let cast_to = |e: Expr| datafusion::logical_expr::cast(e, t.clone());
    Ok(match mask {
        Mask::Null => MaskFn::call(Op::Applied, typed_null()?),
        Mask::Redact(text) => {
            let e = when(column.is_null(), typed_null()?).otherwise(cast_to(lit(text.as_str())))?;
            MaskFn::call(Op::Applied, e)
        }
        Mask::ShowFirst(n) => MaskFn::call(Op::ShowFirst(*n as usize), column),
        Mask::ShowLast(n) => MaskFn::call(Op::ShowLast(*n as usize), column),
        Mask::Hash => match key {
            Some(key) => MaskFn::call(Op::Hash(key.to_vec()), column),
            None => return plan_err!("the catalog has no key for HASH masks"),
        },
        Mask::Truncate(unit) => {
            let timestamp = match t {
                DataType::Timestamp(..) => column,
                _ => datafusion::logical_expr::cast(
                    column,
                    DataType::Timestamp(TimeUnit::Microsecond, None),
                ),
            };
            let cut = Expr::ScalarFunction(ScalarFunction::new_udf(
                datafusion::functions::datetime::date_trunc(),
                vec![lit(*unit), timestamp],
            ));
            MaskFn::call(Op::Applied, cast_to(cut))
        }
        Mask::Custom(sql) => {
            let e = state.create_logical_expr(sql, schema.as_ref())?;
            MaskFn::call(Op::Applied, cast_to(e))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_masks_keep_the_shape() {
        assert_eq!(
            mask_text(&Op::ShowLast(4), "4111-1111-1111-1234"),
            "xxxx-xxxx-xxxx-1234"
        );
        assert_eq!(mask_text(&Op::ShowFirst(2), "Ada Lovelace"), "Adx xxxxxxxx");
        assert_eq!(mask_text(&Op::ShowFirst(20), "short"), "short");
        let a = mask_text(&Op::Hash(b"k".to_vec()), "x");
        assert_eq!(a.len(), 64);
        assert_eq!(a, mask_text(&Op::Hash(b"k".to_vec()), "x"));
        assert_ne!(a, mask_text(&Op::Hash(b"other".to_vec()), "x"));
    }
}
