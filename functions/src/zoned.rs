//! A `timestamp with time zone` whose values each keep their own zone, as Trino's do.
//!
//! Arrow's timestamp has one zone for a whole column, which is how SQE holds a timestamp with a
//! time zone wherever one zone does: a table's column, a literal, a value read in the session's
//! zone or moved to a constant zone. Where the zone may differ from row to row (a text read from
//! a column with its own offset or zone, `at_timezone(x, zone_column)`), the value is a struct
//! of its instant (UTC) and its zone's name: [`zoned_type`].
//!
//! The functions that read a timestamp with a time zone take either form: [`each_zone`] wraps
//! them, and calls the function once per zone in the batch, on the rows of that zone as Arrow
//! timestamps in it. Comparisons and arithmetic take the instant (the engine's operators,
//! engine-pool/src/trino_sql/), casts the text, wall-clock time or instant, and the protocols show
//! each value in its zone (Trino HTTP's `2020-05-11 11:15:05.000 +01:00`; Flight SQL sends the
//! struct as it is).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray, StructArray, UInt32Array, make_array};
use arrow::buffer::NullBuffer;
use arrow::compute::{interleave, take};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::type_coercion::functions::fields_with_udf;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};

use crate::udf::{is_text, unexpected};

pub use sqe_sessions::{INSTANT, ZONE, zoned_type, zoned_unit};

/// `array` with its type changed to `t`, its values kept (a timestamp's zone, for instance).
fn retyped(array: &ArrayRef, t: &DataType) -> Result<ArrayRef> {
    Ok(make_array(
        array
            .to_data()
            .into_builder()
            .data_type(t.clone())
            .build()?,
    ))
}

/// Values of a [`zoned_type`]: instants (an Arrow timestamp in any zone, read as instants) and
/// the zone of each; a NULL instant is a NULL value.
pub(crate) fn zoned_array(instants: &ArrayRef, zones: StringArray) -> Result<ArrayRef> {
    let DataType::Timestamp(unit, _) = instants.data_type() else {
        return exec_err!("not a timestamp: {}", instants.data_type());
    };
    let DataType::Struct(fields) = zoned_type(*unit) else {
        return exec_err!("zoned_type is a struct");
    };
    let instants = retyped(instants, fields[0].data_type())?;
    let nulls = instants.logical_nulls();
    Ok(Arc::new(StructArray::try_new(
        fields,
        vec![instants, Arc::new(zones)],
        nulls,
    )?))
}

/// The instants and zones of a [`zoned_type`] array; a NULL value's instant is NULL.
pub(crate) fn zoned_parts(array: &ArrayRef) -> Result<(ArrayRef, &StringArray)> {
    let Some(s) = array.as_struct_opt() else {
        return exec_err!(
            "not a timestamp with a time zone per value: {}",
            array.data_type()
        );
    };
    let instants = s.column(0);
    let nulls = NullBuffer::union(s.nulls(), instants.logical_nulls().as_ref());
    let instants = make_array(instants.to_data().into_builder().nulls(nulls).build()?);
    let Some(zones) = s.column(1).as_string_opt::<i32>() else {
        return exec_err!("not a zone column: {}", s.column(1).data_type());
    };
    Ok((instants, zones))
}

/// `sqe_zoned(instant, zone)`, a timestamp with a time zone per value from an instant and a zone
/// name (as the engine shifts one: `x + INTERVAL …` keeps each value's zone); `sqe_zoned(x)`, a
/// timestamp with one zone in the per-value form (where it meets per-value ones).
pub fn zoned_value() -> Arc<ScalarUDF> {
    crate::udf::Scalar::new(
        "sqe_zoned",
        |args| match args {
            [t @ DataType::Timestamp(_, Some(_))] => Ok(vec![t.clone()]),
            [t @ DataType::Timestamp(..), z] if is_text(z) || z.is_null() => {
                Ok(vec![t.clone(), DataType::Utf8])
            }
            _ => unexpected("sqe_zoned", args, &["timestamp with time zone, varchar"]),
        },
        |args| match args.first() {
            Some(DataType::Timestamp(unit, _)) => Ok(zoned_type(*unit)),
            _ => exec_err!("sqe_zoned: not a timestamp"),
        },
        |args, _| {
            let zones: StringArray = match (args, args[0].data_type()) {
                ([_, zones], _) => zones.as_string::<i32>().clone(),
                ([x], DataType::Timestamp(_, Some(zone))) => {
                    StringArray::from(vec![zone.as_ref(); x.len()])
                }
                _ => return exec_err!("sqe_zoned: not a timestamp with a time zone"),
            };
            zoned_array(&args[0], zones)
        },
    )
    .udf()
}

