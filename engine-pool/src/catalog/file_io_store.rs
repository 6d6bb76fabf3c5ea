//! A table's iceberg `FileIO` seen as an `object_store` store, so that DataFusion's Parquet reader
//! reads files in object stores the way it reads local ones: cached footers and page indexes,
//! ranges of a row group fetched together (near ones in one request, the rest ten at a time), and
//! the pruning and late filters of its reader.
//!
//! Every byte still comes through the table's `FileIO`, so through the catalog's storage
//! (`storage`): the caller's own or vended credentials, the catalog's confinement, one store per
//! scan and never one shared between users. The store reads only the files of its scan, by the
//! exact location the manifests give (names in object stores may hold anything a URL may), and
//! refuses every other path and every write.
//!
//! What it reads it also keeps in the engine's [`ObjectCache`], and what the cache holds it serves
//! from there, but only for a file the caller's credentials have reached in this scan: by a read,
//! or by asking the store for the file's size ([`FileIoStore::verify`], before the footer, which
//! DataFusion caches too, is looked at).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::FileIO;

use super::object_cache::{FileKey, ObjectCache};

type StoreResult<T> = Result<T, datafusion::object_store::Error>;

const STORE: &str = "iceberg FileIO";

/// The files of one scan, readable through the table's `FileIO`.
pub(crate) struct FileIoStore {
    file_io: FileIO,
    /// Each file's location and size, by the path the scan's reader names it with.
    files: HashMap<Path, (String, u64)>,
    cache: Option<Arc<ObjectCache>>,
    /// Files the caller's credentials reached in this scan: the cache may serve them.
    reached: Mutex<HashSet<Path>>,
}

impl FileIoStore {
    pub(crate) fn new(file_io: FileIO, cache: Option<Arc<ObjectCache>>) -> Self {
        Self {
            file_io,
            files: HashMap::new(),
            cache: cache.filter(|c| c.enabled()),
            reached: Mutex::default(),
        }
    }

    /// Adds the file at `location` (`size` bytes) and returns the path to read it by. A path of an
    /// object store keeps its scheme as its first part (`s3:/bucket/key`), so that it never names
    /// the same entry of the footer cache as a local file.
    pub(crate) fn add(&mut self, location: &str, size: u64) -> Path {
        let path = Path::from(location);
        self.files
            .entry(path.clone())
            .or_insert_with(|| (location.to_string(), size));
        path
    }

    /// The cache's name of a file: the store's endpoint (two S3-alikes may hold a bucket of one
    /// name), its location and its size.
    fn key(&self, location: &str, size: u64) -> FileKey {
        let endpoint = self.file_io.config().get("s3.endpoint").cloned();
        Arc::new((endpoint.unwrap_or_default(), location.to_string(), size))
    }

    fn has_reached(&self, path: &Path) -> bool {
        let reached = self.reached.lock().unwrap_or_else(|e| e.into_inner());
        reached.contains(path)
    }

    fn reach(&self, path: &Path) {
        let mut reached = self.reached.lock().unwrap_or_else(|e| e.into_inner());
        reached.insert(path.clone());
    }

    /// Asks the store, with the caller's credentials, for the file at `path` (once a scan): an
    /// error if they cannot reach it or it is not the size the manifests give.
    pub(crate) async fn verify(&self, path: &Path) -> StoreResult<()> {
        if self.has_reached(path) {
            return Ok(());
        }
        let (location, size) = self.file(path)?;
        let failed = |e: iceberg::Error| datafusion::object_store::Error::Generic {
            store: STORE,
            source: Box::new(e),
        };
        let found = self
            .file_io
            .new_input(location)
            .map_err(failed)?
            .metadata()
            .await
            .map_err(failed)?;
        if found.size != *size {
            return Err(datafusion::object_store::Error::Generic {
                store: STORE,
                source: format!(
                    "{location} holds {} bytes, where the table's manifest says {size}",
                    found.size
                )
                .into(),
            });
        }
        self.reach(path);
        Ok(())
    }

    fn file(&self, path: &Path) -> StoreResult<&(String, u64)> {
        self.files
            .get(path)
            .ok_or_else(|| datafusion::object_store::Error::NotFound {
                path: path.to_string(),
                source: "not a file of this scan".into(),
            })
    }

    async fn read(&self, location: &str, range: Range<u64>) -> StoreResult<Bytes> {
        let failed = |e: iceberg::Error| datafusion::object_store::Error::Generic {
            store: STORE,
            source: Box::new(e),
        };
        let reader = self
            .file_io
            .new_input(location)
            .map_err(failed)?
            .reader()
            .await
            .map_err(failed)?;
        let expected = range.end - range.start;
        let bytes = reader.read(range).await.map_err(failed)?;
        if bytes.len() as u64 != expected {
            return Err(datafusion::object_store::Error::Generic {
                store: STORE,
                source: format!(
                    "{location}: read {} bytes where {expected} were asked for",
                    bytes.len()
                )
                .into(),
            });
        }
        Ok(bytes)
    }
}

fn not_supported<T>(what: &str) -> StoreResult<T> {
    Err(datafusion::object_store::Error::NotSupported {
        source: format!("{STORE}: a scan's store only reads ({what})").into(),
    })
}

