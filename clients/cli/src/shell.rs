//! The shell: runs statements from `-e`, `--file` or an interactive prompt, against an embedded
//! engine or, with `--host`, an sqe-server over Arrow Flight SQL.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use sqe_engine::{
    Engine, EngineConfig, PersistentSecrets, ends_in_statement, is_incomplete, split_statements,
};
use sqe_sessions::{Principal, QueryService, Session, SqeError};

use crate::args::{Args, Format};
use crate::output::Printer;
use crate::remote::{FlightRemote, Tls};

const HELP: &str = "\
.tables            list the tables of the current schema
.schema TABLE      show the CREATE TABLE statement of TABLE
.timer on|off      print how long each statement took
.help              this text
.quit              leave (also .exit or Ctrl-D)
SQL statements end with ';' and may span lines. Ctrl-C cancels a running query.";

/// Warnings and errors on standard error (an internal error's details, under the id the error
/// names); `RUST_LOG` chooses more.
fn init_log() {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

pub fn main(args: Args) -> ExitCode {
    init_log();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(sqe_engine::WORKER_STACK)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn engine_config(args: &Args) -> Result<EngineConfig, String> {
    let warehouse = args
        .warehouse
        .clone()
        .unwrap_or_else(EngineConfig::default_warehouse);
    let mut catalogs = vec![("iceberg".to_string(), warehouse)];
    for spec in &args.catalogs {
        let Some((name, dir)) = spec.split_once('=') else {
            return Err(format!("--catalog expects NAME=DIR, got '{spec}'"));
        };
        if name.is_empty() || dir.is_empty() {
            return Err(format!("--catalog expects NAME=DIR, got '{spec}'"));
        }
        catalogs.push((name.to_string(), PathBuf::from(dir)));
    }
    // Persistent secrets are sealed with a key from SQE_SECRETS_KEY, in the default warehouse.
    let persistent_secrets = std::env::var("SQE_SECRETS_KEY")
        .ok()
        .filter(|k| !k.is_empty())
        .map(|passphrase| PersistentSecrets {
            path: catalogs[0].1.join("secrets.json"),
            passphrase,
        });
    let maintenance_min_retention = args
        .maintenance_min_retention
        .as_deref()
        .map(|text| {
            sqe_engine::parse_duration(text)
                .map_err(|e| format!("--maintenance-min-retention: {}", e.message()))
        })
        .transpose()?;
    Ok(EngineConfig {
        catalogs,
        persistent_secrets,
        maintenance_min_retention,
        ..EngineConfig::default()
    })
}

struct Shell {
    service: Arc<dyn QueryService>,
    session: Session,
    format: Format,
    timer: bool,
    interactive: bool,
}

/// The password for `user`: typed at a prompt without echo on a terminal, else one line of standard
/// input.
fn read_password(user: &str) -> Result<String, String> {
    if std::io::stdin().is_terminal() {
        return rpassword::prompt_password(format!("Password for {user}: "))
            .map_err(|e| format!("cannot read the password: {e}"));
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the password: {e}"))?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

/// Returns whether every statement succeeded.
async fn run(args: Args) -> Result<bool, String> {
    let user = std::env::var("USER").unwrap_or_else(|_| "sqe".into());
    let (service, catalog): (Arc<dyn QueryService>, String) = match (&args.host, args.embedded) {
        (Some(_), true) => return Err("--host and --embedded exclude each other".into()),
        (Some(host), false) => {
            let login = match &args.user {
                Some(u) if args.token.is_none() => Some((u.clone(), read_password(u)?)),
                _ => None,
            };
            let tls = match (&args.tls_ca, args.tls) {
                (Some(file), _) => {
                    Some(Tls::Ca(std::fs::read(file).map_err(|e| {
                        format!("cannot read {}: {e}", file.display())
                    })?))
                }
                (None, true) => Some(Tls::WebRoots),
                (None, false) => None,
            };
            let remote = FlightRemote::connect(host, args.port, tls, args.token.clone(), login)
                .await
                .map_err(|e| e.to_string())?;
            (Arc::new(remote), "iceberg".to_string())
        }
        (None, _) => {
            let engine = if args.memory {
                Engine::in_memory()
            } else {
                Engine::open(engine_config(&args)?)
            }
            .map_err(|e| e.to_string())?;
            let catalog = engine.default_catalog().to_string();
            (Arc::new(engine), catalog)
        }
    };
    let session = Session::new(Principal::new(user), catalog, "default");
    let mut shell = Shell {
        service,
        session,
        format: args.format,
        timer: false,
        interactive: false,
    };

    let mut script = None;
    if let Some(sql) = &args.execute {
        script = Some(sql.clone());
    }
    if let Some(path) = &args.file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        script = Some(script.map(|s| s + ";\n" + &text).unwrap_or(text));
    }
    match script {
        Some(sql) => Ok(shell.run_script(&sql, args.stop_on_error).await),
        None => shell.repl().await,
    }
}

/// One step of a script: a statement, or a dot-command (which ends at its line).
#[derive(Debug, PartialEq)]
enum Step {
    Sql(String),
    Dot(String),
}

/// A script's steps. A line that starts with `.` where no statement is open is a dot-command, as
/// is a statement that starts with `.` after a `;` (`-e "SELECT 1; .tables"`).
fn script_steps(script: &str) -> Vec<Step> {
    fn statements(text: &str) -> impl Iterator<Item = Step> {
        split_statements(text).into_iter().map(|s| {
            if s.trim_start().starts_with('.') {
                Step::Dot(s.trim().to_string())
            } else {
                Step::Sql(s)
            }
        })
    }
    let mut steps = Vec::new();
    let mut pending = String::new();
    for line in script.lines() {
        if !ends_in_statement(&pending) && line.trim_start().starts_with('.') {
            steps.extend(statements(&pending));
            pending.clear();
            steps.push(Step::Dot(line.trim().to_string()));
        } else {
            pending.push_str(line);
            pending.push('\n');
        }
    }
    steps.extend(statements(&pending));
    steps
}

impl Shell {
    async fn run_script(&mut self, sql: &str, stop_on_error: bool) -> bool {
        let mut ok = true;
        for step in script_steps(sql) {
            let result = match step {
                Step::Dot(line) => self.dot_command(&line).await.map(|_| ()),
                Step::Sql(statement) => self.execute(&statement).await,
            };
            if let Err(e) = result {
                eprintln!("Error: {e}");
                ok = false;
                if stop_on_error {
                    break;
                }
            }
        }
        ok
    }

    async fn repl(&mut self) -> Result<bool, String> {
        self.interactive = true;
        let mut editor = DefaultEditor::new().map_err(|e| e.to_string())?;
        let history = EngineConfig::default_warehouse()
            .parent()
            .map(|p| p.join("history"));
        if let Some(h) = &history {
            let _ = editor.load_history(h);
        }
        println!(
            "SQE {} — SQL over Apache Iceberg. Type .help for help.",
            env!("CARGO_PKG_VERSION")
        );
        let mut buffer = String::new();
        loop {
            let prompt = if buffer.is_empty() { "sqe> " } else { "...> " };
            match editor.readline(prompt) {
                Ok(line) => {
                    if buffer.is_empty() && line.trim_start().starts_with('.') {
                        let _ = editor.add_history_entry(line.as_str());
                        match self.dot_command(line.trim()).await {
                            Ok(true) => break,
                            Ok(false) => {}
                            Err(e) => eprintln!("Error: {e}"),
                        }
                        continue;
                    }
                    buffer.push_str(&line);
                    buffer.push('\n');
                    if !statement_complete(&buffer) {
                        continue;
                    }
                    let text = std::mem::take(&mut buffer);
                    let _ = editor.add_history_entry(text.trim());
                    self.run_script(&text, false).await;
                }
                Err(ReadlineError::Interrupted) => buffer.clear(),
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(e.to_string()),
            }
        }
        if let Some(h) = &history {
            if let Some(dir) = h.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = editor.save_history(h);
        }
        Ok(true)
    }

    /// Returns true when the shell should exit.
    async fn dot_command(&mut self, line: &str) -> Result<bool, String> {
        let mut words = line.split_whitespace();
        let command = words.next().unwrap_or_default();
        let arg = words.next();
        match (command, arg) {
            (".quit" | ".exit" | ".q", _) => return Ok(true),
            (".help", _) => println!("{HELP}"),
            (".tables", None) => self.execute("SHOW TABLES").await?,
            (".tables", Some(schema)) => {
                self.execute(&format!("SHOW TABLES FROM {schema}")).await?
            }
            (".schema", Some(table)) => {
                let saved = self.format;
                if self.format == Format::Table {
                    self.format = Format::Tsv;
                }
                let r = self
                    .execute_raw(&format!("SHOW CREATE TABLE {table}"))
                    .await;
                self.format = saved;
                r?;
            }
            (".schema", None) => return Err(".schema needs a table name".into()),
            (".timer", Some("on")) => self.timer = true,
            (".timer", Some("off")) => self.timer = false,
            (".timer", _) => return Err(".timer takes on or off".into()),
            _ => return Err(format!("unknown command '{command}'; try .help")),
        }
        Ok(false)
    }

    async fn execute(&mut self, sql: &str) -> Result<(), String> {
        self.execute_raw(sql).await
    }

    /// Runs one statement, printing its rows; Ctrl-C cancels it.
    async fn execute_raw(&mut self, sql: &str) -> Result<(), String> {
        let started = Instant::now();
        let progress = (self.interactive && std::io::stderr().is_terminal())
            .then(|| tokio::spawn(progress_line(started)));
        let work = run_statement(
            self.service.clone(),
            self.session.clone(),
            sql.to_string(),
            self.format,
        );
        let outcome = tokio::select! {
            r = work => r,
            _ = tokio::signal::ctrl_c() => Err(SqeError::new(sqe_sessions::ErrorCode::Cancelled, "query cancelled")),
        };
        if let Some(p) = progress {
            p.abort();
            eprint!("\r\x1b[K");
        }
        let update = outcome.map_err(|e| e.to_string())?;
        if let Some(u) = update {
            self.session.apply(&u);
        }
        if self.timer {
            println!("Run Time: {:.3}s", started.elapsed().as_secs_f64());
        }
        Ok(())
    }
}

async fn progress_line(started: Instant) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    loop {
        eprint!(
            "\r\x1b[Krunning… {:.1}s (Ctrl-C cancels)",
            started.elapsed().as_secs_f64()
        );
        let _ = std::io::stderr().flush();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn run_statement(
    engine: Arc<dyn QueryService>,
    session: Session,
    sql: String,
    format: Format,
) -> Result<Option<sqe_sessions::SessionUpdate>, SqeError> {
    let mut result = engine.execute(&session, &sql).await?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let is_write = result.update_count.is_some();
    if result.schema.fields().is_empty() || (is_write && format != Format::Table) {
        // DDL prints nothing; a write's row count is for people, not for CSV/JSON consumers.
        while let Some(b) = result.batches.next().await {
            b?;
        }
        return Ok(result.session_update);
    }
    let mut printer = Printer::new(format, result.schema.clone());
    while let Some(batch) = result.batches.next().await {
        printer.push(&mut out, batch?).map_err(SqeError::internal)?;
    }
    printer.finish(&mut out).map_err(SqeError::internal)?;
    let _ = out.flush();
    Ok(result.session_update)
}

/// True when the buffer holds at least one statement ended by a top-level ';'.
fn statement_complete(buffer: &str) -> bool {
    let trimmed = buffer.trim_end();
    if !trimmed.ends_with(';') {
        return false;
    }
    // A ';' inside an open quote or comment does not end the statement.
    !is_incomplete(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dot_command_ends_at_its_line() {
        let steps =
            script_steps(".timer on\nSELECT 1;\n-- note\n.tables\nSELECT 'a\n.b';\nSELECT 2");
        assert_eq!(
            steps,
            vec![
                Step::Dot(".timer on".into()),
                Step::Sql("SELECT 1".into()),
                Step::Dot(".tables".into()),
                Step::Sql("SELECT 'a\n.b'".into()),
                Step::Sql("SELECT 2".into()),
            ]
        );
        assert_eq!(
            script_steps("SELECT 1; .tables;  .schema t"),
            vec![
                Step::Sql("SELECT 1".into()),
                Step::Dot(".tables".into()),
                Step::Dot(".schema t".into()),
            ]
        );
    }
}
