//! Janus's wire codec: every message kind round trips, and cut, flipped
//! or random bytes are errors, never panics.

use super::*;
use crate::depgraph::PieceReply;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tessera_core::ids::ShardId;
use tessera_core::txn::{Txn, Value};
use tessera_core::workload::Workload;
use tessera_workloads::{Ycsb, YcsbConfig};

const SHARDS: u32 = 3;

fn ycsb() -> Ycsb {
    Ycsb::new(YcsbConfig {
        partitions: SHARDS,
        keys_per_partition: 1000,
        multi_partition: 0.5,
        ..YcsbConfig::default()
    })
    .unwrap()
}

fn cx() -> DecodeCx {
    DecodeCx::new(Arc::new(ycsb()) as Arc<dyn Workload>)
}

fn arb_proc() -> impl Strategy<Value = Txn> {
    (any::<u64>(), 0..SHARDS).prop_map(|(seed, home)| {
        Arc::new(
            ycsb()
                .ycsb_generator(ShardId(home))
                .generate(&mut SmallRng::seed_from_u64(seed)),
        ) as Txn
    })
}

fn arb_txn() -> impl Strategy<Value = TxnId> + Clone {
    any::<u64>().prop_map(TxnId)
}

fn arb_deps() -> impl Strategy<Value = Vec<Dep>> {
    proptest::collection::vec(
        (arb_txn(), proptest::collection::vec(0..SHARDS, 0..4)),
        0..6,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(txn, s)| Dep {
                txn,
                shards: s.into_iter().map(ShardId).collect(),
            })
            .collect()
    })
}

fn arb_ids() -> impl Strategy<Value = Arc<[TxnId]>> {
    proptest::collection::vec(arb_txn(), 0..8).prop_map(Arc::from)
}

fn arb_value() -> impl Strategy<Value = Value> {
    proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::from)
}

fn arb_replies() -> impl Strategy<Value = Vec<PieceReply>> {
    proptest::collection::vec(crate::codec_laws::arb_reply(), 0..4)
}

fn arb_info() -> impl Strategy<Value = Arc<CommitInfo>> {
    (arb_txn(), arb_proc(), arb_deps(), any::<bool>()).prop_map(|(txn, proc, deps, abandon)| {
        Arc::new(CommitInfo {
            txn,
            proc,
            deps,
            abandon,
        })
    })
}

