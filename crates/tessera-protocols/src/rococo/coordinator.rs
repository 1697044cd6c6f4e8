//! The coordinator role: read-write transactions through their start and
//! commit phases ([`super::driver::Driver`]); read-only transactions by
//! rounds of reads repeated until two in a row agree (§4.1, Fig. 9).
//!
//! Under heavy write contention the rounds of a read-only transaction may
//! keep disagreeing (measured: a YCSB transaction of 10 zipf-0.99 reads went
//! 19 rounds under message loss). After [`RococoConfig::ro_rounds`] rounds,
//! a read-only transaction made of deferrable pieces only runs through the
//! start and commit phases like any other, where it is ordered, not retried.
//! This is ours, not the paper's; it is safe when its reads conflict with
//! deferrable writes only (the offline checker run with read-only
//! transactions included says so; micro and YCSB have no immediate pieces).
//!
//! A Rococo coordinator never aborts a transaction: conflicts are reordered,
//! not refused (§2.2), and lost messages are resent until answered.

use super::driver::{well_formed, Driver};
use super::msg::{Msg, PieceReply};
use super::RococoConfig;
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TimerId, TxnId};
use tessera_core::node::{Ctx, Node};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, AbortReason, Attempt, PieceKind, Txn, TxnOutcome, Value};
use tessera_core::FastMap;

/// A read-only transaction in flight (Fig. 9).
struct ReadOnly {
    proc: Txn,
    shards: Vec<(ShardId, NodeId)>,
    round: u32,
    sent: Vec<bool>,
    results: Vec<Option<PieceReply>>,
    remaining: usize,
    /// The previous round's results.
    previous: Option<Vec<PieceReply>>,
    retransmit_at: Time,
    rto: Time,
}

impl ReadOnly {
    /// Send every read piece of this round whose inputs are ready.
    fn dispatch(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, resend: bool) {
        let pieces = self.proc.pieces();
        for &(shard, node) in &self.shards {
            let mut ids = Vec::new();
            let mut inputs = Vec::new();
            for (i, p) in pieces.iter().enumerate() {
                if p.shard != shard || self.results[i].is_some() || self.sent[i] != resend {
                    continue;
                }
                if !p.inputs.iter().all(|&j| self.results[j as usize].is_some()) {
                    continue;
                }
                self.sent[i] = true;
                ids.push(i as u16);
                inputs.push(
                    p.inputs
                        .iter()
                        .map(|&j| {
                            self.results[j as usize]
                                .as_ref()
                                .map_or_else(Value::new, |r| r.output.clone())
                        })
                        .collect(),
                );
            }
            if !ids.is_empty() {
                ctx.send(
                    node,
                    Msg::RoRead {
                        txn,
                        round: self.round,
                        proc: self.proc.clone(),
                        pieces: ids,
                        inputs,
                    },
                );
            }
        }
    }

    fn new_round(&mut self) {
        let n = self.results.len();
        self.round += 1;
        self.sent = vec![false; n];
        self.results = vec![None; n];
        self.remaining = n;
    }
}

/// Two rounds agree when every piece read the same versions and produced
/// the same output.
fn same(a: &[PieceReply], b: &[PieceReply]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.piece == y.piece && x.reads == y.reads && x.output == y.output)
}

/// The coordinator role of [`super::Rococo`].
pub struct RococoCoordinator {
    cfg: RococoConfig,
    topology: Arc<Topology>,
    me: NodeId,
    incarnation: u8,
    rw: FastMap<TxnId, Driver>,
    ro: FastMap<TxnId, ReadOnly>,
}

const TICK: TimerId = TimerId(1);

impl RococoCoordinator {
    pub fn new(cfg: RococoConfig, env: CoordinatorEnv) -> Self {
        RococoCoordinator {
            cfg,
            topology: env.topology,
            me: env.me,
            incarnation: env.incarnation,
            rw: tessera_core::fast_map(),
            ro: tessera_core::fast_map(),
        }
    }

    fn on_ro_read_ok(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        round: u32,
        results: Vec<PieceReply>,
    ) {
        let Some(ro) = self.ro.get_mut(&txn) else {
            return;
        };
        if round != ro.round {
            return;
        }
        for r in results {
            let i = r.piece as usize;
            if i < ro.results.len() && ro.results[i].is_none() {
                ro.results[i] = Some(r);
                ro.remaining -= 1;
            }
        }
        if ro.remaining > 0 {
            ro.dispatch(ctx, txn, false);
            return;
        }
        let results: Vec<PieceReply> = ro.results.iter().flatten().cloned().collect();
        if ro.previous.as_deref().is_some_and(|p| same(p, &results)) {
            let ro = self.ro.remove(&txn).expect("present");
            let reads = results.iter().flat_map(|r| r.reads.clone()).collect();
            let outputs = results.into_iter().map(|r| r.output).collect();
            drop(ro);
            ctx.done(
                txn,
                TxnOutcome::Committed {
                    reads,
                    writes: Vec::new(),
                    outputs,
                },
            );
            return;
        }
        tracing::trace!(?txn, round = ro.round, "read-only rounds differ");
        let all_deferrable = ro
            .proc
            .pieces()
            .iter()
            .all(|p| p.kind == PieceKind::Deferrable);
        if all_deferrable && ro.round + 1 >= self.cfg.ro_rounds {
            // Hot keys keep changing between rounds: order the reads in the
            // dependency graph instead, where nothing waits in vain.
            let ro = self.ro.remove(&txn).expect("present");
            let mut d = Driver::new(
                txn,
                ro.proc,
                &self.topology,
                &self.cfg.merges,
                ctx.now(),
                self.cfg.retransmit,
            );
            d.begin(ctx);
            self.rw.insert(txn, d);
            return;
        }
        ro.previous = Some(results);
        ro.new_round();
        ro.rto = self.cfg.retransmit;
        ro.retransmit_at = ctx.now() + ro.rto;
        ro.dispatch(ctx, txn, false);
    }

