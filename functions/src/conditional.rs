//! Trino's conditional expressions (`functions/conditional`) that DataFusion lacks: `if(c, a[, b])`,
//! planned as the `CASE` it means, so only the chosen branch is evaluated.

use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::DataType;
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::expr::Case;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::type_coercion::other::get_coerce_type_for_case_expression;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::udf::unexpected;

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![Arc::new(ScalarUDF::new_from_impl(If::new()))]
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct If {
    signature: Signature,
}

impl If {
    fn new() -> Self {
        Self {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

const EXPECTED: &[&str] = &["boolean, E", "boolean, E, E"];

impl ScalarUDFImpl for If {
    fn name(&self) -> &str {
        "if"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let (cond, branches) = match args {
            [c, rest @ ..] if (1..=2).contains(&rest.len()) => (c, rest),
            _ => return unexpected("if", args, EXPECTED),
        };
        if !matches!(cond, DataType::Boolean | DataType::Null) {
            return plan_err!(
                "IF condition must evaluate to a boolean (actual: {})",
                crate::udf::type_name(cond)
            );
        }
        let Some(common) = get_coerce_type_for_case_expression(branches, None) else {
            return plan_err!(
                "IF branches must be the same type or coercible to a common type: {}",
                branches
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        let mut out = vec![DataType::Boolean];
        out.extend(branches.iter().map(|_| common.clone()));
        Ok(out)
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[1].clone())
    }

    fn simplify(&self, args: Vec<Expr>, _info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        let mut args = args.into_iter();
        let (Some(cond), Some(then)) = (args.next(), args.next()) else {
            return plan_err!("if takes two or three arguments");
        };
        let otherwise = args.next().map(Box::new);
        Ok(ExprSimplifyResult::Simplified(Expr::Case(Case::new(
            None,
            vec![(Box::new(cond), Box::new(then))],
            otherwise,
        ))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        // Reached only when the optimizer did not run: both branches are already evaluated.
        let rows = args.number_rows;
        let mut values = args.args.into_iter();
        let (Some(cond), Some(then)) = (values.next(), values.next()) else {
            return plan_err!("if takes two or three arguments");
        };
        let cond = cond.into_array(rows)?;
        let cond = arrow::array::AsArray::as_boolean(&cond).clone();
        let then = then.into_array(rows)?;
        let otherwise = match values.next() {
            Some(v) => v.into_array(rows)?,
            None => arrow::array::new_null_array(then.data_type(), rows),
        };
        // A NULL condition chooses the ELSE branch, as CASE does.
        let cond = if cond.null_count() > 0 {
            arrow::compute::prep_null_mask_filter(&cond)
        } else {
            cond
        };
        Ok(ColumnarValue::Array(arrow::compute::kernels::zip::zip(
            &cond, &then, &otherwise,
        )?))
    }
}
