//! Handles for server-side state a client names again later (a Trino query's page URIs, Flight
//! tickets, prepared statements, sessions), and the one map that keeps that state for every
//! protocol.
//!
//! A handle [`random_handle`] makes is unguessable: 244 random bits from the operating system, as
//! 64 hex digits. Each entry of a [`HandleMap`] is owned by the principal that made it, and the
//! map, not each protocol, enforces what keeps one user out of another's work: another principal
//! presenting a handle gets exactly what a missing handle gets (only a caller that says so itself
//! reaches past that: an admin's cancel, a handle that is its own proof), an entry idle past the
//! map's limit is gone (for lookups too, not only once a reaper comes by), and the map holds at
//! most as many entries as it is told. The protocols differ in what they cap and what "in use"
//! means, so those are options of the map rather than five hand-kept copies of it.
//!
//! Whatever a user can make the server keep is capped per owner, so that one user cannot take the
//! room (or the memory) every other user needs: a count of entries, and for entries whose size the
//! client decides (a prepared statement's text and parameters), their bytes. A refusal says which
//! cap it met and the setting that raises it ([`Refused::error`]), in the same words on every
//! protocol.
//!
//! An entry's value is dropped when the entry leaves the map (taken, removed, replaced, evicted or
//! expired), and never while the map is locked: what a value holds (a running query, an unread
//! result) is released by its own `Drop`.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{ErrorCode, SqeError};

/// A new unguessable handle.
pub fn random_handle() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// What an insert meets when the map holds as many entries as it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtCapacity {
    /// The least recently used entry not in use makes room (a client whose entry went starts
    /// over, as after expiry).
    EvictLeastRecentlyUsed,
    /// The insert is refused; the caller tells its client why.
    Refuse,
}

/// Why an insert was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The owner holds `held` entries, the most one owner may.
    OwnerFull { held: usize },
    /// The owner's other entries hold `held` bytes, and the new one's `adding` would take them past
    /// `most`, the most one owner's entries may hold.
    OwnerBytes {
        held: usize,
        adding: usize,
        most: usize,
    },
    /// The map holds `held` entries, the most it may.
    Full { held: usize },
    /// The handle names another owner's entry.
    Taken,
}

/// How a protocol names one of its maps to a client it refuses: what the entries are, the
/// settings that raise its caps, and how the client frees one.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// The entries, in the plural: `Flight SQL prepared statements`.
    pub entries: &'static str,
    /// The setting of the per-owner count: `[server] max_prepared_statements_per_user`.
    pub count_setting: &'static str,
    /// The setting of the per-owner byte cap, for a map that has one.
    pub bytes_setting: Option<&'static str>,
    /// What frees room: `close one, or wait for one to expire`.
    pub release: &'static str,
}

impl Refused {
    /// The error a client of `owner`'s gets for this refusal: a resource exhausted, naming the cap
    /// met and the setting that raises it. A handle naming another owner's entry is the server's
    /// fault (handles are random), an internal error.
    pub fn error(self, owner: &str, caps: &Caps) -> SqeError {
        let Caps {
            entries,
            count_setting,
            bytes_setting,
            release,
        } = caps;
        let message = match self {
            Refused::OwnerFull { held } => format!(
                "{owner} holds {held} {entries}, the most one user may ({count_setting}): {release}"
            ),
            Refused::OwnerBytes { held, adding, most } => format!(
                "{owner}'s {entries} hold {held} bytes, and {adding} more would take them past the \
                 {most} bytes one user's may hold{}: {release}",
                bytes_setting.map(|s| format!(" ({s})")).unwrap_or_default()
            ),
            Refused::Full { held } => {
                format!("the server holds {held} {entries}, the most it may: try again later")
            }
            Refused::Taken => {
                return SqeError::internal(format!("a new handle named another user's {entries}"));
            }
        };
        SqeError::new(ErrorCode::ResourceExhausted, message)
    }
}

struct Entry<V> {
    owner: String,
    used: Instant,
    /// The value's size as the map's byte cap counts it (0 without one), measured when it came
    /// in and again whenever an accessor changed it.
    bytes: usize,
    value: V,
}

/// A byte cap per owner: how to size a value, and the most one owner's values may hold.
struct ByteCap<V> {
    size: fn(&V) -> usize,
    most: usize,
}

