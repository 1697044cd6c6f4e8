//! Speculative verification offload (§2): the switch on the path between a
//! rack of clients and the store.
//!
//! On a request it checks the compares against its value cache: any
//! mismatch aborts the transaction straight back to the client, with the
//! cached values as corrections; otherwise it puts the request's writes in
//! the cache (speculatively: before the store has decided) and forwards it.
//! A store abort passing back refreshes the cache from its corrections.
//! Read-only requests pass unverified. The switch never commits anything,
//! and forwards what it does not abort unchanged — the two facts §2
//! "Correctness" rests on.
//!
//! Hardware limits (§3), as configuration: requests with more operations
//! than the parser reaches pass unverified (and their writes, which the
//! switch cannot see, evict the keys from the cache); values wider than the
//! register stages hold are not cached; every operation costs one
//! recirculation.
//!
//! One addition to the paper: its rack link never duplicates a packet, ours
//! may (in the simulator) and clients retransmit. If one copy of a request
//! passed and a later copy were aborted on the strength of the first copy's
//! own speculative writes, the client could believe aborted a transaction
//! that commits. So the switch remembers, per transaction, what it did with
//! the first copy and does the same with every later one ([`Tombstones`],
//! bounded by the clients' floors).

use super::cache::ValueCache;
use super::msg::{AbortedBy, Compare, Msg, Observed, Outcome, Reply, Request};
use super::NoccConfig;
use crate::tombstones::Tombstones;
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TimerId};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::topology::Topology;

const KEEP: Time = 2_000 * tessera_core::ids::MS;
const SWEEP: TimerId = TimerId(1);
const SWEEP_EVERY: Time = 50 * tessera_core::ids::MS;

/// What the switch did with a transaction's first copy.
#[derive(Clone, Debug)]
enum Verdict {
    Forwarded,
    Aborted(Vec<Observed>),
}

pub struct NoccSwitch {
    cfg: NoccConfig,
    topology: Arc<Topology>,
    cache: ValueCache,
    seen: Tombstones<Verdict>,
    aborts: u64,
    forwarded: u64,
    unverified: u64,
}

impl NoccSwitch {
    pub fn new(cfg: NoccConfig, topology: Arc<Topology>) -> Self {
        let cache = ValueCache::new(cfg.cache_keys, cfg.max_value_bytes());
        NoccSwitch {
            cfg,
            topology,
            cache,
            seen: Tombstones::new(KEEP),
            aborts: 0,
            forwarded: 0,
            unverified: 0,
        }
    }

    fn store(&self) -> NodeId {
        self.topology.leader(ShardId(0))
    }

    /// The compares that fail against the cache, as corrections.
    fn verify(&self, compares: &[Compare]) -> Vec<Observed> {
        compares
            .iter()
            .filter_map(|c| {
                let (value, version) = self.cache.get(c.key)?;
                (!c.holds(*version)).then(|| Observed {
                    key: c.key,
                    value: value.clone(),
                    version: *version,
                })
            })
            .collect()
    }

