//! `SHOW FUNCTIONS [LIKE 'pattern']`: every function a statement can call, with Trino's columns:
//! one row per name (an alias is a name) and signature, types in Trino's names.
//!
//! A signature is what the function's own coercion accepts unchanged. DataFusion lists examples
//! for most of its signature kinds; for the others (SQE's functions coerce their arguments
//! themselves) the argument types are probed: every combination of Trino's common types, up to
//! three arguments. A position that takes every type probed is shown as a type variable (`T`).
//! Probing is done once per function and process.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, TimeUnit};
use datafusion::common::{Result, ScalarValue};
use datafusion::execution::SessionState;
use datafusion::logical_expr::function::WindowUDFFieldArgs;
use datafusion::logical_expr::type_coercion::functions::{UDFCoercionExt, fields_with_udf};
use datafusion::logical_expr::{Documentation, ReturnFieldArgs, TypeSignature, Volatility};
use sqe_sessions::{QueryResult, SqeResult};

use super::like_chars;

/// A documented signature: return type and argument types, in Trino's names.
type Signed = (&'static str, &'static str);

/// Trino's signatures (return type, argument types) of the functions whose types probing cannot
/// show: those taking lambdas or any type, and those SQE plans as expressions.
const DOCUMENTED: &[(&str, &str, &[Signed])] = &[
    (
        "all_match",
        "scalar",
        &[("boolean", "array(T), function(T,boolean)")],
    ),
    (
        "any_match",
        "scalar",
        &[("boolean", "array(T), function(T,boolean)")],
    ),
    (
        "none_match",
        "scalar",
        &[("boolean", "array(T), function(T,boolean)")],
    ),
    (
        "filter",
        "scalar",
        &[("array(T)", "array(T), function(T,boolean)")],
    ),
    (
        "transform",
        "scalar",
        &[("array(U)", "array(T), function(T,U)")],
    ),
    (
        "reduce",
        "scalar",
        &[("R", "array(T), S, function(S,T,S), function(S,R)")],
    ),
    (
        "zip_with",
        "scalar",
        &[("array(R)", "array(T), array(U), function(T,U,R)")],
    ),
    (
        "map_filter",
        "scalar",
        &[("map(K,V)", "map(K,V), function(K,V,boolean)")],
    ),
    (
        "transform_keys",
        "scalar",
        &[("map(K2,V)", "map(K1,V), function(K1,V,K2)")],
    ),
    (
        "transform_values",
        "scalar",
        &[("map(K,V2)", "map(K,V1), function(K,V1,V2)")],
    ),
    (
        "map_zip_with",
        "scalar",
        &[("map(K,V3)", "map(K,V1), map(K,V2), function(K,V1,V2,V3)")],
    ),
    (
        "map_from_entries",
        "scalar",
        &[("map(K,V)", "array(row(K,V))")],
    ),
    (
        "multimap_from_entries",
        "scalar",
        &[("map(K,array(V))", "array(row(K,V))")],
    ),
    ("try", "scalar", &[("T", "T")]),
    (
        "date",
        "scalar",
        &[
            ("date", "varchar"),
            ("date", "timestamp(p)"),
            ("date", "timestamp(p) with time zone"),
        ],
    ),
    (
        "mod",
        "scalar",
        &[
            ("bigint", "bigint, bigint"),
            ("decimal(p,s)", "decimal(p,s), decimal(p,s)"),
            ("double", "double, double"),
        ],
    ),
    (
        "to_milliseconds",
        "scalar",
        &[("bigint", "interval day to second")],
    ),
    (
        "width_bucket",
        "scalar",
        &[
            ("bigint", "double, array(double)"),
            ("bigint", "double, double, double, bigint"),
        ],
    ),
    ("to_ieee754_32", "scalar", &[("varbinary", "real")]),
    (
        "cosine_distance",
        "scalar",
        &[
            ("double", "array(double), array(double)"),
            ("double", "map(varchar,double), map(varchar,double)"),
        ],
    ),
    (
        "map",
        "scalar",
        &[
            ("map(unknown,unknown)", ""),
            ("map(K,V)", "array(K), array(V)"),
        ],
    ),
    (
        "exclude_columns",
        "table",
        &[("table", "table, descriptor")],
    ),
    ("any_value", "aggregate", &[("T", "T")]),
    (
        "approx_percentile",
        "aggregate",
        &[
            ("bigint", "bigint, double"),
            ("double", "double, double"),
            ("array(bigint)", "bigint, array(double)"),
            ("array(double)", "double, array(double)"),
            ("bigint", "bigint, bigint, double"),
            ("double", "double, bigint, double"),
        ],
    ),
    ("every", "aggregate", &[("boolean", "boolean")]),
    ("histogram", "aggregate", &[("map(T,bigint)", "T")]),
    ("listagg", "aggregate", &[("varchar", "varchar, varchar")]),
    ("map_agg", "aggregate", &[("map(K,V)", "K, V")]),
    ("multimap_agg", "aggregate", &[("map(K,array(V))", "K, V")]),
    (
        "reduce_agg",
        "aggregate",
        &[("S", "T, S, function(S,T,S), function(S,S,S)")],
    ),
    (
        "variance",
        "aggregate",
        &[("double", "bigint"), ("double", "double")],
    ),
    ("first_value", "aggregate", &[("T", "T")]),
    ("last_value", "aggregate", &[("T", "T")]),
];

