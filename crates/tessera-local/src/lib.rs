//! tessera-local: the embedded real cluster.
//!
//! The `local` runtime runs a [`Deployment`] for real: every node is a
//! sans-IO state machine ([`Node`]) stepped on a real thread, messages travel
//! through in-memory queues and time is the machine's monotonic clock. It is
//! the runtime that measures what a protocol costs in CPU, so its own
//! overhead has to stay at a few hundred nanoseconds per message (the target
//! is ≥ 400k transactions/s of a 3-round-trip OCC protocol on 2 cores).
//!
//! # Design
//!
//! **Thread per core, shared nothing.** [`LocalConfig::placement`] maps every
//! node to one of `workers` worker threads; a worker owns its nodes outright
//! (the factories run on the calling thread, worker by worker so that a
//! worker's nodes share no cache line with another's, then each
//! `Box<dyn Node>` moves to its worker) together with their RNGs, timers
//! and an event queue. No
//! lock, no atomic and no shared cache line is touched on the path of a
//! message between two nodes of the same worker: it is pushed onto the
//! worker's `VecDeque` and popped a little later.
//!
//! **Batching across workers.** A message for a node of another worker is
//! appended to a per-destination outbox, and an outbox travels as one
//! `Vec` through the destination's crossbeam channel. Outboxes are flushed
//! when the local queue drains, after every [`FLUSH_EVERY`] events (so that
//! the other workers are kept fed during a long burst), or when one reaches
//! [`BATCH_MAX`] messages. Batching is what makes
//! cross-worker messages cheap: on the development machine streaming single
//! messages through one channel moves ~12M msgs/s, batches of 64 move ~350M
//! msgs/s, and waking a sleeping thread costs ~17.6 µs — so a worker must
//! neither pay a channel operation per message nor put its peers to sleep
//! while they have work coming. Emptied batch vectors are kept in a small
//! per-worker pool and reused as outboxes, so steady state allocates
//! nothing.
//!
//! **Time.** `now` is nanoseconds since one [`Instant`] taken at the start of
//! the run and shared by all workers, so start and end times that client
//! hosts record on different threads are comparable (the strict
//! serializability checker orders transactions by them). Reading the clock
//! costs ~20 ns, so it is read once per *wave* (and again every
//! [`FLUSH_EVERY`] events within one): the events already queued when the
//! wave's clock is read are processed with that reading (or a later one);
//! events they create wait for the next wave and a fresh reading. Hence a
//! step's `now` is never earlier than the real time of anything that
//! causally precedes it (a transaction's recorded end is after its last
//! server step, its recorded start before its first message leaves), which
//! is what keeps real-time order sound for the checker, and it is stale by
//! at most [`FLUSH_EVERY`] steps. Waves are capped at [`WAVE_MAX`] events so
//! the channel and the timers are looked at regularly.
//!
//! **Timers.** Each worker has a binary heap of timers (earliest deadline
//! first, ties in the order they were set). Due timers fire between waves,
//! never before their deadline.
//!
//! **Persist.** This runtime has no disk yet: a [`Effect::Persist`]
//! completes at once, by queueing the `on_persisted` call as a local event
//! behind the events already queued. The record is therefore "durable"
//! before anything the node sends from `on_persisted`. A real write-ahead
//! log (and crash/restart) is a later issue; until then `Restart::recovered`
//! is always empty and the incarnation always 0.
//!
//! **Idle.** A worker with nothing queued and no due timer polls its
//! channel with `try_recv` for about the cost of a wake-up ([`SPIN_NS`],
//! only right after doing work and only when there are no more workers than
//! CPUs), yielding its core between polls after the first few rounds
//! (if the machine is oversubscribed, the worker it waits for may be queued
//! behind it on the same core: with a CPU hog beside a 2-worker run,
//! yielding doubled the cross-worker rate). It then blocks in
//! `recv_timeout` until its next timer, the end of the run, or
//! [`IDLE_CAP_NS`]; after a timeout it blocks again without spinning. Idle
//! workers thus leave the CPU to busy ones, and busy peers rarely pay a
//! wake-up.
//!
//! **Ceiling.** `cargo run --release -p tessera-local --example null_rate`
//! measures null-message rates (nodes that only answer). On the 2-core
//! development VM, quiet: one worker moves ~35M msgs/s with 64 ping-pong
//! pairs in flight (~10M/s for a single pair, where every message pays its
//! own clock read and loop turn); two workers with all traffic crossing move
//! ~24–30M msgs/s with 64 pairs in flight, and a single cross-worker pair
//! ~1.4M msgs/s (a hop is ~1.4 µs of cache-line transfers: latency, not
//! CPU); two workers with their own pairs ~49M msgs/s. Other load on the
//! machine changes these numbers by several times.
//!
//! **Stop.** Each worker compares its own clock against the duration at
//! every wave and stops processing there; it then calls `take_report` on its
//! nodes and hands them back. Messages still queued are dropped.
//!
//! **Settle.** A checked run ([`LocalConfig::settle`] > 0) instead goes on
//! past the duration until every node is settled ([`Node::settled`]: for a
//! client host, no attempt in flight) or the bound is reached, as the
//! simulator does, so that the end-of-run checks (TPC-C's consistency
//! conditions, replica convergence) read stores with nothing half done.
//! Whether *all* nodes are settled is a global question on threads that
//! keep moving messages; rather than a termination-detection protocol the
//! workers answer it in a *settle round* every [`SETTLE_LOOK_NS`]: each
//! flushes its outboxes and waits at a rendezvous, so that afterwards no
//! message is moving and every one is in some worker's queue or channel;
//! each then votes "unsettled" if it has queued or received events or an
//! unsettled node, and after a second rendezvous all stop together if
//! nobody did. The rounds cost nothing before the duration and nothing
//! at all in an unchecked run (settle 0 keeps the plain stop).
//!
//! **Failures.** A message to a node outside the deployment is counted,
//! dropped and warned about once. A panic inside a node ends its worker; the
//! worker raises a shared abort flag on its way out so the others stop too,
//! and [`run`] returns [`LocalError::WorkerPanicked`] instead of hanging.
//! [`Effect::Done`] and [`Effect::Finished`] are consumed by client hosts and must never reach a
//! runtime: debug builds assert, release builds ignore them.