    fn first_copy(&mut self, ctx: &mut Ctx<Msg>, req: &Request) -> Verdict {
        if !self.cfg.verify || req.writes.is_empty() {
            return Verdict::Forwarded;
        }
        ctx.charge(self.cfg.recirculation * req.ops() as Time);
        if req.ops() > self.cfg.max_ops {
            // Beyond the parser: pass it, and forget what it may overwrite.
            self.unverified += 1;
            for (k, _) in &req.writes {
                self.cache.remove(*k);
            }
            return Verdict::Forwarded;
        }
        let corrections = self.verify(&req.compares);
        if corrections.is_empty() {
            for (k, v) in &req.writes {
                self.cache.put(*k, Some(v.clone()), req.txn.version());
            }
            Verdict::Forwarded
        } else {
            self.aborts += 1;
            if self.cfg.probe {
                ctx.send(self.store(), Msg::Probe(req.compares.clone()));
            }
            Verdict::Aborted(corrections)
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<Msg>, req: Request) {
        self.seen.raise_floor(req.floor);
        let verdict = match self.seen.get(req.txn) {
            Some(v) => v.clone(),
            None if self.seen.below_floor(req.txn) => return, // stale copy
            None => {
                let v = self.first_copy(ctx, &req);
                if self.cfg.verify {
                    self.seen.insert(req.txn, v.clone(), ctx.now());
                }
                v
            }
        };
        match verdict {
            Verdict::Forwarded => {
                self.forwarded += 1;
                let store = self.store();
                ctx.send(store, Msg::Request(req));
            }
            Verdict::Aborted(corrections) => ctx.send(
                req.client,
                Msg::Reply(Reply {
                    txn: req.txn,
                    client: req.client,
                    outcome: Outcome::Aborted {
                        by: AbortedBy::Switch,
                        corrections,
                    },
                }),
            ),
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<Msg>, reply: Reply) {
        if self.cfg.verify {
            match &reply.outcome {
                Outcome::Aborted { corrections, .. } => {
                    ctx.charge(self.cfg.recirculation * corrections.len() as Time);
                    for c in corrections {
                        self.cache.put(c.key, c.value.clone(), c.version);
                    }
                }
                Outcome::Committed { .. } => {}
            }
        }
        ctx.send(reply.client, Msg::Reply(reply));
    }
}

impl Node<Msg> for NoccSwitch {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(SWEEP_EVERY, SWEEP);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Request(req) => self.on_request(ctx, req),
            Msg::Reply(reply) => self.on_reply(ctx, reply),
            Msg::Probe(_) => tracing::warn!(?from, "switch got a probe"),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == SWEEP {
            self.seen.sweep(ctx.now());
            ctx.set_timer(SWEEP_EVERY, SWEEP);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        NodeReport {
            client: None,
            counters: vec![
                ("switch_aborts", std::mem::take(&mut self.aborts)),
                ("switch_forwarded", std::mem::take(&mut self.forwarded)),
                ("switch_unverified", std::mem::take(&mut self.unverified)),
            ],
            ..NodeReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use tessera_core::ids::{Key, TxnId, Version};
    use tessera_core::node::Effect;
    use tessera_core::txn::Value;

    fn request(txn: TxnId, read: Version, write: &'static [u8]) -> Request {
        Request {
            txn,
            client: NodeId(2),
            floor: txn,
            compares: vec![Compare {
                key: Key::new(0, 1),
                version: Some(read),
            }],
            reads: Vec::new(),
            writes: vec![(Key::new(0, 1), Value::from_static(write))],
        }
    }

    /// What the switch sent for `msg`: (destination, is it an abort reply).
    fn deliver(sw: &mut NoccSwitch, msg: Msg) -> Vec<(NodeId, bool)> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, NodeId(3), &mut rng, &mut effects);
        sw.on_message(&mut ctx, NodeId(2), msg);
        effects
            .into_iter()
            .filter_map(|e| match e {
                Effect::Send { to, msg } => Some((to, matches!(msg, Msg::Reply(_)))),
                _ => None,
            })
            .collect()
    }

    fn switch() -> NoccSwitch {
        let topology = Arc::new(Topology::new(1, 1, 1).with_switches(1));
        NoccSwitch::new(NoccConfig::default(), topology)
    }

    #[test]
    fn a_stale_compare_is_aborted_at_the_switch() {
        let mut sw = switch();
        let t1 = TxnId::new(NodeId(2), 0, 1);
        let t2 = TxnId::new(NodeId(2), 0, 2);
        let store = NodeId(0);
        assert_eq!(
            deliver(&mut sw, Msg::Request(request(t1, Version::INITIAL, b"1"))),
            [(store, false)]
        );
        // t2 read the value t1 overwrote: the switch knows it is stale.
        assert_eq!(
            deliver(&mut sw, Msg::Request(request(t2, Version::INITIAL, b"1"))),
            [(NodeId(2), true)]
        );
    }

    /// A second copy of a forwarded request must not be aborted on the
    /// strength of the first copy's own speculative write: the client could
    /// then believe aborted a transaction the store commits.
    #[test]
    fn a_duplicate_of_a_forwarded_request_is_forwarded_again() {
        let mut sw = switch();
        let t1 = TxnId::new(NodeId(2), 0, 1);
        let store = NodeId(0);
        assert_eq!(
            deliver(&mut sw, Msg::Request(request(t1, Version::INITIAL, b"1"))),
            [(store, false)]
        );
        assert_eq!(
            deliver(&mut sw, Msg::Request(request(t1, Version::INITIAL, b"1"))),
            [(store, false)]
        );
    }
}
