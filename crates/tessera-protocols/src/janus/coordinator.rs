//! The coordinator role (Algorithm 1): PreAccept to every replica of every
//! participating shard, in parallel; the fast path to Commit when every
//! shard's replicas all returned identical dependencies, else Accept (ballot
//! 0) with the union from a majority; Commit; the client's answer from the
//! first replica of each shard to reply (the nearest, §3.1).
//!
//! Requests are resent to the replicas that have not answered until the
//! phase completes. A Janus coordinator never aborts for a conflict.
//!
//! Every PreAccept carries the coordinator's *floor*, the oldest
//! transaction it still drives: transaction ids of one incarnation grow,
//! and a driver is dropped only when nothing of it will be sent again (its
//! late Commit resends included), so everything below the floor is over
//! and replicas may drop its tombstones ([`super::gc`]), as 2PC's
//! participants do ([`crate::tombstones`]). It carries the *done floor*
//! too ([`super::done`]): below it everything executed everywhere, so that
//! replicas drop their record of what they forgot.

use super::done::DoneFloor;
use super::driver::{Driver, Progress};
use super::msg::Msg;
use super::quorum::RoundTrips;
use super::stats::{trace_on, DepStats, TRACE};
use super::JanusConfig;
use std::collections::BTreeSet;
use std::sync::Arc;
use tessera_core::ids::{NodeId, Time, TimerId, TxnId, US};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::Topology;
use tessera_core::txn::{AbortReason, Attempt, TxnOutcome};
use tessera_core::FastMap;

/// The coordinator role of [`super::Janus`].
pub struct JanusCoordinator {
    cfg: JanusConfig,
    topology: Arc<Topology>,
    txns: FastMap<TxnId, Driver>,
    /// The ids in `txns`, ordered: the first is the floor.
    open: BTreeSet<TxnId>,
    /// Finished transactions not yet known executed everywhere.
    done: DoneFloor,
    /// When to ask replicas about them next.
    ask_at: Time,
    /// Transactions asked about and confirmed since the last report.
    asked: u64,
    confirmed: u64,
    /// The id after the last submitted one, and the done floor last sent
    /// to every server ([`Msg::Done`]) and when.
    next: Option<TxnId>,
    told: Option<TxnId>,
    tell_at: Time,
    /// Transactions that took the fast path and the slow path since the
    /// last report.
    fast: u64,
    slow: u64,
    /// Debug timings (issue 6, three sites), only with the
    /// `tessera_protocols::janus::stats` target at debug level: when each
    /// open transaction started and was known committing, and, since the
    /// last line, µs from start to the path's choice, from start to
    /// committing, and from committing to the client's answer.
    timing: Option<Timing>,
    /// Per-transaction event lines ([`trace_on`]); transactions whose
    /// commit was logged.
    trace: bool,
    traced: tessera_core::FastSet<TxnId>,
    /// Each replica's PreAccept round trip as measured here, to stop
    /// waiting for a fast path that cannot pay ([`super::quorum::fast_path_pays`]).
    rtts: RoundTrips,
}

#[derive(Default)]
struct Timing {
    site: u32,
    started: FastMap<TxnId, (Time, Option<Time>)>,
    pre_accept_us: Vec<u32>,
    to_commit_us: Vec<u32>,
    commit_to_answer_us: Vec<u32>,
}

const TICK: TimerId = TimerId(1);

/// Epochs between two [`Msg::Done`] broadcasts.
const TELL_EVERY: Time = 10;

impl JanusCoordinator {
    pub fn new(cfg: JanusConfig, env: CoordinatorEnv) -> Self {
        let site = env
            .topology
            .nodes
            .get(env.me.0 as usize)
            .map_or(0, |n| n.site);
        JanusCoordinator {
            cfg,
            topology: env.topology,
            txns: tessera_core::fast_map(),
            open: BTreeSet::new(),
            done: DoneFloor::default(),
            ask_at: 0,
            asked: 0,
            confirmed: 0,
            next: None,
            told: None,
            tell_at: 0,
            fast: 0,
            slow: 0,
            timing: DepStats::new().on().then(|| Timing {
                site,
                ..Timing::default()
            }),
            trace: trace_on(),
            traced: tessera_core::fast_set(),
            rtts: RoundTrips::default(),
        }
    }

