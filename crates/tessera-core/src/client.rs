//! The closed-loop client host.
//!
//! A client host runs a number of closed-loop clients (slots) on one node and
//! wraps the protocol's coordinator. Each slot submits a transaction, waits
//! for its end, retries an aborted attempt after a randomized exponential
//! backoff (at most `max_attempts` attempts, 20 as in Janus §6.1), and then
//! submits the next. Latency runs from the first attempt to the commit, so
//! retries count.
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
use std::marker::PhantomData;

/// Timer ids at or above this belong to the host, below it to the coordinator.
pub const HOST_TIMER_BIT: u64 = 1 << 63;

/// How clients behave and when they measure.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub measure_from: Time,
    pub measure_until: Time,
    /// No new transaction starts at or after this time.
    pub stop_at: Time,
    pub max_attempts: u32,
    /// First retry waits up to this long; each retry doubles it.
    pub backoff_base: Time,
    pub backoff_cap: Time,
    pub record_history: bool,
}

/// What a client host hands over: its measurements and history.
#[derive(Default)]
pub struct ClientReport {
    pub stats: ClientStats,
    pub history: Vec<HistoryTxn>,
}

struct Slot {
    process: u64,
    gen: Box<dyn TxnGenerator>,
    txn: Option<Txn>,
    first_start: Time,
    attempt_start: Time,
    attempts: u32,
    current: Option<TxnId>,
}

/// A node of closed-loop clients around a coordinator `C`.
pub struct ClientHost<M, C> {
    coord: C,
    me: NodeId,
    incarnation: u8,
    cfg: ClientConfig,
    slots: Vec<Slot>,
    in_flight: FastMap<TxnId, usize>,
    next_seq: u32,
    stats: ClientStats,
    history: Vec<HistoryTxn>,
    done: Vec<(TxnId, TxnOutcome)>,
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
                process: ((incarnation as u64) << 32) | client.id as u64,
                gen,
                txn: None,
                first_start: 0,
                attempt_start: 0,
                attempts: 0,
                current: None,
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
            history: Vec::new(),
            done: Vec::new(),
            _msg: PhantomData,
        }
    }

    fn in_window(&self, t: Time) -> bool {
        t >= self.cfg.measure_from && t < self.cfg.measure_until
    }

    /// Start (or retry) the slot's transaction now.
    fn issue(&mut self, ctx: &mut Ctx<M>, slot: usize) {
        let now = ctx.observed_now();
        if now >= self.cfg.stop_at {
            return;
        }
        let s = &mut self.slots[slot];
        let txn = match &s.txn {
            Some(t) => t.clone(),
            None => {
                let t = s.gen.next(ctx.rng());
                s.txn = Some(t.clone());
                s.first_start = now;
                s.attempts = 0;
                t
            }
        };
        s.attempts += 1;
        s.attempt_start = now;
        self.next_seq = self.next_seq.wrapping_add(1);
        let id = TxnId::new(self.me, self.incarnation, self.next_seq);
        s.current = Some(id);
        self.in_flight.insert(id, slot);
        let since = s.first_start;
        self.coord.submit(ctx, Attempt { id, txn, since });
    }

    fn attempt_ended(&mut self, ctx: &mut Ctx<M>, id: TxnId, outcome: TxnOutcome) {
        let Some(slot) = self.in_flight.remove(&id) else {
            return;
        };
        let now = ctx.observed_now();
        let measured = self.in_window(now);
        let s = &mut self.slots[slot];
        s.current = None;
        let txn = s.txn.clone().expect("a slot in flight has a transaction");
        if self.cfg.record_history {
            let (reads, writes, out) = match &outcome {
                TxnOutcome::Committed { reads, writes, .. } => {
                    (reads.clone(), writes.clone(), Outcome::Committed)
                }
                TxnOutcome::Aborted(_) => (Vec::new(), Vec::new(), Outcome::Aborted),
                TxnOutcome::InDoubt => (Vec::new(), declared_writes(&txn), Outcome::Unknown),
            };
            self.history.push(HistoryTxn {
                id,
                process: s.process,
                start: s.attempt_start,
                end: now,
                reads,
                writes,
                outcome: out,
            });
        }
        let ty = txn.name();
        if measured {
            self.stats.total.attempts += 1;
            self.stats.counts_mut(ty).attempts += 1;
        }
        let s = &mut self.slots[slot];
        match outcome {
            TxnOutcome::Committed { .. } => {
                let latency_us = ((now - s.first_start) / 1000).max(1);
                s.txn = None;
                self.stats.run_committed += 1;
                if measured {
                    self.stats.total.committed += 1;
                    self.stats.counts_mut(ty).committed += 1;
                    let _ = self.stats.latency_us.record(latency_us);
                }
                self.issue(ctx, slot);
            }
            // It may have committed: counted as failed (no result), never retried.
            TxnOutcome::InDoubt => {
                s.txn = None;
                if measured {
                    self.stats.total.failed += 1;
                    self.stats.counts_mut(ty).failed += 1;
                }
                self.issue(ctx, slot);
            }
            TxnOutcome::Aborted(reason) if !reason.retryable() => {
                s.txn = None;
                if measured {
                    self.stats.total.user_aborts += 1;
                    self.stats.counts_mut(ty).user_aborts += 1;
                }
                self.issue(ctx, slot);
            }
            TxnOutcome::Aborted(_) if s.attempts >= self.cfg.max_attempts => {
                s.txn = None;
                if measured {
                    self.stats.total.failed += 1;
                    self.stats.counts_mut(ty).failed += 1;
                }
                self.issue(ctx, slot);
            }
            TxnOutcome::Aborted(AbortReason::Stale) => self.issue(ctx, slot),
            TxnOutcome::Aborted(_) => {
                let delay = backoff(
                    ctx.rng(),
                    s.attempts,
                    self.cfg.backoff_base,
                    self.cfg.backoff_cap,
                );
                ctx.set_timer(delay, TimerId(HOST_TIMER_BIT | slot as u64));
            }
        }
    }
}