/// A function that reads a timestamp with a time zone, taking the per-value form too: one call
/// per zone in the batch (the zone of the first such argument; Trino's functions of two take the
/// first's), each on its rows, as timestamps in that zone. A timestamp answer in the zone it was
/// given is per value again.
pub fn each_zone(inner: Arc<ScalarUDF>) -> Arc<ScalarUDF> {
    let signature = Signature::user_defined(inner.signature().volatility);
    Arc::new(ScalarUDF::new_from_impl(EachZone { inner, signature }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct EachZone {
    inner: Arc<ScalarUDF>,
    signature: Signature,
}

/// `fields` with each per-value zoned one as an Arrow timestamp in `zone`.
fn in_zone(fields: &[FieldRef], zone: &str) -> Vec<FieldRef> {
    fields
        .iter()
        .map(|f| match zoned_unit(f.data_type()) {
            Some(unit) => Arc::new(
                f.as_ref()
                    .clone()
                    .with_data_type(DataType::Timestamp(unit, Some(zone.into()))),
            ),
            None => Arc::clone(f),
        })
        .collect()
}

impl ScalarUDFImpl for EachZone {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let inner = self.inner.inner().with_updated_config(config)?;
        Some(ScalarUDF::new_from_impl(EachZone {
            inner: Arc::new(inner),
            signature: self.signature.clone(),
        }))
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let fields: Vec<FieldRef> = args
            .iter()
            .map(|t| Arc::new(Field::new("x", t.clone(), true)))
            .collect();
        let coerced = fields_with_udf(&in_zone(&fields, "UTC"), self.inner.as_ref())?;
        Ok(args
            .iter()
            .zip(coerced)
            .map(|(given, to)| match (zoned_unit(given), to.data_type()) {
                (Some(_), DataType::Timestamp(unit, Some(_))) => zoned_type(*unit),
                (Some(_), _) => given.clone(),
                (None, t) => t.clone(),
            })
            .collect())
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        self.inner.return_type(args)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if !args
            .arg_fields
            .iter()
            .any(|f| zoned_unit(f.data_type()).is_some())
        {
            return self.inner.return_field_from_args(args);
        }
        let answer = |zone: &str| {
            self.inner.return_field_from_args(ReturnFieldArgs {
                arg_fields: &in_zone(args.arg_fields, zone),
                scalar_arguments: args.scalar_arguments,
            })
        };
        let (utc, other) = (answer("UTC")?, answer("+01:00")?);
        // A timestamp in the zone it was given: the zone of each value.
        match utc.data_type() {
            DataType::Timestamp(unit, Some(_)) if utc.data_type() != other.data_type() => Ok(
                Arc::new(utc.as_ref().clone().with_data_type(zoned_type(*unit))),
            ),
            _ => Ok(utc),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let Some(first) = args
            .arg_fields
            .iter()
            .position(|f| zoned_unit(f.data_type()).is_some())
        else {
            return self.inner.invoke_with_args(args);
        };
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = if scalar { 1 } else { args.number_rows };
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let constants: Vec<Option<ScalarValue>> = args
            .args
            .iter()
            .map(|a| match a {
                ColumnarValue::Scalar(s) => Some(s.clone()),
                ColumnarValue::Array(_) => None,
            })
            .collect();
        let constants: Vec<Option<&ScalarValue>> = constants.iter().map(Option::as_ref).collect();
        // The rows of each zone, in the order the zones come.
        let (_, zones) = zoned_parts(&arrays[first])?;
        let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
        let mut group_of: HashMap<&str, usize> = HashMap::new();
        let mut place = Vec::with_capacity(n);
        for row in 0..n {
            let zone = if zones.is_valid(row) {
                zones.value(row)
            } else {
                "UTC"
            };
            let g = *group_of.entry(zone).or_insert_with(|| {
                groups.push((zone.to_string(), Vec::new()));
                groups.len() - 1
            });
            place.push((g, groups[g].1.len()));
            groups[g].1.push(u32::try_from(row).unwrap_or(u32::MAX));
        }
        let zoned_answer = zoned_unit(args.return_field.data_type()).is_some();
        let mut answers = Vec::with_capacity(groups.len());
        for (zone, rows) in &groups {
            let fields = in_zone(&args.arg_fields, zone);
            let indices = UInt32Array::from(rows.clone());
            let mut values = Vec::with_capacity(arrays.len());
            for (array, field) in arrays.iter().zip(&fields) {
                let array = if zoned_unit(array.data_type()).is_some() {
                    retyped(&zoned_parts(array)?.0, field.data_type())?
                } else {
                    Arc::clone(array)
                };
                values.push(ColumnarValue::Array(take(array.as_ref(), &indices, None)?));
            }
            let return_field = self.inner.return_field_from_args(ReturnFieldArgs {
                arg_fields: &fields,
                scalar_arguments: &constants,
            })?;
            let answer = self
                .inner
                .invoke_with_args(ScalarFunctionArgs {
                    args: values,
                    arg_fields: fields,
                    number_rows: rows.len(),
                    return_field,
                    config_options: Arc::clone(&args.config_options),
                })?
                .into_array(rows.len())?;
            let answer = match answer.data_type() {
                DataType::Timestamp(_, Some(zone)) if zoned_answer => {
                    let zones = StringArray::from(vec![zone.as_ref(); rows.len()]);
                    zoned_array(&answer, zones)?
                }
                _ => answer,
            };
            answers.push(answer);
        }
        let refs: Vec<&dyn Array> = answers.iter().map(AsRef::as_ref).collect();
        let out = if refs.is_empty() {
            arrow::array::new_empty_array(args.return_field.data_type())
        } else {
            interleave(&refs, &place)?
        };
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
        }
        Ok(ColumnarValue::Array(out))
    }
}

/// A function whose arguments meet at one type (`coalesce`): where a timestamp with a time zone
/// per value meets timestamps with one zone, all take the per-value form (cast by the engine,
/// engine-pool/src/trino_sql/, as in a CASE). Everything else is the function's own.
pub fn same_zone(inner: Arc<ScalarUDF>) -> Arc<ScalarUDF> {
    let signature = Signature::user_defined(inner.signature().volatility);
    Arc::new(ScalarUDF::new_from_impl(SameZone { inner, signature }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SameZone {
    inner: Arc<ScalarUDF>,
    signature: Signature,
}

impl ScalarUDFImpl for SameZone {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    /// With a per-value zone among the arguments: as they are (the engine casts those with one
    /// zone to the per-value form before DataFusion's coercion, which cannot).
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        if args.iter().any(|t| zoned_unit(t).is_some()) {
            return Ok(args.to_vec());
        }
        let args: Vec<FieldRef> = args
            .iter()
            .map(|t| Arc::new(Field::new("x", t.clone(), true)))
            .collect();
        Ok(fields_with_udf(&args, self.inner.as_ref())?
            .iter()
            .map(|f| f.data_type().clone())
            .collect())
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        self.inner.return_type(args)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.inner.invoke_with_args(args)
    }

    fn simplify(
        &self,
        args: Vec<datafusion::logical_expr::Expr>,
        info: &datafusion::logical_expr::simplify::SimplifyContext,
    ) -> Result<datafusion::logical_expr::simplify::ExprSimplifyResult> {
        self.inner.inner().simplify(args, info)
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn conditional_arguments<'a>(
        &self,
        args: &'a [datafusion::logical_expr::Expr],
    ) -> Option<(
        Vec<&'a datafusion::logical_expr::Expr>,
        Vec<&'a datafusion::logical_expr::Expr>,
    )> {
        self.inner.inner().conditional_arguments(args)
    }
}
