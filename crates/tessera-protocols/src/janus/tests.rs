//! Janus's replicas and coordinators stepped by hand, message by message, to
//! replay the paper's interleavings exactly: one shard of three replicas
//! (nodes 0–2) and two coordinators (nodes 3, 4); for §4's tests two shards
//! (nodes 0–5) and two coordinators (nodes 6, 7).

use super::{JanusConfig, JanusCoordinator, JanusServer, Msg};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::Rng;
use rand::SeedableRng;
use std::sync::Arc;
use tessera_core::codec::{DecodeCx, DecodeError, EncodeError};
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId, Version, MS};
use tessera_core::node::{Ctx, Effect, Node};
use tessera_core::protocol::{Coordinator, CoordinatorEnv, ServerEnv};
use tessera_core::storage::Store;
use tessera_core::topology::Topology;
use tessera_core::txn::{
    Access, Attempt, Columns, PieceKind, PieceResult, PieceSpec, Procedure, Txn, TxnOutcome, Value,
};
use tessera_core::workload::{ClientSlot, TxnGenerator, Workload};

fn enc(x: u64) -> Value {
    Value::copy_from_slice(&x.to_le_bytes())
}

fn dec(v: Option<&Value>) -> u64 {
    match v {
        Some(b) if b.len() >= 8 => u64::from_le_bytes(b[..8].try_into().unwrap()),
        _ => 0,
    }
}

const X: Key = Key::new(0, 1);
const Y: Key = Key::new(0, 2);

/// `x++`, outputting the value it saw.
#[derive(Debug)]
struct Incr {
    pieces: Vec<PieceSpec>,
}

impl Incr {
    fn proc() -> Arc<dyn Procedure> {
        Arc::new(Incr {
            pieces: vec![PieceSpec {
                shard: ShardId(0),
                reads: vec![Access::all(X)],
                writes: vec![Access::all(X)],
                kind: PieceKind::Deferrable,
                inputs: Vec::new(),
                dynamic: false,
            }],
        })
    }
}

impl Procedure for Incr {
    fn name(&self) -> &'static str {
        "incr"
    }
    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }
    /// No parameters: `x++` is all there is.
    fn encode_params(&self, _: &mut bytes::BytesMut) -> Result<(), EncodeError> {
        Ok(())
    }
    fn execute(&self, _: usize, reads: &[Option<&Value>], _: &[Value]) -> PieceResult {
        let x = dec(reads[0]);
        PieceResult {
            writes: vec![(X, enc(x + 1))],
            output: enc(x),
            user_abort: false,
        }
    }
}

/// `y.c += 1` on column `c` of y, a row of two counters (8 bytes each,
/// missing ones 0), outputting the value it saw; it declares column `c`
/// only, so two of them on different columns do not conflict (Janus §3:
/// conflicts are on the data a piece accesses; [`super::tracker`]).
#[derive(Debug)]
struct ColIncr {
    col: u32,
    pieces: Vec<PieceSpec>,
}

impl ColIncr {
    fn proc(col: u32) -> Arc<dyn Procedure> {
        let a = Access {
            key: Y,
            columns: Columns::one(col),
        };
        Arc::new(ColIncr {
            col,
            pieces: vec![PieceSpec {
                shard: ShardId(0),
                reads: vec![a],
                writes: vec![a],
                kind: PieceKind::Deferrable,
                inputs: Vec::new(),
                dynamic: false,
            }],
        })
    }

    /// Counter `col` of a row value.
    fn counter(v: Option<&Value>, col: u32) -> u64 {
        let at = 8 * col as usize;
        match v {
            Some(b) if b.len() >= at + 8 => u64::from_le_bytes(b[at..at + 8].try_into().unwrap()),
            _ => 0,
        }
    }
}

impl Procedure for ColIncr {
    fn name(&self) -> &'static str {
        "colincr"
    }
    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }
    fn encode_params(&self, out: &mut bytes::BytesMut) -> Result<(), EncodeError> {
        out.extend_from_slice(&[self.col as u8]);
        Ok(())
    }
    fn execute(&self, _: usize, reads: &[Option<&Value>], _: &[Value]) -> PieceResult {
        let mut c = [Self::counter(reads[0], 0), Self::counter(reads[0], 1)];
        let seen = c[self.col as usize];
        c[self.col as usize] = seen.saturating_add(1);
        let mut v = c[0].to_le_bytes().to_vec();
        v.extend_from_slice(&c[1].to_le_bytes());
        PieceResult {
            writes: vec![(Y, Value::from(v))],
            output: enc(seen),
            user_abort: false,
        }
    }
}

/// The workload of the hand-stepped tests, as far as a restarted replica
/// needs it: it rebuilds `Incr` from its log ([`ServerEnv::codec`]).
struct Incrs;

impl Workload for Incrs {
    fn name(&self) -> &'static str {
        "incrs"
    }
    fn shards(&self) -> u32 {
        1
    }
    fn load(&self, _: ShardId, store: &mut Store) {
        store.load(X, enc(10));
        store.load(Y, enc(0));
    }
    fn generator(&self, _: ClientSlot) -> Box<dyn TxnGenerator> {
        Box::new(Incrs)
    }
    fn decode_txn(&self, name: &str, params: &[u8]) -> Result<Txn, DecodeError> {
        match (name, params) {
            ("incr", []) => Ok(Incr::proc()),
            ("colincr", [c @ (0 | 1)]) => Ok(ColIncr::proc(u32::from(*c))),
            _ => Err(DecodeError::invalid("procedure", name.to_string())),
        }
    }
}

impl TxnGenerator for Incrs {
    fn next(&mut self, _: &mut SmallRng) -> Txn {
        Incr::proc()
    }
}

struct Cluster {
    /// Servers are nodes `0..ns`, coordinators from `ns` on.
    ns: u32,
    servers: Vec<JanusServer>,
    /// Each server's durable records, and those written but not durable
    /// yet (only while `hold_sync`: else a record is durable at once).
    disks: Vec<Vec<Bytes>>,
    unsynced: Vec<Vec<(u64, Bytes)>>,
    hold_sync: bool,
    /// Every durable write of each server, checkpoints or not.
    full: Vec<Vec<Bytes>>,
    /// A checkpoint taken and not durable yet: the image, and how many of
    /// the writes not yet durable were handed over before it.
    checkpoints: Vec<Option<(Bytes, usize)>>,
    coords: Vec<JanusCoordinator>,
    queue: Vec<(NodeId, NodeId, Msg)>,
    done: Vec<(TxnId, TxnOutcome)>,
    rng: SmallRng,
    seq: u32,
    now: Time,
}

/// The node a test plays a recovery coordinator from.
const RECOVERY: u32 = 9;

/// Replica `r` holding x = 10 and y = 0, started on `log`.
fn server(topology: &Arc<Topology>, r: u32, log: Vec<Bytes>) -> JanusServer {
    server_with(topology, r, log, JanusConfig::default())
}

fn server_with(topology: &Arc<Topology>, r: u32, log: Vec<Bytes>, cfg: JanusConfig) -> JanusServer {
    let mut store = Store::new();
    Incrs.load(ShardId(r / 3), &mut store);
    JanusServer::new(
        cfg,
        ServerEnv {
            me: NodeId(r),
            shard: ShardId(r / 3),
            replica: r % 3,
            topology: topology.clone(),
            store,
            recovered: log,
            durable: true,
            codec: DecodeCx::new(Arc::new(Incrs)),
        },
    )
}

impl Cluster {
    fn new() -> Self {
        Cluster::with_shards(1)
    }

    /// `shards` shards of three replicas each, every replica holding
    /// x = 10 and y = 0.
    fn with_shards(shards: u32) -> Self {
        let topology = Arc::new(Topology::new(shards, 3, 2));
        let cfg = JanusConfig::default();
        let ns = 3 * shards;
        let servers = (0..ns).map(|r| server(&topology, r, Vec::new())).collect();
        let coords = (ns..ns + 2)
            .map(|n| {
                JanusCoordinator::new(
                    cfg.clone(),
                    CoordinatorEnv {
                        me: NodeId(n),
                        topology: topology.clone(),
                        incarnation: 0,
                        recovered: Vec::new(),
                    },
                )
            })
            .collect();
        Cluster {
            ns,
            servers,
            disks: vec![Vec::new(); ns as usize],
            unsynced: vec![Vec::new(); ns as usize],
            hold_sync: false,
            full: vec![Vec::new(); ns as usize],
            checkpoints: vec![None; ns as usize],
            coords,
            queue: Vec::new(),
            done: Vec::new(),
            rng: SmallRng::seed_from_u64(1),
            seq: 0,
            now: 0,
        }
    }

    fn collect(&mut self, me: NodeId, effects: Vec<Effect<Msg>>) {
        for e in effects {
            match e {
                Effect::Send { to, msg } => self.queue.push((me, to, msg)),
                Effect::Done { txn, outcome } => self.done.push((txn, outcome)),
                Effect::Persist { token, record } => {
                    self.unsynced[me.0 as usize].push((token, record))
                }
                Effect::Timer { .. } | Effect::Charge { .. } | Effect::Finished { .. } => {}
            }
        }
        if !self.hold_sync && (me.0 as usize) < self.disks.len() {
            self.sync(me.0);
        }
    }

    /// Server `r`'s records written so far become durable.
    fn sync(&mut self, r: u32) {
        let pending = std::mem::take(&mut self.unsynced[r as usize]);
        let Some(&(last, _)) = pending.last() else {
            return;
        };
        let writes: Vec<Bytes> = pending.into_iter().map(|(_, b)| b).collect();
        self.full[r as usize].extend(writes.iter().cloned());
        match self.checkpoints[r as usize].take() {
            Some((image, before)) => {
                // Durable behind the writes handed over before it, which
                // it replaces with the rest of the log.
                let disk = &mut self.disks[r as usize];
                *disk = vec![image];
                disk.extend(writes.into_iter().skip(before));
            }
            None => self.disks[r as usize].extend(writes),
        }
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(self.now, NodeId(r), &mut self.rng, &mut effects);
        self.servers[r as usize].on_persisted(&mut ctx, last);
        self.collect(NodeId(r), effects);
    }

    /// Server `r` crashes (what it had not made durable is lost, and so is
    /// every message to or from it) and restarts from its log.
    fn restart(&mut self, r: u32) {
        self.unsynced[r as usize].clear();
        self.checkpoints[r as usize] = None;
        self.queue.retain(|(f, d, _)| f.0 != r && d.0 != r);
        let topology = Arc::new(Topology::new(self.ns / 3, 3, 2));
        self.servers[r as usize] = server(&topology, r, self.disks[r as usize].clone());
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(self.now, NodeId(r), &mut self.rng, &mut effects);
        self.servers[r as usize].on_start(&mut ctx);
        self.collect(NodeId(r), effects);
    }

    /// Server `r`'s log is checkpointed, as the runtimes do: its image
    /// replaces every write before it once the writes handed over before
    /// it are durable.
    fn checkpoint(&mut self, r: u32) {
        let image = self.servers[r as usize]
            .snapshot()
            .expect("a Janus replica checkpoints");
        let before = self.unsynced[r as usize].len();
        if before == 0 {
            self.disks[r as usize] = vec![image];
        } else {
            self.checkpoints[r as usize] = Some((image, before));
        }
    }

