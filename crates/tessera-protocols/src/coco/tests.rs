//! Scenario tests of COCO's server role, and of whole transactions on
//! servers and coordinators stepped by hand (snapshot transactions, §5.3).

use super::msg::Msg;
use super::tid::epoch_start;
use super::{Cc, CocoConfig, CocoCoordinator, CocoServer, CommitMode, Isolation, Replication};
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, TxnId, Version};
use tessera_core::node::{Ctx, Effect, Node};
use tessera_core::protocol::{Coordinator, CoordinatorEnv, ServerEnv};
use tessera_core::storage::Store;
use tessera_core::topology::{Role, Topology};
use tessera_core::txn::{
    AbortReason, Access, Attempt, PieceKind, PieceResult, PieceSpec, Procedure, TxnOutcome, Value,
};

/// A server of shard 0 (replica `replica` of three), stepped by hand.
pub(super) struct One {
    pub(super) s: CocoServer,
    rng: rand::rngs::SmallRng,
}

impl One {
    pub(super) fn new(cc: Cc, replica: u32) -> Self {
        One::with(
            CocoConfig::new(cc, CommitMode::Epoch),
            replica,
            Store::new(),
        )
    }

    /// Epoch mode, the primary forwarding each write-back to its backups.
    pub(super) fn replicating_from_primary(cc: Cc, replica: u32) -> Self {
        let mut config = CocoConfig::new(cc, CommitMode::Epoch);
        config.replication = Replication::Primary;
        One::with(config, replica, Store::new())
    }

    pub(super) fn with(config: CocoConfig, replica: u32, store: Store) -> Self {
        One::restarted(config, replica, store, Vec::new())
    }

    /// A server restarted with `recovered` as its durable records.
    pub(super) fn restarted(
        config: CocoConfig,
        replica: u32,
        store: Store,
        recovered: Vec<bytes::Bytes>,
    ) -> Self {
        let topology = Arc::new(Topology::new(1, 3, 1));
        let env = ServerEnv {
            me: NodeId(replica),
            shard: ShardId(0),
            replica,
            topology,
            store,
            recovered,
            durable: true,
            codec: Default::default(),
        };
        One {
            s: CocoServer::new(config, env),
            rng: rand::rngs::SmallRng::seed_from_u64(1),
        }
    }

    pub(super) fn deliver(&mut self, from: u32, msg: Msg) -> Vec<Effect<Msg>> {
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, NodeId(0), &mut self.rng, &mut effects);
        self.s.on_message(&mut ctx, NodeId(from), msg);
        effects
    }

    /// The transaction holding `key`'s write lock here (0: none).
    pub(super) fn lock(&self, key: Key) -> u64 {
        self.s.store().unwrap().get(key).unwrap().meta.lock
    }

    /// Committed write-lock releases since the last report, from the
    /// results counters.
    pub(super) fn write_lock_holds(&mut self) -> u64 {
        let c = self.s.take_report().counters;
        c.iter()
            .find(|(n, _)| *n == "write_lock_holds")
            .map_or(0, |(_, v)| *v)
    }

    pub(super) fn replies(&mut self, from: u32, msg: Msg) -> Vec<Msg> {
        self.deliver(from, msg)
            .into_iter()
            .filter_map(|e| match e {
                Effect::Send { msg, .. } => Some(msg),
                _ => None,
            })
            .collect()
    }
}

fn replicate(seq: u64, ts: u64, v: &'static [u8]) -> Msg {
    Msg::Replicate {
        seq,
        txn: TxnId::new(NodeId(3), 0, seq as u32),
        ts,
        epoch: 1,
        version: Version(ts),
        writes: vec![(Key::new(0, 1), Value::from_static(v))],
    }
}

#[test]
fn backups_apply_only_newer_writes() {
    let mut b = One::new(Cc::PtOcc, 1);
    assert!(matches!(
        b.replies(0, replicate(2, 20, b"new"))[..],
        [Msg::Replicated { seq: 2 }]
    ));
    // The older write arrives late (reordered): acknowledged, not applied.
    assert!(matches!(
        b.replies(0, replicate(1, 10, b"old"))[..],
        [Msg::Replicated { seq: 1 }]
    ));
    let r = b.s.store().unwrap().get(Key::new(0, 1)).unwrap();
    assert_eq!(&r.value[..], b"new");
    assert_eq!(r.meta.wts, 20);
}

fn prepare(txn: TxnId, writes: bool, reads: Vec<(Key, u64)>) -> Msg {
    Msg::Prepare {
        txn,
        floor: txn,
        decided: Vec::new(),
        writes: if writes {
            vec![(Key::new(0, 1), Value::from_static(b"x"))]
        } else {
            Vec::new()
        },
        reads,
        ts: 0,
        round: 1,
    }
}

#[test]
fn no_wait_locks_and_duplicates_are_answered_not_relocked() {
    let mut p = One::replicating_from_primary(Cc::PtOcc, 0);
    let t1 = TxnId::new(NodeId(3), 0, 1);
    let t2 = TxnId::new(NodeId(3), 0, 2);
    assert!(matches!(
        p.replies(3, prepare(t1, true, vec![]))[..],
        [Msg::Prepared { ok: true, .. }]
    ));
    assert!(matches!(
        p.replies(3, prepare(t2, true, vec![]))[..],
        [Msg::Prepared { ok: false, .. }]
    ));
    // A reader of the locked record fails validation.
    let t3 = TxnId::new(NodeId(3), 0, 3);
    assert!(matches!(
        p.replies(3, prepare(t3, false, vec![(Key::new(0, 1), 0)]))[..],
        [Msg::Prepared { ok: false, .. }]
    ));
    assert!(matches!(
        p.replies(3, prepare(t1, true, vec![]))[..],
        [Msg::Prepared { ok: true, .. }]
    ));
    let out = p.replies(
        3,
        Msg::WriteBack {
            txn: t1,
            ts: 77,
            epoch: 1,
        },
    );
    // Epoch mode: acknowledged at once, replicated to both backups.
    assert_eq!(
        out.iter()
            .filter(|m| matches!(m, Msg::Replicate { .. }))
            .count(),
        2
    );
    assert!(out.iter().any(|m| matches!(m, Msg::WrittenBack { .. })));
    // A duplicate write-back installs nothing twice and the lock is free.
    let again = p.replies(
        3,
        Msg::WriteBack {
            txn: t1,
            ts: 99,
            epoch: 1,
        },
    );
    assert!(!again.iter().any(|m| matches!(m, Msg::Replicate { .. })));
    let r = p.s.store().unwrap().get(Key::new(0, 1)).unwrap();
    assert_eq!((r.meta.wts, r.meta.lock), (77, 0));
}

/// The sequence number of the **Replicate** a primary sent in `out`.
fn replicate_seq(out: &[Msg]) -> u64 {
    out.iter()
        .find_map(|m| match m {
            Msg::Replicate { seq, .. } => Some(*seq),
            _ => None,
        })
        .expect("replicated")
}

/// A checked run must not stop while a backup lacks writes its primary
/// installed: the replicas would differ only because the run ended.
#[test]
fn a_primary_is_unsettled_until_its_backups_have_its_writes() {
    let mut p = One::replicating_from_primary(Cc::PtOcc, 0);
    let t1 = TxnId::new(NodeId(3), 0, 1);
    p.replies(3, prepare(t1, true, vec![]));
    assert!(p.s.settled(), "a lock alone changes no replica");
    let out = p.replies(
        3,
        Msg::WriteBack {
            txn: t1,
            ts: 77,
            epoch: 1,
        },
    );
    let seq = replicate_seq(&out);
    assert!(!p.s.settled());
    p.replies(1, Msg::Replicated { seq });
    assert!(!p.s.settled(), "backup 2 has not acknowledged");
    p.replies(2, Msg::Replicated { seq });
    assert!(p.s.settled());
}