struct Row {
    name: String,
    kind: &'static str,
    /// Return type and argument types, in Trino's names (empty when not known).
    signature: Signature,
    deterministic: bool,
    description: String,
}

type Signature = (String, String);

/// The types probed, as Trino names them: boolean, integer, bigint, double, decimal(38,2),
/// varchar, varbinary, date, timestamp(6), array(bigint), map(varchar, bigint).
fn probed_types() -> Vec<DataType> {
    let entries = Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Int64, true),
    ]);
    vec![
        DataType::Boolean,
        DataType::Int32,
        DataType::Int64,
        DataType::Float64,
        DataType::Decimal128(38, 2),
        DataType::Utf8,
        DataType::Binary,
        DataType::Date32,
        DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::new_list(DataType::Int64, true),
        DataType::Map(
            Arc::new(Field::new("entries", DataType::Struct(entries), false)),
            false,
        ),
    ]
}

/// Fewer types for three arguments, to keep the combinations few.
fn probed_types_of_three() -> Vec<DataType> {
    vec![
        DataType::Boolean,
        DataType::Int64,
        DataType::Float64,
        DataType::Utf8,
        DataType::Date32,
        DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::new_list(DataType::Int64, true),
    ]
}

/// A constant of type `t` for typing a function whose result type reads its constants: `UTC`
/// for a text, 0 for a number.
fn sample(t: &DataType) -> Option<ScalarValue> {
    if matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8) {
        return Some(ScalarValue::Utf8(Some("UTC".into())));
    }
    ScalarValue::new_zero(t).ok().filter(|_| t.is_numeric())
}

fn fields(types: &[DataType]) -> Vec<FieldRef> {
    types
        .iter()
        .enumerate()
        .map(|(i, t)| Arc::new(Field::new(format!("a{i}"), t.clone(), true)))
        .collect()
}

/// Whether `f` takes `types` as they are.
fn accepts<F: UDFCoercionExt>(f: &F, types: &[DataType]) -> bool {
    let probe = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fields_with_udf(&fields(types), f)
    }));
    matches!(probe, Ok(Ok(out)) if out.iter().map(|f| f.data_type()).eq(types.iter()))
}

/// Every combination of `n` of `types`.
fn combinations(types: &[DataType], n: usize) -> Vec<Vec<DataType>> {
    (0..n).fold(vec![Vec::new()], |acc, _| {
        acc.into_iter()
            .flat_map(|prefix| {
                types.iter().map(move |t| {
                    let mut next = prefix.clone();
                    next.push(t.clone());
                    next
                })
            })
            .collect()
    })
}

