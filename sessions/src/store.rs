//! Sessions that outlive one call (Flight SQL's `arrow_flight_session_id`), each owned by the
//! principal that opened it and dropped after it has been idle too long: a [`HandleMap`] of
//! sessions that never keeps a credential. One principal holds at most so many of them, so that
//! nobody's sessions crowd out everyone else's (past the total, the least recently used goes,
//! whoever's it is).

use std::time::Duration;

use crate::{AtCapacity, HandleMap, Principal, Refused, Session};

/// At most this many sessions are kept; past it the least recently used one goes.
const MAX_SESSIONS: usize = 10_000;

pub struct SessionStore {
    sessions: HandleMap<String, Session>,
}

impl SessionStore {
    /// Sessions idle for `idle` are forgotten; one principal keeps at most `most_per_principal`.
    pub fn new(idle: Duration, most_per_principal: usize) -> Self {
        Self {
            sessions: HandleMap::new()
                .idle_after(idle)
                .at_most(MAX_SESSIONS, AtCapacity::EvictLeastRecentlyUsed)
                .at_most_per_owner(most_per_principal),
        }
    }

    /// The session `id`, if it exists, is not idle-expired and belongs to `principal`. Another
    /// principal presenting the id gets nothing, as if it did not exist.
    pub fn get(&self, id: &str, principal: &Principal) -> Option<Session> {
        self.sessions.get(id, &principal.name, |s| Some(s.clone()))
    }

    /// Stores (or replaces) a session, unless its principal holds as many as it may (replacing
    /// one's own session is always allowed). The credential is not kept: each call brings its own.
    /// Ids are random, so only the session's own principal ever names one again; a store that
    /// meets another's id keeps that one and refuses this ([`Refused::Taken`]).
    pub fn put(&self, session: &Session) -> Result<(), Refused> {
        let mut stored = session.clone();
        stored.credential = None;
        let owner = stored.principal.name.clone();
        self.sessions.insert(stored.id.clone(), &owner, stored)
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
        let store = SessionStore::new(Duration::from_millis(50), 4);
        let mut s = Session::new(Principal::new("alice"), "iceberg", "default");
        s.credential = Some(crate::Credential::bearer("t"));
        assert_eq!(store.put(&s), Ok(()));
        let got = store.get(&s.id, &Principal::new("alice")).expect("stored");
        assert_eq!(got.catalog, "iceberg");
        assert!(got.credential.is_none(), "credentials are never stored");
        assert!(store.get(&s.id, &Principal::new("mallory")).is_none());
        assert!(!store.remove(&s.id, &Principal::new("mallory")));
        std::thread::sleep(Duration::from_millis(80));
        assert!(store.get(&s.id, &Principal::new("alice")).is_none());
    }

    #[test]
    fn a_principal_keeps_at_most_so_many_sessions() {
        let store = SessionStore::new(Duration::from_secs(60), 2);
        let of = |user: &str| Session::new(Principal::new(user), "iceberg", "default");
        let (mut first, second) = (of("bob"), of("bob"));
        assert_eq!(store.put(&first), Ok(()));
        assert_eq!(store.put(&second), Ok(()));
        assert_eq!(store.put(&of("bob")), Err(Refused::OwnerFull { held: 2 }));
        // His own sessions still change, and alice's are her own.
        first.schema = "elsewhere".into();
        assert_eq!(store.put(&first), Ok(()));
        assert_eq!(
            store
                .get(&first.id, &Principal::new("bob"))
                .map(|s| s.schema),
            Some("elsewhere".to_string())
        );
        assert_eq!(store.put(&of("alice")), Ok(()));
        assert!(store.remove(&second.id, &Principal::new("bob")));
        assert_eq!(store.put(&of("bob")), Ok(()));
    }
}
