//! The closed-loop client host.
//!
//! A client host runs a number of closed-loop clients (slots) on one node and
//! wraps the protocol's coordinator. Each slot submits a transaction, waits
//! for its end, retries an aborted attempt after a randomized exponential
//! backoff, or at once with a zero base (at most `max_attempts` attempts,
//! 20 as in Janus §6.1), and then
//! submits the next. Latency runs from the first attempt to the commit, so
//! retries count.
//!
//! **Workers that do not wait** (COCO §3.1, §4.2): a coordinator may report
//! that an attempt *finished executing* ([`Effect::Finished`]) before its
//! outcome is final, as COCO's epoch commit does: the transaction's locks,
//! validation and write-back are done, but its result is released only when
//! its epoch commits. The slot then starts its next transaction at once,
//! like a COCO worker thread, while the finished attempt stays *unreleased*
//! until its [`Effect::Done`]. Its latency, its stats and its history entry
//! are taken at the `Done`: a result is returned to the user at the epoch's
//! end, and that is the real-time end the isolation checker sees. An
//! unreleased attempt that ends aborted (its epoch aborted, §3.2) is re-run
//! by its slot after the transaction it is running. At most
//! [`ClientConfig::max_unreleased`] attempts of a slot may be unreleased;
//! at the bound the slot waits for a release, which keeps memory bounded.
//! Protocols that never report `Finished` see the plain closed loop.
//!
//! Each attempt of a slot in flight at once gets its own *lane*, part of the
//! history's process number, so that every process of the history has one
//! attempt open at a time, as the checker's process order and Elle's
//! invocation/completion pairing assume.
//!
//! The host records measurements inside the measurement window only (warm-up
//! and cool-down trimmed) and, when asked, every attempt into the history.

use crate::history::{HistoryTxn, Outcome};
use crate::ids::{Key, NodeId, Time, TimerId, TxnId};
use crate::node::{Ctx, Effect, Node, NodeReport};
use crate::protocol::Coordinator;
use crate::stats::ClientStats;
use crate::txn::{AbortReason, Attempt, Txn, TxnOutcome};
use crate::workload::{ClientSlot, TxnGenerator};
use crate::FastMap;
use rand::Rng;
use std::collections::VecDeque;
use std::marker::PhantomData;

/// Timer ids at or above this belong to the host, below it to the coordinator.
pub const HOST_TIMER_BIT: u64 = 1 << 63;

/// Where a slot's lane goes in its history process number (above the
/// incarnation's byte at bit 32).
const LANE_SHIFT: u32 = 40;

/// The default of [`ClientConfig::max_unreleased`]: more than one worker
/// finishes in two 10 ms epochs in our YCSB runs (≈ 2.5k txn/s per client at
/// 48 clients), so the bound does not throttle the default epoch.
pub const DEFAULT_MAX_UNRELEASED: u32 = 128;

/// How clients behave and when they measure.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub measure_from: Time,
    pub measure_until: Time,
    /// No new transaction starts at or after this time.
    pub stop_at: Time,
    /// A slot starts no new transaction once this many of its transactions
    /// committed (`None`: no bound). Lets a test run until every client
    /// made this much progress instead of for a fixed time, so that a slow
    /// machine lengthens the run rather than failing a count.
    pub commits_per_slot: Option<u64>,
    pub max_attempts: u32,
    /// First retry waits up to this long; each retry doubles it. 0: a
    /// retry starts at once, with no timer (the OOCC authors' clients).
    pub backoff_base: Time,
    pub backoff_cap: Time,
    pub record_history: bool,
    /// Record, with each write, the columns it covers
    /// ([`HistoryTxn::write_columns`], from the pieces' declarations): for
    /// a history checked per column, of a protocol that orders conflicts
    /// per column.
    pub record_columns: bool,
    /// Attempts a slot may have finished executing but not yet released
    /// before it waits for a release (at least 1; see the module doc).
    pub max_unreleased: u32,
    /// Count commits per window of this many ns over the whole run
    /// ([`ClientStats::timeline`]); `None`: no timeline.
    pub timeline: Option<Time>,
}

