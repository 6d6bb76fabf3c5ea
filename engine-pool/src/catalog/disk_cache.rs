//! The object cache's second tier: what scans read from object stores, kept in a directory of the
//! server's own, so that it outlives memory's room and the process. A restarted server, or a
//! working set larger than memory's share, reads local disk instead of paying the store's latency.
//!
//! The entries live in a folder of the cache's own inside the configured directory
//! ([`ENTRIES`]), which the cache alone writes: nothing else of that directory is touched. Each
//! entry is a file named by its object's key (a SHA-256 of the store's endpoint, the object's
//! location and its size), its first byte and its length: `<key>-<start>-<len>`. The index is
//! rebuilt from the names when the cache opens; a file whose length is not the one its name
//! gives, and a temporary file a crash left, is removed. An entry is written to a temporary name,
//! synced and renamed, so a crash leaves whole entries or none. The least recently used entries go
//! first once the folder holds its capacity. The folder and its files are the server's alone (0700
//! and 0600 on Unix): they hold table data of every user, and like the memory tier they are served
//! only to a scan whose caller reached the object itself. One server uses a directory at a time.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use sqe_sessions::{SqeError, SqeResult};

/// The folder of the configured directory that holds the entries.
pub(crate) const ENTRIES: &str = "sqe-object-cache";

/// The files of one object by their first byte: (length, last use).
type Entries = BTreeMap<u64, (u64, u64)>;

#[derive(Debug)]
pub(crate) struct DiskCache {
    dir: PathBuf,
    capacity: u64,
    index: Mutex<Index>,
}

#[derive(Debug, Default)]
struct Index {
    /// Each object's entries, by the object's key.
    objects: HashMap<String, Entries>,
    /// Every entry by its last use: (object key, first byte).
    used: BTreeMap<u64, (String, u64)>,
    clock: u64,
    bytes: u64,
}

