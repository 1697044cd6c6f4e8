//! One process of a cluster: its nodes, their timers and logs, its sockets.
//!
//! The node loop owns the process's nodes (usually one server, or a bench
//! driver's client hosts) and steps them exactly as the `local` runtime
//! does: with a [`Ctx`] carrying monotonic real time (nanoseconds since the
//! process started) and the node's RNG seeded from the run seed, its id and
//! its incarnation. Messages between nodes of the same process never touch
//! a socket.
//!
//! **Persist.** A node with a log ([`LocalNode::wal`]) has its
//! `Effect::Persist` records appended to its [`tessera_wal::Wal`];
//! `on_persisted` runs only when the writer thread reports the record's
//! group durable. Without a log, a record completes at once (as on
//! `local`). At start the log is recovered and handed to the node's factory
//! as `Restart::recovered`; the incarnation is one more than the last one
//! recorded in the log directory. Once a node has appended
//! [`WalSettings::checkpoint_bytes`] since its last checkpoint, the loop asks
//! it for a [`Node::snapshot`] and checkpoints the log.

use crate::net::{self, Event, NetConfig, Out, Shared};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tessera_core::codec::{Codec, DecodeCx};
use tessera_core::node::NodeReport;
use tessera_core::runtime::{node_seed, NetCounters, NodeFactory, Restart};
use tessera_core::{Ctx, Effect, Node, NodeId, Time, TimerId};
use tessera_wal::{Wal, WalConfig};
use tokio::sync::mpsc;

/// A node's log settings.
#[derive(Clone, Debug)]
pub struct WalSettings {
    pub config: WalConfig,
    /// Checkpoint after this many bytes of records (0: never).
    pub checkpoint_bytes: u64,
}

/// A node this process runs.
pub struct LocalNode<M> {
    pub id: NodeId,
    pub factory: NodeFactory<M>,
    pub wal: Option<WalSettings>,
    /// Where the node's incarnation counter lives (one more at each start);
    /// without one the node always starts as incarnation 0.
    pub state_dir: Option<std::path::PathBuf>,
}

/// When the process stops.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// After this long (a bench driver).
    After(Duration),
    /// After `after`, once every node of the process is settled
    /// ([`Node::settled`]: a client host with no attempt in flight), or
    /// `grace` later at the most: a checked bench driver, whose checks need
    /// final stores with no transaction half done, as the simulator's
    /// `settle` gives them.
    AfterSettled { after: Duration, grace: Duration },
    /// At SIGINT or SIGTERM (a server).
    Signal,
    /// Once every sender of [`ProcessSpec::wakeups`] is gone: an embedded
    /// client host that lives as long as its application's handle.
    Released,
}

/// Wake-ups from outside the process's thread: fire timer `TimerId` on the
/// local node `NodeId` now. This is how an application that embeds a node
/// hands it work (the client library's requests) without the node reading
/// a clock or a channel on its own schedule: the node keeps its inbox and
/// the wake-up steps it through [`Node::on_timer`], like any timer.
pub type Wakeups = mpsc::UnboundedReceiver<(NodeId, TimerId)>;

/// Everything a process needs.
pub struct ProcessSpec<M> {
    pub nodes: Vec<LocalNode<M>>,
    pub listen: Option<SocketAddr>,
    /// Remote nodes this process dials, with their addresses.
    pub peers: Vec<(NodeId, SocketAddr)>,
    pub cx: DecodeCx,
    pub seed: u64,
    pub stop: Stop,
    pub net: NetConfig,
    /// Log a stats line this often.
    pub stats_every: Option<Duration>,
    /// Wake-ups from the embedding application (see [`Wakeups`]).
    pub wakeups: Option<Wakeups>,
}

/// What a process returns at its end.
pub struct ProcessOutput<M> {
    pub reports: Vec<(NodeId, NodeReport)>,
    pub nodes: Vec<(NodeId, Box<dyn Node<M>>)>,
    pub net: NetCounters,
    pub dropped: u64,
    /// Connections closed for bad input (malformed or oversized frames,
    /// foreign protocols or versions).
    pub rejected: u64,
    pub events: u64,
    pub elapsed: Time,
}

