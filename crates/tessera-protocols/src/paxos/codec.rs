//! What a replicated command must provide, and the byte helpers to write
//! it.
//!
//! The acceptor persists accepted commands through [`Ctx::persist`] as
//! opaque bytes, so a command type says how it is encoded. A compact,
//! hand-written little-endian encoding keeps the dependency set lean (see
//! DESIGN.md's stack notes); the helpers below cover the usual fields.
//!
//! [`Ctx::persist`]: tessera_core::node::Ctx::persist

use bytes::Bytes;
use std::fmt::Debug;
use tessera_core::node::WireSize;
use thiserror::Error;

/// A command of the replicated log (one client request, one 2PC record...).
pub trait Command: Clone + Debug + Send + WireSize + 'static {
    /// Append this command's encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Read one command from the front of `input`, advancing it.
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError>;
}

/// A durable record or snapshot could not be read back.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record truncated: needed {needed} more bytes, {left} left")]
    Truncated { needed: usize, left: usize },
    #[error("unknown {what} tag {tag}")]
    Tag { what: &'static str, tag: u8 },
}

pub fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, v: &[u8]) {
    put_u32(out, v.len() as u32);
    out.extend_from_slice(v);
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if input.len() < n {
        return Err(DecodeError::Truncated {
            needed: n,
            left: input.len(),
        });
    }
    let (head, tail) = input.split_at(n);
    *input = tail;
    Ok(head)
}

pub fn get_u8(input: &mut &[u8]) -> Result<u8, DecodeError> {
    Ok(take(input, 1)?[0])
}

pub fn get_u32(input: &mut &[u8]) -> Result<u32, DecodeError> {
    let b = take(input, 4)?;
    Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

pub fn get_u64(input: &mut &[u8]) -> Result<u64, DecodeError> {
    let b = take(input, 8)?;
    Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

pub fn get_bytes(input: &mut &[u8]) -> Result<Bytes, DecodeError> {
    let n = get_u32(input)? as usize;
    Ok(Bytes::copy_from_slice(take(input, n)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_truncation_is_an_error() {
        let mut out = Vec::new();
        put_u8(&mut out, 7);
        put_u32(&mut out, 70_000);
        put_u64(&mut out, u64::MAX - 1);
        put_bytes(&mut out, b"abc");
        let mut r = &out[..];
        assert_eq!(get_u8(&mut r), Ok(7));
        assert_eq!(get_u32(&mut r), Ok(70_000));
        assert_eq!(get_u64(&mut r), Ok(u64::MAX - 1));
        assert_eq!(&get_bytes(&mut r).unwrap()[..], b"abc");
        assert!(r.is_empty());
        let mut short = &out[..3];
        assert!(matches!(
            get_u32(&mut &short[1..]),
            Err(DecodeError::Truncated { needed: 4, left: 2 })
        ));
        assert_eq!(get_u8(&mut short), Ok(7));
    }
}
