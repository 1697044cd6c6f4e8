//! Deletes and inserts on a server stepped by hand (§6.3, see [`super::gc`]):
//! insert placeholders conflict, a delete is collected at the next epoch
//! commit and not before, an epoch abort reverts both, and recovery
//! replays a delete.

use super::msg::Msg;
use super::redo::{commit_record, redo_record, Entry};
use super::tests::One;
use super::tid::epoch_start;
use super::{Cc, CocoConfig, CommitMode, Replication};
use bytes::BytesMut;
use tessera_core::ids::{Key, NodeId, TxnId, Version};
use tessera_core::node::Node;
use tessera_core::storage::Store;
use tessera_core::txn::Value;

const ROW: Key = Key {
    table: tessera_core::ids::TableId(0),
    row: 1,
};
const NEW: Key = Key {
    table: tessera_core::ids::TableId(0),
    row: 2,
};

fn txn(n: u32) -> TxnId {
    TxnId::new(NodeId(3), 0, n)
}

fn val(v: &'static [u8]) -> Value {
    Value::from_static(v)
}

fn lock(txn: TxnId, writes: Vec<(Key, Value)>, reads: Vec<(Key, u64)>, ts: u64) -> Msg {
    Msg::Prepare {
        txn,
        floor: txn,
        decided: Vec::new(),
        writes,
        reads,
        ts,
        round: 1,
    }
}

/// The answer to a Prepare: (ok, bound).
fn answer(out: &[Msg]) -> (bool, u64) {
    match out {
        [Msg::Prepared { ok, bound, .. }] => (*ok, *bound),
        _ => panic!("expected one Prepared: {out:?}"),
    }
}

fn commit(epoch: u64) -> Msg {
    Msg::EpochCommit {
        epoch,
        aborted: Vec::new(),
    }
}

/// Epoch mode with primary replication: these tests follow a delete from
/// the primary's write-back to its backup.
fn loaded(cc: Cc, replica: u32) -> One {
    let mut store = Store::new();
    store.load(ROW, val(b"row"));
    let mut config = CocoConfig::new(cc, CommitMode::Epoch);
    config.replication = Replication::Primary;
    One::with(config, replica, store)
}

fn get(p: &One, k: Key) -> Option<(Value, u64)> {
    let r = p.s.store().unwrap().get(k)?;
    Some((r.value.clone(), r.meta.wts))
}

fn collected(p: &mut One) -> u64 {
    let report = p.s.take_report();
    report
        .counters
        .iter()
        .find(|(n, _)| *n == "records_collected")
        .map_or(0, |c| c.1)
}

/// A placeholder is locked by its inserter: a second insert of the key
/// fails its lock and a reader that saw the key absent fails validation;
/// once the inserter aborts, the placeholder is collected at the next
/// epoch commit.
#[test]
fn an_insert_placeholder_conflicts_with_inserts_and_absent_reads() {
    for cc in [Cc::PtOcc, Cc::LtOcc] {
        let mut p = loaded(cc, 0);
        let at = epoch_start(1) + 100;
        assert!(answer(&p.replies(3, lock(txn(1), vec![(NEW, val(b"a"))], vec![], 0))).0);
        assert_eq!(
            get(&p, NEW),
            Some((Value::new(), 0)),
            "{cc:?}: a placeholder"
        );
        assert!(
            !answer(&p.replies(3, lock(txn(2), vec![(NEW, val(b"b"))], vec![], 0))).0,
            "{cc:?}: two inserts of one key both locked it"
        );
        assert!(
            !answer(&p.replies(3, lock(txn(3), vec![], vec![(NEW, 0)], at))).0,
            "{cc:?}: a reader saw the key absent while an insert held it"
        );
        p.deliver(3, Msg::Abort { txn: txn(1) });
        p.deliver(0, commit(1));
        assert_eq!(
            get(&p, NEW),
            None,
            "{cc:?}: the aborted insert's placeholder stayed"
        );
        assert_eq!(collected(&mut p), 1);
    }
}

/// LT-OCC: a reader that validated a key absent at `ts` leaves its rts
/// behind, so that an insert commits above it (§5.2), and the placeholder
/// is collected only once `ts`'s epoch committed.
#[test]
fn lt_occ_an_insert_commits_above_an_absent_read() {
    let mut p = loaded(Cc::LtOcc, 0);
    let read_at = epoch_start(2) + 100;
    assert!(answer(&p.replies(3, lock(txn(1), vec![], vec![(NEW, 0)], read_at))).0);
    p.deliver(0, commit(1));
    assert!(
        get(&p, NEW).is_some(),
        "collected before the read's epoch committed"
    );
    let (ok, ts) = answer(&p.replies(3, lock(txn(2), vec![(NEW, val(b"a"))], vec![], 0)));
    assert!(
        ok && ts > read_at,
        "insert at {ts} not above the absent read at {read_at}"
    );
}

