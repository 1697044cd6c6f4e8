//! The data store (§2 "Data Store"): OCC over compare operations.
//!
//! A request commits when every compare holds (the key still has the
//! version the client read; see [`Compare`]); then its writes are
//! installed and the reply carries the values of the compared and read keys
//! (as of the commit, before the writes). Otherwise it aborts with
//! *corrections*: the current values of the keys whose compares failed. The
//! serialization order is the order requests arrive here (§2
//! "Correctness"): one store, one thread, no locks.
//!
//! A request may arrive more than once (retransmitted, duplicated by the
//! network): the first copy decides and later copies get the same answer
//! from a [`Tombstones`] entry, so a committed transaction is never applied
//! twice nor reported aborted.

use super::msg::{AbortedBy, Compare, Msg, Observed, Outcome, Reply, Request};
use crate::tombstones::Tombstones;
use tessera_core::ids::{Key, NodeId, Time, TimerId, Version};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;

/// How long answers are kept for clients that stop raising their floor.
const KEEP: Time = 2_000 * tessera_core::ids::MS;
const SWEEP: TimerId = TimerId(1);
const SWEEP_EVERY: Time = 50 * tessera_core::ids::MS;

pub struct NoccStore {
    store: Store,
    /// Check compares. Only the checker tests turn this off.
    validate: bool,
    answered: Tombstones<Outcome>,
    commits: u64,
    aborts: u64,
    probes: u64,
    false_aborts: u64,
}

impl NoccStore {
    pub fn new(env: ServerEnv, validate: bool) -> Self {
        NoccStore {
            store: env.store,
            validate,
            answered: Tombstones::new(KEEP),
            commits: 0,
            aborts: 0,
            probes: 0,
            false_aborts: 0,
        }
    }

    fn observe(&self, key: Key) -> Observed {
        let r = self.store.get(key);
        Observed {
            key,
            value: r.map(|r| r.value.clone()),
            version: self.version(key),
        }
    }

    fn version(&self, key: Key) -> Version {
        self.store
            .get(key)
            .map_or(Version::INITIAL, |r| r.meta.version)
    }

    /// The compares that fail now, as corrections.
    fn failed(&self, compares: &[Compare]) -> Vec<Observed> {
        compares
            .iter()
            .filter(|c| {
                // Even unchecked, a compare on a never-seen key fails: the
                // client has no value to compute with.
                c.version.is_none() || (self.validate && !c.holds(self.version(c.key)))
            })
            .map(|c| self.observe(c.key))
            .collect()
    }

    fn decide(&mut self, req: &Request) -> Outcome {
        let corrections = self.failed(&req.compares);
        if !corrections.is_empty() {
            self.aborts += 1;
            return Outcome::Aborted {
                by: AbortedBy::Store,
                corrections,
            };
        }
        let observed = req
            .compares
            .iter()
            .map(|c| c.key)
            .chain(req.reads.iter().copied())
            .map(|k| self.observe(k))
            .collect();
        for (k, v) in &req.writes {
            self.store.install(*k, v.clone(), req.txn.version());
        }
        self.commits += 1;
        Outcome::Committed { observed }
    }

    fn on_request(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, req: Request) {
        self.answered.raise_floor(req.floor);
        let outcome = match self.answered.get(req.txn) {
            Some(o) => o.clone(),
            None if self.answered.below_floor(req.txn) => return, // stale copy
            None => {
                let o = self.decide(&req);
                self.answered.insert(req.txn, o.clone(), ctx.now());
                o
            }
        };
        ctx.send(
            from,
            Msg::Reply(Reply {
                txn: req.txn,
                client: req.client,
                outcome,
            }),
        );
    }
}

impl Node<Msg> for NoccStore {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(SWEEP_EVERY, SWEEP);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Request(req) => self.on_request(ctx, from, req),
            Msg::Probe(compares) => {
                self.probes += 1;
                if self.failed(&compares).is_empty() {
                    self.false_aborts += 1;
                }
            }
            Msg::Reply(_) => tracing::warn!(?from, "store got a reply"),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == SWEEP {
            self.answered.sweep(ctx.now());
            ctx.set_timer(SWEEP_EVERY, SWEEP);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        NodeReport {
            client: None,
            counters: vec![
                ("store_commits", std::mem::take(&mut self.commits)),
                ("store_aborts", std::mem::take(&mut self.aborts)),
                ("switch_aborts_probed", std::mem::take(&mut self.probes)),
                ("false_aborts", std::mem::take(&mut self.false_aborts)),
            ],
            ..NodeReport::default()
        }
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }
}
