//! The wire codec of the memory-node protocols' messages ([`Msg`]: the
//! one-sided verbs and their results, connection setup, and OOCC's Lease
//! Manager and clock synchronization, §VII), so that `oocc`, `ford-occ`,
//! `drtm` and `dslr` run on `--runtime tcp`: each memory node a server
//! process, the compute nodes' coordinators in the bench driver.
//!
//! On RDMA a verb is a NIC work request and its completion; over TCP a
//! batch of verbs (one doorbell) is one frame and its results another. The
//! memory node still runs no protocol logic: it decodes verbs and applies
//! them to its region.
//!
//! Layout: a tag byte ([`tag`]), then per message:
//! * Connect: nothing. Connected: buckets, slots per bucket (varints).
//! * Batch: id (varint), ack flag, verb count, verbs. Done: id, result
//!   count, results.
//! * A verb: its tag, then READ: address, length; WRITE: address, then
//!   what it covers (tag; the lock word; or key, value, version and, with
//!   the lock, the lock word); CAS: address, expected and new lock words;
//!   FAA: address, the addend; LOG: the transaction, the entry count, per
//!   entry key, a presence byte and the value, version.
//! * A result: its tag, then READ: slot count, per slot its address, a
//!   presence byte and key, a presence byte and value, version, lock word;
//!   CAS/FAA: the old lock word; WRITE and out-of-range: nothing.
//! * Lease: the lease message's tag, then its fields (times and counters
//!   as varints; the stage a byte; statistics as decided, skipped, and the
//!   window histogram's buckets in increasing order with their counts).
//!
//! Addresses and lengths are varints; lock words and versions are 8 bytes
//! (lock words carry bit fields and DrTM's lease times, rarely small).
//! Keys and values use the shared encoders of [`tessera_core::codec`].
//!
//! Decoding checks what later code computes with: a geometry with no
//! bucket, no slot per bucket or more slots than addresses (a coordinator
//! hashes keys modulo the bucket count), addresses beyond `u32`. An
//! address inside `u32` but outside the region is the memory node's to
//! refuse ([`super::region::Region::apply`] answers it as a remote access
//! error).

use super::region::{Addr, Geometry};
use super::verbs::{LogRecord, Msg, SlotImage, SlotWrite, Verb, VerbResult};
use crate::oocc::lease::Stage;
use crate::oocc::manager::{LeaseMsg, RoStats};
use bytes::{BufMut, BytesMut};
use tessera_core::codec::{
    get_bool, get_key, get_len, get_u64, get_u8, get_value, get_varint, get_version, put_bytes,
    put_key, put_varint, Codec, DecodeCx, DecodeError, EncodeError,
};
use tessera_core::ids::{Key, Version};
use tessera_core::txn::Value;

/// Tags on the wire; append, never renumber.
mod tag {
    pub const CONNECT: u8 = 0;
    pub const CONNECTED: u8 = 1;
    pub const BATCH: u8 = 2;
    pub const DONE: u8 = 3;
    pub const LEASE: u8 = 4;

    pub const READ: u8 = 0;
    pub const WRITE: u8 = 1;
    pub const CAS: u8 = 2;
    pub const FAA: u8 = 3;
    pub const LOG: u8 = 4;

    pub const LOCK: u8 = 0;
    pub const DATA: u8 = 1;
    pub const DATA_AND_LOCK: u8 = 2;

    pub const READ_RESULT: u8 = 0;
    pub const WRITTEN: u8 = 1;
    pub const ATOMIC: u8 = 2;
    pub const OUT_OF_RANGE: u8 = 3;

    pub const PREPARE: u8 = 0;
    pub const COMMIT: u8 = 1;
    pub const ACK: u8 = 2;
    pub const POLL: u8 = 3;
    pub const STATS: u8 = 4;
    pub const SYNC: u8 = 5;
    pub const SYNC_REPLY: u8 = 6;
}

/// The fewest bytes a verb takes on the wire (tag, address, one more
/// byte): what a forged verb count is checked against.
const MIN_VERB: usize = 3;
/// The fewest bytes of a verb result (its tag).
const MIN_RESULT: usize = 1;
/// The fewest bytes of a slot image (address, two presence bytes, version
/// and lock word).
const MIN_IMAGE: usize = 1 + 2 + 16;
/// The fewest bytes of a log entry (key, presence byte, version).
const MIN_LOG_ENTRY: usize = 9 + 1 + 8;

fn get_addr(buf: &mut &[u8], what: &'static str) -> Result<Addr, DecodeError> {
    u32::try_from(get_varint(buf, what)?).map_err(|_| DecodeError::invalid(what, "> u32"))
}

