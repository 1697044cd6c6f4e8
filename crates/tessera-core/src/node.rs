//! The sans-IO node model.
//!
//! A node never touches a clock, a socket, a thread or a global RNG. A driver
//! (the `sim` or `local` runtime) steps it with one event at a time through a
//! [`Ctx`], which carries the current time and the node's own seeded RNG and
//! collects the node's [`Effect`]s. The driver carries the effects out after
//! the step returns.
//!
//! Durability ordering is part of the model, not a convention: a node that
//! must not send before a record is durable asks for [`Ctx::persist`] and
//! sends from [`Node::on_persisted`], which the driver calls only once the
//! record is on disk (after the simulated or real fsync).

use crate::ids::{NodeId, Time, TimerId, TxnId};
use crate::txn::TxnOutcome;
use bytes::Bytes;
use rand::rngs::SmallRng;

/// What a node asks its driver to do.
#[derive(Debug)]
pub enum Effect<M> {
    /// Send `msg` to `to`. Delivery is best effort: the network may lose,
    /// duplicate, delay or reorder it (in `sim`).
    Send { to: NodeId, msg: M },
    /// Call [`Node::on_timer`] with `id` at time `at` (or later).
    Timer { at: Time, id: TimerId },
    /// Make `record` durable in this node's log, then call
    /// [`Node::on_persisted`] with `token`. Records survive a crash of the
    /// node and are handed back on restart.
    Persist { token: u64, record: Bytes },
    /// A coordinator finished a transaction attempt. Only coordinator roles
    /// emit it; the client host that wraps them consumes it.
    Done { txn: TxnId, outcome: TxnOutcome },
    /// A coordinator finished *executing* a transaction attempt whose
    /// outcome is not final yet (COCO §4.2: locks, validation and write-back
    /// done, the result released only when the epoch commits, §3.1). The
    /// client host starts its slot's next transaction at once and waits for
    /// the attempt's [`Effect::Done`] for its outcome. Optional: protocols
    /// that report only `Done` get plain closed-loop clients.
    Finished { txn: TxnId },
    /// This step cost `time` of CPU (or pipeline) time beyond the runtime's
    /// fixed per-event cost: modelled hardware, such as a switch that
    /// recirculates a packet once per operation (NOCC §3). The simulator
    /// keeps the node busy that much longer; real runtimes ignore it (their
    /// CPU time is real).
    Charge { time: Time },
}

/// The context of one step: time, randomness and the effect sink.
pub struct Ctx<'a, M> {
    now: Time,
    /// The runtime's reference time (see [`Ctx::observed_now`]).
    observed: Time,
    me: NodeId,
    rng: &'a mut SmallRng,
    effects: &'a mut Vec<Effect<M>>,
}

impl<'a, M> Ctx<'a, M> {
    pub fn new(
        now: Time,
        me: NodeId,
        rng: &'a mut SmallRng,
        effects: &'a mut Vec<Effect<M>>,
    ) -> Self {
        Ctx {
            now,
            observed: now,
            me,
            rng,
            effects,
        }
    }
    /// The same context on a node whose clock reads `now` while the
    /// runtime's reference time is `observed` (the simulator's clock drift).
    pub fn with_observed(mut self, observed: Time) -> Self {
        self.observed = observed;
        self
    }
    /// The current time (virtual in `sim`, monotonic real time in `local`).
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }
    /// The runtime's reference time, for measurement only (history
    /// timestamps, latencies): an outside observer's clock, so that
    /// real-time order across nodes is judged on one clock. It equals
    /// [`Ctx::now`] unless the simulator drifts this node's clock; protocol
    /// logic must use [`Ctx::now`].
    #[inline]
    pub fn observed_now(&self) -> Time {
        self.observed
    }
    /// The node being stepped.
    #[inline]
    pub fn me(&self) -> NodeId {
        self.me
    }
    /// This node's deterministic random number generator.
    #[inline]
    pub fn rng(&mut self) -> &mut SmallRng {
        self.rng
    }
    #[inline]
    pub fn send(&mut self, to: NodeId, msg: M) {
        self.effects.push(Effect::Send { to, msg });
    }
    /// Fire `id` after `delay` nanoseconds.
    #[inline]
    pub fn set_timer(&mut self, delay: Time, id: TimerId) {
        let at = self.now.saturating_add(delay);
        self.effects.push(Effect::Timer { at, id });
    }
    #[inline]
    pub fn persist(&mut self, token: u64, record: Bytes) {
        self.effects.push(Effect::Persist { token, record });
    }
    /// See [`Effect::Charge`].
    #[inline]
    pub fn charge(&mut self, time: Time) {
        self.effects.push(Effect::Charge { time });
    }
    #[inline]
    pub fn done(&mut self, txn: TxnId, outcome: TxnOutcome) {
        self.effects.push(Effect::Done { txn, outcome });
    }
    /// See [`Effect::Finished`].
    #[inline]
    pub fn finished(&mut self, txn: TxnId) {
        self.effects.push(Effect::Finished { txn });
    }
    /// Re-borrow this context for a node wrapped inside another (the client
    /// host wraps a coordinator).
    pub fn reborrow(&mut self) -> Ctx<'_, M> {
        Ctx {
            now: self.now,
            observed: self.observed,
            me: self.me,
            rng: self.rng,
            effects: self.effects,
        }
    }
    /// The effects pushed so far in this step (used by wrappers).
    pub fn effects_mut(&mut self) -> &mut Vec<Effect<M>> {
        self.effects
    }
}