/// 2PC(Sync) (§7.1.2): the primary installs at write-back but keeps the
/// write locks until the last backup acknowledges, so a conflicting
/// transaction is refused meanwhile; then the coordinator hears
/// **WrittenBack**. Epoch(Async) releases them at write-back.
#[test]
fn two_pc_sync_holds_write_locks_until_every_backup_has_the_writes() {
    for commit in [CommitMode::TwoPcSync, CommitMode::Epoch] {
        let mut config = CocoConfig::new(Cc::PtOcc, commit);
        config.replication = Replication::Primary;
        let mut p = One::with(config, 0, Store::new());
        let t = |seq| TxnId::new(NodeId(3), 0, seq);
        let lock = |p: &One| p.lock(Key::new(0, 1));
        let holds = |p: &mut One| p.write_lock_holds();
        p.replies(3, prepare(t(1), true, vec![]));
        let wb = Msg::WriteBack {
            txn: t(1),
            ts: 77,
            epoch: 1,
        };
        let out = p.replies(3, wb);
        let seq = replicate_seq(&out);
        let r = p.s.store().unwrap().get(Key::new(0, 1)).unwrap();
        assert_eq!((r.meta.wts, &r.value[..]), (77, &b"x"[..]), "installed");
        if commit == CommitMode::Epoch {
            assert_eq!(lock(&p), 0, "{commit:?} releases at write-back");
            assert_eq!(holds(&mut p), 1);
            continue;
        }
        assert_eq!(holds(&mut p), 0, "still held");
        assert_eq!(lock(&p), t(1).0, "{commit:?} holds until replicated");
        let refused = p.replies(3, prepare(t(2), true, vec![]));
        assert!(
            matches!(refused[..], [Msg::Prepared { ok: false, .. }]),
            "{refused:?}"
        );
        assert!(p.replies(1, Msg::Replicated { seq }).is_empty());
        assert_eq!(lock(&p), t(1).0, "backup 2 has not acknowledged");
        let done = p.replies(2, Msg::Replicated { seq });
        assert!(matches!(done[..], [Msg::WrittenBack { .. }]), "{done:?}");
        assert_eq!(lock(&p), 0);
        assert_eq!(holds(&mut p), 1);
    }
}

/// 2PC(Sync)'s write path, as the authors' code has it (`Silo.h`
/// `write_and_replicate`, §7.1.2): the coordinator sends a distributed
/// transaction's writes to both primaries and all four backups at once,
/// every copy answered to it; the primaries install with the write locks
/// kept and replicate nothing themselves; the commit is reported once all
/// six answered, and only then are the primaries told to release. Before,
/// each primary forwarded its write-back to its backups and answered
/// after theirs: two round trips for a remote primary's writes.
#[test]
fn two_pc_sync_writes_primaries_and_backups_at_once() {
    let config = CocoConfig::new(Cc::PtOcc, CommitMode::TwoPcSync);
    // Shard 0 on nodes 0-2 (x), shard 1 on nodes 3-5 (y), coordinator 6.
    let mut c = Cluster::on(config, Topology::new(2, 3, 1));
    let t = c.submit(0, 1, Rw::proc(true, &[X, Y]));
    let lock = |c: &Cluster| c.servers[0].store().unwrap().get(X).unwrap().meta.lock;
    let kind = |m: &Msg| match m {
        Msg::WriteBack { .. } => "write_back",
        Msg::WrittenBack { .. } => "written_back",
        Msg::Replicate { .. } => "replicate",
        Msg::Replicated { .. } => "replicated",
        Msg::Release { .. } => "release",
        _ => "",
    };
    let mut trace = Vec::new();
    while !c.queue.is_empty() {
        let (from, to, m) = &c.queue[0];
        let k = kind(m);
        if k == "release" && to.0 == 0 {
            assert!(c.committed(t), "reported only after every copy is in");
            assert_eq!(lock(&c), t.0, "x stays locked until the release");
        }
        if !k.is_empty() {
            trace.push((from.0, to.0, k));
        }
        c.step(0);
    }
    assert_eq!(lock(&c), 0, "released");
    let mut sent = trace.clone();
    sent.sort_unstable();
    let mut want = vec![
        (6, 0, "write_back"),
        (6, 3, "write_back"),
        (0, 6, "written_back"),
        (3, 6, "written_back"),
        (6, 0, "release"),
        (6, 3, "release"),
    ];
    for b in [1, 2, 4, 5] {
        want.push((6, b, "replicate"));
        want.push((b, 6, "replicated"));
    }
    want.sort_unstable();
    assert_eq!(sent, want, "{trace:?}");
    let first_answer = trace.iter().position(|m| m.0 != 6).expect("answered");
    assert!(
        trace[..first_answer].iter().all(|m| m.2 != "release") && first_answer == 6,
        "all six copies go out before any answer: {trace:?}"
    );
    let first_release = trace.iter().position(|m| m.2 == "release").expect("sent");
    assert_eq!(
        first_release, 12,
        "release after all six answers: {trace:?}"
    );
    for (n, key) in [(0, X), (1, X), (2, X), (3, Y), (4, Y), (5, Y)] {
        let r = c.servers[n].store().unwrap().get(key).unwrap();
        assert_eq!(r.value, enc(7), "replica {n} has the write");
    }
}

/// 2PC(Sync) with coordinator replication, at the primary: a write-back is
/// answered at once and the write locks are kept until **Release**; one
/// whose release is lost is replicated by the primary itself after a
/// resend period, and its locks go with the backups' answers.
#[test]
fn a_2pc_sync_primary_keeps_write_locks_until_released_or_replicated() {
    use tessera_core::ids::MS;
    let config = CocoConfig::new(Cc::PtOcc, CommitMode::TwoPcSync);
    let mut p = One::with(config, 0, Store::new());
    let t = |seq| TxnId::new(NodeId(3), 0, seq);
    let lock = |p: &One| p.lock(Key::new(0, 1));
    let holds = |p: &mut One| p.write_lock_holds();
    let wb = |txn| Msg::WriteBack {
        txn,
        ts: 77,
        epoch: 1,
    };
    p.replies(3, prepare(t(1), true, vec![]));
    let out = p.replies(3, wb(t(1)));
    assert!(matches!(out[..], [Msg::WrittenBack { .. }]), "{out:?}");
    assert_eq!(lock(&p), t(1).0, "kept until released");
    assert_eq!(holds(&mut p), 0);
    assert!(p.replies(3, Msg::Release { txn: t(1) }).is_empty());
    assert_eq!((lock(&p), holds(&mut p)), (0, 1));

    p.replies(3, prepare(t(2), true, vec![]));
    p.replies(3, wb(t(2)));
    let mut effects = Vec::new();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
    let mut ctx = Ctx::new(10 * MS, NodeId(0), &mut rng, &mut effects);
    p.s.on_timer(&mut ctx, super::server::SWEEP);
    let copies: Vec<(NodeId, u64)> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send {
                to,
                msg: Msg::Replicate { seq, .. },
            } => Some((*to, *seq)),
            _ => None,
        })
        .collect();
    assert_eq!(copies.len(), 2, "{effects:?}");
    assert!(p
        .replies(1, Msg::Replicated { seq: copies[0].1 })
        .is_empty());
    assert_eq!(lock(&p), t(2).0, "backup 2 has not answered");
    assert!(p
        .replies(2, Msg::Replicated { seq: copies[1].1 })
        .is_empty());
    assert_eq!((lock(&p), holds(&mut p)), (0, 1));
}