use crossbeam_channel::{Receiver, Sender};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tessera_core::node::{NodeReport, WireSize};
use tessera_core::runtime::{node_seed, Deployment, NetCounters, Restart, RunOutput};
use tessera_core::topology::{Role, Topology};
use tessera_core::{Ctx, Effect, Node, NodeId, Time, TimerId};

/// Events run with one clock reading at most.
pub const WAVE_MAX: usize = 128;
/// Events after which the cross-worker outboxes are flushed even if the
/// local queue is not empty.
pub const FLUSH_EVERY: usize = 32;
/// Messages in one outbox that trigger its flush.
pub const BATCH_MAX: usize = 32;

/// How long an idle worker polls its channel before blocking (about the
/// cost of waking a sleeping thread, the ski-rental break-even).
pub const SPIN_NS: Time = 20_000;
/// Spin rounds (64 polls each) before an idle worker starts yielding its
/// core between polls.
const YIELD_AFTER: u32 = 4;
/// Longest a worker blocks without looking at the abort flag.
pub const IDLE_CAP_NS: Time = 1_000_000;
/// Emptied batch vectors a worker keeps for reuse.
const POOL_MAX: usize = 64;
/// How often, past the duration of a settling run, the workers hold a
/// settle round (the simulator looks once per simulated millisecond too).
pub const SETTLE_LOOK_NS: Time = 1_000_000;

/// How the cluster is laid out on threads.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// Number of worker threads (one per core is the intended use).
    pub workers: usize,
    /// Worker index per [`NodeId`].
    pub placement: Vec<usize>,
    /// How much longer than its duration the run may go on until every
    /// node is settled (module docs, *Settle*); 0 stops at the duration.
    pub settle: Time,
}

impl LocalConfig {
    /// `workers` workers with [`default_placement`].
    pub fn new(topology: &Topology, workers: usize) -> Self {
        LocalConfig {
            workers,
            placement: default_placement(topology, workers),
            settle: 0,
        }
    }
}

/// Shard `s`'s servers on worker `s % workers`, client host `h` on worker
/// `h % workers`, switch `i` on worker `i % workers`. (With `workers == 0` everything goes to worker 0, which
/// [`run`] then rejects.)
pub fn default_placement(topology: &Topology, workers: usize) -> Vec<usize> {
    let w = workers.max(1);
    topology
        .nodes
        .iter()
        .map(|n| match n.role {
            Role::Server { shard, .. } => shard.0 as usize % w,
            Role::Client { host } => host as usize % w,
            Role::Switch { index } => index as usize % w,
        })
        .collect()
}

