//! Frames on a connection.
//!
//! A connection starts with a handshake frame, then carries message frames.
//! Every frame is `len: u32 LE | body`, `len` at most the configured maximum
//! (a larger length closes the connection before anything is allocated).
//!
//! * Handshake body: magic `TSRA`, protocol version (1 byte), kind (1 byte:
//!   [`Kind::Peer`] or [`Kind::Admin`]), then the dialing process's node ids
//!   (varint count, u32 each). A peer whose magic or version differs is
//!   refused with a logged reason.
//! * Message body: `from: u32 | to: u32 | message` (the protocol's codec).
//! * Admin request body: one request byte and a node id; the answer is one
//!   frame (e.g. the node's store image).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tessera_core::codec::{get_len, get_u32, get_u8, put_varint, take, DecodeError};
use tessera_core::NodeId;

pub const MAGIC: &[u8; 4] = b"TSRA";
/// Bumped whenever a frame or message layout changes.
pub const PROTOCOL_VERSION: u8 = 2;
/// Default largest frame.
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// What a connection is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Node messages, both ways.
    Peer,
    /// One administrative request and its answer.
    Admin,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub kind: Kind,
    pub nodes: Vec<NodeId>,
}

/// Why a connection is closed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("bad handshake magic {0:02x?} (not a tessera peer)")]
    BadMagic([u8; 4]),
    #[error("peer speaks protocol version {theirs}, we speak {ours}")]
    Version { theirs: u8, ours: u8 },
    #[error("malformed frame: {0}")]
    Decode(#[from] DecodeError),
}

/// Append one frame holding `body` (written by `f`) to `out`.
pub fn put_frame(out: &mut BytesMut, f: impl FnOnce(&mut BytesMut)) {
    let at = out.len();
    out.put_u32_le(0);
    f(out);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Split complete frames off the front of a receive buffer.
pub struct FrameReader {
    pub max: usize,
}

impl FrameReader {
    /// The next complete frame's body, `None` if more bytes are needed.
    pub fn next(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        if buf.len() < 4 + len {
            buf.reserve(4 + len - buf.len());
            return Ok(None);
        }
        buf.advance(4);
        Ok(Some(buf.split_to(len).freeze()))
    }
}

pub fn encode_hello(out: &mut BytesMut, h: &Hello) {
    put_frame(out, |b| {
        b.put_slice(MAGIC);
        b.put_u8(PROTOCOL_VERSION);
        b.put_u8(match h.kind {
            Kind::Peer => 0,
            Kind::Admin => 1,
        });
        put_varint(b, h.nodes.len() as u64);
        for n in &h.nodes {
            b.put_u32_le(n.0);
        }
    });
}

pub fn decode_hello(mut body: &[u8]) -> Result<Hello, FrameError> {
    let buf = &mut body;
    let magic: [u8; 4] = take(buf, 4, "handshake magic")?
        .try_into()
        .expect("4 bytes");
    if &magic != MAGIC {
        return Err(FrameError::BadMagic(magic));
    }
    let v = get_u8(buf, "protocol version")?;
    if v != PROTOCOL_VERSION {
        return Err(FrameError::Version {
            theirs: v,
            ours: PROTOCOL_VERSION,
        });
    }
    let kind = match get_u8(buf, "connection kind")? {
        0 => Kind::Peer,
        1 => Kind::Admin,
        t => {
            return Err(DecodeError::UnknownTag {
                what: "connection kind",
                tag: t.into(),
            }
            .into())
        }
    };
    let n = get_len(buf, 4, "handshake nodes")?;
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        nodes.push(NodeId(get_u32(buf, "node id")?));
    }
    if !buf.is_empty() {
        return Err(DecodeError::Trailing(buf.len()).into());
    }
    Ok(Hello { kind, nodes })
}

/// Split a message frame into (from, to, message bytes).
pub fn split_message(mut body: &[u8]) -> Result<(NodeId, NodeId, &[u8]), FrameError> {
    let buf = &mut body;
    let from = NodeId(get_u32(buf, "sender")?);
    let to = NodeId(get_u32(buf, "receiver")?);
    Ok((from, to, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn frames_split_at_any_chunking(bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..100), 0..10), chunk in 1usize..50) {
            let mut wire = BytesMut::new();
            for b in &bodies {
                put_frame(&mut wire, |o| o.put_slice(b));
            }
            let r = FrameReader { max: 1000 };
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for c in wire.chunks(chunk) {
                buf.extend_from_slice(c);
                while let Some(f) = r.next(&mut buf).unwrap() {
                    got.push(f.to_vec());
                }
            }
            prop_assert_eq!(got, bodies);
            prop_assert!(buf.is_empty());
        }

        #[test]
        fn garbage_never_panics(bytes: Vec<u8>) {
            let r = FrameReader { max: 64 };
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(f)) = r.next(&mut buf) {
                let _ = decode_hello(&f);
                let _ = split_message(&f);
            }
            let _ = decode_hello(&bytes);
        }

        #[test]
        fn hellos_round_trip(nodes in proptest::collection::vec(any::<u32>(), 0..10), admin: bool) {
            let h = Hello { kind: if admin { Kind::Admin } else { Kind::Peer }, nodes: nodes.into_iter().map(NodeId).collect() };
            let mut out = BytesMut::new();
            encode_hello(&mut out, &h);
            let mut buf = out;
            let f = FrameReader { max: 1 << 20 }.next(&mut buf).unwrap().unwrap();
            prop_assert_eq!(decode_hello(&f).unwrap(), h);
        }
    }

    #[test]
    fn oversized_frames_and_foreign_peers_are_refused() {
        let mut buf = BytesMut::from(&u32::MAX.to_le_bytes()[..]);
        assert!(matches!(
            FrameReader { max: 1024 }.next(&mut buf),
            Err(FrameError::TooLarge { .. })
        ));
        // An HTTP client, and a tessera peer of another version.
        assert!(matches!(
            decode_hello(b"GET / HTTP/1.1"),
            Err(FrameError::BadMagic(_))
        ));
        let mut out = BytesMut::new();
        encode_hello(
            &mut out,
            &Hello {
                kind: Kind::Peer,
                nodes: vec![],
            },
        );
        out[8] = PROTOCOL_VERSION + 1;
        let err = decode_hello(&out[4..]).unwrap_err();
        assert_eq!(
            err,
            FrameError::Version {
                theirs: PROTOCOL_VERSION + 1,
                ours: PROTOCOL_VERSION
            }
        );
        assert!(err.to_string().contains("version"));
    }
}
