//! `geometric_mean`, `skewness` and `kurtosis`: Trino's statistical aggregates over the central
//! moments of the values, kept as running sums that partial aggregates merge exactly (Pébay's
//! pairwise formulas). `skewness` is Fisher's moment coefficient, `sqrt(n)·m3 / m2^1.5`;
//! `kurtosis` is the unbiased excess kurtosis, `n(n+1)(n−1) / ((n−2)(n−3)) · m4/m2² −
//! 3(n−1)² / ((n−2)(n−3))` (m_k: the sum of the k-th powers of the deviations from the mean).
//! They need 3 and 4 values; with fewer, NULL, as in Trino.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, FieldRef, Float64Type, Int64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

use crate::udf::unexpected;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    GeometricMean,
    Skewness,
    Kurtosis,
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Moments {
    kind: Kind,
    signature: Signature,
}

impl Moments {
    pub(super) fn new(kind: Kind) -> Self {
        Self {
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for Moments {
    fn name(&self) -> &str {
        match self.kind {
            Kind::GeometricMean => "geometric_mean",
            Kind::Skewness => "skewness",
            Kind::Kurtosis => "kurtosis",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        match args {
            [t] if t.is_numeric() || t.is_null() => Ok(vec![DataType::Float64]),
            _ => unexpected(self.name(), args, &["double"]),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(State::new(self.kind)))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let field = |part: &str, t: DataType| {
            Arc::new(Field::new(format!("{}[{part}]", args.name), t, false))
        };
        Ok(vec![
            field("n", DataType::Int64),
            field("mean", DataType::Float64),
            field("m2", DataType::Float64),
            field("m3", DataType::Float64),
            field("m4", DataType::Float64),
            field("sum_ln", DataType::Float64),
        ])
    }
}

#[derive(Debug, Clone, Copy)]
struct State {
    kind: Kind,
    n: i64,
    mean: f64,
    m2: f64,
    m3: f64,
    m4: f64,
    sum_ln: f64,
}

impl State {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            n: 0,
            mean: 0.0,
            m2: 0.0,
            m3: 0.0,
            m4: 0.0,
            sum_ln: 0.0,
        }
    }

    fn add(&mut self, x: f64) {
        let n1 = self.n as f64;
        self.n += 1;
        let n = self.n as f64;
        let delta = x - self.mean;
        let delta_n = delta / n;
        let delta_n2 = delta_n * delta_n;
        let term = delta * delta_n * n1;
        self.mean += delta_n;
        self.m4 += term * delta_n2 * (n * n - 3.0 * n + 3.0) + 6.0 * delta_n2 * self.m2
            - 4.0 * delta_n * self.m3;
        self.m3 += term * delta_n * (n - 2.0) - 3.0 * delta_n * self.m2;
        self.m2 += term;
        self.sum_ln += x.ln();
    }

    fn merge(&mut self, o: &State) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = State {
                kind: self.kind,
                ..*o
            };
            return;
        }
        let (na, nb) = (self.n as f64, o.n as f64);
        let n = na + nb;
        let delta = o.mean - self.mean;
        let d2 = delta * delta;
        let m2 = self.m2 + o.m2 + d2 * na * nb / n;
        let m3 = self.m3
            + o.m3
            + delta * d2 * na * nb * (na - nb) / (n * n)
            + 3.0 * delta * (na * o.m2 - nb * self.m2) / n;
        let m4 = self.m4
            + o.m4
            + d2 * d2 * na * nb * (na * na - na * nb + nb * nb) / (n * n * n)
            + 6.0 * d2 * (na * na * o.m2 + nb * nb * self.m2) / (n * n)
            + 4.0 * delta * (na * o.m3 - nb * self.m3) / n;
        self.mean = (na * self.mean + nb * o.mean) / n;
        self.n += o.n;
        self.m2 = m2;
        self.m3 = m3;
        self.m4 = m4;
        self.sum_ln += o.sum_ln;
    }
}

impl Accumulator for State {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for x in values[0].as_primitive::<Float64Type>().iter().flatten() {
            self.add(x);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let n = self.n as f64;
        let value = match self.kind {
            _ if self.n == 0 => None,
            Kind::GeometricMean => Some((self.sum_ln / n).exp()),
            Kind::Skewness if self.n >= 3 => Some(n.sqrt() * self.m3 / self.m2.powf(1.5)),
            Kind::Kurtosis if self.n >= 4 => {
                let d = (n - 2.0) * (n - 3.0);
                Some(
                    (n - 1.0) * n * (n + 1.0) / d * self.m4 / (self.m2 * self.m2)
                        - 3.0 * (n - 1.0) * (n - 1.0) / d,
                )
            }
            _ => None,
        };
        Ok(ScalarValue::Float64(value))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Int64(Some(self.n)),
            ScalarValue::Float64(Some(self.mean)),
            ScalarValue::Float64(Some(self.m2)),
            ScalarValue::Float64(Some(self.m3)),
            ScalarValue::Float64(Some(self.m4)),
            ScalarValue::Float64(Some(self.sum_ln)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let n = states[0].as_primitive::<Int64Type>();
        let f = |i: usize| states[i].as_primitive::<Float64Type>();
        let (mean, m2, m3, m4, sum_ln) = (f(1), f(2), f(3), f(4), f(5));
        for row in 0..n.len() {
            self.merge(&State {
                kind: self.kind,
                n: n.value(row),
                mean: mean.value(row),
                m2: m2.value(row),
                m3: m3.value(row),
                m4: m4.value(row),
                sum_ln: sum_ln.value(row),
            });
        }
        Ok(())
    }
}
