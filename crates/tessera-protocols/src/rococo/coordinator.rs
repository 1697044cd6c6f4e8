//! The coordinator role: read-write transactions through their start and
//! commit phases ([`super::driver::Driver`]); read-only transactions by
//! rounds of reads repeated until two in a row agree (§4.1, Fig. 9).
//!
//! Fig. 9 keeps the last round's outputs (`output' = output`) and runs one
//! new round per retry. A piece whose inputs are other pieces' outputs
//! waits for them, so the first round of a chain (TPC-C's StockLevel:
//! district, then orders, then order lines, then stock) takes one round
//! trip per link. Fig. 9 sends the later rounds' pieces with `input'`: here
//! every piece of a later round goes out at once with the previous round's
//! outputs as inputs (those that were the same in the last two rounds; a
//! moving one is waited for), and goes again, within the round, when this
//! round's outputs give it other inputs (the answer to the old ones is
//! dropped). A
//! round is complete when every piece has an answer for the inputs its
//! round gives it, so it is a round as Fig. 9's, every request of it sent
//! after the previous round ended — all §4.1's argument uses — and a
//! round that agrees with the last costs one round trip.
//!
//! Under heavy write contention the rounds of a read-only transaction may
//! keep disagreeing (measured: a YCSB transaction of 10 zipf-0.99 reads went
//! 19 rounds under message loss; a TPC-C StockLevel 27 at 20 clients per
//! server). A pause before the next round ([`RococoConfig::ro_backoff`],
//! off by default) caps their load safely but makes them worse: see
//! there. After [`RococoConfig::ro_rounds`] rounds,
//! a read-only transaction made of deferrable pieces only runs through the
//! start and commit phases like any other, where it is ordered, not retried.
//! This is ours, not the paper's; it is safe when its reads conflict with
//! deferrable writes only (the offline checker run with read-only
//! transactions included says so; micro and YCSB have no immediate pieces).
//!
//! A read-only transaction with immediate pieces runs, after as many
//! rounds, its **ordered form** instead, when its procedure has one
//! ([`tessera_core::txn::Procedure::ordered`]; TPC-C's StockLevel has
//! one): the same reads as a read-write transaction, under an id of its
//! own, through the start and commit phases, where the dependency graph
//! orders it among the writers and nothing is compared. Its immediate
//! pieces all sit at one server and feed every other piece, so its first
//! start request carries them all, as a chain the server feeds from its own
//! outputs ([`super::driver`]), and is the only one until it is answered.
//! The difficulty is theirs: StockLevel's orders and lines pieces, which
//! feed its stock pieces on other servers and so must be immediate (§3.1),
//! read rows that NewOrder's deferrable insert writes — an immediate read
//! executed before the insert of a NewOrder ordered before it (an I–D
//! conflict, which §3.2's edges cannot order). So the server **holds** that
//! request, untracked and unexecuted, until no row the chain reads has an
//! unfinished writer there (`server`, `held passes`): then every writer
//! ordered before the pass has run its pieces there, every later one is
//! ordered after it (one-hop edges from the pass's reads), and the
//! immediate reads are exact. The hold cannot deadlock: a held pass has no
//! trace at any server (its other pieces wait for the held ones' outputs),
//! so no transaction waits for it, and every writer it waits for finishes
//! without it. Holding a pass after it joined the graph would deadlock: a
//! NewOrder it waits for can need, through a later writer ordered after the
//! pass, the pass's commit. It is not bounded: writers that keep arriving
//! can keep a row busy (measured in docs/results/rococo.md: how long the
//! passes were held). An earlier form fixed what feeds other servers to the
//! last round's outputs and refused when its immediate piece's data had
//! moved, which under TPC-C's NewOrders was 94% of its passes.
//!
//! A Rococo coordinator never aborts a transaction: conflicts are reordered,
//! not refused (§2.2), and lost messages are resent until answered.

use super::driver::{well_formed, Driver};
use super::msg::{Msg, PieceReply};
use super::RococoConfig;
use crate::by_type::ByType;
use rand::Rng;
use std::sync::Arc;
use tessera_core::ids::{NodeId, ShardId, Time, TimerId, TxnId, Version, US};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, AbortReason, Attempt, PieceKind, Txn, TxnOutcome, Value};
use tessera_core::FastMap;

