//! The durable local log: a participant's records in the engine's
//! write-ahead log (`Effect::Persist`; the `tcp` runtime's WAL, the
//! simulator's disk with fsync latency and group commit).
//!
//! Presumed abort (the coordinator logs only commit decisions) needs, at a
//! participant:
//!
//! * **Prepare** with buffered writes — durable *before* the yes vote
//!   leaves (2PC's rule: a participant that voted yes must be able to
//!   commit after a crash). A read-only participant has nothing to redo: its
//!   Prepare comes back at once, unlogged.
//! * **Prepare** with `one_phase` — durable before the writes are installed
//!   and the coordinator hears of it: no one may read a write a crash could
//!   take back.
//! * **Commit** after a 2PC commit, durable before the Ack: the coordinator
//!   forgets its decision once every participant acknowledged, so a
//!   participant that acknowledged and then lost the commit would find the
//!   transaction prepared and hear "abort" (presumed abort) from a
//!   coordinator that no longer remembers it. The log is
//!   [in order](ParticipantLog::in_order), so the participant installs the
//!   writes at once (the decision is durable at the coordinator) and only
//!   the Ack waits.
//! * **Abort** of a prepared transaction, lazily: it comes back at once and
//!   is written without waiting (if lost, the coordinator answers the
//!   inquiry with abort anyway).
//! * **Snapshot**: the participant's [image](super::image) at a checkpoint
//!   (the runtime asks for it through `Node::snapshot` and truncates the
//!   log).
//!
//! Restart: [`WalLog::open`] replays the records into the last snapshot and
//! the records after it ([`ParticipantLog::replay`]); the participant
//! applies them as it applies any record, so the store gets every logged
//! commit, undecided prepared transactions are re-locked and their
//! coordinators (named in the records) asked by the regular sweep, and
//! recent commits get tombstones.
//!
//! On a runtime whose records do not survive a crash
//! ([`ServerEnv::durable`] false: `local`, which has no disk) nothing is
//! written: every record comes back at once, as a persist there would, and
//! the hot path saves the encoding and the round through the runtime.
//!
//! Ids: WAL records start with [`RECORD_TAG`] and persist tokens carry it in
//! their top byte, apart from the Paxos acceptor's (`0x50`), and this log
//! sets no timers (the participant's sweep is timer 1).

use super::image;
use super::log::{LogEvent, LogRecord, ParticipantLog, Replay};
use super::msg::Msg;
use crate::paxos::codec::Command;
use crate::paxos::DecodeError;
use bytes::Bytes;
use std::collections::VecDeque;
use tessera_core::ids::TxnId;
use tessera_core::node::Ctx;
use tessera_core::protocol::ServerEnv;
use tessera_core::{fast_set, FastSet};

/// First byte of every WAL record of a participant, and top byte of its
/// persist tokens: `'W'`, apart from the Paxos acceptor's `0x50`.
pub const RECORD_TAG: u8 = 0x57;
const RECORD: u8 = 1;
const SNAPSHOT: u8 = 2;

fn encode_record(rec: &LogRecord) -> Bytes {
    let mut out = vec![RECORD_TAG, RECORD];
    rec.encode(&mut out);
    Bytes::from(out)
}

fn snapshot_record(image: Bytes) -> Bytes {
    let mut out = Vec::with_capacity(2 + image.len());
    out.extend_from_slice(&[RECORD_TAG, SNAPSHOT]);
    out.extend_from_slice(&image);
    Bytes::from(out)
}

/// What a replayed log holds: its last snapshot and the records after it,
/// and the transactions left prepared with logged writes.
fn replay(records: &[Bytes]) -> Result<(Replay, FastSet<TxnId>), DecodeError> {
    let mut r = Replay::default();
    let mut logged = fast_set();
    for rec in records {
        let mut buf = &rec[..];
        let tag = crate::paxos::codec::get_u8(&mut buf)?;
        let kind = crate::paxos::codec::get_u8(&mut buf)?;
        match (tag, kind) {
            (RECORD_TAG, RECORD) => {
                let rec = LogRecord::decode(&mut buf)?;
                note(&mut logged, &rec);
                r.records.push(rec);
            }
            (RECORD_TAG, SNAPSHOT) => {
                let img = image::decode(buf)?;
                logged = img
                    .prepared
                    .iter()
                    .filter(|p| !p.writes.is_empty())
                    .map(|p| p.txn)
                    .collect();
                r = Replay {
                    snapshot: Some(Bytes::copy_from_slice(buf)),
                    records: Vec::new(),
                };
            }
            (RECORD_TAG, kind) => {
                return Err(DecodeError::Tag {
                    what: "participant WAL record",
                    tag: kind,
                })
            }
            (tag, _) => {
                return Err(DecodeError::Tag {
                    what: "participant WAL (not a participant's record)",
                    tag,
                })
            }
        }
    }
    Ok((r, logged))
}

/// Track which transactions have a logged Prepare with writes and no
/// decision yet: their decisions are logged too.
fn note(logged: &mut FastSet<TxnId>, rec: &LogRecord) -> bool {
    match rec {
        LogRecord::Prepare {
            txn,
            writes,
            one_phase,
            ..
        } => {
            if !writes.is_empty() && !one_phase {
                logged.insert(*txn);
            }
            !writes.is_empty()
        }
        LogRecord::Commit { txn } | LogRecord::Abort { txn } => logged.remove(txn),
    }
}

/// A record on its way to the disk.
struct InFlight {
    token: u64,
    rec: LogRecord,
    durable: bool,
}

