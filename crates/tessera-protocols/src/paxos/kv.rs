//! A replicated register service on Multi-Paxos: the test bed that checks
//! the log alone (issue 5: "a replicated register under the simulator's
//! faults must be linearizable"), and the smallest example of embedding a
//! [`Replica`].
//!
//! Every operation, reads included, goes through the log, so the service is
//! linearizable if the log is. A write installs the request's id as the
//! key's new version and returns the version it replaced, which lets the
//! isolation checker order a key's versions (each write is a
//! read-modify-write in the history). Exactly-once: each client process has
//! a session (its last request id and result) in the replicated state, so
//! a request proposed twice (a client retry) takes effect once.

use super::codec::{get_bytes, get_u64, get_u8, put_bytes, put_u64, put_u8};
use super::{Command, DecodeError, Output, PaxosConfig, PaxosMsg, Replica};
use bytes::Bytes;
use tessera_core::ids::{Key, NodeId, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node, WireSize};
use tessera_core::storage::Store;
use tessera_core::FastMap;

/// The table of a client process's session: row = process, version = last
/// request id, value = that request's result.
pub const SESSIONS: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvOp {
    /// Returns the key's version.
    Read(Key),
    /// Installs the request id as the key's version; returns the previous.
    Write(Key),
}

/// A client request, as replicated.
#[derive(Clone, Debug)]
pub struct KvCmd {
    /// The client process (one request at a time, ids increasing).
    pub process: u64,
    pub id: TxnId,
    pub op: KvOp,
}

impl WireSize for KvCmd {
    fn wire_size(&self) -> usize {
        8 + 8 + 1 + 12
    }
}

fn put_key(out: &mut Vec<u8>, k: Key) {
    super::codec::put_u32(out, k.table.0);
    put_u64(out, k.row);
}

fn get_key(input: &mut &[u8]) -> Result<Key, DecodeError> {
    let t = super::codec::get_u32(input)?;
    Ok(Key::new(t, get_u64(input)?))
}

impl Command for KvCmd {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.process);
        put_u64(out, self.id.0);
        let (tag, key) = match self.op {
            KvOp::Read(k) => (0, k),
            KvOp::Write(k) => (1, k),
        };
        put_u8(out, tag);
        put_key(out, key);
    }

    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        let process = get_u64(input)?;
        let id = TxnId(get_u64(input)?);
        let op = match get_u8(input)? {
            0 => KvOp::Read(get_key(input)?),
            1 => KvOp::Write(get_key(input)?),
            tag => return Err(DecodeError::Tag { what: "kv op", tag }),
        };
        Ok(KvCmd { process, id, op })
    }
}

/// The replicated state: registers and sessions, in a [`Store`] so that
/// the harness's convergence checks can compare replicas.
#[derive(Default, Debug, Clone)]
pub struct KvState {
    pub store: Store,
}

impl KvState {
    /// Apply one command; the result for its client, or `None` for a stale
    /// duplicate (a request older than the process's last).
    pub fn apply(&mut self, cmd: &KvCmd) -> Option<Version> {
        let session = Key::new(SESSIONS, cmd.process);
        if let Some(r) = self.store.get(session) {
            let last = r.meta.version.0;
            if cmd.id.0 < last {
                return None;
            }
            if cmd.id.0 == last {
                let b: [u8; 8] = r.value[..].try_into().expect("8-byte session result");
                return Some(Version(u64::from_le_bytes(b)));
            }
        }
        let result = match cmd.op {
            KvOp::Read(k) => self.version(k),
            KvOp::Write(k) => {
                let prev = self.version(k);
                let v = cmd.id.version();
                self.store
                    .install(k, Bytes::copy_from_slice(&v.0.to_le_bytes()), v);
                prev
            }
        };
        self.store.install(
            session,
            Bytes::copy_from_slice(&result.0.to_le_bytes()),
            Version(cmd.id.0),
        );
        Some(result)
    }

    /// The version of `k` (the initial one if never written).
    pub fn version(&self, k: Key) -> Version {
        self.store
            .get(k)
            .map_or(Version::INITIAL, |r| r.meta.version)
    }

    pub fn encode(&self) -> Bytes {
        let mut out = Vec::new();
        let recs = self.store.records_sorted();
        put_u64(&mut out, recs.len() as u64);
        for (k, r) in recs {
            put_key(&mut out, k);
            put_u64(&mut out, r.meta.version.0);
            put_bytes(&mut out, &r.value);
        }
        Bytes::from(out)
    }

    pub fn decode(mut input: &[u8]) -> Result<Self, DecodeError> {
        let r = &mut input;
        let n = get_u64(r)?;
        let mut store = Store::new();
        for _ in 0..n {
            let k = get_key(r)?;
            let v = Version(get_u64(r)?);
            let value = get_bytes(r)?;
            store.install(k, value, v);
        }
        Ok(KvState { store })
    }
}

/// The register service's messages.
#[derive(Clone, Debug)]
pub enum KvMsg {
    Paxos(PaxosMsg<KvCmd>),
    /// Client → replica.
    Request(KvCmd),
    /// Replica → client: `id` took effect; `version` is the version read,
    /// or the one a write replaced.
    Reply {
        id: TxnId,
        version: Version,
    },
    /// Replica → client: ask `leader` instead (unknown if `None`).
    NotLeader {
        id: TxnId,
        leader: Option<NodeId>,
    },
}

impl From<PaxosMsg<KvCmd>> for KvMsg {
    fn from(m: PaxosMsg<KvCmd>) -> Self {
        KvMsg::Paxos(m)
    }
}

