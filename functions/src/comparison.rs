//! Trino's comparison functions (`functions/comparison`): `greatest` and `least` are NULL when any
//! argument is NULL (DataFusion's skip NULLs).

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::logical_expr::ScalarUDF;

use crate::udf::Delegate;

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Delegate::new(
            "greatest",
            |_: &[DataType]| datafusion::functions::core::greatest(),
            true,
        )
        .udf(),
        Delegate::new(
            "least",
            |_: &[DataType]| datafusion::functions::core::least(),
            true,
        )
        .udf(),
    ]
}
