//! TLS for both listeners: a rustls acceptor from PEM files, and an axum listener that hands over
//! connections once their handshake is done (each handshake runs on its own task, with a time limit,
//! so a slow or silent client holds up no one else).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring::default_provider;
use tokio_rustls::server::TlsStream;

use crate::config::TlsConfig;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The acceptor for `config`'s certificate chain and key; h2 (gRPC needs it) and HTTP/1.1 offered.
pub fn acceptor(config: &TlsConfig) -> Result<TlsAcceptor, String> {
    let certs = CertificateDer::pem_file_iter(&config.cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("TLS certificate {}: {e}", config.cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "TLS certificate {}: no certificate in the file",
            config.cert_file.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&config.key_file)
        .map_err(|e| format!("TLS key {}: {e}", config.key_file.display()))?;
    let mut server = ServerConfig::builder_with_provider(Arc::new(default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("TLS certificate and key do not go together: {e}"))?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(server)))
}

/// A listener whose connections are TLS streams.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> io::Result<Self> {
        let local = tcp.local_addr()?;
        let (sender, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            while !sender.is_closed() {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("accept on {local}: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::info!("TLS handshake with {peer} failed: {e}"),
                        Err(_) => tracing::info!("TLS handshake with {peer} timed out"),
                    }
                });
            }
        });
        Ok(Self { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop only ends with this listener; nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}