fn put_word(out: &mut BytesMut, w: u64) {
    out.put_u64_le(w);
}

/// `v` behind a presence byte, written by `put`.
fn put_opt<T>(out: &mut BytesMut, v: &Option<T>, put: impl FnOnce(&mut BytesMut, &T)) {
    out.put_u8(u8::from(v.is_some()));
    if let Some(v) = v {
        put(out, v);
    }
}

/// A value behind a presence byte, read by `get`.
fn get_opt<T>(
    buf: &mut &[u8],
    what: &'static str,
    get: impl FnOnce(&mut &[u8]) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    Ok(if get_bool(buf, what)? {
        Some(get(buf)?)
    } else {
        None
    })
}

fn put_value(out: &mut BytesMut, v: &Value) {
    put_bytes(out, v);
}

fn get_record_value(buf: &mut &[u8]) -> Result<Value, DecodeError> {
    get_value(buf, "record value")
}

/// `n` items, each read by `get`, after a count checked against the bytes
/// left (each item takes at least `min` of them).
fn get_vec<T>(
    buf: &mut &[u8],
    min: usize,
    what: &'static str,
    mut get: impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let n = get_len(buf, min, what)?;
    (0..n).map(|_| get(buf)).collect()
}

fn get_geometry(buf: &mut &[u8]) -> Result<Geometry, DecodeError> {
    let buckets = get_addr(buf, "bucket count")?;
    let bucket_slots = get_addr(buf, "slots per bucket")?;
    if buckets == 0 || bucket_slots == 0 || buckets.checked_mul(bucket_slots).is_none() {
        return Err(DecodeError::invalid(
            "region geometry",
            format!(
                "{buckets} buckets of {bucket_slots} slots (need at least one of each, at most 2^32 slots)"
            ),
        ));
    }
    Ok(Geometry {
        buckets,
        bucket_slots,
    })
}

/// Key, value and version: the data of a whole-record WRITE.
fn put_data(out: &mut BytesMut, key: Key, value: &Value, version: Version) {
    put_key(out, key);
    put_value(out, value);
    put_word(out, version.0);
}

fn get_data(buf: &mut &[u8]) -> Result<(Key, Value, Version), DecodeError> {
    Ok((get_key(buf)?, get_record_value(buf)?, get_version(buf)?))
}

impl Codec for Verb {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Verb::Read { addr, len } => {
                out.put_u8(tag::READ);
                put_varint(out, u64::from(*addr));
                put_varint(out, u64::from(*len));
            }
            Verb::Write { addr, data } => {
                out.put_u8(tag::WRITE);
                put_varint(out, u64::from(*addr));
                match data {
                    SlotWrite::Lock(l) => {
                        out.put_u8(tag::LOCK);
                        put_word(out, *l);
                    }
                    SlotWrite::Data {
                        key,
                        value,
                        version,
                    } => {
                        out.put_u8(tag::DATA);
                        put_data(out, *key, value, *version);
                    }
                    SlotWrite::DataAndLock {
                        key,
                        value,
                        version,
                        lock,
                    } => {
                        out.put_u8(tag::DATA_AND_LOCK);
                        put_data(out, *key, value, *version);
                        put_word(out, *lock);
                    }
                }
            }
            Verb::Cas { addr, expect, swap } => {
                out.put_u8(tag::CAS);
                put_varint(out, u64::from(*addr));
                put_word(out, *expect);
                put_word(out, *swap);
            }
            Verb::Faa { addr, add } => {
                out.put_u8(tag::FAA);
                put_varint(out, u64::from(*addr));
                put_word(out, *add);
            }
            Verb::Log(r) => {
                out.put_u8(tag::LOG);
                put_word(out, r.txn);
                put_varint(out, r.entries.len() as u64);
                for (key, value, version) in &r.entries {
                    put_key(out, *key);
                    put_opt(out, value, put_value);
                    put_word(out, version.0);
                }
            }
        }
        Ok(())
    }

    fn decode(buf: &mut &[u8], _cx: &DecodeCx) -> Result<Self, DecodeError> {
        Ok(match get_u8(buf, "verb tag")? {
            tag::READ => Verb::Read {
                addr: get_addr(buf, "READ address")?,
                len: get_addr(buf, "READ length")?,
            },
            tag::WRITE => Verb::Write {
                addr: get_addr(buf, "WRITE address")?,
                data: match get_u8(buf, "WRITE coverage")? {
                    tag::LOCK => SlotWrite::Lock(get_u64(buf, "lock word")?),
                    tag::DATA => {
                        let (key, value, version) = get_data(buf)?;
                        SlotWrite::Data {
                            key,
                            value,
                            version,
                        }
                    }
                    tag::DATA_AND_LOCK => {
                        let (key, value, version) = get_data(buf)?;
                        SlotWrite::DataAndLock {
                            key,
                            value,
                            version,
                            lock: get_u64(buf, "lock word")?,
                        }
                    }
                    t => {
                        return Err(DecodeError::UnknownTag {
                            what: "WRITE coverage",
                            tag: t.into(),
                        })
                    }
                },
            },
            tag::CAS => Verb::Cas {
                addr: get_addr(buf, "CAS address")?,
                expect: get_u64(buf, "CAS expected word")?,
                swap: get_u64(buf, "CAS new word")?,
            },
            tag::FAA => Verb::Faa {
                addr: get_addr(buf, "FAA address")?,
                add: get_u64(buf, "FAA addend")?,
            },
            tag::LOG => Verb::Log(LogRecord {
                txn: get_u64(buf, "log record's transaction")?,
                entries: get_vec(buf, MIN_LOG_ENTRY, "log entries", |b| {
                    Ok((
                        get_key(b)?,
                        get_opt(b, "logged value present", get_record_value)?,
                        get_version(b)?,
                    ))
                })?,
            }),
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "verb",
                    tag: t.into(),
                })
            }
        })
    }
}