/// A piece's answer in a round: the reply (its row versions go to the
/// history) and, per read, the version of the columns read, which rounds
/// are compared by (`depgraph::columns`).
#[derive(Clone, Debug)]
struct Answer {
    reply: PieceReply,
    seen: Vec<Version>,
}

impl Answer {
    /// `seen` as the server sent it; a server that sent none (or not one
    /// per read) is held to the row versions, the stricter test.
    fn new(reply: PieceReply, seen: Option<Vec<Version>>) -> Self {
        let seen = seen
            .filter(|s| s.len() == reply.reads.len())
            .unwrap_or_else(|| reply.reads.iter().map(|o| o.version).collect());
        Answer { reply, seen }
    }
}

/// A read-only transaction in flight (Fig. 9).
struct ReadOnly {
    proc: Txn,
    shards: Vec<(ShardId, NodeId)>,
    /// Rounds completed.
    round: u32,
    /// Per piece, this round: the tag of the request that carries it and
    /// the inputs it was sent with.
    sent: Vec<Option<(u32, Vec<Value>)>>,
    /// Per piece, this round: the answer to `sent`.
    results: Vec<Option<Answer>>,
    /// The last complete round's answers (Fig. 9's `output'`).
    previous: Option<Vec<Answer>>,
    /// Per piece: its output was the same in the last two rounds (or there
    /// was one round). Only such outputs are sent ahead as inputs: one that
    /// moves (a district's next order id under NewOrders) would send every
    /// piece it feeds twice a round.
    steady: Vec<bool>,
    next_tag: u32,
    /// When it was submitted.
    began: Time,
    /// Its ordered form is running (see [`RococoCoordinator::order`]).
    ordering: bool,
    /// Backing off before the next round (`RococoConfig::ro_backoff`):
    /// when to send it.
    wake_at: Option<Time>,
    retransmit_at: Time,
    rto: Time,
}

impl ReadOnly {
    fn new(proc: Txn, shards: Vec<(ShardId, NodeId)>, now: Time, rto: Time) -> Self {
        let n = proc.pieces().len();
        ReadOnly {
            proc,
            shards,
            round: 0,
            sent: vec![None; n],
            results: vec![None; n],
            previous: None,
            steady: vec![true; n],
            next_tag: 0,
            began: now,
            ordering: false,
            wake_at: None,
            retransmit_at: now + rto,
            rto,
        }
    }

    /// Piece `i`'s inputs as best known: each input piece's output of this
    /// round, or else of the previous round if it is steady (`None` until
    /// this round's are in otherwise, and in the first round).
    fn inputs(&self, i: usize) -> Option<Vec<Value>> {
        let previous = self.previous.as_deref();
        self.proc.pieces()[i].gather_inputs(|j| {
            self.results[j]
                .as_ref()
                .or_else(|| previous.filter(|_| self.steady[j]).map(|p| &p[j]))
                .map(|r| &r.reply.output)
        })
    }

    /// Send every piece whose best known inputs differ from those it was
    /// sent with this round (or that was not sent yet), one request per
    /// server; an answer to other inputs than the current ones is dropped.
    fn dispatch(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        for si in 0..self.shards.len() {
            let (shard, node) = self.shards[si];
            let mut ids = Vec::new();
            let mut inputs = Vec::new();
            for i in 0..self.proc.pieces().len() {
                if self.proc.pieces()[i].shard != shard {
                    continue;
                }
                let Some(ins) = self.inputs(i) else {
                    continue;
                };
                if self.sent[i].as_ref().is_some_and(|(_, s)| *s == ins) {
                    continue;
                }
                self.results[i] = None;
                ids.push(i);
                inputs.push(ins);
            }
            if ids.is_empty() {
                continue;
            }
            let tag = self.next_tag;
            self.next_tag += 1;
            for (&i, ins) in ids.iter().zip(inputs) {
                self.sent[i] = Some((tag, ins));
            }
            self.request(ctx, txn, node, tag, &ids);
        }
    }

