//! Table procedures, in Trino's words and in Spark's: `ALTER TABLE t EXECUTE name[(arg => value,
//! …)] [WHERE condition]` and `CALL [catalog.]system.name(table => 'schema.t', arg => value, …)`.
//! Both parse to one [`ProcedureCall`]; write/maintain.rs runs it.

use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName,
    ObjectNamePart, Value,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;
use sqe_sessions::{SqeError, SqeResult};

use crate::names::normalize_ident;

/// A procedure called on one table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProcedureCall {
    pub table: ObjectName,
    /// The procedure's name, in lower case.
    pub name: String,
    /// The arguments but the table, as written: by name (lower case) or by position.
    pub args: Vec<(Option<String>, Expr)>,
    /// Trino's `WHERE` of `EXECUTE optimize`.
    pub filter: Option<Expr>,
}

const SYNTAX: &str =
    "expected ALTER TABLE t EXECUTE procedure[(name => value, …)] [WHERE condition]";

/// `ALTER TABLE t EXECUTE …`, or None when the ALTER TABLE is another one.
pub(crate) fn parse_alter_execute(sql: &str) -> Option<SqeResult<ProcedureCall>> {
    let dialect = super::dialect::SqeDialect::default();
    let mut p = Parser::new(&dialect).try_with_sql(sql).ok()?;
    if !p.parse_keywords(&[Keyword::ALTER, Keyword::TABLE]) {
        return None;
    }
    let table = p.parse_object_name(false).ok()?;
    if !p.parse_keyword(Keyword::EXECUTE) {
        return None;
    }
    Some(parse_execute(&mut p, table))
}

fn parse_execute(p: &mut Parser, table: ObjectName) -> SqeResult<ProcedureCall> {
    let syntax = |e: ParserError| SqeError::invalid(format!("syntax error: {e}; {SYNTAX}"));
    let name = normalize_ident(&p.parse_identifier().map_err(syntax)?);
    let mut args = Vec::new();
    if p.consume_token(&Token::LParen) && !p.consume_token(&Token::RParen) {
        loop {
            args.push(argument(p.parse_function_args().map_err(syntax)?)?);
            if p.consume_token(&Token::RParen) {
                break;
            }
            p.expect_token(&Token::Comma).map_err(syntax)?;
        }
    }
    let filter = match p.parse_keyword(Keyword::WHERE) {
        true => Some(p.parse_expr().map_err(syntax)?),
        false => None,
    };
    while p.consume_token(&Token::SemiColon) {}
    if p.peek_token().token != Token::EOF {
        return Err(SqeError::invalid(format!(
            "syntax error: unexpected {} after the procedure; {SYNTAX}",
            p.peek_token().token
        )));
    }
    Ok(ProcedureCall {
        table,
        name,
        args,
        filter,
    })
}

/// One argument: its name, if given one, and its value.
fn argument(arg: FunctionArg) -> SqeResult<(Option<String>, Expr)> {
    let value = |arg: FunctionArgExpr| match arg {
        FunctionArgExpr::Expr(e) => Ok(e),
        other => Err(SqeError::invalid(format!(
            "a procedure's argument is a value, not {other}"
        ))),
    };
    match arg {
        FunctionArg::Named { name, arg, .. }
        | FunctionArg::ExprNamed {
            name: Expr::Identifier(name),
            arg,
            ..
        } => Ok((Some(normalize_ident(&name)), value(arg)?)),
        FunctionArg::Unnamed(arg) => Ok((None, value(arg)?)),
        other => Err(SqeError::invalid(format!(
            "a procedure's argument is `name => value` or a value, not {other}"
        ))),
    }
}

