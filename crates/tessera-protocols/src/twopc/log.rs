//! The participant's log: where its prepare and decision records go before
//! it answers, and where it learns them back.
//!
//! The 2PC participant does not care how a record is made safe, only that
//! it comes back, in log order, once it is: then it votes or acknowledges.
//! [`ParticipantLog`] is that hook; one participant code path runs over
//! either log:
//!
//! * [`super::WalLog`] — the durable local log of an unreplicated shard
//!   (the foundation 2PL and OCC): a record comes back once the node's
//!   write-ahead log made it durable, and a restarted participant replays
//!   it ([`ParticipantLog::replay`]).
//! * [`crate::layered::PaxosLog`] — the shard's Multi-Paxos log (Janus §5's
//!   layered baselines, Table 1: "2PL/OCC + MultiPaxos"): a record comes
//!   back when it is chosen, at the leader and at every follower alike, so
//!   followers rebuild the same store and prepared set from it.
//!
//! Records come back through [`ParticipantLog::poll`] as
//! [`LogEvent::Chosen`]; a replicated log also reports changes of
//! leadership, snapshots to restore and snapshots to take.

use super::msg::Msg;
use crate::paxos::codec::{get_bytes, get_u32, get_u64, get_u8, put_bytes, put_u32, put_u64};
use crate::paxos::codec::{put_u8, Command, DecodeError};
use crate::paxos::PaxosMsg;
use bytes::Bytes;
use tessera_core::ids::{Key, NodeId, TimerId, TxnId};
use tessera_core::node::{Ctx, WireSize};
use tessera_core::protocol::ServerEnv;
use tessera_core::txn::Value;

/// A record of the participant's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRecord {
    /// `txn` is prepared with these buffered writes (2PC phase one): the
    /// vote is yes once this record is back. With `one_phase` the
    /// transaction also commits (the only participant's CommitOnePhase).
    Prepare {
        txn: TxnId,
        coord: NodeId,
        writes: Vec<(Key, Value)>,
        one_phase: bool,
    },
    /// `txn`, prepared, commits: install its writes.
    Commit { txn: TxnId },
    /// `txn`, prepared, aborts.
    Abort { txn: TxnId },
}

impl LogRecord {
    pub fn txn(&self) -> TxnId {
        match self {
            LogRecord::Prepare { txn, .. }
            | LogRecord::Commit { txn }
            | LogRecord::Abort { txn } => *txn,
        }
    }
}

impl WireSize for LogRecord {
    fn wire_size(&self) -> usize {
        1 + 8
            + match self {
                LogRecord::Prepare { writes, .. } => {
                    4 + 1 + 4 + writes.iter().map(|(_, v)| 12 + 4 + v.len()).sum::<usize>()
                }
                _ => 0,
            }
    }
}

const PREPARE: u8 = 1;
const COMMIT: u8 = 2;
const ABORT: u8 = 3;

pub(crate) fn put_key(out: &mut Vec<u8>, k: Key) {
    put_u32(out, k.table.0);
    put_u64(out, k.row);
}

pub(crate) fn get_key(input: &mut &[u8]) -> Result<Key, DecodeError> {
    let t = get_u32(input)?;
    Ok(Key::new(t, get_u64(input)?))
}

impl Command for LogRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            LogRecord::Prepare {
                txn,
                coord,
                writes,
                one_phase,
            } => {
                put_u8(out, PREPARE);
                put_u64(out, txn.0);
                put_u32(out, coord.0);
                put_u8(out, *one_phase as u8);
                put_u32(out, writes.len() as u32);
                for (k, v) in writes {
                    put_key(out, *k);
                    put_bytes(out, v);
                }
            }
            LogRecord::Commit { txn } => {
                put_u8(out, COMMIT);
                put_u64(out, txn.0);
            }
            LogRecord::Abort { txn } => {
                put_u8(out, ABORT);
                put_u64(out, txn.0);
            }
        }
    }

    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        let tag = get_u8(input)?;
        let txn = TxnId(get_u64(input)?);
        Ok(match tag {
            PREPARE => {
                let coord = NodeId(get_u32(input)?);
                let one_phase = get_u8(input)? != 0;
                let n = get_u32(input)? as usize;
                let mut writes = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let k = get_key(input)?;
                    writes.push((k, get_bytes(input)?));
                }
                LogRecord::Prepare {
                    txn,
                    coord,
                    writes,
                    one_phase,
                }
            }
            COMMIT => LogRecord::Commit { txn },
            ABORT => LogRecord::Abort { txn },
            tag => {
                return Err(DecodeError::Tag {
                    what: "participant record",
                    tag,
                })
            }
        })
    }
}

/// What the log hands back to the participant, in order.
#[derive(Debug)]
pub enum LogEvent {
    /// The record is safe (chosen, durable): apply it.
    Chosen(LogRecord),
    /// Replace the participant's state by this snapshot (see
    /// [`ParticipantLog::compact`]).
    Restore(Bytes),
    /// Call [`ParticipantLog::compact`] with the state as of now.
    SnapshotDue,
    /// This replica now serves coordinators, and every earlier record has
    /// been handed out: re-take the locks of prepared transactions.
    Leading,
    /// This replica stopped serving; `leader` is the new leader if known.
    Following { leader: Option<NodeId> },
}

