//! Trino's array functions (`functions/array`) where DataFusion's differ: `array_remove` removes
//! every match (DataFusion's only the first), `contains` is DataFusion's `array_has`.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::logical_expr::ScalarUDF;

use crate::udf::Delegate;

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Delegate::new(
            "array_remove",
            |_: &[DataType]| datafusion::functions_nested::remove::array_remove_all_udf(),
            false,
        )
        .udf(),
        Delegate::new(
            "contains",
            |_: &[DataType]| datafusion::functions_nested::array_has::array_has_udf(),
            false,
        )
        .udf(),
    ]
}