    fn submit(&mut self, c: usize) -> TxnId {
        self.submit_proc(c, Incr::proc())
    }

    fn submit_proc(&mut self, c: usize, txn: Arc<dyn Procedure>) -> TxnId {
        self.seq += 1;
        let me = NodeId(self.ns + c as u32);
        let id = TxnId::new(me, 0, self.seq);
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(self.now, me, &mut self.rng, &mut effects);
        self.coords[c].submit(&mut ctx, Attempt::at_zero(id, txn));
        self.collect(me, effects);
        id
    }

    fn step(&mut self, i: usize) {
        let (from, to, msg) = self.queue.remove(i);
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(self.now, to, &mut self.rng, &mut effects);
        if to.0 < self.ns {
            self.servers[to.0 as usize].on_message(&mut ctx, from, msg);
        } else {
            self.coords[(to.0 - self.ns) as usize].on_message(&mut ctx, from, msg);
        }
        self.collect(to, effects);
    }

    fn deliver_pre_accept(&mut self, txn: TxnId, to: u32) {
        let i = self
            .queue
            .iter()
            .position(|(_, d, m)| {
                d.0 == to && matches!(m, Msg::PreAccept { txn: t, .. } if *t == txn)
            })
            .expect("a PreAccept is queued");
        self.step(i);
    }

    /// §3.2 / Fig. 1b: `t1`'s and `t2`'s PreAccepts reach shard 0's
    /// replicas in different orders (`t1` first at replica 0 only), so no
    /// fast quorum agrees and the commits carry the cycle `t1` ↔ `t2`.
    fn cross_pre_accepts(&mut self, t1: TxnId, t2: TxnId) {
        self.deliver_pre_accept(t1, 0);
        self.deliver_pre_accept(t2, 0);
        self.deliver_pre_accept(t2, 1);
        self.deliver_pre_accept(t1, 1);
        self.deliver_pre_accept(t2, 2);
        self.deliver_pre_accept(t1, 2);
    }

    /// Delivers `msg` from a node outside the cluster (a recovery
    /// coordinator played by the test) to server `to`, and returns the
    /// server's replies to it.
    fn ask_server(&mut self, to: u32, msg: Msg) -> Vec<Msg> {
        let me = NodeId(RECOVERY);
        self.queue.push((me, NodeId(to), msg));
        let i = self.queue.len() - 1;
        self.step(i);
        let (replies, rest) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|(_, d, _)| *d == me);
        self.queue = rest;
        replies.into_iter().map(|(_, _, m)| m).collect()
    }

    /// Lets `dt` pass and fires every node's timer (servers and
    /// coordinators use one periodic timer, id 1); `alive` coordinators
    /// only.
    fn advance(&mut self, dt: Time, alive: &[usize]) {
        self.now += dt;
        for n in 0..self.ns {
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(self.now, NodeId(n), &mut self.rng, &mut effects);
            self.servers[n as usize].on_timer(&mut ctx, TimerId(1));
            self.collect(NodeId(n), effects);
        }
        for &c in alive {
            let me = NodeId(self.ns + c as u32);
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(self.now, me, &mut self.rng, &mut effects);
            self.coords[c].on_timer(&mut ctx, TimerId(1));
            self.collect(me, effects);
        }
    }

    /// Coordinator `c` crashes: its queued messages and everything sent to
    /// it are gone.
    fn crash(&mut self, c: usize) {
        let me = NodeId(self.ns + c as u32);
        self.queue.retain(|(f, d, _)| *f != me && *d != me);
    }

    /// Delivers queued messages in an order drawn from `rng` (coordinator
    /// `dead`'s are dropped), advancing time by 5 ms between rounds until
    /// nothing is queued and `quiet` rounds passed (retransmissions and
    /// recoveries need time).
    fn shuffle_run(&mut self, order: &mut SmallRng, dead: Option<usize>, quiet: u32) {
        let alive: Vec<usize> = (0..self.coords.len())
            .filter(|c| Some(*c) != dead)
            .collect();
        let mut idle = 0;
        while idle < quiet {
            if let Some(c) = dead {
                self.crash(c);
            }
            if self.queue.is_empty() {
                idle += 1;
            } else {
                idle = 0;
                let n = self.queue.len();
                for _ in 0..n {
                    if self.queue.is_empty() {
                        break;
                    }
                    let i = order.random_range(0..self.queue.len());
                    self.step(i);
                    if let Some(c) = dead {
                        self.crash(c);
                    }
                }
            }
            self.advance(5 * MS, &alive);
        }
    }

    fn counter(&mut self, name: &str) -> u64 {
        let mut total = 0;
        for s in &mut self.servers {
            for (n, v) in s.take_report().counters {
                if n == name {
                    total += v;
                }
            }
        }
        total
    }

    fn run(&mut self) {
        while !self.queue.is_empty() {
            self.step(0);
        }
    }

    fn saw(&self, txn: TxnId) -> u64 {
        match &self.done.iter().find(|(t, _)| *t == txn).expect("done").1 {
            TxnOutcome::Committed { outputs, .. } => dec(outputs.first()),
            other => panic!("{txn:?} did not commit: {other:?}"),
        }
    }

    fn paths(&mut self) -> (u64, u64) {
        let mut fast = 0;
        let mut slow = 0;
        for c in &mut self.coords {
            for (name, n) in c.take_report().counters {
                match name {
                    "janus_fast_path" => fast += n,
                    "janus_slow_path" => slow += n,
                    _ => {}
                }
            }
        }
        (fast, slow)
    }

    fn assert_replicas_hold(&self, value: u64, version_of: TxnId) {
        for (r, s) in self.servers.iter().enumerate() {
            let rec = s.store().unwrap().get(X).unwrap();
            assert_eq!(dec(Some(&rec.value)), value, "replica {r}");
            assert_eq!(rec.meta.version, version_of.version(), "replica {r}");
        }
    }
}

/// No interference: all three replicas return the same (empty)
/// dependencies, so the coordinator skips Accept (§3.1, the fast path).
#[test]
fn without_contention_the_fast_path_commits() {
    let mut c = Cluster::new();
    let t1 = c.submit(0);
    c.run();
    let t2 = c.submit(1);
    c.run();
    assert_eq!((c.saw(t1), c.saw(t2)), (10, 11));
    assert_eq!(c.paths(), (2, 0));
    c.assert_replicas_hold(12, t2);
}

/// §3.2 / Fig. 1b: T1 and T2 (both `x++`) reach the replicas in different
/// orders, so no fast quorum agrees: both take the slow path, the commits
/// carry the cycle T1 ↔ T2, and every replica executes T1 then T2 (ids
/// break the tie). Both commit; the replicas agree.
#[test]
fn opposite_arrival_orders_take_the_slow_path_and_one_order() {
    let mut c = Cluster::new();
    let t1 = c.submit(0);
    let t2 = c.submit(1);
    assert!(t1 < t2);
    c.cross_pre_accepts(t1, t2);
    c.run();
    assert_eq!(c.done.len(), 2, "both commit");
    assert_eq!((c.saw(t1), c.saw(t2)), (10, 11));
    assert_eq!(c.paths(), (0, 2));
    c.assert_replicas_hold(12, t2);
}

/// §3.3, the replicas' side of recovery: T's coordinator reached replica 0
/// only. A Prepare with ballot 1 is promised by all three; replica 0 reports
/// its pre-accepted (not accepted) dependencies, the others report nothing,
/// and the late PreAccept of ballot 0 is then refused, so a recovery
/// coordinator that abandons T cannot be contradicted. Lower
/// ballots are refused with the one promised; an Accept at the promised
/// ballot is then reported as accepted to a higher Prepare.
#[test]
fn prepare_promises_the_ballot_and_reports_what_each_replica_holds() {
    use super::msg::Prepared;
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.deliver_pre_accept(t, 0);
    let prepare = |ballot| Msg::Prepare { txn: t, ballot };
    let held: Vec<Vec<Msg>> = (0..3).map(|r| c.ask_server(r, prepare(1))).collect();
    let expect = |prepared: Option<Prepared>| move |m: &Msg| matches!(m, Msg::PrepareOk { txn, ballot: 1, prepared: p } if *txn == t && *p == prepared);
    assert_eq!(held[0].len(), 1);
    assert!(
        expect(Some(Prepared {
            accepted: None,
            deps: Vec::new(),
            abandon: false,
        }))(&held[0][0]),
        "{:?}",
        held[0]
    );
    for h in &held[1..] {
        assert_eq!(h.len(), 1);
        assert!(expect(None)(&h[0]), "{h:?}");
    }

    // The original coordinator's PreAccept arrives late at replica 1.
    let coord = NodeId(3);
    let i = c
        .queue
        .iter()
        .position(|(_, d, m)| d.0 == 1 && matches!(m, Msg::PreAccept { .. }))
        .expect("a PreAccept is queued");
    c.step(i);
    let refused = c.queue.iter().any(|(f, d, m)| {
        *f == NodeId(1) && *d == coord && matches!(m, Msg::PreAcceptNotOk { ballot: 1, .. })
    });
    assert!(refused, "{:?}", c.queue);

    // Lower ballots are refused with the promise (Algorithm 7, l. 87).
    let again = c.ask_server(0, prepare(0));
    assert!(
        matches!(again[..], [Msg::PrepareNotOk { ballot: 1, .. }]),
        "{again:?}"
    );

    // Accepted at ballot 1, then a higher Prepare sees the accepted value.
    let accepted = c.ask_server(
        0,
        Msg::Accept {
            txn: t,
            ballot: 1,
            deps: Arc::new(Vec::new()),
            abandon: false,
            proc: None,
        },
    );
    assert!(
        matches!(accepted[..], [Msg::AcceptOk { ballot: 1, .. }]),
        "{accepted:?}"
    );
    let later = c.ask_server(0, prepare(2));
    assert_eq!(later.len(), 1);
    assert!(
        matches!(
            &later[0],
            Msg::PrepareOk {
                ballot: 2,
                prepared: Some(Prepared {
                    accepted: Some(1),
                    ..
                }),
                ..
            }
        ),
        "{later:?}"
    );
}

/// §3.3: T's coordinator crashes right after its PreAccept reached replica
/// 0 only. Replica 0 suspects it, becomes T's recovery coordinator with a
/// higher ballot, finds T pre-accepted at a minority only (Algorithm 6,
/// l. 79–80), pre-accepts it again without the fast path, accepts and
/// commits it: every replica executes T once.
#[test]
fn a_transaction_whose_coordinator_crashed_after_one_pre_accept_is_recovered() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.deliver_pre_accept(t, 0);
    c.crash(0);
    let mut order = SmallRng::seed_from_u64(7);
    c.shuffle_run(&mut order, Some(0), 80);
    assert_eq!(c.counter("janus_recoveries"), 1, "one replica recovered T");
    c.assert_replicas_hold(11, t);
    // A later transaction sees T's write everywhere.
    let t2 = c.submit(1);
    c.shuffle_run(&mut order, Some(0), 80);
    assert_eq!(c.saw(t2), 11);
    c.assert_replicas_hold(12, t2);
}

