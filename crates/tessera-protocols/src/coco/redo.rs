//! COCO's durable log (§6.2) and what a restarted server rebuilds from it
//! (§3.2).
//!
//! A server logs four kinds of records:
//!
//! * **redo** — the writes a server installed (key, timestamp, version,
//!   value), each tagged with its transaction's epoch, buffered in memory
//!   and forced at the end of the epoch; the forced buffer ends the epoch's
//!   prepared record (§3.1: the writes are durable before the prepared
//!   record is). A backup also forces a batch before acknowledging a write
//!   of an epoch it already prepared (epoch mode: the 2PC modes never read
//!   a server's log, [`super::CommitMode::recovers_from_log`]).
//! * **commit** — the epoch manager's commit record of an epoch (§3.1).
//! * **abort** — the epoch manager's decision to abort a range of epochs,
//!   forced before anyone hears of it, so that a restarted manager never
//!   reuses an epoch some server already moved past.
//! * **checkpoint** — every few committed epochs: the image of every record
//!   written since the load as of the last committed epoch (the version
//!   saved before each open epoch's first write, see [`super::undo`]), the
//!   aborted ranges so far, and the redo entries of the open epochs, which
//!   earlier records may hold. Recovery starts at the last checkpoint and
//!   replays only the log after it.
//!
//! Recovery applies only entries of committed epochs: entries of aborted
//! epochs, and of the epoch in flight at the crash (which aborts, §3.2),
//! are dropped. Entries are replayed with the Thomas write rule, as a
//! backup applies them, so the order of a backup's log does not matter.

use super::undo::Saved;
use bytes::{BufMut, Bytes, BytesMut};
use tessera_core::codec::{
    get_key, get_len, get_u64, get_u8, get_value, put_bytes, put_key, put_varint, DecodeError,
};
use tessera_core::ids::{Key, Version};
use tessera_core::storage::Store;
use tessera_core::txn::Value;

const REDO: u8 = 1;
const COMMIT: u8 = 2;
const ABORT: u8 = 3;
const CHECKPOINT: u8 = 4;

/// One logged write.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub epoch: u64,
    pub key: Key,
    pub ts: u64,
    pub version: Version,
    pub value: Value,
}

impl Entry {
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.epoch);
        put_key(out, self.key);
        out.put_u64_le(self.ts);
        out.put_u64_le(self.version.0);
        put_bytes(out, &self.value);
    }

    fn decode(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Entry {
            epoch: get_u64(buf, "redo epoch")?,
            key: get_key(buf)?,
            ts: get_u64(buf, "redo timestamp")?,
            version: Version(get_u64(buf, "redo version")?),
            value: get_value(buf, "redo value")?,
        })
    }
}

/// A redo record: `entries` (encoded [`Entry`]s), and the epoch this
/// record prepares, if it is a prepared record.
pub fn redo_record(entries: &[u8], prepared: Option<u64>) -> Bytes {
    let mut out = BytesMut::with_capacity(9 + entries.len());
    out.put_u8(REDO);
    out.put_u64_le(prepared.unwrap_or(0));
    out.put_slice(entries);
    out.freeze()
}

pub fn commit_record(epoch: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(9);
    out.put_u8(COMMIT);
    out.put_u64_le(epoch);
    out.freeze()
}

pub fn abort_record(epoch: u64, next: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(17);
    out.put_u8(ABORT);
    out.put_u64_le(epoch);
    out.put_u64_le(next);
    out.freeze()
}

/// A checkpoint as of committed epoch `committed`: `image`, every record
/// written since the load as that epoch left it (see
/// [`super::undo::Undo::oldest`]), plus the redo entries of the open
/// epochs.
pub fn checkpoint_record(
    committed: u64,
    aborted: &[(u64, u64)],
    image: &[(Key, Saved)],
    open: &[Entry],
) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u8(CHECKPOINT);
    out.put_u64_le(committed);
    put_varint(&mut out, aborted.len() as u64);
    for &(a, b) in aborted {
        out.put_u64_le(a);
        out.put_u64_le(b);
    }
    put_varint(&mut out, image.len() as u64);
    for (k, s) in image {
        put_key(&mut out, *k);
        out.put_u64_le(s.wts);
        out.put_u64_le(s.version.0);
        put_bytes(&mut out, &s.value);
    }
    for e in open {
        e.encode(&mut out);
    }
    out.freeze()
}