impl WireSize for KvMsg {
    fn wire_size(&self) -> usize {
        match self {
            KvMsg::Paxos(m) => m.wire_size(),
            KvMsg::Request(c) => 1 + c.wire_size(),
            KvMsg::Reply { .. } => 17,
            KvMsg::NotLeader { .. } => 13,
        }
    }
}

/// A replica of the register service.
pub struct KvServer {
    paxos: Replica<KvCmd>,
    state: KvState,
    /// Requests this replica proposed, by id: whom to answer.
    pending: FastMap<TxnId, NodeId>,
}

impl KvServer {
    /// A replica of `group`, rebuilt from its durable `records`.
    pub fn new(cfg: PaxosConfig, me: NodeId, group: Vec<NodeId>, records: &[Bytes]) -> Self {
        KvServer {
            paxos: Replica::new(cfg, me, group, records),
            state: KvState::default(),
            pending: tessera_core::fast_map(),
        }
    }

    pub fn state(&self) -> &KvState {
        &self.state
    }

    pub fn replica(&self) -> &Replica<KvCmd> {
        &self.paxos
    }

    fn request(&mut self, ctx: &mut Ctx<KvMsg>, from: NodeId, cmd: KvCmd) {
        let session = Key::new(SESSIONS, cmd.process);
        if self.state.store.get(session).map(|r| r.meta.version.0) == Some(cmd.id.0) {
            // Already applied (the reply was lost): answer from the session.
            if let Some(version) = self.state.apply(&cmd) {
                ctx.send(
                    from,
                    KvMsg::Reply {
                        id: cmd.id,
                        version,
                    },
                );
            }
            return;
        }
        let id = cmd.id;
        match self.paxos.propose(ctx, cmd) {
            Ok(()) => {
                self.pending.insert(id, from);
            }
            Err(e) => ctx.send(
                from,
                KvMsg::NotLeader {
                    id,
                    leader: e.leader,
                },
            ),
        }
    }

    /// Act on everything the replica has for us.
    fn drain(&mut self, ctx: &mut Ctx<KvMsg>) {
        while let Some(out) = self.paxos.poll_output() {
            match out {
                Output::Chosen { batch, .. } => {
                    for cmd in &batch {
                        let result = self.state.apply(cmd);
                        if let (Some(version), Some(to)) = (result, self.pending.remove(&cmd.id)) {
                            ctx.send(
                                to,
                                KvMsg::Reply {
                                    id: cmd.id,
                                    version,
                                },
                            );
                        }
                    }
                }
                Output::Restore(s) => match KvState::decode(&s.data) {
                    Ok(state) => self.state = state,
                    Err(e) => tracing::error!(slot = s.slot, error = %e, "kv: unreadable snapshot"),
                },
                Output::SnapshotDue { slot } => {
                    let data = self.state.encode();
                    self.paxos.compact(ctx, slot, data);
                }
                Output::Leading { .. } => {}
                Output::Following { leader } => {
                    for (id, to) in self.pending.drain() {
                        ctx.send(to, KvMsg::NotLeader { id, leader });
                    }
                }
            }
        }
    }
}

impl Node<KvMsg> for KvServer {
    fn on_start(&mut self, ctx: &mut Ctx<KvMsg>) {
        self.paxos.start(ctx);
        self.drain(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<KvMsg>, from: NodeId, msg: KvMsg) {
        match msg {
            KvMsg::Paxos(m) => self.paxos.on_message(ctx, from, m),
            KvMsg::Request(cmd) => self.request(ctx, from, cmd),
            KvMsg::Reply { .. } | KvMsg::NotLeader { .. } => {
                tracing::warn!(?from, "kv: a server got a client's message");
            }
        }
        self.drain(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<KvMsg>, id: TimerId) {
        self.paxos.on_timer(ctx, id);
        self.drain(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<KvMsg>, token: u64) {
        self.paxos.on_persisted(ctx, token);
        self.drain(ctx);
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.state.store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(process: u64, seq: u32, op: KvOp) -> KvCmd {
        KvCmd {
            process,
            id: TxnId::new(NodeId(7), 0, seq),
            op,
        }
    }

    #[test]
    fn writes_return_the_replaced_version_and_apply_once() {
        let k = Key::new(0, 1);
        let mut s = KvState::default();
        let w1 = cmd(1, 1, KvOp::Write(k));
        assert_eq!(s.apply(&w1), Some(Version::INITIAL));
        let w2 = cmd(2, 2, KvOp::Write(k));
        assert_eq!(s.apply(&w2), Some(w1.id.version()));
        assert_eq!(s.apply(&w2), Some(w1.id.version()), "a retry: same answer");
        assert_eq!(s.version(k), w2.id.version(), "and no second effect");
        assert_eq!(s.apply(&cmd(1, 3, KvOp::Read(k))), Some(w2.id.version()));
        assert_eq!(s.apply(&w1), None, "a stale duplicate is ignored");
        assert_eq!(s.version(k), w2.id.version());
    }

    #[test]
    fn state_and_commands_round_trip() {
        let mut s = KvState::default();
        s.apply(&cmd(1, 1, KvOp::Write(Key::new(0, 5))));
        s.apply(&cmd(2, 2, KvOp::Read(Key::new(0, 6))));
        let back = KvState::decode(&s.encode()).unwrap();
        assert_eq!(back.encode(), s.encode());
        assert!(KvState::decode(&s.encode()[..10]).is_err());
        let c = cmd(3, 4, KvOp::Write(Key::new(0, 9)));
        let mut out = Vec::new();
        c.encode(&mut out);
        let d = KvCmd::decode(&mut &out[..]).unwrap();
        assert_eq!((d.process, d.id, d.op), (c.process, c.id, c.op));
    }
}