    /// Debug timings of `txn`'s step ([`Timing`]).
    fn time(&mut self, now: Time, txn: TxnId, p: &Progress) {
        let Some(tm) = self.timing.as_mut() else {
            return;
        };
        let micros = |d: Time| u32::try_from(d / US).unwrap_or(u32::MAX);
        let committing = self.txns.get(&txn).is_some_and(|d| d.committing());
        let Some((start, decided)) = tm.started.get_mut(&txn) else {
            return;
        };
        if p.path.is_some() {
            tm.pre_accept_us.push(micros(now.saturating_sub(*start)));
        }
        if committing && decided.is_none() {
            *decided = Some(now);
            tm.to_commit_us.push(micros(now.saturating_sub(*start)));
        }
        if p.outcome.is_some() {
            let at = decided.unwrap_or(now);
            tm.commit_to_answer_us.push(micros(now.saturating_sub(at)));
            tm.started.remove(&txn);
        }
    }

    /// Count the path taken, answer the client, forget a finished driver.
    fn absorb(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, p: Progress) {
        self.time(ctx.now(), txn, &p);
        if self.trace {
            self.trace_step(ctx.now(), txn, &p);
        }
        match p.path {
            Some(true) => self.fast += 1,
            Some(false) => self.slow += 1,
            None => {}
        }
        if let Some(outcome) = p.outcome {
            ctx.done(txn, outcome);
        }
        if p.finished {
            if let Some(d) = self.txns.remove(&txn) {
                self.done.finished(txn, d.shards(), ctx.now());
            }
            self.open.remove(&txn);
        }
    }

