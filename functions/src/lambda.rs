//! Trino's functions taking lambdas (`functions/lambda`, and the lambda forms in `functions/array`
//! and `functions/map`) that DataFusion 54 lacks: `all_match`, `none_match`, `reduce`, `zip_with`,
//! `map_filter`, `map_zip_with`, `transform_keys`, `transform_values`; and `sqe_try`, what
//! Trino's `TRY(x)` becomes: `x` as the body of a lambda, so that its errors can be caught. DataFusion's own `array_transform`,
//! `array_filter` and `array_any_match` are registered under Trino's names in `lib.rs`.
//!
//! Each one evaluates its lambda over whole arrays: once over the flattened elements (or map
//! entries) of the batch, except `reduce`, which evaluates its input function once per element
//! position (the first elements of every row, then the second, …). Captured columns are spread to
//! the elements they belong to.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, ListArray, MapArray, StructArray, UInt32Array,
    make_array,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::{CastOptions, cast_with_options, interleave, take, take_arrays};
use arrow::datatypes::{DataType, Field, FieldRef, Fields};
use arrow::row::{RowConverter, SortField};
use datafusion::common::utils::{adjust_offsets_for_slice, list_values, list_values_row_number};
use datafusion::common::{Result, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, HigherOrderFunctionArgs, HigherOrderReturnFieldArgs, HigherOrderSignature,
    HigherOrderUDF, HigherOrderUDFImpl, LambdaArgument, LambdaParametersProgress, ValueOrLambda,
    Volatility,
};

use crate::udf::type_name;