type Entries<K, V> = HashMap<K, Entry<V>>;

/// Entries of type `V` under handles of type `K`, each owned by a principal (by name).
pub struct HandleMap<K, V> {
    entries: Mutex<Entries<K, V>>,
    /// Entries unused for longer than this expire; None: only removal ends them.
    idle: Option<Duration>,
    /// The most entries held, and what an insert past it meets.
    most: Option<(usize, AtCapacity)>,
    /// The most entries one owner holds; an insert past it is refused.
    most_per_owner: Option<usize>,
    /// The most bytes one owner's entries hold; an insert past it is refused.
    bytes_per_owner: Option<ByteCap<V>>,
    /// Whether an entry is in use now, which keeps it from expiring and from eviction.
    in_use: Option<fn(&V) -> bool>,
}

impl<K: Eq + Hash + Clone, V> Default for HandleMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash + Clone, V> HandleMap<K, V> {
    /// A map without limits: entries never expire and there may be any number of them.
    pub fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            idle: None,
            most: None,
            most_per_owner: None,
            bytes_per_owner: None,
            in_use: None,
        }
    }

    /// Entries unused for longer than `idle` expire.
    pub fn idle_after(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    /// At most `entries` entries; an insert past them meets `at_capacity`.
    pub fn at_most(mut self, entries: usize, at_capacity: AtCapacity) -> Self {
        self.most = Some((entries, at_capacity));
        self
    }

    /// At most `entries` entries for one owner; an insert past them is refused.
    pub fn at_most_per_owner(mut self, entries: usize) -> Self {
        self.most_per_owner = Some(entries);
        self
    }

    /// At most `most` bytes in one owner's entries, each entry's bytes as `size` counts them; an
    /// insert past them is refused, a replacement of one's own entry included (the old value
    /// stays). An accessor of [`get`](Self::get) may change a value: it is measured again after,
    /// but never refused, so a value that grows at a client's word should grow by an insert.
    pub fn at_most_bytes_per_owner(mut self, size: fn(&V) -> usize, most: usize) -> Self {
        self.bytes_per_owner = Some(ByteCap { size, most });
        self
    }

    /// An entry for which `in_use` holds is not idle, however long ago it was last named (a page
    /// being served), and is never evicted.
    pub fn in_use_when(mut self, in_use: fn(&V) -> bool) -> Self {
        self.in_use = Some(in_use);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn size(&self, value: &V) -> usize {
        self.bytes_per_owner
            .as_ref()
            .map_or(0, |cap| (cap.size)(value))
    }

    fn busy(&self, value: &V) -> bool {
        self.in_use.is_some_and(|in_use| in_use(value))
    }

    fn expired(&self, entry: &Entry<V>, now: Instant) -> bool {
        self.idle
            .is_some_and(|idle| now.saturating_duration_since(entry.used) > idle)
            && !self.busy(&entry.value)
    }

    /// Takes the expired entries out of `entries`, for the caller to drop once it unlocks.
    fn sweep(&self, entries: &mut Entries<K, V>, now: Instant) -> Vec<V> {
        if self.idle.is_none() {
            return Vec::new();
        }
        let stale: Vec<K> = entries
            .iter()
            .filter(|(_, e)| self.expired(e, now))
            .map(|(k, _)| k.clone())
            .collect();
        stale
            .iter()
            .filter_map(|k| entries.remove(k))
            .map(|e| e.value)
            .collect()
    }

    /// Whether `owner` may add an entry now, as [`insert`](Self::insert) would decide (for a
    /// protocol that learns the handle only after the work it admits has begun).
    pub fn admits(&self, owner: &str) -> Result<(), Refused> {
        let released;
        let admitted = {
            let mut entries = self.lock();
            released = self.sweep(&mut entries, Instant::now());
            self.room_for(&entries, owner, 0)
        };
        drop(released);
        admitted.map(|_| ())
    }

    /// Whether the map has room for one more entry of `owner`, of `adding` bytes; Ok(true) when it
    /// has to evict one to make it.
    fn room_for(
        &self,
        entries: &Entries<K, V>,
        owner: &str,
        adding: usize,
    ) -> Result<bool, Refused> {
        if let Some(most) = self.most_per_owner {
            let held = entries.values().filter(|e| e.owner == owner).count();
            if held >= most {
                return Err(Refused::OwnerFull { held });
            }
        }
        self.bytes_room(entries, owner, 0, adding)?;
        match self.most {
            Some((most, at_capacity)) if entries.len() >= most => match at_capacity {
                AtCapacity::EvictLeastRecentlyUsed => Ok(true),
                AtCapacity::Refuse => Err(Refused::Full {
                    held: entries.len(),
                }),
            },
            _ => Ok(false),
        }
    }

    /// Whether `owner`'s entries, less `replacing` bytes of an entry being replaced, have room for
    /// `adding` more bytes.
    fn bytes_room(
        &self,
        entries: &Entries<K, V>,
        owner: &str,
        replacing: usize,
        adding: usize,
    ) -> Result<(), Refused> {
        let Some(cap) = &self.bytes_per_owner else {
            return Ok(());
        };
        let held = entries
            .values()
            .filter(|e| e.owner == owner)
            .map(|e| e.bytes)
            .sum::<usize>()
            .saturating_sub(replacing);
        if held.saturating_add(adding) > cap.most {
            return Err(Refused::OwnerBytes {
                held,
                adding,
                most: cap.most,
            });
        }
        Ok(())
    }

    /// Adds `owner`'s entry `handle`, or replaces `owner`'s own entry of that handle (which only
    /// the byte cap refuses, the old value staying). Expired entries go first, so they do not
    /// count against a cap.
    pub fn insert(&self, handle: K, owner: &str, value: V) -> Result<(), Refused> {
        let mut released = Vec::new();
        let inserted = self.insert_locked(&mut self.lock(), handle, owner, value, &mut released);
        drop(released);
        inserted
    }

    fn insert_locked(
        &self,
        entries: &mut Entries<K, V>,
        handle: K,
        owner: &str,
        value: V,
        released: &mut Vec<V>,
    ) -> Result<(), Refused> {
        let now = Instant::now();
        released.extend(self.sweep(entries, now));
        let bytes = self.size(&value);
        let room = match entries.get(&handle) {
            Some(e) if e.owner != owner => Err(Refused::Taken),
            Some(e) => self
                .bytes_room(entries, owner, e.bytes, bytes)
                .map(|()| false),
            None => self.room_for(entries, owner, bytes),
        };
        let evicted = match room {
            Ok(false) => Ok(None),
            Ok(true) => entries
                .iter()
                .filter(|(_, e)| !self.busy(&e.value))
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
                .and_then(|k| entries.remove(&k))
                .map(Some)
                .ok_or(Refused::Full {
                    held: entries.len(),
                }),
            Err(refused) => Err(refused),
        };
        match evicted {
            Ok(evicted) => released.extend(evicted.map(|e| e.value)),
            Err(refused) => {
                // A refused value, too, is dropped once the map is unlocked.
                released.push(value);
                return Err(refused);
            }
        }
        let entry = Entry {
            owner: owner.to_string(),
            used: now,
            bytes,
            value,
        };
        if let Some(old) = entries.insert(handle, entry) {
            released.push(old.value);
        }
        Ok(())
    }

    /// Runs `f` on `owner`'s entry `handle` and, when `f` accepts it (answers Some), marks the
    /// entry used. Another owner's entry answers None as a missing one does, and `f` never sees it.
    pub fn get<Q, R>(
        &self,
        handle: &Q,
        owner: &str,
        f: impl FnOnce(&mut V) -> Option<R>,
    ) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.access(handle, Some(owner), f)
    }

    /// [`get`](Self::get) for a protocol whose handle is itself the proof of who presents it
    /// (Quack's connection id, handed only to the client that authenticated, whose later messages
    /// carry nothing else): whoever holds the handle reaches its entry.
    pub fn get_by_bearer<Q, R>(&self, handle: &Q, f: impl FnOnce(&mut V) -> Option<R>) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.access(handle, None, f)
    }

    /// Runs `f` on the entry `handle`, given its owner, for a caller that decides itself who may
    /// reach an entry (a spooled segment, whose handle and key are the proof, unless its
    /// fetch carries credentials, which must then be the owner's); when `f` accepts it (answers
    /// Some), the entry is marked used.
    pub fn get_where<Q, R>(
        &self,
        handle: &Q,
        f: impl FnOnce(&str, &mut V) -> Option<R>,
    ) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut released = None;
        let found = {
            let mut entries = self.lock();
            let now = Instant::now();
            match entries.get_mut(handle) {
                Some(e) if self.expired(e, now) => {
                    released = entries.remove(handle).map(|e| e.value);
                    None
                }
                Some(e) => {
                    let answer = f(&e.owner, &mut e.value);
                    if answer.is_some() {
                        e.used = now;
                    }
                    e.bytes = self.size(&e.value);
                    answer
                }
                None => None,
            }
        };
        drop(released);
        found
    }

    fn access<Q, R>(
        &self,
        handle: &Q,
        owner: Option<&str>,
        f: impl FnOnce(&mut V) -> Option<R>,
    ) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_where(handle, |o, value| match owner {
            Some(owner) if owner != o => None,
            _ => f(value),
        })
    }

    /// Takes `owner`'s entry `handle` out of the map. Another owner's entry stays, and the answer
    /// is a missing one's.
    pub fn remove<Q>(&self, handle: &Q, owner: &str) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.remove_where(handle, |o, _| o == owner)
    }

    /// Takes the entry `handle` out of the map if `may` allows it, given the entry's owner and
    /// value: for a caller that decides itself who may end an entry (an admin ending another
    /// user's work, a stream that ended, a bearer handle). An expired entry goes whatever `may`
    /// says, and the answer is a missing one's.
    pub fn remove_where<Q>(&self, handle: &Q, may: impl FnOnce(&str, &V) -> bool) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut released = None;
        let removed = {
            let mut entries = self.lock();
            match entries.get(handle) {
                Some(e) if self.expired(e, Instant::now()) => {
                    released = entries.remove(handle).map(|e| e.value);
                    None
                }
                Some(e) if may(&e.owner, &e.value) => entries.remove(handle).map(|e| e.value),
                _ => None,
            }
        };
        drop(released);
        removed
    }

    /// Drops the entries idle past the limit (an entry in use is not idle), which releases what
    /// they held; how many.
    pub fn expire_idle(&self) -> usize {
        let released = {
            let mut entries = self.lock();
            self.sweep(&mut entries, Instant::now())
        };
        released.len()
    }

    /// Entries held now (expired ones the map has not yet dropped included).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `f` of each entry's handle, owner and value, in no order. `f` runs with the map locked:
    /// keep it short (clone what it needs).
    pub fn list<R>(&self, mut f: impl FnMut(&K, &str, &V) -> R) -> Vec<R> {
        self.lock()
            .iter()
            .map(|(k, e)| f(k, &e.owner, &e.value))
            .collect()
    }
}

