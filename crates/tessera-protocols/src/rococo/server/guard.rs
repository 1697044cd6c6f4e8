//! After a restart (§3.5): new start requests wait for the replayed
//! transactions whose commit a crash may have taken back after it was
//! reported.
//!
//! **Why a `CommitOk` need not wait for its finish record.** The paper's
//! servers log a commit "off the critical path" (§3.5); ours reply
//! `CommitOk` once the records *before* the transaction's finish record are
//! durable, not the finish record itself ([`super::log`]). What the reply
//! reports — the outputs of the deferred pieces — is a function of the
//! store just before they ran, and every change to the store is a logged
//! record (immediate pieces in start records, deferred ones in finishes,
//! merged pieces in their commit), so that store is exactly what a replay
//! of the records before the finish rebuilds. A crash loses a suffix of the
//! log; if it took a reported finish of `T`, it took nothing before it, so:
//!
//! 1. the replayed store is the one `T`'s deferred pieces ran on, and at
//!    most one reported finish was lost (a later reply waits for every
//!    earlier record, that finish included);
//! 2. `T`'s commit decision is not lost: `T` was DECIDED, so its coordinator
//!    had every start reply and sent its commit request to every server of
//!    `T`, and every ancestor of `T` was COMMITTING — the restarted server
//!    gets the same component from the coordinator's resends, from its
//!    own recovery driver (which asks `T`'s servers again), or, when they
//!    have already collected `T`, from a status request to the server that
//!    answered `Gone` ([`super::RococoServer`]'s `Gone` handling);
//! 3. re-running `T`'s deferred pieces on that store gives the reported
//!    outputs if nothing else changes the keys `T` touches here first.
//!    Replayed transactions cannot: one that conflicts with `T` here is
//!    ordered by the graph as before the crash (an ancestor ran before
//!    `T`'s finish and is in the log, a descendant waits for `T`). A
//!    request that comes after the restart could: an immediate piece
//!    writing a key `T` reads would change `T`'s outputs, and one reading a
//!    key `T` writes would miss a write its client already saw reported
//!    (strict serializability is about real time).
//!
//! So a restarted server *protects* every replayed local transaction not
//! yet finished (any could be that `T`), and holds a new start request
//! whose new pieces touch a key of a protected transaction until it
//! finishes. Held requests get no answer; their coordinators resend,
//! which is harmless. Read-only requests already wait for the unfinished
//! writers of what they read (Fig. 10); merged pieces (§4.2) never touch a
//! deferrable piece's columns (the offline checker made any such piece
//! immediate), so neither is held.
//!
//! **No wait in a cycle.** A transaction with a request held here has new
//! pieces here, so it was never COMMITTING (a COMMITTING transaction had
//! every start reply, hence every piece logged here), and neither was any
//! transaction behind it. A reported `T` had only COMMITTING ancestors, so:
//! * a protected transaction that sends new pieces, or whose commit waits
//!   for a transaction held here, was not reported: it is no longer
//!   protected ([`Guard::unprotect`]) and its outputs may change;
//! * a reported `T` waits only for transactions that had every piece
//!   logged, which nothing here holds.
//!
//! **Holds at other servers** (`rococo_servers_survive_crashes` seed 677:
//! servers 1, 2 and 0 restarted within 60 ms). The argument above does not
//! need the held request to be held *here*: a request of `X` held at any
//! restarted server `B` has new pieces there, so `X` was never COMMITTING
//! before `B` held it, and neither was anything behind it. Servers restarted
//! close together otherwise hold each other up for good: server 1 protects
//! `P` (replayed STARTED, all its pieces here) whose start request is held
//! at server 2, which protects `Q` whose request server 1 holds; nothing
//! either holds names its own protected transactions, so neither learns
//! that `P` and `Q` were never reported, and their recovery drivers resend
//! into the holds for ever (544 holds, no commit after 130 ms). So, while
//! a guard is up, the server asks the servers of its protected transactions
//! and of their STARTED ancestors whether they hold a request of them
//! ([`super::super::msg::Msg::AskHeld`], every retransmission timeout), and
//! a server that holds one says so (`Held`); the answer unprotects as a
//! hold here does ([`Guard::learn_unreported`]). The status requests about
//! those ancestors that do not involve this server go at the same pace,
//! not backed off: what they wait for is often just an answer lost to a
//! crash of the asked server, and the guard holds every new request on the
//! protected keys meanwhile (seed 1825, once the question above changed the
//! run's message order: four backed-off resends lost, 460 ms held).
//!
//! "Held" stays true while it is answered: a request is held for the keys
//! of the pieces it brought new, protected keys only go (never come), and
//! a piece's keys are fixed by its inputs; so had every piece a held
//! request brought new been served meanwhile through other requests, its
//! keys would have been free then, and it would have been released too.
//!
//! *Only answers to this incarnation's questions count.* "`X` is held at `B`
//! at time `t`" shows that `X` was not COMMITTING before `t`, which proves
//! nothing about a crash of ours after `t`: `X` could have been released at
//! `B`, committed, finished here, reported, and then lost with our crash.
//! So the question carries a nonce drawn at our restart ([`Guard::nonce`])
//! and the answer echoes it: an answer with our nonce was given by `B`
//! after our restart, hence after our crash, so `X` was not reported before
//! the crash. (An answer to an earlier incarnation's question, late in the
//! network, carries that incarnation's nonce, equal to ours with
//! probability 2^-64.)
//!
//! Still open: a protected transaction waiting for a STARTED one that is
//! held nowhere yet cannot move (its coordinator is slow, or its start
//! request waits for merged pieces' locks) waits with it; nothing there is
//! a cycle of holds, so it ends when that transaction moves.

