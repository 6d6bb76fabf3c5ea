//! One statement, parsed, as the engine runs it: [`parse`] takes the text through SQE's prepass
//! (Trino's time travel, bare paths in FROM, Spark's `PARTITIONED BY`), then to the parser of its
//! kind, and gives one [`SqeStatement`]:
//! - SQE's own statements, which sqlparser does not know (ATTACH, DETACH, SHOW FUNCTIONS, SHOW
//!   STATS, SHOW GRANTS, row filters, masks and tags): the parsers in own.rs and policies.rs;
//! - `COPY (query) TO 'file'`: DataFusion's parser (`DFParser`);
//! - `CREATE SECRET`: sqlparser with DuckDB's dialect, which spells it;
//! - everything else: sqlparser with SQE's dialect (dialect.rs), then Trino's rewrites.
//!
//! The engine runs a statement with one exhaustive match on its kind, and whether a statement only
//! reads is a method of it ([`SqeStatement::is_read_only`]), so that MCP's read-only gate cannot
//! miss a kind the engine runs.

pub mod columns;
pub mod dialect;
pub mod own;
pub mod policies;
pub mod prepass;
pub mod procedures;
pub mod refs;
pub mod words;
pub mod write_order;

use std::borrow::Cow;
use std::ops::ControlFlow;

use datafusion::sql::parser::{CopyToStatement, DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    Assignment, CreateTable, CreateView, Delete, Expr, FromTable, GrantObjects, Ident, Insert,
    Merge, ObjectName, Query, SecretOption, SetExpr, Statement, TableFactor, Truncate, Update,
    Visit, Visitor,
};
use datafusion::sql::sqlparser::dialect::{DuckDbDialect, GenericDialect};
use datafusion::sql::sqlparser::parser::Parser;
use sqe_sessions::{SqeError, SqeResult};

use crate::guard::check_depth;
use columns::ColumnStatement;
use own::{Attach, Detach};
use policies::{MaskAction, MaskStatement, RowFilterKind, RowFilterStatement};
use prepass::{Prepared, prepare};
use procedures::ProcedureCall;
use refs::RefStatement;
use words::{leading_words, one_statement};

/// A statement of SQE's, one of each kind the engine runs.
pub(crate) enum SqeStatement {
    /// A query or an EXPLAIN, planned by DataFusion.
    Query(Statement),
    /// `INSERT INTO t [(columns)] VALUES … | query`.
    Insert(Insert),
    /// `CREATE TABLE t [WITH (…)] AS query`.
    CreateTableAs(CreateTable),
    /// `TRUNCATE TABLE t` and `DELETE FROM t [WHERE …]`: the rows `filter` is true of go, every
    /// row without one. `verb` names the statement.
    RemoveRows {
        table: ObjectName,
        verb: &'static str,
        filter: Option<Expr>,
    },
    /// `UPDATE t SET c = v, … [WHERE …]`.
    UpdateRows {
        table: ObjectName,
        assignments: Vec<Assignment>,
        filter: Option<Expr>,
    },
    /// `MERGE INTO t USING … ON … WHEN …`.
    Merge(Merge),
    /// `CREATE [OR REPLACE] VIEW`, its query as written (before Trino's rewrites: a view keeps
    /// its SQL as its author wrote it).
    CreateView(CreateView),
    /// `COPY (query) TO 'file'`.
    Copy(CopyToStatement),
    /// `ATTACH 'uri' AS name (…)`.
    Attach(Attach),
    /// `DETACH name`.
    Detach(Detach),
    /// `SHOW FUNCTIONS [LIKE 'pattern']`.
    ShowFunctions { like: Option<String> },
    /// `SHOW STATS FOR table`: the table as written.
    ShowStats { table: String },
    /// `SHOW SECRETS`.
    ShowSecrets,
    /// `SHOW GRANTS [ON TABLE t | ON SCHEMA s]`.
    ShowGrants { on: Option<GrantObjects> },
    /// `SHOW SESSION`.
    ShowSession,
    /// `CREATE ROW FILTER`, `DROP ROW FILTER`, `SHOW ROW FILTERS`.
    RowFilter(RowFilterStatement),
    /// Column masks and tags: `ALTER TABLE … ALTER COLUMN … SET MASK | DROP MASK | SET TAG |
    /// UNSET TAG`, `ALTER TAG …`, `SHOW MASKS`, `SHOW TAGS`.
    Mask(MaskStatement),
    /// `GRANT`, `DENY`, `REVOKE` (privileges and roles), `CREATE ROLE`.
    Access(Statement),
    /// `CREATE [OR REPLACE] [PERSISTENT | TEMPORARY] SECRET …`, DuckDB's statement.
    CreateSecret(CreateSecret),
    /// `DROP [TEMPORARY] SECRET [IF EXISTS] name`.
    DropSecret { name: Ident, if_exists: bool },
    /// A table procedure: `ALTER TABLE t EXECUTE …` (Trino) or `CALL system.…` (Spark).
    Procedure(ProcedureCall),
    /// `ALTER TABLE t {CREATE | REPLACE | DROP} {BRANCH | TAG} …` (Spark's).
    Ref(RefStatement),
    /// A change to a field inside a `row(…)` column, or Spark's `ALTER COLUMN c COMMENT …`
    /// (columns.rs); the parser's own column changes come as `Ddl`.
    Column(ColumnStatement),
    /// What changes the catalogs' schemas, tables, views and roles: CREATE, DROP, ALTER TABLE; and
    /// any statement SQE does not run (refused by name).
    Ddl(Statement),
    /// SHOW CATALOGS, SCHEMAS, TABLES, COLUMNS; DESCRIBE; SHOW CREATE TABLE and VIEW.
    Show(Statement),
    /// `USE`, `SET SESSION`, `RESET SESSION`.
    Session(Statement),
}

