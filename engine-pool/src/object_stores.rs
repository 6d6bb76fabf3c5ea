//! The object stores the file functions read (`read_parquet('s3://bucket/key')`, …).
//!
//! `s3://` (and `s3a://`) URLs get a store per bucket, made on first use. Its settings come from
//! the session's own S3 secret when it has one (`CREATE SECRET … (TYPE s3, …)`), otherwise from
//! the standard environment (`AWS_ACCESS_KEY_ID`, `AWS_REGION`, `AWS_ENDPOINT_URL`, …). Every
//! other URL goes to DataFusion's registry (local files).
//!
//! A session with a secret gets a registry of its own for each statement, with caches of its
//! own: a listing or a file footer read with one user's credentials is never served to another
//! user.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use datafusion::object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use url::Url;

/// S3 settings as iceberg names them (`s3.access-key-id`, `s3.endpoint`, …), from a secret; empty
/// for the environment alone.
pub(crate) type S3Settings = BTreeMap<String, String>;

pub(crate) struct ObjectStores {
    local: DefaultObjectStoreRegistry,
    s3: S3Settings,
    buckets: RwLock<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl std::fmt::Debug for ObjectStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStores")
            .field("s3", &self.s3.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ObjectStores {
    pub(crate) fn new(s3: S3Settings) -> Self {
        Self {
            local: DefaultObjectStoreRegistry::new(),
            s3,
            buckets: RwLock::new(HashMap::new()),
        }
    }

    fn s3_store(&self, bucket: &str) -> DFResult<Arc<dyn ObjectStore>> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let setting = |key: &str| self.s3.get(key).map(String::as_str);
        if let Some(v) = setting("s3.access-key-id") {
            builder = builder.with_access_key_id(v);
        }
        if let Some(v) = setting("s3.secret-access-key") {
            builder = builder.with_secret_access_key(v);
        }
        if let Some(v) = setting("s3.session-token") {
            builder = builder.with_token(v);
        }
        if let Some(v) = setting("s3.region") {
            builder = builder.with_region(v);
        }
        let endpoint = setting("s3.endpoint")
            .map(str::to_string)
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        if let Some(endpoint) = &endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        // A store of one's own is addressed path-style unless said otherwise, as in the catalogs.
        let path_style = setting("s3.path-style-access")
            .map(|v| v.eq_ignore_ascii_case("true"))
            .unwrap_or(endpoint.is_some());
        builder = builder.with_virtual_hosted_style_request(!path_style);
        // No credential anywhere: the requests go unsigned (a public bucket), as DuckDB does, rather
        // than wait on a cloud machine's metadata service that is not there.
        let credentialed = setting("s3.access-key-id").is_some()
            || [
                "AWS_ACCESS_KEY_ID",
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            ]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if !credentialed {
            builder = builder.with_skip_signature(true);
        }
        let store = builder
            .build()
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(Arc::new(store))
    }
}

impl ObjectStoreRegistry for ObjectStores {
    fn register_store(
        &self,
        url: &Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        self.local.register_store(url, store)
    }

    fn deregister_store(&self, url: &Url) -> DFResult<Arc<dyn ObjectStore>> {
        self.local.deregister_store(url)
    }

    fn get_store(&self, url: &Url) -> DFResult<Arc<dyn ObjectStore>> {
        if !matches!(url.scheme(), "s3" | "s3a") {
            return self.local.get_store(url);
        }
        let bucket = url.host_str().unwrap_or_default().to_string();
        if bucket.is_empty() {
            return Err(DataFusionError::Plan(format!("'{url}' names no bucket")));
        }
        if let Some(store) = self
            .buckets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&bucket)
        {
            return Ok(store.clone());
        }
        let store = self.s3_store(&bucket)?;
        self.buckets
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(bucket, store.clone());
        Ok(store)
    }
}
