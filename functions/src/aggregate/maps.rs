//! Trino's aggregates that build maps: `histogram`, `map_agg`, `multimap_agg`, `map_union`,
//! `approx_most_frequent` and `numeric_histogram`; and `checksum`.
//!
//! Keys are kept as `ScalarValue`s in a hash map (these aggregates serve groups of modest
//! cardinality: a map is one value). Each map comes out with its keys in order, so that the same
//! input gives the same text. A NULL key is skipped; no input (or only NULL keys) gives NULL.
//! `map_agg` and `map_union` keep a key's first value (Trino keeps an arbitrary one).
//! `approx_most_frequent` counts with the stream-summary algorithm the docs name (Metwally et
//! al.): at most `capacity` counters, the least counted one given up for a new value.
//! `numeric_histogram` keeps weighted centroids and merges the two closest until `buckets` are
//! left (Ben-Haim and Tom-Tov). `checksum` adds up the xxHash64 of each value's row encoding:
//! the same values in any order give the same 8 bytes (not the bytes Trino gives).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, FieldRef, Float64Type, Int64Type};
use arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

use crate::map::{map_type, one_map};
use crate::udf::{invalid, is_text, unexpected};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Histogram,
    MapAgg,
    MultimapAgg,
    MapUnion,
    MostFrequent,
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct MapAggregate {
    kind: Kind,
    signature: Signature,
}

impl MapAggregate {
    pub(super) fn new(kind: Kind) -> Self {
        Self {
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// The types of the keys and of the values the accumulator keeps (a count for the counting
    /// ones), from the argument types.
    fn key_value(&self, args: &[DataType]) -> Result<(DataType, DataType)> {
        match (self.kind, args) {
            (Kind::Histogram, [k]) => Ok((k.clone(), DataType::Int64)),
            (Kind::MostFrequent, [_, k, _]) => Ok((k.clone(), DataType::Int64)),
            (Kind::MapAgg | Kind::MultimapAgg, [k, v]) => Ok((k.clone(), v.clone())),
            (Kind::MapUnion, [DataType::Map(entries, _)]) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => {
                    Ok((kv[0].data_type().clone(), kv[1].data_type().clone()))
                }
                _ => invalid("map_union: expected map entries"),
            },
            _ => invalid(format!("{}: unexpected arguments", self.name())),
        }
    }
}

fn list_of(t: &DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t.clone(), true)))
}