    /// Event lines of `txn`'s step: its commit with its dependencies
    /// (once), its answer.
    fn trace_step(&mut self, now: Time, txn: TxnId, p: &Progress) {
        let Some(d) = self.txns.get(&txn) else {
            return;
        };
        if d.committing() && self.traced.insert(txn) {
            if let Some(info) = d.decision() {
                let deps: Vec<u64> = info.deps.iter().map(|x| x.txn.0).collect();
                tracing::debug!(target: TRACE, at = now, txn = txn.0, fast = p.path == Some(true), deps = ?deps, "C");
            }
        }
        if p.outcome.is_some() {
            self.traced.remove(&txn);
            tracing::debug!(target: TRACE, at = now, txn = txn.0, "A");
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        let txn = match &msg {
            Msg::PreAcceptOk { txn, .. }
            | Msg::PreAcceptNotOk { txn, .. }
            | Msg::AcceptOk { txn, .. }
            | Msg::AcceptNotOk { txn, .. }
            | Msg::CommitOk { txn, .. }
            | Msg::Forgotten { txn, .. } => *txn,
            Msg::InquireOk(info) => info.txn,
            Msg::Settled { txns, ask: false } => {
                self.confirmed += self.done.confirmed(txns) as u64;
                return;
            }
            _ => {
                tracing::warn!(?from, "coordinator got a server's message");
                return;
            }
        };
        let Some(d) = self.txns.get_mut(&txn) else {
            return;
        };
        if self.trace && matches!(msg, Msg::CommitOk { .. }) {
            tracing::debug!(target: TRACE, at = ctx.now(), txn = txn.0, from = from.0, "Q");
        }
        if matches!(msg, Msg::PreAcceptOk { .. }) {
            let sample = ctx.now().saturating_sub(d.pre_accept_sent());
            self.rtts.observe(from, sample);
        }
        let rtts = self.cfg.fast_path_wait_by_rtt.then_some(&self.rtts);
        let p = d.on_reply(ctx, from, msg, self.cfg.retransmit, rtts);
        self.absorb(ctx, txn, p);
    }

    /// Once an epoch, ask replicas which finished transactions they forgot
    /// ([`super::done`]); a replica forgets one two epochs after the last
    /// replica announced executing it, at the earliest.
    fn ask_done(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        if now < self.ask_at {
            return;
        }
        self.ask_at = now + self.cfg.epoch;
        for (to, txns) in self.done.questions(now, 2 * self.cfg.epoch, &self.topology) {
            self.asked += txns.len() as u64;
            let txns = txns.into();
            ctx.send(to, Msg::Settled { txns, ask: true });
        }
        self.tell_done(ctx);
    }

    /// Every [`TELL_EVERY`] epochs, if it rose, send the done floor to
    /// every server ([`Msg::Done`]): PreAccepts carry it only to the
    /// shards of new transactions, and none once the clients stop.
    fn tell_done(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let Some(next) = self.next else { return };
        if now < self.tell_at {
            return;
        }
        self.tell_at = now + TELL_EVERY * self.cfg.epoch;
        let floor = self.done.floor(self.open.first().copied().unwrap_or(next));
        if self.told >= Some(floor) {
            return;
        }
        self.told = Some(floor);
        for g in &self.topology.shards {
            for &to in &g.replicas {
                ctx.send(to, Msg::Done { floor });
            }
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<Msg>) {
        self.ask_done(ctx);
        let ids: Vec<TxnId> = self.open.iter().copied().collect();
        for t in ids {
            let p = self
                .txns
                .get_mut(&t)
                .expect("listed")
                .tick(ctx, self.cfg.retransmit);
            self.absorb(ctx, t, p);
        }
        if let Some(tm) = self.timing.as_mut() {
            tracing::debug!(
                target: "tessera_protocols::janus::stats",
                me = ctx.me().0,
                at = ctx.now(),
                site = tm.site,
                pre_accept_us = ?DepStats::spread(&mut tm.pre_accept_us),
                to_commit_us = ?DepStats::spread(&mut tm.to_commit_us),
                commit_to_answer_us = ?DepStats::spread(&mut tm.commit_to_answer_us),
                "coordinator"
            );
        }
        ctx.set_timer(self.cfg.retransmit / 2, TICK);
    }
}

impl Coordinator<Msg> for JanusCoordinator {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let txn = attempt.id;
        let proc = attempt.txn;
        if let Err(e) = super::admit(proc.as_ref()) {
            tracing::error!("refused: {e}");
            ctx.done(txn, TxnOutcome::Aborted(AbortReason::User));
            return;
        }
        self.open.insert(txn);
        let seq = (txn.0 as u32).saturating_add(1);
        self.next = Some(TxnId::new(txn.node(), txn.incarnation(), seq));
        let floor = self.open.first().copied().unwrap_or(txn);
        let done = self.done.floor(floor);
        if self.trace {
            let shards: Vec<u32> = tessera_core::txn::participants(proc.as_ref())
                .iter()
                .map(|s| s.0)
                .collect();
            tracing::debug!(target: TRACE, at = ctx.now(), txn = txn.0, shards = ?shards, "S");
        }
        let d = Driver::start(
            ctx,
            txn,
            proc,
            &self.topology,
            self.cfg.retransmit,
            (floor, done),
        );
        self.txns.insert(txn, d);
        if let Some(tm) = self.timing.as_mut() {
            tm.started.insert(txn, (ctx.now(), None));
        }
    }
}

impl Node<Msg> for JanusCoordinator {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.cfg.retransmit / 2, TICK);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        self.on_reply(ctx, from, msg);
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
                ("janus_fast_path", std::mem::take(&mut self.fast)),
                ("janus_slow_path", std::mem::take(&mut self.slow)),
                ("janus_done_asked", std::mem::take(&mut self.asked)),
                ("janus_done_confirmed", std::mem::take(&mut self.confirmed)),
            ],
            gauges: vec![("janus_done_unconfirmed", self.done.len() as u64)],
            ..NodeReport::default()
        }
    }
}