/// The signatures of a function: argument type lists its coercion accepts, each with the return
/// type `returns` gives for it.
fn signatures<F: UDFCoercionExt>(
    f: &F,
    returns: impl Fn(&[DataType]) -> Result<DataType>,
) -> Vec<Signature> {
    let name_of = |t: &DataType| sqe_functions::type_name(t);
    let type_signature = &f.signature().type_signature;
    let examples = type_signature.get_example_types();
    let mut out = BTreeSet::new();
    let returns = |args: &[DataType]| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| returns(args))).unwrap_or_else(
            |_| {
                Err(datafusion::common::DataFusionError::Internal(
                    "return type".into(),
                ))
            },
        )
    };
    let mut add = |args: &[DataType]| {
        let ret = returns(args).map(|t| name_of(&t)).unwrap_or_default();
        let args: Vec<String> = args.iter().map(name_of).collect();
        out.insert((ret, args.join(", ")));
    };
    if !examples.is_empty() {
        examples.iter().for_each(|args| add(args));
        return out.into_iter().collect();
    }
    if matches!(type_signature, TypeSignature::Nullary) {
        add(&[]);
        return out.into_iter().collect();
    }
    let mut generic = Vec::new();
    for n in 0..=3 {
        let candidates = if n == 3 {
            probed_types_of_three()
        } else {
            probed_types()
        };
        let tuples = combinations(&candidates, n);
        let taken: Vec<&Vec<DataType>> = tuples.iter().filter(|t| accepts(f, t)).collect();
        if n > 0 && taken.len() == tuples.len() {
            // Any type at every position: one row of type variables.
            let ret = generic_return(&taken, &returns, n);
            let vars: Vec<String> = (1..=n)
                .map(|i| if n == 1 { "T".into() } else { format!("T{i}") })
                .collect();
            generic.push((ret, vars.join(", ")));
            continue;
        }
        taken.into_iter().for_each(|args| add(args));
    }
    out.extend(generic);
    out.into_iter().collect()
}

/// The return type of a signature of type variables: `T` (or `T1`) when it is always the first
/// argument's type, `array(T)` when always an array of it, the one type when it never changes,
/// empty otherwise.
fn generic_return(
    taken: &[&Vec<DataType>],
    returns: &impl Fn(&[DataType]) -> Result<DataType>,
    n: usize,
) -> String {
    let results: Vec<Option<DataType>> = taken.iter().map(|t| returns(t).ok()).collect();
    if taken
        .iter()
        .zip(&results)
        .all(|(t, r)| r.as_ref() == t.first())
    {
        return if n == 1 { "T".into() } else { "T1".into() };
    }
    let array_of_first = taken.iter().zip(&results).all(|(t, r)| match r {
        Some(DataType::List(f)) => Some(f.data_type()) == t.first(),
        _ => false,
    });
    if array_of_first {
        return if n == 1 {
            "array(T)".into()
        } else {
            "array(T1)".into()
        };
    }
    match results.first() {
        Some(Some(first)) if results.iter().all(|r| r.as_ref() == Some(first)) => {
            sqe_functions::type_name(first)
        }
        _ => String::new(),
    }
}

/// Signatures found once per function (by kind and name) in this process: the functions behind
/// a name are the same in every session.
fn cached(kind: &'static str, name: &str, find: impl FnOnce() -> Vec<Signature>) -> Vec<Signature> {
    type Found = HashMap<(&'static str, String), Vec<Signature>>;
    static CACHE: OnceLock<Mutex<Found>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (kind, name.to_string());
    if let Some(found) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return found.clone();
    }
    let found = find();
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, found.clone());
    found
}

fn describe(doc: Option<&Documentation>) -> String {
    doc.map(|d| {
        d.description
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    })
    .unwrap_or_default()
}