/// §3.3, abandon: replica 0 recovers T, but replicas 1 and 2, which never
/// saw T, answer its Prepare first: a majority does not hold T, so T
/// cannot have committed and is abandoned (l. 81–83). The original
/// coordinator was only slow: its late PreAccept is refused by the higher
/// ballot, it learns the abandon by Inquire and tells its client; no
/// replica executes T.
#[test]
fn a_falsely_suspected_coordinator_learns_the_abandon_of_its_transaction() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.deliver_pre_accept(t, 0);
    // Hold the coordinator's other PreAccepts back while replica 0 waits
    // out `recover_after` and starts recovering.
    let held: Vec<_> = std::mem::take(&mut c.queue);
    for _ in 0..60 {
        c.advance(5 * MS, &[]);
        if c.queue
            .iter()
            .any(|(_, _, m)| matches!(m, Msg::Prepare { .. }))
        {
            break;
        }
    }
    let prepare_to = |c: &Cluster, r: u32| {
        c.queue
            .iter()
            .position(|(_, d, m)| d.0 == r && matches!(m, Msg::Prepare { .. }))
            .expect("a Prepare is queued")
    };
    let i = prepare_to(&c, 1);
    c.step(i);
    let i = prepare_to(&c, 2);
    c.step(i);
    // The two Prepare-OKs without T reach replica 0 before its own.
    for _ in 0..2 {
        let i = c
            .queue
            .iter()
            .position(|(_, d, m)| d.0 == 0 && matches!(m, Msg::PrepareOk { .. }))
            .expect("a Prepare-OK is queued");
        c.step(i);
    }
    assert!(
        c.queue
            .iter()
            .any(|(_, _, m)| matches!(m, Msg::Accept { abandon: true, .. })),
        "abandon accepted: {:?}",
        c.queue
    );
    c.queue.extend(held);
    let mut order = SmallRng::seed_from_u64(3);
    c.shuffle_run(&mut order, None, 80);
    let outcome = &c.done.iter().find(|(x, _)| *x == t).expect("answered").1;
    assert!(matches!(outcome, TxnOutcome::Aborted(_)), "{outcome:?}");
    assert_eq!(c.counter("janus_abandoned"), 1);
    for (r, s) in c.servers.iter().enumerate() {
        let rec = s.store().unwrap().get(X).unwrap();
        assert_eq!(dec(Some(&rec.value)), 10, "replica {r} executed T");
    }
}

/// Duelling recovery coordinators (§3.3): T's coordinator crashed after
/// its PreAccept reached replicas 0 and 1, which both recover T, under 200
/// delivery orders. They may reject each other's ballots and retry higher;
/// in every order T commits once, the same everywhere, and a later
/// transaction reads its write.
#[test]
fn racing_recovery_coordinators_agree_in_every_delivery_order() {
    let mut duels = 0;
    for seed in 0..200 {
        let mut c = Cluster::new();
        let t = c.submit(0);
        c.deliver_pre_accept(t, 0);
        c.deliver_pre_accept(t, 1);
        c.crash(0);
        let mut order = SmallRng::seed_from_u64(seed);
        c.shuffle_run(&mut order, Some(0), 100);
        c.assert_replicas_hold(11, t);
        let recoveries = c.counter("janus_recoveries");
        assert!(recoveries >= 1, "seed {seed}");
        duels += u32::from(recoveries >= 2);
        let t2 = c.submit(1);
        c.shuffle_run(&mut order, Some(0), 100);
        assert_eq!(c.saw(t2), 11, "seed {seed}");
        c.assert_replicas_hold(12, t2);
    }
    assert!(duels > 0, "no two replicas ever recovered T at once");
}

// ---- §4: transactions with pre-determined keys ----

/// `x++` at shard 0, rolling back (a user abort, writing nothing) when x
/// has reached `limit`; then `y += x` at shard 1, taking piece 0's output:
/// the keys of both pieces are known, only piece 1's input is not (§4).
#[derive(Debug)]
struct Feed {
    pieces: Vec<PieceSpec>,
    limit: u64,
}

impl Feed {
    fn proc(limit: u64) -> Arc<dyn Procedure> {
        let piece = |shard, key, inputs| PieceSpec {
            shard: ShardId(shard),
            reads: vec![Access::all(key)],
            writes: vec![Access::all(key)],
            kind: PieceKind::Deferrable,
            inputs,
            dynamic: false,
        };
        Arc::new(Feed {
            pieces: vec![piece(0, X, Vec::new()), piece(1, Y, vec![0])],
            limit,
        })
    }
}

impl Procedure for Feed {
    fn name(&self) -> &'static str {
        "feed"
    }
    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }
    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult {
        let v = dec(reads[0]);
        match piece {
            0 if v >= self.limit => PieceResult {
                user_abort: true,
                ..PieceResult::default()
            },
            0 => PieceResult {
                writes: vec![(X, enc(v + 1))],
                output: enc(v),
                user_abort: false,
            },
            _ => PieceResult {
                writes: vec![(Y, enc(v + dec(inputs.first())))],
                output: enc(v),
                user_abort: false,
            },
        }
    }
}

impl Cluster {
    /// The value of `key` at every replica of `shard`, and its version.
    fn held(&self, shard: u32, key: Key) -> Vec<(u64, tessera_core::ids::Version)> {
        self.servers[3 * shard as usize..3 * shard as usize + 3]
            .iter()
            .map(|s| {
                let r = s.store().unwrap().get(key).unwrap();
                (dec(Some(&r.value)), r.meta.version)
            })
            .collect()
    }

    /// The servers that queued Inquires from server `from` about `t` go to.
    fn inquired(&self, from: u32, t: TxnId) -> Vec<u32> {
        let mut to: Vec<u32> = self
            .queue
            .iter()
            .filter(|(f, _, m)| f.0 == from && matches!(m, Msg::Inquire { txn, .. } if *txn == t))
            .map(|(_, d, _)| d.0)
            .collect();
        to.sort_unstable();
        to
    }

    /// Delivers every queued message, and those they cause, except the
    /// ones `hold` picks, which stay queued.
    fn run_holding(&mut self, hold: impl Fn(NodeId, &Msg) -> bool) {
        while let Some(i) = self.queue.iter().position(|(_, d, m)| !hold(*d, m)) {
            self.step(i);
        }
    }
}

/// Shard 1's replicas commit T before shard 0's do: they cannot run piece 1
/// without piece 0's output, ask a shard 0 replica for it (FetchOutput),
/// and wait; once shard 0 executes, the answers come and every replica of
/// shard 1 computes y = 0 + 10. The client gets both outputs.
#[test]
fn a_piece_waits_for_and_fetches_another_shards_output() {
    let mut c = Cluster::with_shards(2);
    let t = c.submit_proc(0, Feed::proc(100));
    let shard0_commit = |d: NodeId, m: &Msg| d.0 < 3 && matches!(m, Msg::Commit(_));
    c.run_holding(shard0_commit);
    assert_eq!(c.held(1, Y), vec![(0, Version::INITIAL); 3], "ran early");
    assert!(c.done.is_empty());
    let asked = c.counter("janus_fetched");
    assert_eq!(asked, 0, "no output can have come yet");
    c.run();
    assert_eq!(c.held(0, X), vec![(11, t.version()); 3]);
    assert_eq!(c.held(1, Y), vec![(10, t.version()); 3]);
    assert_eq!(
        c.counter("janus_fetched"),
        3,
        "each shard 1 replica fetched once"
    );
    match &c.done[..] {
        [(
            d,
            TxnOutcome::Committed {
                outputs, writes, ..
            },
        )] if *d == t => {
            assert_eq!(
                outputs.iter().map(|o| dec(Some(o))).collect::<Vec<_>>(),
                [10, 0]
            );
            assert_eq!(writes, &[X, Y]);
        }
        other => panic!("{other:?}"),
    }
}

/// `JanusConfig::prefetch_outputs`: T1 and T2 both feed y at shard 1 from
/// x at shard 0, and shard 0 has not executed either. Shard 1's replicas
/// run T1 first, so T1 waits for its output and T2 waits behind it; asked
/// member by member only T1's output is requested, with the prefetch
/// T2's too, before T1 runs. Once shard 0 executes, both ways reach the
/// same values (the order and the outputs do not change).
#[test]
fn outputs_are_asked_for_before_the_turn_of_their_piece_with_the_prefetch() {
    let fetched = |prefetch: bool| {
        let mut c = Cluster::with_shards(2);
        let topology = Arc::new(Topology::new(2, 3, 2));
        let cfg = JanusConfig {
            prefetch_outputs: prefetch,
            ..JanusConfig::default()
        };
        c.servers = (0..6)
            .map(|r| server_with(&topology, r, Vec::new(), cfg.clone()))
            .collect();
        let t1 = c.submit_proc(0, Feed::proc(100));
        let t2 = c.submit_proc(1, Feed::proc(100));
        let at_shard0 =
            |d: NodeId, m: &Msg| d.0 < 3 && matches!(m, Msg::Commit(_) | Msg::FetchOutput { .. });
        c.run_holding(at_shard0);
        assert_eq!(c.held(1, Y), vec![(0, Version::INITIAL); 3], "ran early");
        let asked = |t: TxnId| {
            c.queue
                .iter()
                .filter(|(f, _, m)| {
                    (3..6).contains(&f.0) && matches!(m, Msg::FetchOutput { txn, .. } if *txn == t)
                })
                .count()
        };
        let before = (asked(t1), asked(t2));
        c.run();
        assert_eq!(c.held(0, X), vec![(12, t2.version()); 3]);
        assert_eq!(c.held(1, Y), vec![(21, t2.version()); 3]);
        assert_eq!(c.done.len(), 2);
        before
    };
    assert_eq!(fetched(false), (3, 0), "member by member: T1's only");
    assert_eq!(fetched(true), (3, 3), "prefetched: T2's too");
}

/// A lost FetchOutput (or a source replica that is down) is sent again, to
/// the next replica of the source shard, which computed the same output.
#[test]
fn a_lost_fetch_is_asked_of_another_replica() {
    let mut c = Cluster::with_shards(2);
    let t = c.submit_proc(0, Feed::proc(100));
    // Replica 0 of shard 0 never hears anything after the PreAccept phase.
    let cut = |d: NodeId, m: &Msg| {
        d.0 == 0
            && matches!(
                m,
                Msg::Commit(_) | Msg::FetchOutput { .. } | Msg::Inquire { .. }
            )
    };
    c.run_holding(cut);
    c.queue.retain(|(_, d, m)| !cut(*d, m));
    assert_eq!(c.held(1, Y)[0], (0, Version::INITIAL), "replica 3 waits");
    for _ in 0..20 {
        c.advance(10 * MS, &[0]);
        c.run_holding(cut);
        c.queue.retain(|(_, d, m)| !cut(*d, m));
    }
    assert_eq!(c.held(1, Y), vec![(10, t.version()); 3]);
    assert!(matches!(c.done[..], [(d, TxnOutcome::Committed { .. })] if d == t));
}