/// What a client host hands over: its measurements and history.
#[derive(Default)]
pub struct ClientReport {
    pub stats: ClientStats,
    pub history: Vec<HistoryTxn>,
}

/// A transaction a slot is to run (again): retries keep their age.
struct Pending {
    txn: Txn,
    first_start: Time,
    attempts: u32,
}

/// One attempt in flight.
struct Running {
    slot: usize,
    txn: Txn,
    first_start: Time,
    attempt_start: Time,
    /// Attempts of this transaction so far, this one included.
    attempts: u32,
    lane: u32,
    /// Reported [`Effect::Finished`]: its slot has moved on.
    finished: bool,
}

struct Slot {
    client: u32,
    gen: Box<dyn TxnGenerator>,
    /// The attempt the slot is executing (not yet finished or ended).
    current: Option<TxnId>,
    /// Transactions to run before a new one: a retry of an aborted attempt
    /// (after its backoff), or a re-run of an unreleased attempt that ended
    /// aborted.
    pending: VecDeque<Pending>,
    /// A backoff timer is armed: the slot starts nothing until it fires.
    backing_off: bool,
    /// Finished attempts waiting for their outcome.
    unreleased: u32,
    /// Lanes held by this slot's attempts in flight.
    lanes: Vec<bool>,
    /// Transactions of this slot committed so far in the run.
    committed: u64,
}

impl Slot {
    fn take_lane(&mut self) -> u32 {
        match self.lanes.iter().position(|busy| !busy) {
            Some(l) => {
                self.lanes[l] = true;
                l as u32
            }
            None => {
                self.lanes.push(true);
                (self.lanes.len() - 1) as u32
            }
        }
    }
}

/// What the host counts besides the stats (reported with the protocol's
/// counters, when not zero).
#[derive(Default)]
struct HostCounters {
    /// Attempts the coordinator reported finished before their outcome.
    finished_early: u64,
    /// Attempts started while their slot had unreleased ones: the worker
    /// did not wait.
    started_unreleased: u64,
    /// Times a slot stopped at the bound on unreleased attempts.
    unreleased_waits: u64,
    /// Unreleased attempts that ended aborted and were queued to re-run.
    reruns: u64,
    /// Time slots spent backing off before retries, ns, up to `stop_at`
    /// (a backoff past it costs the run nothing): with the attempts' own
    /// time it is where a closed loop's time per commit goes.
    backoff_ns: u64,
}

/// What a coordinator reported about an attempt, in the order it did.
pub enum Report {
    Finished,
    Done(TxnOutcome),
}

/// A node of closed-loop clients around a coordinator `C`.
pub struct ClientHost<M, C> {
    coord: C,
    me: NodeId,
    incarnation: u8,
    cfg: ClientConfig,
    slots: Vec<Slot>,
    in_flight: FastMap<TxnId, Running>,
    next_seq: u32,
    stats: ClientStats,
    counters: HostCounters,
    history: Vec<HistoryTxn>,
    reports: Vec<(TxnId, Report)>,
    _msg: PhantomData<fn() -> M>,
}

impl<M, C: Coordinator<M>> ClientHost<M, C> {
    pub fn new(
        coord: C,
        me: NodeId,
        incarnation: u8,
        cfg: ClientConfig,
        clients: Vec<(ClientSlot, Box<dyn TxnGenerator>)>,
    ) -> Self {
        let slots = clients
            .into_iter()
            .map(|(client, gen)| Slot {
                client: client.id,
                gen,
                current: None,
                pending: VecDeque::new(),
                backing_off: false,
                unreleased: 0,
                lanes: Vec::new(),
                committed: 0,
            })
            .collect();
        ClientHost {
            coord,
            me,
            incarnation,
            cfg,
            slots,
            in_flight: crate::fast_map(),
            next_seq: 0,
            stats: ClientStats::default(),
            counters: HostCounters::default(),
            history: Vec::new(),
            reports: Vec::new(),
            _msg: PhantomData,
        }
    }

    fn in_window(&self, t: Time) -> bool {
        t >= self.cfg.measure_from && t < self.cfg.measure_until
    }

    /// The history's process number of a slot's lane in this incarnation.
    fn process(&self, slot: usize, lane: u32) -> u64 {
        ((lane as u64) << LANE_SHIFT)
            | ((self.incarnation as u64) << 32)
            | self.slots[slot].client as u64
    }