/// The parts of a `CREATE SECRET` statement SQE uses.
pub(crate) struct CreateSecret {
    pub or_replace: bool,
    pub temporary: Option<bool>,
    pub if_not_exists: bool,
    pub name: Option<Ident>,
    pub storage_specifier: Option<Ident>,
    pub secret_type: Ident,
    pub options: Vec<SecretOption>,
}

/// A statement and what the prepass took out of its text (time travel clauses, paths, Spark's
/// partitioning), which the engine resolves while running it.
pub(crate) struct Parsed {
    pub statement: SqeStatement,
    pub prepared: Prepared,
}

/// Who the parse is for: the two say the same thing in different words where MCP's read-only
/// tool has always had words of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Run,
    ReadOnly,
}

/// Parses one statement of any kind SQE runs.
pub(crate) fn parse(sql: &str) -> SqeResult<Parsed> {
    parse_for(sql, Purpose::Run)
}

/// Parses one statement and refuses it, saying why, unless it only reads: a query without a
/// data-modifying part anywhere (an INSERT, UPDATE, DELETE or MERGE in a CTE or subquery, `SELECT …
/// INTO`), an EXPLAIN of such a query, or a SHOW or DESCRIBE.
pub(crate) fn parse_read_only(sql: &str) -> SqeResult<Parsed> {
    // Neither the statement nor a parser's complaint about it may show a secret's values.
    if is_create_secret(sql) {
        return Err(SqeError::invalid(
            "not a read-only statement: CREATE SECRET",
        ));
    }
    let parsed = parse_for(sql, Purpose::ReadOnly)?;
    if parsed.statement.is_read_only() {
        return Ok(parsed);
    }
    let refusal = match &parsed.statement {
        SqeStatement::CreateSecret(_) => "not a read-only statement: CREATE SECRET".to_string(),
        other => format!(
            "not a read-only statement: {} changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            other.kind()
        ),
    };
    Err(SqeError::invalid(refusal))
}