/// §4's user aborts: piece 0 rolls back (x reached the limit) without
/// writing; the replicas of shard 1 learn it by fetching its status, skip
/// piece 1, and the client sees a user abort. No replica wrote anything,
/// and a later transaction runs normally.
#[test]
fn a_rolled_back_piece_makes_the_pieces_it_feeds_skip() {
    let mut c = Cluster::with_shards(2);
    let t = c.submit_proc(0, Feed::proc(10));
    c.run();
    assert!(matches!(
        c.done[..],
        [(d, TxnOutcome::Aborted(tessera_core::txn::AbortReason::User))] if d == t
    ));
    assert_eq!(c.held(0, X), vec![(10, Version::INITIAL); 3]);
    assert_eq!(c.held(1, Y), vec![(0, Version::INITIAL); 3]);
    let t2 = c.submit_proc(1, Feed::proc(11));
    c.run();
    assert_eq!(c.held(1, Y), vec![(10, t2.version()); 3]);
}

/// Keys that depend on values read cannot be pre-accepted (§4): refused
/// with the reason, before any message is sent.
#[test]
fn dependent_keys_are_refused() {
    #[derive(Debug)]
    struct Dynamic(Vec<PieceSpec>);
    impl Procedure for Dynamic {
        fn name(&self) -> &'static str {
            "dynamic"
        }
        fn pieces(&self) -> &[PieceSpec] {
            &self.0
        }
        fn execute(&self, _: usize, _: &[Option<&Value>], _: &[Value]) -> PieceResult {
            PieceResult::default()
        }
    }
    let mut pieces = Feed::proc(1).pieces().to_vec();
    pieces[1].dynamic = true;
    let proc = Dynamic(pieces);
    let err = super::admit(&proc).unwrap_err();
    assert_eq!(
        err,
        super::Refused::DependentKeys {
            name: "dynamic",
            piece: 1
        }
    );
    assert!(err.to_string().contains("rewrite"), "{err}");
    let mut c = Cluster::with_shards(2);
    let t = c.submit_proc(0, Arc::new(proc));
    assert!(c.queue.is_empty());
    assert!(matches!(
        c.done[..],
        [(d, TxnOutcome::Aborted(tessera_core::txn::AbortReason::User))] if d == t
    ));
}

// ---- graph garbage collection (super::gc) ----

impl Cluster {
    /// `rounds` rounds of delivering everything queued (messages to server
    /// `cut`, if any, are lost), then 10 ms of every node's timers.
    fn rounds(&mut self, rounds: u32, cut: Option<u32>) {
        let alive: Vec<usize> = (0..self.coords.len()).collect();
        for _ in 0..rounds {
            loop {
                if let Some(cut) = cut {
                    self.queue.retain(|(_, d, _)| d.0 != cut);
                }
                if self.queue.is_empty() {
                    break;
                }
                self.step(0);
            }
            self.advance(10 * MS, &alive);
        }
    }

    /// A counter of each server's report.
    fn per_server(&mut self, name: &str) -> Vec<u64> {
        self.servers
            .iter_mut()
            .map(|s| {
                s.take_report()
                    .values()
                    .find(|(n, _)| *n == name)
                    .map_or(0, |&(_, v)| v)
            })
            .collect()
    }
}

fn commit_of(txn: TxnId, deps: Vec<super::msg::Dep>) -> Msg {
    Msg::Commit(Arc::new(super::msg::CommitInfo {
        txn,
        proc: Incr::proc(),
        deps,
        abandon: false,
    }))
}

/// A transaction executed by every replica is forgotten by each, two
/// epochs on; every late message about it (a Commit, PreAccept or Accept
/// retransmission, a recovery coordinator's Prepare, an Inquire) gets the
/// tombstone, and none changes the state.
#[test]
fn an_executed_transaction_is_forgotten_and_late_messages_get_its_tombstone() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.saw(t), 10);
    assert_eq!(c.per_server("janus_forgotten"), [1, 1, 1]);
    assert_eq!(c.per_server("janus_graph_vertices"), [0, 0, 0]);
    assert_eq!(c.per_server("janus_tombstones"), [1, 1, 1]);
    let forgotten =
        |m: &[Msg]| matches!(m, [Msg::Forgotten { txn, abandon: false, scc: None }] if *txn == t);
    for late in [
        commit_of(t, Vec::new()),
        Msg::PreAccept {
            txn: t,
            ballot: 0,
            proc: Incr::proc(),
            floor: None,
            done: None,
        },
        Msg::Accept {
            txn: t,
            ballot: 0,
            deps: Arc::new(Vec::new()),
            abandon: false,
            proc: None,
        },
        Msg::Prepare { txn: t, ballot: 7 },
        Msg::Inquire {
            txn: t,
            its_shard: true,
        },
    ] {
        let what = format!("{late:?}");
        let replies = c.ask_server(1, late);
        assert!(forgotten(&replies), "{what}: {replies:?}");
    }
    assert!(c.queue.is_empty(), "{:?}", c.queue);
    c.assert_replicas_hold(11, t);
    // At its coordinator's floor (T was its oldest open transaction when
    // it sent the PreAccept) the tombstone outlives any age: the
    // coordinator may still resend.
    let cfg = JanusConfig::default();
    for _ in 0..2 * cfg.forget_epochs {
        c.advance(cfg.epoch, &[]);
    }
    assert_eq!(c.per_server("janus_tombstones"), [1, 1, 1]);
}

/// Issue 6, session 27 (`janus27a`): T executed at every replica and was
/// forgotten; its tombstone still lives when its coordinator's done floor
/// passes it and drops its bit. A replica of T's shard asked about T
/// answers `Forgotten`: with the bit gone and the tombstone alive it took
/// itself for a server that forgot T only as an ancestor and stayed
/// silent, and so did every replica of T's shard, while the asker of
/// another shard retried (three-site TPC-C at 100 clients per partition:
/// stalls of 1–2 s).
#[test]
fn a_replica_of_its_shard_answers_about_a_transaction_below_its_done_floor() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.saw(t), 10);
    assert_eq!(c.per_server("janus_tombstones"), [1, 1, 1]);
    // A whole bitmap word above T: T's bit is dropped.
    c.ask_server(
        1,
        Msg::Done {
            floor: TxnId(t.0 + 64),
        },
    );
    let replies = c.ask_server(
        1,
        Msg::Inquire {
            txn: t,
            its_shard: true,
        },
    );
    assert!(
        matches!(replies[..], [Msg::Forgotten { txn, abandon: false, .. }] if txn == t),
        "{replies:?}"
    );
}

/// The coordinator's next PreAccept carries a floor above T: T's tombstone
/// lingers `forget_epochs` epochs (for other servers' Inquires) and goes.
/// A Commit of T from its coordinator delayed past all that is a stale
/// copy: ignored, T does not run a second time (before floors, tombstones
/// went by age alone, and such a Commit ran T again).
#[test]
fn a_coordinators_floor_drops_tombstones_and_its_stale_commit_is_ignored() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.per_server("janus_forgotten"), [1, 1, 1]);
    let t2 = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.saw(t2), 11);
    assert_eq!(c.per_server("janus_forgotten"), [1, 1, 1]);
    let cfg = JanusConfig::default();
    for _ in 0..cfg.forget_epochs {
        c.advance(cfg.epoch, &[]);
    }
    // T's is gone; T2's stays (T2 is the floor: not over yet as far as the
    // replicas know).
    assert_eq!(c.per_server("janus_tombstones"), [1, 1, 1]);
    let coordinator = NodeId(3);
    for r in 0..3 {
        c.queue
            .push((coordinator, NodeId(r), commit_of(t, Vec::new())));
        c.step(c.queue.len() - 1);
    }
    assert!(c.queue.is_empty(), "{:?}", c.queue);
    c.rounds(10, None);
    c.assert_replicas_hold(12, t2);
}

/// Issue 6 (`gc`, *what a replica forgot*): T executed everywhere and was
/// forgotten, and its tombstone expired (its coordinator's floor passed it
/// `forget_epochs` epochs ago). A later transaction's Commit naming T as a
/// dependency then executes at once, without asking about T: before, the
/// replica inquired about T as an unknown ancestor, and waited forever (as
/// here, where nobody holds T) or ran T a second time when a server still
/// held it (`janus_seeds`, `--forget-epochs 1`). A stale recovery
/// coordinator's Commit of T gets `Forgotten`, and a peer's nudge about T
/// an echo that it executed here; neither runs or asks anything. The
/// record is rebuilt from the log: the same holds after a restart, once
/// the replayed tombstones expired too.
#[test]
fn a_dependency_on_a_forgotten_transaction_after_its_tombstone_expired_does_not_run_it_again() {
    use super::msg::{Announce, Dep};
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, None);
    let t2 = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.saw(t2), 11);
    let cfg = JanusConfig::default();
    for _ in 0..cfg.forget_epochs {
        c.advance(cfg.epoch, &[]);
    }
    assert_eq!(c.per_server("janus_forgotten"), [2, 2, 2]);
    assert_eq!(c.per_server("janus_tombstones"), [1, 1, 1], "T2's only");
    let on_t = || Dep {
        txn: t,
        shards: Arc::from([ShardId(0)]),
    };
    let asked = |c: &Cluster| {
        c.queue
            .iter()
            .any(|(_, _, m)| matches!(m, Msg::Inquire { .. }))
    };
    let output = |replies: &[Msg], txn: TxnId| match replies {
        [Msg::CommitOk {
            txn: x, results, ..
        }] if *x == txn => dec(results.first().map(|r| &r.output)),
        other => panic!("{txn:?}: {other:?}"),
    };

    let t3 = TxnId::new(NodeId(RECOVERY), 0, 1);
    let replies = c.ask_server(0, commit_of(t3, vec![on_t()]));
    assert_eq!(output(&replies, t3), 12, "T3 runs once, after T and T2");
    assert!(!asked(&c), "{:?}", c.queue);
    let replies = c.ask_server(0, commit_of(t, Vec::new()));
    assert!(
        matches!(replies[..], [Msg::Forgotten { txn, abandon: false, .. }] if txn == t),
        "{replies:?}"
    );
    c.queue.push((
        NodeId(1),
        NodeId(0),
        Msg::Committed {
            txns: Arc::from([t]),
            why: Announce::Lagging,
        },
    ));
    c.step(c.queue.len() - 1);
    assert!(
        matches!(&c.queue[..], [(_, to, Msg::Executed { txns, echo: true })] if *to == NodeId(1) && txns[..] == [t]),
        "{:?}",
        c.queue
    );
    c.queue.clear();
    let late = c.per_server("janus_late_dependency");
    assert_eq!(late, [1, 0, 0]);
    assert_eq!(c.per_server("janus_forgotten_run_again"), [0, 0, 0]);

    c.restart(0);
    c.queue.clear();
    c.advance(cfg.epoch, &[]);
    c.queue.clear();
    assert_eq!(c.per_server("janus_tombstones")[0], 0, "all expired");
    let t4 = TxnId::new(NodeId(RECOVERY), 0, 2);
    let replies = c.ask_server(0, commit_of(t4, vec![on_t()]));
    assert_eq!(output(&replies, t4), 13, "after T3, replayed");
    assert!(!asked(&c), "{:?}", c.queue);
    assert_eq!(c.per_server("janus_late_dependency"), [1, 0, 0]);
    assert_eq!(c.per_server("janus_committed_unexecuted"), [0, 0, 0]);
}