#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Wal(#[from] tessera_wal::WalError),
    #[error("{path} is locked by another running process")]
    Busy { path: String },
    #[error("cannot lock {path}: {source}")]
    Lock {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("incarnation file {path}: {source}")]
    Incarnation {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Run the process until `spec.stop`.
pub fn run_process<M: Codec + Send + 'static>(
    spec: ProcessSpec<M>,
) -> Result<ProcessOutput<M>, TcpError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(TcpError::Runtime)?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, run(spec))
}

/// The incarnation of a node whose log lives in `dir`: one more than the
/// last start's, recorded in `dir/incarnation`.
fn next_incarnation(dir: &Path) -> Result<u8, TcpError> {
    let path = dir.join("incarnation");
    let err = |source| TcpError::Incarnation {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let inc = match std::fs::read_to_string(&path) {
        Ok(s) => s.trim().parse::<u8>().map_or(0, |i| i.wrapping_add(1)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(err(e)),
    };
    std::fs::write(&path, inc.to_string()).map_err(err)?;
    Ok(inc)
}

/// An exclusive claim on a node's state directory, held while the value
/// lives (an advisory `flock` on `dir/lock`, released by the kernel even
/// when the process is killed). Two processes running the same client host
/// would mint the same transaction ids and each would look like the other's
/// restart to the servers, so a bench driver and every embedded client
/// claim their host first.
#[derive(Debug)]
pub struct Claim {
    _file: std::fs::File,
}

/// Claim `dir` for this process, or fail at once with [`TcpError::Busy`]
/// if another process holds it.
pub fn claim(dir: &Path) -> Result<Claim, TcpError> {
    use std::os::fd::AsRawFd;
    let path = dir.join("lock");
    let err = |source| TcpError::Lock {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(err)?;
    // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
            TcpError::Busy {
                path: path.display().to_string(),
            }
        } else {
            err(e)
        });
    }
    Ok(Claim { _file: file })
}

struct Slot<M> {
    id: NodeId,
    node: Box<dyn Node<M>>,
    rng: SmallRng,
    wal: Option<Wal>,
    checkpoint_bytes: u64,
    since_checkpoint: u64,
}

enum Local<M> {
    Message { from: NodeId, to: usize, msg: M },
    Persisted { to: usize, token: u64 },
}

/// A socket bound to `addr` (address reuse as `TcpListener::bind` sets
/// it), not yet listening.
fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpSocket> {
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    Ok(sock)
}

