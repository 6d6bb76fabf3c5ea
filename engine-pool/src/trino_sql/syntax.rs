//! Builders of sqlparser's syntax tree that the statement rewrites share (rewriter.rs, clauses.rs,
//! functions.rs, literals.rs, using_joins.rs). It sits below all of them, so that none of them
//! imports another for a helper.

use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments, Ident, ObjectName,
    ObjectNamePart,
};

/// The call `name(args…)`: a plain name, positional arguments, no clauses.
pub(super) fn call(name: &str, args: Vec<ast::Expr>) -> ast::Expr {
    ast::Expr::Function(ast::Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trino_sql::testing::expr;

    #[test]
    fn a_call_is_a_plain_positional_call() {
        let built = call("coalesce", vec![expr("a.k"), expr("'x'")]);
        assert_eq!(built.to_string(), "coalesce(a.k, 'x')");
        // It reads back as the same tree: nothing the parser would not give.
        assert_eq!(built, expr("coalesce(a.k, 'x')"));
        assert_eq!(call("now", vec![]).to_string(), "now()");
    }
}