pub fn functions() -> Vec<Arc<HigherOrderUDF>> {
    use Kind::*;
    [
        AllMatch,
        NoneMatch,
        Reduce,
        ZipWith,
        MapFilter,
        MapZipWith,
        TransformKeys,
        TransformValues,
        Try,
        SortBy,
    ]
    .into_iter()
    .map(|kind| Arc::new(HigherOrderUDF::new_from_impl(Lambda::new(kind))))
    .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    AllMatch,
    NoneMatch,
    Reduce,
    ZipWith,
    MapFilter,
    MapZipWith,
    TransformKeys,
    TransformValues,
    Try,
    SortBy,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Lambda {
    kind: Kind,
    signature: HigherOrderSignature,
}

impl Lambda {
    fn new(kind: Kind) -> Self {
        use ValueOrLambda::{Lambda as L, Value as V};
        let args = match kind {
            Kind::Reduce => vec![V(()), V(()), L(()), L(())],
            Kind::ZipWith | Kind::MapZipWith => vec![V(()), V(()), L(())],
            _ => vec![V(()), L(())],
        };
        Self {
            kind,
            signature: HigherOrderSignature::exact(args, Volatility::Immutable),
        }
    }

    fn is_map(&self) -> bool {
        matches!(
            self.kind,
            Kind::MapFilter | Kind::TransformKeys | Kind::TransformValues
        )
    }
}

/// A list argument as the functions read it: `List` (also from fixed-size and large lists).
fn as_list_type(name: &str, t: &DataType) -> Result<DataType> {
    match t {
        DataType::List(_) => Ok(t.clone()),
        DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => Ok(DataType::List(Arc::clone(f))),
        DataType::Null => Ok(DataType::new_list(DataType::Null, true)),
        other => plan_err!("{name} expects an array, not {}", type_name(other)),
    }
}

fn element(name: &str, t: &DataType) -> Result<FieldRef> {
    match t {
        DataType::List(f) => Ok(Arc::clone(f)),
        other => plan_err!("{name} expects an array, not {}", type_name(other)),
    }
}

/// The key and value fields of a map type.
fn entries(name: &str, t: &DataType) -> Result<(FieldRef, FieldRef)> {
    if let DataType::Map(entries, _) = t
        && let DataType::Struct(kv) = entries.data_type()
        && kv.len() == 2
    {
        return Ok((Arc::clone(&kv[0]), Arc::clone(&kv[1])));
    }
    plan_err!("{name} expects a map, not {}", type_name(t))
}

/// A map type with these key and value fields, named as `like`'s are.
fn map_type(like: &DataType, key: &DataType, value: &DataType) -> DataType {
    let (names, entries_name) = match like {
        DataType::Map(e, _) => match e.data_type() {
            DataType::Struct(kv) => (
                [kv[0].name().clone(), kv[1].name().clone()],
                e.name().clone(),
            ),
            _ => (["key".into(), "value".into()], e.name().clone()),
        },
        _ => (["key".into(), "value".into()], "entries".into()),
    };
    let fields = Fields::from(vec![
        Field::new(&names[0], key.clone(), false),
        Field::new(&names[1], value.clone(), true),
    ]);
    DataType::Map(
        Arc::new(Field::new(entries_name, DataType::Struct(fields), false)),
        false,
    )
}

/// The state type of `reduce`: the initial value's when the input function keeps it, otherwise
/// what the input function returns, decimals widened to 38 digits so that summing cannot outgrow
/// it from one element to the next.
fn reduce_state(initial: &DataType, merged: &DataType) -> DataType {
    if merged == initial {
        return initial.clone();
    }
    match merged {
        DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => DataType::Decimal128(38, *s),
        other => other.clone(),
    }
}

impl HigherOrderUDFImpl for Lambda {
    fn name(&self) -> &str {
        match self.kind {
            Kind::AllMatch => "all_match",
            Kind::NoneMatch => "none_match",
            Kind::Reduce => "reduce",
            Kind::ZipWith => "zip_with",
            Kind::MapFilter => "map_filter",
            Kind::MapZipWith => "map_zip_with",
            Kind::TransformKeys => "transform_keys",
            Kind::TransformValues => "transform_values",
            Kind::Try => "sqe_try",
            Kind::SortBy => "sqe_array_sort",
        }
    }

    fn signature(&self) -> &HigherOrderSignature {
        &self.signature
    }

    fn coerce_value_types(&self, types: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name();
        match (self.kind, types) {
            (Kind::Reduce, [list, initial]) => Ok(vec![as_list_type(name, list)?, initial.clone()]),
            (Kind::ZipWith, [a, b]) => Ok(vec![as_list_type(name, a)?, as_list_type(name, b)?]),
            (Kind::MapZipWith, [a, b]) => {
                let (ka, kb) = (entries(name, a)?.0, entries(name, b)?.0);
                if ka.data_type() != kb.data_type() {
                    return plan_err!(
                        "{name}: the maps' keys differ in type ({} and {})",
                        type_name(ka.data_type()),
                        type_name(kb.data_type())
                    );
                }
                Ok(vec![a.clone(), b.clone()])
            }
            (Kind::Try, [t]) => Ok(vec![t.clone()]),
            (_, [map]) if self.is_map() => {
                entries(name, map)?;
                Ok(vec![map.clone()])
            }
            (_, [list]) => Ok(vec![as_list_type(name, list)?]),
            _ => plan_err!("{name}: wrong number of arguments"),
        }
    }

    fn lambda_parameters(
        &self,
        _step: usize,
        fields: &[ValueOrLambda<FieldRef, Option<FieldRef>>],
    ) -> Result<LambdaParametersProgress> {
        let name = self.name();
        let value = |i: usize| match fields.get(i) {
            Some(ValueOrLambda::Value(f)) => Ok(Arc::clone(f)),
            _ => plan_err!("{name}: argument {} must be a value", i + 1),
        };
        Ok(match self.kind {
            Kind::Try => LambdaParametersProgress::Complete(vec![vec![value(0)?]]),
            Kind::SortBy => {
                let x = element(name, value(0)?.data_type())?;
                LambdaParametersProgress::Complete(vec![vec![Arc::clone(&x), x]])
            }
            Kind::AllMatch | Kind::NoneMatch => {
                LambdaParametersProgress::Complete(vec![vec![element(
                    name,
                    value(0)?.data_type(),
                )?]])
            }
            Kind::ZipWith => LambdaParametersProgress::Complete(vec![vec![
                element(name, value(0)?.data_type())?,
                element(name, value(1)?.data_type())?,
            ]]),
            Kind::MapFilter | Kind::TransformKeys | Kind::TransformValues => {
                let (k, v) = entries(name, value(0)?.data_type())?;
                LambdaParametersProgress::Complete(vec![vec![k, v]])
            }
            Kind::MapZipWith => {
                let (k, v1) = entries(name, value(0)?.data_type())?;
                let (_, v2) = entries(name, value(1)?.data_type())?;
                // A key in one map only meets a NULL from the other.
                let nullable = |f: FieldRef| Arc::new(f.as_ref().clone().with_nullable(true));
                LambdaParametersProgress::Complete(vec![vec![k, nullable(v1), nullable(v2)]])
            }
            Kind::Reduce => {
                let x = element(name, value(0)?.data_type())?;
                let initial = value(1)?;
                match fields.get(2) {
                    // The input function's result is known: the state takes its type.
                    Some(ValueOrLambda::Lambda(Some(merged))) => {
                        let state = Arc::new(Field::new(
                            "s",
                            reduce_state(initial.data_type(), merged.data_type()),
                            true,
                        ));
                        LambdaParametersProgress::Complete(vec![
                            vec![Arc::clone(&state), x],
                            vec![state],
                        ])
                    }
                    // First typed with the initial value's type.
                    _ => LambdaParametersProgress::Partial(vec![
                        Some(vec![
                            Arc::new(initial.as_ref().clone().with_nullable(true)),
                            x,
                        ]),
                        None,
                    ]),
                }
            }
        })
    }

    fn coerce_values_for_lambdas(
        &self,
        fields: &[ValueOrLambda<DataType, DataType>],
    ) -> Result<Option<Vec<DataType>>> {
        match (self.kind, fields) {
            (
                Kind::Reduce,
                [
                    ValueOrLambda::Value(list),
                    ValueOrLambda::Value(initial),
                    ValueOrLambda::Lambda(merged),
                    _,
                ],
            ) => Ok(Some(vec![list.clone(), reduce_state(initial, merged)])),
            _ => Ok(None),
        }
    }

    fn return_field_from_args(&self, args: HigherOrderReturnFieldArgs) -> Result<FieldRef> {
        let name = self.name();
        let lambda = |i: usize| match args.arg_fields.get(i) {
            Some(ValueOrLambda::Lambda(f)) => Ok(Arc::clone(f)),
            _ => plan_err!("{name}: argument {} must be a lambda", i + 1),
        };
        let value = |i: usize| match args.arg_fields.get(i) {
            Some(ValueOrLambda::Value(f)) => Ok(f.data_type().clone()),
            _ => plan_err!("{name}: argument {} must be a value", i + 1),
        };
        let boolean = |f: &FieldRef| match f.data_type() {
            DataType::Boolean | DataType::Null => Ok(()),
            other => plan_err!(
                "{name}: the lambda must return boolean, not {}",
                type_name(other)
            ),
        };
        let ty = match self.kind {
            Kind::AllMatch | Kind::NoneMatch => {
                boolean(&lambda(1)?)?;
                DataType::Boolean
            }
            Kind::Reduce => lambda(3)?.data_type().clone(),
            Kind::Try => lambda(1)?.data_type().clone(),
            Kind::SortBy => {
                let out = lambda(1)?;
                if !out.data_type().is_integer() {
                    return plan_err!(
                        "array_sort: the comparator must return an integer, not {}",
                        type_name(out.data_type())
                    );
                }
                value(0)?
            }
            Kind::ZipWith => DataType::new_list(lambda(2)?.data_type().clone(), true),
            Kind::MapZipWith => {
                let map = value(0)?;
                let (k, _) = entries(name, &map)?;
                map_type(&map, k.data_type(), lambda(2)?.data_type())
            }
            Kind::MapFilter => {
                boolean(&lambda(1)?)?;
                value(0)?
            }
            Kind::TransformKeys | Kind::TransformValues => {
                let map = value(0)?;
                let (k, v) = entries(name, &map)?;
                let out = lambda(1)?.data_type().clone();
                if self.kind == Kind::TransformKeys {
                    map_type(&map, &out, v.data_type())
                } else {
                    map_type(&map, k.data_type(), &out)
                }
            }
        };
        Ok(Arc::new(Field::new("", ty, true)))
    }

    /// `TRY(x)` may evaluate `x` row by row and not at all as a whole: nothing in it may be
    /// computed outside it (as common subexpressions would be).
    fn short_circuits(&self) -> bool {
        self.kind == Kind::Try
    }

    fn invoke_with_args(&self, args: HigherOrderFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let mut values = Vec::new();
        let mut lambdas = Vec::new();
        for a in &args.args {
            match a {
                ValueOrLambda::Value(v) => values.push(v.to_array(rows)?),
                ValueOrLambda::Lambda(l) => lambdas.push(l),
            }
        }
        let ret = args.return_type();
        let out = match (self.kind, values.as_slice(), lambdas.as_slice()) {
            (Kind::AllMatch, [list], [f]) => matches(list, f, true)?,
            (Kind::NoneMatch, [list], [f]) => matches(list, f, false)?,
            (Kind::Reduce, [list, initial], [merge, finish]) => {
                reduce(list, initial, merge, finish, rows)?
            }
            (Kind::ZipWith, [a, b], [f]) => zip_with(a, b, f, ret)?,
            (Kind::MapFilter, [map], [f]) => map_filter(map, f)?,
            (Kind::MapZipWith, [a, b], [f]) => map_zip_with(a, b, f, ret)?,
            (Kind::Try, [rows], [f]) => try_rows(rows, f, ret)?,
            (Kind::SortBy, [list], [f]) => sort_by(list, f)?,
            (Kind::TransformKeys, [map], [f]) => transform_map(map, f, ret, true)?,
            (Kind::TransformValues, [map], [f]) => transform_map(map, f, ret, false)?,
            _ => return exec_err!("{}: unexpected arguments", self.name()),
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// A lambda's answers as the type the function returns (cast only when they differ).
fn fit(answers: ArrayRef, to: &DataType) -> Result<ArrayRef> {
    if answers.data_type() == to {
        Ok(answers)
    } else {
        Ok(arrow::compute::cast(&answers, to)?)
    }
}

/// A map column of type `ty` from its entries.
fn map_array(
    ty: &DataType,
    offsets: Vec<i32>,
    keys: ArrayRef,
    values: ArrayRef,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef> {
    let DataType::Map(entries, ordered) = ty else {
        return exec_err!("expected a map type, not {ty}");
    };
    let DataType::Struct(fields) = entries.data_type() else {
        return exec_err!("expected map entries, not {}", entries.data_type());
    };
    let entry = StructArray::try_new(fields.clone(), vec![keys, values], None)?;
    Ok(Arc::new(MapArray::try_new(
        Arc::clone(entries),
        OffsetBuffer::new(offsets.into()),
        entry,
        nulls,
        *ordered,
    )?))
}

/// `array` with its rows also NULL where `nulls` says so.
fn with_nulls(array: ArrayRef, nulls: Option<&NullBuffer>) -> Result<ArrayRef> {
    let Some(nulls) = nulls else {
        return Ok(array);
    };
    let merged = NullBuffer::union(Some(nulls), array.logical_nulls().as_ref());
    Ok(make_array(
        array.to_data().into_builder().nulls(merged).build()?,
    ))
}

/// Evaluates `f` over the flattened elements of `list`, the captured columns spread to them.
fn over_elements(list: &ArrayRef, f: &LambdaArgument, params: &[ArrayRef]) -> Result<ArrayRef> {
    let count = params.first().map_or(0, |p| p.len());
    let closures: Vec<Box<dyn Fn() -> Result<ArrayRef>>> = params
        .iter()
        .map(|p| {
            let p = Arc::clone(p);
            Box::new(move || Ok(Arc::clone(&p))) as Box<dyn Fn() -> Result<ArrayRef>>
        })
        .collect();
    let refs: Vec<&dyn Fn() -> Result<ArrayRef>> = closures.iter().map(|c| c.as_ref()).collect();
    f.evaluate(&refs, |captured| {
        let rows = list_values_row_number(list)?;
        Ok(take_arrays(captured, &rows, None)?)
    })?
    .into_array(count)
}

/// `all_match` (`all`) and `none_match`: FALSE as soon as one element decides it, otherwise NULL
/// when the predicate was NULL for some element, otherwise TRUE (also for an empty array).
fn matches(list: &ArrayRef, f: &LambdaArgument, all: bool) -> Result<ArrayRef> {
    let typed = list.as_list::<i32>();
    let elements = list_values(list)?;
    let tested = over_elements(list, f, &[elements])?;
    let tested = match tested.data_type() {
        DataType::Null => BooleanArray::new_null(tested.len()),
        _ => tested.as_boolean().clone(),
    };
    let offsets = adjust_offsets_for_slice(typed);
    let out: BooleanArray = (0..typed.len())
        .map(|row| {
            if typed.is_null(row) {
                return None;
            }
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            let mut unknown = false;
            for i in start..end {
                if tested.is_null(i) {
                    unknown = true;
                } else if tested.value(i) != all {
                    return Some(false);
                }
            }
            (!unknown).then_some(true)
        })
        .collect();
    Ok(Arc::new(out))
}

/// `reduce(array, initial, (s, x) -> s', s -> r)`: folds each row's elements into its state, one
/// element position at a time over the rows that are that long, then finishes every state.
fn reduce(
    list: &ArrayRef,
    initial: &ArrayRef,
    merge: &LambdaArgument,
    finish: &LambdaArgument,
    rows: usize,
) -> Result<ArrayRef> {
    let typed = list.as_list::<i32>();
    let elements = list_values(list)?;
    let offsets = adjust_offsets_for_slice(typed);
    let length = |row: usize| {
        if typed.is_null(row) {
            0
        } else {
            (offsets[row + 1] - offsets[row]) as usize
        }
    };
    let longest = (0..rows).map(length).max().unwrap_or(0);
    let state_type = initial.data_type().clone();
    let strict = CastOptions {
        safe: false,
        ..Default::default()
    };
    let mut state = Arc::clone(initial);
    for k in 0..longest {
        let active: Vec<u32> = (0..rows)
            .filter(|&row| length(row) > k)
            .map(|row| row as u32)
            .collect();
        let at = UInt32Array::from_iter_values(
            active
                .iter()
                .map(|&row| offsets[row as usize] as u32 + k as u32),
        );
        let picked = UInt32Array::from(active.clone());
        let x = take(elements.as_ref(), &at, None)?;
        let s = take(state.as_ref(), &picked, None)?;
        let (s_param, x_param) = (|| Ok(Arc::clone(&s)), || Ok(Arc::clone(&x)));
        let merged = merge
            .evaluate(&[&s_param, &x_param], |captured| {
                Ok(take_arrays(captured, &picked, None)?)
            })?
            .into_array(active.len())?;
        let merged = if merged.data_type() == &state_type {
            merged
        } else {
            cast_with_options(&merged, &state_type, &strict)?
        };
        let mut pick: Vec<(usize, usize)> = (0..rows).map(|row| (0, row)).collect();
        for (i, &row) in active.iter().enumerate() {
            pick[row as usize] = (1, i);
        }
        state = interleave(&[state.as_ref(), merged.as_ref()], &pick)?;
    }
    let state_param = || Ok(Arc::clone(&state));
    let out = finish
        .evaluate(&[&state_param], |captured| Ok(captured.to_vec()))?
        .into_array(rows)?;
    with_nulls(out, typed.nulls())
}

/// `zip_with(a, b, (x, y) -> z)`: pairs the elements by position, the shorter array padded with
/// NULLs.
fn zip_with(a: &ArrayRef, b: &ArrayRef, f: &LambdaArgument, ret: &DataType) -> Result<ArrayRef> {
    let (la, lb) = (a.as_list::<i32>(), b.as_list::<i32>());
    let (oa, ob) = (la.value_offsets(), lb.value_offsets());
    let (mut ia, mut ib, mut owner) = (Vec::new(), Vec::new(), Vec::new());
    let mut offsets = vec![0i32];
    let nulls = NullBuffer::union(la.nulls(), lb.nulls());
    for row in 0..la.len() {
        if nulls.as_ref().is_none_or(|n| n.is_valid(row)) {
            let (sa, na) = (oa[row] as u32, (oa[row + 1] - oa[row]) as u32);
            let (sb, nb) = (ob[row] as u32, (ob[row + 1] - ob[row]) as u32);
            for j in 0..na.max(nb) {
                ia.push((j < na).then_some(sa + j));
                ib.push((j < nb).then_some(sb + j));
                owner.push(row as u32);
            }
        }
        offsets.push(owner.len() as i32);
    }
    let x = take(la.values().as_ref(), &UInt32Array::from(ia), None)?;
    let y = take(lb.values().as_ref(), &UInt32Array::from(ib), None)?;
    let owner = UInt32Array::from(owner);
    let count = owner.len();
    let (xp, yp) = (|| Ok(Arc::clone(&x)), || Ok(Arc::clone(&y)));
    let zipped = f
        .evaluate(&[&xp, &yp], |captured| {
            Ok(take_arrays(captured, &owner, None)?)
        })?
        .into_array(count)?;
    let DataType::List(field) = ret else {
        return exec_err!("zip_with returns an array, not {ret}");
    };
    Ok(Arc::new(ListArray::try_new(
        Arc::clone(field),
        OffsetBuffer::new(offsets.into()),
        fit(zipped, field.data_type())?,
        nulls,
    )?))
}

/// A map argument's rows and its entries, sliced to the rows.
struct Entries<'a> {
    map: &'a MapArray,
    offsets: Vec<usize>,
    keys: ArrayRef,
    values: ArrayRef,
}

impl<'a> Entries<'a> {
    fn of(array: &'a ArrayRef) -> Self {
        let map = array.as_map();
        let raw = map.value_offsets();
        let first = raw[0] as usize;
        let offsets: Vec<usize> = raw.iter().map(|o| *o as usize - first).collect();
        let count = offsets.last().copied().unwrap_or(0);
        Self {
            map,
            keys: map.keys().slice(first, count),
            values: map.values().slice(first, count),
            offsets,
        }
    }

    /// Evaluates `f` over every entry as `(k, v)`.
    fn apply(&self, f: &LambdaArgument) -> Result<ArrayRef> {
        let owner: UInt32Array = (0..self.map.len())
            .flat_map(|row| {
                std::iter::repeat_n(row as u32, self.offsets[row + 1] - self.offsets[row])
            })
            .collect();
        let (k, v) = (
            || Ok(Arc::clone(&self.keys)),
            || Ok(Arc::clone(&self.values)),
        );
        f.evaluate(&[&k, &v], |captured| {
            Ok(take_arrays(captured, &owner, None)?)
        })?
        .into_array(self.keys.len())
    }

    fn build(
        &self,
        ty: &DataType,
        offsets: Vec<i32>,
        keys: ArrayRef,
        values: ArrayRef,
    ) -> Result<ArrayRef> {
        map_array(ty, offsets, keys, values, self.map.nulls().cloned())
    }
}

/// `map_filter(m, (k, v) -> keep)`: the entries for which the lambda is TRUE.
fn map_filter(array: &ArrayRef, f: &LambdaArgument) -> Result<ArrayRef> {
    let e = Entries::of(array);
    let keep = e.apply(f)?;
    let keep = match keep.data_type() {
        DataType::Null => BooleanArray::new_null(keep.len()),
        _ => keep.as_boolean().clone(),
    };
    let mut kept = Vec::new();
    let mut offsets = vec![0i32];
    for row in 0..e.map.len() {
        for i in e.offsets[row]..e.offsets[row + 1] {
            if keep.is_valid(i) && keep.value(i) {
                kept.push(i as u32);
            }
        }
        offsets.push(kept.len() as i32);
    }
    let kept = UInt32Array::from(kept);
    let keys = take(e.keys.as_ref(), &kept, None)?;
    let values = take(e.values.as_ref(), &kept, None)?;
    e.build(array.data_type(), offsets, keys, values)
}

/// The most element pairs `array_sort` with a comparator compares in one batch (each array's
/// elements are compared pairwise, n² calls).
const SORT_PAIRS: usize = 4_000_000;

/// `array_sort(a, (x, y) -> c)`: `a` sorted by a comparator returning -1, 0 or 1 (anything
/// else, NULL included, is an error, as in Trino). Every pair of an array's elements is compared
/// in one evaluation of the lambda; a stable merge sort then reads the answers (and cannot be
/// thrown off by a comparator that is not a total order).
fn sort_by(list: &ArrayRef, f: &LambdaArgument) -> Result<ArrayRef> {
    let typed = list.as_list::<i32>();
    let offsets = typed.value_offsets();
    let base = offsets[0] as usize;
    let mut pairs = 0usize;
    for row in 0..typed.len() {
        let n = (offsets[row + 1] - offsets[row]) as usize;
        pairs = pairs.saturating_add(n.saturating_mul(n));
    }
    if pairs > SORT_PAIRS {
        return exec_err!(
            "array_sort with a comparator: {pairs} comparisons in one batch, more than {SORT_PAIRS}"
        );
    }
    let values = typed.values();
    let (mut left, mut right, mut owner) = (Vec::new(), Vec::new(), Vec::new());
    for row in 0..typed.len() {
        let (s, e) = (offsets[row] as u32, offsets[row + 1] as u32);
        for i in s..e {
            for j in s..e {
                left.push(i);
                right.push(j);
                owner.push(row as u32);
            }
        }
    }
    let x = take(values.as_ref(), &UInt32Array::from(left), None)?;
    let y = take(values.as_ref(), &UInt32Array::from(right), None)?;
    let owner = UInt32Array::from(owner);
    let count = owner.len();
    let (xp, yp) = (|| Ok(Arc::clone(&x)), || Ok(Arc::clone(&y)));
    let answers = f
        .evaluate(&[&xp, &yp], |captured| {
            Ok(take_arrays(captured, &owner, None)?)
        })?
        .into_array(count)?;
    let answers = cast_with_options(&answers, &DataType::Int64, &CastOptions::default())?;
    let answers = answers.as_primitive::<arrow::datatypes::Int64Type>();
    if answers.null_count() > 0 || answers.values().iter().any(|v| !(-1..=1).contains(v)) {
        return exec_err!("Lambda comparator must return either -1, 0, or 1");
    }
    let mut order: Vec<u32> = Vec::with_capacity(values.len());
    let mut at = 0usize;
    for row in 0..typed.len() {
        let (s, e) = (offsets[row] as usize, offsets[row + 1] as usize);
        let n = e - s;
        let first = at;
        let compare = |a: usize, b: usize| answers.value(first + (a - s) * n + (b - s));
        let mut idx: Vec<usize> = (s..e).collect();
        merge_sort(&mut idx, &compare);
        order.extend(idx.into_iter().map(|i| (i - base) as u32));
        at += n * n;
    }
    let sliced = values.slice(base, offsets[typed.len()] as usize - base);
    let sorted = take(sliced.as_ref(), &UInt32Array::from(order), None)?;
    let new_offsets: Vec<i32> = offsets.iter().map(|o| o - offsets[0]).collect();
    let DataType::List(field) = list.data_type() else {
        return exec_err!("array_sort expects an array");
    };
    Ok(Arc::new(ListArray::try_new(
        Arc::clone(field),
        OffsetBuffer::new(new_offsets.into()),
        sorted,
        typed.nulls().cloned(),
    )?))
}

/// A stable merge sort by `compare` (-1, 0, 1), which never fails whatever `compare` answers.
fn merge_sort(items: &mut Vec<usize>, compare: &impl Fn(usize, usize) -> i64) {
    if items.len() < 2 {
        return;
    }
    let mut right = items.split_off(items.len() / 2);
    merge_sort(items, compare);
    merge_sort(&mut right, compare);
    let left = std::mem::take(items);
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        if compare(right[j], left[i]) < 0 {
            items.push(right[j]);
            j += 1;
        } else {
            items.push(left[i]);
            i += 1;
        }
    }
    items.extend_from_slice(&left[i..]);
    items.extend_from_slice(&right[j..]);
}

/// `TRY(x)`: `x`, with NULL for the rows where evaluating it fails. The whole batch is evaluated
/// at once; only when that fails is each row evaluated on its own.
fn try_rows(rows: &ArrayRef, f: &LambdaArgument, ret: &DataType) -> Result<ArrayRef> {
    let all = || Ok(Arc::clone(rows));
    if let Ok(out) = f
        .evaluate(&[&all], |captured| Ok(captured.to_vec()))
        .and_then(|v| v.into_array(rows.len()))
    {
        return fit(out, ret);
    }
    let mut parts = Vec::with_capacity(rows.len());
    for i in 0..rows.len() {
        let one = || Ok(rows.slice(i, 1));
        let row = UInt32Array::from(vec![i as u32]);
        let value = f
            .evaluate(&[&one], |captured| Ok(take_arrays(captured, &row, None)?))
            .and_then(|v| v.into_array(1))
            .and_then(|v| fit(v, ret));
        parts.push(match value {
            Ok(v) => v,
            Err(_) => arrow::array::new_null_array(ret, 1),
        });
    }
    if parts.is_empty() {
        return Ok(arrow::array::new_empty_array(ret));
    }
    let refs: Vec<&dyn Array> = parts.iter().map(|p| p.as_ref()).collect();
    Ok(arrow::compute::concat(&refs)?)
}

/// `map_zip_with(a, b, (k, v1, v2) -> v)`: every key of either map (`a`'s in order, then `b`'s
/// others), with the lambda's answer for its two values, NULL for a map without the key. NULL
/// where either map is NULL.
fn map_zip_with(
    a: &ArrayRef,
    b: &ArrayRef,
    f: &LambdaArgument,
    ret: &DataType,
) -> Result<ArrayRef> {
    let (ea, eb) = (Entries::of(a), Entries::of(b));
    let converter = RowConverter::new(vec![SortField::new(ea.keys.data_type().clone())])?;
    let ra = converter.convert_columns(&[Arc::clone(&ea.keys)])?;
    let rb = converter.convert_columns(&[Arc::clone(&eb.keys)])?;
    let nulls = NullBuffer::union(ea.map.nulls(), eb.map.nulls());
    let (mut key_at, mut ia, mut ib, mut owner) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut offsets = vec![0i32];
    for row in 0..ea.map.len() {
        if nulls.as_ref().is_none_or(|n| n.is_valid(row)) {
            let mut only_b: std::collections::HashMap<_, u32> = (eb.offsets[row]
                ..eb.offsets[row + 1])
                .map(|j| (rb.row(j), j as u32))
                .collect();
            for i in ea.offsets[row]..ea.offsets[row + 1] {
                key_at.push((0, i));
                ia.push(Some(i as u32));
                ib.push(only_b.remove(&ra.row(i)));
                owner.push(row as u32);
            }
            for j in eb.offsets[row]..eb.offsets[row + 1] {
                if only_b.contains_key(&rb.row(j)) {
                    key_at.push((1, j));
                    ia.push(None);
                    ib.push(Some(j as u32));
                    owner.push(row as u32);
                }
            }
        }
        offsets.push(owner.len() as i32);
    }
    let keys = interleave(&[ea.keys.as_ref(), eb.keys.as_ref()], &key_at)?;
    let v1 = take(ea.values.as_ref(), &UInt32Array::from(ia), None)?;
    let v2 = take(eb.values.as_ref(), &UInt32Array::from(ib), None)?;
    let owner = UInt32Array::from(owner);
    let count = owner.len();
    let (kp, p1, p2) = (
        || Ok(Arc::clone(&keys)),
        || Ok(Arc::clone(&v1)),
        || Ok(Arc::clone(&v2)),
    );
    let values = f
        .evaluate(&[&kp, &p1, &p2], |captured| {
            Ok(take_arrays(captured, &owner, None)?)
        })?
        .into_array(count)?;
    let (_, v) = entries("map_zip_with", ret)?;
    map_array(ret, offsets, keys, fit(values, v.data_type())?, nulls)
}

/// `transform_keys` (`keys`) and `transform_values`: each entry's key or value replaced by the
/// lambda's answer; new keys may be neither NULL nor repeated within a map.
fn transform_map(
    array: &ArrayRef,
    f: &LambdaArgument,
    ret: &DataType,
    keys: bool,
) -> Result<ArrayRef> {
    let e = Entries::of(array);
    let new = e.apply(f)?;
    let offsets: Vec<i32> = e.offsets.iter().map(|o| *o as i32).collect();
    let (k, v) = entries("transform", ret)?;
    let target = if keys { k.data_type() } else { v.data_type() };
    let new = fit(new, target)?;
    if !keys {
        return e.build(ret, offsets, Arc::clone(&e.keys), new);
    }
    if new.null_count() > 0 {
        return exec_err!("map key cannot be null");
    }
    let converter = RowConverter::new(vec![SortField::new(new.data_type().clone())])?;
    let converted = converter.convert_columns(&[Arc::clone(&new)])?;
    for row in 0..e.map.len() {
        if e.map.is_null(row) {
            continue;
        }
        let mut seen = HashSet::new();
        for i in e.offsets[row]..e.offsets[row + 1] {
            if !seen.insert(converted.row(i)) {
                let shown = arrow::util::display::array_value_to_string(&new, i)?;
                return exec_err!("Duplicate map keys ({shown}) are not allowed");
            }
        }
    }
    e.build(ret, offsets, new, Arc::clone(&e.values))
}

/// Works around DataFusion 54's lambdas of several parameters (fixed upstream, apache/datafusion
/// PR 24162): the body's parameter columns are renumbered densely over the parameters it uses, so
/// in `(k, v) -> v` the body reads `k`'s column for `v`. For each lambda whose body skips a
/// parameter before one it uses, the body becomes `lambda_uses(body, skipped…)`, which returns
/// `body` and references the skipped ones, and every column lines up again.
pub fn use_every_lambda_parameter(
    e: datafusion::prelude::Expr,
    schema: &datafusion::common::DFSchema,
) -> Result<datafusion::common::tree_node::Transformed<datafusion::prelude::Expr>> {
    use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::expr::{HigherOrderFunction, LambdaVariable, ScalarFunction};
    use datafusion::prelude::Expr;

    let Expr::HigherOrderFunction(hof) = &e else {
        return Ok(Transformed::no(e));
    };
    let skips = |params: &[String], body: &Expr| -> Vec<usize> {
        let mut used = HashSet::new();
        let _ = body.apply(|n| {
            if let Expr::LambdaVariable(v) = n {
                used.insert(v.name.clone());
            }
            Ok(TreeNodeRecursion::Continue)
        });
        let last = params.iter().rposition(|p| used.contains(p));
        match last {
            Some(last) => (0..last).filter(|&i| !used.contains(&params[i])).collect(),
            None => Vec::new(),
        }
    };
    let needed = hof.args.iter().any(|a| match a {
        Expr::Lambda(l) => !skips(&l.params, &l.body).is_empty(),
        _ => false,
    });
    if !needed {
        return Ok(Transformed::no(e));
    }
    let fields = hof.lambda_parameters(schema)?;
    let mut fields = fields.into_iter();
    let mut args = Vec::with_capacity(hof.args.len());
    for a in &hof.args {
        let Expr::Lambda(l) = a else {
            args.push(a.clone());
            continue;
        };
        let own = fields.next().unwrap_or_default();
        let skipped = skips(&l.params, &l.body);
        let mut l = l.clone();
        if !skipped.is_empty() {
            let mut call = vec![*l.body];
            for i in skipped {
                let Some(field) = own.get(i) else {
                    return plan_err!("{}: lambda parameter {} has no type", hof.name(), i + 1);
                };
                let name = l.params[i].clone();
                call.push(Expr::LambdaVariable(LambdaVariable::new(
                    name.clone(),
                    Some(Arc::new(field.as_ref().clone().with_name(name))),
                )));
            }
            l.body = Box::new(Expr::ScalarFunction(ScalarFunction::new_udf(
                lambda_uses(),
                call,
            )));
        }
        args.push(Expr::Lambda(l));
    }
    Ok(Transformed::yes(Expr::HigherOrderFunction(
        HigherOrderFunction::new(Arc::clone(&hof.func), args),
    )))
}

/// `lambda_uses(x, …)`: `x`.
fn lambda_uses() -> Arc<datafusion::logical_expr::ScalarUDF> {
    crate::udf::Scalar::new(
        "lambda_uses",
        |args| Ok(args.to_vec()),
        |args| Ok(args[0].clone()),
        |args, _| Ok(Arc::clone(&args[0])),
    )
    .udf()
}

/// `sqe_opaque(x)`: `x`, marked volatile so that nothing folds it at planning time: a constant in
/// `TRY(…)` whose evaluation fails (`CAST('x' AS INTEGER)`) must fail at run time, where TRY
/// catches it.
pub fn opaque() -> Arc<datafusion::logical_expr::ScalarUDF> {
    let mut f = crate::udf::Scalar::new(
        "sqe_opaque",
        |args| Ok(args.to_vec()),
        |args| Ok(args[0].clone()),
        |args, _| Ok(Arc::clone(&args[0])),
    );
    f.set_volatility(Volatility::Volatile);
    f.udf()
}