/// A replica asked about a transaction it never learns no longer keeps the
/// request forever: once the transaction's coordinator's floor passes it,
/// the parked Inquire is dropped (the asker's retries go to every replica
/// of its shards), and a new one is not parked — unless it comes as to a
/// replica of the transaction's shard and the coordinator's done floor
/// passed it too: then this replica would have executed and forgotten it
/// (here it never existed: vacuously so), and says so.
#[test]
fn an_inquire_the_floor_made_moot_is_released() {
    let mut c = Cluster::new();
    let ghost = TxnId::new(NodeId(3), 0, 0);
    let replies = c.ask_server(
        1,
        Msg::Inquire {
            txn: ghost,
            its_shard: true,
        },
    );
    assert!(replies.is_empty(), "{replies:?}");
    assert_eq!(c.per_server("janus_inquiries_parked"), [0, 1, 0]);
    let t = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.saw(t), 10);
    assert_eq!(c.per_server("janus_inquiries_parked"), [0, 0, 0]);
    let replies = c.ask_server(
        1,
        Msg::Inquire {
            txn: ghost,
            its_shard: false,
        },
    );
    assert!(replies.is_empty(), "{replies:?}");
    assert_eq!(c.per_server("janus_inquiries_parked"), [0, 0, 0]);
    let replies = c.ask_server(
        1,
        Msg::Inquire {
            txn: ghost,
            its_shard: true,
        },
    );
    assert!(
        matches!(replies[..], [Msg::Forgotten { txn, scc: None, .. }] if txn == ghost),
        "{replies:?}"
    );
    // An Inquire about a transaction the floor has not passed still waits.
    let later = TxnId::new(NodeId(3), 0, 99);
    c.ask_server(
        1,
        Msg::Inquire {
            txn: later,
            its_shard: true,
        },
    );
    assert_eq!(c.per_server("janus_inquiries_parked"), [0, 1, 0]);
}

/// A replica that has not executed T keeps every other replica from
/// forgetting it (it may still Inquire for T's Commit); once it catches up
/// all forget it.
#[test]
fn a_transaction_is_kept_while_a_replica_has_not_executed_it() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, Some(2));
    assert_eq!(c.saw(t), 10);
    assert_eq!(c.per_server("janus_forgotten"), [0, 0, 0]);
    // Replica 2 missed PreAccept and Commit: it learns T from the others'
    // announcements, executes it, and then everyone forgets it.
    c.rounds(30, None);
    assert_eq!(c.per_server("janus_forgotten"), [1, 1, 1]);
    c.assert_replicas_hold(11, t);
}

/// A Commit naming a forgotten transaction as a dependency does not wait
/// for it, nor ask about it: it is DECIDED and done here.
#[test]
fn a_dependency_on_a_forgotten_transaction_does_not_block() {
    use super::msg::Dep;
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.per_server("janus_forgotten"), [1, 1, 1]);
    let t2 = TxnId::new(NodeId(RECOVERY), 0, 1);
    let dep = Dep {
        txn: t,
        shards: Arc::from([ShardId(0)]),
    };
    let replies = c.ask_server(0, commit_of(t2, vec![dep]));
    assert!(
        matches!(&replies[..], [Msg::CommitOk { txn, abandon: false, results }]
            if *txn == t2 && dec(results.first().map(|r| &r.output)) == 11),
        "{replies:?}"
    );
    assert!(
        !c.queue
            .iter()
            .any(|(_, _, m)| matches!(m, Msg::Inquire { .. })),
        "{:?}",
        c.queue
    );
}

/// A server waiting for an ancestor it does not know asks about it; the
/// answer that the ancestor was forgotten (committed, executed everywhere,
/// DECIDED alone) lets the waiting transaction execute.
#[test]
fn a_forgotten_answer_to_an_inquire_unblocks_the_waiter() {
    use super::msg::Dep;
    let mut c = Cluster::new();
    let ghost = TxnId::new(NodeId(RECOVERY), 0, 1);
    let t2 = TxnId::new(NodeId(RECOVERY), 0, 2);
    let dep = Dep {
        txn: ghost,
        shards: Arc::from([ShardId(0)]),
    };
    let replies = c.ask_server(0, commit_of(t2, vec![dep]));
    assert!(replies.is_empty(), "{replies:?}");
    c.answer_forgotten(ghost, None);
    c.assert_commit_ok(t2);
}

/// A whole-log replay does not keep another shard's dependency STARTED
/// forever. T2 (shard 0) depends on A (shard 1 only); replica 0 learns
/// A's commit by Inquire, which it does not log (no pieces here), and
/// executes T2.
/// Replayed, T2's Committed record puts A back STARTED, and nothing
/// would raise or collect it: the replay drops it, as reached by nothing
/// still to run here (one-site TPC-C under `--replica-faults`, seed 2:
/// 165,230 graph vertices at the end before, 44,344 after; issue 6,
/// session 28). Replica 0 is not settled while T2 waits
/// ([`JanusServer::settled`]: a checked run goes on until it is).
#[test]
fn a_replay_drops_the_dependencies_nothing_still_waits_for() {
    use super::msg::{CommitInfo, Dep};
    let mut c = Cluster::with_shards(2);
    let a = TxnId::new(NodeId(RECOVERY), 0, 1);
    let t2 = TxnId::new(NodeId(RECOVERY), 0, 2);
    let on_a = Dep {
        txn: a,
        shards: Arc::from([ShardId(1)]),
    };
    let replies = c.ask_server(0, commit_of(t2, vec![on_a]));
    assert!(replies.is_empty(), "T2 waits for A: {replies:?}");
    assert!(!c.servers[0].settled(), "T2 committed, not executed");
    let elsewhere = Arc::new(Incr {
        pieces: vec![PieceSpec {
            shard: ShardId(1),
            reads: vec![Access::all(Y)],
            writes: vec![Access::all(Y)],
            kind: PieceKind::Deferrable,
            inputs: Vec::new(),
            dynamic: false,
        }],
    });
    // Shard 1's answer to replica 0's Inquire about A.
    let replies = c.ask_server(
        0,
        Msg::InquireOk(Arc::new(CommitInfo {
            txn: a,
            proc: elsewhere,
            deps: Vec::new(),
            abandon: false,
        })),
    );
    assert!(
        replies
            .iter()
            .any(|m| matches!(m, Msg::CommitOk { txn, .. } if *txn == t2)),
        "T2 executed once A committed: {replies:?}"
    );
    assert!(c.servers[0].settled(), "T2 executed");
    c.queue.clear();
    c.restart(0);
    assert_eq!(c.per_server("janus_replay_unreached")[0], 1);
    assert_eq!(c.per_server("janus_graph_vertices")[0], 1, "T2 alone");
}

impl Cluster {
    /// Replica 0's Inquire about `ghost` is answered `Forgotten` with
    /// `scc` by the replica it asked; every other message is dropped.
    fn answer_forgotten(&mut self, ghost: TxnId, scc: Option<Arc<[TxnId]>>) {
        let asked = self
            .queue
            .iter()
            .position(|(f, _, m)| {
                *f == NodeId(0) && matches!(m, Msg::Inquire { txn, .. } if *txn == ghost)
            })
            .expect("an Inquire about the unknown ancestor");
        let (_, to, _) = self.queue.remove(asked);
        self.queue.clear();
        let msg = Msg::Forgotten {
            txn: ghost,
            abandon: false,
            scc,
        };
        self.queue.push((to, NodeId(0), msg));
        self.step(0);
    }

    /// Replica 0 answered `t`'s Commit from the recovery node.
    fn assert_commit_ok(&self, t: TxnId) {
        assert!(
            self.queue.iter().any(|(f, d, m)| *f == NodeId(0)
                && d.0 == RECOVERY
                && matches!(m, Msg::CommitOk { txn, .. } if *txn == t)),
            "{:?}",
            self.queue
        );
    }
}

/// A component adopted from a `Forgotten` answer may hold a member this
/// replica executed and forgot: it stays a cut-off, not a DECIDED vertex
/// that nothing finishes. Here T executed everywhere and was forgotten;
/// T2 depends on T and on a ghost whose answer names T in its component,
/// and T2 executes at once (before the fix it waited behind T to the end:
/// asked, T's replicas answered `Forgotten`, which finished nothing;
/// `janus_seeds`' crash runs with checkpoints, seed 27).
#[test]
fn a_forgotten_member_of_an_adopted_component_does_not_block() {
    use super::msg::Dep;
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.per_server("janus_forgotten"), [1, 1, 1]);
    let ghost = TxnId::new(NodeId(RECOVERY), 0, 1);
    let t2 = TxnId::new(NodeId(RECOVERY), 0, 2);
    let deps = [ghost, t]
        .into_iter()
        .map(|txn| Dep {
            txn,
            shards: Arc::from([ShardId(0)]),
        })
        .collect();
    let replies = c.ask_server(0, commit_of(t2, deps));
    assert!(replies.is_empty(), "{replies:?}");
    c.answer_forgotten(ghost, Some(Arc::from([t, ghost])));
    c.assert_commit_ok(t2);
}

/// Algorithm 4, l. 45 sends an Inquire "to a nearest server" of the
/// ancestor (§3.1): each replica of shard 0 asks the replica of shard 1 at
/// its own place in its group, as the authors' code does, not all of them
/// the first replica of shard 1 (issue 6, 2026-11-29 morning: that made
/// the first replicas the saturated servers of one-site TPC-C).
#[test]
fn each_replica_inquires_the_replica_at_its_own_place() {
    use super::msg::Dep;
    let mut c = Cluster::with_shards(2);
    let ghost = TxnId::new(NodeId(RECOVERY), 0, 1);
    let t2 = TxnId::new(NodeId(RECOVERY), 0, 2);
    for r in 0..3 {
        let dep = Dep {
            txn: ghost,
            shards: Arc::from([ShardId(1)]),
        };
        c.ask_server(r, commit_of(t2, vec![dep]));
        let asked: Vec<u32> = c
            .queue
            .iter()
            .filter(|(f, _, m)| f.0 == r && matches!(m, Msg::Inquire { txn, .. } if *txn == ghost))
            .map(|(_, to, _)| to.0)
            .collect();
        assert_eq!(asked, [3 + r], "replica {r}");
    }
}

// ---- replica crashes (super::wal) ----

