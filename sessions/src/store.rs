//! Sessions that outlive one call (Flight SQL's `arrow_flight_session_id`), each owned by the
//! principal that opened it and dropped after it has been idle too long.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{Principal, Session};

/// At most this many sessions are kept; past it the least recently used one goes.
const MAX_SESSIONS: usize = 10_000;

pub struct SessionStore {
    idle: Duration,
    sessions: Mutex<HashMap<String, (Instant, Session)>>,
}

impl SessionStore {
    pub fn new(idle: Duration) -> Self {
        Self {
            idle,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Session)>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session `id`, if it exists, is not idle-expired and belongs to `principal`. Another
    /// principal presenting the id gets nothing, as if it did not exist.
    pub fn get(&self, id: &str, principal: &Principal) -> Option<Session> {
        let mut sessions = self.lock();
        let (used, session) = sessions.get_mut(id)?;
        if used.elapsed() > self.idle {
            sessions.remove(id);
            return None;
        }
        if session.principal.name != principal.name {
            return None;
        }
        *used = Instant::now();
        Some(session.clone())
    }

    /// Stores (or replaces) a session. The credential is not kept: each call brings its own.
    pub fn put(&self, session: &Session) {
        let mut stored = session.clone();
        stored.credential = None;
        let mut sessions = self.lock();
        let idle = self.idle;
        sessions.retain(|_, (used, _)| used.elapsed() <= idle);
        if sessions.len() >= MAX_SESSIONS
            && !sessions.contains_key(&stored.id)
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(id, _)| id.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(stored.id.clone(), (Instant::now(), stored));
    }

    /// Closes a session; true if it existed and belonged to `principal`.
    pub fn remove(&self, id: &str, principal: &Principal) -> bool {
        let mut sessions = self.lock();
        match sessions.get(id) {
            Some((_, s)) if s.principal.name == principal.name => {
                sessions.remove(id);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_its_principal_and_expires_when_idle() {
        let store = SessionStore::new(Duration::from_millis(50));
        let mut s = Session::new(Principal::new("alice"), "iceberg", "default");
        s.credential = Some(crate::Credential::bearer("t"));
        store.put(&s);
        let got = store.get(&s.id, &Principal::new("alice")).expect("stored");
        assert_eq!(got.catalog, "iceberg");
        assert!(got.credential.is_none(), "credentials are never stored");
        assert!(store.get(&s.id, &Principal::new("mallory")).is_none());
        assert!(!store.remove(&s.id, &Principal::new("mallory")));
        std::thread::sleep(Duration::from_millis(80));
        assert!(store.get(&s.id, &Principal::new("alice")).is_none());
    }
}
