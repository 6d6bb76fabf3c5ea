//! `sum` and `avg` of DECIMALs as Trino types them: `sum(decimal(p, s))` is decimal(38, s)
//! (DataFusion's has p + 10 digits), `avg(decimal(p, s))` is decimal(p, s), rounded half away from
//! zero (DataFusion's has s + 4 decimals, truncated). Both run on DataFusion's own accumulators and
//! their grouped forms: the sum with Trino's wider type, the average at DataFusion's scale and then
//! rounded to Trino's (which gives the same digits as rounding the exact mean: a truncation at
//! s + 4 decimals never crosses a rounding boundary at s). An interval day to second (and a
//! duration, which SQE shows as one) is a duration in milliseconds here (the engine casts an
//! interval with `to_milliseconds`): summed by DataFusion, averaged by [`IntervalAvg`], rounded
//! half up to the millisecond as Trino's is (DataFusion's truncates). A sum of integers (a bigint
//! once coerced) fails on overflow as Trino's does, with the accumulators of `integer_sum.rs`.
//! Other argument types are DataFusion's.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Decimal128Array};
use arrow::datatypes::{
    DataType, Decimal128Type, DurationMillisecondType, Field, FieldRef, Int64Type, IntervalUnit,
    TimeUnit, UInt64Type,
};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::functions_aggregate::{average::avg_udaf, sum::sum_udaf};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::type_coercion::functions::fields_with_udf;

use super::integer_sum::{DistinctIntegerSum, IntegerSum, IntegerSumGroups};
use crate::udf::unexpected;
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator,
    ReversedUDAF, SetMonotonicity, Signature,
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TrinoDecimal {
    inner: AggregateUDF,
    avg: bool,
    /// DataFusion's types, and intervals (see [`AggregateUDFImpl::coerce_types`]).
    signature: Signature,
}

impl TrinoDecimal {
    pub(super) fn sum() -> Self {
        Self::new(sum_udaf().as_ref().clone(), false)
    }

    pub(super) fn avg() -> Self {
        Self::new(avg_udaf().as_ref().clone(), true)
    }

    fn new(inner: AggregateUDF, avg: bool) -> Self {
        let signature = Signature::user_defined(inner.signature().volatility);
        Self {
            inner,
            avg,
            signature,
        }
    }

    /// Whether this is an average of intervals day to second (durations in milliseconds, as
    /// coerced).
    fn interval_avg(&self, args: &[FieldRef]) -> bool {
        self.avg && matches!(args, [f] if matches!(f.data_type(), DataType::Duration(_)))
    }

    /// Whether this is a sum of bigints (what a sum of any integer type is, once coerced), which
    /// fails on overflow (`integer_sum.rs`).
    fn integer_sum(&self, args: &[FieldRef]) -> bool {
        !self.avg && matches!(args, [f] if f.data_type() == &DataType::Int64)
    }

    /// The accumulator of a sum of bigints, of its distinct values or all of them, for a sliding
    /// window frame or not.
    fn integer_accumulator(args: &AccumulatorArgs, sliding: bool) -> Box<dyn Accumulator> {
        if args.is_distinct {
            Box::<DistinctIntegerSum>::default()
        } else {
            Box::new(IntegerSum::new(sliding))
        }
    }

    /// Trino's type of the answer, where it differs from DataFusion's.
    fn trino_type(&self, args: &[DataType]) -> Option<DataType> {
        match args {
            [DataType::Decimal128(p, s)] if self.avg => Some(DataType::Decimal128(*p, *s)),
            [DataType::Decimal128(_, s)] => Some(DataType::Decimal128(38, *s)),
            _ => None,
        }
    }

    /// For an average of decimals: DataFusion's type of it, which its accumulators compute, and
    /// Trino's, to round to.
    fn rounding(&self, args: &[FieldRef]) -> Result<Option<(FieldRef, Target)>> {
        let types: Vec<DataType> = args.iter().map(|f| f.data_type().clone()).collect();
        match (self.avg, self.trino_type(&types)) {
            (true, Some(DataType::Decimal128(p, s))) => {
                let theirs = self.inner.return_type(&types)?;
                let DataType::Decimal128(_, their_scale) = theirs else {
                    return Ok(None);
                };
                let field = Arc::new(Field::new("avg", theirs, true));
                Ok(Some((field, (p, s, their_scale))))
            }
            _ => Ok(None),
        }
    }
}