/// Why a local run could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("the local runtime needs at least one worker")]
    NoWorkers,
    #[error("the deployment has {factories} node factories but its topology has {nodes} nodes")]
    FactoryCount { factories: usize, nodes: usize },
    #[error("the placement has {got} entries but the deployment has {expected} nodes")]
    PlacementLength { expected: usize, got: usize },
    #[error(
        "the placement puts node {node:?} on worker {worker}, but there are only {workers} workers"
    )]
    PlacementWorker {
        node: NodeId,
        worker: usize,
        workers: usize,
    },
    #[error("could not spawn worker thread {worker}: {source}")]
    Spawn {
        worker: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("worker {worker} panicked: {message}")]
    WorkerPanicked { worker: usize, message: String },
}

/// Run `dep` on `cfg.workers` threads for `dep.duration` nanoseconds of
/// wall time (and up to `cfg.settle` more until every node is settled).
pub fn run<M: Send + WireSize + 'static>(
    dep: Deployment<M>,
    cfg: &LocalConfig,
) -> Result<RunOutput<M>, LocalError> {
    let Deployment {
        topology,
        mut factories,
        seed,
        duration,
    } = dep;
    let workers = cfg.workers;
    if workers == 0 {
        return Err(LocalError::NoWorkers);
    }
    let n = factories.len();
    if n != topology.nodes.len() {
        return Err(LocalError::FactoryCount {
            factories: n,
            nodes: topology.nodes.len(),
        });
    }
    if cfg.placement.len() != n {
        return Err(LocalError::PlacementLength {
            expected: n,
            got: cfg.placement.len(),
        });
    }
    if let Some((i, &w)) = cfg
        .placement
        .iter()
        .enumerate()
        .find(|(_, &w)| w >= workers)
    {
        return Err(LocalError::PlacementWorker {
            node: NodeId(i as u32),
            worker: w,
            workers,
        });
    }

    // Build every node here, then hand each to its worker. Nodes are built
    // worker by worker so that each worker's nodes sit together in the heap:
    // interleaved, two workers' nodes share cache lines and every counter a
    // node bumps bounces between cores (the null-rate example's 64
    // same-worker pairs on 2 workers ran markedly slower interleaved).
    let mut slots: Vec<Vec<Slot<M>>> = (0..workers).map(|_| Vec::new()).collect();
    let mut route = vec![
        Route {
            worker: 0,
            local: 0
        };
        n
    ];
    for (w, worker_slots) in slots.iter_mut().enumerate() {
        for (i, factory) in factories.iter_mut().enumerate() {
            if cfg.placement[i] != w {
                continue;
            }
            let id = NodeId(i as u32);
            let node = factory(Restart {
                incarnation: 0,
                recovered: Vec::new(),
                durable: false,
            });
            route[i] = Route {
                worker: w as u32,
                local: worker_slots.len() as u32,
            };
            worker_slots.push(Slot {
                id,
                node,
                rng: SmallRng::seed_from_u64(node_seed(seed, id, 0)),
            });
        }
    }
    drop(factories);
    let route: Arc<[Route]> = route.into();

    let (txs, rxs): (Vec<_>, Vec<_>) = (0..workers)
        .map(|_| crossbeam_channel::unbounded::<Batch<M>>())
        .unzip();
    let abort = Arc::new(AtomicBool::new(false));
    let rendezvous = Arc::new(Rendezvous::new(workers));
    let warned = Arc::new(AtomicBool::new(false));
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    let spin_ns = if workers <= cpus { SPIN_NS } else { 0 };

    let origin = Instant::now();
    let mut handles: Vec<JoinHandle<WorkerOut<M>>> = Vec::with_capacity(workers);
    for (index, (nodes, rx)) in slots.into_iter().zip(rxs).enumerate() {
        let worker = Worker {
            index,
            origin,
            deadline: duration,
            settle_by: duration.saturating_add(cfg.settle),
            next_look: duration,
            rendezvous: rendezvous.clone(),
            nodes,
            route: route.clone(),
            queue: VecDeque::with_capacity(1024),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            effects: Vec::with_capacity(16),
            rx,
            txs: txs.clone(),
            outbox: (0..workers).map(|_| Vec::new()).collect(),
            out_pending: 0,
            pool: Vec::new(),
            abort: abort.clone(),
            warned: warned.clone(),
            spin_ns,
            net: NetCounters::default(),
            events: 0,
            dropped: 0,
        };
        let spawned = std::thread::Builder::new()
            .name(format!("tessera-local-{index}"))
            .spawn(move || worker.run());
        match spawned {
            Ok(h) => handles.push(h),
            Err(source) => {
                abort.store(true, Ordering::Relaxed);
                for h in handles {
                    let _ = h.join();
                }
                return Err(LocalError::Spawn {
                    worker: index,
                    source,
                });
            }
        }
    }
    drop(txs);

    let mut nodes: Vec<Option<Box<dyn Node<M>>>> = (0..n).map(|_| None).collect();
    let mut reports: Vec<Option<NodeReport>> = (0..n).map(|_| None).collect();
    let mut net = NetCounters::default();
    let mut events = 0;
    let mut dropped = 0;
    let mut elapsed = 0;
    let mut panicked = None;
    for (worker, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(out) => {
                for (id, node, report) in out.nodes {
                    nodes[id.0 as usize] = Some(node);
                    reports[id.0 as usize] = Some(report);
                }
                net.messages += out.net.messages;
                net.bytes += out.net.bytes;
                events += out.events;
                dropped += out.dropped;
                elapsed = elapsed.max(out.stopped_at);
            }
            Err(payload) => {
                if panicked.is_none() {
                    panicked = Some(LocalError::WorkerPanicked {
                        worker,
                        message: panic_message(payload.as_ref()),
                    });
                }
            }
        }
    }
    if let Some(e) = panicked {
        return Err(e);
    }
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "local: dropped messages to nodes outside the deployment"
        );
    }
    Ok(RunOutput {
        reports: reports
            .into_iter()
            .map(|r| r.expect("every node is on a worker"))
            .collect(),
        nodes: nodes
            .into_iter()
            .map(|n| n.expect("every node is on a worker"))
            .collect(),
        net,
        events,
        busy: Vec::new(),
        elapsed,
    })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Where a node lives: its worker and its index among that worker's nodes.
