//! Multi-Paxos alone, under the simulator's faults: a replicated register
//! service ([`tessera_protocols::paxos::kv`]) with closed-loop clients.
//!
//! Every client operation is recorded as a history transaction (a write's
//! version is its request id and it reads the version it replaced; a read
//! records the version it saw) and the history is checked for strict
//! serializability, which for single-key operations is linearizability.
//! After the clients stop and the faults end, every replica must hold the
//! same state.
//!
//! `TESSERA_SEEDS` sets the number of seeds (default 200). A failure prints
//! the seed; `PAXOS_SEED=n` replays that one seed.

use rand::Rng;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tessera_checker::{check, Level};
use tessera_core::client::ClientReport;
use tessera_core::history::{History, HistoryTxn, Outcome};
use tessera_core::ids::{Key, NodeId, Time, TimerId, TxnId, Version, MS};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::runtime::{Deployment, NodeFactory, RunOutput};
use tessera_core::storage::Store;
use tessera_core::topology::{Role, Topology};
use tessera_core::txn::ReadObs;
use tessera_core::FastMap;
use tessera_harness::faults::replica_plan;
use tessera_protocols::paxos::kv::{KvCmd, KvMsg, KvOp, KvServer};
use tessera_protocols::paxos::{PaxosConfig, PaxosMsg};
use tessera_sim::{Crash, SimConfig};