/// What a server's log says, from its last checkpoint on.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The last epoch known committed: the checkpoint's, or the manager's
    /// last commit record.
    pub committed: u64,
    /// Every aborted range known.
    pub aborted: Vec<(u64, u64)>,
    /// The last epoch this server prepared.
    pub prepared: u64,
    /// The checkpoint's image: (key, wts, version, value).
    pub image: Vec<(Key, u64, Version, Value)>,
    /// Redo entries after the checkpoint (the checkpoint's open entries
    /// first), in log order.
    pub entries: Vec<Entry>,
    /// Records and bytes read (the checkpoint and everything after it).
    pub records: usize,
    pub bytes: usize,
    /// Whether recovery started at a checkpoint (not the log's start).
    pub from_checkpoint: bool,
}

impl Recovered {
    /// The first epoch after every aborted range (0: none).
    pub fn floor(&self) -> u64 {
        self.aborted.iter().map(|r| r.1).max().unwrap_or(0)
    }

    /// Rebuild `store` (as loaded) as of the committed epochs only: the
    /// checkpoint image, then every entry of an epoch up to `committed`
    /// that is not in an `aborted` range, newest timestamp winning. Returns
    /// the entries applied.
    pub fn replay(
        &self,
        store: &mut Store,
        committed: u64,
        aborted: &[(u64, u64)],
        lt_occ: bool,
    ) -> usize {
        for (k, wts, version, value) in &self.image {
            set(store, *k, *wts, *version, value.clone(), lt_occ);
        }
        let mut n = 0;
        for e in &self.entries {
            if e.epoch > committed || aborted.iter().any(|&(a, b)| (a..b).contains(&e.epoch)) {
                continue;
            }
            n += 1;
            if store.get(e.key).is_none_or(|r| e.ts > r.meta.wts) {
                set(store, e.key, e.ts, e.version, e.value.clone(), lt_occ);
            }
        }
        n
    }
}

fn set(store: &mut Store, k: Key, wts: u64, version: Version, value: Value, lt_occ: bool) {
    store.install(k, value, version);
    let r = store.get_mut(k).expect("installed");
    r.meta.wts = wts;
    // A read validated before the crash was at a timestamp of an epoch
    // that is over; every later write is in a later epoch (the epoch is
    // the timestamp's top bits), so the rts may restart at the wts.
    r.meta.rts = if lt_occ { wts } else { r.meta.rts };
}

