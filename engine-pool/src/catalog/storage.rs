//! The storage of a catalog's tables: local paths through iceberg's local file system storage,
//! URLs (`s3://`, …) through OpenDAL, and every path judged first by the catalog's
//! [`Confinement`].
//!
//! Every read, write and delete of a table's metadata, manifests and data files goes through
//! iceberg's `FileIO`, so its storage is the one place to check them: a path the confinement does
//! not allow is refused before anything is opened. (The scan's own Parquet reader opens local data
//! files without `FileIO`; it asks `FileIO::new_input` first, which is checked here too.)
//!
//! Object stores take their settings from the catalog's properties (`s3.endpoint`, …, and what a
//! REST catalog vends with a table), then from the standard environment (`AWS_*`).

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorageFactory, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use iceberg_storage_opendal::OpenDalResolvingStorageFactory;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sqe_sessions::ErrorCode;

use crate::error::CatalogRefusal;
use crate::files::policy::Confinement;

/// Builds a catalog's [`CatalogStorage`].
#[derive(Debug)]
pub struct CatalogStorageFactory {
    catalog: String,
    confinement: Arc<Confinement>,
}

impl CatalogStorageFactory {
    pub fn new(catalog: &str, confinement: Confinement) -> Self {
        Self {
            catalog: catalog.to_string(),
            confinement: Arc::new(confinement),
        }
    }
}

#[typetag::serde]
impl StorageFactory for CatalogStorageFactory {
    fn build(&self, config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        let remote = with_environment(config.props(), |k| std::env::var(k).ok());
        Ok(Arc::new(CatalogStorage {
            catalog: self.catalog.clone(),
            local: LocalFsStorageFactory.build(config)?,
            remote: OpenDalResolvingStorageFactory::new().build(&remote)?,
            confinement: self.confinement.clone(),
        }))
    }
}

/// The object store settings of `props`, with an S3 endpoint from the standard environment
/// (`AWS_ENDPOINT_URL`) when they name none. An endpoint of one's own (MinIO, Ceph, Garage, a
/// local test server) is addressed path-style unless `s3.path-style-access` says otherwise, as
/// the AWS SDKs do for a custom endpoint; AWS itself is addressed virtual-host-style, Iceberg's
/// default.
fn with_environment(
    props: &std::collections::HashMap<String, String>,
    env: impl Fn(&str) -> Option<String>,
) -> StorageConfig {
    let mut config = StorageConfig::from_props(props.clone());
    if !props.contains_key("s3.endpoint")
        && let Some(endpoint) = env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL"))
        && !endpoint.is_empty()
    {
        config = config.with_prop("s3.endpoint", endpoint);
        if !props.contains_key("s3.path-style-access") {
            config = config.with_prop("s3.path-style-access", "true");
        }
    }
    config
}

#[derive(Debug)]
struct CatalogStorage {
    catalog: String,
    local: Arc<dyn Storage>,
    remote: Arc<dyn Storage>,
    confinement: Arc<Confinement>,
}

/// Whether `path` is a local one: no scheme, or `file:`.
fn is_local(path: &str) -> bool {
    path.starts_with("file:") || !path.contains("://")
}

impl CatalogStorage {
    /// The storage for `path`, once the confinement allows it.
    fn pick(&self, path: &str) -> Result<&dyn Storage> {
        self.confinement.check(path).map_err(|reason| {
            let message = format!("catalog '{}': {reason}", self.catalog);
            Error::new(ErrorKind::DataInvalid, message.clone()).with_source(CatalogRefusal {
                code: ErrorCode::PermissionDenied,
                message,
            })
        })?;
        Ok(if is_local(path) {
            self.local.as_ref()
        } else {
            self.remote.as_ref()
        })
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for CatalogStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        self.pick(path)?.exists(path).await
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        self.pick(path)?.metadata(path).await
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        self.pick(path)?.read(path).await
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        self.pick(path)?.reader(path).await
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        self.pick(path)?.write(path, bs).await
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        self.pick(path)?.writer(path).await
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.pick(path)?.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        self.pick(path)?.delete_prefix(path).await
    }

    /// Every path is checked before the first is deleted: a purge is all or nothing.
    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> Result<()> {
        let paths: Vec<String> = paths.collect().await;
        let (mut local, mut remote) = (Vec::new(), Vec::new());
        for path in paths {
            self.pick(&path)?;
            if is_local(&path) {
                local.push(path);
            } else {
                remote.push(path);
            }
        }
        for (storage, paths) in [(&self.local, local), (&self.remote, remote)] {
            if !paths.is_empty() {
                storage
                    .delete_stream(futures::stream::iter(paths).boxed())
                    .await?;
            }
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        self.pick(path)?.new_input(path)
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        self.pick(path)?.new_output(path)
    }
}

// iceberg's storage traits are serializable, to ship a table's file IO to another process. A
// catalog's storage stays in the process that judged its paths: it refuses to be shipped.

fn not_shipped<E: serde::ser::Error>() -> E {
    E::custom("a catalog's storage is not serializable")
}

fn not_received<E: serde::de::Error>() -> E {
    E::custom("a catalog's storage is not deserializable")
}

impl Serialize for CatalogStorageFactory {
    fn serialize<S: Serializer>(&self, _: S) -> std::result::Result<S::Ok, S::Error> {
        Err(not_shipped())
    }
}

impl<'de> Deserialize<'de> for CatalogStorageFactory {
    fn deserialize<D: Deserializer<'de>>(_: D) -> std::result::Result<Self, D::Error> {
        Err(not_received())
    }
}

