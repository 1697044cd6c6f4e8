//! The memory-node wire codec: every message, verb, result and lease
//! message round trips, and cut, flipped or random bytes are errors, never
//! panics.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeSet;

fn cx() -> DecodeCx {
    DecodeCx::default()
}

fn arb_key() -> impl Strategy<Value = Key> {
    (any::<u32>(), any::<u64>()).prop_map(|(t, r)| Key::new(t, r))
}

fn arb_value() -> impl Strategy<Value = Value> {
    proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::from)
}

fn arb_slot_write() -> impl Strategy<Value = SlotWrite> {
    prop_oneof![
        any::<u64>().prop_map(SlotWrite::Lock),
        (arb_key(), arb_value(), any::<u64>()).prop_map(|(key, value, v)| SlotWrite::Data {
            key,
            value,
            version: Version(v)
        }),
        (arb_key(), arb_value(), any::<u64>(), any::<u64>()).prop_map(|(key, value, v, lock)| {
            SlotWrite::DataAndLock {
                key,
                value,
                version: Version(v),
                lock,
            }
        }),
    ]
}

fn arb_verb() -> impl Strategy<Value = Verb> {
    let entry = (
        arb_key(),
        proptest::option::of(arb_value()),
        any::<u64>().prop_map(Version),
    );
    prop_oneof![
        (any::<u32>(), any::<u32>()).prop_map(|(addr, len)| Verb::Read { addr, len }),
        (any::<u32>(), arb_slot_write()).prop_map(|(addr, data)| Verb::Write { addr, data }),
        (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(addr, expect, swap)| Verb::Cas {
            addr,
            expect,
            swap
        }),
        (any::<u32>(), any::<u64>()).prop_map(|(addr, add)| Verb::Faa { addr, add }),
        (any::<u64>(), proptest::collection::vec(entry, 0..4))
            .prop_map(|(txn, entries)| Verb::Log(LogRecord { txn, entries })),
    ]
}

fn arb_result() -> impl Strategy<Value = VerbResult> {
    let image = (
        any::<u32>(),
        proptest::option::of(arb_key()),
        proptest::option::of(arb_value()),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(addr, key, value, v, lock)| SlotImage {
            addr,
            key,
            value,
            version: Version(v),
            lock,
        });
    prop_oneof![
        proptest::collection::vec(image, 0..9).prop_map(VerbResult::Read),
        Just(VerbResult::Written),
        any::<u64>().prop_map(|old| VerbResult::Atomic { old }),
        Just(VerbResult::OutOfRange),
    ]
}

fn arb_lease() -> impl Strategy<Value = LeaseMsg> {
    let stage = prop_oneof![Just(Stage::Prepare), Just(Stage::Commit)];
    let stats = (
        any::<u64>(),
        any::<u64>(),
        proptest::collection::btree_map(any::<u8>(), any::<u64>(), 0..8),
    )
        .prop_map(|(decided, skipped, windows)| RoStats {
            decided,
            skipped,
            windows,
        });
    let n = any::<u64>();
    prop_oneof![
        (n, n, n).prop_map(|(epoch, old, new)| LeaseMsg::Prepare { epoch, old, new }),
        (n, n).prop_map(|(epoch, new)| LeaseMsg::Commit { epoch, new }),
        (n, stage).prop_map(|(epoch, stage)| LeaseMsg::Ack { epoch, stage }),
        n.prop_map(|round| LeaseMsg::Poll { round }),
        (n, stats).prop_map(|(round, stats)| LeaseMsg::Stats { round, stats }),
        n.prop_map(|seq| LeaseMsg::Sync { seq }),
        (n, n).prop_map(|(seq, time)| LeaseMsg::SyncReply { seq, time }),
    ]
}

/// Every kind of [`Msg`], with every kind of verb, result and lease
/// message inside.
fn arb_msg() -> impl Strategy<Value = Msg> {
    let geometry =
        (1..=u16::MAX as u32, 1..=u16::MAX as u32).prop_map(|(buckets, bucket_slots)| Geometry {
            buckets,
            bucket_slots,
        });
    prop_oneof![
        Just(Msg::Connect),
        geometry.prop_map(Msg::Connected),
        (
            any::<u64>(),
            any::<bool>(),
            proptest::collection::vec(arb_verb(), 0..6)
        )
            .prop_map(|(id, ack, verbs)| Msg::Batch { id, ack, verbs }),
        (any::<u64>(), proptest::collection::vec(arb_result(), 0..6))
            .prop_map(|(id, results)| Msg::Done { id, results }),
        arb_lease().prop_map(Msg::Lease),
    ]
}