async fn run<M: Codec + Send + 'static>(
    spec: ProcessSpec<M>,
) -> Result<ProcessOutput<M>, TcpError> {
    let origin = Instant::now();
    // Bound now, so that a taken address fails at once, but listening only
    // once every node is built (a server loads its shard in its factory,
    // seconds for TPC-C): until then connections are refused, so `cluster
    // up` and the dialers wait for a server that can answer instead of
    // queueing seconds of requests (and retransmissions) in its backlog.
    let socket = match spec.listen {
        Some(addr) => Some(bind(addr).map_err(|source| TcpError::Bind { addr, source })?),
        None => None,
    };
    let (persisted_tx, mut persisted_rx) = mpsc::unbounded_channel::<(usize, Vec<u64>)>();
    let mut slots = Vec::new();
    for (i, ln) in spec.nodes.into_iter().enumerate() {
        let LocalNode {
            id,
            mut factory,
            wal,
            state_dir,
        } = ln;
        let incarnation = match &state_dir {
            Some(d) => next_incarnation(d)?,
            None => 0,
        };
        let (restart, wal, checkpoint_bytes) = match wal {
            Some(ws) => {
                let tx = persisted_tx.clone();
                let (w, rec) = Wal::open(
                    ws.config.clone(),
                    Box::new(move |tokens| {
                        let _ = tx.send((i, tokens));
                    }),
                )?;
                if !rec.records.is_empty() {
                    tracing::info!(node = ?id, incarnation, records = rec.records.len(), truncated = rec.truncated, checkpoints = rec.generation, "recovered log");
                }
                (
                    Restart {
                        incarnation,
                        recovered: rec.records,
                        durable: true,
                    },
                    Some(w),
                    ws.checkpoint_bytes,
                )
            }
            None => (
                Restart {
                    incarnation,
                    recovered: Vec::new(),
                    durable: false,
                },
                None,
                0,
            ),
        };
        let rng = SmallRng::seed_from_u64(node_seed(spec.seed, id, restart.incarnation));
        let node = factory(restart);
        slots.push(Slot {
            id,
            node,
            rng,
            wal,
            checkpoint_bytes,
            since_checkpoint: 0,
        });
    }
    let index: HashMap<NodeId, usize> = slots.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    let (inbound_tx, mut inbound_rx) = mpsc::channel::<Event<M>>(spec.net.inbound);
    let shared = Rc::new(Shared {
        cfg: spec.net.clone(),
        cx: spec.cx,
        local: slots.iter().map(|s| s.id).collect(),
        dialable: spec.peers.iter().copied().collect(),
        routes: Default::default(),
        inbound: inbound_tx,
        counters: Default::default(),
    });
    // One connection per remote process (address).
    let mut by_addr: Vec<(SocketAddr, Vec<NodeId>)> = Vec::new();
    for (n, a) in &spec.peers {
        match by_addr.iter_mut().find(|(x, _)| x == a) {
            Some((_, v)) => v.push(*n),
            None => by_addr.push((*a, vec![*n])),
        }
    }
    for (addr, nodes) in by_addr {
        let (tx, rx) = mpsc::channel(spec.net.queue);
        {
            let mut routes = shared.routes.borrow_mut();
            for n in &nodes {
                routes.insert(*n, tx.clone());
            }
        }
        tokio::task::spawn_local(net::dial(shared.clone(), addr, nodes, rx));
    }
    if let (Some(sock), Some(addr)) = (socket, spec.listen) {
        let l = sock
            .listen(1024)
            .map_err(|source| TcpError::Bind { addr, source })?;
        tokio::task::spawn_local(net::accept(shared.clone(), l));
    }

    let mut lp = Loop {
        origin,
        slots,
        index,
        shared: shared.clone(),
        timers: BinaryHeap::new(),
        seq: 0,
        queue: VecDeque::new(),
        effects: Vec::new(),
        events: 0,
    };
    let now = lp.clock();
    for i in 0..lp.slots.len() {
        lp.step(i, now, |n, c| n.on_start(c));
    }
    let deadline = match spec.stop {
        Stop::After(d) | Stop::AfterSettled { after: d, .. } => Some(origin + d),
        Stop::Signal | Stop::Released => None,
    };
    let settle_by = match spec.stop {
        Stop::AfterSettled { after, grace } => Some(origin + after + grace),
        _ => None,
    };
    let mut signal = Box::pin(shutdown_signal(matches!(spec.stop, Stop::Signal)));
    let mut wakeups = spec.wakeups;
    let mut stats_at = spec.stats_every.map(|d| (Instant::now() + d, d));
    let mut last = (0u64, 0u64);
    let mut batch = Vec::with_capacity(256);
    loop {
        let now = lp.clock();
        if lp.done() {
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d)
            && settle_by.is_none_or(|s| Instant::now() >= s || lp.settled())
        {
            break;
        }
        lp.fire_timers(now);
        let mut worked = lp.drain_local(now);
        while let Ok((i, tokens)) = persisted_rx.try_recv() {
            for t in tokens {
                lp.queue.push_back(Local::Persisted { to: i, token: t });
            }
            worked = true;
        }
        while let Ok(ev) = inbound_rx.try_recv() {
            lp.absorb(ev);
            worked = true;
            if lp.queue.len() >= 256 {
                break;
            }
        }
        while let Some(Ok((node, timer))) = wakeups.as_mut().map(|w| w.try_recv()) {
            lp.wake(node, timer, now);
            worked = true;
        }
        if let Some((at, every)) = stats_at {
            if Instant::now() >= at {
                let c = &shared.counters;
                let (m, e) = (c.messages.get(), lp.events);
                tracing::info!(
                    events_per_s = (e - last.1) as f64 / every.as_secs_f64(),
                    msgs_out_per_s = (m - last.0) as f64 / every.as_secs_f64(),
                    dropped = c.dropped.get(),
                    rejected = c.rejected.get(),
                    inbound_queued = spec.net.inbound - inbound_rx.capacity(),
                    outbound_queued = shared.queued(),
                    "stats"
                );
                last = (m, e);
                stats_at = Some((at + every, every));
            }
        }
        if worked || !lp.queue.is_empty() {
            // Let the connection tasks move what this round produced.
            tokio::task::yield_now().await;
            continue;
        }
        let wake = lp
            .timers
            .peek()
            .map(|Reverse((at, _, _, _))| origin + Duration::from_nanos(*at));
        // Past the deadline a settling process wakes for its nodes' events
        // and, at the latest, when its grace ends.
        let end = match (deadline, settle_by) {
            (Some(d), Some(s)) if Instant::now() >= d => Some(s),
            (d, _) => d,
        };
        let wake = match (wake, end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = async {
            match wake {
                Some(w) => tokio::time::sleep_until(w.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            n = inbound_rx.recv_many(&mut batch, 256) => {
                if n == 0 { break; }
                for ev in batch.drain(..) { lp.absorb(ev); }
            }
            Some((i, tokens)) = persisted_rx.recv() => {
                for t in tokens { lp.queue.push_back(Local::Persisted { to: i, token: t }); }
            }
            w = async {
                match wakeups.as_mut() {
                    Some(w) => w.recv().await,
                    None => std::future::pending().await,
                }
            } => match w {
                Some((node, timer)) => lp.wake(node, timer, lp.clock()),
                None => {
                    wakeups = None;
                    if matches!(spec.stop, Stop::Released) {
                        break;
                    }
                }
            },
            _ = sleep => {}
            _ = &mut signal => break,
        }
    }
    let elapsed = lp.clock();
    let graceful = deadline.is_none();
    let mut reports = Vec::new();
    let mut nodes = Vec::new();
    for mut s in lp.slots.drain(..) {
        if let Some(w) = s.wal.take() {
            if graceful {
                if let Some(snap) = s.node.snapshot() {
                    w.checkpoint(snap)?;
                }
            }
            w.close()?;
        }
        reports.push((s.id, s.node.take_report()));
        nodes.push((s.id, s.node));
    }
    let c = &shared.counters;
    Ok(ProcessOutput {
        reports,
        nodes,
        net: NetCounters {
            messages: c.messages.get(),
            bytes: c.bytes.get(),
            local_messages: 0,
        },
        dropped: c.dropped.get(),
        rejected: c.rejected.get(),
        events: lp.events,
        elapsed,
    })
}

async fn shutdown_signal(wait: bool) {
    if !wait {
        return std::future::pending().await;
    }
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot catch SIGTERM");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutting down");
}

type TimerEntry = Reverse<(Time, u64, usize, u64)>;

struct Loop<M> {
    origin: Instant,
    slots: Vec<Slot<M>>,
    index: HashMap<NodeId, usize>,
    shared: Rc<Shared<M>>,
    timers: BinaryHeap<TimerEntry>,
    seq: u64,
    queue: VecDeque<Local<M>>,
    effects: Vec<Effect<M>>,
    events: u64,
}

impl<M: Codec + 'static> Loop<M> {
    fn clock(&self) -> Time {
        self.origin.elapsed().as_nanos() as Time
    }

    /// Every node is settled ([`Node::settled`]).
    fn settled(&self) -> bool {
        self.slots.iter().all(|s| s.node.settled())
    }

    /// The process has nodes and every one is done ([`Node::done`]).
    fn done(&self) -> bool {
        !self.slots.is_empty() && self.slots.iter().all(|s| s.node.done())
    }

    fn absorb(&mut self, ev: Event<M>) {
        match ev {
            Event::Message { from, to, msg } => {
                if let Some(&i) = self.index.get(&to) {
                    self.queue.push_back(Local::Message { from, to: i, msg });
                }
            }
            Event::Dump { node, reply } => {
                let img = self.index.get(&node).and_then(|&i| {
                    self.slots[i].node.store().map(|s| {
                        let mut out = bytes::BytesMut::new();
                        tessera_core::codec::encode_store(s, &mut out);
                        out.freeze()
                    })
                });
                let _ = reply.send(img);
            }
        }
    }

    /// An external wake-up: step node `node` with timer `timer` now.
    fn wake(&mut self, node: NodeId, timer: TimerId, now: Time) {
        match self.index.get(&node) {
            Some(&i) => self.step(i, now, |n, c| n.on_timer(c, timer)),
            None => tracing::warn!(?node, "wake-up for a node this process does not run"),
        }
    }

    fn fire_timers(&mut self, now: Time) {
        while let Some(Reverse((at, _, i, id))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            self.step(i, now, |n, c| n.on_timer(c, TimerId(id)));
        }
    }

    /// Run what is queued locally (a bounded number, then let IO run).
    fn drain_local(&mut self, now: Time) -> bool {
        let n = self.queue.len().min(1024);
        for _ in 0..n {
            match self.queue.pop_front().expect("counted") {
                Local::Message { from, to, msg } => {
                    self.step(to, now, |n, c| n.on_message(c, from, msg))
                }
                Local::Persisted { to, token } => {
                    self.step(to, now, |n, c| n.on_persisted(c, token))
                }
            }
        }
        n > 0
    }

    fn step(&mut self, i: usize, now: Time, f: impl FnOnce(&mut dyn Node<M>, &mut Ctx<M>)) {
        self.events += 1;
        let slot = &mut self.slots[i];
        let me = slot.id;
        {
            let mut ctx = Ctx::new(now, me, &mut slot.rng, &mut self.effects);
            f(slot.node.as_mut(), &mut ctx);
        }
        let mut effects = std::mem::take(&mut self.effects);
        for e in effects.drain(..) {
            match e {
                Effect::Send { to, msg } => match self.index.get(&to) {
                    Some(&j) => self.queue.push_back(Local::Message {
                        from: me,
                        to: j,
                        msg,
                    }),
                    None => {
                        self.shared.send(Out { from: me, to, msg });
                    }
                },
                Effect::Timer { at, id } => {
                    self.seq += 1;
                    self.timers.push(Reverse((at, self.seq, i, id.0)));
                }
                Effect::Persist { token, record } => {
                    let slot = &mut self.slots[i];
                    match &slot.wal {
                        Some(w) => {
                            slot.since_checkpoint += record.len() as u64;
                            if let Err(e) = w.append(token, record) {
                                tracing::error!(error = %e, node = ?me, "log append failed");
                            }
                        }
                        None => self.queue.push_back(Local::Persisted { to: i, token }),
                    }
                }
                Effect::Charge { .. } => {}
                Effect::Done { txn, .. } | Effect::Finished { txn } => {
                    debug_assert!(
                        false,
                        "Effect::Done/Finished for {txn:?} reached the tcp runtime"
                    );
                }
            }
        }
        self.effects = effects;
        let slot = &mut self.slots[i];
        if slot.checkpoint_bytes > 0 && slot.since_checkpoint >= slot.checkpoint_bytes {
            slot.since_checkpoint = 0;
            if let (Some(w), Some(snap)) = (&slot.wal, slot.node.snapshot()) {
                if let Err(e) = w.checkpoint(snap) {
                    tracing::error!(error = %e, node = ?me, "checkpoint failed");
                }
            }
        }
    }
}

/// Fetch node `node`'s store image from the process at `addr` (blocking).
pub fn fetch_store(
    addr: SocketAddr,
    node: NodeId,
    max_frame: usize,
) -> std::io::Result<Option<Bytes>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(net::fetch_dump(addr, node, max_frame))
}