impl fmt::Display for FileIoStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileIoStore({} files)", self.files.len())
    }
}

/// Without the file IO, whose properties may hold the caller's token and storage keys.
impl fmt::Debug for FileIoStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[async_trait]
impl ObjectStore for FileIoStore {
    async fn get_opts(&self, path: &Path, options: GetOptions) -> StoreResult<GetResult> {
        let (location, size) = self.file(path)?;
        let range = match &options.range {
            Some(range) => {
                range
                    .as_range(*size)
                    .map_err(|e| datafusion::object_store::Error::Generic {
                        store: STORE,
                        source: Box::new(e),
                    })?
            }
            None => 0..*size,
        };
        let meta = ObjectMeta {
            location: path.clone(),
            last_modified: DateTime::<Utc>::UNIX_EPOCH,
            size: *size,
            e_tag: None,
            version: None,
        };
        if options.head {
            return Ok(GetResult {
                payload: GetResultPayload::Stream(futures::stream::empty().boxed()),
                meta,
                range,
                attributes: Attributes::default(),
            });
        }
        let bytes = if range.is_empty() {
            Bytes::new()
        } else {
            let bytes = self.read(location, range.clone()).await?;
            self.reach(path);
            bytes
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(futures::stream::once(async { Ok(bytes) }).boxed()),
            meta,
            range,
            attributes: Attributes::default(),
        })
    }

    /// The ranges, near ones fetched together (ten requests at a time), the cached ones from the
    /// cache.
    async fn get_ranges(&self, path: &Path, ranges: &[Range<u64>]) -> StoreResult<Vec<Bytes>> {
        let (location, size) = self.file(path)?;
        let fetch = |ranges: Vec<Range<u64>>| async move {
            let ranges = datafusion::object_store::coalesce_ranges(
                &ranges,
                |range| self.read(location, range),
                datafusion::object_store::OBJECT_STORE_COALESCE_DEFAULT,
            )
            .await?;
            self.reach(path);
            Ok::<_, datafusion::object_store::Error>(ranges)
        };
        let Some(cache) = &self.cache else {
            return fetch(ranges.to_vec()).await;
        };
        let key = self.key(location, *size);
        let mut found = Vec::with_capacity(ranges.len());
        for range in ranges {
            found.push(cache.fetch(&key, range).await);
        }
        if found.iter().any(Option::is_some) {
            self.verify(path).await?;
        }
        let missing: Vec<usize> = (0..ranges.len()).filter(|i| found[*i].is_none()).collect();
        if !missing.is_empty() {
            let fetched = fetch(missing.iter().map(|i| ranges[*i].clone()).collect()).await?;
            for (i, bytes) in missing.into_iter().zip(fetched) {
                // A copy of its own: a slice would keep the whole coalesced request alive.
                let bytes = Bytes::copy_from_slice(&bytes);
                cache.put(&key, ranges[i].start, bytes.clone());
                found[i] = Some(bytes);
            }
        }
        Ok(found.into_iter().flatten().collect())
    }

    async fn put_opts(&self, _: &Path, _: PutPayload, _: PutOptions) -> StoreResult<PutResult> {
        not_supported("put")
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> StoreResult<Box<dyn MultipartUpload>> {
        not_supported("put")
    }

    fn delete_stream(
        &self,
        _: BoxStream<'static, StoreResult<Path>>,
    ) -> BoxStream<'static, StoreResult<Path>> {
        futures::stream::once(async { not_supported("delete") }).boxed()
    }

    fn list(&self, _: Option<&Path>) -> BoxStream<'static, StoreResult<ObjectMeta>> {
        futures::stream::once(async { not_supported("list") }).boxed()
    }

    async fn list_with_delimiter(&self, _: Option<&Path>) -> StoreResult<ListResult> {
        not_supported("list")
    }

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> StoreResult<()> {
        not_supported("copy")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::object_store::ObjectStoreExt;

    #[tokio::test]
    async fn reads_ranges_of_its_own_files_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("sqe-file-io-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("the test file is readable");
        let file = dir.join("a b=1.parquet");
        std::fs::write(&file, b"0123456789").expect("the test file is readable");
        let location = format!("file://{}", file.display());
        let mut store = FileIoStore::new(FileIO::new_with_fs(), None);
        let path = store.add(&location, 10);
        let store: std::sync::Arc<dyn ObjectStore> = std::sync::Arc::new(store);

        assert_eq!(
            store
                .get_range(&path, 2..5)
                .await
                .expect("the test file is readable"),
            Bytes::from("234")
        );
        let ranges = store
            .get_ranges(&path, &[0..1, 8..10])
            .await
            .expect("the test file is readable");
        assert_eq!(ranges, vec![Bytes::from("0"), Bytes::from("89")]);
        let meta = store.head(&path).await.expect("the test file is readable");
        assert_eq!(meta.size, 10);
        // Past the end: an error naming the request, not a short read.
        assert!(store.get_range(&path, 12..14).await.is_err());

        let other = Path::from(format!("file://{}/other.parquet", dir.display()).as_str());
        let err = store
            .get_range(&other, 0..1)
            .await
            .expect_err("another file is refused")
            .to_string();
        assert!(err.contains("not a file of this scan"), "{err}");
        let err = store
            .put(&path, PutPayload::from_static(b"x"))
            .await
            .expect_err("writes are refused")
            .to_string();
        assert!(err.contains("only reads"), "{err}");
        std::fs::remove_dir_all(&dir).expect("the test file is readable");
    }

    /// A new directory holding a ten-byte file: (the directory, the file, its location).
    fn scratch_file(prefix: &str) -> (std::path::PathBuf, std::path::PathBuf, String) {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("the test file is readable");
        let file = dir.join("f.parquet");
        std::fs::write(&file, b"0123456789").expect("the test file is readable");
        let location = format!("file://{}", file.display());
        (dir, file, location)
    }

    #[tokio::test]
    async fn the_cache_serves_a_file_only_once_the_caller_reached_it() {
        let (dir, file, location) = scratch_file("sqe-file-io-cache");
        let cache = Arc::new(ObjectCache::new(1 << 20));

        let mut first = FileIoStore::new(FileIO::new_with_fs(), Some(cache.clone()));
        let path = first.add(&location, 10);
        let got = first
            .get_ranges(&path, &[0..2, 5..8])
            .await
            .expect("the test file is readable");
        assert_eq!(got, vec![Bytes::from("01"), Bytes::from("567")]);
        assert_eq!(cache.usage().entries, 2);

        // The file changes under the cache (it never does in Iceberg): a later scan whose caller
        // reaches the file gets the cached bytes...
        std::fs::write(&file, b"abcdefghij").expect("the test file is readable");
        let mut second = FileIoStore::new(FileIO::new_with_fs(), Some(cache.clone()));
        let path = second.add(&location, 10);
        let got = second
            .get_ranges(&path, &[5..8, 8..10])
            .await
            .expect("the test file is readable");
        assert_eq!(got, vec![Bytes::from("567"), Bytes::from("ij")]);

        // ...and a caller who cannot reach it gets an error, not the cached bytes.
        std::fs::remove_file(&file).expect("the test file is readable");
        let mut third = FileIoStore::new(FileIO::new_with_fs(), Some(cache.clone()));
        let path = third.add(&location, 10);
        assert!(third.get_ranges(&path, &[0..2, 5..8]).await.is_err());
        assert!(third.verify(&path).await.is_err());
        std::fs::remove_dir_all(&dir).expect("the test file is readable");
    }

    #[tokio::test]
    async fn a_restarted_engine_reads_what_its_disk_tier_kept_once_the_caller_reached_it() {
        let (dir, file, location) = scratch_file("sqe-file-io-disk");
        let objects = dir.join("objects");
        let with_disk = || {
            Arc::new(
                ObjectCache::new(1 << 20)
                    .with_disk(&objects, 1 << 20)
                    .expect("the cache opens"),
            )
        };
        let cache = with_disk();
        let mut first = FileIoStore::new(FileIO::new_with_fs(), Some(cache.clone()));
        let path = first.add(&location, 10);
        let got = first
            .get_ranges(&path, &[0..2, 5..8])
            .await
            .expect("the test file is readable");
        assert_eq!(got, vec![Bytes::from("01"), Bytes::from("567")]);
        // The disk tier is written in the background.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while cache.disk_usage() != Some((2, 5)) {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                cache.disk_usage()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        drop((first, cache));

        // A new engine's cache, memory empty: the file changes under it (it never does in
        // Iceberg), and a scan whose caller reaches it gets the bytes kept on disk...
        std::fs::write(&file, b"abcdefghij").expect("the test file is readable");
        let cache = with_disk();
        assert_eq!(cache.usage().entries, 0);
        let mut second = FileIoStore::new(FileIO::new_with_fs(), Some(cache.clone()));
        let path = second.add(&location, 10);
        let got = second
            .get_ranges(&path, &[5..8, 8..10])
            .await
            .expect("the test file is readable");
        assert_eq!(got, vec![Bytes::from("567"), Bytes::from("ij")]);
        // ...which are back in memory.
        assert_eq!(cache.usage().entries, 2);

        // A caller who cannot reach the file gets an error, not the kept bytes.
        std::fs::remove_file(&file).expect("the test file is readable");
        let cache = with_disk();
        let mut third = FileIoStore::new(FileIO::new_with_fs(), Some(cache));
        let path = third.add(&location, 10);
        assert!(third.get_ranges(&path, &[0..2, 5..8]).await.is_err());
        std::fs::remove_dir_all(&dir).expect("the test file is readable");
    }

    #[test]
    fn remote_paths_keep_their_scheme() {
        let mut store = FileIoStore::new(FileIO::new_with_fs(), None);
        let path = store.add("s3://bucket/t/data/x=a%2Fb/f.parquet", 1);
        assert!(path.as_ref().starts_with("s3:/bucket/"), "{path}");
        assert_eq!(
            store.file(&path).expect("the test file is readable").0,
            "s3://bucket/t/data/x=a%2Fb/f.parquet"
        );
    }
}
