//! Who waits for a write, and on which conversation: a write wakes the long
//! polls and task streams of its own conversation only (a server with
//! hundreds of chat pages open answered appends 8× slower when every write
//! woke them all), and a member holds at most [`WAITS_PER_MEMBER`] long
//! polls at once on this server. The edge handler's `state.ts` keeps the same.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use foldline_core::defaults::WAITS_PER_MEMBER;
use tokio::sync::watch;

use super::reply::ApiError;
use crate::sync::lock;

#[derive(Default)]
struct Waiting {
    /// One channel per conversation somebody waits on; dropped with its
    /// last waiter.
    conversations: BTreeMap<String, watch::Sender<u64>>,
    /// The long polls each member has waiting.
    members: BTreeMap<String, u64>,
}

/// The waiters of one server.
#[derive(Default, Clone)]
pub struct Wakes(Arc<Mutex<Waiting>>);

impl Wakes {
    /// Follow `conversation`'s writes (a task's event stream: bounded by
    /// the member's condense rate, so not counted against the member).
    pub fn follow(&self, conversation: &str) -> Waiter {
        let mut w = lock(&self.0);
        let rx = match w.conversations.get(conversation) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = watch::channel(0);
                w.conversations.insert(conversation.to_owned(), tx);
                rx
            }
        };
        Waiter {
            rx,
            conversation: conversation.to_owned(),
            member: None,
            waiting: self.0.clone(),
        }
    }

    /// A long poll of `member` on `conversation`: refused with
    /// `rate_limited` while the member already has [`WAITS_PER_MEMBER`]
    /// waiting here (each costs a journal read per write and per poll
    /// interval; a page per open tab needs far fewer).
    pub fn wait(&self, conversation: &str, member: &str) -> Result<Waiter, ApiError> {
        {
            let mut w = lock(&self.0);
            let held = w.members.entry(member.to_owned()).or_default();
            if *held >= WAITS_PER_MEMBER {
                let mut e = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    format!(
                        "{member} already has {WAITS_PER_MEMBER} long polls waiting on this server; ask again when one has answered"
                    ),
                );
                e.retry_after = Some(1);
                return Err(e);
            }
            *held += 1;
        }
        let mut waiter = self.follow(conversation);
        waiter.member = Some(member.to_owned());
        Ok(waiter)
    }

    /// Wake whoever waits on `conversation`.
    pub fn wrote(&self, conversation: &str) {
        if let Some(tx) = lock(&self.0).conversations.get(conversation) {
            tx.send_modify(|n| *n += 1);
        }
    }

    /// Wake whoever waits, on any conversation: a write the server could
    /// not place (`watcher.rs`).
    pub fn wrote_all(&self) {
        for tx in lock(&self.0).conversations.values() {
            tx.send_modify(|n| *n += 1);
        }
    }
}

/// One request waiting on a conversation; it lets go of its place (and of
/// its member's count) when dropped, however the request ends.
pub struct Waiter {
    rx: watch::Receiver<u64>,
    conversation: String,
    member: Option<String>,
    waiting: Arc<Mutex<Waiting>>,
}

impl Waiter {
    /// Until the conversation is written to (at once if it was since the
    /// last call, or since this waiter was made).
    pub async fn changed(&mut self) {
        // The sender lives while any waiter does, so this never fails.
        let _ = self.rx.changed().await;
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut w = lock(&self.waiting);
        if let Some(member) = &self.member {
            if let Some(n) = w.members.get_mut(member) {
                *n -= 1;
                if *n == 0 {
                    w.members.remove(member);
                }
            }
        }
        // This waiter's receiver is the last one: nobody waits here now.
        if w.conversations
            .get(&self.conversation)
            .is_some_and(|tx| tx.receiver_count() <= 1)
        {
            w.conversations.remove(&self.conversation);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn held(w: &Wakes) -> (usize, usize) {
        let w = lock(&w.0);
        (w.conversations.len(), w.members.len())
    }

    async fn woken(w: &mut Waiter) -> bool {
        tokio::time::timeout(Duration::from_millis(50), w.changed())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_write_wakes_its_own_conversation_only() {
        let wakes = Wakes::default();
        let (mut a, mut b) = (wakes.follow("a"), wakes.wait("b", "bob").unwrap());
        wakes.wrote("a");
        assert!(woken(&mut a).await);
        assert!(!woken(&mut b).await, "a write to a woke b's poll");
        wakes.wrote("b");
        assert!(woken(&mut b).await);
        assert!(!woken(&mut a).await, "a was woken twice for one write");
    }

    #[tokio::test]
    async fn a_member_holds_at_most_its_share_of_long_polls() {
        let wakes = Wakes::default();
        let held_polls: Vec<_> = (0..WAITS_PER_MEMBER)
            .map(|i| wakes.wait(&format!("c{i}"), "alice").unwrap())
            .collect();
        let refused = wakes.wait("c0", "alice").err().unwrap();
        assert_eq!(refused.code, "rate_limited");
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.retry_after, Some(1));
        // Another member, and a task stream, are not held back by alice's.
        let _bob = wakes.wait("c0", "bob").unwrap();
        let _stream = wakes.follow("c0");
        drop(held_polls.into_iter().next());
        let again = wakes.wait("c0", "alice");
        assert!(again.is_ok(), "a poll that ended still counted");
    }

    #[test]
    fn nothing_is_kept_once_every_waiter_is_gone() {
        let wakes = Wakes::default();
        let first = wakes.wait("a", "alice").unwrap();
        let second = wakes.wait("a", "alice").unwrap();
        let other = wakes.follow("b");
        assert_eq!(held(&wakes), (2, 1));
        drop(first);
        assert_eq!(held(&wakes), (2, 1), "a's channel went while second waits");
        drop((second, other));
        assert_eq!(held(&wakes), (0, 0));
        wakes.wrote("a"); // nobody waits: nothing to wake, nothing kept
        assert_eq!(held(&wakes), (0, 0));
    }
}
