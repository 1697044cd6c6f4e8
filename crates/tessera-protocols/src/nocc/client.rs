//! The client side (§2 "Definitions and System Model"; §4 "TPC-C"): a local
//! mirror of every value the host has read or written; transactions run
//! against the mirror and are submitted as compares (the values read),
//! reads and writes. An abort brings corrections, which update the mirror,
//! and the client host retries at once ([`AbortReason::Stale`]).
//!
//! Read-only transactions whose keys are known up front are sent as plain
//! reads: the store serves them and they always commit. Others (with keys
//! that depend on earlier pieces) run on the mirror and are validated by
//! compares like write transactions.

use super::msg::{Compare, Msg, Observed, Outcome, Reply, Request};
use super::NoccConfig;
use std::collections::BTreeSet;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::txn::{AbortReason, Attempt, ReadObs, TxnOutcome, Value};
use tessera_core::FastMap;

const TICK: TimerId = TimerId(1);

/// A transaction run on the mirror.
struct MirrorRun {
    compares: Vec<Compare>,
    writes: Vec<(Key, Value)>,
    outputs: Vec<Value>,
}

struct Pending {
    attempt: Attempt,
    request: Request,
    /// Plain reads: outputs are computed when the values arrive.
    plain_reads: bool,
    /// Outputs computed on the mirror (compare-validated transactions).
    outputs: Vec<Value>,
    retransmit_at: Time,
    rto: Time,
}

pub struct NoccClient {
    cfg: NoccConfig,
    me: NodeId,
    /// Where requests go: the rack's switch, or the store when there is none.
    first_hop: NodeId,
    /// Known values (`None`: known absent) and their versions.
    mirror: FastMap<Key, (Option<Value>, Version)>,
    pending: FastMap<TxnId, Pending>,
    open: BTreeSet<TxnId>,
    switch_aborts: u64,
    store_aborts: u64,
}

impl NoccClient {
    pub fn new(cfg: NoccConfig, env: CoordinatorEnv) -> Self {
        let store = env.topology.leader(ShardId(0));
        let first_hop = env.topology.switch_of(env.me).unwrap_or(store);
        NoccClient {
            cfg,
            me: env.me,
            first_hop,
            mirror: tessera_core::fast_map(),
            pending: tessera_core::fast_map(),
            open: BTreeSet::new(),
            switch_aborts: 0,
            store_aborts: 0,
        }
    }

    fn floor(&self) -> TxnId {
        *self.open.first().expect("called with a transaction open")
    }

    /// Run every piece on the mirror: the compares (what was read), the
    /// writes (last value per key) and the outputs.
    fn run_on_mirror(&self, attempt: &Attempt) -> MirrorRun {
        let proc = attempt.txn.as_ref();
        let n = proc.pieces().len();
        let mut outputs: Vec<Value> = Vec::with_capacity(n);
        let mut compares: Vec<Compare> = Vec::new();
        let mut writes: Vec<(Key, Value)> = Vec::new();
        for i in 0..n {
            let inputs: Vec<Value> = proc.pieces()[i]
                .inputs
                .iter()
                .map(|&j| outputs[j as usize].clone())
                .collect();
            let spec = proc.resolve(i, &inputs);
            let mut values: Vec<Option<&Value>> = Vec::with_capacity(spec.reads.len());
            for a in &spec.reads {
                if let Some((_, v)) = writes.iter().find(|(k, _)| *k == a.key) {
                    values.push(Some(v));
                    continue;
                }
                let known = self.mirror.get(&a.key);
                if !compares.iter().any(|c| c.key == a.key) {
                    compares.push(Compare {
                        key: a.key,
                        version: known.map(|(_, v)| *v),
                    });
                }
                values.push(known.and_then(|(v, _)| v.as_ref()));
            }
            let res = proc.execute(i, &values, &inputs);
            for (k, v) in res.writes {
                match writes.iter_mut().find(|(wk, _)| *wk == k) {
                    Some(w) => w.1 = v,
                    None => writes.push((k, v)),
                }
            }
            outputs.push(res.output);
        }
        MirrorRun {
            compares,
            writes,
            outputs,
        }
    }

    fn send(&self, ctx: &mut Ctx<Msg>, req: &Request) {
        ctx.send(self.first_hop, Msg::Request(req.clone()));
    }

