//! The event loop.

use crate::config::{SimConfig, SimConfigError};
use crate::disk::Disk;
use crate::net;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use tessera_core::ids::{NodeId, Time, TimerId, MS};
use tessera_core::node::{Ctx, Effect, Node, NodeReport, WireSize};
use tessera_core::runtime::{node_seed, Deployment, NetCounters, NodeFactory, Restart, RunOutput};
use tessera_core::topology::Role;

enum Kind<M> {
    Deliver {
        from: NodeId,
        msg: M,
    },
    Timer(TimerId),
    Persisted {
        token: u64,
        record: bytes::Bytes,
    },
    /// A checkpoint of the node's log is durable (see
    /// [`SimConfig::checkpoint_bytes`]).
    Checkpoint(bytes::Bytes),
    Crash {
        restart_after: Option<Time>,
    },
    Restart,
    /// The node's CPU is free again: handle the next event of its inbox.
    Wake,
}

struct Event<M> {
    at: Time,
    seq: u64,
    node: NodeId,
    /// The incarnation the event belongs to (timers and disk completions of
    /// a crashed incarnation are dropped); `None` for messages and faults.
    incarnation: Option<u8>,
    kind: Kind<M>,
}

impl<M> PartialEq for Event<M> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<M> Eq for Event<M> {}
impl<M> PartialOrd for Event<M> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<M> Ord for Event<M> {
    /// Reversed: `BinaryHeap` is a max-heap and we pop the earliest event.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

struct Slot<M> {
    node: Option<Box<dyn Node<M>>>,
    factory: NodeFactory<M>,
    incarnation: u8,
    rng: SmallRng,
    busy_until: Time,
    /// Fixed CPU cost of one event.
    cpu: Time,
    /// Fixed CPU cost of a message from a node on the same machine
    /// ([`SimConfig::local_cpu`]).
    local_cpu: Time,
    /// CPU cost of each byte it sends or receives, ps
    /// ([`SimConfig::byte_cpu_ps`]).
    byte_cpu_ps: u64,
    /// CPU time spent so far, all incarnations.
    busy_total: Time,
    site: u32,
    /// The machine this node runs on
    /// ([`tessera_core::topology::Topology::machine`]).
    machine: NodeId,
    /// This node's clock rate offset, parts per million (clock drift).
    drift_ppm: i64,
    disk: Disk,
    /// Events that arrived while the CPU was busy, in arrival order.
    inbox: std::collections::VecDeque<Event<M>>,
    wake_scheduled: bool,
}

impl<M> Slot<M> {
    /// The CPU time of encoding or decoding `msg` here
    /// ([`SimConfig::byte_cpu_ps`]; none for instrumentation).
    fn bytes_cpu(&self, msg: &M) -> Time
    where
        M: WireSize,
    {
        if self.byte_cpu_ps == 0 || msg.instrumentation() {
            return 0;
        }
        msg.wire_size() as u64 * self.byte_cpu_ps / 1000
    }

    fn local(&self, t: Time) -> Time {
        local_time(t, self.drift_ppm)
    }

    fn global(&self, at: Time) -> Time {
        global_time(at, self.drift_ppm)
    }

    /// The CPU time of the step that produced `effects` (the fixed cost
    /// `fixed` plus what the node charged and the bytes it sent), added
    /// to the node's total.
    fn cost(&mut self, fixed: Time, effects: &[Effect<M>]) -> Time
    where
        M: WireSize,
    {
        let charged: Time = effects
            .iter()
            .map(|e| match e {
                Effect::Charge { time } => *time,
                Effect::Send { msg, .. } => self.bytes_cpu(msg),
                _ => 0,
            })
            .sum();
        let t = fixed + charged;
        self.busy_total += t;
        t
    }
}

/// Runs a message through its wire codec, as `tcp` would: the decoded
/// copy, or why the receiver's process would refuse it.
pub type Wire<'a, M> = &'a dyn Fn(&M) -> Result<M, String>;

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Config(#[from] SimConfigError),
    /// A message that `tcp` could not carry: the sim would have hidden a
    /// bug that only shows on the wire (a receiver refusing a frame closes
    /// the connection).
    #[error("sim: at {at} ns, node {from}'s message to node {to} does not survive its wire codec: {error}")]
    Wire {
        at: Time,
        from: u32,
        to: u32,
        error: String,
    },
}

struct World<'w, M> {
    cfg: SimConfig,
    wire: Option<Wire<'w, M>>,
    /// The first message [`World::wire`] refused; the run stops there.
    wire_error: Option<SimError>,
    queue: BinaryHeap<Event<M>>,
    seq: u64,
    net_rng: SmallRng,
    net: NetCounters,
    reports: Vec<NodeReport>,
    events: u64,
    seed: u64,
}

impl<M> World<'_, M> {
    fn push(&mut self, at: Time, node: NodeId, incarnation: Option<u8>, kind: Kind<M>) {
        self.seq += 1;
        self.queue.push(Event {
            at,
            seq: self.seq,
            node,
            incarnation,
            kind,
        });
    }
}

/// Events between two writes of [`SimConfig::progress`]: a few a
/// millisecond of wall time, and no cost worth measuring.
const PROGRESS_EVERY: u64 = 1 << 14;

