//! Trino's aggregate functions (`functions/aggregate`) that DataFusion lacks: `count_if`,
//! `max_by`, `min_by`, `arbitrary` here; the moments (`geometric_mean`, `skewness`, `kurtosis`)
//! in `moments.rs`; the ones building maps, and `checksum`, in `maps.rs`; the multiset ones in
//! `crate::multiset`. `distinct.rs` gives each of them DISTINCT; `decimal.rs` types `sum` and `avg`
//! of decimals as Trino does, and has a sum of integers fail on overflow with `integer_sum.rs`.

mod decimal;
mod distinct;
mod integer_sum;
mod maps;
mod moments;

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

use crate::udf::unexpected;

pub fn functions() -> Vec<Arc<AggregateUDF>> {
    use maps::{Kind as M, MapAggregate};
    use moments::{Kind as S, Moments};
    let moments = [S::GeometricMean, S::Skewness, S::Kurtosis]
        .map(|k| Arc::new(AggregateUDF::new_from_impl(Moments::new(k))));
    let maps = [
        M::Histogram,
        M::MapAgg,
        M::MultimapAgg,
        M::MapUnion,
        M::MostFrequent,
    ]
    .map(|k| Arc::new(AggregateUDF::new_from_impl(MapAggregate::new(k))));
    let mut out = vec![
        Arc::new(AggregateUDF::new_from_impl(CountIf::default())),
        Arc::new(AggregateUDF::new_from_impl(By::new(
            "max_by",
            Ordering::Greater,
        ))),
        Arc::new(AggregateUDF::new_from_impl(By::new(
            "min_by",
            Ordering::Less,
        ))),
        Arc::new(AggregateUDF::new_from_impl(Arbitrary::default())),
        Arc::new(AggregateUDF::new_from_impl(maps::NumericHistogram::new())),
        Arc::new(AggregateUDF::new_from_impl(maps::Checksum::new())),
    ];
    out.extend(moments);
    out.extend(maps);
    out.extend(crate::multiset::aggregates());
    // Each of them takes DISTINCT through the same wrapper.
    let mut out: Vec<Arc<AggregateUDF>> = out
        .into_iter()
        .map(|f| {
            Arc::new(AggregateUDF::new_from_impl(distinct::Distinct(
                f.as_ref().clone(),
            )))
        })
        .collect();
    // DataFusion's sum and avg, with Trino's types for decimals and a sum of integers that fails on
    // overflow (they take DISTINCT themselves).
    out.push(Arc::new(AggregateUDF::new_from_impl(
        decimal::TrinoDecimal::sum(),
    )));
    out.push(Arc::new(AggregateUDF::new_from_impl(
        decimal::TrinoDecimal::avg(),
    )));
    // Trino's names for DataFusion's bitwise aggregates.
    use datafusion::functions_aggregate::bit_and_or_xor::{
        bit_and_udaf, bit_or_udaf, bit_xor_udaf,
    };
    for (f, alias) in [
        (bit_and_udaf(), "bitwise_and_agg"),
        (bit_or_udaf(), "bitwise_or_agg"),
        (bit_xor_udaf(), "bitwise_xor_agg"),
    ] {
        out.push(Arc::new(f.as_ref().clone().with_aliases([alias])));
    }
    out
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CountIf {
    signature: Signature,
}

impl Default for CountIf {
    fn default() -> Self {
        Self {
            signature: Signature::exact(vec![DataType::Boolean], Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for CountIf {
    fn name(&self) -> &str {
        "count_if"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CountIfAccumulator(0)))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[count]", args.name),
            DataType::Int64,
            false,
        ))])
    }

    fn default_value(&self, _data_type: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(0)))
    }
}

#[derive(Debug)]
struct CountIfAccumulator(i64);