impl Codec for VerbResult {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            VerbResult::Read(imgs) => {
                out.put_u8(tag::READ_RESULT);
                put_varint(out, imgs.len() as u64);
                for i in imgs {
                    put_varint(out, u64::from(i.addr));
                    put_opt(out, &i.key, |o, k| put_key(o, *k));
                    put_opt(out, &i.value, put_value);
                    put_word(out, i.version.0);
                    put_word(out, i.lock);
                }
            }
            VerbResult::Written => out.put_u8(tag::WRITTEN),
            VerbResult::Atomic { old } => {
                out.put_u8(tag::ATOMIC);
                put_word(out, *old);
            }
            VerbResult::OutOfRange => out.put_u8(tag::OUT_OF_RANGE),
        }
        Ok(())
    }

    fn decode(buf: &mut &[u8], _cx: &DecodeCx) -> Result<Self, DecodeError> {
        Ok(match get_u8(buf, "verb result tag")? {
            tag::READ_RESULT => VerbResult::Read(get_vec(buf, MIN_IMAGE, "slot images", |b| {
                Ok(SlotImage {
                    addr: get_addr(b, "slot address")?,
                    key: get_opt(b, "slot key present", get_key)?,
                    value: get_opt(b, "slot value present", get_record_value)?,
                    version: get_version(b)?,
                    lock: get_u64(b, "lock word")?,
                })
            })?),
            tag::WRITTEN => VerbResult::Written,
            tag::ATOMIC => VerbResult::Atomic {
                old: get_u64(buf, "old lock word")?,
            },
            tag::OUT_OF_RANGE => VerbResult::OutOfRange,
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "verb result",
                    tag: t.into(),
                })
            }
        })
    }
}

fn stage_byte(s: Stage) -> u8 {
    match s {
        Stage::Prepare => 0,
        Stage::Commit => 1,
    }
}

fn get_stage(buf: &mut &[u8]) -> Result<Stage, DecodeError> {
    match get_u8(buf, "lease stage")? {
        0 => Ok(Stage::Prepare),
        1 => Ok(Stage::Commit),
        t => Err(DecodeError::UnknownTag {
            what: "lease stage",
            tag: t.into(),
        }),
    }
}

fn put_stats(out: &mut BytesMut, s: &RoStats) {
    put_varint(out, s.decided);
    put_varint(out, s.skipped);
    put_varint(out, s.windows.len() as u64);
    for (b, n) in &s.windows {
        out.put_u8(*b);
        put_varint(out, *n);
    }
}

/// Statistics with their histogram's buckets in increasing order (as
/// written), so that one message has one encoding.
fn get_stats(buf: &mut &[u8]) -> Result<RoStats, DecodeError> {
    let decided = get_varint(buf, "read-only decided")?;
    let skipped = get_varint(buf, "read-only skipped")?;
    let n = get_len(buf, 2, "window buckets")?;
    let mut windows = std::collections::BTreeMap::new();
    for _ in 0..n {
        let b = get_u8(buf, "window bucket")?;
        let count = get_varint(buf, "window count")?;
        if windows.last_key_value().is_some_and(|(last, _)| *last >= b) {
            return Err(DecodeError::invalid(
                "window buckets",
                "not in increasing order",
            ));
        }
        windows.insert(b, count);
    }
    Ok(RoStats {
        decided,
        skipped,
        windows,
    })
}