    /// Send request `tag`, of pieces `ids`, as recorded in `sent`.
    fn request(&self, ctx: &mut Ctx<Msg>, txn: TxnId, node: NodeId, tag: u32, ids: &[usize]) {
        ctx.send(
            node,
            Msg::RoRead {
                txn,
                tag,
                proc: self.proc.clone(),
                pieces: ids.iter().map(|&i| i as u16).collect(),
                inputs: ids
                    .iter()
                    .map(|&i| self.sent[i].clone().map(|s| s.1).unwrap_or_default())
                    .collect(),
            },
        );
    }

    /// Send again the requests still unanswered, as they were; how many.
    fn resend(&self, ctx: &mut Ctx<Msg>, txn: TxnId) -> u64 {
        let unanswered = |i: usize| self.sent[i].as_ref().filter(|_| self.results[i].is_none());
        let n = self.sent.len();
        let mut tags: Vec<u32> = (0..n).filter_map(|i| unanswered(i).map(|s| s.0)).collect();
        let mut sent = 0;
        tags.sort_unstable();
        tags.dedup();
        for tag in tags {
            let ids: Vec<usize> = (0..n)
                .filter(|&i| unanswered(i).is_some_and(|s| s.0 == tag))
                .collect();
            let shard = self.proc.pieces()[ids[0]].shard;
            let Some(&(_, node)) = self.shards.iter().find(|(s, _)| *s == shard) else {
                continue;
            };
            self.request(ctx, txn, node, tag, &ids);
            sent += 1;
        }
        sent
    }

    /// Every piece answered for the inputs this round's answers give it.
    /// (`dispatch` resends a piece whose inputs changed and drops its
    /// answer, so after it, an answer for every piece is a complete round.)
    fn complete(&self) -> bool {
        self.results.iter().all(Option::is_some)
    }

    fn new_round(&mut self) {
        let n = self.results.len();
        self.round += 1;
        let results: Vec<Answer> = self.results.drain(..).flatten().collect();
        if let Some(p) = &self.previous {
            for (s, (a, b)) in self.steady.iter_mut().zip(p.iter().zip(&results)) {
                *s = a.reply.output == b.reply.output;
            }
        }
        self.previous = Some(results);
        self.results = vec![None; n];
        self.sent = vec![None; n];
    }
}

/// Two rounds agree when every piece read the same versions of the columns
/// it reads and produced the same output. Fig. 9 compares the rounds' results; versions are the
/// stricter test, and the one §4.1's argument needs: a transaction seen in
/// the second round and not in the first changes what a piece read, not
/// always what it output (a stock count below a threshold stays the same).
///
/// Equal results are not enough in general. §4.1 shows that whatever a
/// round saw, the next round sees everywhere; what a round sees for the
/// first time it may see at some servers only. Take T1 writing x = 1 (at
/// S1) and y = 1 (at S2), then T2 writing x = 0 and y = 2; a transaction
/// reads x and y. Round 1 reads x before T1 started at S1 and y after T1
/// finished (x = 0, y = 1); round 2 reads x after T2 (x = 0) and y before
/// T2 started at S2 (y = 1). The results agree, yet (0, 1) is no state of
/// any serial order — (0, 0), (1, 1), (0, 2) — while the versions differ
/// (x: initial, then T2). Measured on TPC-C (docs/results/rococo.md, 2026-11-27) about
/// half the rounds we reject would pass Fig. 9's test: StockLevel's stock
/// rows rewritten by NewOrders (its below-threshold count unchanged), and
/// its district row rewritten by Payments on another column (`D_YTD`),
/// which column versions no longer count (`depgraph::columns`; the history
/// keeps row versions, which the isolation checker reasons by). Counted as
/// `rococo_ro_differ_*` ([`RoStats`]).
fn same(a: &[Answer], b: &[Answer]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.reply.piece == y.reply.piece && x.seen == y.seen && x.reply.output == y.reply.output
        })
}