impl AggregateUDFImpl for MapAggregate {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Histogram => "histogram",
            Kind::MapAgg => "map_agg",
            Kind::MultimapAgg => "multimap_agg",
            Kind::MapUnion => "map_union",
            Kind::MostFrequent => "approx_most_frequent",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name();
        let integer = |t: &DataType| t.is_integer() || t.is_null();
        match (self.kind, args) {
            (Kind::Histogram, [k]) if !k.is_null() => Ok(args.to_vec()),
            (Kind::Histogram, _) => unexpected(name, args, &["T"]),
            (Kind::MapAgg | Kind::MultimapAgg, [k, _]) if !k.is_null() => Ok(args.to_vec()),
            (Kind::MapAgg | Kind::MultimapAgg, _) => unexpected(name, args, &["K", "V"]),
            (Kind::MapUnion, [DataType::Map(..)]) => Ok(args.to_vec()),
            (Kind::MapUnion, _) => unexpected(name, args, &["map(K, V)"]),
            (Kind::MostFrequent, [b, v, c])
                if integer(b) && integer(c) && (v.is_numeric() || is_text(v)) =>
            {
                Ok(vec![DataType::Int64, v.clone(), DataType::Int64])
            }
            (Kind::MostFrequent, _) => unexpected(name, args, &["bigint", "T", "bigint"]),
        }
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        let (k, v) = self.key_value(args)?;
        Ok(match self.kind {
            Kind::MultimapAgg => map_type(&k, &list_of(&v)),
            _ => map_type(&k, &v),
        })
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let types: Vec<DataType> = args
            .expr_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let (key, value) = self.key_value(&types)?;
        Ok(Box::new(Entries {
            kind: self.kind,
            returns: args.return_field.data_type().clone(),
            key,
            value,
            index: HashMap::new(),
            keys: Vec::new(),
            values: Vec::new(),
            counts: Vec::new(),
            bounds: None,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let types: Vec<DataType> = args
            .input_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let (k, v) = self.key_value(&types)?;
        let field = |part: &str, t: DataType| {
            Arc::new(Field::new(format!("{}[{part}]", args.name), t, true))
        };
        Ok(vec![
            field("keys", list_of(&k)),
            field("values", list_of(&v)),
            field("bounds", list_of(&DataType::Int64)),
        ])
    }
}

/// The entries so far: each key once with its count, value, or values (a multimap keeps a key
/// once per value).
#[derive(Debug)]
struct Entries {
    kind: Kind,
    returns: DataType,
    key: DataType,
    value: DataType,
    index: HashMap<ScalarValue, usize>,
    keys: Vec<ScalarValue>,
    values: Vec<Vec<ScalarValue>>,
    counts: Vec<i64>,
    /// `approx_most_frequent`'s buckets and capacity.
    bounds: Option<(i64, i64)>,
}

impl Entries {
    fn counting(&self) -> bool {
        matches!(self.kind, Kind::Histogram | Kind::MostFrequent)
    }

    fn slot(&mut self, key: ScalarValue) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.keys.len();
        self.index.insert(key.clone(), i);
        self.keys.push(key);
        self.values.push(Vec::new());
        self.counts.push(0);
        i
    }

    fn count(&mut self, key: ScalarValue, by: i64) -> Result<()> {
        if self.kind == Kind::MostFrequent
            && !self.index.contains_key(&key)
            && let Some((_, capacity)) = self.bounds
            && self.keys.len() as i64 >= capacity
        {
            // Stream summary: the new value takes the least counted one's counter.
            let (least, &floor) = self
                .counts
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| **c)
                .unwrap_or((0, &0));
            let old = std::mem::replace(&mut self.keys[least], key.clone());
            self.index.remove(&old);
            self.index.insert(key, least);
            self.counts[least] = floor + by;
            return Ok(());
        }
        let i = self.slot(key);
        self.counts[i] += by;
        Ok(())
    }

    fn put(&mut self, key: ScalarValue, value: ScalarValue) {
        let i = self.slot(key);
        if self.kind == Kind::MultimapAgg || self.values[i].is_empty() {
            self.values[i].push(value);
        }
    }

    fn set_bounds(&mut self, buckets: &ArrayRef, capacity: &ArrayRef) -> Result<()> {
        if self.bounds.is_some() || buckets.is_empty() {
            return Ok(());
        }
        let (b, c) = (
            buckets.as_primitive::<Int64Type>(),
            capacity.as_primitive::<Int64Type>(),
        );
        if b.is_null(0) || c.is_null(0) {
            return invalid("approx_most_frequent: buckets and capacity must not be NULL");
        }
        let (b, c) = (b.value(0), c.value(0));
        if b < 2 || c < b {
            return invalid(format!(
                "approx_most_frequent: buckets ({b}) must be at least 2 and capacity ({c}) at least buckets"
            ));
        }
        self.bounds = Some((b, c));
        Ok(())
    }
}