/// A delete leaves the record with the delete bit (the empty value) and
/// the deleter's TID until its epoch commits, then it is removed, on the
/// primary and on a backup; a late duplicate of an older write of a
/// committed epoch does not bring it back, and a re-insert of a later
/// epoch applies.
#[test]
fn a_delete_is_collected_at_the_next_epoch_commit_everywhere() {
    let ts = epoch_start(1) + 8;
    let mut p = loaded(Cc::PtOcc, 0);
    assert!(answer(&p.replies(3, lock(txn(1), vec![(ROW, Value::new())], vec![], 0))).0);
    let out = p.replies(
        3,
        Msg::WriteBack {
            txn: txn(1),
            ts,
            epoch: 1,
        },
    );
    let replicated = out
        .into_iter()
        .find(|m| matches!(m, Msg::Replicate { .. }))
        .expect("the delete is replicated");
    assert_eq!(
        get(&p, ROW),
        Some((Value::new(), ts)),
        "the delete bit and TID"
    );
    p.deliver(0, Msg::EpochPrepare { epoch: 2 });
    assert!(
        get(&p, ROW).is_some(),
        "collected before its epoch committed"
    );
    p.deliver(0, commit(1));
    assert_eq!(get(&p, ROW), None);

    let mut b = loaded(Cc::PtOcc, 1);
    b.deliver(0, replicated);
    assert_eq!(get(&b, ROW), Some((Value::new(), ts)));
    b.deliver(0, commit(1));
    assert_eq!(get(&b, ROW), None, "the backup kept the deleted record");
    let stale = Msg::Replicate {
        seq: 1,
        txn: txn(5),
        ts: ts - 4,
        epoch: 1,
        version: Version(5),
        writes: vec![(ROW, val(b"stale"))],
    };
    assert!(matches!(
        b.replies(0, stale)[..],
        [Msg::Replicated { seq: 1 }]
    ));
    assert_eq!(
        get(&b, ROW),
        None,
        "a duplicate brought a collected record back"
    );
    let again = Msg::Replicate {
        seq: 3,
        txn: txn(6),
        ts: epoch_start(2) + 4,
        epoch: 2,
        version: Version(6),
        writes: vec![(ROW, val(b"again"))],
    };
    b.deliver(0, again);
    assert_eq!(get(&b, ROW), Some((val(b"again"), epoch_start(2) + 4)));
}

/// An aborted epoch that deleted one record and inserted another puts
/// both back: the deleted record's last committed version returns, the
/// inserted key reads absent again and is collected at the next commit.
#[test]
fn an_epoch_abort_reverts_a_delete_and_an_insert() {
    let ts = epoch_start(1) + 8;
    let writes = vec![(ROW, Value::new()), (NEW, val(b"new"))];
    let mut p = loaded(Cc::LtOcc, 0);
    assert!(answer(&p.replies(3, lock(txn(1), writes.clone(), vec![], 0))).0);
    p.deliver(
        3,
        Msg::WriteBack {
            txn: txn(1),
            ts,
            epoch: 1,
        },
    );
    let mut b = loaded(Cc::LtOcc, 1);
    b.deliver(
        0,
        Msg::Replicate {
            seq: 1,
            txn: txn(1),
            ts,
            epoch: 1,
            version: Version(9),
            writes,
        },
    );
    for (name, s) in [("primary", &mut p), ("backup", &mut b)] {
        assert_eq!(get(s, NEW).map(|r| r.0), Some(val(b"new")), "{name}");
        s.deliver(0, commit(0));
        assert!(
            get(s, ROW).is_some(),
            "{name}: collected an open epoch's delete"
        );
        s.deliver(0, Msg::EpochAbort { epoch: 1, next: 3 });
        assert_eq!(
            get(s, ROW),
            Some((val(b"row"), 0)),
            "{name}: the delete stayed"
        );
        assert_eq!(
            get(s, NEW),
            Some((Value::new(), 0)),
            "{name}: the insert stayed"
        );
        s.deliver(0, commit(3));
        assert_eq!(
            get(s, NEW),
            None,
            "{name}: the reverted insert's placeholder stayed"
        );
        assert_eq!(get(s, ROW).map(|r| r.0), Some(val(b"row")), "{name}");
    }
}

fn redo(entries: &[(u64, Key, u64, &'static [u8])], prepared: u64) -> bytes::Bytes {
    let mut b = BytesMut::new();
    for &(epoch, key, ts, v) in entries {
        Entry {
            epoch,
            key,
            ts,
            version: Version(ts),
            value: val(v),
        }
        .encode(&mut b);
    }
    redo_record(&b, Some(prepared))
}

/// A restarted backup replays an insert and a delete of committed epochs
/// (the deleted record is gone once replayed), and not a delete of an
/// epoch that aborted.
#[test]
fn recovery_replays_a_delete() {
    let log = vec![
        redo(
            &[
                (1, ROW, epoch_start(1) + 4, b"row"),
                (1, NEW, epoch_start(1) + 8, b"new"),
            ],
            1,
        ),
        commit_record(1),
        redo(&[(2, NEW, epoch_start(2) + 4, b"")], 2),
        redo(&[(3, ROW, epoch_start(3) + 4, b"")], 3),
    ];
    let config = CocoConfig::new(Cc::PtOcc, CommitMode::Epoch);
    let mut b = One::restarted(config.clone(), 1, Store::new(), log.clone());
    b.deliver(
        0,
        Msg::EpochStatus {
            committed: 3,
            aborted: vec![(3, 4)],
        },
    );
    assert_eq!(get(&b, NEW), None, "the committed delete was not replayed");
    assert_eq!(
        get(&b, ROW).map(|r| r.0),
        Some(val(b"row")),
        "the aborted delete"
    );
    assert_eq!(collected(&mut b), 1);
    let mut b = One::restarted(config, 1, Store::new(), log);
    b.deliver(
        0,
        Msg::EpochStatus {
            committed: 1,
            aborted: Vec::new(),
        },
    );
    assert_eq!(
        get(&b, NEW).map(|r| r.0),
        Some(val(b"new")),
        "epoch 2 is open"
    );
}