/// The coordinator role of [`super::Rococo`].
pub struct RococoCoordinator {
    cfg: RococoConfig,
    topology: Arc<Topology>,
    me: NodeId,
    incarnation: u8,
    rw: FastMap<TxnId, Driver>,
    ro: FastMap<TxnId, ReadOnly>,
    ro_stats: RoStats,
    /// Phases' latency, read-only rounds and requests, by type.
    by_type: ByType,
    /// Ordered forms running, by their own id: the read-only transaction
    /// each is for.
    ordered_for: FastMap<TxnId, TxnId>,
    /// The sequence number of the next ordered form's id.
    next_ordered: u32,
}

/// Ordered forms are numbered in the top half of the sequence space, so
/// their ids are no attempt's: client attempts are numbered from 1 in each
/// incarnation and would need 2^31 attempts to reach it, and the forms
/// would need 2^31 passes in one incarnation to wrap onto their own.
const ORDERED_SEQ: u32 = 1 << 31;

/// Read-only transactions ended, with their rounds; those run as
/// read-write ones after `ro_rounds` rounds (counted in `rounds` too).
/// Rounds that differed from the previous one, by why: some output
/// differs (`outputs`), or only versions — of an immediate piece's reads
/// (`immediate`), else of deferrable ones only (`deferrable`): the rounds
/// Fig. 9's comparison of results would have accepted and ours does not.
/// Pauses taken before a round (`RococoConfig::ro_backoff`).
#[derive(Default)]
struct RoStats {
    done: u64,
    rounds: u64,
    fallbacks: u64,
    differ_outputs: u64,
    differ_immediate: u64,
    differ_deferrable: u64,
    backoffs: u64,
    /// Requests resent for want of an answer (`RococoConfig::retransmit`).
    resends: u64,
    /// Ordered forms started, committed (the transaction with them), and
    /// not (a user abort, which a read-only form has no reason for, or in
    /// doubt: the rounds went on).
    ordered: u64,
    ordered_done: u64,
    ordered_refused: u64,
    ordered_in_doubt: u64,
}

impl RoStats {
    /// Count why round `b` differs from round `a` (see the fields).
    fn differ(&mut self, proc: &Txn, a: &[Answer], b: &[Answer]) {
        let pairs = || a.iter().zip(b);
        if pairs().any(|(x, y)| x.reply.output != y.reply.output) {
            self.differ_outputs += 1;
            return;
        }
        let immediate = pairs().any(|(x, y)| {
            x.seen != y.seen
                && proc
                    .pieces()
                    .get(x.reply.piece as usize)
                    .is_some_and(|p| p.kind == PieceKind::Immediate)
        });
        if immediate {
            self.differ_immediate += 1;
        } else {
            self.differ_deferrable += 1;
        }
    }
}

const TICK: TimerId = TimerId(1);
/// A read-only transaction's pause before its next round is over.
const RO_WAKE: TimerId = TimerId(2);

impl RococoCoordinator {
    pub fn new(cfg: RococoConfig, env: CoordinatorEnv) -> Self {
        RococoCoordinator {
            cfg,
            topology: env.topology,
            me: env.me,
            incarnation: env.incarnation,
            rw: tessera_core::fast_map(),
            ro: tessera_core::fast_map(),
            ro_stats: RoStats::default(),
            by_type: ByType::new("rococo"),
            ordered_for: tessera_core::fast_map(),
            next_ordered: ORDERED_SEQ,
        }
    }