/// Run `dep` under the simulator until its duration (virtual time) ends.
pub fn run<M: Clone + WireSize + 'static>(
    dep: Deployment<M>,
    cfg: &SimConfig,
) -> Result<RunOutput<M>, SimError> {
    run_wire(dep, cfg, None)
}

/// [`run`], with every message (but metrics-only ones) replaced by what
/// `wire` makes of it: its encoding decoded again, so that a checked
/// simulation also checks that `tcp` can carry each message the protocol
/// sends. The first message it refuses ends the run with
/// [`SimError::Wire`].
pub fn run_wire<M: Clone + WireSize + 'static>(
    dep: Deployment<M>,
    cfg: &SimConfig,
    wire: Option<Wire<'_, M>>,
) -> Result<RunOutput<M>, SimError> {
    cfg.validate()?;
    let topology = dep.topology.clone();
    if let Some((node, _)) = cfg.drift_node {
        if node as usize >= topology.nodes.len() {
            return Err(SimConfigError::Node {
                node,
                nodes: topology.nodes.len(),
            }
            .into());
        }
    }
    let sites = cfg.latency.len();
    let mut slots: Vec<Slot<M>> = Vec::with_capacity(dep.factories.len());
    for (i, factory) in dep.factories.into_iter().enumerate() {
        let info = &topology.nodes[i];
        if info.site as usize >= sites {
            return Err(SimConfigError::Site {
                node: i as u32,
                site: info.site,
                sites,
            }
            .into());
        }
        let (cpu, local_cpu, byte_cpu_ps) = match info.role {
            Role::Server { .. } => (
                cfg.server_cpu,
                cfg.local_cpu.unwrap_or(cfg.server_cpu),
                cfg.byte_cpu_ps,
            ),
            Role::Client { .. } => (cfg.client_cpu, cfg.client_cpu, cfg.byte_cpu_ps),
            // A switch forwards at line rate: its per-packet cost is all.
            Role::Switch { .. } => (cfg.switch_cpu, cfg.switch_cpu, 0),
        };
        slots.push(Slot {
            node: None,
            factory,
            incarnation: 0,
            rng: SmallRng::seed_from_u64(node_seed(dep.seed, NodeId(i as u32), 0)),
            busy_until: 0,
            cpu,
            local_cpu,
            byte_cpu_ps,
            busy_total: 0,
            site: info.site,
            machine: topology.machine(info.id),
            drift_ppm: drift(cfg, dep.seed, i),
            disk: Disk::for_restarts(cfg.crashes.iter().any(|c| c.node.0 as usize == i)),
            inbox: std::collections::VecDeque::new(),
            wake_scheduled: false,
        });
    }
    let mut w = World {
        cfg: cfg.clone(),
        wire,
        wire_error: None,
        queue: BinaryHeap::new(),
        seq: 0,
        net_rng: SmallRng::seed_from_u64(node_seed(dep.seed, NodeId(u32::MAX), 0)),
        net: NetCounters::default(),
        reports: Vec::new(),
        events: 0,
        seed: dep.seed,
    };
    for c in &cfg.crashes {
        if c.node.0 as usize >= slots.len() {
            return Err(SimConfigError::Node {
                node: c.node.0,
                nodes: slots.len(),
            }
            .into());
        }
        w.push(
            c.at,
            c.node,
            None,
            Kind::Crash {
                restart_after: c.restart_after,
            },
        );
    }
    let mut effects = Vec::new();
    for i in 0..slots.len() {
        start_node(&mut w, &mut slots, NodeId(i as u32), 0, &mut effects);
    }
    let mut now = 0;
    let settle_by = dep.duration.saturating_add(cfg.settle);
    let mut look_at = dep.duration;
    let load_debug = tracing::enabled!(target: "tessera_sim::load", tracing::Level::DEBUG);
    let mut load_at = 0;
    while let Some(ev) = w.queue.pop() {
        if load_debug && ev.at >= load_at {
            load_at = ev.at + 100 * MS;
            log_load(&w, &slots, ev.at);
        }
        if ev.at > dep.duration {
            if ev.at > settle_by {
                break;
            }
            if ev.at >= look_at {
                // Down nodes count as settled: their restart, if any, is
                // not waited for.
                if slots
                    .iter()
                    .all(|s| s.node.as_ref().is_none_or(|n| n.settled()))
                {
                    break;
                }
                look_at = ev.at + MS;
            }
        }
        now = ev.at;
        if w.events % PROGRESS_EVERY == 0 {
            w.cfg.progress.set(now);
        }
        step(&mut w, &mut slots, ev, &mut effects);
        if let Some(e) = w.wire_error.take() {
            return Err(e);
        }
    }
    let mut nodes = Vec::with_capacity(slots.len());
    for (i, s) in slots.iter_mut().enumerate() {
        let node = match s.node.take() {
            Some(mut n) => {
                w.reports.push(n.take_report());
                n
            }
            None => {
                // Down at the end: hand back a fresh incarnation so the
                // harness can still inspect its recovered state.
                let mut n = (s.factory)(Restart {
                    incarnation: s.incarnation.wrapping_add(1),
                    recovered: s.disk.records.clone(),
                    durable: true,
                });
                let _ = n.take_report();
                tracing::debug!(node = i, "node was down at the end of the run");
                n
            }
        };
        nodes.push(node);
    }
    Ok(RunOutput {
        reports: w.reports,
        nodes,
        net: w.net,
        events: w.events,
        busy: slots.iter().map(|s| s.busy_total).collect(),
        elapsed: now.max(dep.duration),
    })
}