/// Read a server's durable records (in the order they were persisted).
pub fn recover(records: &[Bytes]) -> Result<Recovered, DecodeError> {
    let start = records
        .iter()
        .rposition(|r| r.first() == Some(&CHECKPOINT))
        .unwrap_or(0);
    let mut out = Recovered::default();
    for rec in &records[start..] {
        out.records += 1;
        out.bytes += rec.len();
        let mut buf = &rec[..];
        match get_u8(&mut buf, "log record kind")? {
            REDO => {
                let prepared = get_u64(&mut buf, "prepared epoch")?;
                out.prepared = out.prepared.max(prepared);
                while !buf.is_empty() {
                    out.entries.push(Entry::decode(&mut buf)?);
                }
            }
            COMMIT => out.committed = out.committed.max(get_u64(&mut buf, "commit epoch")?),
            ABORT => {
                let a = get_u64(&mut buf, "abort epoch")?;
                let b = get_u64(&mut buf, "abort next")?;
                out.aborted.push((a, b));
            }
            CHECKPOINT => {
                out.from_checkpoint = true;
                out.committed = get_u64(&mut buf, "checkpoint epoch")?;
                out.prepared = out.prepared.max(out.committed);
                let n = get_len(&mut buf, 16, "aborted ranges")?;
                for _ in 0..n {
                    let a = get_u64(&mut buf, "aborted from")?;
                    let b = get_u64(&mut buf, "aborted to")?;
                    out.aborted.push((a, b));
                }
                let n = get_len(&mut buf, 20, "checkpoint image")?;
                for _ in 0..n {
                    let k = get_key(&mut buf)?;
                    let wts = get_u64(&mut buf, "image wts")?;
                    let v = Version(get_u64(&mut buf, "image version")?);
                    let value = get_value(&mut buf, "image value")?;
                    out.image.push((k, wts, v, value));
                }
                while !buf.is_empty() {
                    out.entries.push(Entry::decode(&mut buf)?);
                }
            }
            tag => return Err(DecodeError::invalid("log record kind", format!("{tag}"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(epoch: u64, row: u64, ts: u64, v: &'static [u8]) -> Entry {
        Entry {
            epoch,
            key: Key::new(0, row),
            ts,
            version: Version(ts),
            value: Value::from_static(v),
        }
    }

    fn redo(entries: &[Entry], prepared: Option<u64>) -> Bytes {
        let mut b = BytesMut::new();
        for e in entries {
            e.encode(&mut b);
        }
        redo_record(&b, prepared)
    }

    /// §3.2: only committed epochs come back; the epoch in flight at the
    /// crash and aborted ones do not, even when their writes were forced.
    #[test]
    fn replay_applies_committed_epochs_only() {
        let log = vec![
            redo(&[entry(1, 1, 10, b"a1"), entry(2, 2, 20, b"b2")], Some(1)),
            redo(&[entry(2, 1, 21, b"a2")], Some(2)),
            abort_record(3, 5),
            redo(&[entry(3, 2, 30, b"b3"), entry(5, 3, 50, b"c5")], None),
        ];
        let r = recover(&log).unwrap();
        assert_eq!((r.prepared, r.floor()), (2, 5));
        let mut store = Store::new();
        store.load(Key::new(0, 3), Value::from_static(b"c0"));
        assert_eq!(r.replay(&mut store, 4, &r.aborted, false), 3);
        let get = |s: &Store, row| s.get(Key::new(0, row)).unwrap().value.clone();
        assert_eq!(&get(&store, 1)[..], b"a2");
        assert_eq!(&get(&store, 2)[..], b"b2");
        // Epoch 5 is not committed.
        assert_eq!(&get(&store, 3)[..], b"c0");
    }

    /// A backup's log can hold an older write after a newer one: the
    /// newest timestamp wins, as the Thomas write rule had it.
    #[test]
    fn replay_keeps_the_newest_write() {
        let log = vec![redo(
            &[entry(2, 1, 21, b"new"), entry(2, 1, 20, b"old")],
            Some(2),
        )];
        let r = recover(&log).unwrap();
        let mut store = Store::new();
        r.replay(&mut store, 2, &[], true);
        let rec = store.get(Key::new(0, 1)).unwrap();
        assert_eq!(
            (&rec.value[..], rec.meta.wts, rec.meta.rts),
            (&b"new"[..], 21, 21)
        );
    }

    /// Recovery reads from the last checkpoint: its image is the committed
    /// state (not the open epoch's write), and its open entries come back
    /// once their epoch is known committed.
    #[test]
    fn recovery_starts_at_the_last_checkpoint() {
        let k = Key::new(0, 1);
        let committed = Saved {
            value: Value::from_static(b"committed"),
            version: Version(30),
            wts: 30,
            rts: 30,
        };
        let open = [entry(4, 1, 40, b"open")];
        let log = vec![
            redo(&[entry(1, 9, 10, b"old")], Some(1)),
            checkpoint_record(3, &[(2, 3)], &[(k, committed)], &open),
            redo(&[entry(5, 2, 50, b"five")], Some(4)),
        ];
        let r = recover(&log).unwrap();
        assert_eq!((r.records, r.committed, r.prepared), (2, 3, 4));
        assert!(r.from_checkpoint);
        assert_eq!(r.aborted, vec![(2, 3)]);
        let mut s = Store::new();
        assert_eq!(r.replay(&mut s, 3, &r.aborted, false), 0);
        assert_eq!(&s.get(k).unwrap().value[..], b"committed");
        assert!(s.get(Key::new(0, 9)).is_none(), "before the checkpoint");
        let mut s = Store::new();
        assert_eq!(r.replay(&mut s, 5, &r.aborted, false), 2);
        assert_eq!(&s.get(k).unwrap().value[..], b"open");
    }
}
