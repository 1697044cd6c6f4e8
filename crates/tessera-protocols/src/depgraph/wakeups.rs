//! A server's waiting transactions: who waits for whom (to reach
//! COMMITTING, or to finish), and the queue of those whose awaited event
//! happened. Rococo's and Janus' servers both drive their transactions
//! through [`Wakeups`]: wait, wake, then look again at what the queue
//! hands out.
//!
//! Algorithm 4's wait (Janus §3.2, l. 41: "wait until all ancestors are
//! committing") makes every blocked transaction wait for each of its
//! STARTED ancestors: waiters × blockers (waiter, blocker) pairs, 33.5M
//! over the nine replicas at 0.4 s of the three-site zipf 0.9 point
//! (`docs/results/janus.md`, *Issue 6, branch `janus16`*). They are kept
//! as one list of waiters per blocker and nothing else: 8 bytes a pair,
//! freed whole when the blocker's event happens. A set of the pairs, kept
//! to refuse a second wait at once, cost ~40 bytes a pair and kept its
//! peak capacity after the pairs fell. Waits asked twice are instead
//! dropped when the blocker wakes its list, so the queue is the same: each
//! waiter once, in the order of its first wait since the last wake. Most
//! waits are not repeated anyway (`DepGraph::settle` returns a STARTED
//! blocker to a waiter once while it holds it: `Blockers::add` reports only
//! bits the set did not hold); the repeated ones are Algorithm 5's waits of
//! a DECIDED transaction, asked again at each look.

use std::collections::VecDeque;
use tessera_core::ids::TxnId;
use tessera_core::{FastMap, FastSet};

/// Lists up to this long drop repeats by scanning, longer ones by a set.
const SMALL: usize = 16;

#[derive(Default)]
pub(crate) struct Wakeups {
    /// Per awaited transaction, its waiters in the order they asked, with
    /// repeats (dropped at [`Self::wake`]).
    waiters: FastMap<TxnId, Vec<TxnId>>,
    /// The entries of `waiters`' lists, for memory statistics.
    entries: usize,
    queue: VecDeque<TxnId>,
}

impl Wakeups {
    /// `who` waits for `on` (once, however often asked).
    pub fn wait(&mut self, on: TxnId, who: TxnId) {
        let list = self.waiters.entry(on).or_default();
        // The common repeat (the same look asked again) costs nothing.
        if list.last() != Some(&who) {
            list.push(who);
            self.entries += 1;
        }
    }

    /// Whether `who` waits for `on`. Linear in `on`'s waiters: used only
    /// by the experimental `JanusConfig::wait_one_blocker`.
    pub fn waits(&self, on: TxnId, who: TxnId) -> bool {
        self.waiters.get(&on).is_some_and(|ws| ws.contains(&who))
    }

    /// `t`'s awaited event happened: queue whoever waits for it, each once,
    /// in the order of its first wait.
    pub fn wake(&mut self, t: TxnId) {
        if let Some(ws) = self.waiters.remove(&t) {
            self.entries -= ws.len();
            if ws.len() <= SMALL {
                for (i, &w) in ws.iter().enumerate() {
                    if !ws[..i].contains(&w) {
                        self.queue.push_back(w);
                    }
                }
            } else {
                let mut seen: FastSet<TxnId> = FastSet::default();
                seen.reserve(ws.len());
                self.queue
                    .extend(ws.into_iter().filter(|&w| seen.insert(w)));
            }
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

    /// `(awaited, pairs, queued)` sizes, for memory statistics; pairs
    /// count repeated waits not yet dropped.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.waiters.len(), self.entries, self.queue.len())
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

    #[test]
    fn a_long_list_drops_repeats_and_keeps_first_wait_order() {
        let a = TxnId(0);
        let mut w = Wakeups::default();
        // Waiters 1..=40, then every even one again, then 7 again.
        for i in (1..=40).chain((2..=40).step_by(2)).chain([7]) {
            w.wait(a, TxnId(i));
        }
        assert_eq!(w.sizes(), (1, 61, 0));
        assert!(w.waits(a, TxnId(40)) && !w.waits(a, TxnId(41)));
        w.wake(a);
        assert_eq!(w.sizes(), (0, 0, 40));
        let order: Vec<u64> = std::iter::from_fn(|| w.pop()).map(|t| t.0).collect();
        assert_eq!(order, (1..=40).collect::<Vec<_>>());
    }
}