use super::super::msg::Start;
use tessera_core::ids::{Key, NodeId, Time, TxnId};
use tessera_core::{FastMap, FastSet};

/// A held start request, with the keys of its new pieces here.
struct Held {
    from: NodeId,
    req: Start,
    keys: Vec<Key>,
}

/// The restarted server's protected transactions and held requests.
#[derive(Default)]
pub(super) struct Guard {
    /// Replayed local transactions not finished, with their keys here.
    protected: FastMap<TxnId, Vec<Key>>,
    /// Protected transactions touching each key.
    keys: FastMap<Key, u32>,
    /// In arrival order.
    held: Vec<Held>,
    /// Drawn at the restart; echoed by the answers to this incarnation's
    /// questions about holds elsewhere (see the module doc).
    nonce: u64,
    /// Transactions another server said it holds a request of: never
    /// COMMITTING before this restart.
    unreported: FastSet<TxnId>,
    /// When to ask the other servers about holds again.
    next_ask: Time,
}

impl Guard {
    /// A guard over `protected`, asking about holds elsewhere with `nonce`,
    /// or none when there is nothing to protect.
    pub fn new(
        protected: impl IntoIterator<Item = (TxnId, Vec<Key>)>,
        nonce: u64,
    ) -> Option<Guard> {
        let mut g = Guard {
            nonce,
            ..Guard::default()
        };
        for (t, keys) in protected {
            for &k in &keys {
                *g.keys.entry(k).or_default() += 1;
            }
            g.protected.insert(t, keys);
        }
        (!g.protected.is_empty()).then_some(g)
    }

    pub fn is_protected(&self, t: TxnId) -> bool {
        self.protected.contains_key(&t)
    }

    /// The protected transactions, in id order.
    pub fn protected(&self) -> Vec<TxnId> {
        let mut ts: Vec<TxnId> = self.protected.keys().copied().collect();
        ts.sort_unstable();
        ts
    }

    /// `t` finished, or was shown never reported: stop protecting it.
    pub fn unprotect(&mut self, t: TxnId) {
        let Some(keys) = self.protected.remove(&t) else {
            return;
        };
        for k in keys {
            if let Some(n) = self.keys.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    self.keys.remove(&k);
                }
            }
        }
    }

    pub fn conflicts(&self, keys: &[Key]) -> bool {
        keys.iter().any(|k| self.keys.contains_key(k))
    }

    /// Hold `req` (its new pieces touch `keys`); a resend of a request
    /// already held is dropped.
    pub fn hold(&mut self, from: NodeId, req: Start, keys: Vec<Key>) {
        let again = self
            .held
            .iter()
            .any(|h| h.from == from && h.req.txn == req.txn && h.req.pieces == req.pieces);
        if !again {
            self.held.push(Held { from, req, keys });
        }
    }

    /// Whether a request of `t` is held.
    pub fn holds(&self, t: TxnId) -> bool {
        self.held.iter().any(|h| h.req.txn == t)
    }

    /// Whether `t` is known never COMMITTING before this restart: a request
    /// of it is held here, or another server said it holds one.
    pub fn never_committing(&self, t: TxnId) -> bool {
        self.holds(t) || self.unreported.contains(&t)
    }

    /// Another server answered this incarnation's question: it holds a
    /// request of `t`.
    pub fn learn_unreported(&mut self, t: TxnId) {
        self.unreported.insert(t);
        self.unprotect(t);
    }

    pub fn nonce(&self) -> u64 {
        self.nonce
    }

    /// Whether to ask about holds elsewhere at `now`; if so, the next time
    /// is `every` later.
    pub fn ask_due(&mut self, now: Time, every: Time) -> bool {
        if now < self.next_ask {
            return false;
        }
        self.next_ask = now.saturating_add(every);
        true
    }

    pub fn holds_any(&self) -> bool {
        !self.held.is_empty()
    }

    /// The held requests that no longer touch a protected key, in arrival
    /// order.
    pub fn releasable(&mut self) -> Vec<(NodeId, Start)> {
        let keys = &self.keys;
        let (free, kept): (Vec<Held>, Vec<Held>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| !h.keys.iter().any(|k| keys.contains_key(k)));
        self.held = kept;
        free.into_iter().map(|h| (h.from, h.req)).collect()
    }

    /// Nothing protected and nothing held: the guard can go.
    pub fn is_done(&self) -> bool {
        self.protected.is_empty() && self.held.is_empty()
    }
}