    fn learn(&mut self, observed: &[Observed]) {
        for o in observed {
            self.mirror.insert(o.key, (o.value.clone(), o.version));
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<Msg>, reply: Reply) {
        let Some(p) = self.pending.remove(&reply.txn) else {
            return; // a duplicate answer
        };
        self.open.remove(&reply.txn);
        match reply.outcome {
            Outcome::Committed { observed } => {
                // What the transaction read: for plain reads, what the store
                // served; otherwise what the compares named (the store
                // checked them), never what the store reports now, so a
                // store that failed to check would show in the history.
                let reads = if p.plain_reads {
                    observed
                        .iter()
                        .map(|o| ReadObs::row(o.key, o.version))
                        .collect()
                } else {
                    p.request
                        .compares
                        .iter()
                        .map(|c| {
                            ReadObs::row(
                                c.key,
                                c.version.expect("a committed compare named its version"),
                            )
                        })
                        .collect()
                };
                self.learn(&observed);
                let version = reply.txn.version();
                for (k, v) in &p.request.writes {
                    self.mirror.insert(*k, (Some(v.clone()), version));
                }
                let outputs = if p.plain_reads {
                    self.run_on_mirror(&p.attempt).outputs
                } else {
                    p.outputs
                };
                let writes = p.request.writes.iter().map(|(k, _)| *k).collect();
                ctx.done(
                    reply.txn,
                    TxnOutcome::Committed {
                        reads,
                        writes,
                        outputs,
                    },
                );
            }
            Outcome::Aborted { by, corrections } => {
                match by {
                    super::msg::AbortedBy::Switch => self.switch_aborts += 1,
                    super::msg::AbortedBy::Store => self.store_aborts += 1,
                }
                self.learn(&corrections);
                ctx.done(reply.txn, TxnOutcome::Aborted(AbortReason::Stale));
            }
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let mut due: Vec<TxnId> = self
            .pending
            .iter()
            .filter(|(_, p)| p.retransmit_at <= now)
            .map(|(t, _)| *t)
            .collect();
        due.sort_unstable();
        let floor = self.open.first().copied();
        for txn in due {
            let p = self.pending.get_mut(&txn).expect("listed");
            p.rto = (p.rto * 2).min(self.cfg.retransmit * 8);
            p.retransmit_at = now + p.rto;
            p.request.floor = floor.expect("pending implies open");
            ctx.send(self.first_hop, Msg::Request(p.request.clone()));
        }
        ctx.set_timer(self.cfg.retransmit / 2, TICK);
    }
}

impl Coordinator<Msg> for NoccClient {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let txn = attempt.id;
        self.open.insert(txn);
        let proc = attempt.txn.as_ref();
        let plain_reads = proc.read_only() && proc.pieces().iter().all(|p| !p.dynamic);
        let (request, outputs) = if plain_reads {
            let reads = proc
                .pieces()
                .iter()
                .flat_map(|p| p.reads.iter().map(|a| a.key))
                .collect();
            let req = Request {
                txn,
                client: self.me,
                floor: self.floor(),
                compares: Vec::new(),
                reads,
                writes: Vec::new(),
            };
            (req, Vec::new())
        } else {
            let MirrorRun {
                compares,
                writes,
                outputs,
            } = self.run_on_mirror(&attempt);
            let req = Request {
                txn,
                client: self.me,
                floor: self.floor(),
                compares,
                reads: Vec::new(),
                writes,
            };
            (req, outputs)
        };
        self.send(ctx, &request);
        let rto = self.cfg.retransmit;
        self.pending.insert(
            txn,
            Pending {
                attempt,
                request,
                plain_reads,
                outputs,
                retransmit_at: ctx.now() + rto,
                rto,
            },
        );
    }
}

impl Node<Msg> for NoccClient {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.cfg.retransmit / 2, TICK);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Reply(r) => self.on_reply(ctx, r),
            Msg::Request(_) | Msg::Probe(_) => {
                tracing::warn!(?from, "client got a request");
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == TICK {
            self.tick(ctx);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        NodeReport {
            client: None,
            counters: vec![
                (
                    "client_saw_switch_aborts",
                    std::mem::take(&mut self.switch_aborts),
                ),
                (
                    "client_saw_store_aborts",
                    std::mem::take(&mut self.store_aborts),
                ),
            ],
            ..NodeReport::default()
        }
    }
}