    /// Start the slot's next attempt now, if it is free to: not executing
    /// one, not backing off, below the bound on unreleased attempts, and
    /// before `stop_at`. A pending retry or re-run goes first.
    fn issue(&mut self, ctx: &mut Ctx<M>, slot: usize) {
        let now = ctx.observed_now();
        let max_unreleased = self.cfg.max_unreleased.max(1);
        let s = &mut self.slots[slot];
        let quota_met = self.cfg.commits_per_slot.is_some_and(|n| s.committed >= n);
        if now >= self.cfg.stop_at || quota_met || s.current.is_some() || s.backing_off {
            return;
        }
        if s.unreleased >= max_unreleased {
            self.counters.unreleased_waits += 1;
            return;
        }
        if s.unreleased > 0 {
            self.counters.started_unreleased += 1;
        }
        let next = s.pending.pop_front().unwrap_or_else(|| Pending {
            txn: s.gen.next(ctx.rng()),
            first_start: now,
            attempts: 0,
        });
        self.next_seq = self.next_seq.wrapping_add(1);
        let id = TxnId::new(self.me, self.incarnation, self.next_seq);
        s.current = Some(id);
        let lane = s.take_lane();
        let attempt = Attempt {
            id,
            txn: next.txn.clone(),
            since: next.first_start,
            client: s.client,
        };
        self.in_flight.insert(
            id,
            Running {
                slot,
                txn: next.txn,
                first_start: next.first_start,
                attempt_start: now,
                attempts: next.attempts + 1,
                lane,
                finished: false,
            },
        );
        self.coord.submit(ctx, attempt);
    }

    /// The coordinator is done executing `id`; its outcome comes later. The
    /// slot moves on.
    fn attempt_finished(&mut self, ctx: &mut Ctx<M>, id: TxnId) {
        let Some(r) = self.in_flight.get_mut(&id) else {
            return;
        };
        if r.finished {
            return;
        }
        r.finished = true;
        let slot = r.slot;
        self.counters.finished_early += 1;
        let s = &mut self.slots[slot];
        s.unreleased += 1;
        if s.current == Some(id) {
            s.current = None;
        }
        self.issue(ctx, slot);
    }

