//! Connections: dialing with backoff, accepting, reading and writing frames.
//!
//! Every task here runs on the process's one thread (a tokio current-thread
//! runtime with a `LocalSet`), beside the node loop, so handing a message
//! between them is a queue push, never a thread wake-up.
//!
//! **Routes.** A process dials every remote node that has an address (one
//! connection per remote process) and keeps it up, reconnecting with
//! exponential backoff. Nodes without an address (the client hosts of a
//! bench driver, a one-off `tessera txn`) are reached over the connection
//! they dialed: the acceptor registers it as their route. A connection
//! carries messages both ways.
//!
//! **Batching** (Janus §6 "passive batching"). A writer drains whatever its
//! queue holds (up to [`NetConfig::batch_bytes`]) into one buffer and writes
//! it with one system call; while a write is in flight new messages pile up
//! and go in the next one. Under load batches grow by themselves, idle they
//! cost one message's latency.
//!
//! **Backpressure.** The inbound queue to the node loop is bounded: when the
//! loop falls behind, readers stop reading, TCP's window closes and the
//! remote writers stall. Outbound queues are bounded too, but a full one
//! drops the message (counted in [`Counters::dropped`]) instead of blocking
//! the node loop: two loops blocked on each other's full queues would
//! deadlock, and the protocols retransmit what is lost.

use crate::frame::{encode_hello, put_frame, split_message, FrameError, FrameReader, Hello, Kind};
use bytes::{BufMut, Bytes, BytesMut};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use tessera_core::codec::{Codec, DecodeCx};
use tessera_core::NodeId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// Network knobs (the `[net]` table of a cluster file).
#[derive(Clone, Debug)]
pub struct NetConfig {
    pub max_frame: usize,
    /// Messages queued per outbound connection before drops.
    pub queue: usize,
    /// Events queued for the node loop before readers stop reading.
    pub inbound: usize,
    /// Most bytes one write carries.
    pub batch_bytes: usize,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            max_frame: crate::frame::DEFAULT_MAX_FRAME,
            queue: 65_536,
            inbound: 65_536,
            batch_bytes: 256 << 10,
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_secs(1),
        }
    }
}

/// Traffic counters of a process.
#[derive(Default)]
pub struct Counters {
    pub messages: Cell<u64>,
    pub bytes: Cell<u64>,
    /// Messages dropped: full queue, no route, or not encodable.
    pub dropped: Cell<u64>,
    /// Connections closed for bad input.
    pub rejected: Cell<u64>,
}

/// An outgoing message.
pub struct Out<M> {
    pub from: NodeId,
    pub to: NodeId,
    pub msg: M,
}

/// What the node loop is handed.
pub enum Event<M> {
    Message {
        from: NodeId,
        to: NodeId,
        msg: M,
    },
    /// An admin asked for a node's store image.
    Dump {
        node: NodeId,
        reply: oneshot::Sender<Option<Bytes>>,
    },
}

/// State shared by the node loop and the connection tasks.
pub struct Shared<M> {
    pub cfg: NetConfig,
    pub cx: DecodeCx,
    pub local: Vec<NodeId>,
    /// Remote nodes we dial ourselves.
    pub dialable: HashMap<NodeId, SocketAddr>,
    pub routes: RefCell<HashMap<NodeId, mpsc::Sender<Out<M>>>>,
    pub inbound: mpsc::Sender<Event<M>>,
    pub counters: Counters,
}

/// Admin request codes.
pub const ADMIN_DUMP: u8 = 1;

impl<M: Codec + 'static> Shared<M> {
    /// Queue `msg` for its route; false (and counted) if it was dropped.
    pub fn send(&self, out: Out<M>) -> bool {
        let routes = self.routes.borrow();
        let (to, from) = (out.to, out.from);
        let why = match routes.get(&to) {
            Some(tx) => match tx.try_send(out) {
                Ok(()) => return true,
                Err(mpsc::error::TrySendError::Full(_)) => "queue full",
                Err(mpsc::error::TrySendError::Closed(_)) => "connection closed",
            },
            None => "no route",
        };
        let n = self.counters.dropped.get() + 1;
        self.counters.dropped.set(n);
        // The first drops say why; a steady stream only now and then.
        if n <= 10 || n.is_power_of_two() {
            tracing::warn!(?from, ?to, why, dropped = n, "message dropped");
        }
        false
    }

    /// Messages waiting in outbound queues.
    pub fn queued(&self) -> usize {
        let routes = self.routes.borrow();
        let mut seen: Vec<&mpsc::Sender<Out<M>>> = Vec::new();
        let mut n = 0;
        for tx in routes.values() {
            if !seen.iter().any(|s| s.same_channel(tx)) {
                n += tx.max_capacity() - tx.capacity();
                seen.push(tx);
            }
        }
        n
    }
}