#[derive(Clone, Copy)]
struct Route {
    worker: u32,
    local: u32,
}

/// A queued event for a node of this worker (`to` is the local index).
enum Event<M> {
    Message { to: u32, from: NodeId, msg: M },
    Persisted { to: u32, token: u64 },
}

/// What travels through a worker's channel.
type Batch<M> = Vec<Event<M>>;

struct Slot<M> {
    id: NodeId,
    node: Box<dyn Node<M>>,
    rng: SmallRng,
}

struct TimerEntry {
    at: Time,
    seq: u64,
    node: u32,
    id: TimerId,
}

impl PartialEq for TimerEntry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for TimerEntry {}
impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for TimerEntry {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest
    /// deadline first, and among equal deadlines the first one set.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

struct WorkerOut<M> {
    nodes: Vec<(NodeId, Box<dyn Node<M>>, NodeReport)>,
    net: NetCounters,
    events: u64,
    dropped: u64,
    stopped_at: Time,
}

/// Raises the abort flag if the worker unwinds, so the others stop early.
struct AbortOnPanic(Arc<AtomicBool>);

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Where the workers of a settling run meet (module docs, *Settle*): a
/// reusable barrier that gives up when the run aborts, and the votes of
/// the rounds, one counter per round parity so that a round's count is
/// reset while nobody reads it.
struct Rendezvous {
    workers: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    unsettled: [AtomicUsize; 2],
}

impl Rendezvous {
    fn new(workers: usize) -> Self {
        Rendezvous {
            workers,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            unsettled: [AtomicUsize::new(0), AtomicUsize::new(0)],
        }
    }

    /// Wait until every worker has arrived. False if the run aborted
    /// meanwhile (a panicked worker never arrives).
    fn wait(&self, abort: &AtomicBool) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.workers {
            // Reset before releasing: a released worker's next arrival
            // must count in the next generation.
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::AcqRel);
            return true;
        }
        let mut polls = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if abort.load(Ordering::Relaxed) {
                return false;
            }
            polls += 1;
            if polls < 64 {
                std::hint::spin_loop();
            } else if polls < 4096 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        true
    }
}

struct Worker<M> {
    index: usize,
    origin: Instant,
    deadline: Time,
    /// The latest a settling run goes on to (`deadline` if it does not).
    settle_by: Time,
    /// When the worker next stops (at `deadline`) or holds a settle round.
    next_look: Time,
    rendezvous: Arc<Rendezvous>,
    nodes: Vec<Slot<M>>,
    route: Arc<[Route]>,
    queue: VecDeque<Event<M>>,
    timers: BinaryHeap<TimerEntry>,
    timer_seq: u64,
    effects: Vec<Effect<M>>,
    rx: Receiver<Batch<M>>,
    /// One sender per worker, this one's included (so `rx` never
    /// disconnects).
    txs: Vec<Sender<Batch<M>>>,
    outbox: Vec<Batch<M>>,
    /// Messages buffered in all outboxes together.
    out_pending: usize,
    pool: Vec<Batch<M>>,
    abort: Arc<AtomicBool>,
    warned: Arc<AtomicBool>,
    spin_ns: Time,
    net: NetCounters,
    events: u64,
    dropped: u64,
}

