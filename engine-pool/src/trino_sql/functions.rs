//! Trino's function calls that DataFusion has as something else, for the statement rewriter
//! (rewriter.rs): calls that are an expression of DataFusion's (`mod`, `date`, `try`,
//! `array_sort`, `reduce_agg`) and aggregates DataFusion (or SQE) has under other names.

use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, ObjectNamePart, Value,
};

use super::syntax::call;

/// `reduce_agg(v, initial, input, combine) [FILTER (WHERE c)]`: `reduce` over the group's
/// non-NULL values (those passing `c`), folded in one pass: the combine function merges partial
/// states, and a single fold has none.
pub(super) fn reduce_agg(f: &ast::Function) -> Option<ast::Expr> {
    let (name, args) = plain_call(f)?;
    if !name.eq_ignore_ascii_case("reduce_agg") || f.over.is_some() {
        return None;
    }
    let [
        v,
        initial,
        input @ ast::Expr::Lambda(_),
        ast::Expr::Lambda(_),
    ] = args.as_slice()
    else {
        return None;
    };
    let ast::Expr::Function(mut values) = call("array_agg", vec![v.clone()]) else {
        return None;
    };
    let present = ast::Expr::IsNotNull(Box::new(v.clone()));
    values.filter = Some(Box::new(match &f.filter {
        Some(c) => ast::Expr::BinaryOp {
            left: Box::new(present),
            op: ast::BinaryOperator::And,
            right: Box::new(ast::Expr::Nested(c.clone())),
        },
        None => present,
    }));
    let state = Ident::new("__sqe_state");
    let output = lambda(state.clone(), ast::Expr::Identifier(state));
    Some(call(
        "reduce",
        vec![
            ast::Expr::Function(values),
            initial.clone(),
            input.clone(),
            output,
        ],
    ))
}

/// A call's name and its arguments, when it has a plain name, positional arguments and no
/// clauses inside its parentheses (its FILTER and OVER are the caller's to check).
fn plain_call(f: &ast::Function) -> Option<(&str, Vec<ast::Expr>)> {
    let [ObjectNamePart::Identifier(name)] = f.name.0.as_slice() else {
        return None;
    };
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if !list.clauses.is_empty() {
        return None;
    }
    let args = list
        .args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    Some((name.value.as_str(), args))
}

/// The lambda `param -> body`.
fn lambda(param: Ident, body: ast::Expr) -> ast::Expr {
    ast::Expr::Lambda(ast::LambdaFunction {
        params: ast::OneOrManyWithParens::One(ast::LambdaFunctionParameter {
            name: param,
            data_type: None,
        }),
        body: Box::new(body),
        syntax: ast::LambdaSyntax::Arrow,
    })
}

/// Trino's functions that are an expression of DataFusion's: `mod(n, m)` is `n % m` (the
/// remainder has the dividend's sign in both), `date(x)` is `CAST(x AS DATE)`.
pub(super) fn function_as_expression(f: &ast::Function) -> Option<ast::Expr> {
    let (name, args) = plain_call(f)?;
    if f.over.is_some() || f.filter.is_some() {
        return None;
    }
    match (name.to_lowercase().as_str(), args.as_slice()) {
        ("mod", [n, m]) => Some(ast::Expr::Nested(Box::new(ast::Expr::BinaryOp {
            left: Box::new(ast::Expr::Nested(Box::new(n.clone()))),
            op: ast::BinaryOperator::Modulo,
            right: Box::new(ast::Expr::Nested(Box::new(m.clone()))),
        }))),
        // array_sort(a, comparator): the higher-order form (the one-argument form is a scalar
        // function of the same name, which DataFusion would pick).
        ("array_sort", [a, comparator @ ast::Expr::Lambda(_)]) => {
            Some(call("sqe_array_sort", vec![a.clone(), comparator.clone()]))
        }
        // Trino sorts an array's NULLs last (DataFusion's default puts them first).
        ("array_sort", [a]) => Some(call(
            "array_sort",
            vec![
                a.clone(),
                ast::Expr::value(Value::SingleQuotedString("ASC".into())),
                ast::Expr::value(Value::SingleQuotedString("NULLS LAST".into())),
            ],
        )),
        // TRY(x): `x` as a lambda's body, which `sqe_try` evaluates, catching its errors.
        ("try", [x]) => Some(call(
            "sqe_try",
            vec![
                ast::Expr::value(Value::Number("0".into(), false)),
                lambda(Ident::new("__sqe_try"), x.clone()),
            ],
        )),
        ("date", [x]) => Some(ast::Expr::Cast {
            kind: ast::CastKind::Cast,
            expr: Box::new(x.clone()),
            data_type: ast::DataType::Date,
            array: false,
            format: None,
        }),
        _ => None,
    }
}