/// A primary counts why it refused a lock or validation request, by cause
/// and table (Fig. 9's abort rates split, §7.2): a write lock held by
/// another transaction, a read whose record changed, and one unchanged but
/// write-locked by another.
#[test]
fn refusals_are_counted_by_cause_and_table() {
    let mut p = One::new(Cc::PtOcc, 0);
    let t = |seq| TxnId::new(NodeId(3), 0, seq);
    let stock = Key::new(8, 1);
    let on = |txn, writes: Vec<Key>, reads: Vec<(Key, u64)>| Msg::Prepare {
        txn,
        floor: txn,
        decided: Vec::new(),
        writes: writes
            .into_iter()
            .map(|k| (k, Value::from_static(b"x")))
            .collect(),
        reads,
        ts: 0,
        round: 1,
    };
    let ok = |out: Vec<Msg>| matches!(out[..], [Msg::Prepared { ok: true, .. }]);
    assert!(ok(p.replies(3, on(t(1), vec![stock], vec![]))));
    assert!(!ok(p.replies(3, on(t(2), vec![stock], vec![]))));
    assert!(!ok(p.replies(3, on(t(3), vec![], vec![(stock, 0)]))));
    assert!(!ok(p.replies(3, on(t(4), vec![], vec![(stock, 5)]))));
    assert!(ok(p.replies(3, on(t(5), vec![Key::new(1, 1)], vec![]))));
    let counters = p.s.take_report().counters;
    let count = |name: &str| counters.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    assert_eq!(count("conflicts_lock_t8"), Some(1));
    assert_eq!(count("conflicts_locked_t8"), Some(1));
    assert_eq!(count("conflicts_changed_t8"), Some(1));
    assert_eq!(count("conflicts_lock_t1"), None, "no refusal on table 1");
}

#[test]
fn epoch_prepare_waits_for_transactions_of_the_epoch() {
    let mut p = One::new(Cc::LtOcc, 0);
    let t1 = TxnId::new(NodeId(3), 0, 1);
    p.replies(3, prepare(t1, true, vec![]));
    let out = p.deliver(0, Msg::EpochPrepare { epoch: 1 });
    assert!(
        !out.iter().any(|e| matches!(e, Effect::Persist { .. })),
        "prepared epoch 1 while a transaction of epoch 1 holds locks"
    );
    let out = p.deliver(3, Msg::Abort { txn: t1 });
    assert!(
        out.iter().any(|e| matches!(e, Effect::Persist { .. })),
        "the abort freed epoch 1 but its redo log was not forced"
    );
}

/// The trace that broke LT-OCC (a G2 cycle in seed 4's history): T1 reads
/// and writes x, so it locks x and validates its read of x at its own
/// timestamp. That validation must not stretch the old version's rts to
/// T1's timestamp: then a reader T2 of the old x, validating at the same
/// timestamp, would pass and be ordered with T1 instead of before it.
#[test]
fn lt_occ_write_set_reads_do_not_extend_rts() {
    let mut p = One::new(Cc::LtOcc, 0);
    let x = Key::new(0, 1);
    let t1 = TxnId::new(NodeId(3), 0, 1);
    let t2 = TxnId::new(NodeId(3), 0, 2);
    let out = p.replies(3, prepare(t1, true, vec![(x, 0)]));
    let [Msg::Prepared {
        ok: true,
        bound: ts,
        ..
    }] = out[..]
    else {
        panic!("T1 should lock and validate: {out:?}");
    };
    let r = p.s.store().unwrap().get(x).unwrap();
    assert_eq!(
        (r.meta.wts, r.meta.rts),
        (0, 0),
        "rts of a locked write-set record moved"
    );
    let mut read_old = prepare(t2, false, vec![(x, 0)]);
    if let Msg::Prepare { ts: t, .. } = &mut read_old {
        *t = ts;
    }
    assert!(
        matches!(
            p.replies(3, read_old)[..],
            [Msg::Prepared { ok: false, .. }]
        ),
        "T2 read x's old version at T1's timestamp while T1 holds x"
    );
}

fn snapshot(cc: Cc, commit: CommitMode) -> CocoConfig {
    let mut c = CocoConfig::new(cc, commit);
    c.isolation = Isolation::Snapshot;
    c
}

/// §5.3.2: a snapshot transaction's reads are validated at TID_SI (the
/// largest wts it saw), not at the commit timestamp the write set forces up
/// (past x's rts and into the current epoch). Serializably the same
/// transaction extends y's rts all the way to its commit timestamp.
#[test]
fn lt_occ_snapshot_validates_reads_at_tid_si() {
    let (x, y) = (Key::new(0, 1), Key::new(0, 2));
    let extended_to = |isolation| {
        let mut config = CocoConfig::new(Cc::LtOcc, CommitMode::Epoch);
        config.isolation = isolation;
        let mut store = Store::new();
        store.load(x, Value::from_static(b"x"));
        store.load(y, Value::from_static(b"y"));
        let r = store.get_mut(x).unwrap();
        (r.meta.wts, r.meta.rts) = (5, 100);
        let r = store.get_mut(y).unwrap();
        (r.meta.wts, r.meta.rts) = (3, 3);
        let mut p = One::with(config, 0, store);
        let t = TxnId::new(NodeId(3), 0, 1);
        let out = p.replies(
            3,
            Msg::Prepare {
                txn: t,
                floor: t,
                decided: Vec::new(),
                writes: vec![(x, Value::from_static(b"x2"))],
                reads: vec![(x, 5), (y, 3)],
                // TID_SI: the largest wts the transaction saw.
                ts: 5,
                round: 1,
            },
        );
        let [Msg::Prepared {
            ok: true, bound, ..
        }] = out[..]
        else {
            panic!("{isolation:?}: lock and validate should pass: {out:?}");
        };
        // Either way the commit timestamp must pass x's rts.
        assert_eq!(bound, epoch_start(1).max(101), "{isolation:?}");
        p.s.store().unwrap().get(y).unwrap().meta.rts
    };
    assert_eq!(extended_to(Isolation::Snapshot), 5);
    assert_eq!(extended_to(Isolation::Serializable), epoch_start(1));
}

fn enc(x: u64) -> Value {
    Value::copy_from_slice(&x.to_le_bytes())
}

const X: Key = Key::new(0, 1);
const Y: Key = Key::new(0, 2);

/// Reads x (on shard 0) and y (on shard 1) and writes the keys in
/// `writes`; `reads: false` makes the writes blind.
#[derive(Debug)]
struct Rw {
    pieces: Vec<PieceSpec>,
    writes: Vec<Key>,
}

impl Rw {
    fn proc(reads: bool, writes: &[Key]) -> Arc<dyn Procedure> {
        Rw::on(&[(0, X), (1, Y)], reads, writes)
    }

