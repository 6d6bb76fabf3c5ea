//! Trino's functions on DataFusion, one module per section of Trino's function docs: what DataFusion
//! lacks, and Trino's behaviour where DataFusion's function of the same name differs (those are
//! registered over DataFusion's). Every function here is SQE's own code; where one stands on
//! DataFusion's (`concat`, `greatest`, `reverse` of arrays, `array_remove`), the module says so.

mod aggregate;
mod arithmetic;
mod array;
mod binary;
mod bitwise;
mod comparison;
mod conditional;
mod conversion;
mod datetime;
mod java_format;
mod json;
mod lambda;
mod map;
mod math;
mod multiset;
mod regexp;
mod spooky;
mod string;
mod timezone;
mod udf;
mod url;
mod zoned;

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

pub use arithmetic::{
    IntegerOperator, integer_operator, is_integer_operator, named_integer_operator,
};
pub use datetime::{
    extract_function, interval_elapsed, interval_scaled, interval_text, timestamp_text,
    to_milliseconds,
};
pub use json::from_json;
pub use lambda::{opaque, use_every_lambda_parameter};
pub use timezone::{cast_timestamp, read_timestamp, with_timezone, zone_name};
pub use udf::{JSON_EXTENSION, is_json, type_name};
pub use zoned::{INSTANT, ZONE, zoned_type, zoned_unit, zoned_value};

/// Every scalar function of this crate.
pub fn scalar_functions() -> Vec<Arc<ScalarUDF>> {
    let mut out = Vec::new();
    out.extend(conditional::functions());
    out.extend(conversion::functions());
    out.extend(comparison::functions());
    out.extend(string::functions());
    out.extend(regexp::functions());
    out.extend(datetime::functions());
    out.extend(timezone::functions());
    out.extend(array::functions());
    out.extend(map::functions());
    out.extend(json::functions());
    out.extend(math::functions());
    out.extend(binary::functions());
    out.extend(bitwise::functions());
    out.extend(url::functions());
    out.extend(multiset::functions());
    out.push(zoned::same_zone(datafusion::functions::core::coalesce()));
    out.push(zoned::zoned_value());
    out.into_iter()
        .map(|f| {
            if READ_ZONES.contains(&f.name()) {
                zoned::each_zone(f)
            } else {
                f
            }
        })
        .collect()
}

/// The functions that read a timestamp with a time zone, which take a zone per value too
/// (zoned.rs).
const READ_ZONES: &[&str] = &[
    "date_add",
    "date_diff",
    "date_trunc",
    "last_day_of_month",
    "to_unixtime",
    "date_format",
    "format_datetime",
    "to_iso8601",
    "year",
    "quarter",
    "month",
    "week",
    "day",
    "day_of_week",
    "day_of_year",
    "year_of_week",
    "hour",
    "minute",
    "second",
    "millisecond",
    "with_timezone",
    "at_timezone",
    "timezone",
    "timezone_hour",
    "timezone_minute",
];

/// Every aggregate function of this crate.
pub fn aggregate_functions() -> Vec<Arc<AggregateUDF>> {
    aggregate::functions()
}

/// Registers every function, over DataFusion's of the same name.
pub fn register(registry: &mut dyn FunctionRegistry) -> Result<()> {
    // A function of DataFusion's that one of ours replaces goes with all its names (DataFusion's
    // `to_char` goes, as `date_format` is one of its names): a state rebuilt from this one
    // registers every function it holds again, and a name left to DataFusion's would win back.
    for f in scalar_functions() {
        for name in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
            if let Some(old) = registry.deregister_udf(name)? {
                registry.deregister_udf(old.name())?;
            }
        }
        registry.register_udf(f)?;
    }
    // DataFusion's functions taking lambdas, under Trino's names too.
    for f in datafusion::functions_nested::all_default_higher_order_functions() {
        let alias = match f.name() {
            "array_transform" => "transform",
            "array_filter" => "filter",
            _ => continue,
        };
        registry
            .register_higher_order_function(Arc::new(f.as_ref().clone().with_aliases([alias])))?;
    }
    for f in lambda::functions() {
        registry.register_higher_order_function(f)?;
    }
    for f in aggregate_functions() {
        for name in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
            if let Some(old) = registry.deregister_udaf(name)? {
                registry.deregister_udaf(old.name())?;
            }
        }
        registry.register_udaf(f)?;
    }
    Ok(())
}