fn parse_for(sql: &str, purpose: Purpose) -> SqeResult<Parsed> {
    let mut prepared = prepare(sql)?;
    let lead = leading_words(&prepared.sql, 3);
    let lead: Vec<&str> = lead.iter().map(String::as_str).collect();
    if let Some(statement) = parse_own(&prepared.sql, &lead, purpose)? {
        return Ok(Parsed {
            statement,
            prepared,
        });
    }
    match lead.as_slice() {
        // Trino's `RESET SESSION name` is the parser's `RESET name`.
        ["reset", "session", ..] => {
            let mut words = words::Words::of(&prepared.sql)?;
            words.words(&["reset", "session"]);
            prepared.sql = format!("RESET {}", words.rest());
        }
        ["grant" | "deny" | "revoke", ..] => {
            prepared.sql = policies::grant_words(&prepared.sql);
        }
        ["alter", "table", ..] => {
            prepared.sql = set_properties_words(&prepared.sql);
        }
        _ => {}
    }
    let show_session = matches!(lead.as_slice(), ["show", "session", ..]);
    let statement = parse_sql(&prepared.sql, purpose)?;
    check_depth(&statement)?;
    let statement = match statement {
        // A view keeps its SQL as written, before Trino's rewrites.
        Statement::CreateView(view) => SqeStatement::CreateView(view),
        Statement::Grant(_)
        | Statement::Deny(_)
        | Statement::Revoke(_)
        | Statement::CreateRole(_) => SqeStatement::Access(statement),
        // The parser takes SESSION as a flag and leaves no variable name.
        Statement::ShowVariable { variable } if variable.is_empty() && show_session => {
            SqeStatement::ShowSession
        }
        mut statement => {
            crate::trino_sql::rewrite_statement(&mut statement)?;
            match statement {
                Statement::Query(_) | Statement::Explain { .. } => SqeStatement::Query(statement),
                Statement::Insert(insert) => SqeStatement::Insert(insert),
                Statement::Truncate(truncate) if removes_every_row(&truncate) => {
                    SqeStatement::RemoveRows {
                        table: truncate.table_names[0].name.clone(),
                        verb: "TRUNCATE TABLE",
                        filter: None,
                    }
                }
                Statement::Delete(delete) if plain_delete(&delete).is_some() => {
                    SqeStatement::RemoveRows {
                        table: plain_delete(&delete)
                            .cloned()
                            .unwrap_or_else(|| unreachable!("matched above")),
                        verb: "DELETE FROM",
                        filter: delete.selection,
                    }
                }
                Statement::Delete(_) => {
                    return Err(SqeError::unsupported(
                        "DELETE with USING, RETURNING, ORDER BY or LIMIT, or of a table named with an alias, is not supported: DELETE FROM t [WHERE condition] is",
                    ));
                }
                Statement::Merge(merge) => SqeStatement::Merge(merge),
                Statement::Update(update) => match plain_update(&update) {
                    Some(table) => SqeStatement::UpdateRows {
                        table: table.clone(),
                        assignments: update.assignments,
                        filter: update.selection,
                    },
                    None => {
                        return Err(SqeError::unsupported(
                            "UPDATE with FROM, RETURNING, ORDER BY or LIMIT, or of a table named with an alias, is not supported: UPDATE t SET column = value, … [WHERE condition] is",
                        ));
                    }
                },
                Statement::CreateTable(create) if create.query.is_some() => {
                    SqeStatement::CreateTableAs(create)
                }
                Statement::CreateSecret {
                    or_replace,
                    temporary,
                    if_not_exists,
                    name,
                    storage_specifier,
                    secret_type,
                    options,
                } => SqeStatement::CreateSecret(CreateSecret {
                    or_replace,
                    temporary,
                    if_not_exists,
                    name,
                    storage_specifier,
                    secret_type,
                    options,
                }),
                Statement::DropSecret {
                    if_exists, name, ..
                } => SqeStatement::DropSecret { name, if_exists },
                Statement::Call(function) => {
                    SqeStatement::Procedure(procedures::from_call(function)?)
                }
                statement @ (Statement::Use(_) | Statement::Set(_) | Statement::Reset(_)) => {
                    SqeStatement::Session(statement)
                }
                statement @ (Statement::ShowCatalogs { .. }
                | Statement::ShowSchemas { .. }
                | Statement::ShowDatabases { .. }
                | Statement::ShowTables { .. }
                | Statement::ShowColumns { .. }
                | Statement::ExplainTable { .. }
                | Statement::ShowCreate { .. }) => SqeStatement::Show(statement),
                other => SqeStatement::Ddl(other),
            }
        }
    };
    Ok(Parsed {
        statement,
        prepared,
    })
}