/// A role of a protocol, or the engine's client host, as a state machine.
pub trait Node<M>: Send {
    /// Called once when the node starts (and again after each restart).
    fn on_start(&mut self, _ctx: &mut Ctx<M>) {}
    fn on_message(&mut self, ctx: &mut Ctx<M>, from: NodeId, msg: M);
    fn on_timer(&mut self, ctx: &mut Ctx<M>, id: TimerId);
    fn on_persisted(&mut self, _ctx: &mut Ctx<M>, _token: u64) {}
    /// Hand over what this node measured (client hosts) so that it survives
    /// a crash of the node and the end of the run.
    fn take_report(&mut self) -> NodeReport {
        NodeReport::default()
    }
    /// Nothing this node started is unfinished (a client host: no attempt
    /// in flight). The simulator runs a checked run past its duration until
    /// every node is settled, so that its final state is quiescent.
    fn settled(&self) -> bool {
        true
    }
    /// This node will start nothing more and is settled (a client host
    /// whose clients all reached their commit quota): a `tcp` process whose
    /// nodes are all done ends before its deadline.
    fn done(&self) -> bool {
        false
    }
    /// The shard data this node holds, if it is a server (for end-of-run
    /// consistency and convergence checks).
    fn store(&self) -> Option<&crate::storage::Store> {
        None
    }
    /// This node's whole durable state as one record, for a checkpoint of
    /// its log: after a restart the node is handed this record followed by
    /// the records persisted after it, and must rebuild the same state as
    /// from the full log. `None` (the default) means the node does not
    /// checkpoint and its log is replayed from the start.
    fn snapshot(&self) -> Option<Bytes> {
        None
    }
}

/// What a node hands to the harness at a crash or at the end of a run.
#[derive(Default)]
pub struct NodeReport {
    pub client: Option<crate::client::ClientReport>,
    /// A protocol's own counters (e.g. aborts at a switch), summed over
    /// nodes and incarnations into the results row.
    pub counters: Vec<(&'static str, u64)>,
    /// A protocol's gauges: the node's state when it reports (e.g.
    /// transactions still undecided here), summed over nodes into the
    /// results row like the counters, but only from each node's last
    /// incarnation: a crashed incarnation's state died with it, so what
    /// it held at the crash says nothing about the end of the run.
    pub gauges: Vec<(&'static str, u64)>,
    /// A protocol's own values over time, `(name, time, value)` at each
    /// change (e.g. OOCC's lease at each adjustment), at the runtime's
    /// reference time ([`Ctx::observed_now`]); the results row lists them
    /// per name in time order.
    pub samples: Vec<(&'static str, Time, u64)>,
}

impl NodeReport {
    /// The counters, then the gauges: every value the row sums.
    pub fn values(&self) -> impl Iterator<Item = &(&'static str, u64)> {
        self.counters.iter().chain(&self.gauges)
    }

    /// The report of an incarnation that crashed: its counters still
    /// count (work it did), its gauges do not (see [`Self::gauges`]).
    pub fn at_crash(mut self) -> Self {
        self.gauges.clear();
        self
    }
}

/// Size of a message on the wire, for bytes-per-transaction accounting. The
/// TCP codec will make this exact; until then protocols estimate it.
pub trait WireSize {
    fn wire_size(&self) -> usize;
    /// A metrics-only message (e.g. NOCC's false-abort probe): the simulator
    /// delivers it like any other but charges no CPU for it and leaves it
    /// out of the traffic counters, so measuring does not disturb the run.
    fn instrumentation(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::NodeReport;

    #[test]
    fn a_crashed_incarnation_reports_its_counters_but_not_its_gauges() {
        let report = NodeReport {
            counters: vec![("executed", 7)],
            gauges: vec![("undecided", 3)],
            ..NodeReport::default()
        };
        let all: Vec<_> = report.values().copied().collect();
        assert_eq!(all, [("executed", 7), ("undecided", 3)]);
        let crashed: Vec<_> = report.at_crash().values().copied().collect();
        assert_eq!(crashed, [("executed", 7)]);
    }
}