/// A replica's promises survive its crash (§3.3): after it pre-accepted T
/// and promised ballot 1 to a recovery coordinator, and promised ballot 1
/// for U, which it never saw, it restarts from its log. It still refuses
/// the lower ballot 0 (the coordinator's late Accept and PreAccept, U's
/// late PreAccept) and reports the same dependencies for T to a higher
/// Prepare. Without the log it would accept ballot 0 again.
#[test]
fn a_restarted_replica_keeps_its_ballot_promises() {
    use super::msg::Prepared;
    let mut c = Cluster::new();
    let t0 = c.submit(0);
    c.run();
    // T conflicts with T0's write: its dependencies here are not empty.
    let t = c.submit(0);
    c.deliver_pre_accept(t, 0);
    let deps = match c.queue.iter().find(|(f, _, _)| *f == NodeId(0)) {
        Some((_, _, Msg::PreAcceptOk { deps, .. })) => deps.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(deps.iter().map(|d| d.txn).collect::<Vec<_>>(), [t0]);
    let promised = c.ask_server(0, Msg::Prepare { txn: t, ballot: 1 });
    assert!(matches!(promised[..], [Msg::PrepareOk { .. }]));
    let u = TxnId::new(NodeId(RECOVERY), 0, 7);
    let promised = c.ask_server(0, Msg::Prepare { txn: u, ballot: 1 });
    assert!(matches!(
        promised[..],
        [Msg::PrepareOk { prepared: None, .. }]
    ));

    c.restart(0);
    let late_accept = c.ask_server(
        0,
        Msg::Accept {
            txn: t,
            ballot: 0,
            deps: Arc::new(deps.clone()),
            abandon: false,
            proc: None,
        },
    );
    assert!(
        matches!(late_accept[..], [Msg::AcceptNotOk { ballot: 1, .. }]),
        "{late_accept:?}"
    );
    for txn in [t, u] {
        let late = c.ask_server(
            0,
            Msg::PreAccept {
                txn,
                ballot: 0,
                proc: Incr::proc(),
                floor: None,
                done: None,
            },
        );
        assert!(
            matches!(late[..], [Msg::PreAcceptNotOk { ballot: 1, .. }]),
            "{late:?}"
        );
    }
    let higher = c.ask_server(0, Msg::Prepare { txn: t, ballot: 2 });
    let expect = Prepared {
        accepted: None,
        deps,
        abandon: false,
    };
    assert!(
        matches!(&higher[..], [Msg::PrepareOk { ballot: 2, prepared: Some(p), .. }] if *p == expect),
        "{higher:?}"
    );
}

/// A promise leaves only once it is durable: a replica whose PreAccept
/// record has not reached its disk has not answered, and after a crash it
/// does not know T — nobody counted on it.
#[test]
fn a_promise_is_answered_only_once_durable() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.hold_sync = true;
    c.deliver_pre_accept(t, 0);
    assert!(
        !c.queue.iter().any(|(f, _, _)| *f == NodeId(0)),
        "answered before its record is durable: {:?}",
        c.queue
    );
    c.sync(0);
    assert!(c
        .queue
        .iter()
        .any(|(f, _, m)| *f == NodeId(0) && matches!(m, Msg::PreAcceptOk { .. })));

    let t2 = c.submit(1);
    c.deliver_pre_accept(t2, 1);
    c.restart(1);
    c.hold_sync = false;
    let held = c.ask_server(1, Msg::Prepare { txn: t2, ballot: 1 });
    assert!(
        matches!(held[..], [Msg::PrepareOk { prepared: None, .. }]),
        "{held:?}"
    );
}

/// A replica restarts from its log with the data it had: T executed at
/// every replica and was forgotten by all (no replica could tell the
/// restarted one about it again), yet replica 0 holds T's write after its
/// restart, and T's tombstone. Replica 2 then misses T2 entirely while it
/// is down; after its restart it asks the others what committed meanwhile
/// (CatchUp), executes T2, and every replica holds the same data.
#[test]
fn a_restarted_replica_replays_its_data_and_catches_up() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.per_server("janus_forgotten"), [1, 1, 1]);
    c.restart(0);
    c.assert_replicas_hold(11, t);
    assert!(c.per_server("janus_replayed")[0] >= 4);
    let late = c.ask_server(
        0,
        Msg::Inquire {
            txn: t,
            its_shard: true,
        },
    );
    assert!(
        matches!(late[..], [Msg::Forgotten { txn, .. }] if txn == t),
        "{late:?}"
    );

    let t2 = c.submit(1);
    // Replica 2 is down while T2 runs and is announced.
    c.rounds(10, Some(2));
    assert_eq!(c.saw(t2), 11);
    c.restart(2);
    c.rounds(30, None);
    c.assert_replicas_hold(12, t2);
    assert_eq!(c.per_server("janus_caught_up"), [1, 0, 1]);
    assert_eq!(c.per_server("janus_committed_unexecuted"), [0, 0, 0]);
}

/// §3.3 across a crash: T's coordinator crashed after its PreAccept
/// reached replica 0 only, and replica 0 crashed too. Restarted from its
/// log, replica 0 still holds T — procedure included — and becomes its
/// recovery coordinator, above the ballot it had promised: every replica
/// executes T once.
#[test]
fn a_restarted_replica_recovers_what_it_pre_accepted() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.deliver_pre_accept(t, 0);
    c.crash(0);
    c.restart(0);
    let mut order = SmallRng::seed_from_u64(3);
    c.shuffle_run(&mut order, Some(0), 80);
    assert_eq!(c.counter("janus_recoveries"), 1, "one replica recovered T");
    c.assert_replicas_hold(11, t);
}

/// Group commit ([`super::wal`]): records issued while a write is in
/// flight wait for it and go out together in the next write; an answer
/// leaves only once the write holding its record is durable, and a crash
/// loses exactly the writes not yet durable — here T2's and T3's
/// PreAccepted records, never answered, so nobody counted on them.
#[test]
fn group_commit_answers_after_the_write_and_a_crash_loses_only_the_tail() {
    let mut c = Cluster::new();
    c.hold_sync = true;
    let t1 = c.submit(0);
    let t2 = c.submit(1);
    let t3 = c.submit(0);
    c.deliver_pre_accept(t1, 0);
    assert_eq!(c.unsynced[0].len(), 1, "one write in flight");
    c.deliver_pre_accept(t2, 0);
    c.deliver_pre_accept(t3, 0);
    assert_eq!(c.unsynced[0].len(), 1, "T2 and T3 wait for the next write");
    let answered = |c: &Cluster| -> Vec<TxnId> {
        c.queue
            .iter()
            .filter_map(|(f, _, m)| match m {
                Msg::PreAcceptOk { txn, .. } if *f == NodeId(0) => Some(*txn),
                _ => None,
            })
            .collect()
    };
    assert!(answered(&c).is_empty(), "{:?}", c.queue);
    c.sync(0);
    assert_eq!(answered(&c), [t1]);
    let next = &c.unsynced[0];
    assert_eq!(next.len(), 1, "one write for both records");
    assert_eq!(super::wal::records(&next[0].1).expect("splits").len(), 2);
    c.restart(0);
    c.hold_sync = false;
    for (t, known) in [(t1, true), (t2, false), (t3, false)] {
        let held = c.ask_server(0, Msg::Prepare { txn: t, ballot: 1 });
        assert!(
            matches!(&held[..], [Msg::PrepareOk { prepared, .. }] if prepared.is_some() == known),
            "{t:?}: {held:?}"
        );
    }
}

/// A retried Inquire goes to every replica of the ancestor's shards.
/// Crash seed 187 of `janus_seeds` (with group commit) diverged when a
/// restarted replica asked one replica per try: its first Inquire was
/// lost, the next replica asked was down, the next cut off, and the
/// backoff put the last tries, lost too, past the end of the run. Here
/// replica 3 (shard 1) waits for T1 (shard 0 only): its Inquire to
/// replica 0 is lost and replica 1 is down; one retransmit period later
/// replicas 0 and 2 are asked as well, answer, and T2 goes on (it asks
/// shard 0 for its piece 0's output).
#[test]
fn a_retried_inquire_reaches_every_replica_of_the_ancestor() {
    use super::msg::{CommitInfo, Dep};
    let mut c = Cluster::with_shards(2);
    let t1 = c.submit(0);
    c.run();
    let t2 = TxnId::new(NodeId(RECOVERY), 0, 1);
    let commit = Msg::Commit(Arc::new(CommitInfo {
        txn: t2,
        proc: Feed::proc(100),
        deps: vec![Dep {
            txn: t1,
            shards: Arc::from([ShardId(0)]),
        }],
        abandon: false,
    }));
    assert!(c.ask_server(3, commit).is_empty());
    assert_eq!(c.inquired(3, t1), [0], "first one replica");
    c.queue.clear();
    c.advance(JanusConfig::default().retransmit, &[]);
    assert_eq!(c.inquired(3, t1), [0, 1, 2], "then all of them");
    let down = |d: NodeId, m: &Msg| d.0 == 1 || matches!(m, Msg::FetchOutput { .. });
    c.run_holding(down);
    assert!(
        c.queue
            .iter()
            .any(|(f, _, m)| f.0 == 3
                && matches!(m, Msg::FetchOutput { txn, piece: 0 } if *txn == t2)),
        "T2 still waits for T1: {:?}",
        c.queue
    );
}

/// The own coordinator's Accept carries the procedure to a replica whose
/// PreAccept-OK it lacks. Crash seeds 169 (with group commit) and 121
/// (without) of `janus_seeds` stalled every client for 130–170 ms, past
/// the measurement window: a coordinator took the slow
/// path with two of a shard's three PreAccept-OKs, the third replica had
/// never received the PreAccept and dropped the Accept (it had no
/// procedure), and one of the two that had answered crashed — no
/// majority of Accept-OKs until it came back, found by the next resend
/// (up to 160 ms apart by then). Here replica 2 misses T's PreAccept, the coordinator goes
/// slow with replicas 0 and 1, and replica 1 goes down: replicas 0 and 2
/// accept and T commits within a few retransmit periods, long before any
/// replica would suspect the coordinator and recover T (§3.3).
#[test]
fn an_accept_reaches_a_replica_that_missed_the_pre_accept() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.deliver_pre_accept(t, 0);
    c.deliver_pre_accept(t, 1);
    c.queue
        .retain(|(_, d, m)| !(d.0 == 2 && matches!(m, Msg::PreAccept { .. })));
    c.run();
    assert!(c.done.is_empty(), "two of three: no fast path");
    let down = |d: NodeId, _: &Msg| d.0 == 1;
    let rto = JanusConfig::default().retransmit;
    for _ in 0..4 {
        c.advance(rto, &[0]);
        c.run_holding(down);
    }
    assert!(c.now < JanusConfig::default().recover_after);
    assert_eq!(c.saw(t), 10);
    assert_eq!(c.paths(), (0, 1));
    assert_eq!(c.counter("janus_recoveries"), 0);
    assert_eq!(c.held(0, X)[0], (11, t.version()));
    assert_eq!(c.held(0, X)[2], (11, t.version()));
}