/// The key of an object: its store's endpoint, location and size, hashed.
pub(crate) fn object_key(endpoint: &str, location: &str, size: u64) -> String {
    let mut hash = Sha256::new();
    for part in [
        endpoint.as_bytes(),
        location.as_bytes(),
        &size.to_le_bytes(),
    ] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn entry_name(object: &str, start: u64, len: u64) -> String {
    format!("{object}-{start}-{len}")
}

/// Whether `name` is a temporary file of [`DiskCache::put`]: `.<entry name>.<32 hex digits>`.
fn is_temporary(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|rest| rest.rsplit_once('.'))
        .is_some_and(|(entry, id)| {
            parse_name(entry).is_some()
                && id.len() == 32
                && id.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

/// An entry's (object key, first byte, length), from its file name.
fn parse_name(name: &str) -> Option<(String, u64, u64)> {
    let mut parts = name.split('-');
    let object = parts.next()?;
    let start = parts.next()?.parse().ok()?;
    let len = parts.next()?.parse().ok()?;
    let valid = parts.next().is_none()
        && object.len() == 64
        && object.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then(|| (object.to_string(), start, len))
}

impl DiskCache {
    /// Opens (making it if needed) the cache in `directory`, of `capacity` bytes, and indexes the
    /// entries it holds, the oldest written counted as the least recently used.
    pub(crate) fn open(directory: &Path, capacity: u64) -> SqeResult<Self> {
        let dir = directory.join(ENTRIES);
        let failed = |what: &str, e: std::io::Error| {
            SqeError::invalid(format!(
                "object cache directory {}: cannot {what}: {e}",
                dir.display()
            ))
        };
        fs::create_dir_all(&dir).map_err(|e| failed("create it", e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                .map_err(|e| failed("make it the server's alone", e))?;
        }
        let mut found = Vec::new();
        for item in fs::read_dir(&dir).map_err(|e| failed("list it", e))? {
            let Ok(item) = item else { continue };
            let Ok(meta) = item.metadata() else { continue };
            let name = item.file_name().to_string_lossy().into_owned();
            match parse_name(&name) {
                Some((object, start, len)) if meta.is_file() && meta.len() == len => {
                    let written = meta.modified().ok();
                    found.push((written, object, start, len));
                }
                // Entries cut short, and half-written ones of a crash.
                Some(_) => {
                    let _ = fs::remove_file(item.path());
                }
                None if meta.is_file() && is_temporary(&name) => {
                    let _ = fs::remove_file(item.path());
                }
                None => {}
            }
        }
        found.sort();
        let cache = Self {
            dir,
            capacity,
            index: Mutex::default(),
        };
        for (_, object, start, len) in found {
            cache.add(object, start, len);
        }
        cache.evict();
        Ok(cache)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes of `range` of `object`, if one entry holds them all. Blocks on the disk.
    pub(crate) fn get(&self, object: &str, range: &Range<u64>) -> Option<Bytes> {
        let (start, len) = {
            let mut index = self.lock();
            let found = index.holding(object, range)?;
            index.touch(object, found.0);
            found
        };
        let path = self.dir.join(entry_name(object, start, len));
        let read = || -> std::io::Result<Vec<u8>> {
            let mut file = fs::File::open(&path)?;
            file.seek(SeekFrom::Start(range.start - start))?;
            let mut bytes = vec![0; (range.end - range.start) as usize];
            file.read_exact(&mut bytes)?;
            Ok(bytes)
        };
        match read() {
            Ok(bytes) => Some(Bytes::from(bytes)),
            // Gone or cut short under the cache: forget it.
            Err(_) => {
                self.lock().remove(object, start);
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Keeps `bytes`, the bytes of `object` from `start` on, unless an entry holds them already;
    /// entries used least recently go until the directory is within its capacity. A range of more
    /// than an eighth of the capacity is not kept. Blocks on the disk; a failed write keeps
    /// nothing.
    pub(crate) fn put(&self, object: &str, start: u64, bytes: &[u8]) {
        let len = bytes.len() as u64;
        if len == 0 || len > self.capacity / 8 {
            return;
        }
        if self.lock().holding(object, &(start..start + len)).is_some() {
            return;
        }
        let name = entry_name(object, start, len);
        let temporary = self
            .dir
            .join(format!(".{name}.{}", uuid::Uuid::new_v4().simple()));
        let write = || -> std::io::Result<()> {
            let mut options = fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&temporary)?;
            file.write_all(bytes)?;
            file.sync_data()?;
            fs::rename(&temporary, self.dir.join(&name))
        };
        if write().is_err() {
            let _ = fs::remove_file(&temporary);
            return;
        }
        self.add(object.to_string(), start, len);
        self.evict();
    }

    /// Indexes an entry written; one of the same first byte and another length, which it
    /// replaces, is removed.
    fn add(&self, object: String, start: u64, len: u64) {
        let replaced = self.lock().add(object.clone(), start, len);
        if let Some(old) = replaced.filter(|old| *old != len) {
            let _ = fs::remove_file(self.dir.join(entry_name(&object, start, old)));
        }
    }

    /// Whether an entry holds all of `range` of `object` (looked up without touching the disk).
    pub(crate) fn holds(&self, object: &str, range: &Range<u64>) -> bool {
        self.lock().holding(object, range).is_some()
    }

    /// Removes the least recently used entries until the directory is within its capacity.
    fn evict(&self) {
        loop {
            let gone = {
                let mut index = self.lock();
                if index.bytes <= self.capacity {
                    return;
                }
                let Some((_, (object, start))) = index.used.pop_first() else {
                    return;
                };
                index
                    .remove(&object, start)
                    .map(|len| entry_name(&object, start, len))
            };
            if let Some(name) = gone {
                let _ = fs::remove_file(self.dir.join(name));
            }
        }
    }

    /// Entries and bytes held.
    pub(crate) fn usage(&self) -> (usize, u64) {
        let index = self.lock();
        (index.used.len(), index.bytes)
    }
}

impl Index {
    /// The entry of `object` that holds all of `range`: (first byte, length).
    fn holding(&self, object: &str, range: &Range<u64>) -> Option<(u64, u64)> {
        let (start, (len, _)) = self
            .objects
            .get(object)?
            .range(..=range.start)
            .next_back()?;
        (start + len >= range.end).then_some((*start, *len))
    }

    fn touch(&mut self, object: &str, start: u64) {
        self.clock += 1;
        let now = self.clock;
        if let Some((_, used)) = self
            .objects
            .get_mut(object)
            .and_then(|entries| entries.get_mut(&start))
        {
            self.used.remove(used);
            *used = now;
            self.used.insert(now, (object.to_string(), start));
        }
    }

    /// Indexes an entry; the length of the one of the same first byte it replaces, if any.
    fn add(&mut self, object: String, start: u64, len: u64) -> Option<u64> {
        self.clock += 1;
        let now = self.clock;
        let entries = self.objects.entry(object.clone()).or_default();
        let replaced = entries.insert(start, (len, now));
        if let Some((old_len, old_used)) = replaced {
            self.used.remove(&old_used);
            self.bytes -= old_len;
        }
        self.used.insert(now, (object, start));
        self.bytes += len;
        replaced.map(|(old_len, _)| old_len)
    }

    /// Forgets an entry (its file is the caller's to remove); its length, if it was there.
    fn remove(&mut self, object: &str, start: u64) -> Option<u64> {
        let entries = self.objects.get_mut(object)?;
        let (len, used) = entries.remove(&start)?;
        if entries.is_empty() {
            self.objects.remove(object);
        }
        self.used.remove(&used);
        self.bytes -= len;
        Some(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        std::env::temp_dir().join(format!("sqe-disk-cache-{}", uuid::Uuid::new_v4()))
    }

    #[test]
    fn serves_what_it_kept_across_a_reopening() {
        let dir = dir();
        let a = object_key("", "s3://b/a.parquet", 1000);
        let cache = DiskCache::open(&dir, 1 << 20).expect("the cache opens");
        cache.put(&a, 100, b"0123456789");
        assert_eq!(
            cache.get(&a, &(102..106)).expect("the entry is kept"),
            Bytes::from("2345")
        );
        assert_eq!(cache.get(&a, &(95..101)), None);
        assert_eq!(cache.get(&a, &(105..111)), None);
        // The same location of another size, or in another store, is another object.
        assert_eq!(
            cache.get(&object_key("", "s3://b/a.parquet", 999), &(100..101)),
            None
        );
        assert_eq!(
            cache.get(
                &object_key("http://other", "s3://b/a.parquet", 1000),
                &(100..101)
            ),
            None
        );
        drop(cache);

        // A crash's half-written entry and a cut-short entry are removed on opening; a file of
        // someone else's, in the cache's folder or beside it, is left alone.
        let entries = dir.join(ENTRIES);
        let temporary = format!(
            ".{}.{}",
            entry_name(&a, 0, 5),
            uuid::Uuid::new_v4().simple()
        );
        fs::write(entries.join(&temporary), b"01").expect("written");
        fs::write(entries.join(entry_name(&a, 500, 10)), b"short").expect("written");
        fs::write(entries.join("notes.txt"), b"?").expect("written");
        fs::write(dir.join("beside.txt"), b"?").expect("written");
        let cache = DiskCache::open(&dir, 1 << 20).expect("the cache opens");
        assert_eq!(cache.usage(), (1, 10));
        assert_eq!(
            cache.get(&a, &(100..110)).expect("the entry is kept"),
            Bytes::from("0123456789")
        );
        let names = |dir: &Path| {
            let mut names: Vec<String> = fs::read_dir(dir)
                .expect("listed")
                .map(|e| {
                    e.expect("listed")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            names(&entries),
            vec![entry_name(&a, 100, 10), "notes.txt".to_string()]
        );
        assert_eq!(
            names(&dir),
            vec!["beside.txt".to_string(), ENTRIES.to_string()]
        );

        // A longer range from the same first byte replaces the entry, and its file.
        cache.put(&a, 100, b"0123456789abcdef");
        assert_eq!(cache.usage(), (1, 16));
        assert_eq!(
            names(&entries),
            vec![entry_name(&a, 100, 16), "notes.txt".to_string()]
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).expect("there").permissions().mode() & 0o777;
            assert_eq!(mode(&entries), 0o700);
            assert_eq!(mode(&entries.join(entry_name(&a, 100, 16))), 0o600);
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_least_recently_used_go_first_and_a_vanished_entry_is_a_miss() {
        let dir = dir();
        let cache = DiskCache::open(&dir, 400).expect("the cache opens");
        let key = |n: &str| object_key("", n, 1000);
        for name in ["a", "b", "c"] {
            cache.put(&key(name), 0, &[1; 50]);
        }
        assert!(cache.get(&key("a"), &(0..10)).is_some());
        for i in 0..6 {
            cache.put(&key(&format!("x{i}")), 0, &[9; 50]);
        }
        assert_eq!(cache.usage(), (8, 400));
        assert!(cache.get(&key("a"), &(0..10)).is_some());
        assert!(cache.get(&key("b"), &(0..10)).is_none());
        assert!(
            !dir.join(ENTRIES)
                .join(entry_name(&key("b"), 0, 50))
                .exists()
        );
        // Too large a range is not kept.
        cache.put(&key("big"), 0, &[1; 51]);
        assert!(cache.get(&key("big"), &(0..1)).is_none());
        // Removed under the cache: a miss, and forgotten.
        fs::remove_file(dir.join(ENTRIES).join(entry_name(&key("c"), 0, 50))).expect("removed");
        assert!(cache.get(&key("c"), &(0..10)).is_none());
        assert_eq!(cache.usage(), (7, 350));
        let _ = fs::remove_dir_all(&dir);
    }
}