    /// The same over the (shard, key) pairs of `keys`.
    fn on(keys: &[(u32, Key)], reads: bool, writes: &[Key]) -> Arc<dyn Procedure> {
        let pieces = keys
            .iter()
            .copied()
            .filter(|(_, k)| reads || writes.contains(k))
            .map(|(shard, k)| PieceSpec {
                shard: ShardId(shard),
                reads: if reads { vec![Access::all(k)] } else { vec![] },
                writes: if writes.contains(&k) {
                    vec![Access::all(k)]
                } else {
                    vec![]
                },
                kind: PieceKind::Deferrable,
                inputs: Vec::new(),
                dynamic: false,
            })
            .collect();
        Arc::new(Rw {
            pieces,
            writes: writes.to_vec(),
        })
    }
}

impl Procedure for Rw {
    fn name(&self) -> &'static str {
        "rw"
    }
    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }
    fn execute(&self, piece: usize, _: &[Option<&Value>], _: &[Value]) -> PieceResult {
        let k = self.pieces[piece].writes.first().map(|a| a.key);
        PieceResult {
            writes: k
                .filter(|k| self.writes.contains(k))
                .map(|k| (k, enc(7)))
                .into_iter()
                .collect(),
            output: Value::new(),
            user_abort: false,
        }
    }
}

/// Two shards of one replica each (servers 0, 1: x on 0, y on 1) and two
/// coordinators (nodes 2, 3), stepped message by message, 2PC commit (no
/// epochs to drive).
struct Cluster {
    servers: Vec<CocoServer>,
    coords: Vec<CocoCoordinator>,
    queue: Vec<(NodeId, NodeId, Msg)>,
    done: Vec<(TxnId, TxnOutcome)>,
    /// Persists not yet durable, when the test holds them (`slow_disk`).
    writing: Option<Vec<(NodeId, u64)>>,
    rng: rand::rngs::SmallRng,
}

impl Cluster {
    fn new(config: CocoConfig) -> Self {
        Cluster::on(config, Topology::new(2, 1, 2))
    }

