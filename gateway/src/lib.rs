//! The gateway: loads the configuration, opens the engine, and serves each protocol on its listener.
//! Protocols see only the `QueryService` trait; this crate is where the engine is wired in.

mod config;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use axum::routing::get;
use axum::{Router, middleware};
pub use config::Config;
use sqe_engine::{Engine, EngineConfig};
use sqe_flight_sql::FlightSqlConfig;
use sqe_identity::{Authenticator, http_layer};
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

fn expand_home(path: &std::path::Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(rest),
        Err(_) => path.to_path_buf(),
    }
}

pub fn main(args: Args) -> ExitCode {
    let config = match Config::load(args.config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sqe-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
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

/// Runs until SIGINT or SIGTERM, then stops accepting and lets running requests finish.
pub async fn serve(config: Config) -> Result<(), String> {
    let mut catalogs = vec![(
        config.catalog.name.clone(),
        expand_home(&config.catalog.warehouse),
    )];
    catalogs.extend(
        config
            .catalog
            .mounts
            .iter()
            .map(|m| (m.name.clone(), expand_home(&m.warehouse))),
    );
    let engine = Arc::new(
        Engine::open(EngineConfig {
            catalogs,
            admission: config.engine.admission(),
            ..EngineConfig::default()
        })
        .map_err(|e| e.to_string())?,
    );
    let trino_config = TrinoConfig {
        https: config.server.tls.is_some(),
        impersonators: config.auth.impersonators.clone(),
        ..TrinoConfig::new(engine.default_catalog())
    };
    let trino = TrinoService::new(engine.clone(), trino_config);
    let authenticator = Arc::new(Authenticator::new(config.auth.clone())?);
    let auth = || middleware::from_fn_with_state(authenticator.clone(), http_layer);
    // Authentication wraps the protocol routes; health probes stay open.
    let http = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/ready", get(|| async { "ready" }))
        .merge(sqe_trino::router(trino).layer(auth()));
    let flight = sqe_flight_sql::service(
        engine.clone(),
        FlightSqlConfig {
            default_catalog: engine.default_catalog().to_string(),
            default_schema: "default".into(),
        },
    );
    let flight = tonic::service::Routes::new(flight)
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
    // Tests and scripts read these lines to find the ports.
    let local = |l: &tokio::net::TcpListener| l.local_addr().map_err(|e| e.to_string());
    let secured = if tls.is_some() { " (tls)" } else { "" };
    println!(
        "sqe-server: trino http listening on {}{secured}",
        local(&http_listener)?
    );
    println!(
        "sqe-server: flight sql listening on {}{secured}",
        local(&flight_listener)?
    );

    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
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
    Ok(())
}

/// Serves `router` on `listener` until `stop` resolves, then lets open requests finish.
async fn serve_on<L>(
    listener: L,
    router: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    axum::serve(listener, router)
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