    fn tick(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let cap = self.cfg.retransmit * 8;
        let mut ids: Vec<TxnId> = self.rw.keys().copied().collect();
        ids.sort_unstable();
        for t in ids {
            if let Some(d) = self.rw.get_mut(&t) {
                d.tick(ctx, cap);
            }
        }
        let mut ids: Vec<TxnId> = self
            .ro
            .iter()
            .filter(|(_, r)| r.retransmit_at <= now)
            .map(|(t, _)| *t)
            .collect();
        ids.sort_unstable();
        for t in ids {
            let ro = self.ro.get_mut(&t).expect("listed");
            ro.dispatch(ctx, t, true);
            ro.rto = (ro.rto * 2).min(cap);
            ro.retransmit_at = now + ro.rto;
        }
        ctx.set_timer(self.cfg.retransmit / 2, TICK);
    }
}

impl Coordinator<Msg> for RococoCoordinator {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let txn = attempt.id;
        debug_assert_eq!(txn.node(), self.me);
        debug_assert_eq!(txn.incarnation(), self.incarnation);
        let proc = attempt.txn;
        if !well_formed(proc.as_ref()) {
            tracing::error!(
                name = proc.name(),
                "a deferrable piece feeds another piece: not runnable under Rococo (§3.1)"
            );
            ctx.done(txn, TxnOutcome::Aborted(AbortReason::User));
            return;
        }
        let now = ctx.now();
        if proc.read_only() {
            let n = proc.pieces().len();
            let shards = participants(proc.as_ref())
                .into_iter()
                .map(|s| (s, self.topology.leader(s)))
                .collect();
            let mut ro = ReadOnly {
                proc,
                shards,
                round: 0,
                sent: vec![false; n],
                results: vec![None; n],
                remaining: n,
                previous: None,
                retransmit_at: now + self.cfg.retransmit,
                rto: self.cfg.retransmit,
            };
            ro.dispatch(ctx, txn, false);
            self.ro.insert(txn, ro);
        } else {
            let mut d = Driver::new(
                txn,
                proc,
                &self.topology,
                &self.cfg.merges,
                now,
                self.cfg.retransmit,
            );
            d.begin(ctx);
            self.rw.insert(txn, d);
        }
    }
}

impl Node<Msg> for RococoCoordinator {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.cfg.retransmit / 2, TICK);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::StartOk {
                txn,
                immediate,
                received,
                deps,
            } => {
                if let Some(d) = self.rw.get_mut(&txn) {
                    d.on_start_ok(ctx, immediate, received, deps);
                }
            }
            Msg::CommitOk { txn, deferred } => {
                let now = ctx.now();
                let outcome = self
                    .rw
                    .get_mut(&txn)
                    .and_then(|d| d.on_commit_ok(now, from, deferred));
                if let Some(outcome) = outcome {
                    let d = self.rw.remove(&txn).expect("present");
                    d.send_committed(ctx);
                    ctx.done(txn, outcome);
                }
            }
            Msg::RoReadOk {
                txn,
                round,
                results,
            } => self.on_ro_read_ok(ctx, txn, round, results),
            // A server recovering for us (it thought us silent, §3.5)
            // committed the transaction and a server collected it: its
            // results are lost, so the attempt ends in doubt.
            Msg::Gone { txn } => {
                if self.rw.remove(&txn).is_some() {
                    ctx.done(txn, TxnOutcome::InDoubt);
                }
            }
            Msg::OccExecuteOk { txn, results } => {
                if let Some(d) = self.rw.get_mut(&txn) {
                    d.on_occ_execute_ok(ctx, results);
                }
            }
            Msg::OccRetry { txn } => {
                if let Some(d) = self.rw.get_mut(&txn) {
                    d.on_occ_retry(ctx);
                }
            }
            Msg::OccExecute(_)
            | Msg::OccCommit { .. }
            | Msg::OccPrepare { .. }
            | Msg::OccVote { .. }
            | Msg::OccDecide { .. }
            | Msg::OccDecideOk { .. }
            | Msg::OccAsk { .. }
            | Msg::OccAbort { .. }
            | Msg::Start(_)
            | Msg::Commit { .. }
            | Msg::Committed { .. }
            | Msg::Inquire { .. }
            | Msg::InquireOk { .. }
            | Msg::NotHere { .. }
            | Msg::RoRead { .. } => {
                tracing::warn!(?from, "coordinator got a server's message");
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == TICK {
            self.tick(ctx);
        }
    }
}
