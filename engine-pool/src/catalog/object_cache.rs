//! Bytes that scans read from object stores, kept in memory for the scans after them, as DuckDB
//! keeps its external file cache: a query run again, or another query over the same columns, reads
//! them at memory speed instead of paying the store's latency on every row group.
//!
//! An entry is one range a reader asked for (a column chunk, or some pages of one), keyed by the
//! file's location, its size and the store's endpoint; Iceberg never rewrites a data file in
//! place, so an entry stays true as long as a file of that name and size exists. The least
//! recently used entries go first once the cache holds its capacity.
//!
//! With a directory (`[engine] object_cache_dir`), what is read is also written to disk
//! (`disk_cache`), where it outlives memory's room and the process; a read that memory misses
//! looks there, and what it finds goes back into memory.
//!
//! The cache is the engine's, shared by every session, so it never answers a scan by itself: a
//! scan's store serves a file's cached bytes only once the caller's own credentials reached that
//! file in that scan (`file_io_store`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::disk_cache::{DiskCache, object_key};
use sqe_sessions::SqeResult;

/// Bytes waiting to be written to the disk tier at most; past it a read is not written there.
const DISK_WRITES_PENDING: usize = 64 << 20;

/// A file of the cache: (the store's endpoint, the file's location, its size in bytes).
pub(crate) type FileKey = Arc<(String, String, u64)>;

/// The engine's cache of object store reads; `capacity` bytes at most (0: nothing is kept).
#[derive(Debug)]
pub struct ObjectCache {
    capacity: usize,
    inner: Mutex<Inner>,
    disk: Option<Arc<DiskCache>>,
    /// Bytes handed to the disk tier and not yet written.
    pending: Arc<AtomicUsize>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Each file's entries by their first byte.
    files: HashMap<FileKey, BTreeMap<u64, Entry>>,
    /// Every entry by when it was last used: (file, first byte).
    used: BTreeMap<u64, (FileKey, u64)>,
    clock: u64,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    bytes: Bytes,
    used: u64,
}

/// Hits and misses, and what the cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheUse {
    pub entries: usize,
    pub bytes: usize,
}

impl ObjectCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::default(),
            disk: None,
            pending: Arc::default(),
        }
    }

    /// The cache with a disk tier of `capacity` bytes in `dir` (made if missing; what it holds
    /// from before is served again).
    pub fn with_disk(mut self, dir: &Path, capacity: u64) -> SqeResult<Self> {
        self.disk = Some(Arc::new(DiskCache::open(dir, capacity)?));
        Ok(self)
    }

    /// Whether the cache keeps anything.
    pub fn enabled(&self) -> bool {
        self.capacity > 0 || self.disk.is_some()
    }

    /// The bytes of `range` of `file`, from memory or else from the disk tier (which puts them
    /// back in memory), if one entry holds them all.
    pub(crate) async fn fetch(&self, file: &FileKey, range: &Range<u64>) -> Option<Bytes> {
        if let Some(bytes) = self.get(file, range) {
            return Some(bytes);
        }
        let disk = self.disk.clone()?;
        let (object, wanted) = (disk_key(file), range.clone());
        if !disk.holds(&object, range) {
            return None;
        }
        let bytes = tokio::task::spawn_blocking(move || disk.get(&object, &wanted))
            .await
            .ok()??;
        self.keep(file, range.start, bytes.clone());
        Some(bytes)
    }

    /// Keeps `bytes`, the bytes of `file` from `start` on, in memory and (written in the
    /// background, unless too many bytes already wait for the disk) in the disk tier.
    pub(crate) fn put(&self, file: &FileKey, start: u64, bytes: Bytes) {
        if let Some(disk) = &self.disk {
            let len = bytes.len();
            let pending = self.pending.fetch_add(len, Ordering::Relaxed);
            if pending + len <= DISK_WRITES_PENDING {
                let (disk, object, written) = (disk.clone(), disk_key(file), bytes.clone());
                let done = self.pending.clone();
                tokio::task::spawn_blocking(move || {
                    disk.put(&object, start, &written);
                    done.fetch_sub(len, Ordering::Relaxed);
                });
            } else {
                self.pending.fetch_sub(len, Ordering::Relaxed);
            }
        }
        self.keep(file, start, bytes);
    }

    /// The bytes of `range` of `file` in memory, if one entry holds them all.
    pub(crate) fn get(&self, file: &FileKey, range: &Range<u64>) -> Option<Bytes> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *guard;
        inner.clock += 1;
        let now = inner.clock;
        let entries = inner.files.get_mut(file)?;
        let (start, entry) = entries.range_mut(..=range.start).next_back()?;
        let end = *start + entry.bytes.len() as u64;
        if range.end > end {
            return None;
        }
        let (start, was) = (*start, entry.used);
        entry.used = now;
        let bytes = entry
            .bytes
            .slice((range.start - start) as usize..(range.end - start) as usize);
        inner.used.remove(&was);
        inner.used.insert(now, (file.clone(), start));
        Some(bytes)
    }

    /// Keeps `bytes`, the bytes of `file` from `start` on, in memory, unless an entry holds them
    /// already. Entries they hold are replaced; entries used least recently go until the cache is
    /// within its capacity. A single range of more than an eighth of the capacity is not kept.
    fn keep(&self, file: &FileKey, start: u64, bytes: Bytes) {
        let len = bytes.len();
        if len == 0 || len > self.capacity / 8 {
            return;
        }
        let end = start + len as u64;
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *guard;
        inner.clock += 1;
        let now = inner.clock;
        let entries = inner.files.entry(file.clone()).or_default();
        if let Some((s, e)) = entries.range(..=start).next_back()
            && *s + e.bytes.len() as u64 >= end
        {
            return;
        }
        let held: Vec<u64> = entries
            .range(start..end)
            .filter(|(s, e)| **s + e.bytes.len() as u64 <= end)
            .map(|(s, _)| *s)
            .collect();
        let mut freed = Vec::new();
        for s in held {
            if let Some(e) = entries.remove(&s) {
                freed.push((e.used, e.bytes.len()));
            }
        }
        entries.insert(start, Entry { bytes, used: now });
        for (used, n) in freed {
            inner.used.remove(&used);
            inner.bytes -= n;
        }
        inner.used.insert(now, (file.clone(), start));
        inner.bytes += len;
        while inner.bytes > self.capacity {
            let Some((_, (f, s))) = inner.used.pop_first() else {
                break;
            };
            let Some(entries) = inner.files.get_mut(&f) else {
                continue;
            };
            if let Some(e) = entries.remove(&s) {
                inner.bytes -= e.bytes.len();
            }
            if entries.is_empty() {
                inner.files.remove(&f);
            }
        }
    }

    /// What the cache holds in memory now.
    pub fn usage(&self) -> CacheUse {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        CacheUse {
            entries: inner.used.len(),
            bytes: inner.bytes,
        }
    }

    /// What the disk tier holds now (entries, bytes), if there is one.
    pub fn disk_usage(&self) -> Option<(usize, u64)> {
        self.disk.as_ref().map(|d| d.usage())
    }
}

