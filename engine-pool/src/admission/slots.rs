//! The query slots, shared fairly among users: Trino's resource groups with a sub-group per user,
//! as a scheduler of its own. At most `total` statements run at once and at most `per_user` of one
//! user; a statement past either waits in its user's queue (at most `queued` in all and
//! `queued_per_user` of one user, each waiting at most the queue timeout), and a freed slot goes to
//! the users with waiting statements in turn, not to whoever came first. One user holding all they
//! may hold leaves the rest of the slots to everyone else.
//!
//! A [`Slot`] gives itself back when dropped; [`Slots::admit`] that times out or is dropped while
//! waiting takes its place out of the queue.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sqe_sessions::{ErrorCode, SqeError, SqeResult};
use tokio::sync::oneshot;

/// How many statements run and wait, in all and per user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub total: usize,
    pub per_user: usize,
    pub queued: usize,
    pub queued_per_user: usize,
}

pub(crate) struct Slots {
    limits: Limits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: usize,
    running_by: HashMap<String, usize>,
    /// Each user's waiting statements, oldest first.
    waiting: HashMap<String, VecDeque<Waiter>>,
    /// The users with waiting statements, in the order they are served next.
    turns: VecDeque<String>,
    queued: usize,
    next_ticket: u64,
}

struct Waiter {
    ticket: u64,
    wake: oneshot::Sender<Slot>,
}

/// A running statement's slot; dropping it gives the slot back (to the next user in turn).
pub(crate) struct Slot {
    slots: Arc<Slots>,
    user: String,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("user", &self.user).finish()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let grants = {
            let mut state = self.slots.lock();
            state.running = state.running.saturating_sub(1);
            if let Some(n) = state.running_by.get_mut(&self.user) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    state.running_by.remove(&self.user);
                }
            }
            self.slots.dispatch(&mut state)
        };
        Slots::hand_out(grants);
    }
}

/// A place in a user's queue, taken out when its statement stops waiting (admitted, timed out or
/// gone).
struct Place<'a> {
    slots: &'a Slots,
    user: &'a str,
    ticket: u64,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        let State {
            waiting,
            turns,
            queued,
            ..
        } = &mut *state;
        let Some(queue) = waiting.get_mut(self.user) else {
            return;
        };
        let before = queue.len();
        queue.retain(|w| w.ticket != self.ticket);
        if queue.len() < before {
            *queued = queued.saturating_sub(1);
        }
        if queue.is_empty() {
            waiting.remove(self.user);
            turns.retain(|u| u != self.user);
        }
    }
}