/// What a protocol keeps between calls, as the gateway's reaper and its shutdown ask about it. The
/// gateway keeps one per protocol it serves and loops over them, so that no protocol is left out
/// of either by hand.
pub trait ProtocolHandles: Send + Sync {
    /// The protocol, as the reaper's log line names it (`trino`, `flight_sql`, `quack`, `mcp`).
    fn protocol(&self) -> &'static str;

    /// Expires the handles idle past their limits, which releases what they held (query slots,
    /// results); how many.
    fn expire_idle(&self) -> usize;

    /// What [`open_work`](Self::open_work) counts, as the shutdown line names it
    /// (`trino_queries=2`).
    fn open_work_name(&self) -> &'static str;

    /// Work a shutdown waits for before it stops serving: results a client has yet to read
    /// between its requests (work inside a request is waited for anyway).
    fn open_work(&self) -> usize;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn handles_are_long_and_distinct() {
        let (a, b) = (random_handle(), random_handle());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }

    /// Counts its drops, as a value that releases a query slot would release it.
    struct Held(Arc<AtomicUsize>);

    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn value(map: &HandleMap<String, u32>, handle: &str, owner: &str) -> Option<u32> {
        map.get(handle, owner, |v| Some(*v))
    }

    #[test]
    fn another_owner_gets_what_a_missing_handle_gets() {
        let map = HandleMap::new();
        assert_eq!(map.insert("h".to_string(), "alice", 7), Ok(()));
        assert_eq!(value(&map, "h", "alice"), Some(7));
        assert_eq!(value(&map, "h", "mallory"), value(&map, "nope", "mallory"));
        assert_eq!(map.remove("h", "mallory"), map.remove("nope", "mallory"));
        // Mallory cannot put her own value under alice's handle either.
        assert_eq!(
            map.insert("h".to_string(), "mallory", 9),
            Err(Refused::Taken)
        );
        let mut seen = false;
        assert_eq!(
            map.get("h", "mallory", |_| {
                seen = true;
                Some(())
            }),
            None
        );
        assert!(!seen, "the accessor never sees another owner's value");
        assert_eq!(value(&map, "h", "alice"), Some(7));
        // A decision of the caller's own (an admin's) may take another owner's entry.
        assert_eq!(map.remove_where("h", |owner, _| owner == "alice"), Some(7));
        assert_eq!(value(&map, "h", "alice"), None);
    }