impl<M: Send + WireSize + 'static> Worker<M> {
    #[inline]
    fn clock(&self) -> Time {
        self.origin.elapsed().as_nanos() as Time
    }

    fn run(mut self) -> WorkerOut<M> {
        let _guard = AbortOnPanic(self.abort.clone());
        let now = self.clock();
        for i in 0..self.nodes.len() {
            self.step(i, now, |node, ctx| node.on_start(ctx));
        }
        let mut since_flush = 0;
        let mut spin = true;
        let mut round = 0;
        let stopped_at = loop {
            while let Ok(batch) = self.rx.try_recv() {
                self.absorb(batch);
            }
            let mut now = self.clock();
            if self.abort.load(Ordering::Relaxed) {
                break now;
            }
            if now >= self.next_look {
                if self.settle_by == self.deadline {
                    break now;
                }
                if self.settle_round(round) {
                    // Read after the vote: a worker that voted "settled"
                    // because its clock had passed `settle_by` must not
                    // report a stop time from before that reading.
                    break self.clock();
                }
                round += 1;
                now = self.clock();
                self.next_look = now + SETTLE_LOOK_NS;
            }
            // Only events queued before `now` was read run in this wave.
            let wave = self.queue.len().min(WAVE_MAX);
            let mut fired = 0;
            while fired < WAVE_MAX {
                match self.timers.peek() {
                    Some(t) if t.at <= now => {
                        let t = self.timers.pop().expect("peeked");
                        self.step(t.node as usize, now, |node, ctx| node.on_timer(ctx, t.id));
                        fired += 1;
                    }
                    _ => break,
                }
            }
            for _ in 0..wave {
                match self.queue.pop_front().expect("counted") {
                    Event::Message { to, from, msg } => self.step(to as usize, now, |node, ctx| {
                        node.on_message(ctx, from, msg)
                    }),
                    Event::Persisted { to, token } => {
                        self.step(to as usize, now, |node, ctx| node.on_persisted(ctx, token))
                    }
                }
                since_flush += 1;
                if since_flush >= FLUSH_EVERY {
                    // Keep the other workers fed while this wave goes on,
                    // and keep `now` fresh (a later reading is still after
                    // every event of the wave was queued).
                    self.flush();
                    since_flush = 0;
                    now = self.clock();
                }
            }
            let worked = wave + fired;
            self.events += worked as u64;
            if self.queue.is_empty() {
                self.flush();
                since_flush = 0;
            }
            if worked > 0 || !self.queue.is_empty() {
                spin = true;
                continue;
            }
            spin = self.idle(now, spin);
        };

        let nodes = self
            .nodes
            .into_iter()
            .map(|mut s| {
                let report = s.node.take_report();
                (s.id, s.node, report)
            })
            .collect();
        WorkerOut {
            nodes,
            net: self.net,
            events: self.events,
            dropped: self.dropped,
            stopped_at,
        }
    }

    /// One settle round (module docs, *Settle*); true if the run stops.
    /// Every worker holds its rounds in the same sequence, so the `round`th
    /// calls of all workers meet, and all decide alike.
    fn settle_round(&mut self, round: usize) -> bool {
        self.flush();
        let rv = self.rendezvous.clone();
        if !rv.wait(&self.abort) {
            return true;
        }
        // Nothing moves now: every message is in a queue or a channel.
        let settled = self.clock() >= self.settle_by
            || (self.queue.is_empty()
                && self.rx.is_empty()
                && self.nodes.iter().all(|s| s.node.settled()));
        let votes = &rv.unsettled[round % 2];
        if !settled {
            votes.fetch_add(1, Ordering::Relaxed);
        }
        if !rv.wait(&self.abort) {
            return true;
        }
        let stop = votes.load(Ordering::Relaxed) == 0;
        if self.index == 0 {
            // Nobody reads the other counter before the next round's first
            // rendezvous, which worker 0 reaches only after this.
            rv.unsettled[(round + 1) % 2].store(0, Ordering::Relaxed);
        }
        stop
    }

    /// Nothing to do: poll the channel for a while if we were just busy,
    /// then block until a message, the next timer, the end (or the next
    /// settle round) or the cap. Returns whether a batch arrived.
    fn idle(&mut self, now: Time, spin: bool) -> bool {
        let wake = self
            .timers
            .peek()
            .map_or(self.next_look, |t| t.at.min(self.next_look));
        if spin && self.spin_ns > 0 {
            let until = wake.min(now + self.spin_ns);
            let mut rounds = 0u32;
            loop {
                for _ in 0..64 {
                    if let Ok(batch) = self.rx.try_recv() {
                        self.absorb(batch);
                        return true;
                    }
                    std::hint::spin_loop();
                }
                if self.clock() >= until {
                    break;
                }
                rounds += 1;
                if rounds >= YIELD_AFTER {
                    // If another thread is runnable on this core (the worker
                    // we wait for, when cores are oversubscribed), let it run.
                    std::thread::yield_now();
                }
            }
        }
        let now = self.clock();
        if now >= wake {
            return false;
        }
        let wait = (wake - now).min(IDLE_CAP_NS);
        match self.rx.recv_timeout(Duration::from_nanos(wait)) {
            Ok(batch) => {
                self.absorb(batch);
                true
            }
            Err(_) => false,
        }
    }

    #[inline]
    fn absorb(&mut self, mut batch: Batch<M>) {
        self.queue.extend(batch.drain(..));
        if self.pool.len() < POOL_MAX {
            self.pool.push(batch);
        }
    }

    /// Step node `local` with `f` at `now`, then carry out its effects.
    #[inline(always)]
    fn step(&mut self, local: usize, now: Time, f: impl FnOnce(&mut dyn Node<M>, &mut Ctx<M>)) {
        let slot = &mut self.nodes[local];
        let me = slot.id;
        {
            let mut ctx = Ctx::new(now, me, &mut slot.rng, &mut self.effects);
            f(slot.node.as_mut(), &mut ctx);
        }
        if !self.effects.is_empty() {
            self.dispatch(local as u32, me);
        }
    }

    fn dispatch(&mut self, local: u32, me: NodeId) {
        let mut effects = std::mem::take(&mut self.effects);
        for effect in effects.drain(..) {
            match effect {
                Effect::Send { to, msg } => {
                    self.net.messages += 1;
                    self.net.bytes += msg.wire_size() as u64;
                    match self.route.get(to.0 as usize) {
                        Some(r) if r.worker as usize == self.index => {
                            self.queue.push_back(Event::Message {
                                to: r.local,
                                from: me,
                                msg,
                            });
                        }
                        Some(r) => {
                            let w = r.worker as usize;
                            let out = &mut self.outbox[w];
                            out.push(Event::Message {
                                to: r.local,
                                from: me,
                                msg,
                            });
                            self.out_pending += 1;
                            if out.len() >= BATCH_MAX {
                                self.flush_one(w);
                            }
                        }
                        None => self.drop_unknown(me, to),
                    }
                }
                Effect::Timer { at, id } => {
                    self.timer_seq += 1;
                    self.timers.push(TimerEntry {
                        at,
                        seq: self.timer_seq,
                        node: local,
                        id,
                    });
                }
                Effect::Persist { token, record: _ } => {
                    // No WAL yet: durable at once, completed in order.
                    self.queue.push_back(Event::Persisted { to: local, token });
                }
                Effect::Charge { .. } => {}
                Effect::Done { txn, .. } | Effect::Finished { txn } => {
                    debug_assert!(
                        false,
                        "Effect::Done/Finished for {txn:?} reached the local runtime from {me:?}; \
                         client hosts must consume it"
                    );
                }
            }
        }
        self.effects = effects;
    }

    #[cold]
    fn drop_unknown(&mut self, from: NodeId, to: NodeId) {
        self.dropped += 1;
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                ?from,
                ?to,
                "local: message to a node outside the deployment dropped (warned once)"
            );
        }
    }

    fn flush(&mut self) {
        if self.out_pending == 0 {
            return;
        }
        for w in 0..self.outbox.len() {
            if !self.outbox[w].is_empty() {
                self.flush_one(w);
            }
        }
    }

    fn flush_one(&mut self, w: usize) {
        let fresh = self
            .pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BATCH_MAX));
        let batch = std::mem::replace(&mut self.outbox[w], fresh);
        self.out_pending -= batch.len();
        // Fails only if worker `w` is gone (it panicked): drop the batch.
        let _ = self.txs[w].send(batch);
    }
}

#[cfg(test)]
mod tests;