/// The statements sqlparser does not know, told apart by their first words (`lead`); `None` for
/// any other.
fn parse_own(sql: &str, lead: &[&str], purpose: Purpose) -> SqeResult<Option<SqeStatement>> {
    // For the read-only gate, each is one statement; to run, its own parser refuses what follows.
    let one = || match purpose {
        Purpose::ReadOnly => one_statement(sql, "a read-only statement is exactly one statement"),
        Purpose::Run => Ok(()),
    };
    let statement = match lead {
        ["attach", ..] => SqeStatement::Attach(own::parse_attach(sql)?),
        ["detach", ..] => SqeStatement::Detach(own::parse_detach(sql)?),
        ["show", "functions", ..] => {
            one()?;
            SqeStatement::ShowFunctions {
                like: own::parse_show_functions(sql)?,
            }
        }
        ["show", "stats", ..] => {
            one()?;
            SqeStatement::ShowStats {
                table: own::parse_show_stats(sql)?,
            }
        }
        ["show", "secrets", ..] => {
            one()?;
            own::parse_show_secrets(sql)?;
            SqeStatement::ShowSecrets
        }
        ["show", "grants", ..] => {
            one()?;
            SqeStatement::ShowGrants {
                on: own::parse_show_grants(sql)?,
            }
        }
        ["create" | "drop", "row", "filter"] | ["show", "row", "filters"] => {
            one()?;
            SqeStatement::RowFilter(policies::parse_row_filter(sql)?)
        }
        ["alter", "table" | "tag", ..] | ["show", "masks" | "tags", ..] => {
            if let Some(call) = procedures::parse_alter_execute(sql) {
                one()?;
                return Ok(Some(SqeStatement::Procedure(call?)));
            }
            if let Some(statement) = refs::parse_ref_statement(sql) {
                one()?;
                return Ok(Some(SqeStatement::Ref(statement?)));
            }
            if let Some(statement) = columns::parse_column_statement(sql) {
                one()?;
                return Ok(Some(SqeStatement::Column(statement?)));
            }
            if let Some(statement) = write_order::parse_write_order(sql) {
                one()?;
                return Ok(Some(SqeStatement::Ddl(statement?)));
            }
            // Any other ALTER TABLE is the parser's.
            let Some(statement) = policies::parse_mask_statement(sql) else {
                return Ok(None);
            };
            one()?;
            SqeStatement::Mask(statement?)
        }
        ["copy", ..] => SqeStatement::Copy(parse_copy(sql)?),
        _ => return Ok(None),
    };
    Ok(Some(statement))
}

/// Parses exactly one statement with sqlparser: `CREATE SECRET` as DuckDB spells it, anything
/// else in SQE's dialect.
fn parse_sql(sql: &str, purpose: Purpose) -> SqeResult<Statement> {
    let secret = is_create_secret(sql);
    let parsed = if secret {
        Parser::parse_sql(&DuckDbDialect {}, sql)
    } else {
        Parser::parse_sql(&dialect::SqeDialect::default(), sql)
    };
    let mut statements = parsed.map_err(|e| {
        if secret {
            // The parser's message may quote the secret's values.
            return SqeError::invalid(
                "syntax error in CREATE SECRET: expected CREATE SECRET name (TYPE t, KEY 'value', …)",
            );
        }
        if purpose == Purpose::ReadOnly {
            return SqeError::invalid(format!("syntax error: {e}"));
        }
        let text = e.to_string();
        let text = text.trim_start_matches("sql parser error: ");
        let position = if text.contains(" at Line: ") {
            ""
        } else {
            " at the end of the statement"
        };
        SqeError::invalid(format!("syntax error: {text}{position}"))
    })?;
    match (statements.len(), purpose) {
        (1, _) => Ok(statements.remove(0)),
        (0, _) => Err(SqeError::invalid("empty statement")),
        (n, Purpose::Run) => Err(SqeError::invalid(format!(
            "expected one statement, got {n}"
        ))),
        (n, Purpose::ReadOnly) => Err(SqeError::invalid(format!(
            "a read-only statement is exactly one statement, not {n}"
        ))),
    }
}

/// `COPY (query) TO 'file'`, DataFusion's statement.
fn parse_copy(sql: &str) -> SqeResult<CopyToStatement> {
    let mut statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})
        .map_err(crate::error::from_datafusion)?;
    let (Some(DFStatement::CopyTo(copy)), None) = (statements.pop_front(), statements.pop_front())
    else {
        return Err(SqeError::invalid(
            "expected one COPY (query) TO 'path' statement",
        ));
    };
    if let datafusion::sql::parser::CopyToSource::Query(query) = &copy.source {
        check_depth(query.as_ref())?;
    }
    Ok(copy)
}

/// One query given as text (a check SQE plans for itself), parsed as the engine parses a query,
/// with Trino's rewrites.
pub(crate) fn parse_query(sql: &str) -> SqeResult<(Statement, Prepared)> {
    let prepared = prepare(sql)?;
    let mut statements = Parser::parse_sql(&dialect::SqeDialect::default(), &prepared.sql)
        .map_err(|e| SqeError::invalid(format!("syntax error: {e}")))?;
    let (Some(mut statement), None) = (statements.pop(), statements.pop()) else {
        return Err(SqeError::invalid("expected one query"));
    };
    check_depth(&statement)?;
    crate::trino_sql::rewrite_statement(&mut statement)?;
    Ok((statement, prepared))
}

