//! The 2PC messages' wire codec: round trips, exact sizes, garbage.

use super::*;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::Arc;
use tessera_core::txn::Procedure;
use tessera_core::workload::Workload;
use tessera_workloads::{Ycsb, YcsbConfig};

fn workload() -> Arc<dyn Workload> {
    Arc::new(
        Ycsb::new(YcsbConfig {
            partitions: 3,
            keys_per_partition: 1000,
            multi_partition: 0.5,
            ..YcsbConfig::default()
        })
        .unwrap(),
    )
}

fn reason(i: u8) -> AbortReason {
    [
        AbortReason::LockConflict,
        AbortReason::Validation,
        AbortReason::Timeout,
        AbortReason::User,
    ][i as usize % 4]
}

fn arb_msg() -> impl Strategy<Value = Msg> {
    let txn = any::<u64>().prop_map(TxnId);
    let reply = crate::codec_laws::arb_reply();
    let execute = (
        txn.clone(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        0u32..3,
        any::<bool>(),
    )
        .prop_map(|(txn, since, floor, seed, home, commit)| {
            let wl = Ycsb::new(YcsbConfig {
                partitions: 3,
                keys_per_partition: 1000,
                multi_partition: 0.5,
                ..YcsbConfig::default()
            })
            .unwrap();
            let t = wl
                .ycsb_generator(tessera_core::ShardId(home))
                .generate(&mut SmallRng::seed_from_u64(seed));
            let n = t.pieces().len();
            Msg::Execute(Execute {
                txn,
                since,
                proc: Arc::new(t),
                floor: TxnId(floor),
                pieces: (0..n as u16).collect(),
                inputs: vec![Vec::new(); n],
                commit,
            })
        });
    prop_oneof![
        execute,
        (
            txn.clone(),
            proptest::collection::vec(reply, 0..4),
            any::<bool>()
        )
            .prop_map(|(txn, results, committed)| Msg::ExecuteOk {
                txn,
                results,
                committed
            }),
        (txn.clone(), any::<u8>()).prop_map(|(txn, r)| Msg::ExecuteFailed {
            txn,
            reason: reason(r)
        }),
        txn.clone().prop_map(|txn| Msg::Lock { txn }),
        (txn.clone(), any::<bool>()).prop_map(|(txn, ok)| Msg::Locked { txn, ok }),
        txn.clone().prop_map(|txn| Msg::Prepare { txn }),
        (txn.clone(), any::<bool>()).prop_map(|(txn, yes)| Msg::Vote { txn, yes }),
        txn.clone().prop_map(|txn| Msg::CommitOnePhase { txn }),
        (txn.clone(), any::<bool>())
            .prop_map(|(txn, committed)| Msg::OnePhaseDone { txn, committed }),
        txn.clone().prop_map(|txn| Msg::Commit { txn }),
        txn.clone().prop_map(|txn| Msg::Abort { txn }),
        txn.clone().prop_map(|txn| Msg::Ack { txn }),
        txn.clone().prop_map(|txn| Msg::Inquire { txn }),
        (txn.clone(), proptest::option::of(any::<u32>())).prop_map(|(txn, l)| Msg::NotLeader {
            txn,
            leader: l.map(tessera_core::ids::NodeId)
        }),
        txn.prop_map(|txn| Msg::Busy { txn }),
    ]
}

proptest! {
    #[test]
    fn messages_round_trip_with_exact_sizes(msg in arb_msg()) {
        let cx = DecodeCx::new(workload());
        crate::codec_laws::round_trips_and_rejects_cuts(&msg, &cx)?;
        if !matches!(msg, Msg::Execute(_)) {
            prop_assert_eq!(msg.wire_size(), msg.to_bytes().unwrap().len());
        }
    }

    #[test]
    fn corrupted_messages_never_panic(msg in arb_msg(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        crate::codec_laws::decode_flipped(&msg, &flips, &DecodeCx::new(workload()));
    }

    #[test]
    fn random_bytes_never_panic(bytes: Vec<u8>) {
        let _ = Msg::from_bytes(&bytes, &DecodeCx::new(workload()));
    }
}

#[test]
fn bad_piece_indices_are_rejected() {
    let wl = workload();
    let t = Ycsb::new(YcsbConfig {
        partitions: 3,
        keys_per_partition: 1000,
        ..YcsbConfig::default()
    })
    .unwrap()
    .ycsb_generator(tessera_core::ShardId(0))
    .generate(&mut SmallRng::seed_from_u64(1));
    let msg = Msg::Execute(Execute {
        txn: TxnId(1),
        since: 0,
        proc: Arc::new(t),
        floor: TxnId(1),
        pieces: vec![5],
        inputs: vec![Vec::new()],
        commit: false,
    });
    let bytes = msg.to_bytes().unwrap();
    let err = Msg::from_bytes(&bytes, &DecodeCx::new(wl)).unwrap_err();
    assert!(err.to_string().contains("piece index"), "{err}");
    let err = Msg::from_bytes(&[200, 0, 0, 0, 0, 0, 0, 0, 0], &DecodeCx::default()).unwrap_err();
    assert!(
        matches!(err, DecodeError::UnknownTag { tag: 200, .. }),
        "{err}"
    );
}

#[test]
fn paxos_messages_refuse_to_encode() {
    let msg = Msg::Paxos(crate::paxos::PaxosMsg::CatchUp { from: 0 });
    let err = msg.to_bytes().unwrap_err();
    assert!(err.to_string().contains("--runtime tcp"), "{err}");
}