/// Every kind of [`Msg`].
fn arb_msg() -> impl Strategy<Value = Msg> {
    let (t, b) = (arb_txn(), any::<u64>());
    let why = prop_oneof![
        Just(Announce::Lately),
        Just(Announce::Lagging),
        Just(Announce::CatchUp)
    ];
    let prepared = proptest::option::of(
        (
            proptest::option::of(any::<u64>()),
            arb_deps(),
            any::<bool>(),
        )
            .prop_map(|(accepted, deps, abandon)| Prepared {
                accepted,
                deps,
                abandon,
            }),
    );
    prop_oneof![
        (
            t.clone(),
            b,
            arb_proc(),
            proptest::option::of(t.clone()),
            proptest::option::of(t.clone())
        )
            .prop_map(|(txn, ballot, proc, floor, done)| Msg::PreAccept {
                txn,
                ballot,
                proc,
                floor,
                done,
            }),
        (t.clone(), b, arb_deps()).prop_map(|(txn, ballot, deps)| Msg::PreAcceptOk {
            txn,
            ballot,
            deps
        }),
        (t.clone(), b).prop_map(|(txn, ballot)| Msg::PreAcceptNotOk { txn, ballot }),
        (
            t.clone(),
            b,
            arb_deps(),
            any::<bool>(),
            proptest::option::of(arb_proc())
        )
            .prop_map(|(txn, ballot, deps, abandon, proc)| Msg::Accept {
                txn,
                ballot,
                deps: Arc::new(deps),
                abandon,
                proc
            }),
        (t.clone(), b).prop_map(|(txn, ballot)| Msg::AcceptOk { txn, ballot }),
        (t.clone(), b).prop_map(|(txn, ballot)| Msg::AcceptNotOk { txn, ballot }),
        arb_info().prop_map(Msg::Commit),
        (t.clone(), any::<bool>(), arb_replies()).prop_map(|(txn, abandon, results)| {
            Msg::CommitOk {
                txn,
                abandon,
                results,
            }
        }),
        (t.clone(), b).prop_map(|(txn, ballot)| Msg::Prepare { txn, ballot }),
        (t.clone(), b, prepared).prop_map(|(txn, ballot, prepared)| Msg::PrepareOk {
            txn,
            ballot,
            prepared
        }),
        (t.clone(), b).prop_map(|(txn, ballot)| Msg::PrepareNotOk { txn, ballot }),
        (t.clone(), any::<bool>()).prop_map(|(txn, its_shard)| Msg::Inquire { txn, its_shard }),
        arb_info().prop_map(Msg::InquireOk),
        (arb_ids(), why).prop_map(|(txns, why)| Msg::Committed { txns, why }),
        Just(Msg::CatchUp),
        (arb_ids(), any::<bool>()).prop_map(|(txns, echo)| Msg::Executed { txns, echo }),
        (arb_ids(), any::<bool>()).prop_map(|(txns, ask)| Msg::Settled { txns, ask }),
        t.clone().prop_map(|floor| Msg::Done { floor }),
        (t.clone(), any::<bool>(), proptest::option::of(arb_ids()))
            .prop_map(|(txn, abandon, scc)| Msg::Forgotten { txn, abandon, scc }),
        (t.clone(), any::<u16>()).prop_map(|(txn, piece)| Msg::FetchOutput { txn, piece }),
        (t, any::<u16>(), proptest::option::of(arb_value()))
            .prop_map(|(txn, piece, output)| Msg::Output { txn, piece, output }),
    ]
}

crate::codec_laws::law_tests!(Msg, arb_msg(), cx(), tag::DONE);

/// A dependency on a shard the workload does not have is refused: a
/// server would index its topology with it.
#[test]
fn dependencies_on_unknown_shards_are_refused() {
    let msg = Msg::PreAcceptOk {
        txn: TxnId(7),
        ballot: 0,
        deps: vec![Dep {
            txn: TxnId(3),
            shards: Arc::from([ShardId(1), ShardId(SHARDS)]),
        }],
    };
    let bytes = msg.to_bytes().unwrap();
    let err = Msg::from_bytes(&bytes, &cx()).unwrap_err();
    assert!(err.to_string().contains("dependency shard"), "{err}");
}

#[test]
fn forged_counts_and_unknown_tags_are_refused() {
    // An Executed announcement claiming 2^40 ids.
    crate::codec_laws::refuses_forged_count_and_unknown_tag::<Msg>(&[tag::EXECUTED, 0], &cx());
    let err = Msg::from_bytes(&[tag::COMMITTED, 9, 0], &cx()).unwrap_err();
    assert!(
        matches!(err, DecodeError::UnknownTag { tag: 9, .. }),
        "{err}"
    );
}

/// A PreAccept needs the workload to rebuild its procedure: without one
/// it is an error, not a panic.
#[test]
fn procedures_need_the_workload() {
    let proc: Txn = Arc::new(
        ycsb()
            .ycsb_generator(ShardId(0))
            .generate(&mut SmallRng::seed_from_u64(1)),
    );
    let msg = Msg::PreAccept {
        txn: TxnId(1),
        ballot: 0,
        proc,
        floor: Some(TxnId(1)),
        done: Some(TxnId(0)),
    };
    let bytes = msg.to_bytes().unwrap();
    assert!(Msg::from_bytes(&bytes, &DecodeCx::default()).is_err());
    assert!(Msg::from_bytes(&bytes, &cx()).is_ok());
}