impl Accumulator for Entries {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        match self.kind {
            Kind::Histogram => {
                for i in 0..values[0].len() {
                    if !values[0].is_null(i) {
                        self.count(ScalarValue::try_from_array(&values[0], i)?, 1)?;
                    }
                }
            }
            Kind::MostFrequent => {
                self.set_bounds(&values[0], &values[2])?;
                for i in 0..values[1].len() {
                    if !values[1].is_null(i) {
                        self.count(ScalarValue::try_from_array(&values[1], i)?, 1)?;
                    }
                }
            }
            Kind::MapAgg | Kind::MultimapAgg => {
                for i in 0..values[0].len() {
                    if !values[0].is_null(i) {
                        let key = ScalarValue::try_from_array(&values[0], i)?;
                        self.put(key, ScalarValue::try_from_array(&values[1], i)?);
                    }
                }
            }
            Kind::MapUnion => {
                let maps = values[0].as_map();
                for row in 0..maps.len() {
                    if maps.is_null(row) {
                        continue;
                    }
                    let entries = maps.value(row);
                    for i in 0..entries.len() {
                        let key = ScalarValue::try_from_array(entries.column(0), i)?;
                        self.put(key, ScalarValue::try_from_array(entries.column(1), i)?);
                    }
                }
            }
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        if self.keys.is_empty() {
            return ScalarValue::try_from(&self.returns);
        }
        let mut order: Vec<usize> = (0..self.keys.len()).collect();
        let by_key = |a: &usize, b: &usize| {
            self.keys[*a]
                .partial_cmp(&self.keys[*b])
                .unwrap_or(std::cmp::Ordering::Equal)
        };
        order.sort_by(by_key);
        if let (Kind::MostFrequent, Some((buckets, _))) = (self.kind, self.bounds) {
            // The most counted, the smaller key first among equal counts; shown by key.
            order.sort_by(|a, b| self.counts[*b].cmp(&self.counts[*a]).then(by_key(a, b)));
            order.truncate(buckets as usize);
            order.sort_by(by_key);
        }
        let keys = ScalarValue::iter_to_array(order.iter().map(|&i| self.keys[i].clone()))?;
        let values: ArrayRef = match self.kind {
            _ if self.counting() => Arc::new(arrow::array::Int64Array::from_iter_values(
                order.iter().map(|&i| self.counts[i]),
            )),
            Kind::MultimapAgg => {
                let lists = order.iter().map(|&i| {
                    ScalarValue::List(ScalarValue::new_list(&self.values[i], &self.value, true))
                });
                ScalarValue::iter_to_array(lists)?
            }
            _ => {
                let firsts = order.iter().map(|&i| self.values[i][0].clone());
                if order.iter().all(|&i| self.values[i][0].is_null()) {
                    arrow::array::new_null_array(&self.value, order.len())
                } else {
                    ScalarValue::iter_to_array(firsts)?
                }
            }
        };
        let values = arrow::compute::cast(&values, &self.value_type_out())?;
        one_map(&self.returns, keys, values)
    }

    fn size(&self) -> usize {
        size_of::<Self>()
            + self.keys.iter().map(ScalarValue::size).sum::<usize>() * 2
            + self
                .values
                .iter()
                .flatten()
                .map(ScalarValue::size)
                .sum::<usize>()
            + self.counts.len() * 8
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let mut keys = Vec::new();
        let mut values = Vec::new();
        for (i, key) in self.keys.iter().enumerate() {
            if self.counting() {
                keys.push(key.clone());
                values.push(ScalarValue::Int64(Some(self.counts[i])));
            } else {
                for v in &self.values[i] {
                    keys.push(key.clone());
                    values.push(v.clone());
                }
            }
        }
        let bounds = match self.bounds {
            Some((b, c)) => vec![ScalarValue::Int64(Some(b)), ScalarValue::Int64(Some(c))],
            None => vec![],
        };
        Ok(vec![
            ScalarValue::List(ScalarValue::new_list(&keys, &self.key, true)),
            ScalarValue::List(ScalarValue::new_list(&values, &self.value, true)),
            ScalarValue::List(ScalarValue::new_list(&bounds, &DataType::Int64, true)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (keys, values, bounds) = (
            states[0].as_list::<i32>(),
            states[1].as_list::<i32>(),
            states[2].as_list::<i32>(),
        );
        for row in 0..keys.len() {
            if keys.is_null(row) {
                continue;
            }
            let b = bounds.value(row);
            if self.bounds.is_none() && b.len() == 2 {
                let b = b.as_primitive::<Int64Type>();
                self.bounds = Some((b.value(0), b.value(1)));
            }
            let (k, v) = (keys.value(row), values.value(row));
            for i in 0..k.len() {
                let key = ScalarValue::try_from_array(&k, i)?;
                if self.counting() {
                    let by = v.as_primitive::<Int64Type>().value(i);
                    self.count(key, by)?;
                } else {
                    self.put(key, ScalarValue::try_from_array(&v, i)?);
                }
            }
        }
        Ok(())
    }
}

impl Entries {
    fn value_type_out(&self) -> DataType {
        match &self.returns {
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv) => kv[1].data_type().clone(),
                _ => self.value.clone(),
            },
            _ => self.value.clone(),
        }
    }
}

/// `numeric_histogram(buckets, value[, weight])`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct NumericHistogram {
    signature: Signature,
}