impl Accumulator for CountIfAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = values[0].as_boolean();
        // A NULL is not true: count the set bits of the values that are valid.
        let counted = match values.nulls() {
            Some(nulls) => {
                let valid = arrow::buffer::BooleanBuffer::new(
                    nulls.buffer().clone(),
                    nulls.offset(),
                    nulls.len(),
                );
                (values.values() & &valid).count_set_bits()
            }
            None => values.true_count(),
        };
        self.0 += counted as i64;
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(self.0)))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Int64(Some(self.0))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let counts = states[0].as_primitive::<arrow::datatypes::Int64Type>();
        self.0 += arrow::compute::sum(counts).unwrap_or(0);
        Ok(())
    }
}

/// `max_by(x, y)` / `min_by(x, y)`: the `x` of the row with the greatest (least) `y`; rows whose
/// `y` is NULL are skipped.
#[derive(Debug, PartialEq, Eq, Hash)]
struct By {
    name: &'static str,
    wanted: Ordering,
    signature: Signature,
}

impl By {
    fn new(name: &'static str, wanted: Ordering) -> Self {
        Self {
            name,
            wanted,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for By {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [x, _] => Ok(x.clone()),
            _ => unexpected(self.name, args, &["T, K"]),
        }
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let [x, y] = args.expr_fields else {
            return plan_err!("{} takes two arguments", self.name);
        };
        Ok(Box::new(ByAccumulator {
            wanted: self.wanted,
            best: None,
            x: ScalarValue::try_from(x.data_type())?,
            y_type: y.data_type().clone(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let [x, y] = args.input_fields else {
            return plan_err!("{} takes two arguments", self.name);
        };
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[x]", args.name),
                x.data_type().clone(),
                true,
            )),
            Arc::new(Field::new(
                format!("{}[y]", args.name),
                y.data_type().clone(),
                true,
            )),
        ])
    }
}

#[derive(Debug)]
struct ByAccumulator {
    wanted: Ordering,
    /// The best `y` so far, and its `x` in `x`.
    best: Option<ScalarValue>,
    x: ScalarValue,
    y_type: DataType,
}

impl ByAccumulator {
    fn take(&mut self, xs: &ArrayRef, ys: &ArrayRef) -> Result<()> {
        let compare =
            arrow::array::make_comparator(ys.as_ref(), ys.as_ref(), SortOptions::default())?;
        let mut at: Option<usize> = None;
        for i in 0..ys.len() {
            if ys.is_null(i) {
                continue;
            }
            if at.is_none_or(|b| compare(i, b) == self.wanted) {
                at = Some(i);
            }
        }
        let Some(i) = at else {
            return Ok(());
        };
        let y = ScalarValue::try_from_array(ys, i)?;
        let better = match &self.best {
            None => true,
            Some(best) => y.partial_cmp(best) == Some(self.wanted),
        };
        if better {
            self.x = ScalarValue::try_from_array(xs, i)?;
            self.best = Some(y);
        }
        Ok(())
    }
}

impl Accumulator for ByAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.take(&values[0], &values[1])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.x.clone())
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.x.size() + self.best.as_ref().map_or(0, ScalarValue::size)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let y = match &self.best {
            Some(y) => y.clone(),
            None => ScalarValue::try_from(&self.y_type)?,
        };
        Ok(vec![self.x.clone(), y])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.take(&states[0], &states[1])
    }
}

/// `arbitrary(x)`: some non-NULL `x` of the group (the first seen).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Arbitrary {
    signature: Signature,
}

impl Default for Arbitrary {
    fn default() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for Arbitrary {
    fn name(&self) -> &str {
        "arbitrary"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[0].clone())
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(ArbitraryAccumulator(ScalarValue::try_from(
            args.return_field.data_type(),
        )?)))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[value]", args.name),
            args.return_field.data_type().clone(),
            true,
        ))])
    }
}

#[derive(Debug)]
struct ArbitraryAccumulator(ScalarValue);

impl Accumulator for ArbitraryAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if !self.0.is_null() {
            return Ok(());
        }
        let values = &values[0];
        if let Some(i) = (0..values.len()).find(|i| values.is_valid(*i)) {
            self.0 = ScalarValue::try_from_array(values, i)?;
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.0.clone())
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.0.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.0.clone()])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
}
