//! The gateway: loads the configuration, opens the engine, and serves each protocol on its listener.
//! Protocols see only the `QueryService` trait; this crate is where the engine is wired in.

mod config;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::serve::ListenerExt;
use axum::{Router, middleware};
use config::CatalogSection;
pub use config::Config;
use sqe_engine::{Engine, EngineConfig, PersistentSecrets};
use sqe_flight_sql::{FlightSqlConfig, SqeFlightSql};
use sqe_identity::{
    Authenticator, ResourceMode, ResourceServer, http_layer, optional_http_layer, resource_layer,
};
use sqe_mcp::{McpConfig, McpSessions};
use sqe_sessions::ProtocolHandles;
use sqe_trino::{TrinoConfig, TrinoService};

/// Command-line arguments of `sqe-server`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "sqe-server",
    version,
    about = "SQE server: Trino HTTP in front of the SQE engine"
)]
pub struct Args {
    /// Configuration file (see sqe.toml.example). Without it: the default warehouse on 127.0.0.1.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub fn main(args: Args) -> ExitCode {
    let config = match Config::load(args.config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sqe-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = init_log(&config.log) {
        eprintln!("sqe-server: {e}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(sqe_engine::WORKER_STACK)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sqe-server: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqe-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The log on standard error: `RUST_LOG` if set, else `[log] level`; text or JSON lines.
fn init_log(log: &config::LogSection) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(f) if !f.trim().is_empty() => f,
        _ => log.level.clone(),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .map_err(|e| format!("log level '{filter}': {e}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal; a file or a log collector gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let installed = if log.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    installed.map_err(|e| format!("cannot install the log: {e}"))
}

/// Which authenticators are on, for the startup line.
fn authenticators(config: &Config) -> String {
    let mut on = Vec::new();
    if let Some(oidc) = &config.auth.oidc {
        on.push(format!("oidc (issuer {})", oidc.issuer));
    }
    if !config.auth.static_principals.is_empty() {
        on.push(format!(
            "static tokens ({})",
            config.auth.static_principals.len()
        ));
    }
    if config.auth.allow_anonymous {
        on.push("anonymous (X-Trino-User)".into());
    }
    on.join(", ")
}

/// Runs until SIGINT or SIGTERM; then refuses new statements, lets running ones finish for up to
/// `shutdown_grace_secs`, and stops.
pub async fn serve(config: Config) -> Result<(), String> {
    let mut catalogs = vec![(
        config.catalog.name.clone(),
        config.catalog.warehouse.clone(),
    )];
    catalogs.extend(
        config
            .catalog
            .mounts
            .iter()
            .map(|m| (m.name.clone(), m.warehouse.clone())),
    );
    let mut rest_catalogs = Vec::new();
    let mut postgres_catalogs = Vec::new();
    let mut hms_catalogs = Vec::new();
    for (name, section) in &config.catalogs {
        match section {
            CatalogSection::Sqlite { warehouse } => {
                catalogs.push((name.clone(), warehouse.clone()))
            }
            CatalogSection::Rest(rest) => rest_catalogs.push((
                name.clone(),
                rest.engine_config(name, &|var| std::env::var(var).ok())?,
            )),
            CatalogSection::Jdbc(jdbc) => postgres_catalogs.push((
                name.clone(),
                jdbc.engine_config(name, &|var| std::env::var(var).ok())?,
            )),
            CatalogSection::Hms(hms) => hms_catalogs.push((name.clone(), hms.engine_config())),
        }
    }
    let persistent_secrets = match &config.secrets.key_env {
        Some(var) => Some(PersistentSecrets {
            path: config
                .secrets
                .path
                .clone()
                .unwrap_or_else(|| config.catalog.warehouse.join("secrets.json")),
            passphrase: std::env::var(var)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    format!("[secrets] key_env: the environment variable {var} is not set")
                })?,
        }),
        None => None,
    };
    let ranger = config.access.ranger(
        catalogs
            .iter()
            .map(|(n, _)| n.clone())
            .chain(rest_catalogs.iter().map(|(n, _)| n.clone()))
            .chain(postgres_catalogs.iter().map(|(n, _)| n.clone()))
            .chain(hms_catalogs.iter().map(|(n, _)| n.clone()))
            .collect(),
    )?;
    let engine = Arc::new(
        Engine::open(EngineConfig {
            catalogs,
            persistent_secrets,
            rest_catalogs,
            postgres_catalogs,
            hms_catalogs,
            admission: config.engine.admission(),
            object_cache_bytes: config.engine.object_cache_bytes(),
            object_cache_dir: config.engine.object_cache_dir.clone(),
            object_cache_disk_bytes: config.engine.object_cache_disk_bytes(),
            admin_roles: config.auth.admin_roles.clone(),
            access_default: config.access.engine_default(config.has_authenticator()),
            mask_key: config.access.mask_key()?,
            policy_store: config.access.store.as_deref().map(config::expand_home),
            ranger,
            files: config.files.access(),
            maintenance_min_retention: config.engine.maintenance_min_retention()?,
            ..EngineConfig::default()
        })
        .map_err(|e| e.to_string())?,
    );
    let server = &config.server;
    let trino_config = TrinoConfig {
        https: server.tls.is_some(),
        impersonators: config.auth.impersonators.clone(),
        client_timeout: Duration::from_secs(server.client_timeout_secs),
        max_queries_per_user: server.max_trino_queries_per_user,
        ..TrinoConfig::new(engine.default_catalog())
    };
    let trino = TrinoService::new(engine.clone(), trino_config);
    let authenticator = Arc::new(Authenticator::new(config.auth.clone())?);
    let auth = || middleware::from_fn_with_state(authenticator.clone(), http_layer);
    // Authentication wraps the protocol routes; health probes stay open.
    let http = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/ready", get(|| async { "ready" }))
        .merge(sqe_trino::router(trino.clone()).layer(auth()))
        .merge(
            sqe_trino::segment_router(trino.clone()).layer(middleware::from_fn_with_state(
                authenticator.clone(),
                optional_http_layer,
            )),
        );
    let flight_sql = SqeFlightSql::new(
        engine.clone(),
        FlightSqlConfig {
            result_timeout: Duration::from_secs(server.result_timeout_secs),
            prepared_idle: Duration::from_secs(server.prepared_statement_idle_secs),
            max_prepared_per_user: server.max_prepared_statements_per_user,
            max_prepared_bytes_per_user: server.max_prepared_statement_bytes_per_user,
            max_results_per_user: server.max_flight_results_per_user,
            max_sessions_per_user: server.max_flight_sessions_per_user,
            ..FlightSqlConfig::new(engine.default_catalog())
        },
    );
    let flight = tonic::service::Routes::new(sqe_flight_sql::server(flight_sql.clone()))
        .into_axum_router()
        .layer(auth());

    let host = config.server.host;
    let bind = |port: u16| async move {
        tokio::net::TcpListener::bind(SocketAddr::new(host, port))
            .await
            .map_err(|e| format!("cannot listen on {host}:{port}: {e}"))
    };
    let tls = config.server.tls.as_ref().map(tls::acceptor).transpose()?;
    let http_listener = bind(config.server.http_port).await?;
    let flight_listener = bind(config.server.flight_port).await?;
    // Tests and scripts read these lines (on standard output) to find the ports.
    let local = |l: &tokio::net::TcpListener| l.local_addr().map_err(|e| e.to_string());
    let secured = if tls.is_some() { " (tls)" } else { "" };
    let (http_addr, flight_addr) = (local(&http_listener)?, local(&flight_listener)?);
    println!("sqe-server: trino http listening on {http_addr}{secured}");
    println!("sqe-server: flight sql listening on {flight_addr}{secured}");
    // What each protocol holds between calls, for the reaper and the shutdown to ask about.
    let mut protocols: Vec<Arc<dyn ProtocolHandles>> = vec![trino.clone(), flight_sql.clone()];
    let http = match mcp_routes(&config, &engine, &authenticator, http_addr, tls.is_some())? {
        Some((routes, resource, sessions)) => {
            println!("sqe-server: mcp listening on {resource}");
            protocols.push(sessions);
            http.merge(routes)
        }
        None => http,
    };
    // Quack: at /quack on the HTTP port, and on a port of its own.
    let quack = match config.quack.enabled {
        true => {
            let (routes, server) = quack_routes(&engine, &authenticator, &config);
            protocols.push(server);
            let listener = bind(config.quack.port).await?;
            println!(
                "sqe-server: quack listening on {}{secured}",
                local(&listener)?
            );
            Some((listener, routes))
        }
        false => None,
    };
    let http = match &quack {
        Some((_, routes)) => http.merge(routes.clone()),
        None => http,
    };
    tracing::info!(
        trino_http = %http_addr,
        flight_sql = %flight_addr,
        tls = tls.is_some(),
        authenticators = %authenticators(&config),
        catalogs = ?engine.catalog_names(),
        "sqe-server {} listening",
        env!("CARGO_PKG_VERSION")
    );

    // Abandoned queries, unfetched results and idle prepared statements and sessions give back
    // their slots.
    let protocols: Arc<[Arc<dyn ProtocolHandles>]> = protocols.into();
    let interval = Duration::from_secs(server.reaper_interval_secs);
    let reaping = protocols.clone();
    let reaper = tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        loop {
            tick.tick().await;
            let expired: Vec<(&str, usize)> = reaping
                .iter()
                .map(|p| (p.protocol(), p.expire_idle()))
                .filter(|(_, n)| *n > 0)
                .collect();
            if !expired.is_empty() {
                let expired = counts(&expired);
                tracing::info!(%expired, "reaped what clients left behind");
            }
        }
    });

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let grace = Duration::from_secs(server.shutdown_grace_secs);
    let draining = engine.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        // No new statements; the running ones, and the results their clients have yet to read,
        // may still be fetched until they end (the reaper goes on dropping abandoned ones).
        draining.drain();
        let open: Vec<(&str, usize)> = protocols
            .iter()
            .map(|p| (p.open_work_name(), p.open_work()))
            .collect();
        tracing::info!(
            running = draining.running(),
            open = %counts(&open),
            "shutting down: waiting up to {grace:?} for running statements and unread results"
        );
        let busy =
            || draining.running() + protocols.iter().map(|p| p.open_work()).sum::<usize>() > 0;
        let deadline = tokio::time::Instant::now() + grace;
        while busy() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = stop.send(true);
    });
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    if let Some((listener, routes)) = quack {
        let stop = stopped.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let served = match tls {
                None => serve_on(listener, routes, until_stopped(stop)).await,
                Some(acceptor) => match tls::TlsListener::new(listener, acceptor) {
                    Ok(secure) => serve_on(secure, routes, until_stopped(stop)).await,
                    Err(e) => Err(std::io::Error::other(e.to_string())),
                },
            };
            if let Err(e) = served {
                tracing::error!(error = %e, "the quack listener stopped");
            }
        });
    }
    let (http, flight) = match tls {
        None => tokio::try_join!(
            serve_on(http_listener, http, until_stopped(stopped.clone())),
            serve_on(flight_listener, flight, until_stopped(stopped)),
        ),
        Some(acceptor) => {
            let secure = |l| tls::TlsListener::new(l, acceptor.clone()).map_err(|e| e.to_string());
            tokio::try_join!(
                serve_on(secure(http_listener)?, http, until_stopped(stopped.clone())),
                serve_on(secure(flight_listener)?, flight, until_stopped(stopped)),
            )
        }
    }
    .map_err(|e| e.to_string())?;
    let ((), ()) = (http, flight);
    reaper.abort();
    tracing::info!("sqe-server stopped");
    Ok(())
}