/// A view's SQL, parsed as [`parse_query`] parses a query: one query and nothing else.
pub(crate) fn parse_view(sql: &str) -> SqeResult<(Statement, Prepared)> {
    let prepared = prepare(sql)?;
    let mut statements = Parser::parse_sql(&dialect::SqeDialect::default(), &prepared.sql)
        .map_err(|e| SqeError::invalid(format!("syntax error in a view: {e}")))?;
    let mut statement = match (statements.pop(), statements.is_empty()) {
        (Some(s @ Statement::Query(_)), true) => s,
        _ => return Err(SqeError::invalid("a view's SQL must be one query")),
    };
    check_depth(&statement)?;
    crate::trino_sql::rewrite_statement(&mut statement)?;
    Ok((statement, prepared))
}

/// Whether `sql` creates a secret: such a statement is recorded and reported without its text.
pub(crate) fn is_create_secret(sql: &str) -> bool {
    let mut words = sql
        .split(|c: char| c.is_whitespace() || c == '(')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase);
    if words.next().as_deref() != Some("create") {
        return false;
    }
    words
        .find(|w| !matches!(w.as_str(), "or" | "replace" | "temporary" | "persistent"))
        .is_some_and(|w| w == "secret")
}

/// The statement as the query registry keeps it: a secret's values cut.
pub(crate) fn recorded_text(sql: &str) -> Cow<'_, str> {
    if is_create_secret(sql) {
        Cow::Borrowed("CREATE SECRET … (values not recorded)")
    } else {
        Cow::Borrowed(sql)
    }
}

impl SqeStatement {
    /// Whether the statement only reads (MCP's read-only tool runs these and no other). Every
    /// kind answers here: a kind added to the enum must say whether it reads only.
    pub fn is_read_only(&self) -> bool {
        match self {
            SqeStatement::Query(statement)
            | SqeStatement::Ddl(statement)
            | SqeStatement::Show(statement)
            | SqeStatement::Session(statement) => reads_only(statement),
            SqeStatement::ShowFunctions { .. }
            | SqeStatement::ShowStats { .. }
            | SqeStatement::ShowSecrets
            | SqeStatement::ShowGrants { .. }
            | SqeStatement::ShowSession => true,
            SqeStatement::RowFilter(filter) => matches!(filter.kind, RowFilterKind::Show),
            SqeStatement::Mask(mask) => matches!(
                mask,
                MaskStatement::Table {
                    action: MaskAction::Show | MaskAction::ShowTags,
                    ..
                }
            ),
            SqeStatement::Insert(_)
            | SqeStatement::CreateTableAs(_)
            | SqeStatement::RemoveRows { .. }
            | SqeStatement::UpdateRows { .. }
            | SqeStatement::Merge(_)
            | SqeStatement::CreateView(_)
            | SqeStatement::Copy(_)
            | SqeStatement::Attach(_)
            | SqeStatement::Detach(_)
            | SqeStatement::Access(_)
            | SqeStatement::CreateSecret(_)
            | SqeStatement::DropSecret { .. }
            | SqeStatement::Procedure(_)
            | SqeStatement::Ref(_)
            | SqeStatement::Column(_) => false,
        }
    }

