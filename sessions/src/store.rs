//! Sessions that outlive one call (Flight SQL's `arrow_flight_session_id`), each owned by the
//! principal that opened it and dropped after it has been idle too long: a [`HandleMap`] of
//! sessions that never keeps a credential.

use std::time::Duration;

use crate::{AtCapacity, HandleMap, Principal, Session};

/// At most this many sessions are kept; past it the least recently used one goes.
const MAX_SESSIONS: usize = 10_000;

pub struct SessionStore {
    sessions: HandleMap<String, Session>,
}

impl SessionStore {
    pub fn new(idle: Duration) -> Self {
        Self {
            sessions: HandleMap::new()
                .idle_after(idle)
                .at_most(MAX_SESSIONS, AtCapacity::EvictLeastRecentlyUsed),
        }
    }

    /// The session `id`, if it exists, is not idle-expired and belongs to `principal`. Another
    /// principal presenting the id gets nothing, as if it did not exist.
    pub fn get(&self, id: &str, principal: &Principal) -> Option<Session> {
        self.sessions.get(id, &principal.name, |s| Some(s.clone()))
    }

    /// Stores (or replaces) a session. The credential is not kept: each call brings its own.
    pub fn put(&self, session: &Session) {
        let mut stored = session.clone();
        stored.credential = None;
        let owner = stored.principal.name.clone();
        // Ids are random, so only the session's own principal ever names one again; a store
        // that meets another's id keeps that one and not this.
        if let Err(refused) = self.sessions.insert(stored.id.clone(), &owner, stored) {
            tracing::warn!(?refused, "a session was not kept");
        }
    }

    /// Closes a session; true if it existed and belonged to `principal`.
    pub fn remove(&self, id: &str, principal: &Principal) -> bool {
        self.sessions.remove(id, &principal.name).is_some()
    }

    /// Forgets the sessions idle past the limit; how many.
    pub fn expire_idle(&self) -> usize {
        self.sessions.expire_idle()
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