/// `/mcp` behind its resource layer, and the resource's metadata document; None when `[mcp]` is
/// off. Also gives the resource's URI and its sessions' owners.
fn mcp_routes(
    config: &Config,
    engine: &Arc<Engine>,
    authenticator: &Arc<Authenticator>,
    http_addr: SocketAddr,
    tls: bool,
) -> Result<Option<(Router, String, Arc<McpSessions>)>, String> {
    let section = &config.mcp;
    if !section.enabled {
        return Ok(None);
    }
    let mode = match config.mcp_auth_mode()? {
        config::McpAuthMode::Oidc => ResourceMode::Oidc,
        config::McpAuthMode::Static => ResourceMode::Static,
        config::McpAuthMode::Anonymous => ResourceMode::Anonymous,
    };
    let scheme = if tls { "https" } else { "http" };
    let resource = section
        .resource
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{http_addr}/mcp"));
    // The origin of the resource (scheme://authority), where its metadata document is.
    let (origin, host) = match resource.split_once("://") {
        Some((scheme, rest)) => {
            let authority = rest.split('/').next().unwrap_or_default();
            let host = match authority.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or_default().to_string(),
                None => authority.split(':').next().unwrap_or_default().to_string(),
            };
            (format!("{scheme}://{authority}"), host)
        }
        None => return Err(format!("[mcp] resource '{resource}' is not a URI")),
    };
    let mut allowed_hosts = section.allowed_hosts.clone();
    if allowed_hosts.is_empty() {
        allowed_hosts = vec!["localhost".into(), "127.0.0.1".into(), "::1".into(), host];
    }
    let authorization_servers = match (&section.authorization_servers, &config.auth.oidc) {
        (servers, _) if !servers.is_empty() => servers.clone(),
        (_, Some(oidc)) => vec![oidc.issuer.clone()],
        (_, None) => Vec::new(),
    };
    let mcp_config = McpConfig {
        schema: "default".into(),
        allow_writes: section.allow_writes,
        write_roles: section.write_roles.clone(),
        read_scope: section.read_scope.clone(),
        write_scope: section.write_scope.clone(),
        max_rows: section.max_rows,
        max_bytes: section.max_bytes,
        allowed_origins: section.allowed_origins.clone(),
        allowed_hosts,
        max_sessions_per_principal: section.max_sessions_per_user,
        ..McpConfig::new(engine.default_catalog())
    };
    // A token for the endpoint is for the endpoint alone, not for Trino HTTP or Flight SQL.
    authenticator.reserve_audience(&resource);
    let server = Arc::new(ResourceServer {
        authenticator: authenticator.clone(),
        mode,
        resource: resource.clone(),
        metadata_url: format!("{origin}/.well-known/oauth-protected-resource/mcp"),
        read_scope: section.read_scope.clone(),
        write_scope: section.write_scope.clone(),
    });
    let service: Arc<dyn sqe_sessions::QueryService> = engine.clone();
    let sessions = McpSessions::new(&mcp_config);
    let routes = sqe_mcp::router(service, mcp_config.clone(), sessions.clone())
        .layer(middleware::from_fn_with_state(server, resource_layer))
        .merge(sqe_mcp::metadata_router(
            &resource,
            &authorization_servers,
            &mcp_config,
        ));
    Ok(Some((routes, resource, sessions)))
}