impl NumericHistogram {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for NumericHistogram {
    fn name(&self) -> &str {
        "numeric_histogram"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let number = |t: &DataType| t.is_numeric() || t.is_null();
        match args {
            [b, v] if (b.is_integer() || b.is_null()) && number(v) => {
                Ok(vec![DataType::Int64, DataType::Float64])
            }
            [b, v, w] if (b.is_integer() || b.is_null()) && number(v) && number(w) => {
                Ok(vec![DataType::Int64, DataType::Float64, DataType::Float64])
            }
            _ => unexpected(self.name(), args, &["bigint", "double", "double"]),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(map_type(&DataType::Float64, &DataType::Float64))
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Centroids {
            returns: args.return_field.data_type().clone(),
            buckets: 0,
            points: Vec::new(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let field = |part: &str, t: DataType| {
            Arc::new(Field::new(format!("{}[{part}]", args.name), t, true))
        };
        Ok(vec![
            field("buckets", DataType::Int64),
            field("values", list_of(&DataType::Float64)),
            field("weights", list_of(&DataType::Float64)),
        ])
    }
}

#[derive(Debug)]
struct Centroids {
    returns: DataType,
    buckets: usize,
    points: Vec<(f64, f64)>,
}

impl Centroids {
    /// Merges equal values, then the two closest centroids, until `buckets` are left.
    fn compact(&mut self, to: usize) {
        self.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.points.dedup_by(|b, a| {
            let same = a.0 == b.0;
            if same {
                a.1 += b.1;
            }
            same
        });
        while self.points.len() > to.max(1) {
            let closest = (0..self.points.len() - 1)
                .min_by(|&i, &j| {
                    let gap = |k: usize| self.points[k + 1].0 - self.points[k].0;
                    gap(i).total_cmp(&gap(j))
                })
                .unwrap_or(0);
            let (a, b) = (self.points[closest], self.points[closest + 1]);
            let weight = a.1 + b.1;
            self.points[closest] = ((a.0 * a.1 + b.0 * b.1) / weight, weight);
            self.points.remove(closest + 1);
        }
    }

    fn set_buckets(&mut self, b: i64) -> Result<()> {
        if b < 2 {
            return invalid(format!(
                "numeric_histogram: the bucket count must be at least 2, not {b}"
            ));
        }
        self.buckets = usize::try_from(b).unwrap_or(usize::MAX).min(100_000);
        Ok(())
    }

    fn add(&mut self, value: f64, weight: f64) {
        self.points.push((value, weight));
        if self.points.len() > 20 * self.buckets.max(1) + 100 {
            let b = self.buckets;
            self.compact(b);
        }
    }
}

impl Accumulator for Centroids {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let buckets = values[0].as_primitive::<Int64Type>();
        let x = values[1].as_primitive::<Float64Type>();
        let w = values.get(2).map(|w| w.as_primitive::<Float64Type>());
        for i in 0..x.len() {
            if x.is_null(i) || w.is_some_and(|w| w.is_null(i)) {
                continue;
            }
            if self.buckets == 0 {
                if buckets.is_null(i) {
                    return invalid("numeric_histogram: the bucket count is NULL");
                }
                self.set_buckets(buckets.value(i))?;
            }
            self.add(x.value(i), w.map_or(1.0, |w| w.value(i)));
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        if self.points.is_empty() {
            return ScalarValue::try_from(&self.returns);
        }
        let b = self.buckets;
        self.compact(b);
        let keys = arrow::array::Float64Array::from_iter_values(self.points.iter().map(|p| p.0));
        let values = arrow::array::Float64Array::from_iter_values(self.points.iter().map(|p| p.1));
        one_map(&self.returns, Arc::new(keys), Arc::new(values))
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.points.capacity() * 16
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let list = |f: fn(&(f64, f64)) -> f64| {
            let v: Vec<ScalarValue> = self
                .points
                .iter()
                .map(|p| ScalarValue::Float64(Some(f(p))))
                .collect();
            ScalarValue::List(ScalarValue::new_list(&v, &DataType::Float64, true))
        };
        Ok(vec![
            ScalarValue::Int64(Some(self.buckets as i64)),
            list(|p| p.0),
            list(|p| p.1),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let buckets = states[0].as_primitive::<Int64Type>();
        let (values, weights) = (states[1].as_list::<i32>(), states[2].as_list::<i32>());
        for row in 0..buckets.len() {
            if buckets.is_null(row) || buckets.value(row) == 0 {
                continue;
            }
            if self.buckets == 0 {
                self.set_buckets(buckets.value(row))?;
            }
            let (v, w) = (values.value(row), weights.value(row));
            let (v, w) = (
                v.as_primitive::<Float64Type>(),
                w.as_primitive::<Float64Type>(),
            );
            for i in 0..v.len() {
                self.add(v.value(i), w.value(i));
            }
        }
        Ok(())
    }
}

/// `checksum(x)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Checksum {
    signature: Signature,
}

impl Checksum {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for Checksum {
    fn name(&self) -> &str {
        "checksum"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let t = args.expr_fields[0].data_type().clone();
        Ok(Box::new(Sum {
            converter: RowConverter::new(vec![SortField::new(t)])?,
            sum: 0,
            seen: false,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[sum]", args.name),
                DataType::Int64,
                true,
            )),
            Arc::new(Field::new(
                format!("{}[seen]", args.name),
                DataType::Boolean,
                true,
            )),
        ])
    }
}

#[derive(Debug)]
struct Sum {
    converter: RowConverter,
    sum: u64,
    seen: bool,
}

/// What a NULL adds to a checksum.
const NULL_HASH: u64 = 0x7fb5_d329_728e_a185;
/// Each value's hash is multiplied by this odd constant (xxHash's PRIME64_1) before it is added.
const PRIME: u64 = 0x9e37_79b1_85eb_ca87;

impl Accumulator for Sum {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let rows = self.converter.convert_columns(&[Arc::clone(&values[0])])?;
        for i in 0..values[0].len() {
            let h = if values[0].is_null(i) {
                NULL_HASH
            } else {
                twox_hash::XxHash64::oneshot(0, rows.row(i).as_ref())
            };
            self.sum = self.sum.wrapping_add(h.wrapping_mul(PRIME));
            self.seen = true;
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Binary(
            self.seen.then(|| self.sum.to_le_bytes().to_vec()),
        ))
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.converter.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Int64(Some(self.sum as i64)),
            ScalarValue::Boolean(Some(self.seen)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (sums, seen) = (
            states[0].as_primitive::<Int64Type>(),
            states[1].as_boolean(),
        );
        for i in 0..sums.len() {
            if !sums.is_null(i) && seen.value(i) {
                self.sum = self.sum.wrapping_add(sums.value(i) as u64);
                self.seen = true;
            }
        }
        Ok(())
    }
}
