//! The laws every wire encoding of a protocol's messages keeps, shared by
//! the codec tests of each protocol: a message decodes back to itself,
//! every strict prefix of its bytes is an error, so is a trailing byte, and
//! flipped bits give an error or some message, never a panic.

use proptest::prelude::*;
use std::fmt::Debug;
use tessera_core::codec::{Codec, DecodeCx, DecodeError};

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