impl TrinoDecimal {
    /// DataFusion's accumulator (`make`), rounded to Trino's type for an average of decimals.
    fn rounded(
        &self,
        args: AccumulatorArgs,
        make: fn(&AggregateUDF, AccumulatorArgs) -> Result<Box<dyn Accumulator>>,
    ) -> Result<Box<dyn Accumulator>> {
        match self.rounding(args.expr_fields)? {
            Some((theirs, to)) => Ok(Box::new(Rounded {
                inner: make(
                    &self.inner,
                    AccumulatorArgs {
                        return_field: theirs,
                        ..args
                    },
                )?,
                to,
            })),
            None => make(&self.inner, args),
        }
    }
}

impl AggregateUDFImpl for TrinoDecimal {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// An interval day to second as a duration in milliseconds; other types as DataFusion's
    /// signature coerces them.
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        match args {
            [DataType::Interval(IntervalUnit::DayTime | IntervalUnit::MonthDayNano)] => {
                return Ok(vec![DataType::Duration(TimeUnit::Millisecond)]);
            }
            [DataType::Duration(_)] if self.avg => {
                return Ok(vec![DataType::Duration(TimeUnit::Millisecond)]);
            }
            // A NULL: bigint's.
            [DataType::Null] => return Ok(vec![DataType::Int64]),
            _ => {}
        }
        let fields: Vec<FieldRef> = args
            .iter()
            .map(|t| Arc::new(Field::new("x", t.clone(), true)))
            .collect();
        match fields_with_udf(&fields, &self.inner) {
            Ok(fields) => Ok(fields.iter().map(|f| f.data_type().clone()).collect()),
            Err(_) => unexpected(
                self.name(),
                args,
                &["bigint", "double", "decimal(p,s)", "interval day to second"],
            ),
        }
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        if self.avg && matches!(args, [DataType::Duration(_)]) {
            return Ok(DataType::Duration(TimeUnit::Millisecond));
        }
        match self.trino_type(args) {
            Some(t) => Ok(t),
            None => self.inner.return_type(args),
        }
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        if self.interval_avg(args.expr_fields) {
            return Ok(Box::<IntervalAvg>::default());
        }
        if self.integer_sum(args.expr_fields) {
            return Ok(Self::integer_accumulator(&args, false));
        }
        self.rounded(args, AggregateUDF::accumulator)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        if self.interval_avg(args.expr_fields) {
            return Ok(Box::<IntervalAvg>::default());
        }
        if self.integer_sum(args.expr_fields) {
            return Ok(Self::integer_accumulator(&args, true));
        }
        self.rounded(args, AggregateUDF::create_sliding_accumulator)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        if self.interval_avg(args.input_fields) {
            return Ok(vec![
                Arc::new(Field::new(
                    format!("{}[count]", args.name),
                    DataType::UInt64,
                    true,
                )),
                Arc::new(Field::new(
                    format!("{}[sum]", args.name),
                    DataType::Int64,
                    true,
                )),
            ]);
        }
        match self.rounding(args.input_fields)? {
            Some((theirs, _)) => self.inner.state_fields(StateFieldsArgs {
                return_field: theirs,
                ..args
            }),
            None => self.inner.state_fields(args),
        }
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        if self.interval_avg(args.expr_fields) {
            return false;
        }
        if self.integer_sum(args.expr_fields) {
            return !args.is_distinct;
        }
        match self.rounding(args.expr_fields) {
            Ok(Some((theirs, _))) => self.inner.groups_accumulator_supported(AccumulatorArgs {
                return_field: theirs,
                ..args
            }),
            Ok(None) => self.inner.groups_accumulator_supported(args),
            Err(_) => false,
        }
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        if self.integer_sum(args.expr_fields) {
            return Ok(Box::<IntegerSumGroups>::default());
        }
        match self.rounding(args.expr_fields)? {
            Some((theirs, to)) => Ok(Box::new(RoundedGroups {
                inner: self.inner.create_groups_accumulator(AccumulatorArgs {
                    return_field: theirs,
                    ..args
                })?,
                to,
            })),
            None => self.inner.create_groups_accumulator(args),
        }
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.inner().set_monotonicity(data_type)
    }
}

/// Trino's precision and scale for an average, and the scale DataFusion computes it at.
type Target = (u8, i8, i8);

/// An unscaled decimal at scale `from` rounded, half away from zero, to scale `to` (`from >= to`).
fn round(v: i128, from: i8, to: i8) -> i128 {
    let m = 10i128.pow(u32::try_from(from - to).unwrap_or(0));
    let (q, r) = (v / m, v % m);
    if r.abs() * 2 >= m { q + v.signum() } else { q }
}