/// A member of an adopted component whose shards are not known here is
/// asked of every server at once and again on a retry, not only of the
/// replica that named it (which stays silent about a member it forgot
/// only as an ancestor: three-site TPC-C, session 26, components waited a
/// retransmit period behind such members); and members adopted already
/// are not asked again. Crash seed 629
/// of `janus_seeds` diverged: a restarted replica adopted a component
/// from a `Forgotten` answer, one member of which had no pieces here and
/// no dependency naming its shards, so it asked only the answering
/// replica (of a third shard), which had learnt that member by Inquire
/// before its own restart and no longer knew it — until the end of the
/// run; meanwhile each `Forgotten` answer about one member made it ask
/// for another back and forth. Here replica 0 executes T1 (x++) whose
/// dependency T3 (shard 1) was forgotten in the component {T1, T2, T3,
/// T4}: T2 and T4 are asked of every other server; replica 4's
/// `Forgotten` about T2 does not make replica 0 ask for T3 again; the
/// retry about T4 goes to every other server, and replica 3's answer lets
/// T1 run.
#[test]
fn an_adopted_member_of_unknown_shards_is_asked_of_every_server() {
    use super::msg::{CommitInfo, Dep};
    let mut c = Cluster::with_shards(2);
    let id = |n| TxnId::new(NodeId(RECOVERY), 0, n);
    let (t1, t2, t3, t4) = (id(1), id(2), id(3), id(4));
    let commit = Msg::Commit(Arc::new(CommitInfo {
        txn: t1,
        proc: Incr::proc(),
        deps: vec![Dep {
            txn: t3,
            shards: Arc::from([ShardId(1)]),
        }],
        abandon: false,
    }));
    assert!(c.ask_server(0, commit).is_empty(), "T1 waits for T3");
    c.queue.clear();
    let scc: Arc<[TxnId]> = Arc::from([t1, t2, t3, t4]);
    let forgotten = |txn| Msg::Forgotten {
        txn,
        abandon: false,
        scc: Some(scc.clone()),
    };
    c.queue.push((NodeId(4), NodeId(0), forgotten(t3)));
    c.step(0);
    let every = vec![1, 2, 3, 4, 5];
    assert_eq!(
        (c.inquired(0, t2), c.inquired(0, t4)),
        (every.clone(), every)
    );
    c.queue.clear();
    c.queue.push((NodeId(4), NodeId(0), forgotten(t2)));
    c.step(0);
    assert!(c.inquired(0, t3).is_empty(), "asked again: {:?}", c.queue);
    c.queue.clear();
    c.advance(JanusConfig::default().retransmit, &[]);
    assert_eq!(c.inquired(0, t4), [1, 2, 3, 4, 5], "then every server");
    c.queue.clear();
    c.queue.push((NodeId(3), NodeId(0), forgotten(t4)));
    c.step(0);
    assert_eq!(c.held(0, X)[0], (11, t1.version()), "T1 ran");
}

/// The dependencies replica `r` answered `txn`'s PreAccept with.
fn pre_accept_deps(c: &Cluster, txn: TxnId, r: u32) -> Vec<TxnId> {
    let found = c.queue.iter().find_map(|(f, _, m)| match m {
        Msg::PreAcceptOk { txn: t, deps, .. } if *f == NodeId(r) && *t == txn => Some(deps),
        _ => None,
    });
    found
        .expect("a PreAcceptOk")
        .iter()
        .map(|d| d.txn)
        .collect()
}

/// Per column (Janus §3; the authors' code): two transactions on disjoint
/// columns of one row get no dependency edge, one on a common column does;
/// every replica then holds each column's last writer, which is what the
/// history checked per column reads.
#[test]
fn disjoint_columns_of_a_row_do_not_conflict_a_common_column_does() {
    let mut c = Cluster::new();
    let t1 = c.submit_proc(0, ColIncr::proc(0));
    c.deliver_pre_accept(t1, 0);
    let t2 = c.submit_proc(1, ColIncr::proc(1));
    c.deliver_pre_accept(t2, 0);
    assert_eq!(pre_accept_deps(&c, t2, 0), [], "disjoint columns");
    let t3 = c.submit_proc(0, ColIncr::proc(0));
    c.deliver_pre_accept(t3, 0);
    assert_eq!(pre_accept_deps(&c, t3, 0), [t1], "column 0 in common");
    c.run();
    assert_eq!(c.done.len(), 3, "all commit");
    assert_eq!((c.saw(t1), c.saw(t2), c.saw(t3)), (0, 0, 1));
    for (r, s) in c.servers.iter().enumerate() {
        let store = s.store().unwrap();
        let v = store.get(Y).map(|rec| &rec.value);
        assert_eq!(
            (ColIncr::counter(v, 0), ColIncr::counter(v, 1)),
            (2, 1),
            "replica {r}"
        );
        let mut last = store.column_versions(Y, Columns(0b11));
        last.sort_unstable_by_key(|(c, _)| c.0);
        assert_eq!(
            last,
            [(Columns(0b01), t3.version()), (Columns(0b10), t2.version())],
            "replica {r}"
        );
    }
}

/// Per row ([`JanusConfig::per_column`] off), the same two transactions on
/// disjoint columns conflict through their row.
#[test]
fn per_row_disjoint_columns_of_a_row_conflict() {
    let mut c = Cluster::new();
    for s in &mut c.servers {
        s.set_per_column(false);
    }
    let t1 = c.submit_proc(0, ColIncr::proc(0));
    c.deliver_pre_accept(t1, 0);
    let t2 = c.submit_proc(1, ColIncr::proc(1));
    c.deliver_pre_accept(t2, 0);
    assert_eq!(pre_accept_deps(&c, t2, 0), [t1]);
}

impl Cluster {
    /// [`Self::run`], losing every message `lose` picks.
    fn run_losing(&mut self, lose: &impl Fn(&Msg) -> bool) {
        loop {
            self.queue.retain(|(_, _, m)| !lose(m));
            if self.queue.is_empty() {
                break;
            }
            self.step(0);
        }
    }

    /// [`Self::rounds`], losing every message `lose` picks.
    fn rounds_losing(&mut self, rounds: u32, lose: impl Fn(&Msg) -> bool) {
        let alive: Vec<usize> = (0..self.coords.len()).collect();
        for _ in 0..rounds {
            self.run_losing(&lose);
            self.advance(10 * MS, &alive);
        }
    }
}

