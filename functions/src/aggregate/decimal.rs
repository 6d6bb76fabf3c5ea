//! `sum` and `avg` of DECIMALs as Trino types them: `sum(decimal(p, s))` is decimal(38, s)
//! (DataFusion's has p + 10 digits), `avg(decimal(p, s))` is decimal(p, s), rounded half away from
//! zero (DataFusion's has s + 4 decimals, truncated). Both run on DataFusion's own accumulators and
//! their grouped forms: the sum with Trino's wider type, the average at DataFusion's scale and then
//! rounded to Trino's (which gives the same digits as rounding the exact mean: a truncation at
//! s + 4 decimals never crosses a rounding boundary at s). Other argument types are DataFusion's.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, Decimal128Array};
use arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions_aggregate::{average::avg_udaf, sum::sum_udaf};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator,
    ReversedUDAF, SetMonotonicity, Signature,
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TrinoDecimal {
    inner: AggregateUDF,
    avg: bool,
}

impl TrinoDecimal {
    pub(super) fn sum() -> Self {
        Self {
            inner: sum_udaf().as_ref().clone(),
            avg: false,
        }
    }

    pub(super) fn avg() -> Self {
        Self {
            inner: avg_udaf().as_ref().clone(),
            avg: true,
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
        self.inner.signature()
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(args)
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
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
        self.rounded(args, AggregateUDF::accumulator)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.rounded(args, AggregateUDF::create_sliding_accumulator)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        match self.rounding(args.input_fields)? {
            Some((theirs, _)) => self.inner.state_fields(StateFieldsArgs {
                return_field: theirs,
                ..args
            }),
            None => self.inner.state_fields(args),
        }
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
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