impl Codec for LeaseMsg {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            LeaseMsg::Prepare { epoch, old, new } => {
                out.put_u8(tag::PREPARE);
                put_varint(out, *epoch);
                put_varint(out, *old);
                put_varint(out, *new);
            }
            LeaseMsg::Commit { epoch, new } => {
                out.put_u8(tag::COMMIT);
                put_varint(out, *epoch);
                put_varint(out, *new);
            }
            LeaseMsg::Ack { epoch, stage } => {
                out.put_u8(tag::ACK);
                put_varint(out, *epoch);
                out.put_u8(stage_byte(*stage));
            }
            LeaseMsg::Poll { round } => {
                out.put_u8(tag::POLL);
                put_varint(out, *round);
            }
            LeaseMsg::Stats { round, stats } => {
                out.put_u8(tag::STATS);
                put_varint(out, *round);
                put_stats(out, stats);
            }
            LeaseMsg::Sync { seq } => {
                out.put_u8(tag::SYNC);
                put_varint(out, *seq);
            }
            LeaseMsg::SyncReply { seq, time } => {
                out.put_u8(tag::SYNC_REPLY);
                put_varint(out, *seq);
                put_varint(out, *time);
            }
        }
        Ok(())
    }

    fn decode(buf: &mut &[u8], _cx: &DecodeCx) -> Result<Self, DecodeError> {
        Ok(match get_u8(buf, "lease message tag")? {
            tag::PREPARE => LeaseMsg::Prepare {
                epoch: get_varint(buf, "lease epoch")?,
                old: get_varint(buf, "old lease")?,
                new: get_varint(buf, "new lease")?,
            },
            tag::COMMIT => LeaseMsg::Commit {
                epoch: get_varint(buf, "lease epoch")?,
                new: get_varint(buf, "new lease")?,
            },
            tag::ACK => LeaseMsg::Ack {
                epoch: get_varint(buf, "lease epoch")?,
                stage: get_stage(buf)?,
            },
            tag::POLL => LeaseMsg::Poll {
                round: get_varint(buf, "poll round")?,
            },
            tag::STATS => LeaseMsg::Stats {
                round: get_varint(buf, "poll round")?,
                stats: get_stats(buf)?,
            },
            tag::SYNC => LeaseMsg::Sync {
                seq: get_varint(buf, "sync sequence")?,
            },
            tag::SYNC_REPLY => LeaseMsg::SyncReply {
                seq: get_varint(buf, "sync sequence")?,
                time: get_varint(buf, "reference time")?,
            },
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "lease message",
                    tag: t.into(),
                })
            }
        })
    }
}

/// See the module docs for the layout.
impl Codec for Msg {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Msg::Connect => out.put_u8(tag::CONNECT),
            Msg::Connected(g) => {
                out.put_u8(tag::CONNECTED);
                put_varint(out, u64::from(g.buckets));
                put_varint(out, u64::from(g.bucket_slots));
            }
            Msg::Batch { id, ack, verbs } => {
                out.put_u8(tag::BATCH);
                put_varint(out, *id);
                out.put_u8(u8::from(*ack));
                put_varint(out, verbs.len() as u64);
                for v in verbs {
                    v.encode(out)?;
                }
            }
            Msg::Done { id, results } => {
                out.put_u8(tag::DONE);
                put_varint(out, *id);
                put_varint(out, results.len() as u64);
                for r in results {
                    r.encode(out)?;
                }
            }
            Msg::Lease(m) => {
                out.put_u8(tag::LEASE);
                m.encode(out)?;
            }
        }
        Ok(())
    }

    fn decode(buf: &mut &[u8], cx: &DecodeCx) -> Result<Self, DecodeError> {
        Ok(match get_u8(buf, "message tag")? {
            tag::CONNECT => Msg::Connect,
            tag::CONNECTED => Msg::Connected(get_geometry(buf)?),
            tag::BATCH => Msg::Batch {
                id: get_varint(buf, "batch id")?,
                ack: get_bool(buf, "ack flag")?,
                verbs: get_vec(buf, MIN_VERB, "verbs", |b| Verb::decode(b, cx))?,
            },
            tag::DONE => Msg::Done {
                id: get_varint(buf, "batch id")?,
                results: get_vec(buf, MIN_RESULT, "verb results", |b| {
                    VerbResult::decode(b, cx)
                })?,
            },
            tag::LEASE => Msg::Lease(LeaseMsg::decode(buf, cx)?),
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "memory-node message",
                    tag: t.into(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests;