/// Spark's `CALL [catalog.]system.name(table => 'schema.t', …)`: the table argument (by name, or
/// the first by position) names the table, in the catalog the call names.
pub(crate) fn from_call(function: Function) -> SqeResult<ProcedureCall> {
    let parts: Vec<String> = function
        .name
        .0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => normalize_ident(ident),
            other => other.to_string(),
        })
        .collect();
    let (catalog, name) = match parts.as_slice() {
        [system, name] if system == "system" => (None, name.clone()),
        [catalog, system, name] if system == "system" => (Some(catalog.clone()), name.clone()),
        _ => {
            return Err(SqeError::invalid(format!(
                "unknown procedure {}: SQE's procedures are [catalog.]system.name (expire_snapshots, remove_orphan_files, rewrite_data_files, rewrite_manifests, rollback_to_snapshot)",
                function.name
            )));
        }
    };
    let list = match function.args {
        FunctionArguments::List(list) => list.args,
        FunctionArguments::None => Vec::new(),
        FunctionArguments::Subquery(_) => {
            return Err(SqeError::invalid("a procedure's arguments are values"));
        }
    };
    let mut args = list
        .into_iter()
        .map(argument)
        .collect::<SqeResult<Vec<_>>>()?;
    let at = args
        .iter()
        .position(|(n, _)| n.as_deref() == Some("table"))
        .or_else(|| args.first().filter(|(n, _)| n.is_none()).map(|_| 0));
    let Some(at) = at else {
        return Err(SqeError::invalid(format!(
            "CALL system.{name} needs the table: table => 'schema.table'"
        )));
    };
    let (_, table) = args.remove(at);
    let table = match table {
        Expr::Value(v) => match v.value {
            Value::SingleQuotedString(s) => s,
            other => {
                return Err(SqeError::invalid(format!(
                    "the table argument is a string such as 'schema.table', not {other}"
                )));
            }
        },
        other => {
            return Err(SqeError::invalid(format!(
                "the table argument is a string such as 'schema.table', not {other}"
            )));
        }
    };
    let dialect = super::dialect::SqeDialect::default();
    let mut table = Parser::new(&dialect)
        .try_with_sql(&table)
        .and_then(|mut p| p.parse_object_name(false))
        .map_err(|e| SqeError::invalid(format!("'{table}' is not a table name: {e}")))?;
    if let Some(catalog) = catalog
        && table.0.len() < 3
    {
        table
            .0
            .insert(0, ObjectNamePart::Identifier(Ident::new(catalog)));
    }
    Ok(ProcedureCall {
        table,
        name: match name.as_str() {
            // Spark's names for what Trino calls optimize and optimize_manifests.
            "rewrite_data_files" => "optimize".to_string(),
            "rewrite_manifests" => "optimize_manifests".to_string(),
            _ => name,
        },
        args,
        filter: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(sql: &str) -> ProcedureCall {
        match parse_alter_execute(sql) {
            Some(Ok(call)) => call,
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn trino_spellings() {
        let c = call("ALTER TABLE s.t EXECUTE optimize");
        assert_eq!(
            (c.table.to_string(), c.name.as_str()),
            ("s.t".into(), "optimize")
        );
        assert!(c.args.is_empty() && c.filter.is_none());
        let c = call("alter table t execute OPTIMIZE(file_size_threshold => '10MB') WHERE p = 1;");
        assert_eq!(c.args.len(), 1);
        assert_eq!(c.args[0].0.as_deref(), Some("file_size_threshold"));
        assert_eq!(c.filter.map(|f| f.to_string()).as_deref(), Some("p = 1"));
        let c = call("ALTER TABLE t EXECUTE rollback_to_snapshot(123)");
        assert_eq!(
            c.args,
            vec![(None, Expr::value(Value::Number("123".into(), false)))]
        );
        assert!(parse_alter_execute("ALTER TABLE t ADD COLUMN c int").is_none());
        let bad = parse_alter_execute("ALTER TABLE t EXECUTE optimize extra");
        assert!(matches!(bad, Some(Err(e)) if e.message().contains("unexpected extra")));
    }

    #[test]
    fn spark_spellings() {
        let parse = |sql: &str| {
            let statement = Parser::parse_sql(&super::super::dialect::SqeDialect::default(), sql)
                .unwrap_or_else(|e| panic!("{e}"))
                .remove(0);
            let datafusion::sql::sqlparser::ast::Statement::Call(f) = statement else {
                panic!("{sql}");
            };
            from_call(f)
        };
        let c = parse("CALL lake.system.expire_snapshots(table => 's.t', retain_last => 2)")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (c.table.to_string(), c.name.as_str()),
            ("lake.s.t".into(), "expire_snapshots")
        );
        assert_eq!(c.args.len(), 1);
        let c = parse("CALL system.rewrite_data_files('t')").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (c.table.to_string(), c.name.as_str()),
            ("t".into(), "optimize")
        );
        let e = parse("CALL system.expire_snapshots(retain_last => 1)").err();
        assert!(e.is_some_and(|e| e.message().contains("needs the table")));
        assert!(parse("CALL nope(1)").is_err());
    }
}