impl Slots {
    pub fn new(limits: Limits) -> Arc<Self> {
        let limits = Limits {
            total: limits.total.max(1),
            per_user: limits.per_user.max(1),
            ..limits
        };
        Arc::new(Self {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a statement of `user`: at once if one is free to them, else after waiting its
    /// turn for at most `timeout`. The refusal says which limit was met.
    pub async fn admit(self: &Arc<Self>, user: &str, timeout: Duration) -> SqeResult<Slot> {
        let (ticket, rx) = {
            let mut state = self.lock();
            let mine = state.running_by.get(user).copied().unwrap_or(0);
            if state.running < self.limits.total && mine < self.limits.per_user {
                state.running += 1;
                *state.running_by.entry(user.to_string()).or_insert(0) += 1;
                return Ok(Slot {
                    slots: Arc::clone(self),
                    user: user.to_string(),
                });
            }
            let waiting = state.waiting.get(user).map_or(0, VecDeque::len);
            if waiting >= self.limits.queued_per_user {
                return Err(SqeError::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "too many statements of yours: {mine} running and {waiting} waiting, the most one user may have waiting (max_queued_per_user = {}); wait for them to finish",
                        self.limits.queued_per_user
                    ),
                ));
            }
            if state.queued >= self.limits.queued {
                return Err(SqeError::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "server busy: {} queries are running and the queue of {} is full; try again later",
                        state.running, self.limits.queued
                    ),
                ));
            }
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            let (wake, rx) = oneshot::channel();
            if !state.waiting.contains_key(user) {
                state.turns.push_back(user.to_string());
            }
            state
                .waiting
                .entry(user.to_string())
                .or_default()
                .push_back(Waiter { ticket, wake });
            state.queued += 1;
            (ticket, rx)
        };
        let _place = Place {
            slots: self,
            user,
            ticket,
        };
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(slot)) => Ok(slot),
            Ok(Err(_)) => Err(SqeError::internal("the query slots were closed")),
            Err(_) => {
                let (mine, running) = {
                    let state = self.lock();
                    let mine = state.running_by.get(user).copied().unwrap_or(0);
                    (mine, state.running)
                };
                // The user's own limit held it only if the server had a slot for someone else.
                let why = if mine >= self.limits.per_user && running < self.limits.total {
                    format!(
                        "{mine} statements of yours are running, the most one user may run (max_running_per_user = {})",
                        self.limits.per_user
                    )
                } else {
                    format!("no query slot freed up within {}s", timeout.as_secs())
                };
                Err(SqeError::new(
                    ErrorCode::ResourceExhausted,
                    format!("server busy: {why}; try again later"),
                ))
            }
        }
    }

    /// Gives free slots to waiting statements, a user at a time in turn, skipping users who run
    /// all they may. The slots are handed out once the state is unlocked.
    fn dispatch(self: &Arc<Self>, state: &mut State) -> Vec<(oneshot::Sender<Slot>, Slot)> {
        let mut grants = Vec::new();
        let mut passed = 0;
        while state.running < self.limits.total && passed < state.turns.len() {
            let Some(user) = state.turns.pop_front() else {
                break;
            };
            let mine = state.running_by.get(&user).copied().unwrap_or(0);
            let next = match mine < self.limits.per_user {
                true => state.waiting.get_mut(&user).and_then(VecDeque::pop_front),
                false => None,
            };
            let Some(waiter) = next else {
                state.turns.push_back(user);
                passed += 1;
                continue;
            };
            passed = 0;
            state.queued = state.queued.saturating_sub(1);
            state.running += 1;
            *state.running_by.entry(user.clone()).or_insert(0) += 1;
            if state.waiting.get(&user).is_some_and(|q| !q.is_empty()) {
                state.turns.push_back(user.clone());
            } else {
                state.waiting.remove(&user);
            }
            let slot = Slot {
                slots: Arc::clone(self),
                user,
            };
            grants.push((waiter.wake, slot));
        }
        grants
    }

    /// Hands granted slots to their statements; a statement no longer waiting gives its slot back
    /// (dropping it), which serves the next one.
    fn hand_out(grants: Vec<(oneshot::Sender<Slot>, Slot)>) {
        for (wake, slot) in grants {
            drop(wake.send(slot));
        }
    }

    /// Statements running and waiting now.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let state = self.lock();
        (state.running, state.queued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(total: usize, per_user: usize, queued: usize, queued_per_user: usize) -> Arc<Slots> {
        Slots::new(Limits {
            total,
            per_user,
            queued,
            queued_per_user,
        })
    }

    const WAIT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn one_user_cannot_take_every_slot() {
        let s = slots(4, 2, 10, 10);
        let bob1 = s.admit("bob", WAIT).await;
        let bob2 = s.admit("bob", WAIT).await;
        assert!(bob1.is_ok() && bob2.is_ok());
        // Bob's third waits; alice runs at once.
        let bob3 = tokio::spawn({
            let s = Arc::clone(&s);
            async move { s.admit("bob", WAIT).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(s.counts(), (2, 1));
        let alice = tokio::time::timeout(Duration::from_millis(100), s.admit("alice", WAIT)).await;
        assert!(matches!(alice, Ok(Ok(_))));
        assert_eq!(s.counts(), (3, 1));
        // One of bob's ends: his waiting one runs.
        drop(bob1);
        let bob3 = bob3.await.map_err(|e| e.to_string());
        assert!(matches!(bob3, Ok(Ok(_))));
        assert_eq!(s.counts(), (3, 0));
    }

    #[tokio::test]
    async fn freed_slots_go_to_users_in_turn() {
        let s = slots(1, 1, 10, 10);
        let first = s.admit("carol", WAIT).await;
        assert!(first.is_ok());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        // Bob queues three, then alice one: alice is served second, not fourth.
        for user in ["bob", "bob", "bob", "alice"] {
            let (s, order) = (Arc::clone(&s), Arc::clone(&order));
            waiting.push(tokio::spawn(async move {
                let slot = s.admit(user, WAIT).await;
                order.lock().unwrap_or_else(|p| p.into_inner()).push(user);
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(slot);
            }));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(first);
        for w in waiting {
            let _ = w.await;
        }
        let order = order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(order, ["bob", "alice", "bob", "bob"]);
        assert_eq!(s.counts(), (0, 0));
    }

    #[tokio::test]
    async fn refusals_name_the_limit_met() {
        let s = slots(2, 1, 10, 1);
        let _running = s.admit("bob", WAIT).await;
        let waiting = tokio::spawn({
            let s = Arc::clone(&s);
            async move { s.admit("bob", WAIT).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let refused = s.admit("bob", WAIT).await.map(|_| ());
        assert_eq!(
            refused.map_err(|e| (e.code(), e.message().to_string())),
            Err((
                ErrorCode::ResourceExhausted,
                "too many statements of yours: 1 running and 1 waiting, the most one user may have waiting (max_queued_per_user = 1); wait for them to finish".to_string()
            ))
        );
        waiting.abort();
        let _ = waiting.await;
        // A waiter that went away left the queue.
        assert_eq!(s.counts(), (1, 0));
        let timed_out = s.admit("bob", Duration::from_millis(30)).await.map(|_| ());
        assert_eq!(
            timed_out.map_err(|e| e.message().to_string()),
            Err("server busy: 1 statements of yours are running, the most one user may run (max_running_per_user = 1); try again later".to_string())
        );
        // With every slot taken, it is the server that is full, whoever waits.
        let _alices = s.admit("alice", WAIT).await;
        let timed_out = s.admit("bob", Duration::from_millis(30)).await.map(|_| ());
        assert_eq!(
            timed_out.map_err(|e| e.message().to_string()),
            Err("server busy: no query slot freed up within 0s; try again later".to_string())
        );
        let full = slots(1, 1, 0, 5);
        let _held = full.admit("carol", WAIT).await;
        assert_eq!(
            full.admit("dan", WAIT)
                .await
                .map(|_| ())
                .map_err(|e| e.message().to_string()),
            Err(
                "server busy: 1 queries are running and the queue of 0 is full; try again later"
                    .to_string()
            )
        );
    }
}