/// Issue 6 (`gc`, *what bounds the record*): a replica keeps a forgotten
/// transaction's component while a member of it may be unexecuted at some
/// replica of its shards, and drops it once each member was forgotten here
/// with pieces here or another shard's replica said it forgot it with
/// pieces there ([`Msg::Settled`]) — each then executed at every replica
/// of each of its shards. T1 (`x++`, shard 0) and T2 (`x++` at shard 0,
/// `y += x` at shard 1) reach shard 0's replicas in opposite orders: one
/// component {T1, T2} everywhere. Shard 0 holds both members and drops it
/// at once; shard 1 holds T2 only and keeps it while every `Settled`
/// answer is lost — long after every tombstone expired an Inquire about
/// T2 there still gets the component, which a server with a member
/// unexecuted would need — and drops it once one comes. A `Settled`
/// answer lists only what the replica forgot with pieces at its shard
/// (shard 1 forgot T1 too, as an ancestor: it does not vouch for it),
/// and a late Commit naming T1 is a cut-off, as before.
#[test]
fn a_component_is_kept_until_every_member_is_known_executed_everywhere() {
    use super::msg::Dep;
    let mut c = Cluster::with_shards(2);
    let t1 = c.submit(0);
    let t2 = c.submit_proc(1, Feed::proc(100));
    assert!(t1 < t2);
    c.cross_pre_accepts(t1, t2);
    let settled = |m: &Msg| matches!(m, Msg::Settled { ask: false, .. });
    c.rounds_losing(20, settled);
    assert_eq!(c.done.len(), 2, "both commit");
    // Later transactions of both coordinators pass their floors over T1
    // and T2, so that their tombstones expire.
    c.submit(0);
    let t4 = c.submit_proc(1, Feed::proc(100));
    c.rounds_losing(20, settled);
    assert_eq!(c.done.len(), 4);
    assert_eq!(c.held(0, X), vec![(14, t4.version()); 3], "T1, T2, T3, T4");
    let cfg = JanusConfig::default();
    for _ in 0..cfg.forget_epochs + 2 {
        c.advance(cfg.epoch, &[]);
        c.run_losing(&settled);
    }
    let forgotten = c.per_server("janus_forgotten");
    assert_eq!(forgotten[..3], [4, 4, 4], "{forgotten:?}");
    assert_eq!(c.per_server("janus_forgot_components"), [0, 0, 0, 1, 1, 1]);
    let tombstones = c.per_server("janus_tombstones");
    assert!(
        tombstones.iter().all(|&n| n <= 2),
        "{tombstones:?}: T3's, T4's"
    );
    let answer = |c: &mut Cluster, r: u32, txn: TxnId| match &c.ask_server(
        r,
        Msg::Inquire {
            txn,
            its_shard: true,
        },
    )[..]
    {
        [Msg::Forgotten { txn: x, scc, .. }] if *x == txn => scc.as_ref().map(|s| s.to_vec()),
        other => panic!("{txn:?} at {r}: {other:?}"),
    };
    for r in 3..6 {
        assert_eq!(answer(&mut c, r, t2), Some(vec![t1, t2]), "replica {r}");
    }
    for r in 0..3 {
        assert_eq!(answer(&mut c, r, t1), None, "replica {r}");
        assert_eq!(answer(&mut c, r, t2), None, "replica {r}");
    }
    let vouch = |c: &mut Cluster, r: u32| {
        let ask = Msg::Settled {
            txns: Arc::from([t1, t2]),
            ask: true,
        };
        match &c.ask_server(r, ask)[..] {
            [Msg::Settled { txns, ask: false }] => txns.to_vec(),
            [] => Vec::new(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(vouch(&mut c, 0), [t1, t2]);
    assert_eq!(vouch(&mut c, 3), [t2], "T1 has no pieces at shard 1");
    // The answers come through now.
    c.advance(cfg.epoch, &[]);
    c.run();
    assert_eq!(c.per_server("janus_forgot_components"), [0; 6]);
    for r in 3..6 {
        assert_eq!(answer(&mut c, r, t2), None, "replica {r}");
    }
    let late = TxnId::new(NodeId(RECOVERY), 0, 1);
    let on_t1 = Dep {
        txn: t1,
        shards: Arc::from([ShardId(0)]),
    };
    match &c.ask_server(0, commit_of(late, vec![on_t1]))[..] {
        [Msg::CommitOk { txn, results, .. }] if *txn == late => {
            assert_eq!(dec(results.first().map(|r| &r.output)), 14);
        }
        other => panic!("{other:?}"),
    }
    assert!(c.inquired(0, t1).is_empty(), "{:?}", c.queue);
    assert_eq!(c.per_server("janus_forgotten_run_again"), [0; 6]);
}

/// Issue 6 (`gc`, *what bounds the record*): in a long fault-free run of
/// one shard, where every component's members all have pieces here, a
/// replica's record grows only by its bitmaps (a bit per transaction id of
/// each coordinator, here 300 each) between 300 and 600 transactions that
/// formed 300 components of two (opposite arrival orders, §3.2), and the
/// components it keeps not at all. Before session 24 every member kept a
/// map entry and its component for as long as the replica lived (about
/// 60 bytes per pair here).
#[test]
fn the_components_kept_stop_growing_in_a_long_run() {
    let mut c = Cluster::new();
    let mut midway = (Vec::new(), Vec::new());
    for i in 0..300 {
        let t1 = c.submit(0);
        let t2 = c.submit(1);
        c.cross_pre_accepts(t1, t2);
        c.rounds(8, None);
        if i == 149 {
            c.rounds(20, None);
            midway = (
                c.per_server("janus_forgot_record_bytes"),
                c.per_server("janus_forgot_component_bytes"),
            );
        }
    }
    c.rounds(20, None);
    assert_eq!(c.paths(), (0, 600), "every pair formed a component");
    assert_eq!(c.per_server("janus_graph_vertices"), [0, 0, 0]);
    assert_eq!(c.per_server("janus_forgot_components"), [0, 0, 0]);
    let end = c.per_server("janus_forgot_record_bytes");
    for (r, (&before, &after)) in midway.0.iter().zip(&end).enumerate() {
        // Two coordinators' bitmaps of 300 more ids each, whose vectors
        // may double: at most 2 * 600 / 8 bytes.
        let grew = after.saturating_sub(before);
        assert!(grew <= 150, "replica {r}: {before} -> {after}");
    }
    assert_eq!(c.per_server("janus_forgot_component_bytes"), midway.1);
    assert_eq!(c.per_server("janus_forgotten_run_again"), [0, 0, 0]);
    c.assert_replicas_hold(610, TxnId::new(NodeId(4), 0, 600));
}

/// A server of another shard that learnt T by Inquire and forgot it as an
/// ancestor (DECIDED with nothing unexecuted behind it there) must not
/// answer a later Inquire about T with `Forgotten`: that answer says T
/// executed everywhere, and a replica of T's shard that had not seen T yet
/// adopted it as done and never ran it (issue 6, session 24: a restarted
/// replica over `tcp` ran a dependent first and diverged). It stays
/// silent; the asker's retry reaches T's own replicas.
#[test]
fn an_ancestor_forgotten_by_another_shard_is_not_answered_as_executed() {
    use super::msg::{CommitInfo, Dep};
    let mut c = Cluster::with_shards(2);
    let t = TxnId::new(NodeId(RECOVERY), 0, 1);
    let t2 = TxnId::new(NodeId(RECOVERY), 0, 2);
    let dep = Dep {
        txn: t,
        shards: Arc::from([ShardId(0)]),
    };
    let commit = Msg::Commit(Arc::new(CommitInfo {
        txn: t2,
        proc: Feed::proc(100),
        deps: vec![dep],
        abandon: false,
    }));
    c.ask_server(3, commit);
    assert!(
        c.queue
            .iter()
            .any(|(f, _, m)| f.0 == 3 && matches!(m, Msg::Inquire { txn, .. } if *txn == t)),
        "server 3 asks about its unknown ancestor: {:?}",
        c.queue
    );
    let info = Arc::new(CommitInfo {
        txn: t,
        proc: Incr::proc(),
        deps: Vec::new(),
        abandon: false,
    });
    c.queue.clear();
    c.ask_server(3, Msg::InquireOk(info));
    c.rounds(20, None);
    assert_eq!(c.per_server("janus_forgotten")[3], 1, "t forgotten at 3");
    let replies = c.ask_server(
        3,
        Msg::Inquire {
            txn: t,
            its_shard: true,
        },
    );
    assert!(
        !replies.iter().any(|m| matches!(m, Msg::Forgotten { .. })),
        "{replies:?}"
    );
}

// ---- checkpoints (super::image) ----

impl Cluster {
    /// Server `r` holds each of `txns` pre-accepted (a Prepare finds it).
    fn assert_holds(&mut self, r: u32, txns: &[TxnId]) {
        for &t in txns {
            let held = self.ask_server(r, Msg::Prepare { txn: t, ballot: 1 });
            let found = matches!(
                held[..],
                [Msg::PrepareOk {
                    prepared: Some(_),
                    ..
                }]
            );
            assert!(found, "{t:?}: {held:?}");
        }
    }
}

/// Replica 0 of a one-shard cluster started on `log`: its answers to
/// `probes` (each promise answered once durable), its store and what it
/// reports left pending.
fn probe(log: Vec<Bytes>, probes: &[Msg]) -> (Vec<String>, Vec<String>, Vec<(&'static str, u64)>) {
    let topology = Arc::new(Topology::new(1, 3, 2));
    let mut s = server(&topology, 0, log);
    let mut rng = SmallRng::seed_from_u64(1);
    let mut answers = Vec::new();
    let mut effects = Vec::new();
    s.on_start(&mut Ctx::new(0, NodeId(0), &mut rng, &mut effects));
    for m in probes {
        effects.clear();
        let mut ctx = Ctx::new(0, NodeId(0), &mut rng, &mut effects);
        s.on_message(&mut ctx, NodeId(RECOVERY), m.clone());
        let mut sent = Vec::new();
        while !effects.is_empty() {
            let mut synced = Vec::new();
            for e in effects.drain(..) {
                match e {
                    Effect::Send { to, msg } if to == NodeId(RECOVERY) => sent.push(msg),
                    Effect::Persist { token, .. } => synced.push(token),
                    _ => {}
                }
            }
            for token in synced {
                let mut ctx = Ctx::new(0, NodeId(0), &mut rng, &mut effects);
                s.on_persisted(&mut ctx, token);
            }
        }
        answers.push(format!("{sent:?}"));
    }
    let store = s.store().unwrap();
    let rows = store
        .records_sorted()
        .into_iter()
        .map(|(k, r)| {
            format!(
                "{k:?} {:?} {:?} {:?}",
                r.meta.version,
                r.value,
                store.writers(k)
            )
        })
        .collect();
    let pending = s
        .take_report()
        .gauges
        .into_iter()
        .filter(|(n, _)| {
            matches!(
                *n,
                "janus_committed_unexecuted"
                    | "janus_preaccepted_uncommitted"
                    | "janus_executed_unforgotten"
            )
        })
        .collect();
    (answers, rows, pending)
}

/// A checkpoint ([`super::image`]) replaces the log before it: replica 0
/// restarted from its last image and the writes after it answers as one
/// restarted from its whole log — the data, a transaction it executed and
/// forgot (`Forgotten`, never a promise), one it executed, one it only
/// pre-accepted (its ballot and dependencies), a ballot promised for one
/// it never saw, one pre-accepted after the image — while replaying a
/// fraction of the records.
#[test]
fn a_replica_restarts_from_its_checkpoint_as_from_its_whole_log() {
    let mut c = Cluster::new();
    let t = c.submit(0);
    c.rounds(20, None);
    assert_eq!(c.per_server("janus_forgotten"), [1, 1, 1]);
    c.checkpoint(0);
    let t2 = c.submit(1);
    c.rounds(1, None);
    let t3 = c.submit(0);
    c.deliver_pre_accept(t3, 0);
    let u = TxnId::new(NodeId(RECOVERY), 0, 7);
    let promised = c.ask_server(0, Msg::Prepare { txn: u, ballot: 3 });
    assert!(matches!(promised[..], [Msg::PrepareOk { .. }]));
    c.checkpoint(0);
    let t4 = c.submit(1);
    c.deliver_pre_accept(t4, 0);
    let (full, log) = (c.full[0].clone(), c.disks[0].clone());
    assert_eq!(log.len(), 2, "the image and T4's write");
    let probes: Vec<Msg> = [t, t2, t3, t4, u]
        .into_iter()
        .flat_map(|txn| {
            [
                Msg::Inquire {
                    txn,
                    its_shard: true,
                },
                Msg::Prepare { txn, ballot: 2 },
                Msg::Prepare { txn, ballot: 9 },
            ]
        })
        .collect();
    let (want, want_rows, want_pending) = probe(full.clone(), &probes);
    let (got, got_rows, got_pending) = probe(log, &probes);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(w, g, "probe {i}: {:?}", probes[i]);
    }
    assert!(want[0].contains("Forgotten"), "{}", want[0]);
    assert!(
        want[13].contains("PrepareNotOk"),
        "U's promise: {}",
        want[13]
    );
    assert_eq!(want_rows, got_rows);
    assert_eq!(want_pending, got_pending);
    assert_eq!(
        want_pending,
        [
            ("janus_committed_unexecuted", 0),
            ("janus_preaccepted_uncommitted", 2),
            ("janus_executed_unforgotten", 1),
        ]
    );
}

/// A checkpoint taken while records wait for the next write (group
/// commit): the image holds their effects already and they reach the log
/// after it, so replay passes over them. Restarted from the image and
/// that write, replica 0 replays the image alone and still holds all
/// three PreAccepts.
#[test]
fn a_checkpoint_covers_the_records_still_waiting_for_their_write() {
    let mut c = Cluster::new();
    c.hold_sync = true;
    let t1 = c.submit(0);
    let t2 = c.submit(1);
    let t3 = c.submit(0);
    c.deliver_pre_accept(t1, 0);
    c.deliver_pre_accept(t2, 0);
    c.deliver_pre_accept(t3, 0);
    assert_eq!(c.unsynced[0].len(), 1, "T2 and T3 wait for the next write");
    c.checkpoint(0);
    c.sync(0);
    c.sync(0);
    assert_eq!(c.disks[0].len(), 2, "the image and T2's and T3's write");
    c.hold_sync = false;
    c.restart(0);
    assert_eq!(c.per_server("janus_replayed"), [1, 0, 0]);
    c.assert_holds(0, &[t1, t2, t3]);
}

/// The write an image's records went into is lost in a crash: the
/// restarted replica holds them from the image, and its own first record
/// ([`super::wal::Record::Restarted`]) ends what the image says to pass
/// over, so that a second restart from the same image still replays every
/// record of the first restart — here T3's PreAccept, which the replica
/// answered (without that record it would be the one passed over).
#[test]
fn a_restart_ends_what_an_image_passes_over() {
    let mut c = Cluster::new();
    c.hold_sync = true;
    let t1 = c.submit(0);
    let t2 = c.submit(1);
    c.deliver_pre_accept(t1, 0);
    c.deliver_pre_accept(t2, 0);
    c.checkpoint(0);
    // T1's write is durable, then the image; T2's write is lost.
    c.sync(0);
    assert_eq!(c.disks[0].len(), 1, "the image alone");
    c.restart(0);
    c.hold_sync = false;
    let t3 = c.submit(0);
    c.deliver_pre_accept(t3, 0);
    assert!(c.queue.iter().any(
        |(f, _, m)| *f == NodeId(0) && matches!(m, Msg::PreAcceptOk { txn, .. } if *txn == t3)
    ));
    c.restart(0);
    c.assert_holds(0, &[t1, t2, t3]);
}

/// A replica restarted in a new process (`tcp`: its clock starts again
/// at 0) counts epochs on from the one its log restored: counted from 0,
/// it collected nothing until it had run as long as its last incarnation
/// (issue 6, session 29).
#[test]
fn a_restart_with_a_fresh_clock_counts_epochs_on_from_its_log() {
    let mut c = Cluster::new();
    c.submit(0);
    c.rounds(20, None);
    let cfg = JanusConfig::default();
    for _ in 0..2 * cfg.forget_epochs {
        c.advance(cfg.epoch, &[]);
    }
    let topology = Arc::new(Topology::new(1, 3, 2));
    let mut s = server(&topology, 0, c.disks[0].clone());
    // The epoch of its last Forgotten record.
    let restored = s.epoch();
    assert!(restored > 0, "something was forgotten at a later epoch");
    let mut effects = Vec::new();
    s.on_start(&mut Ctx::new(0, NodeId(0), &mut c.rng, &mut effects));
    s.on_timer(
        &mut Ctx::new(cfg.epoch + 1, NodeId(0), &mut c.rng, &mut effects),
        TimerId(1),
    );
    assert_eq!(s.epoch(), restored + 1);
}