proptest! {
    #[test]
    fn messages_round_trip_and_truncations_are_errors(msg in arb_msg()) {
        let cx = cx();
        crate::codec_laws::round_trips_and_rejects_cuts(&msg, &cx)?;
    }

    #[test]
    fn corrupted_messages_never_panic(
        msg in arb_msg(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
    ) {
        crate::codec_laws::decode_flipped(&msg, &flips, &cx());
    }

    #[test]
    fn random_bytes_never_panic(bytes: Vec<u8>, tag in 0u8..6, sub in 0u8..8) {
        let _ = Msg::from_bytes(&bytes, &cx());
        // Behind valid tags, so that every kind's decoder sees garbage.
        for head in [vec![tag], vec![tag, sub], vec![tag::BATCH, 1, 0, 1, sub]] {
            let mut tagged = head;
            tagged.extend_from_slice(&bytes);
            let _ = Msg::from_bytes(&tagged, &cx());
        }
    }
}

/// The kinds inside `m`: its own, and those of its verbs, results or lease
/// message. Exhaustive matches: a kind added to the types fails to compile
/// here until it is named (and then fails the coverage test until the
/// strategies generate it).
fn kinds(m: &Msg, out: &mut BTreeSet<&'static str>) {
    let own = match m {
        Msg::Connect => "connect",
        Msg::Connected(_) => "connected",
        Msg::Batch { verbs, .. } => {
            for v in verbs {
                out.insert(match v {
                    Verb::Read { .. } => "read",
                    Verb::Write { data, .. } => match data {
                        SlotWrite::Lock(_) => "write-lock",
                        SlotWrite::Data { .. } => "write-data",
                        SlotWrite::DataAndLock { .. } => "write-data-lock",
                    },
                    Verb::Cas { .. } => "cas",
                    Verb::Faa { .. } => "faa",
                    Verb::Log(_) => "log",
                });
            }
            "batch"
        }
        Msg::Done { results, .. } => {
            for r in results {
                out.insert(match r {
                    VerbResult::Read(_) => "read-result",
                    VerbResult::Written => "written",
                    VerbResult::Atomic { .. } => "atomic",
                    VerbResult::OutOfRange => "out-of-range",
                });
            }
            "done"
        }
        Msg::Lease(l) => match l {
            LeaseMsg::Prepare { .. } => "lease-prepare",
            LeaseMsg::Commit { .. } => "lease-commit",
            LeaseMsg::Ack { .. } => "lease-ack",
            LeaseMsg::Poll { .. } => "lease-poll",
            LeaseMsg::Stats { .. } => "lease-stats",
            LeaseMsg::Sync { .. } => "lease-sync",
            LeaseMsg::SyncReply { .. } => "lease-sync-reply",
        },
    };
    out.insert(own);
}

/// The strategy generates every kind, so the properties above cover them
/// all.
#[test]
fn the_strategy_covers_every_kind() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let s = arb_msg();
    let mut seen = BTreeSet::new();
    for _ in 0..3000 {
        kinds(&s.new_tree(&mut runner).unwrap().current(), &mut seen);
    }
    assert_eq!(seen.len(), 22, "{seen:?}");
}

#[test]
fn forged_counts_and_unknown_tags_are_refused() {
    // A batch claiming 2^40 verbs in 3 bytes.
    let mut out = BytesMut::new();
    out.put_u8(tag::BATCH);
    put_varint(&mut out, 7);
    out.put_u8(1);
    put_varint(&mut out, 1 << 40);
    out.put_slice(&[1, 2, 3]);
    assert!(matches!(
        Msg::from_bytes(&out, &cx()),
        Err(DecodeError::Truncated(_))
    ));
    // A READ result claiming more slot images than its bytes could hold.
    let err = Msg::from_bytes(&[tag::DONE, 1, 1, tag::READ_RESULT, 2, 0, 0, 0], &cx());
    assert!(matches!(err, Err(DecodeError::Truncated(_))), "{err:?}");
    for (bytes, bad) in [
        (vec![200], 200),
        (vec![tag::BATCH, 0, 0, 1, 9, 0, 0], 9),
        (vec![tag::BATCH, 0, 0, 1, tag::WRITE, 0, 7], 7),
        (vec![tag::DONE, 0, 1, 8], 8),
        (vec![tag::LEASE, 42], 42),
        (vec![tag::LEASE, tag::ACK, 1, 3], 3),
    ] {
        let err = Msg::from_bytes(&bytes, &cx()).unwrap_err();
        assert!(
            matches!(err, DecodeError::UnknownTag { tag, .. } if tag == bad),
            "{bytes:?}: {err}"
        );
    }
}