/// The pattern of `SHOW FUNCTIONS LIKE '…'`, if any (`rest` is the text after `SHOW FUNCTIONS`).
pub(crate) fn show_functions(
    state: &SessionState,
    pattern: Option<&str>,
) -> SqeResult<QueryResult> {
    let pattern: Option<Vec<char>> = pattern.map(|p| p.chars().collect());
    let wanted = |name: &str| {
        pattern
            .as_ref()
            .is_none_or(|p| like_chars(p, &name.chars().collect::<Vec<_>>()))
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut add = |name: &str,
                   kind,
                   signatures: Vec<Signature>,
                   volatility: Volatility,
                   doc: Option<&Documentation>| {
        let signatures = if signatures.is_empty() {
            vec![Signature::default()]
        } else {
            signatures
        };
        for signature in signatures {
            rows.push(Row {
                name: name.to_string(),
                kind,
                signature,
                deterministic: volatility != Volatility::Volatile,
                description: describe(doc),
            })
        }
    };
    for (name, f) in state.scalar_functions() {
        if !wanted(name) {
            continue;
        }
        let found = cached("scalar", name, || {
            signatures(f.as_ref(), |args| {
                // Functions typing their result from argument fields answer only this way.
                f.return_type(args).or_else(|_| {
                    let arg_fields = fields(args);
                    let typed = |scalar_arguments: &[Option<&ScalarValue>]| {
                        f.return_field_from_args(ReturnFieldArgs {
                            arg_fields: &arg_fields,
                            scalar_arguments,
                        })
                        .map(|field| field.data_type().clone())
                    };
                    // Those that need a constant (a time zone, an offset) are given a sample one.
                    let samples: Vec<Option<ScalarValue>> = args.iter().map(sample).collect();
                    typed(&vec![None; args.len()])
                        .or_else(|_| typed(&samples.iter().map(Option::as_ref).collect::<Vec<_>>()))
                })
            })
        });
        add(
            name,
            "scalar",
            found,
            f.signature().volatility,
            f.documentation(),
        );
    }
    for (name, f) in state.aggregate_functions() {
        if !wanted(name) {
            continue;
        }
        let found = cached("aggregate", name, || {
            signatures(f.as_ref(), |args| f.return_type(args))
        });
        add(
            name,
            "aggregate",
            found,
            f.signature().volatility,
            f.documentation(),
        );
    }
    for (name, f) in state.window_functions() {
        if !wanted(name) {
            continue;
        }
        let found = cached("window", name, || {
            signatures(f.as_ref(), |args| {
                let fields = fields(args);
                Ok(f.field(WindowUDFFieldArgs::new(&fields, name))?
                    .data_type()
                    .clone())
            })
        });
        add(
            name,
            "window",
            found,
            f.signature().volatility,
            f.documentation(),
        );
    }
    for (name, f) in state.higher_order_functions() {
        add(
            name,
            "scalar",
            Vec::new(),
            f.signature().volatility,
            f.documentation(),
        );
    }
    // Functions SQE plans as DataFusion's under other names or as expressions (trino_sql/).
    for (name, kind) in [
        ("approx_percentile", "aggregate"),
        ("listagg", "aggregate"),
        ("variance", "aggregate"),
        ("every", "aggregate"),
        ("any_value", "aggregate"),
        ("mod", "scalar"),
        ("date", "scalar"),
        ("try", "scalar"),
        ("reduce_agg", "aggregate"),
        ("exclude_columns", "table"),
    ] {
        add(name, kind, Vec::new(), Volatility::Immutable, None);
    }
    // Trino's documented signatures where probing shows none (lambdas, type variables, forms
    // planned as expressions): they replace the probed ones of that name and kind.
    for (name, kind, documented) in DOCUMENTED {
        let Some(at) = rows.iter().position(|r| r.name == *name && r.kind == *kind) else {
            continue;
        };
        let (deterministic, description) = (rows[at].deterministic, rows[at].description.clone());
        rows.retain(|r| !(r.name == *name && r.kind == *kind));
        for (returns, args) in *documented {
            rows.push(Row {
                name: name.to_string(),
                kind,
                signature: (returns.to_string(), args.to_string()),
                deterministic,
                description: description.clone(),
            });
        }
    }
    // SQE's own internals (what TRY and casts become) are not for calling.
    rows.retain(|r| !r.name.starts_with("sqe_") && r.name != "lambda_uses");
    rows.retain(|r| wanted(&r.name));
    rows.sort_by(|a, b| (&a.name, a.kind, &a.signature).cmp(&(&b.name, b.kind, &b.signature)));
    rows.dedup_by(|a, b| a.name == b.name && a.kind == b.kind && a.signature == b.signature);
    let text = |f: &dyn Fn(&Row) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let schema = Schema::new(
        [
            "Function",
            "Return Type",
            "Argument Types",
            "Function Type",
            "Deterministic",
            "Description",
        ]
        .iter()
        .map(|n| Field::new(*n, DataType::Utf8, false))
        .collect::<Vec<_>>(),
    );
    QueryResult::rows(
        schema,
        vec![
            text(&|r| r.name.clone()),
            text(&|r| r.signature.0.clone()),
            text(&|r| r.signature.1.clone()),
            text(&|r| r.kind.to_string()),
            text(&|r| r.deterministic.to_string()),
            text(&|r| r.description.clone()),
        ],
    )
}
