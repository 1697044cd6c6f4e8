//! Janus's replicas and coordinators stepped by hand, message by message, to
//! replay the paper's interleavings exactly: one shard of three replicas
//! (nodes 0–2) and two coordinators (nodes 3, 4).

use super::{JanusConfig, JanusCoordinator, JanusServer, Msg};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, TxnId};
use tessera_core::node::{Ctx, Effect, Node};
use tessera_core::protocol::{Coordinator, CoordinatorEnv, ServerEnv};
use tessera_core::storage::Store;
use tessera_core::topology::Topology;
use tessera_core::txn::{
    Access, Attempt, PieceKind, PieceResult, PieceSpec, Procedure, TxnOutcome, Value,
};

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
    fn execute(&self, _: usize, reads: &[Option<&Value>], _: &[Value]) -> PieceResult {
        let x = dec(reads[0]);
        PieceResult {
            writes: vec![(X, enc(x + 1))],
            output: enc(x),
            user_abort: false,
        }
    }
}

struct Cluster {
    servers: Vec<JanusServer>,
    coords: Vec<JanusCoordinator>,
    queue: Vec<(NodeId, NodeId, Msg)>,
    done: Vec<(TxnId, TxnOutcome)>,
    rng: SmallRng,
    seq: u32,
}

/// The node a test plays a recovery coordinator from.
const RECOVERY: u32 = 9;

impl Cluster {
    fn new() -> Self {
        let topology = Arc::new(Topology::new(1, 3, 2));
        let cfg = JanusConfig::default();
        let servers = (0..3)
            .map(|r| {
                let mut store = Store::new();
                store.load(X, enc(10));
                JanusServer::new(
                    cfg.clone(),
                    ServerEnv {
                        me: NodeId(r),
                        shard: ShardId(0),
                        replica: r,
                        topology: topology.clone(),
                        store,
                        recovered: Vec::new(),
                        durable: true,
                    },
                )
            })
            .collect();
        let coords = (3..5)
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
            servers,
            coords,
            queue: Vec::new(),
            done: Vec::new(),
            rng: SmallRng::seed_from_u64(1),
            seq: 0,
        }
    }

    fn collect(&mut self, me: NodeId, effects: Vec<Effect<Msg>>) {
        for e in effects {
            match e {
                Effect::Send { to, msg } => self.queue.push((me, to, msg)),
                Effect::Done { txn, outcome } => self.done.push((txn, outcome)),
                Effect::Timer { .. }
                | Effect::Persist { .. }
                | Effect::Charge { .. }
                | Effect::Finished { .. } => {}
            }
        }
    }

    fn submit(&mut self, c: usize) -> TxnId {
        self.seq += 1;
        let me = NodeId(3 + c as u32);
        let id = TxnId::new(me, 0, self.seq);
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, me, &mut self.rng, &mut effects);
        self.coords[c].submit(
            &mut ctx,
            Attempt {
                id,
                txn: Incr::proc(),
                since: 0,
            },
        );
        self.collect(me, effects);
        id
    }

    fn step(&mut self, i: usize) {
        let (from, to, msg) = self.queue.remove(i);
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, to, &mut self.rng, &mut effects);
        match to.0 {
            0..=2 => self.servers[to.0 as usize].on_message(&mut ctx, from, msg),
            n => self.coords[n as usize - 3].on_message(&mut ctx, from, msg),
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
    c.deliver_pre_accept(t1, 0);
    c.deliver_pre_accept(t2, 0);
    c.deliver_pre_accept(t2, 1);
    c.deliver_pre_accept(t1, 1);
    c.deliver_pre_accept(t2, 2);
    c.deliver_pre_accept(t1, 2);
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
            deps: Vec::new()
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
