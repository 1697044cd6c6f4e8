//! Scenario tests of COCO's server role.

use super::msg::Msg;
use super::{Cc, CocoConfig, CocoServer, CommitMode};
use rand::SeedableRng;
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, TxnId, Version};
use tessera_core::node::{Ctx, Effect, Node};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::topology::Topology;
use tessera_core::txn::Value;

/// A server of shard 0 (replica `replica` of three), stepped by hand.
struct One {
    s: CocoServer,
    rng: rand::rngs::SmallRng,
}

impl One {
    fn new(cc: Cc, replica: u32) -> Self {
        let topology = Arc::new(Topology::new(1, 3, 1));
        let env = ServerEnv {
            me: NodeId(replica),
            shard: ShardId(0),
            replica,
            topology,
            store: Store::new(),
            recovered: Vec::new(),
            durable: true,
        };
        One {
            s: CocoServer::new(CocoConfig::new(cc, CommitMode::Epoch), env),
            rng: rand::rngs::SmallRng::seed_from_u64(1),
        }
    }

    fn deliver(&mut self, from: u32, msg: Msg) -> Vec<Effect<Msg>> {
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(0, NodeId(0), &mut self.rng, &mut effects);
        self.s.on_message(&mut ctx, NodeId(from), msg);
        effects
    }

    fn replies(&mut self, from: u32, msg: Msg) -> Vec<Msg> {
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
    let mut p = One::new(Cc::PtOcc, 0);
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