/// The participant's records in the node's write-ahead log. See the module
/// docs.
pub struct WalLog {
    /// Records waiting for their persist (or behind one of the same
    /// transaction), in append order.
    in_flight: VecDeque<InFlight>,
    ready: VecDeque<LogRecord>,
    replay: Option<Replay>,
    /// Prepared transactions with a logged Prepare and no decision yet.
    logged: FastSet<TxnId>,
    seq: u64,
    /// Whether records survive a crash here; if not, nothing is written.
    durable: bool,
}

impl WalLog {
    fn next_token(&mut self) -> u64 {
        self.seq += 1;
        (u64::from(RECORD_TAG) << 56) | self.seq
    }

    /// Hand back, in order, the records whose persist completed.
    fn advance(&mut self) {
        while self.in_flight.front().is_some_and(|f| f.durable) {
            let f = self.in_flight.pop_front().expect("front exists");
            self.ready.push_back(f.rec);
        }
    }
}

impl ParticipantLog for WalLog {
    type Config = ();

    /// Rebuild from the node's durable records. A log that does not decode
    /// was written by another build (the runtime checksums records): refuse
    /// to guess.
    fn open(_: &(), env: &ServerEnv) -> Self {
        let (replay, logged) = match replay(&env.recovered) {
            Ok(r) => r,
            Err(e) => panic!("participant WAL does not decode: {e}"),
        };
        tracing::info!(
            records = replay.records.len(),
            snapshot = replay.snapshot.is_some(),
            prepared = logged.len(),
            "participant WAL replayed"
        );
        WalLog {
            in_flight: VecDeque::new(),
            ready: VecDeque::new(),
            replay: Some(replay),
            logged,
            seq: 0,
            durable: env.durable,
        }
    }

    fn replay(&mut self) -> Replay {
        self.replay.take().unwrap_or_default()
    }

    fn append(&mut self, ctx: &mut Ctx<Msg>, rec: LogRecord) {
        if !self.durable {
            self.ready.push_back(rec);
            return;
        }
        let txn = rec.txn();
        let lazy = matches!(rec, LogRecord::Abort { .. });
        if note(&mut self.logged, &rec) {
            let token = self.next_token();
            ctx.persist(token, encode_record(&rec));
            if !lazy {
                self.in_flight.push_back(InFlight {
                    token,
                    rec,
                    durable: false,
                });
                return;
            }
        }
        if self.in_flight.iter().any(|f| f.rec.txn() == txn) {
            // Behind a record of the same transaction still on its way.
            self.in_flight.push_back(InFlight {
                token: 0,
                rec,
                durable: true,
            });
        } else {
            self.ready.push_back(rec);
        }
    }

    fn poll(&mut self) -> Option<LogEvent> {
        self.ready.pop_front().map(LogEvent::Chosen)
    }

    fn single_copy(&self) -> bool {
        true
    }

    fn in_order(&self) -> bool {
        true
    }

    fn records_writes(&self) -> bool {
        self.durable
    }

    fn on_persisted(&mut self, _ctx: &mut Ctx<Msg>, token: u64) -> bool {
        if token >> 56 != u64::from(RECORD_TAG) {
            return false;
        }
        if let Some(f) = self.in_flight.iter_mut().find(|f| f.token == token) {
            f.durable = true;
        }
        self.advance();
        true
    }

    fn checkpoint(&self, image: &dyn Fn(bool) -> Bytes) -> Option<Bytes> {
        Some(snapshot_record(image(true)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::{Key, NodeId};
    use tessera_core::storage::Store;
    use tessera_core::txn::Value;

    fn prepare(t: u64, k: u64, one_phase: bool) -> LogRecord {
        LogRecord::Prepare {
            txn: TxnId(t),
            coord: NodeId(1),
            writes: vec![(Key::new(0, k), Value::from_static(b"v"))],
            one_phase,
        }
    }

    #[test]
    fn replay_keeps_the_records_after_the_last_snapshot() {
        let mut s = Store::new();
        s.install(Key::new(0, 9), Value::from_static(b"z"), TxnId(7).version());
        let (k, v) = ([Key::new(0, 5)], [Value::from_static(b"p")]);
        let img = image::encode(&s, &[], vec![(TxnId(8), NodeId(1), &k, &v)], vec![]);
        let log = vec![
            encode_record(&prepare(1, 1, true)),
            snapshot_record(img.clone()),
            encode_record(&prepare(2, 2, false)),
            encode_record(&prepare(3, 3, false)),
            encode_record(&LogRecord::Abort { txn: TxnId(3) }),
            encode_record(&LogRecord::Commit { txn: TxnId(8) }),
        ];
        let (r, logged) = replay(&log).unwrap();
        assert_eq!(r.snapshot.as_deref(), Some(&img[..]));
        assert_eq!(r.records.len(), 4);
        assert_eq!(r.records[0], prepare(2, 2, false));
        assert_eq!(logged.into_iter().collect::<Vec<_>>(), vec![TxnId(2)]);
        assert!(replay(&[Bytes::from_static(&[0x50, 1, 0])]).is_err());
        assert!(replay(&[Bytes::from_static(&[RECORD_TAG, 9])]).is_err());
    }

    #[test]
    fn without_a_disk_records_come_back_at_once_unwritten() {
        for durable in [true, false] {
            let env = ServerEnv {
                me: NodeId(0),
                shard: tessera_core::ids::ShardId(0),
                replica: 0,
                topology: std::sync::Arc::new(tessera_core::topology::Topology::new(1, 1, 1)),
                store: Store::new(),
                recovered: Vec::new(),
                durable,
                decode: Default::default(),
            };
            let mut log = WalLog::open(&(), &env);
            let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(1);
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(0, NodeId(0), &mut rng, &mut effects);
            log.append(&mut ctx, prepare(1, 1, true));
            let back = log.poll().is_some();
            assert_eq!(back, !durable, "durable = {durable}");
            assert_eq!(effects.len(), usize::from(durable), "durable = {durable}");
        }
    }
}