    fn on_ro_read_ok(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        tag: u32,
        results: Vec<PieceReply>,
        seen: Vec<Vec<Version>>,
    ) {
        let Some(ro) = self.ro.get_mut(&txn) else {
            return;
        };
        let mut any = false;
        let by_columns = self.cfg.ro_column_versions;
        let mut seen = seen.into_iter();
        for r in results {
            let seen = seen.next().filter(|_| by_columns);
            let i = r.piece as usize;
            let current = ro
                .sent
                .get(i)
                .and_then(|s| s.as_ref())
                .is_some_and(|s| s.0 == tag);
            if current && ro.results[i].is_none() {
                ro.results[i] = Some(Answer::new(r, seen));
                any = true;
            }
        }
        if !any {
            return;
        }
        ro.rto = self.cfg.retransmit;
        ro.retransmit_at = ctx.now() + ro.rto;
        ro.dispatch(ctx, txn);
        if !ro.complete() {
            return;
        }
        let results: Vec<Answer> = ro.results.iter().flatten().cloned().collect();
        if ro.previous.as_deref().is_some_and(|p| same(p, &results)) {
            self.ro_stats.done += 1;
            self.ro_stats.rounds += u64::from(ro.round) + 1;
            let ty = ro.proc.name();
            self.by_type.add(ty, "ro_done", 1);
            self.by_type.add(ty, "ro_rounds", u64::from(ro.round) + 1);
            self.by_type.add(ty, "ro_requests", u64::from(ro.next_tag));
            self.by_type.add(ty, "ro_us", (ctx.now() - ro.began) / US);
            self.ro.remove(&txn);
            let reads = results.iter().flat_map(|r| r.reply.reads.clone()).collect();
            let outputs = results.into_iter().map(|r| r.reply.output).collect();
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
        if let Some(p) = ro.previous.as_deref() {
            self.ro_stats.differ(&ro.proc, p, &results);
        }
        let all_deferrable = ro
            .proc
            .pieces()
            .iter()
            .all(|p| p.kind == PieceKind::Deferrable);
        let bounded = ro.round + 1 >= self.cfg.ro_rounds;
        if bounded && !all_deferrable && !ro.ordering {
            if let Some(f) = ro.proc.ordered() {
                ro.new_round();
                self.order(ctx, txn, f);
                return;
            }
        }
        if all_deferrable && bounded {
            // Hot keys keep changing between rounds: order the reads in the
            // dependency graph instead, where nothing waits in vain.
            self.ro_stats.fallbacks += 1;
            self.ro_stats.rounds += u64::from(ro.round) + 1;
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
        ro.new_round();
        // Backing off (ours, not the paper's): a round whose requests are
        // sent later than the previous round's end is still a round as
        // §4.1's argument needs one, so pausing is safe; it caps the load
        // of transactions whose rounds keep differing, whose requests were
        // most of the servers' work (see docs/results/rococo.md, TPC-C StockLevel).
        if self.cfg.ro_backoff > 0 && ro.round >= self.cfg.ro_backoff_after {
            let doublings = (ro.round - self.cfg.ro_backoff_after).min(4);
            let max = self.cfg.ro_backoff << doublings;
            let pause = ctx.rng().random_range(max / 2..=max);
            self.ro_stats.backoffs += 1;
            ro.wake_at = Some(ctx.now() + pause);
            ctx.set_timer(pause, RO_WAKE);
            return;
        }
        ro.dispatch(ctx, txn);
    }

    /// Run `f`, the ordered form of read-only transaction `txn`, through
    /// the start and commit phases (§3.2), under an id of its own: ordered
    /// in the dependency graph, it commits in one pass (the module doc has
    /// the argument). Ours, not the paper's:
    /// §4.1 retries rounds while they differ, which under TPC-C's
    /// NewOrders at 100 clients per server took ~65 rounds per StockLevel
    /// and two thirds of the servers' events (docs/results/rococo.md, Fig. 14).
    fn order(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, f: Txn) {
        let id = TxnId::new(self.me, self.incarnation, self.next_ordered);
        self.next_ordered = ORDERED_SEQ | self.next_ordered.wrapping_add(1);
        self.ro_stats.ordered += 1;
        if let Some(ro) = self.ro.get_mut(&txn) {
            ro.ordering = true;
        }
        let mut d = Driver::new(
            id,
            f,
            &self.topology,
            &self.cfg.merges,
            ctx.now(),
            self.cfg.retransmit,
        );
        d.begin(ctx);
        self.rw.insert(id, d);
        self.ordered_for.insert(id, txn);
    }

    /// The ordered form of `txn` ended with `outcome`. Committed, it is
    /// `txn`'s result; otherwise (in doubt) the rounds go on, and the next
    /// that differs runs the ordered form again.
    fn on_ordered(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, outcome: TxnOutcome) {
        let Some(ro) = self.ro.get_mut(&txn) else {
            return;
        };
        if !std::mem::take(&mut ro.ordering) {
            return;
        }
        match outcome {
            TxnOutcome::Committed { reads, outputs, .. } => {
                self.ro_stats.ordered_done += 1;
                self.ro_stats.rounds += u64::from(ro.round);
                let ty = ro.proc.name();
                self.by_type.add(ty, "ro_done", 1);
                self.by_type.add(ty, "ro_rounds", u64::from(ro.round));
                self.by_type.add(ty, "ro_requests", u64::from(ro.next_tag));
                self.by_type.add(ty, "ro_us", (ctx.now() - ro.began) / US);
                self.ro.remove(&txn);
                let writes = Vec::new();
                let done = TxnOutcome::Committed {
                    reads,
                    writes,
                    outputs,
                };
                ctx.done(txn, done);
            }
            other => {
                match other {
                    TxnOutcome::Aborted(AbortReason::User) => self.ro_stats.ordered_refused += 1,
                    _ => self.ro_stats.ordered_in_doubt += 1,
                }
                ro.rto = self.cfg.retransmit;
                ro.retransmit_at = ctx.now() + ro.rto;
                ro.dispatch(ctx, txn);
            }
        }
    }

    /// Send the next round of the read-only transactions whose pause is
    /// over.
    fn wake(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let mut ids: Vec<TxnId> = self
            .ro
            .iter()
            .filter(|(_, r)| r.wake_at.is_some_and(|t| t <= now))
            .map(|(t, _)| *t)
            .collect();
        ids.sort_unstable();
        for t in ids {
            let ro = self.ro.get_mut(&t).expect("listed");
            ro.wake_at = None;
            ro.rto = self.cfg.retransmit;
            ro.retransmit_at = now + ro.rto;
            ro.dispatch(ctx, t);
        }
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
            self.ro_stats.resends += ro.resend(ctx, t);
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
            let shards = participants(proc.as_ref())
                .into_iter()
                .map(|s| (s, self.topology.leader(s)))
                .collect();
            let mut ro = ReadOnly::new(proc, shards, now, self.cfg.retransmit);
            ro.dispatch(ctx, txn);
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
                    let ordered_for = self.ordered_for.remove(&txn);
                    let ty = d.proc().name();
                    let (start, commit) = d.phase_times(now);
                    self.by_type.add(ty, "done", 1);
                    self.by_type.add(ty, "start_us", start / US);
                    self.by_type.add(ty, "commit_us", commit / US);
                    d.send_committed(ctx);
                    match ordered_for {
                        Some(t) => self.on_ordered(ctx, t, outcome),
                        None => ctx.done(txn, outcome),
                    }
                }
            }
            Msg::RoReadOk {
                txn,
                tag,
                results,
                seen,
            } => self.on_ro_read_ok(ctx, txn, tag, results, seen),
            // A server recovering for us (it thought us silent, §3.5)
            // committed the transaction and a server collected it: its
            // results are lost, so the attempt ends in doubt.
            Msg::Gone { txn } => {
                if self.rw.remove(&txn).is_some() {
                    match self.ordered_for.remove(&txn) {
                        Some(t) => self.on_ordered(ctx, t, TxnOutcome::InDoubt),
                        None => ctx.done(txn, TxnOutcome::InDoubt),
                    }
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
            | Msg::AskHeld { .. }
            | Msg::Held { .. }
            | Msg::RoRead { .. } => {
                tracing::warn!(?from, "coordinator got a server's message");
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == TICK {
            self.tick(ctx);
        } else if id == RO_WAKE {
            self.wake(ctx);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        let s = std::mem::take(&mut self.ro_stats);
        NodeReport {
            client: None,
            counters: vec![
                ("rococo_ro_done", s.done),
                ("rococo_ro_rounds", s.rounds),
                ("rococo_ro_fallbacks", s.fallbacks),
                ("rococo_ro_differ_outputs", s.differ_outputs),
                ("rococo_ro_differ_immediate_versions", s.differ_immediate),
                ("rococo_ro_differ_deferrable_versions", s.differ_deferrable),
                ("rococo_ro_backoffs", s.backoffs),
                ("rococo_ro_resends", s.resends),
                ("rococo_ro_ordered", s.ordered),
                ("rococo_ro_ordered_done", s.ordered_done),
                ("rococo_ro_ordered_refused", s.ordered_refused),
                ("rococo_ro_ordered_in_doubt", s.ordered_in_doubt),
            ]
            .into_iter()
            .chain(self.by_type.take())
            .collect(),
            ..NodeReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::Key;
    use tessera_core::txn::{Access, PieceResult, PieceSpec, Procedure, ReadObs};

    /// Two reads, one piece per kind: piece 0 immediate, piece 1
    /// deferrable.
    #[derive(Debug)]
    struct TwoKinds(Vec<PieceSpec>);

    impl Procedure for TwoKinds {
        fn name(&self) -> &'static str {
            "two-kinds"
        }
        fn pieces(&self) -> &[PieceSpec] {
            &self.0
        }
        fn execute(&self, _: usize, _: &[Option<&Value>], _: &[Value]) -> PieceResult {
            PieceResult {
                writes: Vec::new(),
                output: Value::new(),
                user_abort: false,
            }
        }
    }

    fn reply(piece: u16, version: u64, output: &'static [u8]) -> Answer {
        let reply = PieceReply {
            piece,
            reads: vec![ReadObs::row(
                Key::new(0, u64::from(piece)),
                Version(version),
            )],
            writes: Vec::new(),
            output: Value::from_static(output),
            user_abort: false,
        };
        Answer::new(reply, None)
    }

    /// The diagnosis the numbers in docs/results/rococo.md rest on: a round that differs
    /// is counted once, by outputs first, else by the kind of the pieces
    /// whose versions moved (an immediate one wins over deferrable ones).
    #[test]
    fn differing_rounds_are_counted_by_cause() {
        let spec = |kind| PieceSpec {
            shard: ShardId(0),
            reads: vec![Access::all(Key::new(0, 0))],
            writes: Vec::new(),
            kind,
            inputs: Vec::new(),
            dynamic: false,
        };
        let proc: Txn = Arc::new(TwoKinds(vec![
            spec(PieceKind::Immediate),
            spec(PieceKind::Deferrable),
        ]));
        let round1 = [reply(0, 1, b"a"), reply(1, 1, b"b")];
        let mut s = RoStats::default();
        s.differ(&proc, &round1, &[reply(0, 1, b"a"), reply(1, 2, b"b")]);
        assert_eq!(
            (s.differ_outputs, s.differ_immediate, s.differ_deferrable),
            (0, 0, 1)
        );
        s.differ(&proc, &round1, &[reply(0, 2, b"a"), reply(1, 2, b"b")]);
        assert_eq!(
            (s.differ_outputs, s.differ_immediate, s.differ_deferrable),
            (0, 1, 1)
        );
        s.differ(&proc, &round1, &[reply(0, 2, b"a"), reply(1, 2, b"c")]);
        assert_eq!(
            (s.differ_outputs, s.differ_immediate, s.differ_deferrable),
            (1, 1, 1)
        );
        assert!(same(&round1, &round1.clone()));
        assert!(!same(&round1, &[reply(0, 1, b"a"), reply(1, 2, b"b")]));
    }

    /// Rounds are compared by the versions of the columns read: a row
    /// rewritten on other columns (a new row version) does not make them
    /// differ, a new writer of the columns read does.
    #[test]
    fn rounds_are_compared_by_column_versions_not_row_versions() {
        let with = |row: u64, col: u64| {
            let mut a = reply(0, row, b"a");
            a.seen = vec![Version(col)];
            a
        };
        assert!(same(&[with(1, 1)], &[with(2, 1)]));
        assert!(!same(&[with(1, 1)], &[with(2, 2)]));
        // No column versions, or not one per read: row versions.
        let r = reply(0, 3, b"a").reply;
        assert_eq!(Answer::new(r.clone(), Some(vec![])).seen, vec![Version(3)]);
        assert_eq!(
            Answer::new(r, Some(vec![Version(1)])).seen,
            vec![Version(1)]
        );
    }
}