    #[test]
    fn idle_entries_expire_and_release_what_they_hold() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let map = HandleMap::new().idle_after(Duration::from_millis(60));
        for h in ["a", "b", "c"] {
            let held = Held(dropped.clone());
            assert!(map.insert(h.to_string(), "alice", held).is_ok());
        }
        std::thread::sleep(Duration::from_millis(40));
        // Naming an entry keeps it; an accessor that declines it does not.
        assert!(map.get("a", "alice", |_| Some(())).is_some());
        assert!(map.get("b", "alice", |_| None::<()>).is_none());
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(map.expire_idle(), 2);
        assert_eq!(dropped.load(Ordering::SeqCst), 2);
        assert_eq!(map.len(), 1);
        // An expired entry is gone for a lookup even before anything sweeps.
        std::thread::sleep(Duration::from_millis(80));
        assert!(map.get("a", "alice", |_| Some(())).is_none());
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
        assert!(map.is_empty());
    }

    #[test]
    fn an_entry_in_use_is_not_idle() {
        let map: HandleMap<String, Arc<AtomicBool>> = HandleMap::new()
            .idle_after(Duration::from_millis(20))
            .in_use_when(|busy| busy.load(Ordering::SeqCst));
        let busy = Arc::new(AtomicBool::new(true));
        assert!(map.insert("q".to_string(), "alice", busy.clone()).is_ok());
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(map.expire_idle(), 0);
        assert!(map.get("q", "alice", |_| Some(())).is_some());
        busy.store(false, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(map.expire_idle(), 1);
    }

    #[test]
    fn a_full_map_evicts_the_least_recently_used() {
        let map = HandleMap::new().at_most(2, AtCapacity::EvictLeastRecentlyUsed);
        assert!(map.insert("a".to_string(), "alice", 1).is_ok());
        std::thread::sleep(Duration::from_millis(2));
        assert!(map.insert("b".to_string(), "bob", 2).is_ok());
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(value(&map, "a", "alice"), Some(1));
        // Replacing one's own entry takes no room.
        assert!(map.insert("a".to_string(), "alice", 3).is_ok());
        assert_eq!(map.len(), 2);
        assert!(map.insert("c".to_string(), "carol", 4).is_ok());
        assert_eq!(value(&map, "b", "bob"), None);
        assert_eq!(value(&map, "a", "alice"), Some(3));
        assert_eq!(value(&map, "c", "carol"), Some(4));
    }

    #[test]
    fn a_capped_map_refuses_past_its_caps() {
        let map = HandleMap::new()
            .idle_after(Duration::from_millis(40))
            .at_most(3, AtCapacity::Refuse)
            .at_most_per_owner(2);
        assert!(map.insert("a1".to_string(), "alice", 1).is_ok());
        assert!(map.insert("a2".to_string(), "alice", 2).is_ok());
        assert_eq!(map.admits("alice"), Err(Refused::OwnerFull { held: 2 }));
        assert_eq!(
            map.insert("a3".to_string(), "alice", 3),
            Err(Refused::OwnerFull { held: 2 })
        );
        assert!(map.insert("b1".to_string(), "bob", 4).is_ok());
        assert_eq!(map.admits("carol"), Err(Refused::Full { held: 3 }));
        assert_eq!(
            map.insert("c1".to_string(), "carol", 5),
            Err(Refused::Full { held: 3 })
        );
        // Removing one makes room for its owner; expired entries count against nobody.
        assert_eq!(map.remove("a1", "alice"), Some(1));
        assert_eq!(map.admits("alice"), Ok(()));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(map.admits("carol"), Ok(()));
        assert!(map.is_empty());
    }

    #[test]
    fn an_owners_bytes_are_capped_replacements_included() {
        let map: HandleMap<String, String> = HandleMap::new()
            .at_most_bytes_per_owner(String::len, 10)
            .at_most_per_owner(5);
        let text = |n: usize| "x".repeat(n);
        assert!(map.insert("a1".to_string(), "alice", text(6)).is_ok());
        assert_eq!(
            map.insert("a2".to_string(), "alice", text(5)),
            Err(Refused::OwnerBytes {
                held: 6,
                adding: 5,
                most: 10
            })
        );
        assert!(map.insert("a2".to_string(), "alice", text(4)).is_ok());
        // Bob's bytes are his own.
        assert!(map.insert("b1".to_string(), "bob", text(10)).is_ok());
        // A replacement counts without the value it replaces, and a refused one leaves it be.
        assert!(map.insert("a1".to_string(), "alice", text(2)).is_ok());
        assert_eq!(
            map.insert("a1".to_string(), "alice", text(7)),
            Err(Refused::OwnerBytes {
                held: 4,
                adding: 7,
                most: 10
            })
        );
        assert_eq!(map.get("a1", "alice", |v| Some(v.len())), Some(2));
        // One value larger than the cap is refused to an owner who holds nothing.
        assert_eq!(
            map.insert("c1".to_string(), "carol", text(11)),
            Err(Refused::OwnerBytes {
                held: 0,
                adding: 11,
                most: 10
            })
        );
        // An accessor's change is measured again: what alice frees, she may use.
        assert_eq!(
            map.get("a2", "alice", |v| {
                v.clear();
                Some(())
            }),
            Some(())
        );
        assert!(map.insert("a3".to_string(), "alice", text(8)).is_ok());
        assert_eq!(map.remove("a1", "alice").map(|v| v.len()), Some(2));
        assert!(map.insert("a4".to_string(), "alice", text(2)).is_ok());
    }

    #[test]
    fn refusals_name_the_cap_and_its_setting() {
        let caps = Caps {
            entries: "Flight SQL prepared statements",
            count_setting: "[server] max_prepared_statements_per_user",
            bytes_setting: Some("[server] max_prepared_statement_bytes_per_user"),
            release: "close one",
        };
        let full = Refused::OwnerFull { held: 256 }.error("bob", &caps);
        assert_eq!(
            (full.code(), full.message()),
            (
                ErrorCode::ResourceExhausted,
                "bob holds 256 Flight SQL prepared statements, the most one user may ([server] max_prepared_statements_per_user): close one"
            )
        );
        let heavy = Refused::OwnerBytes {
            held: 9,
            adding: 2,
            most: 10,
        }
        .error("bob", &caps);
        assert_eq!(
            (heavy.code(), heavy.message()),
            (
                ErrorCode::ResourceExhausted,
                "bob's Flight SQL prepared statements hold 9 bytes, and 2 more would take them past the 10 bytes one user's may hold ([server] max_prepared_statement_bytes_per_user): close one"
            )
        );
        let all = Refused::Full { held: 7 }.error("bob", &caps);
        assert_eq!(
            (all.code(), all.message()),
            (
                ErrorCode::ResourceExhausted,
                "the server holds 7 Flight SQL prepared statements, the most it may: try again later"
            )
        );
        assert_eq!(
            Refused::Taken.error("bob", &caps).code(),
            ErrorCode::Internal
        );
    }

    #[test]
    fn a_bearer_handle_reaches_its_entry_whoever_presents_it() {
        let map = HandleMap::new();
        assert!(map.insert("conn".to_string(), "alice", 1).is_ok());
        assert_eq!(map.get_by_bearer("conn", |v| Some(*v)), Some(1));
        assert_eq!(map.get_by_bearer("other", |v| Some(*v)), None);
        let mut owners = map.list(|handle, owner, v| (handle.clone(), owner.to_string(), *v));
        owners.sort();
        assert_eq!(owners, [("conn".to_string(), "alice".to_string(), 1)]);
    }
}