    /// Servers (every one loaded with x and y) and coordinators of
    /// `topology`, coordinator `c` on the node after the servers'.
    fn on(config: CocoConfig, topology: Topology) -> Self {
        let topology = Arc::new(topology);
        let servers = topology
            .nodes
            .iter()
            .filter_map(|n| match n.role {
                Role::Server { shard, replica } => Some((n.id, shard, replica)),
                _ => None,
            })
            .map(|(me, shard, replica)| {
                let mut store = Store::new();
                store.load(X, enc(0));
                store.load(Y, enc(0));
                CocoServer::new(
                    config.clone(),
                    ServerEnv {
                        me,
                        shard,
                        replica,
                        topology: topology.clone(),
                        store,
                        recovered: Vec::new(),
                        durable: true,
                        codec: Default::default(),
                    },
                )
            })
            .collect::<Vec<_>>();
        let coords = topology
            .client_hosts()
            .map(|h| h.id)
            .map(|n| {
                CocoCoordinator::new(
                    config.clone(),
                    CoordinatorEnv {
                        me: n,
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
            writing: None,
            rng: rand::rngs::SmallRng::seed_from_u64(1),
        }
    }

    /// From now on a persist completes only at [`Cluster::flush`].
    fn slow_disk(mut self) -> Self {
        self.writing = Some(Vec::new());
        self
    }

    /// Complete every persist held so far.
    fn flush(&mut self) {
        for (n, token) in self.writing.replace(Vec::new()).unwrap_or_default() {
            self.at(n, |node, ctx| node.on_persisted(ctx, token));
        }
    }

    /// Queue the messages of a step; a persist completes at once, unless
    /// the disk is slow.
    fn collect(&mut self, me: NodeId, effects: Vec<Effect<Msg>>) {
        for e in effects {
            match e {
                Effect::Send { to, msg } => self.queue.push((me, to, msg)),
                Effect::Done { txn, outcome } => self.done.push((txn, outcome)),
                Effect::Persist { token, .. } => match &mut self.writing {
                    Some(w) => w.push((me, token)),
                    None => self.at(me, |node, ctx| node.on_persisted(ctx, token)),
                },
                Effect::Timer { .. } | Effect::Charge { .. } | Effect::Finished { .. } => {}
            }
        }
    }

    /// Step node `n` with `f`, then queue what it did.
    fn at(&mut self, n: NodeId, f: impl FnOnce(&mut dyn Node<Msg>, &mut Ctx<Msg>)) {
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, n, &mut self.rng, &mut effects);
        let servers = self.servers.len();
        let node: &mut dyn Node<Msg> = match n.0 as usize {
            i if i < servers => &mut self.servers[i],
            i => &mut self.coords[i - servers],
        };
        f(node, &mut ctx);
        self.collect(n, effects);
    }

    fn submit(&mut self, c: u32, seq: u32, txn: Arc<dyn Procedure>) -> TxnId {
        let me = NodeId(self.servers.len() as u32 + c);
        let id = TxnId::new(me, 0, seq);
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, me, &mut self.rng, &mut effects);
        self.coords[c as usize].submit(&mut ctx, Attempt::at_zero(id, txn));
        self.collect(me, effects);
        id
    }

    fn step(&mut self, i: usize) {
        let (from, to, msg) = self.queue.remove(i);
        self.at(to, |node, ctx| node.on_message(ctx, from, msg));
    }

    /// Deliver until only commit-phase requests are queued (both
    /// transactions executed).
    fn execute(&mut self) {
        while let Some(i) = self
            .queue
            .iter()
            .position(|(_, _, m)| !matches!(m, Msg::Prepare { .. }))
        {
            self.step(i);
        }
    }

    /// Deliver everything, taking first the message `pick` chooses, if any.
    fn run(&mut self, mut pick: impl FnMut(&[(NodeId, NodeId, Msg)]) -> Option<usize>) {
        while !self.queue.is_empty() {
            let i = pick(&self.queue).unwrap_or(0);
            self.step(i);
        }
    }

    /// Tell the coordinators (nodes `coords`) that `epoch` committed.
    fn epoch_committed(&mut self, epoch: u64, coords: &[u32]) {
        for &n in coords {
            let aborted = Vec::new();
            self.at(NodeId(n), |node, ctx| {
                node.on_message(ctx, NodeId(0), Msg::EpochCommit { epoch, aborted })
            });
        }
    }

    fn committed(&self, txn: TxnId) -> bool {
        self.done
            .iter()
            .any(|(t, o)| *t == txn && matches!(o, TxnOutcome::Committed { .. }))
    }
}

/// The write-skew interleaving: at x's primary the request of T2 (which
/// only reads x) arrives before T1's (which locks x), at y's primary T1's
/// (which only reads y) before T2's (which locks y).
fn skewed(queue: &[(NodeId, NodeId, Msg)]) -> Option<usize> {
    queue.iter().position(|(from, to, m)| {
        matches!(m, Msg::Prepare { .. })
            && ((to.0 == 0 && from.0 == 3) || (to.0 == 1 && from.0 == 2))
    })
}

/// T1 reads x and y and writes x, T2 reads x and y and writes y, both
/// from the same state: write skew.
fn write_skew(
    config: CocoConfig,
    pick: impl FnMut(&[(NodeId, NodeId, Msg)]) -> Option<usize>,
) -> (bool, bool, usize) {
    let mut c = Cluster::new(config);
    let t1 = c.submit(0, 1, Rw::proc(true, &[X]));
    let t2 = c.submit(1, 1, Rw::proc(true, &[Y]));
    c.execute();
    let first_round = c.queue.len();
    c.run(pick);
    assert_eq!(c.done.len(), 2, "both transactions end");
    (c.committed(t1), c.committed(t2), first_round)
}

/// §5.3: snapshot transactions do not detect read-write conflicts, so the
/// write skew commits both (snapshot isolation allows it); serializable
/// transactions lock before they validate, and at most one commits, in
/// the same interleaving and in random ones. Snapshot transactions also
/// send their whole commit request in the first round (§5.3.3): one
/// request per primary touched, against the serializable lock round's one.
#[test]
fn snapshot_admits_write_skew_and_serializable_does_not() {
    for cc in [Cc::PtOcc, Cc::LtOcc] {
        let si = snapshot(cc, CommitMode::TwoPc);
        assert_eq!(write_skew(si.clone(), skewed), (true, true, 4), "{cc:?}");
        let ser = CocoConfig::new(cc, CommitMode::TwoPc);
        let (a, b, first) = write_skew(ser.clone(), skewed);
        assert!(!(a && b), "{cc:?} serializable committed write skew");
        assert_eq!(
            first, 2,
            "{cc:?}: the lock round goes to the writes' primaries"
        );
        let mut order = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..50 {
            let (a, b, _) = write_skew(ser.clone(), |q| Some(order.random_range(0..q.len())));
            assert!(!(a && b), "{cc:?} serializable committed write skew");
        }
    }
}

/// First committer wins (§5.3): two blind writers of x that executed from
/// the same state cannot both commit under snapshot isolation, even when
/// the second locks x only after the first released it. Serializably blind
/// writes commute with nothing read, and both commit.
#[test]
fn snapshot_blind_writes_first_committer_wins() {
    for cc in [Cc::PtOcc, Cc::LtOcc] {
        let committed = |config: CocoConfig| {
            let mut c = Cluster::new(config);
            let t1 = c.submit(0, 1, Rw::proc(false, &[X]));
            let t2 = c.submit(1, 1, Rw::proc(false, &[X]));
            c.execute();
            // T1 commits entirely before T2's request reaches x's primary.
            c.run(|q| q.iter().position(|(from, _, _)| from.0 != 3));
            (c.committed(t1), c.committed(t2))
        };
        assert_eq!(
            committed(snapshot(cc, CommitMode::TwoPc)),
            (true, false),
            "{cc:?}"
        );
        assert_eq!(
            committed(CocoConfig::new(cc, CommitMode::TwoPc)),
            (true, true),
            "{cc:?}"
        );
    }
}

/// The commit requests of a run: (primary, writes, reads) of every
/// **Prepare** delivered, in order.
fn prepares(c: &mut Cluster) -> Vec<(u32, usize, usize)> {
    let mut seen = Vec::new();
    while !c.queue.is_empty() {
        if let (_, to, Msg::Prepare { writes, reads, .. }) = &c.queue[0] {
            seen.push((to.0, writes.len(), reads.len()));
        }
        c.step(0);
    }
    seen
}

/// §4.2.1 and §5.1: a written record's TID is checked in the lock round,
/// where it is locked, and only records read and not written are
/// validated. Over two shards, a transaction that writes every record it
/// reads commits after its lock round (no validation request at all); one
/// that writes x and only reads y validates y alone (before: x and y, a
/// round trip to x's primary with the locks held). A record changed
/// between its read and its lock aborts the transaction in the lock round.
#[test]
fn only_records_read_and_not_written_are_validated() {
    for cc in [Cc::PtOcc, Cc::LtOcc] {
        for commit in [CommitMode::TwoPc, CommitMode::Epoch] {
            let config = CocoConfig::new(cc, commit);
            let mut c = Cluster::new(config.clone());
            let both = c.submit(0, 1, Rw::proc(true, &[X, Y]));
            assert_eq!(
                prepares(&mut c),
                [(0, 1, 1), (1, 1, 1)],
                "{cc:?} {commit:?}"
            );
            let x_only = c.submit(0, 2, Rw::proc(true, &[X]));
            assert_eq!(
                prepares(&mut c),
                [(0, 1, 1), (1, 0, 1)],
                "{cc:?} {commit:?}"
            );
            c.epoch_committed(1, &[2]);
            assert!(
                c.committed(both) && c.committed(x_only),
                "{cc:?} {commit:?}"
            );

            let mut c = Cluster::new(config);
            let late = c.submit(0, 1, Rw::proc(true, &[X, Y]));
            let first = c.submit(1, 1, Rw::on(&[(0, X)], true, &[X]));
            c.execute();
            // The single-shard writer of x commits before `late` locks x.
            c.run(|q| q.iter().position(|(from, _, _)| from.0 == 3));
            c.epoch_committed(1, &[2, 3]);
            assert!(c.committed(first), "{cc:?} {commit:?}");
            assert!(
                c.done.iter().any(|(t, o)| *t == late
                    && matches!(o, TxnOutcome::Aborted(AbortReason::LockConflict))),
                "{cc:?} {commit:?}: {:?}",
                c.done
            );
        }
    }
}

#[test]
fn timeouts_cover_the_slowest_round_trip() {
    use tessera_core::ids::MS;
    let lan = CocoConfig::new(Cc::PtOcc, CommitMode::Epoch);
    let same = lan.clone().covering_round_trip(MS / 10);
    assert_eq!(
        (same.retransmit, same.inquire, same.epoch_timeout),
        (lan.retransmit, lan.inquire, lan.epoch_timeout),
        "a data center keeps the defaults"
    );
    let wan = lan.covering_round_trip(61 * MS);
    assert_eq!(wan.retransmit, 122 * MS);
    assert_eq!(wan.inquire, 244 * MS);
    assert_eq!(wan.epoch_timeout, 244 * MS);
}

fn read(txn: TxnId, proc: Arc<dyn Procedure>) -> Msg {
    Msg::Read {
        txn,
        floor: txn,
        proc,
        pieces: vec![0],
        inputs: vec![Vec::new()],
        own: Vec::new(),
        decided: Vec::new(),
    }
}

/// Whether the primary granted every lock of a **Read** (S2PL).
fn granted(out: &[Msg]) -> bool {
    match out {
        [Msg::ReadOk {
            locks: Some(g),
            results,
            ..
        }] => {
            assert_eq!(g.ok, !results.is_empty(), "a refusal runs nothing");
            g.ok
        }
        _ => panic!("expected one ReadOk with locks: {out:?}"),
    }
}

/// S2PL at a primary (§7.1.2): readers share, a writer meeting them is
/// refused at once (NO_WAIT) and keeps nothing, also on a late duplicate
/// of its Read; read locks go with **Release**, write locks with the
/// write-back, which installs what the piece wrote at execution.
#[test]
fn s2pl_no_wait_conflicts_refuse_and_write_back_releases() {
    let mut store = Store::new();
    store.load(X, enc(0));
    let mut p = One::with(CocoConfig::new(Cc::S2pl, CommitMode::TwoPc), 0, store);
    let t = |seq| TxnId::new(NodeId(3), 0, seq);
    let lock = |p: &One| p.s.store().unwrap().get(X).unwrap().meta.lock;
    let reader = || Rw::proc(true, &[]);
    let writer = || Rw::proc(true, &[X]);
    assert!(granted(&p.replies(3, read(t(1), reader()))));
    assert!(granted(&p.replies(3, read(t(2), reader()))));
    assert_eq!(lock(&p), super::locks::SHARED | 2);
    assert!(!granted(&p.replies(3, read(t(3), writer()))));
    assert!(!granted(&p.replies(3, read(t(3), writer()))));
    assert_eq!(
        lock(&p),
        super::locks::SHARED | 2,
        "the refused writer kept a lock"
    );
    p.replies(3, Msg::Release { txn: t(1) });
    p.replies(3, Msg::Release { txn: t(2) });
    assert_eq!(lock(&p), 0);
    assert!(granted(&p.replies(3, read(t(4), writer()))));
    assert_eq!(lock(&p), t(4).0);
    assert!(!granted(&p.replies(3, read(t(5), reader()))));
    let out = p.replies(
        3,
        Msg::WriteBack {
            txn: t(4),
            ts: 77,
            epoch: 1,
        },
    );
    assert!(matches!(out[..], [Msg::WrittenBack { .. }]));
    let r = p.s.store().unwrap().get(X).unwrap();
    assert_eq!((r.meta.wts, r.meta.lock, &r.value), (77, 0, &enc(7)));
    assert!(granted(&p.replies(3, read(t(6), reader()))));
}

/// Where a coordinator sends a **Read**: S2PL never reads at a backup,
/// even with one on the coordinator's site that PT-OCC reads from (§3:
/// locks live at the primary); with every replica on its site, PT-OCC
/// reads the primary too (§4.1: a backup is no nearer, only staler).
#[test]
fn s2pl_reads_at_the_primary() {
    let spread = Arc::new(Topology::new(1, 3, 2).on_sites(3, false));
    let one_site = Arc::new(Topology::new(1, 3, 2));
    for (topology, cc, replica) in [
        (&spread, Cc::PtOcc, 1),
        (&spread, Cc::S2pl, 0),
        (&one_site, Cc::PtOcc, 0),
    ] {
        let me = NodeId(4);
        let mut coord = CocoCoordinator::new(
            CocoConfig::new(cc, CommitMode::Epoch),
            CoordinatorEnv {
                me,
                topology: topology.clone(),
                incarnation: 0,
                recovered: Vec::new(),
            },
        );
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, me, &mut rng, &mut effects);
        let id = TxnId::new(me, 0, 1);
        let txn = Rw::proc(false, &[X]);
        coord.submit(&mut ctx, Attempt::at_zero(id, txn));
        let to: Vec<NodeId> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::Send {
                    to,
                    msg: Msg::Read { .. },
                } => Some(*to),
                _ => None,
            })
            .collect();
        assert_eq!(
            to,
            [NodeId(replica)],
            "{cc:?} on {} sites",
            topology.nodes.iter().map(|n| n.site).max().unwrap() + 1
        );
    }
}

