//! A server's waiting transactions: who waits for whom (to reach
//! COMMITTING, or to finish), and the queue of those whose awaited event
//! happened. Rococo's and Janus' servers both drive their transactions
//! through [`Wakeups`]: wait, wake, then look again at what the queue
//! hands out.

use std::collections::VecDeque;
use tessera_core::ids::TxnId;
use tessera_core::{FastMap, FastSet};

#[derive(Default)]
pub(crate) struct Wakeups {
    waiters: FastMap<TxnId, Vec<TxnId>>,
    /// The pairs (awaited, waiter) in `waiters`: a hot transaction can have
    /// thousands of waiters, and looking each new one up in the list made
    /// waiting quadratic.
    pairs: FastSet<(TxnId, TxnId)>,
    queue: VecDeque<TxnId>,
}

impl Wakeups {
    /// `who` waits for `on` (once, however often asked).
    pub fn wait(&mut self, on: TxnId, who: TxnId) {
        if self.pairs.insert((on, who)) {
            self.waiters.entry(on).or_default().push(who);
        }
    }

    /// Whether `who` waits for `on`.
    pub fn waits(&self, on: TxnId, who: TxnId) -> bool {
        self.pairs.contains(&(on, who))
    }

    /// `t`'s awaited event happened: queue whoever waits for it.
    pub fn wake(&mut self, t: TxnId) {
        if let Some(ws) = self.waiters.remove(&t) {
            for &w in &ws {
                self.pairs.remove(&(t, w));
            }
            self.queue.extend(ws);
        }
    }

    /// Queue `t` itself to be looked at again.
    pub fn push(&mut self, t: TxnId) {
        self.queue.push_back(t);
    }

    /// The next transaction to look at again.
    pub fn pop(&mut self) -> Option<TxnId> {
        self.queue.pop_front()
    }

    /// `(awaited, pairs, queued)` sizes, for memory statistics.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.waiters.len(), self.pairs.len(), self.queue.len())
    }

    /// Someone waits for `t` (so it must not be collected).
    pub fn awaited(&self, t: TxnId) -> bool {
        self.waiters.contains_key(&t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waking_queues_each_waiter_once_in_order() {
        let (a, b, c) = (TxnId(1), TxnId(2), TxnId(3));
        let mut w = Wakeups::default();
        w.wait(a, b);
        w.wait(a, c);
        w.wait(a, b);
        assert!(w.awaited(a));
        assert_eq!(w.pop(), None);
        w.wake(a);
        assert!(!w.awaited(a));
        w.push(a);
        assert_eq!(
            (w.pop(), w.pop(), w.pop(), w.pop()),
            (Some(b), Some(c), Some(a), None)
        );
        w.wake(a);
        assert_eq!(w.pop(), None, "woken twice");
    }
}