    fn attempt_ended(&mut self, ctx: &mut Ctx<M>, id: TxnId, outcome: TxnOutcome) {
        let Some(r) = self.in_flight.remove(&id) else {
            return;
        };
        let now = ctx.observed_now();
        let measured = self.in_window(now);
        let slot = r.slot;
        if self.cfg.record_history {
            let (reads, writes, out) = match &outcome {
                TxnOutcome::Committed { reads, writes, .. } => {
                    (reads.clone(), writes.clone(), Outcome::Committed)
                }
                TxnOutcome::Aborted(_) => (Vec::new(), Vec::new(), Outcome::Aborted),
                TxnOutcome::InDoubt => (Vec::new(), declared_writes(&r.txn), Outcome::Unknown),
            };
            let write_columns = match &outcome {
                TxnOutcome::Committed { outputs, .. } if self.cfg.record_columns => {
                    crate::txn::written_columns(&*r.txn, outputs, &writes)
                }
                TxnOutcome::InDoubt if self.cfg.record_columns => {
                    crate::txn::written_columns(&*r.txn, &[], &writes)
                }
                _ => Vec::new(),
            };
            self.history.push(HistoryTxn {
                id,
                process: self.process(slot, r.lane),
                start: r.attempt_start,
                end: now,
                reads,
                writes,
                write_columns,
                outcome: out,
            });
        }
        let s = &mut self.slots[slot];
        s.lanes[r.lane as usize] = false;
        if r.finished {
            s.unreleased -= 1;
        } else if s.current == Some(id) {
            s.current = None;
        }
        let ty = r.txn.name();
        if measured {
            self.stats.total.attempts += 1;
            self.stats.counts_mut(ty).attempts += 1;
        }
        match outcome {
            TxnOutcome::Committed { .. } => {
                let latency_us = ((now - r.first_start) / 1000).max(1);
                self.stats.run_committed += 1;
                if let Some(w) = self.cfg.timeline {
                    self.stats.record_commit_at(now, w);
                }
                self.slots[slot].committed += 1;
                if measured {
                    self.stats.total.committed += 1;
                    self.stats.counts_mut(ty).committed += 1;
                    let _ = self.stats.latency_us.record(latency_us);
                }
            }
            // It may have committed: counted as failed (no result), never retried.
            TxnOutcome::InDoubt => {
                if measured {
                    self.stats.total.failed += 1;
                    self.stats.counts_mut(ty).failed += 1;
                }
            }
            TxnOutcome::Aborted(reason) if !reason.retryable() => {
                if measured {
                    self.stats.total.user_aborts += 1;
                    self.stats.counts_mut(ty).user_aborts += 1;
                }
            }
            TxnOutcome::Aborted(_) if r.attempts >= self.cfg.max_attempts => {
                if measured {
                    self.stats.total.failed += 1;
                    self.stats.counts_mut(ty).failed += 1;
                }
            }
            TxnOutcome::Aborted(reason) => {
                let retry = Pending {
                    txn: r.txn,
                    first_start: r.first_start,
                    attempts: r.attempts,
                };
                // An unreleased attempt's slot runs something else by now:
                // the re-run waits its turn behind it (§3.2: the epoch's
                // transactions re-run), without a backoff of its own.
                if r.finished {
                    self.counters.reruns += 1;
                    s.pending.push_back(retry);
                } else {
                    s.pending.push_front(retry);
                    if reason != AbortReason::Stale && self.cfg.backoff_base > 0 {
                        let delay = backoff(
                            ctx.rng(),
                            r.attempts,
                            self.cfg.backoff_base,
                            self.cfg.backoff_cap,
                        );
                        s.backing_off = true;
                        self.counters.backoff_ns += delay.min(self.cfg.stop_at.saturating_sub(now));
                        ctx.set_timer(delay, TimerId(HOST_TIMER_BIT | slot as u64));
                    }
                }
            }
        }
        self.issue(ctx, slot);
    }
}

impl<M, C: Coordinator<M>> WrapsCoordinator<M> for ClientHost<M, C> {
    fn reports(&mut self) -> &mut Vec<(TxnId, Report)> {
        &mut self.reports
    }

    fn finish(&mut self, ctx: &mut Ctx<M>, id: TxnId, outcome: TxnOutcome) {
        self.attempt_ended(ctx, id, outcome)
    }

    fn finished(&mut self, ctx: &mut Ctx<M>, id: TxnId) {
        self.attempt_finished(ctx, id)
    }
}