fn seeds() -> u64 {
    std::env::var("TESSERA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

// ----- the clients -----

const TICK: TimerId = TimerId(1);

struct Op {
    cmd: KvCmd,
    start: Time,
    /// Index of the replica asked.
    target: usize,
    retry_at: Time,
    redirected_at: Time,
    timeouts: u32,
}

/// A host of closed-loop register clients: each process issues one read or
/// write of a random key at a time, to the replica it believes leads,
/// retrying elsewhere on a timeout or a redirect.
struct KvClient {
    me: NodeId,
    incarnation: u8,
    group: Vec<NodeId>,
    keys: u64,
    stop_at: Time,
    timeout: Time,
    procs: Vec<Option<Op>>,
    by_id: FastMap<TxnId, usize>,
    guess: usize,
    next_seq: u32,
    history: Vec<HistoryTxn>,
}

impl KvClient {
    fn process(&self, p: usize) -> u64 {
        ((self.me.0 as u64) << 40) | ((self.incarnation as u64) << 32) | p as u64
    }

    fn issue(&mut self, ctx: &mut Ctx<KvMsg>, p: usize) {
        if ctx.now() >= self.stop_at {
            return;
        }
        self.next_seq += 1;
        let id = TxnId::new(self.me, self.incarnation, self.next_seq);
        let key = Key::new(0, ctx.rng().random_range(0..self.keys));
        let op = if ctx.rng().random_bool(0.5) {
            KvOp::Write(key)
        } else {
            KvOp::Read(key)
        };
        let cmd = KvCmd {
            process: self.process(p),
            id,
            op,
        };
        self.by_id.insert(id, p);
        self.procs[p] = Some(Op {
            cmd,
            start: ctx.now(),
            target: self.guess,
            retry_at: 0,
            redirected_at: 0,
            timeouts: 0,
        });
        self.send(ctx, p);
    }

    fn send(&mut self, ctx: &mut Ctx<KvMsg>, p: usize) {
        let op = self.procs[p].as_mut().expect("in flight");
        op.retry_at = ctx.now() + self.timeout;
        ctx.send(self.group[op.target], KvMsg::Request(op.cmd.clone()));
    }

    fn record(&mut self, op: &Op, end: Time, seen: Option<Version>) {
        let (key, write) = match op.cmd.op {
            KvOp::Read(k) => (k, false),
            KvOp::Write(k) => (k, true),
        };
        self.history.push(HistoryTxn {
            id: op.cmd.id,
            process: op.cmd.process,
            start: op.start,
            end,
            reads: seen
                .map(|version| ReadObs::row(key, version))
                .into_iter()
                .collect(),
            writes: if write { vec![key] } else { Vec::new() },
            write_columns: Vec::new(),
            outcome: if seen.is_some() {
                Outcome::Committed
            } else {
                Outcome::Unknown
            },
        });
    }
}

impl Node<KvMsg> for KvClient {
    fn on_start(&mut self, ctx: &mut Ctx<KvMsg>) {
        ctx.set_timer(MS, TICK);
        for p in 0..self.procs.len() {
            self.issue(ctx, p);
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<KvMsg>, from: NodeId, msg: KvMsg) {
        match msg {
            KvMsg::Reply { id, version } => {
                let Some(p) = self.by_id.remove(&id) else {
                    return; // A duplicate reply.
                };
                let op = self.procs[p].take().expect("in flight");
                self.guess = op.target;
                self.record(&op, ctx.now(), Some(version));
                self.issue(ctx, p);
            }
            KvMsg::NotLeader { id, leader } => {
                let Some(&p) = self.by_id.get(&id) else {
                    return;
                };
                let n = self.group.len();
                let now = ctx.now();
                let op = self.procs[p].as_mut().expect("in flight");
                if self.group[op.target] != from {
                    return; // An old answer.
                }
                op.target = leader
                    .and_then(|l| self.group.iter().position(|&g| g == l))
                    .filter(|&t| self.group[t] != from)
                    .unwrap_or((op.target + 1) % n);
                // Follow a redirect at once, unless redirects ping-pong.
                if now >= op.redirected_at + MS {
                    op.redirected_at = now;
                    self.send(ctx, p);
                } else {
                    op.retry_at = now + MS;
                }
            }
            KvMsg::Request(_) | KvMsg::Paxos(_) => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<KvMsg>, id: TimerId) {
        if id != TICK {
            return;
        }
        ctx.set_timer(MS, TICK);
        let now = ctx.now();
        let n = self.group.len();
        for p in 0..self.procs.len() {
            if let Some(op) = &mut self.procs[p] {
                if now >= op.retry_at {
                    // The first timeout may be a lost message: ask the
                    // same replica again; then try the next one.
                    op.timeouts += 1;
                    if op.timeouts % 2 == 0 && now >= op.redirected_at + self.timeout {
                        op.target = (op.target + 1) % n;
                    }
                    self.send(ctx, p);
                }
            }
        }
    }

    fn take_report(&mut self) -> NodeReport {
        let open: Vec<Op> = self.procs.iter_mut().filter_map(Option::take).collect();
        for op in &open {
            self.record(op, Time::MAX, None);
        }
        NodeReport {
            client: Some(ClientReport {
                stats: Default::default(),
                history: std::mem::take(&mut self.history),
            }),
            counters: Vec::new(),
            ..NodeReport::default()
        }
    }
}

// ----- a server wrapper that counts catch-up traffic -----

#[derive(Default)]
struct Counters {
    learns: AtomicUsize,
    snapshots: AtomicUsize,
}

/// A register replica; counts the Learn and InstallSnapshot messages it
/// receives, so tests can tell how a replica caught up.
struct Counted {
    inner: KvServer,
    counters: Arc<Counters>,
}

impl Node<KvMsg> for Counted {
    fn on_start(&mut self, ctx: &mut Ctx<KvMsg>) {
        self.inner.on_start(ctx);
    }
    fn on_message(&mut self, ctx: &mut Ctx<KvMsg>, from: NodeId, msg: KvMsg) {
        match &msg {
            KvMsg::Paxos(PaxosMsg::Learn { .. }) => {
                self.counters.learns.fetch_add(1, Ordering::Relaxed);
            }
            KvMsg::Paxos(PaxosMsg::InstallSnapshot { .. }) => {
                self.counters.snapshots.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        self.inner.on_message(ctx, from, msg);
    }
    fn on_timer(&mut self, ctx: &mut Ctx<KvMsg>, id: TimerId) {
        self.inner.on_timer(ctx, id);
    }
    fn on_persisted(&mut self, ctx: &mut Ctx<KvMsg>, token: u64) {
        self.inner.on_persisted(ctx, token);
    }
    fn store(&self) -> Option<&Store> {
        self.inner.store()
    }
}

// ----- runs -----

struct Setup {
    seed: u64,
    replicas: u32,
    client_hosts: u32,
    procs: usize,
    keys: u64,
    paxos: PaxosConfig,
    /// Clients issue no new operation after this.
    stop_at: Time,
    /// The run ends here (quiescence after `stop_at`).
    duration: Time,
    sim: SimConfig,
}

impl Setup {
    fn new(seed: u64) -> Self {
        Setup {
            seed,
            replicas: 3,
            client_hosts: 2,
            procs: 4,
            keys: 4,
            paxos: PaxosConfig {
                snapshot_every: 64,
                ..PaxosConfig::default()
            },
            stop_at: 500 * MS,
            duration: 800 * MS,
            sim: SimConfig::default(),
        }
    }

    fn topology(&self) -> Topology {
        Topology::new(1, self.replicas, self.client_hosts)
    }
}

struct Run {
    history: History,
    out: RunOutput<KvMsg>,
    counters: Vec<Arc<Counters>>,
    topology: Topology,
}

fn run(s: &Setup) -> Run {
    let topology = s.topology();
    let group = topology.shards[0].replicas.clone();
    let mut factories: Vec<NodeFactory<KvMsg>> = Vec::new();
    let mut counters = Vec::new();
    for info in &topology.nodes {
        let me = info.id;
        match info.role {
            Role::Server { .. } => {
                let (cfg, group) = (s.paxos.clone(), group.clone());
                let c = Arc::new(Counters::default());
                counters.push(c.clone());
                factories.push(Box::new(move |r| {
                    Box::new(Counted {
                        inner: KvServer::new(cfg.clone(), me, group.clone(), &r.recovered),
                        counters: c.clone(),
                    })
                }));
            }
            Role::Client { .. } => {
                let (group, procs, keys, stop_at) = (group.clone(), s.procs, s.keys, s.stop_at);
                factories.push(Box::new(move |r| {
                    Box::new(KvClient {
                        me,
                        incarnation: r.incarnation,
                        group: group.clone(),
                        keys,
                        stop_at,
                        timeout: 5 * MS,
                        procs: (0..procs).map(|_| None).collect(),
                        by_id: tessera_core::fast_map(),
                        guess: 0,
                        next_seq: 0,
                        history: Vec::new(),
                    })
                }));
            }
            Role::Switch { .. } => unreachable!("this topology has no switches"),
        }
    }
    let dep = Deployment {
        topology: Arc::new(topology.clone()),
        factories,
        seed: s.seed,
        duration: s.duration,
    };
    let out = tessera_sim::run(dep, &s.sim).expect("valid sim config");
    let mut history = History::default();
    for r in &out.reports {
        if let Some(c) = &r.client {
            history.txns.extend(c.history.iter().cloned());
        }
    }
    Run {
        history,
        out,
        counters,
        topology,
    }
}

/// The history is linearizable; returns the number of completed operations.
fn assert_linearizable(o: &Run, what: &str) -> usize {
    let report = check(&o.history, Level::StrictSerializable);
    assert!(report.ok, "{what}: {report}");
    o.history
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .count()
}

/// Every replica in `which` holds the same, non-empty state.
fn assert_converged(o: &Run, which: &[NodeId], what: &str) {
    let stores: Vec<_> = which
        .iter()
        .map(|n| {
            o.out.nodes[n.0 as usize]
                .store()
                .expect("a server")
                .records_sorted()
                .into_iter()
                .map(|(k, r)| (k, r.meta.version, r.value.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!stores[0].is_empty(), "{what}: nothing applied");
    for (i, s) in stores.iter().enumerate().skip(1) {
        assert!(
            *s == stores[0],
            "{what}: replica {:?} diverged from {:?} ({} vs {} records)",
            which[i],
            which[0],
            s.len(),
            stores[0].len()
        );
    }
}

fn servers(t: &Topology) -> Vec<NodeId> {
    t.shards[0].replicas.clone()
}

fn commits_after(o: &Run, t: Time) -> usize {
    o.history
        .txns
        .iter()
        .filter(|x| x.outcome == Outcome::Committed && x.start > t)
        .count()
}

/// Many seeds of loss, duplication, reordering, partitions and crashes of
/// leaders and followers (a minority at a time): linearizable, and the
/// replicas converge once the faults end.
#[test]
fn register_is_linearizable_and_converges_under_faults() {
    let only: Option<u64> = std::env::var("PAXOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let list: Vec<u64> = match only {
        Some(s) => vec![s],
        None => (0..seeds()).collect(),
    };
    let started = Instant::now();
    let (mut ops, mut crashes, mut learns, mut snapshots) = (0, 0, 0, 0);
    for &seed in &list {
        let mut s = Setup::new(seed);
        // One seed in four runs a group of five (two faults at a time).
        if seed % 4 == 3 {
            s.replicas = 5;
        }
        s.sim = replica_plan(seed, &s.topology(), s.stop_at - 50 * MS);
        if seed % 2 == 1 {
            s.sim.loss = 0.15;
            s.sim.reorder = 0.3;
            s.sim.duplicate = 0.1;
        }
        crashes += s.sim.crashes.len();
        let o = run(&s);
        let what = format!("seed {seed} (replay: PAXOS_SEED={seed} cargo test -p tessera-harness --test paxos_register register_is)");
        if only.is_some() {
            eprintln!("{:#?}", s.sim);
            let mut buckets = vec![0; 20];
            for t in o
                .history
                .txns
                .iter()
                .filter(|t| t.outcome == Outcome::Committed)
            {
                buckets[(t.end / (50 * MS)) as usize] += 1;
            }
            eprintln!("completions per 50 ms: {buckets:?}");
        }
        let n = assert_linearizable(&o, &what);
        assert!(n > 100, "{what}: only {n} operations completed");
        assert!(
            commits_after(&o, s.stop_at - 100 * MS) > 0,
            "{what}: no progress late in the run"
        );
        assert_converged(&o, &servers(&o.topology), &what);
        ops += n;
        for c in &o.counters {
            learns += c.learns.load(Ordering::Relaxed);
            snapshots += c.snapshots.load(Ordering::Relaxed);
        }
    }
    assert!(crashes > 0, "the plans crashed nobody");
    if list.len() >= 20 {
        assert!(learns > 0, "no replica ever caught up through Learn");
        assert!(snapshots > 0, "no replica ever installed a snapshot");
    }
    eprintln!(
        "paxos register: {} seeds, {ops} operations, {crashes} crashes, {learns} Learn and \
         {snapshots} InstallSnapshot messages received, {:.1} ms per seed",
        list.len(),
        started.elapsed().as_secs_f64() * 1e3 / list.len() as f64
    );
}

/// The leader crashes for good: another replica takes over and the log
/// continues where it was.
#[test]
fn crashed_leader_is_replaced_and_the_log_continues() {
    for seed in 0..5 {
        let mut s = Setup::new(seed);
        let leader = s.topology().shards[0].leader();
        s.sim.crashes.push(Crash {
            node: leader,
            at: 150 * MS,
            restart_after: None,
        });
        let o = run(&s);
        let what = format!("seed {seed}");
        assert!(
            commits_after(&o, 0) > 0 && commits_after(&o, 150 * MS) > 100,
            "{what}: log stopped"
        );
        assert_linearizable(&o, &what);
        let rest: Vec<NodeId> = servers(&o.topology)
            .into_iter()
            .filter(|&n| n != leader)
            .collect();
        assert_converged(&o, &rest, &what);
    }
}

/// A follower misses most of the run. With compaction it can only catch up
/// through a snapshot; without, through Learn.
#[test]
fn restarted_replica_catches_up_by_snapshot_or_log() {
    for compact in [true, false] {
        let mut s = Setup::new(11);
        s.paxos.snapshot_every = if compact { 32 } else { 0 };
        let lagger = s.topology().shards[0].replicas[2];
        s.sim.crashes.push(Crash {
            node: lagger,
            at: 50 * MS,
            restart_after: Some(350 * MS),
        });
        let o = run(&s);
        let what = format!("compaction {compact}");
        assert_linearizable(&o, &what);
        assert_converged(&o, &servers(&o.topology), &what);
        let c = &o.counters[2];
        let (learns, snaps) = (
            c.learns.load(Ordering::Relaxed),
            c.snapshots.load(Ordering::Relaxed),
        );
        if compact {
            assert!(snaps > 0, "{what}: caught up without a snapshot");
        } else {
            assert_eq!(snaps, 0, "{what}: nothing to snapshot");
            assert!(learns > 0, "{what}: caught up without Learn");
        }
    }
}

/// Every replica crashes at once and restarts from its durable records:
/// nothing chosen is lost (a later read or write sees every earlier write,
/// which the linearizability check verifies). A slow disk widens the window
/// in which a reply could overtake its record.
#[test]
fn whole_group_restarts_from_durable_records() {
    for seed in 0..20 {
        let mut s = Setup::new(seed);
        s.sim.fsync = MS;
        let at = 150 * MS + seed * 7 * MS;
        for n in s.topology().shards[0].replicas.clone() {
            s.sim.crashes.push(Crash {
                node: n,
                at,
                restart_after: Some(30 * MS),
            });
        }
        let o = run(&s);
        let what = format!("whole-group restart, seed {seed}");
        assert!(
            commits_after(&o, at + 30 * MS) > 50,
            "{what}: no progress after the restart"
        );
        let before = o
            .history
            .txns
            .iter()
            .filter(|t| t.outcome == Outcome::Committed && t.end < at && !t.writes.is_empty())
            .count();
        assert!(before > 0, "{what}: nothing written before the crash");
        assert_linearizable(&o, &what);
        assert_converged(&o, &servers(&o.topology), &what);
    }
}

/// One seed replays one run, faults included.
#[test]
fn same_seed_gives_the_same_history() {
    let history = |seed| {
        let mut s = Setup::new(seed);
        s.sim = replica_plan(seed, &s.topology(), s.stop_at - 50 * MS);
        let o = run(&s);
        let mut v = Vec::new();
        tessera_checker::write_elle(&o.history, &mut v).unwrap();
        v
    };
    let a = history(5);
    assert!(!a.is_empty());
    assert!(a == history(5), "two runs of one seed differ");
    assert!(a != history(6), "two seeds gave the same run");
}