impl Serialize for CatalogStorage {
    fn serialize<S: Serializer>(&self, _: S) -> std::result::Result<S::Ok, S::Error> {
        Err(not_shipped())
    }
}

impl<'de> Deserialize<'de> for CatalogStorage {
    fn deserialize<D: Deserializer<'de>>(_: D) -> std::result::Result<Self, D::Error> {
        Err(not_received())
    }
}

/// A file an object store listing gives.
pub(crate) struct Listed {
    /// Its location, in the scheme and bucket of the folder listed.
    pub location: String,
    pub size: u64,
    pub modified: Option<std::time::SystemTime>,
}

/// The files under `folder` (an `s3://bucket/prefix` URL; `s3a` and `s3n` alike), listed with the
/// object store settings `file_io` reaches its files with (the caller's own or vended credentials,
/// else the standard environment's). iceberg's `FileIO` cannot list; this lists only.
pub(crate) async fn list(file_io: &iceberg::io::FileIO, folder: &str) -> Result<Vec<Listed>> {
    use iceberg::io::{
        CLIENT_REGION, S3_ACCESS_KEY_ID, S3_ALLOW_ANONYMOUS, S3_ASSUME_ROLE_ARN,
        S3_ASSUME_ROLE_EXTERNAL_ID, S3_ASSUME_ROLE_SESSION_NAME, S3_ENDPOINT, S3_PATH_STYLE_ACCESS,
        S3_REGION, S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN,
    };
    let invalid = |why: String| Error::new(ErrorKind::FeatureUnsupported, why);
    let url = url::Url::parse(folder).map_err(|e| invalid(format!("{folder}: {e}")))?;
    let scheme = url.scheme();
    if !matches!(scheme, "s3" | "s3a" | "s3n") {
        return Err(invalid(format!(
            "listing {folder}: only S3 object stores are listed"
        )));
    }
    let bucket = url
        .host_str()
        .ok_or_else(|| invalid(format!("{folder} names no bucket")))?;
    let prefix = format!("{}/", url.path().trim_matches('/'));
    let config = with_environment(file_io.config().props(), |k| std::env::var(k).ok());
    let props = config.props();
    let truthy = |key: &str| {
        props
            .get(key)
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "t" | "1" | "on"))
    };
    let mut builder = opendal::services::S3::default().bucket(bucket);
    type Set = fn(opendal::services::S3, &str) -> opendal::services::S3;
    let settings: [(&str, Set); 9] = [
        (S3_ENDPOINT, |b, v| b.endpoint(v)),
        (S3_ACCESS_KEY_ID, |b, v| b.access_key_id(v)),
        (S3_SECRET_ACCESS_KEY, |b, v| b.secret_access_key(v)),
        (S3_SESSION_TOKEN, |b, v| b.session_token(v)),
        (S3_REGION, |b, v| b.region(v)),
        (CLIENT_REGION, |b, v| b.region(v)),
        (S3_ASSUME_ROLE_ARN, |b, v| b.role_arn(v)),
        (S3_ASSUME_ROLE_EXTERNAL_ID, |b, v| b.external_id(v)),
        (S3_ASSUME_ROLE_SESSION_NAME, |b, v| b.role_session_name(v)),
    ];
    for (key, set) in settings {
        if let Some(value) = props.get(key) {
            builder = set(builder, value);
        }
    }
    // Iceberg's default addressing is virtual-host style, as for FileIO's own reads.
    if !truthy(S3_PATH_STYLE_ACCESS) {
        builder = builder.enable_virtual_host_style();
    }
    if truthy(S3_ALLOW_ANONYMOUS) {
        builder = builder.skip_signature();
    }
    let store = opendal::Operator::new(builder)
        .map_err(|e| invalid(format!("{folder}: {e}")))?
        .finish();
    let failed = |e: opendal::Error| {
        Error::new(ErrorKind::Unexpected, format!("listing {folder}: {e}")).with_source(e)
    };
    let mut lister = store
        .lister_with(&prefix)
        .recursive(true)
        .await
        .map_err(failed)?;
    let mut files = Vec::new();
    while let Some(entry) = lister.next().await {
        let entry = entry.map_err(failed)?;
        let metadata = entry.metadata();
        if !metadata.is_file() {
            continue;
        }
        files.push(Listed {
            location: format!("{scheme}://{bucket}/{}", entry.path()),
            size: metadata.content_length(),
            modified: metadata.last_modified().map(std::time::SystemTime::from),
        });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn an_endpoint_from_the_environment_is_addressed_by_path() {
        let env = |k: &str| (k == "AWS_ENDPOINT_URL").then(|| "http://127.0.0.1:9000".to_string());
        let none = |_: &str| None;
        let props = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let got = |c: StorageConfig, k: &str| c.get(k).cloned();

        let c = with_environment(&props(&[]), env);
        assert_eq!(
            got(c.clone(), "s3.endpoint").as_deref(),
            Some("http://127.0.0.1:9000")
        );
        assert_eq!(got(c, "s3.path-style-access").as_deref(), Some("true"));

        let c = with_environment(&props(&[("s3.path-style-access", "false")]), env);
        assert_eq!(got(c, "s3.path-style-access").as_deref(), Some("false"));

        // A configured endpoint wins, and its addressing stays as configured.
        let c = with_environment(&props(&[("s3.endpoint", "https://minio:9000")]), env);
        assert_eq!(
            got(c.clone(), "s3.endpoint").as_deref(),
            Some("https://minio:9000")
        );
        assert_eq!(got(c, "s3.path-style-access"), None);

        let c = with_environment(&props(&[]), none);
        assert_eq!(got(c, "s3.endpoint"), None);
    }
}