/// Trino's aggregates that DataFusion (or SQE) has under other names: `approx_percentile` is
/// `approx_percentile_cont` (`…_with_weight` with a weight); `listagg(x, sep) WITHIN GROUP
/// (ORDER BY …)` is `string_agg(x, sep ORDER BY …)`; `variance` is `var_samp`, `every`
/// `bool_and`, `any_value` `arbitrary`.
pub(super) fn rename_function(f: &mut ast::Function) {
    let [ObjectNamePart::Identifier(name)] = f.name.0.as_slice() else {
        return;
    };
    let arity = match &f.args {
        FunctionArguments::List(list) => list.args.len(),
        _ => 0,
    };
    let renamed = match (name.value.to_lowercase().as_str(), arity) {
        ("approx_percentile", 2) => "approx_percentile_cont",
        ("approx_percentile", 3) => "approx_percentile_cont_with_weight",
        ("listagg", 1 | 2) => "string_agg",
        ("variance", 1) => "var_samp",
        ("every", 1) => "bool_and",
        ("any_value", 1) => "arbitrary",
        _ => return,
    };
    if renamed == "string_agg"
        && let FunctionArguments::List(list) = &mut f.args
    {
        if list.args.len() == 1 {
            let empty = ast::Expr::value(Value::SingleQuotedString(String::new()));
            list.args
                .push(FunctionArg::Unnamed(FunctionArgExpr::Expr(empty)));
        }
        let order = std::mem::take(&mut f.within_group);
        if !order.is_empty() {
            list.clauses
                .push(ast::FunctionArgumentClause::OrderBy(order));
        }
    }
    f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(renamed))]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trino_sql::testing::function;

    fn as_expression(sql: &str) -> Option<String> {
        let f = function(sql);
        reduce_agg(&f)
            .or_else(|| function_as_expression(&f))
            .map(|e| e.to_string())
    }

    fn renamed(sql: &str) -> String {
        let mut f = function(sql);
        rename_function(&mut f);
        f.to_string()
    }

    #[test]
    fn calls_that_are_expressions() {
        assert_eq!(
            as_expression("mod(a, b + 1)").as_deref(),
            Some("((a) % (b + 1))")
        );
        assert_eq!(as_expression("DATE(x)").as_deref(), Some("CAST(x AS DATE)"));
        assert_eq!(
            as_expression("try(CAST(x AS INTEGER))").as_deref(),
            Some("sqe_try(0, __sqe_try -> CAST(x AS INTEGER))")
        );
        assert_eq!(
            as_expression("array_sort(a)").as_deref(),
            Some("array_sort(a, 'ASC', 'NULLS LAST')")
        );
        assert_eq!(
            as_expression("array_sort(a, (x, y) -> y - x)").as_deref(),
            Some("sqe_array_sort(a, (x, y) -> y - x)")
        );
        // Another arity, a window or a filter: the function it names, as it is.
        assert_eq!(as_expression("mod(a)"), None);
        assert_eq!(as_expression("mod(a, b) OVER ()"), None);
        assert_eq!(as_expression("date(x) FILTER (WHERE x > 0)"), None);
        assert_eq!(as_expression("array_sort(a, 'DESC')"), None);
        assert_eq!(as_expression("s.mod(a, b)"), None);
    }

    #[test]
    fn reduce_agg_folds_the_groups_values() {
        assert_eq!(
            as_expression("reduce_agg(v, 0, (s, x) -> s + x, (s, t) -> s + t)").as_deref(),
            Some(
                "reduce(array_agg(v) FILTER (WHERE v IS NOT NULL), 0, (s, x) -> s + x, __sqe_state -> __sqe_state)"
            )
        );
        assert_eq!(
            as_expression(
                "reduce_agg(v, 0, (s, x) -> s + x, (s, t) -> s + t) FILTER (WHERE k = 1)"
            )
            .as_deref(),
            Some(
                "reduce(array_agg(v) FILTER (WHERE v IS NOT NULL AND (k = 1)), 0, (s, x) -> s + x, __sqe_state -> __sqe_state)"
            )
        );
        // Its functions must be lambdas; a window is not an aggregate's fold.
        assert_eq!(as_expression("reduce_agg(v, 0, f, g)"), None);
        assert_eq!(
            as_expression("reduce_agg(v, 0, (s, x) -> s + x, (s, t) -> s + t) OVER ()"),
            None
        );
    }

    #[test]
    fn aggregates_under_other_names() {
        assert_eq!(
            renamed("approx_percentile(x, 0.5)"),
            "approx_percentile_cont(x, 0.5)"
        );
        assert_eq!(
            renamed("approx_percentile(x, w, 0.5)"),
            "approx_percentile_cont_with_weight(x, w, 0.5)"
        );
        assert_eq!(
            renamed("listagg(x, ',') WITHIN GROUP (ORDER BY y DESC)"),
            "string_agg(x, ',' ORDER BY y DESC)"
        );
        assert_eq!(renamed("LISTAGG(x)"), "string_agg(x, '')");
        assert_eq!(renamed("variance(x)"), "var_samp(x)");
        assert_eq!(renamed("every(b)"), "bool_and(b)");
        assert_eq!(renamed("any_value(x)"), "arbitrary(x)");
        // Other arities and qualified names are someone else's functions.
        assert_eq!(renamed("variance(x, y)"), "variance(x, y)");
        assert_eq!(renamed("approx_percentile(x)"), "approx_percentile(x)");
        assert_eq!(renamed("s.every(b)"), "s.every(b)");
    }
}