/// Dial `addr` (serving `nodes`) for ever: write what the queue holds,
/// read what comes back, reconnect with backoff when the connection fails.
pub async fn dial<M: Codec + 'static>(
    shared: Rc<Shared<M>>,
    addr: SocketAddr,
    nodes: Vec<NodeId>,
    mut rx: mpsc::Receiver<Out<M>>,
) {
    let mut backoff = shared.cfg.backoff_min;
    let mut failures = 0u32;
    loop {
        let stream = match TcpStream::connect(addr).await {
            Ok(s) => s,
            Err(e) => {
                failures += 1;
                if failures == 1 || failures.is_power_of_two() {
                    tracing::warn!(%addr, error = %e, failures, "cannot connect; retrying with backoff");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(shared.cfg.backoff_max);
                continue;
            }
        };
        if failures > 0 {
            tracing::info!(%addr, failures, "connected");
        }
        failures = 0;
        backoff = shared.cfg.backoff_min;
        let _ = stream.set_nodelay(true);
        let (rd, mut wr) = stream.into_split();
        let mut hello = BytesMut::new();
        encode_hello(
            &mut hello,
            &Hello {
                kind: Kind::Peer,
                nodes: shared.local.clone(),
            },
        );
        if wr.write_all(&hello).await.is_err() {
            continue;
        }
        let reader = tokio::task::spawn_local(read_loop(
            shared.clone(),
            rd,
            nodes.clone(),
            addr,
            BytesMut::with_capacity(64 << 10),
        ));
        let alive = write_loop(&shared, &mut wr, &mut rx).await;
        reader.abort();
        if !alive {
            return; // the node loop is gone
        }
        tracing::warn!(%addr, "connection lost; reconnecting");
    }
}

/// Write batches from `rx` until the connection fails (true) or the queue
/// closes (false).
async fn write_loop<M: Codec>(
    shared: &Shared<M>,
    wr: &mut OwnedWriteHalf,
    rx: &mut mpsc::Receiver<Out<M>>,
) -> bool {
    let mut batch: Vec<Out<M>> = Vec::with_capacity(256);
    let mut buf = BytesMut::with_capacity(64 << 10);
    loop {
        if rx.recv_many(&mut batch, 256).await == 0 {
            return false;
        }
        loop {
            for out in batch.drain(..) {
                let at = buf.len();
                let mut err = None;
                put_frame(&mut buf, |b| {
                    b.put_u32_le(out.from.0);
                    b.put_u32_le(out.to.0);
                    err = out.msg.encode(b).err();
                });
                match err {
                    None => shared
                        .counters
                        .messages
                        .set(shared.counters.messages.get() + 1),
                    Some(e) => {
                        buf.truncate(at);
                        shared
                            .counters
                            .dropped
                            .set(shared.counters.dropped.get() + 1);
                        tracing::error!(error = %e, "message dropped");
                    }
                }
            }
            // Take more if it is already there and the batch has room.
            if buf.len() >= shared.cfg.batch_bytes || rx.is_empty() {
                break;
            }
            rx.recv_many(&mut batch, 256).await;
        }
        shared
            .counters
            .bytes
            .set(shared.counters.bytes.get() + buf.len() as u64);
        if wr.write_all(&buf).await.is_err() {
            return true;
        }
        buf.clear();
    }
}

/// Read message frames (after the bytes already in `buf`) from a peer whose
/// nodes are `from`; close the connection (logging why) on bad input.
async fn read_loop<M: Codec + 'static>(
    shared: Rc<Shared<M>>,
    mut rd: OwnedReadHalf,
    from: Vec<NodeId>,
    peer: SocketAddr,
    mut buf: BytesMut,
) {
    let reader = FrameReader {
        max: shared.cfg.max_frame,
    };
    loop {
        loop {
            let frame = match reader.next(&mut buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => return reject(&shared, peer, &e),
            };
            match decode_message(&shared, &frame, &from) {
                Ok(ev) => {
                    if shared.inbound.send(ev).await.is_err() {
                        return;
                    }
                }
                Err(e) => return reject(&shared, peer, &e),
            }
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum BadInput {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("message from {0:?}, which is not a node of that peer")]
    Sender(NodeId),
    #[error("message for {0:?}, which is not a node of this process")]
    Receiver(NodeId),
}

fn decode_message<M: Codec>(
    shared: &Shared<M>,
    frame: &[u8],
    from_ok: &[NodeId],
) -> Result<Event<M>, BadInput> {
    let (from, to, body) = split_message(frame)?;
    if !from_ok.contains(&from) {
        return Err(BadInput::Sender(from));
    }
    if !shared.local.contains(&to) {
        return Err(BadInput::Receiver(to));
    }
    let msg = M::from_bytes(body, &shared.cx).map_err(FrameError::from)?;
    Ok(Event::Message { from, to, msg })
}

fn reject<M>(shared: &Shared<M>, peer: SocketAddr, why: &dyn std::fmt::Display) {
    shared
        .counters
        .rejected
        .set(shared.counters.rejected.get() + 1);
    tracing::warn!(%peer, reason = %why, "closing connection: bad input");
}

/// Accept connections for ever.
pub async fn accept<M: Codec + 'static>(shared: Rc<Shared<M>>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                tokio::task::spawn_local(serve_conn(shared.clone(), stream, peer));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn read_frame(
    rd: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    reader: &FrameReader,
) -> Result<Option<Bytes>, FrameError> {
    loop {
        if let Some(f) = reader.next(buf)? {
            return Ok(Some(f));
        }
        match rd.read_buf(buf).await {
            Ok(0) | Err(_) => return Ok(None),
            Ok(_) => {}
        }
    }
}

async fn serve_conn<M: Codec + 'static>(
    shared: Rc<Shared<M>>,
    stream: TcpStream,
    peer: SocketAddr,
) {
    let (mut rd, mut wr) = stream.into_split();
    let reader = FrameReader {
        max: shared.cfg.max_frame,
    };
    let mut buf = BytesMut::new();
    let first = tokio::time::timeout(
        Duration::from_secs(5),
        read_frame(&mut rd, &mut buf, &reader),
    )
    .await;
    let hello = match first {
        Ok(Ok(Some(f))) => match crate::frame::decode_hello(&f) {
            Ok(h) => h,
            Err(e) => return reject(&shared, peer, &e),
        },
        Ok(Ok(None)) => return,
        Ok(Err(e)) => return reject(&shared, peer, &e),
        Err(_) => return reject(&shared, peer, &"no handshake within 5 s"),
    };
    match hello.kind {
        Kind::Admin => {
            let req = match read_frame(&mut rd, &mut buf, &reader).await {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => return reject(&shared, peer, &e),
            };
            let answer = admin(&shared, &req).await;
            let mut out = BytesMut::new();
            put_frame(&mut out, |b| match &answer {
                Some(bytes) => {
                    b.put_u8(1);
                    b.put_slice(bytes);
                }
                None => b.put_u8(0),
            });
            let _ = wr.write_all(&out).await;
        }
        Kind::Peer => {
            // Nodes we do not dial ourselves are reached over this
            // connection.
            let reply: Vec<NodeId> = hello
                .nodes
                .iter()
                .copied()
                .filter(|n| !shared.dialable.contains_key(n) && !shared.local.contains(n))
                .collect();
            let mut writer = None;
            if !reply.is_empty() {
                let (tx, mut rx) = mpsc::channel(shared.cfg.queue);
                {
                    let mut routes = shared.routes.borrow_mut();
                    for n in &reply {
                        routes.insert(*n, tx.clone());
                    }
                }
                let sh = shared.clone();
                writer = Some((
                    tokio::task::spawn_local(async move {
                        write_loop(&sh, &mut wr, &mut rx).await;
                    }),
                    tx,
                ));
            }
            // Frames already buffered after the handshake come first.
            read_loop(shared.clone(), rd, hello.nodes.clone(), peer, buf).await;
            if let Some((task, tx)) = writer {
                task.abort();
                let mut routes = shared.routes.borrow_mut();
                routes.retain(|_, r| !r.same_channel(&tx));
            }
        }
    }
}