/// A `tessera_sim::load` debug line: what the run holds at `at` — events
/// queued (messages in flight, timers, disk completions) and the queue's
/// capacity (a heap never shrinks), events waiting in busy nodes' inboxes
/// and their capacity, the wire bytes of the messages among both, the bytes
/// of every node's durable log, and the live heap bytes when the binary
/// counts them ([`tessera_core::alloc`]).
fn log_load<M: WireSize>(w: &World<'_, M>, slots: &[Slot<M>], at: Time) {
    let inboxes: usize = slots.iter().map(|s| s.inbox.len()).sum();
    let inbox_cap: usize = slots.iter().map(|s| s.inbox.capacity()).sum();
    let log_bytes: u64 = slots.iter().map(|s| s.disk.bytes).sum();
    let msg_bytes: usize = w
        .queue
        .iter()
        .chain(slots.iter().flat_map(|s| s.inbox.iter()))
        .map(|e| match &e.kind {
            Kind::Deliver { msg, .. } => msg.wire_size(),
            _ => 0,
        })
        .sum();
    tracing::debug!(
        target: "tessera_sim::load",
        at,
        queued = w.queue.len(),
        queue_cap = w.queue.capacity(),
        event_size = std::mem::size_of::<Event<M>>(),
        inboxes,
        inbox_cap,
        msg_bytes,
        log_bytes,
        heap_live = tessera_core::alloc::live(),
    );
}

/// What a clock running `ppm` parts per million fast reads at simulator
/// time `t`.
fn local_time(t: Time, ppm: i64) -> Time {
    let d = (t as i128 * ppm as i128).div_euclid(1_000_000);
    (t as i128 + d).max(0) as Time
}

/// The simulator time at which such a clock reads `at` (rounded up, so a
/// timer never fires early by the node's own clock).
fn global_time(at: Time, ppm: i64) -> Time {
    let rate = 1_000_000 + ppm as i128;
    ((at as i128 * 1_000_000 + rate - 1) / rate).clamp(0, Time::MAX as i128) as Time
}

/// Node `i`'s clock drift, drawn from the seed within the bound (or fixed
/// by [`SimConfig::drift_node`]).
fn drift(cfg: &SimConfig, seed: u64, i: usize) -> i64 {
    use rand::Rng;
    if let Some((_, ppm)) = cfg.drift_node.filter(|(n, _)| *n as usize == i) {
        return ppm;
    }
    if cfg.drift_ppm == 0 {
        return 0;
    }
    let mut rng = SmallRng::seed_from_u64(node_seed(seed ^ 0xD21F7, NodeId(i as u32), 0));
    let d = cfg.drift_ppm.min(500_000) as i64;
    rng.random_range(-d..=d)
}

fn start_node<M: Clone + WireSize>(
    w: &mut World<'_, M>,
    slots: &mut [Slot<M>],
    id: NodeId,
    at: Time,
    effects: &mut Vec<Effect<M>>,
) {
    let s = &mut slots[id.0 as usize];
    let mut node = (s.factory)(Restart {
        incarnation: s.incarnation,
        recovered: s.disk.records.clone(),
        durable: true,
    });
    s.rng = SmallRng::seed_from_u64(node_seed(w.seed, id, s.incarnation));
    s.busy_until = at;
    {
        let local = s.local(at);
        let mut ctx = Ctx::new(local, id, &mut s.rng, effects).with_observed(at);
        node.on_start(&mut ctx);
    }
    s.node = Some(node);
    let done = at + s.cost(s.cpu, effects);
    s.busy_until = done;
    apply(w, slots, id, done, effects);
}

fn step<M: Clone + WireSize>(
    w: &mut World<'_, M>,
    slots: &mut [Slot<M>],
    ev: Event<M>,
    effects: &mut Vec<Effect<M>>,
) {
    let id = ev.node;
    let s = &mut slots[id.0 as usize];
    match ev.kind {
        Kind::Crash { restart_after } => {
            if let Some(mut n) = s.node.take() {
                s.inbox.clear();
                w.reports.push(n.take_report().at_crash());
                tracing::debug!(node = id.0, at = ev.at, "crash");
                if let Some(d) = restart_after {
                    w.push(ev.at + d, id, None, Kind::Restart);
                }
            }
            return;
        }
        Kind::Wake => {
            s.wake_scheduled = false;
            if let Some(next) = s.inbox.pop_front() {
                let next = Event { at: ev.at, ..next };
                handle(w, slots, next, effects);
                let s = &mut slots[id.0 as usize];
                if !s.inbox.is_empty() && !s.wake_scheduled {
                    s.wake_scheduled = true;
                    let at = s.busy_until;
                    w.push(at, id, None, Kind::Wake);
                }
            }
            return;
        }
        Kind::Restart => {
            if s.node.is_none() {
                s.incarnation = s.incarnation.wrapping_add(1);
                tracing::debug!(node = id.0, at = ev.at, "restart");
                start_node(w, slots, id, ev.at, effects);
            }
            return;
        }
        _ => {}
    }
    if s.node.is_none() || ev.incarnation.is_some_and(|i| i != s.incarnation) {
        return; // Down, or an event of an earlier incarnation.
    }
    if s.busy_until > ev.at || !s.inbox.is_empty() {
        // The CPU is busy: the event waits in the node's inbox.
        s.inbox.push_back(ev);
        if !s.wake_scheduled {
            s.wake_scheduled = true;
            let at = s.busy_until;
            w.push(at, id, None, Kind::Wake);
        }
        return;
    }
    handle(w, slots, ev, effects);
}