/// May this replica serve a coordinator's request now?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serving {
    Yes,
    /// Becoming the leader: the coordinator should wait and resend.
    NotYet,
    /// Another replica leads (if known): redirect the coordinator.
    Elsewhere(Option<NodeId>),
}

/// What a log rebuilt from the node's durable records at
/// [`ParticipantLog::open`]: the participant restores the snapshot and
/// applies the records before it starts.
#[derive(Debug, Default)]
pub struct Replay {
    /// The last snapshot's image (see [`super::image`]).
    pub snapshot: Option<Bytes>,
    /// The records after it, in log order.
    pub records: Vec<LogRecord>,
}

/// Where a participant makes its records safe before it answers. See the
/// module docs.
pub trait ParticipantLog: Send + 'static {
    type Config: Clone + Send + Sync + std::fmt::Debug + 'static;

    /// The log of the server `env` describes, rebuilt from its durable
    /// records.
    fn open(config: &Self::Config, env: &ServerEnv) -> Self;

    /// The state [`Self::open`] recovered, to apply before the start (once;
    /// empty afterwards). A replicated log recovers through its group
    /// instead: its records come back through [`Self::poll`].
    fn replay(&mut self) -> Replay {
        Replay::default()
    }

    /// Arm timers; called from the participant's `on_start`.
    fn start(&mut self, _ctx: &mut Ctx<Msg>) {}

    /// Append `rec`; it comes back as [`LogEvent::Chosen`] once safe (or
    /// never, if this replica loses its leadership first). Only called when
    /// [`Self::serving`] says yes.
    fn append(&mut self, ctx: &mut Ctx<Msg>, rec: LogRecord);

    fn poll(&mut self) -> Option<LogEvent>;

    fn serving(&self) -> Serving {
        Serving::Yes
    }

    /// This replica's state is its shard's only copy, so a transaction it
    /// does not know has finished: true for a local log, false for a
    /// replicated one (a replica may lag, or have been deposed without
    /// knowing). No default: every log must say.
    fn single_copy(&self) -> bool;

    /// Records become safe in the order they were appended: a later record
    /// is never safe before an earlier one (a local write-ahead log). The
    /// participant then installs a commit at once and only its Ack waits
    /// for the record, since nothing appended later can survive without
    /// it. A Paxos log may choose slots out of order and lose a hole at a
    /// change of leader, so there a commit is installed only once its record
    /// is back: until then its write locks keep later transactions from
    /// preparing on top of it. No default: every log must say.
    fn in_order(&self) -> bool;

    /// Whether a Prepare record must carry the buffered writes: only a log
    /// that something reads back (a replay after a crash, a follower) needs
    /// them. The appending replica keeps its own copy, so a log that is
    /// neither written nor replicated skips cloning every written value.
    fn records_writes(&self) -> bool {
        true
    }

    /// A message between the replicas of the log.
    fn on_message(&mut self, _ctx: &mut Ctx<Msg>, from: NodeId, _msg: PaxosMsg<LogRecord>) {
        tracing::warn!(?from, "a replication message for an unreplicated log");
    }

    /// `false` if `id` is not the log's timer.
    fn on_timer(&mut self, _ctx: &mut Ctx<Msg>, _id: TimerId) -> bool {
        false
    }

    /// `false` if `token` is not the log's.
    fn on_persisted(&mut self, _ctx: &mut Ctx<Msg>, _token: u64) -> bool {
        false
    }

    /// The participant's state after every record handed out so far, for
    /// compaction (answer to [`LogEvent::SnapshotDue`]).
    fn compact(&mut self, _ctx: &mut Ctx<Msg>, _state: Bytes) {}

    /// The runtime's checkpoint record (`Node::snapshot`), if this log
    /// lives in the node's write-ahead log; `image(true)` is the
    /// participant's state after every record appended so far (the runtime
    /// writes the checkpoint once they are all durable).
    fn checkpoint(&self, _image: &dyn Fn(bool) -> Bytes) -> Option<Bytes> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let t = TxnId::new(NodeId(3), 1, 9);
        for rec in [
            LogRecord::Prepare {
                txn: t,
                coord: NodeId(3),
                writes: vec![(Key::new(1, 2), Value::from_static(b"v"))],
                one_phase: true,
            },
            LogRecord::Commit { txn: t },
            LogRecord::Abort { txn: t },
        ] {
            let mut out = Vec::new();
            rec.encode(&mut out);
            let mut r = &out[..];
            assert_eq!(LogRecord::decode(&mut r).unwrap(), rec);
            assert!(r.is_empty());
            assert!(LogRecord::decode(&mut &out[..out.len() - 1]).is_err());
        }
    }
}