impl<M, C: Coordinator<M>> Node<M> for ClientHost<M, C> {
    fn on_start(&mut self, ctx: &mut Ctx<M>) {
        self.stepped(ctx, |h, ctx| h.coord.on_start(ctx));
        for slot in 0..self.slots.len() {
            // A small random stagger keeps clients from moving in lockstep.
            let delay = ctx.rng().random_range(0..=20_000);
            self.slots[slot].backing_off = true;
            ctx.set_timer(delay, TimerId(HOST_TIMER_BIT | slot as u64));
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<M>, from: NodeId, msg: M) {
        self.stepped(ctx, |h, ctx| h.coord.on_message(ctx, from, msg));
    }

    fn on_timer(&mut self, ctx: &mut Ctx<M>, id: TimerId) {
        self.stepped(ctx, |h, ctx| {
            if id.0 & HOST_TIMER_BIT == 0 {
                return h.coord.on_timer(ctx, id);
            }
            let slot = (id.0 & !HOST_TIMER_BIT) as usize;
            h.slots[slot].backing_off = false;
            h.issue(ctx, slot);
        });
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<M>, token: u64) {
        self.stepped(ctx, |h, ctx| h.coord.on_persisted(ctx, token));
    }

    /// Every attempt issued has ended (a finished attempt whose result a
    /// protocol holds back, COCO's epochs, has not).
    fn settled(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Every slot committed its [`ClientConfig::commits_per_slot`] and
    /// nothing is in flight.
    fn done(&self) -> bool {
        self.cfg
            .commits_per_slot
            .is_some_and(|n| self.slots.iter().all(|s| s.committed >= n))
            && self.settled()
    }

    fn take_report(&mut self) -> NodeReport {
        let mut history = std::mem::take(&mut self.history);
        if self.cfg.record_history {
            for (&id, r) in &self.in_flight {
                history.push(HistoryTxn {
                    id,
                    process: self.process(r.slot, r.lane),
                    start: r.attempt_start,
                    end: Time::MAX,
                    reads: Vec::new(),
                    write_columns: match self.cfg.record_columns {
                        true => crate::txn::written_columns(&*r.txn, &[], &declared_writes(&r.txn)),
                        false => Vec::new(),
                    },
                    writes: declared_writes(&r.txn),
                    outcome: Outcome::Unknown,
                });
            }
            history.sort_by_key(|h| (h.start, h.id));
        }
        let coord = self.coord.take_report();
        let mut counters = coord.counters;
        let c = std::mem::take(&mut self.counters);
        counters.extend(
            [
                ("client_finished_early", c.finished_early),
                ("client_started_unreleased", c.started_unreleased),
                ("client_unreleased_waits", c.unreleased_waits),
                ("client_reruns", c.reruns),
                ("client_backoff_ns", c.backoff_ns),
            ]
            .into_iter()
            .filter(|&(_, n)| n > 0),
        );
        NodeReport {
            client: Some(ClientReport {
                stats: std::mem::take(&mut self.stats),
                history,
            }),
            counters,
            gauges: coord.gauges,
            samples: coord.samples,
        }
    }
}

/// The randomized exponential backoff before retry `attempts + 1`: uniform
/// in `[0, min(base × 2^(attempts-1), cap)]` (Janus §6.1 retries aborted
/// transactions; the randomness keeps conflicting clients from retrying in
/// lockstep).
pub fn backoff(rng: &mut impl Rng, attempts: u32, base: Time, cap: Time) -> Time {
    let exp = attempts.saturating_sub(1).min(30);
    let window = base.saturating_mul(1 << exp).min(cap).max(1);
    rng.random_range(0..=window)
}

/// A node that wraps a protocol's coordinator (the closed-loop
/// [`ClientHost`], the application-driven
/// [`crate::embedded::EmbeddedHost`]): the coordinator reports each
/// attempt's end as an `Effect::Done`, which the runtimes never see; the
/// host takes it out of the step's effects and acts on it.
pub trait WrapsCoordinator<M>: Sized {
    /// Scratch space for the `Finished` and `Done` effects of one step.
    fn reports(&mut self) -> &mut Vec<(TxnId, Report)>;
    /// Act on the end of attempt `id` (which may submit more attempts).
    fn finish(&mut self, ctx: &mut Ctx<M>, id: TxnId, outcome: TxnOutcome);
    /// Attempt `id` finished executing and its outcome comes later
    /// ([`Effect::Finished`]); a host whose callers wait for outcomes
    /// ignores it.
    fn finished(&mut self, _ctx: &mut Ctx<M>, _id: TxnId) {}

    /// Run `f` (a step of the host or its coordinator), then act on every
    /// `Finished` and `Done` it pushed, in order, and on those of the
    /// attempts that submitted in turn. The runtimes never see them.
    fn stepped(&mut self, ctx: &mut Ctx<M>, f: impl FnOnce(&mut Self, &mut Ctx<M>)) {
        let from = ctx.effects_mut().len();
        f(self, ctx);
        loop {
            let effects = ctx.effects_mut();
            let reports = self.reports();
            let mut i = from;
            while i < effects.len() {
                match &effects[i] {
                    Effect::Done { .. } | Effect::Finished { .. } => match effects.remove(i) {
                        Effect::Done { txn, outcome } => reports.push((txn, Report::Done(outcome))),
                        Effect::Finished { txn } => reports.push((txn, Report::Finished)),
                        _ => unreachable!("matched above"),
                    },
                    _ => i += 1,
                }
            }
            if reports.is_empty() {
                return;
            }
            for (id, report) in std::mem::take(reports) {
                match report {
                    Report::Finished => self.finished(ctx, id),
                    Report::Done(outcome) => self.finish(ctx, id, outcome),
                }
            }
        }
    }
}

/// The keys a transaction's pieces declare they write: what an attempt whose
/// outcome is unknown may have written.
fn declared_writes(txn: &Txn) -> Vec<Key> {
    txn.pieces()
        .iter()
        .flat_map(|p| p.writes.iter().map(|a| a.key))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ShardId;
    use crate::txn::{PieceKind, PieceResult, PieceSpec, Procedure};
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use std::sync::Arc;

    /// A one-piece transaction that writes key 1.
    #[derive(Debug)]
    struct Put(Vec<PieceSpec>);

    impl Procedure for Put {
        fn name(&self) -> &'static str {
            "put"
        }
        fn pieces(&self) -> &[PieceSpec] {
            &self.0
        }
        fn execute(
            &self,
            _: usize,
            _: &[Option<&crate::Value>],
            _: &[crate::Value],
        ) -> PieceResult {
            PieceResult::default()
        }
    }

    struct Puts;

    impl TxnGenerator for Puts {
        fn next(&mut self, _: &mut SmallRng) -> Txn {
            Arc::new(Put(vec![PieceSpec {
                shard: ShardId(0),
                reads: Vec::new(),
                writes: vec![crate::Access::all(Key::new(0, 1))],
                kind: PieceKind::Immediate,
                inputs: Vec::new(),
                dynamic: false,
            }]))
        }
    }

    /// A coordinator that ends attempts only when the test says so; an
    /// epochal one reports each finished at once (a worker that does not
    /// wait).
    #[derive(Default)]
    struct Scripted {
        submitted: Vec<TxnId>,
        epochal: bool,
    }

    impl Node<()> for Scripted {
        fn on_message(&mut self, _: &mut Ctx<()>, _: NodeId, _: ()) {}
        fn on_timer(&mut self, _: &mut Ctx<()>, _: TimerId) {}
    }

    impl Coordinator<()> for Scripted {
        fn submit(&mut self, ctx: &mut Ctx<()>, attempt: Attempt) {
            self.submitted.push(attempt.id);
            if self.epochal {
                ctx.finished(attempt.id);
            }
        }
    }

    /// One slot of puts around `coord`.
    fn host_of<C: Coordinator<()>>(
        coord: C,
        max_unreleased: u32,
        backoff_base: Time,
    ) -> ClientHost<(), C> {
        let cfg = ClientConfig {
            measure_from: 0,
            measure_until: Time::MAX,
            stop_at: Time::MAX,
            commits_per_slot: None,
            max_attempts: 20,
            backoff_base,
            backoff_cap: backoff_base.max(1),
            record_history: true,
            record_columns: false,
            max_unreleased,
            timeline: None,
        };
        let slot = ClientSlot {
            id: 7,
            home: ShardId(0),
        };
        ClientHost::new(
            coord,
            NodeId(1),
            0,
            cfg,
            vec![(slot, Box::new(Puts) as Box<dyn TxnGenerator>)],
        )
    }

    fn host(max_unreleased: u32) -> ClientHost<(), Scripted> {
        let epochal = Scripted {
            epochal: true,
            ..Scripted::default()
        };
        host_of(epochal, max_unreleased, 1)
    }

    /// Step `host` at time `now` with `f`, which may report on behalf of
    /// the coordinator; returns the effects left for the runtime.
    fn step<C: Coordinator<()>>(
        host: &mut ClientHost<(), C>,
        now: Time,
        f: impl FnOnce(&mut ClientHost<(), C>, &mut Ctx<()>),
    ) -> Vec<Effect<()>> {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(now, NodeId(1), &mut rng, &mut effects);
        f(host, &mut ctx);
        effects
    }

    /// The coordinator ends `txn` with `outcome` in a step of its own.
    fn end(host: &mut ClientHost<(), Scripted>, now: Time, txn: TxnId, outcome: TxnOutcome) {
        step(host, now, |h, ctx| {
            h.stepped(ctx, |_, ctx| ctx.done(txn, outcome))
        });
    }

    fn committed() -> TxnOutcome {
        TxnOutcome::Committed {
            reads: Vec::new(),
            writes: vec![Key::new(0, 1)],
            outputs: vec![crate::Value::new()],
        }
    }

    /// A zero backoff base retries in the step that saw the abort, with no
    /// timer; a positive one waits for the host's timer.
    #[test]
    fn a_zero_backoff_retries_at_once() {
        for (base, retried_at_once) in [(0, true), (20 * crate::ids::US, false)] {
            let mut h = host_of(Scripted::default(), 1, base);
            step(&mut h, 10, |h, ctx| {
                h.on_timer(ctx, TimerId(HOST_TIMER_BIT))
            });
            let first = h.coord.submitted[0];
            let effects = step(&mut h, 30, |h, ctx| {
                h.stepped(ctx, |_, ctx| {
                    ctx.done(first, TxnOutcome::Aborted(AbortReason::LockConflict))
                })
            });
            let timer = effects.iter().any(|e| matches!(e, Effect::Timer { .. }));
            assert_eq!(timer, !retried_at_once, "base {base}");
            assert_eq!(h.coord.submitted.len(), 1 + retried_at_once as usize);
            if retried_at_once {
                let retry = h.coord.submitted[1];
                assert_eq!(h.in_flight[&retry].first_start, 10);
                assert_eq!(h.in_flight[&retry].attempts, 2);
                assert_eq!(h.counters.backoff_ns, 0);
            }
        }
    }

    #[test]
    fn a_slot_stops_at_the_bound_and_resumes_at_a_release() {
        let mut h = host(3);
        let effects = step(&mut h, 10, |h, ctx| {
            h.on_timer(ctx, TimerId(HOST_TIMER_BIT))
        });
        assert!(effects
            .iter()
            .all(|e| !matches!(e, Effect::Finished { .. })));
        // Each attempt finished at once, so the slot ran on until 3 were
        // unreleased, and then waited.
        assert_eq!(h.coord.submitted.len(), 3);
        assert_eq!(h.slots[0].unreleased, 3);
        assert_eq!(h.slots[0].current, None);
        assert_eq!(h.counters.finished_early, 3);
        assert_eq!(h.counters.started_unreleased, 2);
        assert_eq!(h.counters.unreleased_waits, 1);
        // One release frees one place: exactly one more attempt starts.
        let first = h.coord.submitted[0];
        end(&mut h, 20, first, committed());
        assert_eq!(h.coord.submitted.len(), 4);
        assert_eq!(h.slots[0].unreleased, 3);
        assert_eq!(h.stats.total.committed, 1);
        // Latency and the history's end are taken at the release.
        assert_eq!(h.history.len(), 1);
        assert_eq!((h.history[0].start, h.history[0].end), (10, 20));
    }

    #[test]
    fn concurrent_attempts_of_a_slot_get_their_own_process_and_reruns_keep_their_age() {
        let mut h = host(2);
        step(&mut h, 10, |h, ctx| {
            h.on_timer(ctx, TimerId(HOST_TIMER_BIT))
        });
        let [a, b] = h.coord.submitted[..] else {
            panic!("two attempts: {:?}", h.coord.submitted)
        };
        // The first attempt's epoch aborts: it is re-run (not backed off),
        // in the place its release freed.
        end(&mut h, 30, a, TxnOutcome::Aborted(AbortReason::Timeout));
        assert_eq!(h.coord.submitted.len(), 3);
        let rerun = h.coord.submitted[2];
        assert_eq!(h.in_flight[&rerun].first_start, 10);
        assert_eq!(h.in_flight[&rerun].attempts, 2);
        assert_eq!(h.counters.reruns, 1);
        end(&mut h, 40, b, committed());
        let report = h.take_report();
        let history = report.client.expect("a client host reports").history;
        let process = |id| {
            history
                .iter()
                .find(|t| t.id == id)
                .expect("recorded")
                .process
        };
        assert_ne!(process(a), process(b));
        // The re-run took the lane `a` freed; the unreleased ones show as
        // unknown at the end of the run.
        assert_eq!(process(rerun), process(a));
        assert!(history
            .iter()
            .filter(|t| t.end == Time::MAX)
            .all(|t| t.outcome == Outcome::Unknown));
        assert!(report
            .counters
            .contains(&("client_finished_early", h.coord.submitted.len() as u64)));
    }
}