impl<M, C: Coordinator<M>> WrapsCoordinator<M> for ClientHost<M, C> {
    fn done_buffer(&mut self) -> &mut Vec<(TxnId, TxnOutcome)> {
        &mut self.done
    }

    fn finish(&mut self, ctx: &mut Ctx<M>, id: TxnId, outcome: TxnOutcome) {
        self.attempt_ended(ctx, id, outcome)
    }
}

impl<M, C: Coordinator<M>> Node<M> for ClientHost<M, C> {
    fn on_start(&mut self, ctx: &mut Ctx<M>) {
        self.stepped(ctx, |h, ctx| h.coord.on_start(ctx));
        for slot in 0..self.slots.len() {
            // A small random stagger keeps clients from moving in lockstep.
            let delay = ctx.rng().random_range(0..=20_000);
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
            if h.slots[slot].current.is_none() {
                h.issue(ctx, slot);
            }
        });
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<M>, token: u64) {
        self.stepped(ctx, |h, ctx| h.coord.on_persisted(ctx, token));
    }

    fn take_report(&mut self) -> NodeReport {
        let mut history = std::mem::take(&mut self.history);
        if self.cfg.record_history {
            for (&id, &slot) in &self.in_flight {
                let s = &self.slots[slot];
                let writes = declared_writes(s.txn.as_ref().expect("in flight"));
                history.push(HistoryTxn {
                    id,
                    process: s.process,
                    start: s.attempt_start,
                    end: Time::MAX,
                    reads: Vec::new(),
                    writes,
                    outcome: Outcome::Unknown,
                });
            }
            history.sort_by_key(|h| (h.start, h.id));
        }
        NodeReport {
            client: Some(ClientReport {
                stats: std::mem::take(&mut self.stats),
                history,
            }),
            counters: self.coord.take_report().counters,
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
    /// Scratch space for the `Done` effects of one step.
    fn done_buffer(&mut self) -> &mut Vec<(TxnId, TxnOutcome)>;
    /// Act on the end of attempt `id` (which may submit more attempts).
    fn finish(&mut self, ctx: &mut Ctx<M>, id: TxnId, outcome: TxnOutcome);

    /// Run `f` (a step of the host or its coordinator), then finish every
    /// attempt whose `Done` it pushed, and those of the attempts the
    /// finishing submitted in turn.
    fn stepped(&mut self, ctx: &mut Ctx<M>, f: impl FnOnce(&mut Self, &mut Ctx<M>)) {
        let from = ctx.effects_mut().len();
        f(self, ctx);
        loop {
            let effects = ctx.effects_mut();
            let done = self.done_buffer();
            let mut i = from;
            while i < effects.len() {
                if matches!(effects[i], Effect::Done { .. }) {
                    if let Effect::Done { txn, outcome } = effects.remove(i) {
                        done.push((txn, outcome));
                    }
                } else {
                    i += 1;
                }
            }
            if done.is_empty() {
                return;
            }
            for (id, outcome) in std::mem::take(done) {
                self.finish(ctx, id, outcome);
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
