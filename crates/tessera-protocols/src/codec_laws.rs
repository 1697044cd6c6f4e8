//! The laws every wire encoding of a protocol's messages keeps, shared by
//! the codec tests of each protocol: a message decodes back to itself,
//! every strict prefix of its bytes is an error, so is a trailing byte, and
//! flipped bits give an error or some message, never a panic.

use crate::piece::PieceReply;
use proptest::prelude::*;
use std::fmt::Debug;
use tessera_core::codec::{Codec, DecodeCx, DecodeError};
use tessera_core::ids::{Key, Version};
use tessera_core::txn::{ReadObs, Value};

/// `msg` round trips (compared by its `Debug` form, since messages carry
/// procedures that are not `PartialEq`), every cut is an error and one
/// trailing byte is [`DecodeError::Trailing`].
pub(crate) fn round_trips_and_rejects_cuts<M: Codec + Debug>(
    msg: &M,
    cx: &DecodeCx,
) -> Result<(), TestCaseError> {
    let bytes = msg.to_bytes().unwrap();
    let back = M::from_bytes(&bytes, cx).unwrap();
    prop_assert_eq!(format!("{back:?}"), format!("{msg:?}"));
    for cut in 0..bytes.len() {
        prop_assert!(M::from_bytes(&bytes[..cut], cx).is_err(), "cut at {}", cut);
    }
    let mut longer = bytes.to_vec();
    longer.push(0);
    prop_assert_eq!(
        M::from_bytes(&longer, cx).unwrap_err(),
        DecodeError::Trailing(1)
    );
    Ok(())
}

/// Decode `msg`'s bytes with `flips` applied (position modulo the length,
/// a non-zero XOR mask): whatever comes out, nothing panics.
pub(crate) fn decode_flipped<M: Codec>(msg: &M, flips: &[(usize, u8)], cx: &DecodeCx) {
    let mut bytes = msg.to_bytes().unwrap().to_vec();
    for &(i, b) in flips {
        let n = bytes.len();
        bytes[i % n] ^= b | 1;
    }
    let _ = M::from_bytes(&bytes, cx);
}

/// A piece's reply with up to three reads and writes (any keys and
/// versions): the strategy of every codec test whose messages carry
/// replies ([`crate::piece`]'s one encoding).
pub(crate) fn arb_reply() -> impl Strategy<Value = PieceReply> {
    (
        any::<u16>(),
        proptest::collection::vec((any::<u32>(), any::<u64>(), any::<u64>()), 0..4),
        proptest::collection::vec((any::<u32>(), any::<u64>()), 0..4),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::from),
        any::<bool>(),
    )
        .prop_map(|(piece, reads, writes, output, user_abort)| PieceReply {
            piece,
            reads: reads
                .into_iter()
                .map(|(t, r, v)| ReadObs::row(Key::new(t, r), Version(v)))
                .collect(),
            writes: writes.into_iter().map(|(t, r)| Key::new(t, r)).collect(),
            output,
            user_abort,
        })
}

/// `head` (a message's bytes up to a count) followed by a count of 2^40
/// and three bytes is refused as truncated, before anything is allocated;
/// a frame of the one byte 200 (no kind's tag) is an unknown tag.
pub(crate) fn refuses_forged_count_and_unknown_tag<M: Codec + Debug>(head: &[u8], cx: &DecodeCx) {
    let mut out = head.to_vec();
    out.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 1, 2, 3]);
    let res = M::from_bytes(&out, cx);
    assert!(matches!(res, Err(DecodeError::Truncated(_))), "{res:?}");
    let res = M::from_bytes(&[200], cx);
    assert!(
        matches!(res, Err(DecodeError::UnknownTag { tag: 200, .. })),
        "{res:?}"
    );
}

/// The message tags (first bytes) of 2,000 messages drawn from `s`.
pub(crate) fn tags_drawn<M: Codec>(s: impl Strategy<Value = M>) -> std::collections::BTreeSet<u8> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    (0..2000)
        .map(|_| {
            s.new_tree(&mut runner)
                .unwrap()
                .current()
                .to_bytes()
                .unwrap()[0]
        })
        .collect()
}

/// The laws as tests, for a message type `$msg` whose every kind `$arb`
/// draws, decoded with `$cx`, its tags `0..=$last`: round trips and cuts,
/// flipped bits, random bytes (alone and behind every tag), and a test
/// that `$arb` draws every tag (a kind added without a strategy fails).
macro_rules! law_tests {
    ($msg:ty, $arb:expr, $cx:expr, $last:expr) => {
        proptest::proptest! {
            #[test]
            fn messages_round_trip_and_truncations_are_errors(msg in $arb) {
                $crate::codec_laws::round_trips_and_rejects_cuts(&msg, &$cx)?;
            }

            #[test]
            fn corrupted_messages_never_panic(
                msg in $arb,
                flips in proptest::collection::vec(
                    (proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()),
                    1..4,
                ),
            ) {
                $crate::codec_laws::decode_flipped(&msg, &flips, &$cx);
            }

            #[test]
            fn random_bytes_never_panic(bytes: Vec<u8>, tag in 0u8..=$last + 1) {
                use tessera_core::codec::Codec;
                let _ = <$msg>::from_bytes(&bytes, &$cx);
                // Behind a tag, so that every kind's decoder sees garbage.
                let mut tagged = vec![tag];
                tagged.extend_from_slice(&bytes);
                let _ = <$msg>::from_bytes(&tagged, &$cx);
            }
        }

        #[test]
        fn the_strategy_covers_every_message_kind() {
            assert_eq!($crate::codec_laws::tags_drawn($arb), (0..=$last).collect());
        }
    };
}
pub(crate) use law_tests;