/// Whole S2PL transactions in random delivery orders: the write skew
/// never commits (both commit only serially), a NO_WAIT conflict ends in a lock-conflict abort,
/// and whatever happened no lock is left behind (aborts release at every
/// primary the transaction reached).
#[test]
fn s2pl_write_skew_aborts_one_and_leaves_no_locks() {
    let mut order = rand::rngs::SmallRng::seed_from_u64(7);
    let mut conflicts = 0;
    for _ in 0..100 {
        let mut c = Cluster::new(CocoConfig::new(Cc::S2pl, CommitMode::TwoPc));
        let t1 = c.submit(0, 1, Rw::proc(true, &[X]));
        let t2 = c.submit(1, 1, Rw::proc(true, &[Y]));
        c.run(|q| Some(order.random_range(0..q.len())));
        assert_eq!(c.done.len(), 2);
        if c.committed(t1) && c.committed(t2) {
            // Serially, then: one read the other's write.
            let saw = |reader: TxnId, key: Key, writer: TxnId| {
                c.done.iter().any(|(t, o)| {
                    *t == reader
                        && matches!(o, TxnOutcome::Committed { reads, .. }
                            if reads.iter().any(|r| r.key == key && r.version == writer.version()))
                })
            };
            assert!(saw(t2, X, t1) || saw(t1, Y, t2), "write skew");
        }
        conflicts += c
            .done
            .iter()
            .filter(|(_, o)| {
                matches!(
                    o,
                    TxnOutcome::Aborted(tessera_core::txn::AbortReason::LockConflict)
                )
            })
            .count();
        for (n, s) in c.servers.iter().enumerate() {
            for k in [X, Y] {
                if let Some(r) = s.store().unwrap().get(k) {
                    assert_eq!(r.meta.lock, 0, "server {n} left {k:?} locked");
                }
            }
        }
    }
    assert!(conflicts > 0);
}

/// Epoch mode (§3.1): an S2PL transaction's locks go at write-back — the
/// next transaction locks and reads its write at once — but results wait
/// for the epoch to commit, in order.
#[test]
fn s2pl_epoch_releases_locks_at_write_back_and_results_at_the_epoch() {
    let mut c = Cluster::new(CocoConfig::new(Cc::S2pl, CommitMode::Epoch));
    let t1 = c.submit(0, 1, Rw::proc(true, &[X]));
    c.run(|_| None);
    assert!(c.done.is_empty(), "released before its epoch committed");
    let r = c.servers[0].store().unwrap().get(X).unwrap();
    assert_eq!((r.meta.lock, &r.value), (0, &enc(7)));
    let wts = r.meta.wts;
    let t2 = c.submit(1, 1, Rw::proc(true, &[X]));
    c.run(|_| None);
    assert!(c.done.is_empty());
    let r = c.servers[0].store().unwrap().get(X).unwrap();
    assert!(r.meta.wts > wts, "TIDs grow along the overwrite");
    assert_eq!(r.meta.version, t2.version());
    c.epoch_committed(super::tid::epoch_of(r.meta.wts), &[2, 3]);
    assert!(c.committed(t1) && c.committed(t2));
}

/// Epoch mode (§4.2, Fig. 3): a worker moves on at the decision, and its
/// next transaction's requests reach the primary before the previous
/// one's write-back does. They carry that write-back, so the primary
/// installs it first: the next transaction reads the new value and locks
/// the record, instead of reading around the write and meeting its lock
/// (before, it aborted on the lock conflict). No durable write delays the
/// write-back: it goes out with the decision.
#[test]
fn epoch_next_transaction_of_a_worker_meets_no_lock_of_its_previous_one() {
    for cc in [Cc::PtOcc, Cc::LtOcc] {
        let mut c = Cluster::new(CocoConfig::new(cc, CommitMode::Epoch));
        let t1 = c.submit(0, 1, Rw::proc(true, &[X]));
        let late = |q: &[(NodeId, NodeId, Msg)]| {
            q.iter()
                .position(|(_, _, m)| !matches!(m, Msg::WriteBack { .. }))
        };
        while let Some(i) = late(&c.queue) {
            c.step(i);
        }
        assert!(
            c.queue
                .iter()
                .all(|(_, _, m)| matches!(m, Msg::WriteBack { txn, .. } if *txn == t1)),
            "{cc:?}: t1 decided, its write-back held back: {:?}",
            c.queue
        );
        assert!(!c.queue.is_empty(), "{cc:?}: t1 wrote nothing back");
        let t2 = c.submit(0, 2, Rw::proc(true, &[X]));
        while let Some(i) = late(&c.queue) {
            c.step(i);
        }
        c.run(|_| None);
        assert!(
            c.done.is_empty(),
            "{cc:?}: aborted or released early: {:?}",
            c.done
        );
        let r = c.servers[0].store().unwrap().get(X).unwrap();
        assert_eq!(r.meta.version, t2.version(), "{cc:?}: t2 installed last");
        assert_eq!(r.meta.lock, 0, "{cc:?}");
        c.epoch_committed(super::tid::epoch_of(r.meta.wts), &[2]);
        assert!(c.committed(t1) && c.committed(t2), "{cc:?}: {:?}", c.done);
        let saw_t1 = c.done.iter().any(|(t, o)| {
            *t == t2
                && matches!(o, TxnOutcome::Committed { reads, .. }
                    if reads.iter().any(|r| r.key == X && r.version == t1.version()))
        });
        assert!(saw_t1, "{cc:?}: t2 read around t1's write");
    }
}