/// `name=count` pairs for a log line: `trino_queries=1 flight_results=0`.
fn counts(pairs: &[(&str, usize)]) -> String {
    pairs
        .iter()
        .map(|(name, n)| format!("{name}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `/quack`: DuckDB's Quack protocol, its connection tokens checked by the identity chain.
fn quack_routes(
    engine: &Arc<Engine>,
    authenticator: &Arc<Authenticator>,
    config: &Config,
) -> (Router, Arc<sqe_quack::server::QuackServer>) {
    let identity = authenticator.clone();
    let authenticate: sqe_quack::server::Authenticate = Arc::new(move |token: String| {
        let identity = identity.clone();
        Box::pin(async move {
            let presented = sqe_identity::Presented::Bearer(token);
            match identity.authenticate(&presented).await? {
                Some(who) => Ok((who.principal, who.credential)),
                None => Err(sqe_sessions::SqeError::new(
                    sqe_sessions::ErrorCode::Unauthenticated,
                    "a token is required",
                )),
            }
        }) as futures::future::BoxFuture<'static, _>
    });
    let service: Arc<dyn sqe_sessions::QueryService> = engine.clone();
    let server = sqe_quack::server::QuackServer::new(
        service,
        sqe_quack::server::QuackConfig {
            catalog: engine.default_catalog().to_string(),
            schema: "default".into(),
            authenticate,
            max_sessions_per_principal: config.quack.max_sessions_per_user,
            idle: server_idle(config),
        },
    );
    let server = Arc::new(server);
    (sqe_quack::router(server.clone()), server)
}

/// How long an unfetched result may wait: `[server] result_timeout_secs`, as for Flight SQL.
fn server_idle(config: &Config) -> Duration {
    Duration::from_secs(config.server.result_timeout_secs)
}

/// Serves `router` on `listener` until `stop` resolves, then lets open requests finish. Each
/// request carries its peer's address (`ConnectInfo<SocketAddr>`), for the access log.
async fn serve_on<L>(
    listener: L,
    router: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    axum::serve(
        listener.tap_io(|_| {}),
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stop)
    .await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
