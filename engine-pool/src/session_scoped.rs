//! What a session keeps for itself in the engine (the catalogs it attached, the secrets it made):
//! entries by session id, each reachable only by the principal whose session it is, whatever id
//! another presents, and bounded per session and in sessions kept.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use sqe_sessions::{ErrorCode, Session, SqeError, SqeResult};

/// Catalogs (or secrets) one session may hold at once.
const MAX_PER_SESSION: usize = 16;
/// Sessions with entries kept at once; past this the least recently used is dropped.
const MAX_SESSIONS: usize = 4096;

/// What sessions keep for themselves (attached catalogs, secrets), by session id, each entry
/// reachable only by the principal whose session it is, whatever id another presents.
pub(crate) struct SessionScoped<T> {
    sessions: Mutex<HashMap<String, Owned<T>>>,
    /// Entries one session may hold at once.
    per_session: usize,
    /// What the entries are and how to free one, for errors.
    what: &'static str,
    free: &'static str,
}

struct Owned<T> {
    owner: String,
    items: BTreeMap<String, T>,
    used: Instant,
}

impl<T: Clone> SessionScoped<T> {
    pub fn new(what: &'static str, free: &'static str) -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            per_session: MAX_PER_SESSION,
            what,
            free,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owned<T>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's entries, by name.
    pub fn of(&self, session: &Session) -> Vec<(String, T)> {
        let mut sessions = self.lock();
        match sessions.get_mut(&session.id) {
            Some(o) if o.owner == session.principal.name => {
                o.used = Instant::now();
                o.items
                    .iter()
                    .map(|(n, m)| (n.clone(), m.clone()))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    pub fn get(&self, session: &Session, name: &str) -> Option<T> {
        let sessions = self.lock();
        let owned = sessions.get(&session.id)?;
        (owned.owner == session.principal.name)
            .then(|| owned.items.get(name).cloned())
            .flatten()
    }

    /// Adds (or replaces) an entry.
    pub fn add(&self, session: &Session, name: String, item: T) -> SqeResult<()> {
        let mut sessions = self.lock();
        if !sessions.contains_key(&session.id) && sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, o)| o.used)
                .map(|(id, _)| id.clone());
            if let Some(id) = oldest {
                sessions.remove(&id);
            }
        }
        let owned = sessions.entry(session.id.clone()).or_insert_with(|| Owned {
            owner: session.principal.name.clone(),
            items: BTreeMap::new(),
            used: Instant::now(),
        });
        if owned.owner != session.principal.name {
            return Err(SqeError::new(
                ErrorCode::PermissionDenied,
                "this session belongs to another user",
            ));
        }
        if owned.items.len() >= self.per_session && !owned.items.contains_key(&name) {
            return Err(SqeError::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "a session may hold at most {} {}; {} one first",
                    self.per_session, self.what, self.free
                ),
            ));
        }
        owned.used = Instant::now();
        owned.items.insert(name, item);
        Ok(())
    }

    /// Removes an entry; false if the session had none by that name.
    pub fn remove(&self, session: &Session, name: &str) -> bool {
        let mut sessions = self.lock();
        let Some(owned) = sessions.get_mut(&session.id) else {
            return false;
        };
        if owned.owner != session.principal.name {
            return false;
        }
        let removed = owned.items.remove(name).is_some();
        if owned.items.is_empty() {
            sessions.remove(&session.id);
        }
        removed
    }
}