/// The disk tier's name of a file.
fn disk_key(file: &FileKey) -> String {
    let (endpoint, location, size) = &**file;
    object_key(endpoint, location, *size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> FileKey {
        Arc::new((String::new(), name.to_string(), 1000))
    }

    fn bytes(n: usize, fill: u8) -> Bytes {
        Bytes::from(vec![fill; n])
    }

    #[test]
    fn serves_ranges_an_entry_holds() {
        let cache = ObjectCache::new(1000);
        let a = file("a");
        cache.put(&a, 100, Bytes::from_static(b"0123456789"));
        assert_eq!(
            cache.get(&a, &(100..110)).expect("the entry is cached"),
            Bytes::from("0123456789")
        );
        assert_eq!(
            cache.get(&a, &(103..105)).expect("the entry is cached"),
            Bytes::from("34")
        );
        assert_eq!(cache.get(&a, &(95..105)), None);
        assert_eq!(cache.get(&a, &(105..111)), None);
        assert_eq!(cache.get(&file("b"), &(100..110)), None);
        // The same location with another size is another file.
        let resized = Arc::new((String::new(), "a".to_string(), 999));
        assert_eq!(cache.get(&resized, &(100..110)), None);
    }

    #[test]
    fn a_larger_entry_replaces_those_it_holds() {
        let cache = ObjectCache::new(1000);
        let a = file("a");
        cache.put(&a, 10, bytes(10, 1));
        cache.put(&a, 30, bytes(10, 2));
        cache.put(&a, 0, bytes(50, 3));
        assert_eq!(
            cache.usage(),
            CacheUse {
                entries: 1,
                bytes: 50
            }
        );
        assert_eq!(
            cache.get(&a, &(30..40)).expect("the entry is cached"),
            bytes(10, 3)
        );
        // Held already: nothing changes.
        cache.put(&a, 5, bytes(5, 4));
        assert_eq!(
            cache.usage(),
            CacheUse {
                entries: 1,
                bytes: 50
            }
        );
    }

    #[test]
    fn the_least_recently_used_go_first() {
        let cache = ObjectCache::new(400);
        let (a, b, c) = (file("a"), file("b"), file("c"));
        cache.put(&a, 0, bytes(50, 1));
        cache.put(&b, 0, bytes(50, 2));
        cache.put(&c, 0, bytes(50, 3));
        assert!(cache.get(&a, &(0..10)).is_some());
        for i in 0..6 {
            cache.put(&file(&format!("x{i}")), 0, bytes(50, 9));
        }
        // 9 entries of 50 bytes in 400: the oldest unused (b) went, a (used) stayed.
        assert_eq!(
            cache.usage(),
            CacheUse {
                entries: 8,
                bytes: 400
            }
        );
        assert!(cache.get(&a, &(0..10)).is_some());
        assert!(cache.get(&b, &(0..10)).is_none());
        assert!(cache.get(&c, &(0..10)).is_some());
        // Too large for the cache: not kept.
        cache.put(&file("big"), 0, bytes(51, 1));
        assert!(cache.get(&file("big"), &(0..1)).is_none());
    }

    #[test]
    fn a_cache_of_no_bytes_keeps_nothing() {
        let cache = ObjectCache::new(0);
        assert!(!cache.enabled());
        cache.put(&file("a"), 0, bytes(1, 1));
        assert_eq!(
            cache.usage(),
            CacheUse {
                entries: 0,
                bytes: 0
            }
        );
    }
}