async fn admin<M: Codec + 'static>(shared: &Shared<M>, req: &[u8]) -> Option<Bytes> {
    if req.len() != 5 || req[0] != ADMIN_DUMP {
        return None;
    }
    let node = NodeId(u32::from_le_bytes(req[1..5].try_into().expect("4 bytes")));
    let (tx, rx) = oneshot::channel();
    shared
        .inbound
        .send(Event::Dump { node, reply: tx })
        .await
        .ok()?;
    rx.await.ok().flatten()
}

/// Ask the process at `addr` for node `node`'s store image.
pub async fn fetch_dump(
    addr: SocketAddr,
    node: NodeId,
    max_frame: usize,
) -> std::io::Result<Option<Bytes>> {
    let stream = TcpStream::connect(addr).await?;
    let (mut rd, mut wr) = stream.into_split();
    let mut out = BytesMut::new();
    encode_hello(
        &mut out,
        &Hello {
            kind: Kind::Admin,
            nodes: Vec::new(),
        },
    );
    put_frame(&mut out, |b| {
        b.put_u8(ADMIN_DUMP);
        b.put_u32_le(node.0);
    });
    wr.write_all(&out).await?;
    let reader = FrameReader { max: max_frame };
    let mut buf = BytesMut::new();
    let f = read_frame(&mut rd, &mut buf, &reader)
        .await
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no answer"))?;
    match f.first() {
        Some(1) => Ok(Some(f.slice(1..))),
        _ => Ok(None),
    }
}
