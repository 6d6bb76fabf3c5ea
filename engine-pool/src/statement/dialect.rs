//! The SQL dialect SQE parses statements with: sqlparser's generic dialect, Trino's lambdas
//! (`x -> x + 1`, `(s, x) -> s + x`), which the generic dialect reads as the JSON `->` operator,
//! and Trino's `current_schema` without parentheses (a reserved word there, as `current_catalog`
//! and `current_user` are, which the generic dialect already reads as functions).
//! Every other choice is the generic dialect's (its overrides are forwarded one by one, and the
//! parser's "is this the generic dialect" checks see the generic dialect).

use std::any::TypeId;

use datafusion::sql::sqlparser::ast::{Expr, Function, FunctionArguments, Ident, ObjectName};
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect};
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

#[derive(Debug, Default)]
pub(crate) struct SqeDialect(GenericDialect);

impl Dialect for SqeDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<GenericDialect>()
    }

    fn supports_lambda_functions(&self) -> bool {
        true
    }

    /// `current_schema` (unquoted, without parentheses) is the function of that name, as in Trino;
    /// `current_schema()` is left to the parser.
    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        let [word, next] = parser.peek_tokens::<2>();
        let Token::Word(w) = word else {
            return None;
        };
        if w.quote_style.is_some()
            || !w.value.eq_ignore_ascii_case("current_schema")
            || next == Token::LParen
            || next == Token::Period
        {
            return None;
        }
        parser.next_token();
        Some(Ok(Expr::Function(Function {
            name: ObjectName::from(vec![Ident::new(w.value)]),
            uses_odbc_syntax: false,
            parameters: FunctionArguments::None,
            args: FunctionArguments::None,
            null_treatment: None,
            filter: None,
            over: None,
            within_group: vec![],
        })))
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.0.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        self.0.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.0.is_identifier_part(ch)
    }

    fn supports_unicode_string_literal(&self) -> bool {
        self.0.supports_unicode_string_literal()
    }

    fn supports_partition_by_after_order_by(&self) -> bool {
        self.0.supports_partition_by_after_order_by()
    }

    fn supports_array_join_syntax(&self) -> bool {
        self.0.supports_array_join_syntax()
    }

    fn supports_group_by_expr(&self) -> bool {
        self.0.supports_group_by_expr()
    }

    fn supports_group_by_with_modifier(&self) -> bool {
        self.0.supports_group_by_with_modifier()
    }

    fn supports_left_associative_joins_without_parens(&self) -> bool {
        self.0.supports_left_associative_joins_without_parens()
    }

    fn supports_connect_by(&self) -> bool {
        self.0.supports_connect_by()
    }

    fn supports_match_recognize(&self) -> bool {
        self.0.supports_match_recognize()
    }

    fn supports_pipe_operator(&self) -> bool {
        self.0.supports_pipe_operator()
    }

    fn supports_start_transaction_modifier(&self) -> bool {
        self.0.supports_start_transaction_modifier()
    }

    fn supports_window_function_null_treatment_arg(&self) -> bool {
        self.0.supports_window_function_null_treatment_arg()
    }

    fn supports_dictionary_syntax(&self) -> bool {
        self.0.supports_dictionary_syntax()
    }

    fn supports_window_clause_named_window_reference(&self) -> bool {
        self.0.supports_window_clause_named_window_reference()
    }

    fn supports_parenthesized_set_variables(&self) -> bool {
        self.0.supports_parenthesized_set_variables()
    }

    fn supports_select_wildcard_except(&self) -> bool {
        self.0.supports_select_wildcard_except()
    }

    fn support_map_literal_syntax(&self) -> bool {
        self.0.support_map_literal_syntax()
    }

    fn allow_extract_custom(&self) -> bool {
        self.0.allow_extract_custom()
    }

    fn allow_extract_single_quotes(&self) -> bool {
        self.0.allow_extract_single_quotes()
    }

    fn supports_extract_comma_syntax(&self) -> bool {
        self.0.supports_extract_comma_syntax()
    }

    fn supports_create_view_comment_syntax(&self) -> bool {
        self.0.supports_create_view_comment_syntax()
    }

    fn supports_parens_around_table_factor(&self) -> bool {
        self.0.supports_parens_around_table_factor()
    }

    fn supports_values_as_table_factor(&self) -> bool {
        self.0.supports_values_as_table_factor()
    }

    fn supports_create_index_with_clause(&self) -> bool {
        self.0.supports_create_index_with_clause()
    }

    fn supports_explain_with_utility_options(&self) -> bool {
        self.0.supports_explain_with_utility_options()
    }

    fn supports_limit_comma(&self) -> bool {
        self.0.supports_limit_comma()
    }

    fn supports_update_order_by(&self) -> bool {
        self.0.supports_update_order_by()
    }

    fn supports_from_first_select(&self) -> bool {
        self.0.supports_from_first_select()
    }

    fn supports_projection_trailing_commas(&self) -> bool {
        self.0.supports_projection_trailing_commas()
    }

    fn supports_asc_desc_in_column_definition(&self) -> bool {
        self.0.supports_asc_desc_in_column_definition()
    }

    fn supports_try_convert(&self) -> bool {
        self.0.supports_try_convert()
    }

    fn supports_bitwise_shift_operators(&self) -> bool {
        self.0.supports_bitwise_shift_operators()
    }

    fn supports_comment_on(&self) -> bool {
        self.0.supports_comment_on()
    }

    fn supports_load_extension(&self) -> bool {
        self.0.supports_load_extension()
    }

    fn supports_named_fn_args_with_assignment_operator(&self) -> bool {
        self.0.supports_named_fn_args_with_assignment_operator()
    }

    fn supports_struct_literal(&self) -> bool {
        self.0.supports_struct_literal()
    }

    fn supports_empty_projections(&self) -> bool {
        self.0.supports_empty_projections()
    }

    fn supports_nested_comments(&self) -> bool {
        self.0.supports_nested_comments()
    }

    fn supports_multiline_comment_hints(&self) -> bool {
        self.0.supports_multiline_comment_hints()
    }

    fn supports_user_host_grantee(&self) -> bool {
        self.0.supports_user_host_grantee()
    }

    fn supports_string_escape_constant(&self) -> bool {
        self.0.supports_string_escape_constant()
    }

    fn supports_array_typedef_with_brackets(&self) -> bool {
        self.0.supports_array_typedef_with_brackets()
    }

    fn supports_match_against(&self) -> bool {
        self.0.supports_match_against()
    }

    fn supports_set_names(&self) -> bool {
        self.0.supports_set_names()
    }

    fn supports_comma_separated_set_assignments(&self) -> bool {
        self.0.supports_comma_separated_set_assignments()
    }

    fn supports_filter_during_aggregation(&self) -> bool {
        self.0.supports_filter_during_aggregation()
    }

    fn supports_select_wildcard_exclude(&self) -> bool {
        self.0.supports_select_wildcard_exclude()
    }

    fn supports_data_type_signed_suffix(&self) -> bool {
        self.0.supports_data_type_signed_suffix()
    }

    fn supports_interval_options(&self) -> bool {
        self.0.supports_interval_options()
    }

    fn supports_quote_delimited_string(&self) -> bool {
        self.0.supports_quote_delimited_string()
    }

    fn supports_select_wildcard_replace(&self) -> bool {
        self.0.supports_select_wildcard_replace()
    }

    fn supports_select_wildcard_ilike(&self) -> bool {
        self.0.supports_select_wildcard_ilike()
    }

    fn supports_select_wildcard_rename(&self) -> bool {
        self.0.supports_select_wildcard_rename()
    }

    fn supports_optimize_table(&self) -> bool {
        self.0.supports_optimize_table()
    }

    fn supports_install(&self) -> bool {
        self.0.supports_install()
    }

    fn supports_detach(&self) -> bool {
        self.0.supports_detach()
    }

    fn supports_prewhere(&self) -> bool {
        self.0.supports_prewhere()
    }

    fn supports_with_fill(&self) -> bool {
        self.0.supports_with_fill()
    }

    fn supports_limit_by(&self) -> bool {
        self.0.supports_limit_by()
    }

    fn supports_interpolate(&self) -> bool {
        self.0.supports_interpolate()
    }

    fn supports_settings(&self) -> bool {
        self.0.supports_settings()
    }

    fn supports_select_format(&self) -> bool {
        self.0.supports_select_format()
    }

    fn supports_comment_optimizer_hint(&self) -> bool {
        self.0.supports_comment_optimizer_hint()
    }

    fn supports_constraint_keyword_without_name(&self) -> bool {
        self.0.supports_constraint_keyword_without_name()
    }

    fn supports_key_column_option(&self) -> bool {
        self.0.supports_key_column_option()
    }

    fn supports_comma_separated_trim(&self) -> bool {
        self.0.supports_comma_separated_trim()
    }

    fn supports_cte_without_as(&self) -> bool {
        self.0.supports_cte_without_as()
    }

    fn supports_select_item_multi_column_alias(&self) -> bool {
        self.0.supports_select_item_multi_column_alias()
    }

    fn supports_xml_expressions(&self) -> bool {
        self.0.supports_xml_expressions()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::SqeDialect;

    #[test]
    fn parses_as_the_generic_dialect_does() {
        for sql in [
            "SELECT a, count(*) FROM t AS x JOIN u USING (id) WHERE a LIKE 'b%' GROUP BY a HAVING count(*) > 1 ORDER BY 2 DESC LIMIT 3",
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
            "SELECT CAST(x AS decimal(10, 2)), ARRAY[1, 2][1], x::int FROM \"q\".\"t$snapshots\"",
            "INSERT INTO t (a, b) SELECT 1, 'x'",
            "CREATE TABLE t (a bigint, b varchar) WITH (format = 'PARQUET')",
        ] {
            let generic = Parser::parse_sql(&GenericDialect {}, sql).map(|s| format!("{s:?}"));
            let ours = Parser::parse_sql(&SqeDialect::default(), sql).map(|s| format!("{s:?}"));
            assert_eq!(ours.ok(), generic.ok(), "{sql}");
        }
    }

    #[test]
    fn current_schema_needs_no_parentheses() {
        let text = |sql: &str| {
            Parser::parse_sql(&SqeDialect::default(), sql)
                .map(|s| format!("{:?}", s[0]))
                .unwrap_or_else(|e| e.to_string())
        };
        let bare = text("SELECT current_schema");
        assert!(bare.contains("Function(Function"), "{bare}");
        assert!(bare.contains("args: None"), "{bare}");
        assert!(text("SELECT current_schema()").contains("args: List"));
        // Quoted, or qualified, it is a column's name.
        assert!(text("SELECT \"current_schema\" FROM t").contains("Identifier"));
        assert!(text("SELECT current_schema.x FROM t").contains("CompoundIdentifier"));
    }

    #[test]
    fn parses_lambdas() {
        let parsed = Parser::parse_sql(
            &SqeDialect::default(),
            "SELECT transform(a, x -> x + 1), reduce(a, 0, (s, x) -> s + x, s -> s)",
        );
        let text = parsed
            .map(|s| s[0].to_string())
            .unwrap_or_else(|e| e.to_string());
        assert_eq!(
            text,
            "SELECT transform(a, x -> x + 1), reduce(a, 0, (s, x) -> s + x, s -> s)"
        );
    }
}