/// DataFusion's average of decimals, rounded to Trino's type: (precision, scale, DataFusion's scale).
#[derive(Debug)]
struct Rounded {
    inner: Box<dyn Accumulator>,
    to: Target,
}

impl Accumulator for Rounded {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.update_batch(values)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.inner.merge_batch(states)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.retract_batch(values)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.inner.state()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let (p, s, from) = self.to;
        Ok(match self.inner.evaluate()? {
            ScalarValue::Decimal128(v, _, _) => {
                ScalarValue::Decimal128(v.map(|v| round(v, from, s)), p, s)
            }
            other => other,
        })
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.inner.size()
    }
}

/// The average of intervals day to second (durations in milliseconds), rounded half up to the
/// millisecond as Trino's is; the sum is exact, and an error where it overflows.
#[derive(Debug, Default)]
struct IntervalAvg {
    count: u64,
    sum: i64,
}

impl IntervalAvg {
    fn add(&mut self, count: u64, sum: Option<i64>, sign: i64) -> Result<()> {
        let Some(sum) = sum else {
            return Ok(());
        };
        let count = if sign < 0 {
            self.count.checked_sub(count)
        } else {
            self.count.checked_add(count)
        };
        match (
            count,
            sum.checked_mul(sign).and_then(|s| self.sum.checked_add(s)),
        ) {
            (Some(count), Some(sum)) => {
                (self.count, self.sum) = (count, sum);
                Ok(())
            }
            _ => exec_err!("avg: the sum of the intervals is out of range"),
        }
    }

    fn values(values: &[ArrayRef]) -> Result<(u64, Option<i64>)> {
        let array = values[0].as_primitive::<DurationMillisecondType>();
        let mut sum: Option<i64> = None;
        for v in array.iter().flatten() {
            match sum.unwrap_or(0).checked_add(v) {
                Some(s) => sum = Some(s),
                None => return exec_err!("avg: the sum of the intervals is out of range"),
            }
        }
        Ok(((array.len() - array.null_count()) as u64, sum))
    }
}

impl Accumulator for IntervalAvg {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (count, sum) = Self::values(values)?;
        self.add(count, sum, 1)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (count, sum) = Self::values(values)?;
        self.add(count, sum, -1)
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let counts = states[0].as_primitive::<UInt64Type>();
        let sums = states[1].as_primitive::<Int64Type>();
        for i in 0..counts.len() {
            if !counts.is_null(i) {
                self.add(counts.value(i), sums.is_valid(i).then(|| sums.value(i)), 1)?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::UInt64(Some(self.count)),
            ScalarValue::Int64(Some(self.sum)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        if self.count == 0 {
            return Ok(ScalarValue::DurationMillisecond(None));
        }
        // Half up: floor(sum / count + 1/2).
        let (sum, count) = (i128::from(self.sum), i128::from(self.count));
        let avg = (2 * sum + count).div_euclid(2 * count);
        Ok(ScalarValue::DurationMillisecond(i64::try_from(avg).ok()))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

/// The grouped form of [`Rounded`].
struct RoundedGroups {
    inner: Box<dyn GroupsAccumulator>,
    to: Target,
}

impl GroupsAccumulator for RoundedGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner
            .update_batch(values, group_indices, opt_filter, total_num_groups)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner
            .merge_batch(values, group_indices, opt_filter, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let (p, s, from) = self.to;
        let theirs = self.inner.evaluate(emit_to)?;
        let Some(values) = theirs.as_primitive_opt::<Decimal128Type>() else {
            return Ok(theirs);
        };
        let rounded: Decimal128Array = values.unary(|v| round(v, from, s));
        Ok(Arc::new(rounded.with_precision_and_scale(p, s)?))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        self.inner.state(emit_to)
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        self.inner.convert_to_state(values, opt_filter)
    }

    fn supports_convert_to_state(&self) -> bool {
        self.inner.supports_convert_to_state()
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.inner.size()
    }
}

#[cfg(test)]
mod tests {
    use super::round;

    #[test]
    fn rounds_half_away_from_zero() {
        assert_eq!(round(1_916_666, 6, 2), 192);
        assert_eq!(round(1_915_000, 6, 2), 192);
        assert_eq!(round(1_914_999, 6, 2), 191);
        assert_eq!(round(-1_915_000, 6, 2), -192);
        assert_eq!(round(-1_914_999, 6, 2), -191);
        assert_eq!(round(42, 2, 2), 42);
    }
}
