//! The null-RPC benchmark: the ceiling of the transport.
//!
//! A [`Pinger`] keeps `window` requests in flight to an [`Echo`] node and
//! counts answers; messages carry only a sequence number, so what is
//! measured is framing, batching, system calls and the node loop — the
//! cost every protocol message pays before the protocol does anything.

use bytes::{BufMut, BytesMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessera_core::codec::{get_u64, Codec, DecodeCx, DecodeError, EncodeError};
use tessera_core::node::WireSize;
use tessera_core::{Ctx, Node, NodeId, TimerId};

/// A request or its answer: a sequence number.
#[derive(Clone, Debug)]
pub struct Null(pub u64);

impl Codec for Null {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u64_le(self.0);
        Ok(())
    }
    fn decode(buf: &mut &[u8], _: &DecodeCx) -> Result<Self, DecodeError> {
        Ok(Null(get_u64(buf, "null rpc")?))
    }
}

impl WireSize for Null {
    fn wire_size(&self) -> usize {
        8
    }
}

/// Answers every request.
pub struct Echo;

impl Node<Null> for Echo {
    fn on_message(&mut self, ctx: &mut Ctx<Null>, from: NodeId, msg: Null) {
        ctx.send(from, msg);
    }
    fn on_timer(&mut self, _: &mut Ctx<Null>, _: TimerId) {}
}

/// Keeps `window` requests in flight to `target`; counts round trips.
pub struct Pinger {
    pub target: NodeId,
    pub window: u64,
    pub done: Arc<AtomicU64>,
}

impl Node<Null> for Pinger {
    fn on_start(&mut self, ctx: &mut Ctx<Null>) {
        for i in 0..self.window {
            ctx.send(self.target, Null(i));
        }
        // Requests sent before the connection is up may be dropped: resend
        // the window if nothing came back.
        ctx.set_timer(200_000_000, TimerId(0));
    }
    fn on_message(&mut self, ctx: &mut Ctx<Null>, _: NodeId, msg: Null) {
        self.done.fetch_add(1, Ordering::Relaxed);
        ctx.send(self.target, Null(msg.0 + self.window));
    }
    fn on_timer(&mut self, ctx: &mut Ctx<Null>, _: TimerId) {
        if self.done.load(Ordering::Relaxed) == 0 {
            self.on_start(ctx);
        }
    }
}