/// Handle `ev` now: the node is up and its CPU is free.
fn handle<M: Clone + WireSize>(
    w: &mut World<'_, M>,
    slots: &mut [Slot<M>],
    ev: Event<M>,
    effects: &mut Vec<Effect<M>>,
) {
    let id = ev.node;
    let s = &mut slots[id.0 as usize];
    if s.node.is_none() || ev.incarnation.is_some_and(|i| i != s.incarnation) {
        return;
    }
    if let Kind::Checkpoint(snapshot) = ev.kind {
        // The disk's work, not the node's: no CPU, no event.
        s.disk.checkpoint(snapshot);
        return;
    }
    w.events += 1;
    let free = matches!(&ev.kind, Kind::Deliver { msg, .. } if msg.instrumentation());
    let fixed = match &ev.kind {
        Kind::Deliver { from, msg }
            if *from != id && slots[from.0 as usize].machine == slots[id.0 as usize].machine =>
        {
            slots[id.0 as usize].local_cpu + slots[id.0 as usize].bytes_cpu(msg)
        }
        Kind::Deliver { msg, .. } => slots[id.0 as usize].cpu + slots[id.0 as usize].bytes_cpu(msg),
        _ => slots[id.0 as usize].cpu,
    };
    let s = &mut slots[id.0 as usize];
    let local = s.local(ev.at);
    let node = s.node.as_mut().expect("checked above");
    {
        let mut ctx = Ctx::new(local, id, &mut s.rng, effects).with_observed(ev.at);
        match ev.kind {
            Kind::Deliver { from, msg } => node.on_message(&mut ctx, from, msg),
            Kind::Timer(t) => node.on_timer(&mut ctx, t),
            Kind::Persisted { token, record } => {
                s.disk.append(record);
                node.on_persisted(&mut ctx, token)
            }
            Kind::Checkpoint(_) | Kind::Crash { .. } | Kind::Restart | Kind::Wake => {
                unreachable!("handled by step and handle")
            }
        }
    }
    let done = if free {
        ev.at
    } else {
        ev.at + s.cost(fixed, effects)
    };
    s.busy_until = done;
    apply(w, slots, id, done, effects);
}

/// Carry out the effects of one step of `id`, which finished at `t`.
fn apply<M: Clone + WireSize>(
    w: &mut World<'_, M>,
    slots: &mut [Slot<M>],
    id: NodeId,
    t: Time,
    effects: &mut Vec<Effect<M>>,
) {
    let inc = slots[id.0 as usize].incarnation;
    let mut flushed_now = Vec::new();
    for e in effects.drain(..) {
        match e {
            Effect::Send { to, mut msg } => {
                if let (Some(wire), false) = (w.wire, msg.instrumentation()) {
                    match wire(&msg) {
                        Ok(m) => msg = m,
                        Err(error) => {
                            w.wire_error.get_or_insert(SimError::Wire {
                                at: t,
                                from: id.0,
                                to: to.0,
                                error,
                            });
                            continue;
                        }
                    }
                }
                let Some(dst) = slots.get(to.0 as usize) else {
                    tracing::warn!(from = id.0, to = to.0, "message to an unknown node dropped");
                    continue;
                };
                if to != id && dst.machine == slots[id.0 as usize].machine {
                    // Inside one machine: no latency, loss or partition,
                    // and not a network message.
                    if !msg.instrumentation() {
                        w.net.local_messages += 1;
                    }
                    w.push(t, to, None, Kind::Deliver { from: id, msg });
                    continue;
                }
                if !msg.instrumentation() {
                    w.net.messages += 1;
                    w.net.bytes += msg.wire_size() as u64;
                }
                let sites = (slots[id.0 as usize].site, dst.site);
                let (at, n) = net::arrivals(&w.cfg, &mut w.net_rng, sites, (id, to), t);
                if n == 2 {
                    w.push(
                        at[1],
                        to,
                        None,
                        Kind::Deliver {
                            from: id,
                            msg: msg.clone(),
                        },
                    );
                }
                if n >= 1 {
                    w.push(at[0], to, None, Kind::Deliver { from: id, msg });
                }
            }
            Effect::Timer { at, id: timer } => {
                let at = slots[id.0 as usize].global(at);
                w.push(at.max(t), id, Some(inc), Kind::Timer(timer));
            }
            Effect::Persist { token, record } if w.cfg.fsync == 0 => {
                slots[id.0 as usize].disk.since_checkpoint += record.len() as u64;
                flushed_now.push((token, record));
            }
            Effect::Persist { token, record } => {
                slots[id.0 as usize].disk.since_checkpoint += record.len() as u64;
                let fsync = w.cfg.fsync;
                let at = slots[id.0 as usize].disk.schedule(t, fsync);
                w.push(at, id, Some(inc), Kind::Persisted { token, record });
            }
            Effect::Charge { .. } => {}
            Effect::Done { .. } | Effect::Finished { .. } => {
                debug_assert!(false, "Done or Finished escaped a client host");
            }
        }
    }
    if !flushed_now.is_empty() {
        flush_now(w, slots, id, t, flushed_now);
    }
    checkpoint(w, slots, id, t);
}