    /// The statement's kind in words, for a refusal.
    pub fn kind(&self) -> String {
        let words = |s: &str| s.to_string();
        match self {
            SqeStatement::Query(Statement::Query(_)) => words("a query with a data-modifying part"),
            SqeStatement::Query(statement)
            | SqeStatement::Ddl(statement)
            | SqeStatement::Show(statement)
            | SqeStatement::Session(statement)
            | SqeStatement::Access(statement) => {
                let text = statement.to_string();
                let first: Vec<&str> = text.split_whitespace().take(2).collect();
                first.join(" ").to_uppercase()
            }
            SqeStatement::Insert(_) => words("INSERT INTO"),
            SqeStatement::CreateTableAs(_) => words("CREATE TABLE"),
            SqeStatement::RemoveRows { verb, .. } => words(verb),
            SqeStatement::UpdateRows { .. } => words("UPDATE"),
            SqeStatement::Merge(_) => words("MERGE"),
            SqeStatement::CreateView(_) => words("CREATE VIEW"),
            SqeStatement::Copy(_) => words("COPY"),
            SqeStatement::Attach(_) => words("ATTACH"),
            SqeStatement::Detach(_) => words("DETACH"),
            SqeStatement::ShowFunctions { .. } => words("SHOW FUNCTIONS"),
            SqeStatement::ShowStats { .. } => words("SHOW STATS"),
            SqeStatement::ShowSecrets => words("SHOW SECRETS"),
            SqeStatement::ShowGrants { .. } => words("SHOW GRANTS"),
            SqeStatement::ShowSession => words("SHOW SESSION"),
            SqeStatement::RowFilter(filter) => words(match filter.kind {
                RowFilterKind::Create => "CREATE ROW FILTER",
                RowFilterKind::Drop { .. } => "DROP ROW FILTER",
                RowFilterKind::Show => "SHOW ROW FILTERS",
            }),
            SqeStatement::Mask(MaskStatement::Tag { .. }) => words("ALTER TAG"),
            SqeStatement::Mask(MaskStatement::Table { action, .. }) => words(match action {
                MaskAction::Show => "SHOW MASKS",
                MaskAction::ShowTags => "SHOW TAGS",
                _ => "ALTER TABLE",
            }),
            SqeStatement::CreateSecret(_) => words("CREATE SECRET"),
            SqeStatement::DropSecret { .. } => words("DROP SECRET"),
            SqeStatement::Procedure(call) => format!("procedure {}", call.name),
            SqeStatement::Ref(_) | SqeStatement::Column(_) => words("ALTER TABLE"),
        }
    }
}

/// Whether a TRUNCATE names one table and nothing more (no partitions, no options of other
/// dialects).
fn removes_every_row(truncate: &Truncate) -> bool {
    truncate.table_names.len() == 1
        && truncate.partitions.is_none()
        && !truncate.table_names[0].only
        && truncate.identity.is_none()
        && truncate.cascade.is_none()
        && truncate.on_cluster.is_none()
}

/// The table of a `DELETE FROM t [WHERE …]` without USING, RETURNING, ORDER BY or LIMIT.
fn plain_delete(delete: &Delete) -> Option<&ObjectName> {
    let plain = delete.tables.is_empty()
        && delete.using.is_none()
        && delete.returning.is_none()
        && delete.output.is_none()
        && delete.order_by.is_empty()
        && delete.limit.is_none();
    let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &delete.from;
    match (plain, from.as_slice()) {
        (true, [only]) if only.joins.is_empty() => match &only.relation {
            TableFactor::Table {
                name, alias: None, ..
            } => Some(name),
            _ => None,
        },
        _ => None,
    }
}

/// Trino's `ALTER TABLE t SET PROPERTIES a = 'x', b = 'y'` as the parser reads Spark's `SET
/// TBLPROPERTIES (a = 'x', b = 'y')`; any other statement as it is.
fn set_properties_words(sql: &str) -> String {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = dialect::SqeDialect::default();
    let Ok(mut tokens) = Tokenizer::new(&dialect, sql).tokenize() else {
        return sql.to_string();
    };
    let is = |t: &Token, w: &str| matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    let words: Vec<usize> = (0..tokens.len())
        .filter(|i| !matches!(tokens[*i], Token::Whitespace(_)))
        .collect();
    let Some(at) = words
        .windows(2)
        .position(|w| is(&tokens[w[0]], "set") && is(&tokens[w[1]], "properties"))
    else {
        return sql.to_string();
    };
    let properties = words[at + 1];
    tokens[properties] = Token::make_keyword("TBLPROPERTIES");
    // The list runs to the end of the statement (a `;` ends it).
    let end = words
        .iter()
        .copied()
        .find(|i| *i > properties && matches!(tokens[*i], Token::SemiColon))
        .unwrap_or(tokens.len());
    tokens.insert(end, Token::RParen);
    tokens.insert(properties + 1, Token::LParen);
    tokens.iter().map(|t| t.to_string()).collect()
}

/// The table of an UPDATE of one table, named without an alias, with nothing but assignments
/// and a WHERE clause.
fn plain_update(update: &Update) -> Option<&ObjectName> {
    let plain = update.from.is_none()
        && update.returning.is_none()
        && update.output.is_none()
        && update.or.is_none()
        && update.order_by.is_empty()
        && update.limit.is_none()
        && update.table.joins.is_empty();
    match (plain, &update.table.relation) {
        (
            true,
            TableFactor::Table {
                name, alias: None, ..
            },
        ) => Some(name),
        _ => None,
    }
}

