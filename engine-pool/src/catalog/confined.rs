//! A catalog's file IO, kept to where its tables may keep their files ([`Confinement`]).
//!
//! Every read, write and delete of a table's metadata, manifests and data files goes through
//! iceberg's `FileIO`, so its storage is the one place to check them: [`ConfinedStorageFactory`]
//! wraps the storage a catalog would use and refuses, before anything is opened, a path its
//! confinement does not allow. (The scan's own Parquet reader opens data files without `FileIO`;
//! it asks `FileIO::new_input` first, which is checked here too.)

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sqe_sessions::ErrorCode;

use super::backend::CatalogRefusal;
use crate::file_access::Confinement;

/// Builds the storage `inner` builds, confined.
#[derive(Debug)]
pub struct ConfinedStorageFactory {
    catalog: String,
    inner: Arc<dyn StorageFactory>,
    confinement: Arc<Confinement>,
}

impl ConfinedStorageFactory {
    pub fn new(catalog: &str, inner: Arc<dyn StorageFactory>, confinement: Confinement) -> Self {
        Self {
            catalog: catalog.to_string(),
            inner,
            confinement: Arc::new(confinement),
        }
    }
}

#[typetag::serde]
impl StorageFactory for ConfinedStorageFactory {
    fn build(&self, config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        Ok(Arc::new(ConfinedStorage {
            catalog: self.catalog.clone(),
            inner: self.inner.build(config)?,
            confinement: self.confinement.clone(),
        }))
    }
}

#[derive(Debug)]
struct ConfinedStorage {
    catalog: String,
    inner: Arc<dyn Storage>,
    confinement: Arc<Confinement>,
}

impl ConfinedStorage {
    fn check(&self, path: &str) -> Result<()> {
        self.confinement.check(path).map_err(|reason| {
            let message = format!("catalog '{}': {reason}", self.catalog);
            Error::new(ErrorKind::DataInvalid, message.clone()).with_source(CatalogRefusal {
                code: ErrorCode::PermissionDenied,
                message,
            })
        })
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for ConfinedStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        self.check(path)?;
        self.inner.exists(path).await
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        self.check(path)?;
        self.inner.metadata(path).await
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        self.check(path)?;
        self.inner.read(path).await
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        self.check(path)?;
        self.inner.reader(path).await
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        self.check(path)?;
        self.inner.write(path, bs).await
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        self.check(path)?;
        self.inner.writer(path).await
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.check(path)?;
        self.inner.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        self.check(path)?;
        self.inner.delete_prefix(path).await
    }

    /// Every path is checked before the first is deleted: a purge is all or nothing.
    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> Result<()> {
        let paths: Vec<String> = paths.collect().await;
        for path in &paths {
            self.check(path)?;
        }
        self.inner
            .delete_stream(futures::stream::iter(paths).boxed())
            .await
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        self.check(path)?;
        self.inner.new_input(path)
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        self.check(path)?;
        self.inner.new_output(path)
    }
}

// iceberg's storage traits are serializable, to ship a table's file IO to another process. A
// confined storage stays in the process that judged its paths: it refuses to be shipped.

fn not_shipped<E: serde::ser::Error>() -> E {
    E::custom("a confined catalog storage is not serializable")
}

fn not_received<E: serde::de::Error>() -> E {
    E::custom("a confined catalog storage is not deserializable")
}

impl Serialize for ConfinedStorageFactory {
    fn serialize<S: Serializer>(&self, _: S) -> std::result::Result<S::Ok, S::Error> {
        Err(not_shipped())
    }
}

impl<'de> Deserialize<'de> for ConfinedStorageFactory {
    fn deserialize<D: Deserializer<'de>>(_: D) -> std::result::Result<Self, D::Error> {
        Err(not_received())
    }
}

impl Serialize for ConfinedStorage {
    fn serialize<S: Serializer>(&self, _: S) -> std::result::Result<S::Ok, S::Error> {
        Err(not_shipped())
    }
}

impl<'de> Deserialize<'de> for ConfinedStorage {
    fn deserialize<D: Deserializer<'de>>(_: D) -> std::result::Result<Self, D::Error> {
        Err(not_received())
    }
}