/// [`SimConfig::checkpoint_bytes`]: once `id` issued that many bytes of
/// records since its last checkpoint, take its snapshot now and make it
/// durable behind every record issued before it, as a write-ahead log
/// queues a checkpoint behind its appends (`tessera_wal::Wal::checkpoint`).
fn checkpoint<M: Clone + WireSize>(
    w: &mut World<'_, M>,
    slots: &mut [Slot<M>],
    id: NodeId,
    t: Time,
) {
    let limit = w.cfg.checkpoint_bytes;
    let s = &mut slots[id.0 as usize];
    if limit == 0 || s.disk.since_checkpoint < limit || !s.disk.keeps_records() {
        return;
    }
    s.disk.since_checkpoint = 0;
    let Some(snapshot) = s.node.as_ref().and_then(|n| n.snapshot()) else {
        return;
    };
    if w.cfg.fsync == 0 {
        // Every record issued so far is durable already.
        s.disk.checkpoint(snapshot);
        return;
    }
    let at = s.disk.schedule(t, w.cfg.fsync);
    let inc = s.incarnation;
    w.push(at, id, Some(inc), Kind::Checkpoint(snapshot));
}

/// Records `id` wrote at `t` with a flush that takes no time (`fsync` 0,
/// the papers' "logging is turned off"): durable at once, and the node
/// hears so within the same step, charged only what it charges itself. As
/// an event each would cost a step's fixed CPU and queue behind the node's
/// inbox, so every reply waiting for its record would wait for the whole
/// inbox: a log that takes no time would still take time (measured: a
/// quarter of a Rococo server's events at 100 clients per server,
/// docs/results/rococo.md). With `fsync` above 0 nothing changes.
fn flush_now<M: Clone + WireSize>(
    w: &mut World<'_, M>,
    slots: &mut [Slot<M>],
    id: NodeId,
    t: Time,
    records: Vec<(u64, bytes::Bytes)>,
) {
    let mut effects = Vec::new();
    let s = &mut slots[id.0 as usize];
    let local = s.local(t);
    let Some(node) = s.node.as_mut() else {
        return;
    };
    for (token, record) in records {
        s.disk.append(record);
        let mut ctx = Ctx::new(local, id, &mut s.rng, &mut effects).with_observed(t);
        node.on_persisted(&mut ctx, token);
    }
    let done = t + s.cost(0, &effects);
    s.busy_until = s.busy_until.max(done);
    apply(w, slots, id, done, &mut effects);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::US;

    #[test]
    fn drifted_clocks_run_at_their_rate_and_timers_never_fire_early() {
        assert_eq!(local_time(1_000_000, 0), 1_000_000);
        assert_eq!(local_time(1_000_000, 1_000), 1_001_000);
        assert_eq!(local_time(1_000_000, -500_000), 500_000);
        for ppm in [-500_000, -1_000, 0, 1_000, 400_000] {
            for at in [0, 1, 999, 20_000, 123_456_789] {
                let g = global_time(at, ppm);
                assert!(local_time(g, ppm) >= at, "{ppm} {at}");
                assert!(g == 0 || local_time(g - 1, ppm) < at, "{ppm} {at}");
            }
        }
    }

    /// A node that ticks every millisecond and is settled after `busy`
    /// ticks; `seen` counts its ticks across the run.
    struct Ticker {
        busy: u64,
        seen: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    #[derive(Clone)]
    struct NoMsg;

    impl WireSize for NoMsg {
        fn wire_size(&self) -> usize {
            0
        }
    }

    impl Node<NoMsg> for Ticker {
        fn on_start(&mut self, ctx: &mut Ctx<NoMsg>) {
            ctx.set_timer(MS, TimerId(0));
        }
        fn on_message(&mut self, _: &mut Ctx<NoMsg>, _: NodeId, _: NoMsg) {}
        fn on_timer(&mut self, ctx: &mut Ctx<NoMsg>, _: TimerId) {
            self.seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            ctx.set_timer(MS, TimerId(0));
        }
        fn settled(&self) -> bool {
            self.seen.load(std::sync::atomic::Ordering::Relaxed) >= self.busy
        }
    }

    /// Node 0 sends node 1 the numbers 1, 2, 3, ... one per millisecond;
    /// node 1 records what it receives.
    struct Counter {
        next: u64,
        got: std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
    }

    #[derive(Clone, Debug)]
    struct Num(u64);

    impl WireSize for Num {
        fn wire_size(&self) -> usize {
            8
        }
    }

    impl Node<Num> for Counter {
        fn on_start(&mut self, ctx: &mut Ctx<Num>) {
            if ctx.me() == NodeId(0) {
                ctx.set_timer(MS, TimerId(0));
            }
        }
        fn on_message(&mut self, _: &mut Ctx<Num>, _: NodeId, m: Num) {
            self.got.lock().unwrap().push(m.0);
        }
        fn on_timer(&mut self, ctx: &mut Ctx<Num>, _: TimerId) {
            self.next += 1;
            ctx.send(NodeId(1), Num(self.next));
            ctx.set_timer(MS, TimerId(0));
        }
    }

    /// What node 1 received in a 10 ms run whose messages go through `wire`.
    fn counted(wire: Wire<'_, Num>) -> (Result<(), SimError>, Vec<u64>) {
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let factory = |g: std::sync::Arc<std::sync::Mutex<Vec<u64>>>| -> NodeFactory<Num> {
            Box::new(move |_| {
                Box::new(Counter {
                    next: 0,
                    got: g.clone(),
                }) as Box<dyn Node<Num>>
            })
        };
        let dep = Deployment {
            topology: std::sync::Arc::new(tessera_core::topology::Topology::new(2, 1, 0)),
            factories: vec![factory(got.clone()), factory(got.clone())],
            seed: 1,
            duration: 10 * MS,
        };
        let out = run_wire(dep, &SimConfig::default(), Some(wire)).map(|_| ());
        let got = got.lock().unwrap().clone();
        (out, got)
    }

    #[test]
    fn messages_go_through_the_wire_and_the_first_refused_one_ends_the_run() {
        // The receiver gets the wire's copy, not the sent value.
        let (out, got) = counted(&|m: &Num| Ok(Num(m.0 * 10)));
        assert!(out.is_ok());
        assert_eq!(got[..3], [10, 20, 30]);
        // A message the receiver's codec would refuse stops the run there,
        // naming it; nothing after it is delivered.
        let (out, got) = counted(&|m: &Num| {
            if m.0 == 4 {
                Err("four does not decode".into())
            } else {
                Ok(m.clone())
            }
        });
        let e = out.expect_err("refused");
        assert!(
            matches!(&e, SimError::Wire { from: 0, to: 1, error, .. } if error == "four does not decode"),
            "{e}"
        );
        assert_eq!(got, [1, 2, 3]);
    }

    /// Ticks of a 10 ms run of a node settled after `busy` ticks.
    fn ticks(busy: u64, settle: Time) -> (u64, Time) {
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let s = seen.clone();
        let dep = Deployment {
            topology: std::sync::Arc::new(tessera_core::topology::Topology::new(1, 1, 0)),
            factories: vec![Box::new(move |_| {
                Box::new(Ticker {
                    busy,
                    seen: s.clone(),
                }) as Box<dyn Node<NoMsg>>
            })],
            seed: 1,
            duration: 10 * MS,
        };
        let cfg = SimConfig {
            settle,
            ..SimConfig::default()
        };
        let out = run(dep, &cfg).expect("valid");
        (seen.load(std::sync::atomic::Ordering::Relaxed), out.elapsed)
    }

    #[test]
    fn a_run_goes_on_until_its_nodes_settle_within_the_bound() {
        // Without settling the run ends at its duration.
        assert_eq!(ticks(50, 0).0, 10);
        // Settled already: the run still ends at its duration.
        assert_eq!(ticks(5, 100 * MS).0, 10);
        // Goes on until the node settles, looking once per millisecond.
        let (seen, elapsed) = ticks(50, 100 * MS);
        assert!((50..=51).contains(&seen), "{seen}");
        assert!((50 * MS..=52 * MS).contains(&elapsed), "{elapsed}");
        // Never settles: stops at the bound.
        let (seen, elapsed) = ticks(u64::MAX, 30 * MS);
        assert_eq!(seen, 40);
        assert!(elapsed <= 40 * MS, "{elapsed}");
    }

    /// Writes a log record per tick and notes when each became durable.
    struct Logger {
        next: u64,
        durable: std::sync::Arc<std::sync::Mutex<Vec<(u64, Time)>>>,
    }

    impl Node<NoMsg> for Logger {
        fn on_start(&mut self, ctx: &mut Ctx<NoMsg>) {
            ctx.set_timer(MS, TimerId(0));
        }
        fn on_message(&mut self, _: &mut Ctx<NoMsg>, _: NodeId, _: NoMsg) {}
        fn on_timer(&mut self, ctx: &mut Ctx<NoMsg>, _: TimerId) {
            self.next += 1;
            ctx.persist(self.next, bytes::Bytes::from_static(b"record"));
            ctx.set_timer(MS, TimerId(0));
        }
        fn on_persisted(&mut self, ctx: &mut Ctx<NoMsg>, token: u64) {
            self.durable.lock().unwrap().push((token, ctx.now()));
        }
        fn snapshot(&self) -> Option<bytes::Bytes> {
            Some(format!("upto {}", self.next).into())
        }
    }

    /// A 10 ms run of one [`Logger`] with `fsync`: the records made durable
    /// with when, the events and the node's CPU time.
    fn logged(fsync: Time) -> (Vec<(u64, Time)>, u64, Time) {
        let durable = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let d = durable.clone();
        let dep = Deployment {
            topology: std::sync::Arc::new(tessera_core::topology::Topology::new(1, 1, 0)),
            factories: vec![Box::new(move |_| {
                Box::new(Logger {
                    next: 0,
                    durable: d.clone(),
                }) as Box<dyn Node<NoMsg>>
            })],
            seed: 1,
            duration: 10 * MS,
        };
        let cfg = SimConfig {
            fsync,
            ..SimConfig::default()
        };
        let out = run(dep, &cfg).expect("valid");
        let durable = durable.lock().unwrap().clone();
        (durable, out.events, out.busy[0])
    }

    /// `fsync` 0 is no log as far as time goes: each record is durable
    /// within the step that wrote it, with no completion event and no CPU;
    /// any other flush time still completes as an event of its own.
    #[test]
    fn a_flush_that_takes_no_time_is_no_event() {
        let cpu = SimConfig::default().server_cpu;
        let (durable, events, busy) = logged(0);
        let ticks: Vec<(u64, Time)> = (1..=9).map(|n| (n, n * MS + cpu)).collect();
        assert_eq!(durable[..9], ticks[..]);
        assert_eq!(events, durable.len() as u64);
        // The start costs a step too, not counted as an event.
        assert_eq!(busy, (events + 1) * cpu);
        let (slow, slow_events, slow_busy) = logged(US);
        assert_eq!(
            slow[..9],
            ticks.iter().map(|&(n, t)| (n, t + US)).collect::<Vec<_>>()[..]
        );
        // The same ticks, plus one completion per record durable in time.
        assert_eq!(slow_events, events + slow.len() as u64);
        assert_eq!(slow_busy, (slow_events + 1) * cpu);
    }

    /// A node a crash is planned for comes back with every record it made
    /// durable; the log is kept only for such nodes (`Disk::for_restarts`),
    /// so this fails if the crashed node's log were dropped too.
    #[test]
    fn a_restarted_node_recovers_its_durable_records() {
        let recovered = crashed_logger(0, 0);
        let lens: Vec<usize> = recovered.iter().map(Vec::len).collect();
        // The first start recovers nothing; the restart the five records
        // of the ticks at 1..=5 ms.
        assert_eq!(lens, [0, 5]);
    }

    /// A 10 ms run of one [`Logger`] with `fsync` and `checkpoint_bytes`,
    /// crashed at 5.5 ms and restarted 1 ms later: what each start
    /// recovered.
    fn crashed_logger(fsync: Time, checkpoint_bytes: u64) -> Vec<Vec<bytes::Bytes>> {
        let recovered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let r = recovered.clone();
        let dep = Deployment {
            topology: std::sync::Arc::new(tessera_core::topology::Topology::new(1, 1, 0)),
            factories: vec![Box::new(move |restart: Restart| {
                r.lock().unwrap().push(restart.recovered.clone());
                Box::new(Logger {
                    next: 0,
                    durable: std::sync::Arc::default(),
                }) as Box<dyn Node<NoMsg>>
            })],
            seed: 1,
            duration: 10 * MS,
        };
        let cfg = SimConfig {
            fsync,
            checkpoint_bytes,
            crashes: vec![crate::config::Crash {
                node: NodeId(0),
                at: 5 * MS + MS / 2,
                restart_after: Some(MS),
            }],
            ..SimConfig::default()
        };
        run(dep, &cfg).expect("valid");
        let r = recovered.lock().unwrap().clone();
        r
    }

    /// With [`SimConfig::checkpoint_bytes`] a restarted node recovers its
    /// last durable snapshot and the records after it, with or without
    /// flush latency; a checkpoint is durable only behind the records
    /// issued before it.
    #[test]
    fn a_checkpointed_log_restarts_from_its_snapshot() {
        for fsync in [0, US] {
            // Every third record of 6 bytes.
            let r = crashed_logger(fsync, 18);
            assert_eq!(r.len(), 2, "fsync {fsync}");
            assert!(r[0].is_empty());
            let want: Vec<&[u8]> = vec![b"upto 3", b"record", b"record"];
            let got: Vec<&[u8]> = r[1].iter().map(|b| &b[..]).collect();
            assert_eq!(got, want, "fsync {fsync}");
        }
    }

    /// Node 2 sends one message to each other node at start; everyone
    /// records when messages arrive.
    struct Pinger {
        arrived: std::sync::Arc<std::sync::Mutex<Vec<(NodeId, Time)>>>,
        me: NodeId,
    }

    impl Node<NoMsg> for Pinger {
        fn on_start(&mut self, ctx: &mut Ctx<NoMsg>) {
            if self.me == NodeId(2) {
                ctx.send(NodeId(0), NoMsg);
                ctx.send(NodeId(1), NoMsg);
            }
        }
        fn on_message(&mut self, ctx: &mut Ctx<NoMsg>, _: NodeId, _: NoMsg) {
            self.arrived.lock().unwrap().push((self.me, ctx.now()));
        }
        fn on_timer(&mut self, _: &mut Ctx<NoMsg>, _: TimerId) {}
    }

    /// Node 2, a client host co-located with shard 0's primary (node 0),
    /// pings node 0 and the backup (node 1) under `cfg`: the arrivals and
    /// the outcome.
    fn ping_colocated(cfg: &SimConfig) -> (Vec<(NodeId, Time)>, RunOutput<NoMsg>) {
        let arrived = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let topology = tessera_core::topology::Topology::new(1, 2, 1).colocate_clients();
        assert_eq!(topology.machine(NodeId(2)), NodeId(0));
        assert_eq!(topology.machine(NodeId(1)), NodeId(1));
        let factories = (0..3)
            .map(|i| {
                let arrived = arrived.clone();
                Box::new(move |_: Restart| {
                    Box::new(Pinger {
                        arrived: arrived.clone(),
                        me: NodeId(i),
                    }) as Box<dyn Node<NoMsg>>
                }) as NodeFactory<NoMsg>
            })
            .collect();
        let dep = Deployment {
            topology: std::sync::Arc::new(topology),
            factories,
            seed: 1,
            duration: MS,
        };
        let out = run(dep, cfg).expect("valid");
        let arrived = arrived.lock().unwrap().clone();
        (arrived, out)
    }

    /// A client host co-located with its shard's primary reaches it at
    /// once, past any loss, and not as a network message; the backup, on
    /// another machine, is lost to a network that loses everything.
    #[test]
    fn colocated_nodes_talk_without_the_network() {
        let cfg = SimConfig {
            loss: 1.0,
            ..SimConfig::default()
        };
        let (arrived, out) = ping_colocated(&cfg);
        // Sent at `client_cpu`, when the client host's start step ends;
        // handled once the primary's own start step is done.
        assert!(cfg.client_cpu < cfg.server_cpu);
        assert_eq!(arrived, vec![(NodeId(0), cfg.server_cpu)]);
        assert_eq!((out.net.messages, out.net.local_messages), (1, 1));
        // By default a local message costs the primary a full event.
        assert_eq!(out.busy[0], 2 * cfg.server_cpu);
    }

    /// `local_cpu` prices only a message from the server's own machine:
    /// the primary pays it for the co-located host's ping, and its own
    /// start step (and every other node) stays at the per-event cost.
    #[test]
    fn a_local_message_costs_local_cpu() {
        let cfg = SimConfig {
            local_cpu: Some(US),
            ..SimConfig::default()
        };
        let (arrived, out) = ping_colocated(&cfg);
        assert_eq!(arrived.len(), 2);
        assert_eq!(out.busy[0], cfg.server_cpu + US);
        assert_eq!(out.busy[1], 2 * cfg.server_cpu);
        assert_eq!(out.busy[2], cfg.client_cpu);
    }

    /// `byte_cpu_ps` prices every byte at both ends: node 0 pays for each
    /// 8-byte number it sends, node 1 for each it handles, on top of the
    /// per-event cost they pay either way.
    #[test]
    fn bytes_cost_cpu_where_they_are_sent_and_received() {
        let busy = |cfg: &SimConfig| {
            let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let factories = (0..2)
                .map(|_| {
                    let got = got.clone();
                    Box::new(move |_: Restart| {
                        Box::new(Counter {
                            next: 0,
                            got: got.clone(),
                        }) as Box<dyn Node<Num>>
                    }) as NodeFactory<Num>
                })
                .collect();
            let dep = Deployment {
                topology: std::sync::Arc::new(tessera_core::topology::Topology::new(2, 1, 0)),
                factories,
                seed: 1,
                duration: 10 * MS,
            };
            let out = run(dep, cfg).expect("valid");
            let got = got.lock().unwrap();
            (out.busy.clone(), got.len() as u64, got.last().copied())
        };
        let (plain, received, last) = busy(&SimConfig::default());
        let priced_cfg = SimConfig {
            byte_cpu_ps: 1_000_000,
            ..SimConfig::default()
        };
        let (priced, received_priced, last_priced) = busy(&priced_cfg);
        assert!(received >= 5, "{received}");
        assert_eq!((received, last), (received_priced, last_priced));
        let sent = priced[0] - plain[0];
        assert!(sent >= received * 8 * US && sent % (8 * US) == 0, "{sent}");
        assert_eq!(priced[1] - plain[1], received * 8 * US);
    }

    #[test]
    fn one_node_can_drift_beyond_the_bound() {
        let cfg = SimConfig {
            drift_ppm: 1_000,
            drift_node: Some((3, -900_000)),
            ..SimConfig::default()
        };
        assert_eq!(drift(&cfg, 7, 3), -900_000);
        assert!((0..3).all(|i| drift(&cfg, 7, i).abs() <= 1_000));
        assert_eq!(local_time(1_000_000, -900_000), 100_000);
        let bad = SimConfig {
            drift_node: Some((0, -1_000_000)),
            ..SimConfig::default()
        };
        assert!(matches!(
            bad.validate(),
            Err(SimConfigError::DriftNode { .. })
        ));
    }
}