/// A geometry a coordinator could not hash keys with (no bucket: a
/// division by zero) or whose slot count overflows an address is refused.
#[test]
fn impossible_geometries_are_refused() {
    for (buckets, slots) in [(0u64, 8u64), (8, 0), (1 << 20, 1 << 20), (1 << 33, 1)] {
        let mut out = BytesMut::new();
        out.put_u8(tag::CONNECTED);
        put_varint(&mut out, buckets);
        put_varint(&mut out, slots);
        let err = Msg::from_bytes(&out, &cx()).unwrap_err().to_string();
        assert!(
            err.contains("geometry") || err.contains("bucket count"),
            "{buckets}x{slots}: {err}"
        );
    }
}

/// Addresses beyond `u32` are refused; a window histogram out of order is
/// not one this encoder writes.
#[test]
fn wide_addresses_and_unordered_windows_are_refused() {
    let mut out = BytesMut::new();
    out.put_u8(tag::BATCH);
    put_varint(&mut out, 1);
    out.put_u8(1);
    put_varint(&mut out, 1);
    out.put_u8(tag::FAA);
    put_varint(&mut out, 1 << 32);
    out.put_u64_le(1);
    let err = Msg::from_bytes(&out, &cx()).unwrap_err().to_string();
    assert!(err.contains("FAA address"), "{err}");

    let mut out = BytesMut::new();
    out.put_u8(tag::LEASE);
    out.put_u8(tag::STATS);
    put_varint(&mut out, 1);
    put_varint(&mut out, 10);
    put_varint(&mut out, 5);
    put_varint(&mut out, 2);
    out.put_slice(&[9, 1, 9, 1]);
    let err = Msg::from_bytes(&out, &cx()).unwrap_err().to_string();
    assert!(err.contains("increasing"), "{err}");
}

/// A batch as the protocols post it survives the wire and, applied by a
/// region, gives the same results as the original.
#[test]
fn a_decoded_batch_applies_as_the_original() {
    use super::super::region::{Region, RegionConfig};
    use tessera_core::storage::Store;
    let mut store = Store::new();
    for r in 0..16u64 {
        store.load(Key::new(0, r), Value::from(r.to_le_bytes().to_vec()));
    }
    let verbs = vec![
        Verb::Read { addr: 0, len: 8 },
        Verb::Cas {
            addr: 3,
            expect: 0,
            swap: 5,
        },
        Verb::Write {
            addr: 3,
            data: SlotWrite::DataAndLock {
                key: Key::new(0, 99),
                value: Value::from_static(b"x"),
                version: Version(7),
                lock: 0,
            },
        },
        Verb::Faa { addr: 4, add: 1 },
        Verb::Read { addr: 3, len: 1 },
    ];
    let msg = Msg::Batch {
        id: 1,
        ack: true,
        verbs: verbs.clone(),
    };
    let Msg::Batch { verbs: back, .. } = Msg::from_bytes(&msg.to_bytes().unwrap(), &cx()).unwrap()
    else {
        panic!("not a batch")
    };
    let (mut a, mut b) = (
        Region::load(&store, RegionConfig::default()),
        Region::load(&store, RegionConfig::default()),
    );
    let ra: Vec<_> = verbs.iter().map(|v| a.apply(v)).collect();
    let rb: Vec<_> = back.iter().map(|v| b.apply(v)).collect();
    assert_eq!(ra, rb);
    let done = Msg::Done { id: 1, results: ra };
    let again = Msg::from_bytes(&done.to_bytes().unwrap(), &cx()).unwrap();
    assert_eq!(format!("{again:?}"), format!("{done:?}"));
}