/// A client host restarted in epoch mode wrote nothing durable about its
/// transactions: it asks the epoch manager to abort the open epochs
/// (**Rejoin**, §3.2) and presumes none of its earlier transactions
/// aborted before the answer, since one may have written back at another
/// primary already. Then it answers as 2PC's presumed abort does.
#[test]
fn a_restarted_epoch_coordinator_rejoins_before_presuming_aborts() {
    let topology = Arc::new(Topology::new(2, 1, 2));
    let me = NodeId(2);
    let mut coord = CocoCoordinator::new(
        CocoConfig::new(Cc::PtOcc, CommitMode::Epoch),
        CoordinatorEnv {
            me,
            topology,
            incarnation: 1,
            recovered: Vec::new(),
        },
    );
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let mut step = |f: &mut dyn FnMut(&mut CocoCoordinator, &mut Ctx<Msg>)| {
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, me, &mut rng, &mut effects);
        f(&mut coord, &mut ctx);
        effects
            .into_iter()
            .filter_map(|e| match e {
                Effect::Send { to, msg } => Some((to, msg)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let sent = step(&mut |c, ctx| c.on_start(ctx));
    assert!(
        matches!(sent[..], [(NodeId(0), Msg::Rejoin)]),
        "rejoin at the manager: {sent:?}"
    );
    let old = TxnId::new(me, 0, 7);
    let sent = step(&mut |c, ctx| c.on_message(ctx, NodeId(1), Msg::Inquire { txn: old }));
    assert!(
        sent.is_empty(),
        "presumed an abort before the rejoin: {sent:?}"
    );
    step(&mut |c, ctx| {
        c.on_message(
            ctx,
            NodeId(0),
            Msg::EpochStatus {
                committed: 3,
                aborted: vec![(4, 6)],
            },
        )
    });
    let sent = step(&mut |c, ctx| c.on_message(ctx, NodeId(1), Msg::Inquire { txn: old }));
    assert!(
        matches!(sent[..], [(NodeId(1), Msg::Abort { txn })] if txn == old),
        "{sent:?}"
    );
}

/// Coordinator replication (§4.2.3, Fig. 3, the epoch default): the
/// coordinator sends its write set to the primary and to both backups;
/// the primary forwards nothing and no backup acknowledges a transaction.
/// At the epoch's prepare the primary asks its backups which of the
/// epoch's transactions they lack (**EpochSync**), sends those itself,
/// acknowledged, and forces its prepared record only after that.
#[test]
fn coordinator_replication_syncs_backups_once_per_epoch() {
    let topology = Arc::new(Topology::new(1, 3, 1));
    let me = NodeId(3);
    let config = CocoConfig::new(Cc::PtOcc, CommitMode::Epoch);
    let mut coord = CocoCoordinator::new(
        config.clone(),
        CoordinatorEnv {
            me,
            topology,
            incarnation: 0,
            recovered: Vec::new(),
        },
    );
    let mut servers: Vec<One> = (0..3).map(|r| One::new(Cc::PtOcc, r)).collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let proc = Rw::on(&[(0, X)], true, &[X]);
    let t1 = TxnId::new(me, 0, 1);
    let mut effects = Vec::new();
    let mut ctx = Ctx::new(0, me, &mut rng, &mut effects);
    coord.submit(
        &mut ctx,
        Attempt {
            id: t1,
            txn: proc,
            since: 0,
            client: 0,
        },
    );
    // Run the transaction to its decision; keep what reaches the backups.
    let mut queue: Vec<(NodeId, Msg)> = effects
        .into_iter()
        .filter_map(|e| match e {
            Effect::Send { to, msg } => Some((to, msg)),
            _ => None,
        })
        .collect();
    let mut to_backups = Vec::new();
    let mut primary_sent = Vec::new();
    while let Some((to, msg)) = queue.pop() {
        if to == me {
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(0, me, &mut rng, &mut effects);
            coord.on_message(&mut ctx, NodeId(0), msg);
            queue.extend(effects.into_iter().filter_map(|e| match e {
                Effect::Send { to, msg } => Some((to, msg)),
                _ => None,
            }));
        } else if to == NodeId(0) {
            let out = servers[0].replies(3, msg);
            primary_sent.extend(out.iter().cloned());
            queue.extend(out.into_iter().map(|m| (me, m)));
        } else {
            to_backups.push((to, msg));
        }
    }
    assert_eq!(
        to_backups
            .iter()
            .filter(
                |(_, m)| matches!(m, Msg::Replicate { seq: 0, txn, writes, .. }
                if *txn == t1 && writes[..] == [(X, enc(7))])
            )
            .count(),
        2,
        "the coordinator replicates to both backups: {to_backups:?}"
    );
    assert!(
        !primary_sent
            .iter()
            .any(|m| matches!(m, Msg::Replicate { .. })),
        "the primary forwarded the write: {primary_sent:?}"
    );
    let epoch = servers[0].s.store().unwrap().get(X).map(|r| r.meta.wts);
    let epoch = super::tid::epoch_of(epoch.expect("installed"));
    // Backup 1 got its copy, backup 2's was lost. Neither acknowledges.
    let (_, copy) = to_backups.remove(0);
    assert!(servers[1].replies(3, copy).is_empty());
    assert!(
        !servers[0].s.settled(),
        "unsettled until the backups have it"
    );
    // The prepare asks both backups; nothing is forced yet.
    let out = servers[0].deliver(0, Msg::EpochPrepare { epoch });
    assert!(!out.iter().any(|e| matches!(e, Effect::Persist { .. })));
    let syncs: Vec<(NodeId, Msg)> = out
        .into_iter()
        .filter_map(|e| match e {
            Effect::Send {
                to,
                msg: m @ Msg::EpochSync { .. },
            } => Some((to, m)),
            _ => None,
        })
        .collect();
    assert_eq!(syncs.len(), 2, "one EpochSync per backup");
    let mut missing_at_2 = None;
    for (to, sync) in syncs {
        let answer = servers[to.0 as usize].replies(0, sync);
        match (to.0, &answer[..]) {
            (1, [Msg::Synced { missing, .. }]) => assert!(missing.is_empty()),
            (2, [Msg::Synced { missing, .. }]) => assert_eq!(missing[..], [t1]),
            _ => panic!("backup {to:?} answered {answer:?}"),
        }
        missing_at_2 = missing_at_2.or((to.0 == 2).then(|| answer[0].clone()));
        if to.0 == 1 {
            let out = servers[0].deliver(1, answer[0].clone());
            assert!(!out.iter().any(|e| matches!(e, Effect::Persist { .. })));
        }
    }
    // The primary sends backup 2 the write itself, and prepares once it is
    // acknowledged.
    let resend = servers[0].replies(2, missing_at_2.expect("backup 2 answered"));
    let [Msg::Replicate { seq, .. }] = resend[..] else {
        panic!("no resend to backup 2: {resend:?}");
    };
    assert!(seq > 0, "the resend is acknowledged");
    let ack = servers[2].replies(0, resend[0].clone());
    assert!(matches!(ack[..], [Msg::Replicated { seq: s }] if s == seq));
    let out = servers[0].deliver(2, ack[0].clone());
    assert!(
        out.iter().any(|e| matches!(e, Effect::Persist { .. })),
        "prepared record not forced once the backups had everything"
    );
    assert!(servers[0].s.settled());
    for b in &servers[1..] {
        let r = b.s.store().unwrap().get(X).expect("replicated");
        assert_eq!((&r.value, r.meta.version), (&enc(7), t1.version()));
    }
}

/// A backup (replica 1) whose prepare of epoch 1 is forced.
fn prepared_backup(config: CocoConfig) -> One {
    let mut b = One::with(config, 1, Store::new());
    let out = b.deliver(0, Msg::EpochPrepare { epoch: 1 });
    let Some(token) = out.iter().find_map(|e| match e {
        Effect::Persist { token, .. } => Some(*token),
        _ => None,
    }) else {
        panic!("an idle backup prepares at once: {out:?}");
    };
    let mut effects = Vec::new();
    let mut ctx = Ctx::new(0, NodeId(1), &mut b.rng, &mut effects);
    b.s.on_persisted(&mut ctx, token);
    b
}

/// A backup asked for its epoch's transactions after its own prepare of
/// that epoch was forced forces what arrived since before it answers:
/// the epoch may commit on that answer.
#[test]
fn a_prepared_backup_forces_late_writes_before_it_answers_a_sync() {
    let mut b = prepared_backup(CocoConfig::new(Cc::PtOcc, CommitMode::Epoch));
    let t = TxnId::new(NodeId(3), 0, 9);
    let mut late = replicate(0, 10, b"late");
    if let Msg::Replicate { txn, .. } = &mut late {
        *txn = t;
    }
    assert!(
        b.replies(3, late).is_empty(),
        "acknowledged a coordinator copy"
    );
    let out = b.deliver(
        0,
        Msg::EpochSync {
            epoch: 1,
            txns: vec![t],
        },
    );
    assert!(
        out.iter().any(|e| matches!(e, Effect::Persist { .. }))
            && !out.iter().any(|e| matches!(e, Effect::Send { .. })),
        "answered before forcing the late write: {out:?}"
    );
}

/// The barrier (§3.1, §7.7): a client host told of an epoch's prepare
/// starts nothing until that epoch commits (or aborts), then starts what
/// it was given meanwhile; without the barrier a prepare stops nothing.
#[test]
fn the_barrier_holds_new_transactions_from_prepare_to_commit() {
    let prepare = |c: &mut Cluster, epoch| {
        c.at(NodeId(2), |node, ctx| {
            node.on_message(ctx, NodeId(0), Msg::EpochPrepare { epoch })
        });
    };
    let mut config = CocoConfig::new(Cc::PtOcc, CommitMode::Epoch);
    config.barrier = true;
    let mut c = Cluster::new(config.clone());
    prepare(&mut c, 1);
    let t1 = c.submit(0, 1, Rw::proc(true, &[X]));
    assert!(c.queue.is_empty(), "started inside the barrier");
    c.epoch_committed(1, &[2]);
    assert!(
        c.queue.iter().any(|(from, _, _)| *from == NodeId(2)),
        "not started at the commit"
    );
    c.run(|_| None);
    let r = c.servers[0].store().unwrap().get(X).unwrap();
    assert_eq!(r.meta.version, t1.version(), "held attempt never ran");
    // An aborted epoch lifts the barrier too.
    prepare(&mut c, 2);
    c.submit(0, 2, Rw::proc(true, &[Y]));
    assert!(c.queue.is_empty());
    c.at(NodeId(2), |node, ctx| {
        node.on_message(ctx, NodeId(0), Msg::EpochAbort { epoch: 2, next: 3 })
    });
    assert!(!c.queue.is_empty(), "not started after the abort");
    // Off (the default), a prepare reaching a client host stops nothing.
    config.barrier = false;
    let mut c = Cluster::new(config);
    prepare(&mut c, 1);
    c.submit(0, 1, Rw::proc(true, &[X]));
    assert!(!c.queue.is_empty());
}

/// §7.4's durable-write model under the 2PC modes: "durable write latency
/// exists only in distributed transactions", the prepare and then the
/// commit record. A transaction on one shard commits with its log device
/// stalled; one over two shards commits only once both records are
/// durable, one after the other, and its primaries install nothing
/// before. Epoch mode forces nothing per transaction.
#[test]
fn only_distributed_2pc_transactions_wait_for_a_durable_write() {
    for commit in [CommitMode::TwoPc, CommitMode::TwoPcSync] {
        for cc in [Cc::PtOcc, Cc::LtOcc, Cc::S2pl] {
            let mut c = Cluster::new(CocoConfig::new(cc, commit)).slow_disk();
            let local = c.submit(0, 1, Rw::on(&[(0, X)], true, &[X]));
            c.run(|_| None);
            assert!(c.committed(local), "{cc:?} {commit:?}: single-shard waited");
            assert!(
                c.writing.as_ref().unwrap().iter().all(|(n, _)| n.0 < 2),
                "{cc:?} {commit:?}: a single-shard decision was forced"
            );
            let distributed = c.submit(0, 2, Rw::proc(true, &[X]));
            c.run(|_| None);
            for record in ["prepare", "decision"] {
                let x = c.servers[0].store().unwrap().get(X).unwrap();
                assert_eq!(x.meta.version, local.version(), "{cc:?} {commit:?}");
                assert!(
                    !c.committed(distributed),
                    "{cc:?} {commit:?}: committed before its {record} record was durable"
                );
                assert_eq!(
                    c.writing.as_ref().unwrap().len(),
                    1,
                    "{cc:?} {commit:?}: the {record} record"
                );
                c.flush();
                c.run(|_| None);
            }
            assert!(c.committed(distributed), "{cc:?} {commit:?}");
        }
    }
    let mut c = Cluster::new(CocoConfig::new(Cc::PtOcc, CommitMode::Epoch)).slow_disk();
    let t = c.submit(0, 1, Rw::proc(true, &[X]));
    c.run(|_| None);
    c.epoch_committed(1, &[2]);
    assert!(c.committed(t), "epoch mode waited for a durable write");
}

/// The 2PC modes never read a server's log back (a crashed server
/// restarts from the load), so a backup acknowledges a write of an epoch
/// it already prepared without forcing it first; epoch mode forces it
/// (see `a_prepared_backup_forces_late_writes_before_it_answers_a_sync`).
#[test]
fn a_2pc_sync_backup_acknowledges_late_writes_without_forcing() {
    for (commit, forced) in [(CommitMode::TwoPcSync, false), (CommitMode::Epoch, true)] {
        let mut b = prepared_backup(CocoConfig::new(Cc::PtOcc, commit));
        let out = b.deliver(0, replicate(1, 10, b"late"));
        assert_eq!(
            out.iter().any(|e| matches!(e, Effect::Persist { .. })),
            forced,
            "{commit:?}: {out:?}"
        );
        assert_eq!(
            out.iter().any(|e| matches!(
                e,
                Effect::Send {
                    msg: Msg::Replicated { seq: 1 },
                    ..
                }
            )),
            !forced,
            "{commit:?}: {out:?}"
        );
    }
}