/// Whether a statement sqlparser parsed only reads.
fn reads_only(statement: &Statement) -> bool {
    match statement {
        Statement::Query(query) => query_reads_only(query),
        Statement::Explain { statement, .. } => reads_only(statement),
        Statement::ShowTables { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowCreate { .. }
        | Statement::ShowSchemas { .. }
        | Statement::ShowDatabases { .. }
        | Statement::ShowCatalogs { .. }
        | Statement::ShowViews { .. }
        | Statement::ShowVariable { .. }
        | Statement::ExplainTable { .. } => true,
        _ => false,
    }
}

/// Whether no part of a query writes: no data-modifying set expression and no `SELECT … INTO`,
/// in CTEs and subqueries too.
fn query_reads_only(query: &Query) -> bool {
    struct Writes;
    impl Visitor for Writes {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            if writes(&query.body) {
                return ControlFlow::Break(());
            }
            if let Some(with) = &query.with
                && with.cte_tables.iter().any(|cte| writes(&cte.query.body))
            {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    fn writes(body: &SetExpr) -> bool {
        match body {
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {
                true
            }
            SetExpr::Select(select) => select.into.is_some(),
            SetExpr::SetOperation { left, right, .. } => writes(left) || writes(right),
            SetExpr::Query(query) => writes(&query.body),
            _ => false,
        }
    }
    query.visit(&mut Writes).is_continue()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of statement by a number of its own: a match without a catch-all, so a kind
    /// added to [`SqeStatement`] does not compile here until it has a number, and the test below
    /// fails until it has a sample and an answer.
    fn kind_number(statement: &SqeStatement) -> usize {
        match statement {
            SqeStatement::Query(_) => 0,
            SqeStatement::Insert(_) => 1,
            SqeStatement::CreateTableAs(_) => 2,
            SqeStatement::CreateView(_) => 3,
            SqeStatement::Copy(_) => 4,
            SqeStatement::Attach(_) => 5,
            SqeStatement::Detach(_) => 6,
            SqeStatement::ShowFunctions { .. } => 7,
            SqeStatement::ShowStats { .. } => 8,
            SqeStatement::ShowSecrets => 9,
            SqeStatement::ShowGrants { .. } => 10,
            SqeStatement::ShowSession => 11,
            SqeStatement::RowFilter(_) => 12,
            SqeStatement::Mask(_) => 13,
            SqeStatement::Access(_) => 14,
            SqeStatement::CreateSecret(_) => 15,
            SqeStatement::DropSecret { .. } => 16,
            SqeStatement::Ddl(_) => 17,
            SqeStatement::Show(_) => 18,
            SqeStatement::Session(_) => 19,
            SqeStatement::RemoveRows { .. } => 20,
            SqeStatement::UpdateRows { .. } => 21,
            SqeStatement::Merge(_) => 22,
            SqeStatement::Procedure(_) => 23,
            SqeStatement::Ref(_) => 24,
            SqeStatement::Column(_) => 25,
        }
    }

    /// How many kinds [`kind_number`] numbers.
    const KINDS: usize = 26;

    #[test]
    fn every_kind_of_statement_says_whether_it_only_reads() {
        // (statement, its kind, whether MCP's read-only tool may run it)
        let cases: &[(&str, usize, bool)] = &[
            ("SELECT 1", 0, true),
            ("EXPLAIN SELECT 1", 0, true),
            (
                "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x",
                0,
                false,
            ),
            ("INSERT INTO t VALUES (1)", 1, false),
            ("TRUNCATE TABLE t", 20, false),
            ("DELETE FROM t", 20, false),
            ("UPDATE t SET x = x + 1 WHERE y = 2", 21, false),
            ("ALTER TABLE t EXECUTE optimize", 23, false),
            ("CALL system.expire_snapshots('t')", 23, false),
            ("ALTER TABLE t CREATE BRANCH b", 24, false),
            ("ALTER TABLE t ADD COLUMN r.z int", 25, false),
            (
                "MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN DELETE",
                22,
                false,
            ),
            ("CREATE TABLE t AS SELECT 1 AS x", 2, false),
            ("CREATE VIEW v AS SELECT 1 AS x", 3, false),
            ("COPY (SELECT 1) TO '/tmp/x.parquet'", 4, false),
            ("ATTACH '/tmp/w' AS w", 5, false),
            ("DETACH w", 6, false),
            ("SHOW FUNCTIONS LIKE 'abs'", 7, true),
            ("SHOW STATS FOR t", 8, true),
            ("SHOW SECRETS", 9, true),
            ("SHOW GRANTS ON TABLE t", 10, true),
            ("SHOW SESSION", 11, true),
            ("SHOW ROW FILTERS ON t", 12, true),
            (
                "CREATE ROW FILTER f ON t USING (x > 0) FOR USER u",
                12,
                false,
            ),
            ("DROP ROW FILTER f ON t", 12, false),
            ("SHOW MASKS ON t", 13, true),
            ("SHOW TAGS ON t", 13, true),
            (
                "ALTER TABLE t ALTER COLUMN c SET MASK NULL FOR ROLE r",
                13,
                false,
            ),
            ("ALTER TAG pii DROP MASK", 13, false),
            ("GRANT SELECT ON TABLE t TO USER u", 14, false),
            ("CREATE ROLE r", 14, false),
            ("CREATE SECRET s (TYPE bearer, TOKEN 't')", 15, false),
            ("DROP SECRET s", 16, false),
            ("CREATE TABLE t (x int)", 17, false),
            ("DROP TABLE t", 17, false),
            ("ALTER TABLE t ADD COLUMN y int", 17, false),
            ("SHOW TABLES", 18, true),
            ("DESCRIBE t", 18, true),
            ("SHOW CREATE TABLE t", 18, true),
            ("USE s", 19, false),
            ("SET SESSION query_max_run_time = '10s'", 19, false),
        ];
        let mut seen = [false; KINDS];
        for (sql, kind, reads) in cases {
            let parsed = parse(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert_eq!(kind_number(&parsed.statement), *kind, "{sql}");
            assert_eq!(parsed.statement.is_read_only(), *reads, "{sql}");
            assert_eq!(
                parse_read_only(sql).is_ok(),
                *reads,
                "the read-only gate on {sql}"
            );
            seen[*kind] = true;
        }
        let missing: Vec<usize> = (0..KINDS).filter(|k| !seen[*k]).collect();
        assert!(missing.is_empty(), "kinds without a sample: {missing:?}");
    }

    #[test]
    fn only_reads_pass() {
        for sql in [
            "SELECT 1",
            "WITH t AS (SELECT 1 AS x) SELECT x FROM t",
            "EXPLAIN SELECT 1",
            "SHOW TABLES",
            "DESCRIBE t",
            "SHOW FUNCTIONS",
            "SHOW STATS FOR t",
            "SELECT 1;",
            "VALUES 1, 2",
        ] {
            assert_eq!(
                parse_read_only(sql).map(|_| ()).map_err(|e| e.to_string()),
                Ok(()),
                "{sql}"
            );
        }
        for (sql, message) in [
            (
                "DROP TABLE t",
                "not a read-only statement: DROP TABLE changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
            (
                "SELECT 1; DROP TABLE t",
                "a read-only statement is exactly one statement, not 2",
            ),
            (
                "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x",
                "not a read-only statement: a query with a data-modifying part changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
            (
                "SELECT * INTO u FROM t",
                "not a read-only statement: a query with a data-modifying part changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
            (
                "EXPLAIN ANALYZE INSERT INTO t VALUES (1)",
                "not a read-only statement: EXPLAIN ANALYZE changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
            (
                "SHOW GRANTS; DROP TABLE t",
                "a read-only statement is exactly one statement",
            ),
            (
                "CREATE SECRET s (TYPE s3, KEY_ID 'AKIA-SECRET-VALUE' SECRET 'x')",
                "not a read-only statement: CREATE SECRET",
            ),
            (
                "SHOW;STATS FOR t",
                "syntax error: sql parser error: Expected: an SQL statement, found: STATS at Line: 1, Column: 6",
            ),
            (
                "INSERT INTO t VALUES (1)",
                "not a read-only statement: INSERT INTO changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
        ] {
            let e = parse_read_only(sql)
                .map(|_| ())
                .map_err(|e| e.message().to_string());
            assert_eq!(e, Err(message.to_string()), "{sql}");
        }
    }

    #[test]
    fn a_secret_statement_is_recorded_without_its_values() {
        for sql in [
            "CREATE SECRET s (TYPE bearer, TOKEN 'abc')",
            "create or replace temporary secret if not exists s (type s3, key_id 'k', secret 'v')",
            "  CREATE PERSISTENT SECRET s(TYPE s3)",
        ] {
            assert!(is_create_secret(sql), "{sql}");
            assert!(!recorded_text(sql).contains("abc"));
        }
        assert!(!is_create_secret("CREATE TABLE secret (x int)"));
        assert_eq!(recorded_text("SELECT 1"), "SELECT 1");
    }
}
