//! Built-in key-value procedures: `kv.get`, `kv.put` and `kv.incr` on named
//! keys, which every `tcp` server accepts whatever its workload (see
//! [`with_builtins`]). They are what the client library and `tessera txn`
//! run from the shell.
//!
//! * **Keys.** A key is a name of 1 to [`MAX_KEY_LEN`] characters from
//!   `A-Z a-z 0-9 _ . : / -` ([`check_key`]). It maps to a record as the
//!   workloads map theirs ([`crate`] docs): [`Key::in_shard`]`(`[`TABLE`]`,
//!   shard, rank)`, with shard and rank drawn from a 64-bit FNV-1a hash of
//!   the name ([`locate`]), so every process maps a name to the same record
//!   without asking anyone. [`TABLE`] is a table no workload uses, so shell
//!   transactions never touch benchmark rows. Two names whose hashes agree
//!   on shard and 40-bit rank would share a record (for 10⁶ names about one
//!   chance in 10⁶).
//! * **Pieces.** One deferrable, input-free piece per shard touched, in
//!   ascending shard order, as YCSB builds them: no piece's output feeds
//!   another (Rococo §3.1), outputs reach the client at commit.
//! * **Values.** `put` stores the bytes given. `incr` reads the value as a
//!   decimal `i64` (a missing key counts as 0), adds its argument and
//!   writes the sum back in decimal, so `get` prints what `incr` made; a
//!   value that is not a decimal integer, or a sum that overflows, rolls
//!   the transaction back as a user abort (not retried, nothing written).

use crate::mix64;
use bytes::{BufMut, Bytes, BytesMut};
use std::sync::Arc;
use tessera_core::codec::{
    get_bytes, get_len, get_u64, get_u8, get_value, get_varint, put_bytes, put_varint, DecodeError,
    EncodeError,
};
use tessera_core::storage::Store;
use tessera_core::txn::{Access, PieceKind, PieceResult, PieceSpec, Procedure, Txn, Value};
use tessera_core::workload::{ClientSlot, TxnGenerator, TxnProfile, Workload};
use tessera_core::{Key, ShardId};

/// The table the named keys live in: above every workload's tables (TPC-C
/// uses 0-11), and small, since a store indexes its tables by id.
pub const TABLE: u32 = 64;

/// Longest key name, in bytes.
pub const MAX_KEY_LEN: usize = 128;

/// Largest value `put` accepts, in bytes (a frame holds a transaction).
pub const MAX_VALUE_LEN: usize = 1 << 20;

/// Most keys one transaction names.
pub const MAX_KEYS: usize = 1024;

/// The three operations, with their procedure names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Get,
    Put,
    Incr,
}

impl Op {
    pub const fn procedure(self) -> &'static str {
        match self {
            Op::Get => "kv.get",
            Op::Put => "kv.put",
            Op::Incr => "kv.incr",
        }
    }

    fn from_procedure(name: &str) -> Option<Op> {
        [Op::Get, Op::Put, Op::Incr]
            .into_iter()
            .find(|o| o.procedure() == name)
    }
}

/// Why a key-value transaction could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    #[error(
        "bad key '{key}': {reason} (a key is 1-{MAX_KEY_LEN} characters of A-Z a-z 0-9 _ . : / -)"
    )]
    BadKey { key: String, reason: &'static str },
    #[error("key '{0}' is named twice in one transaction")]
    Duplicate(String),
    #[error("{0} needs at least one key")]
    NoKeys(&'static str),
    #[error("{op} names {n} keys; at most {MAX_KEYS} are allowed")]
    TooMany { op: &'static str, n: usize },
    #[error("the value of '{key}' has {len} bytes; at most {MAX_VALUE_LEN} are allowed")]
    ValueTooLong { key: String, len: usize },
}

/// Check a key name (see the module docs for the syntax).
pub fn check_key(name: &str) -> Result<(), KvError> {
    let bad = |reason| KvError::BadKey {
        key: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > MAX_KEY_LEN {
        return Err(bad("too long"));
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || "_.:/-".contains(c);
    if !name.chars().all(ok) {
        return Err(bad("it contains a character outside the allowed set"));
    }
    Ok(())
}

/// The record of key `name` in a cluster of `shards` shards.
pub fn locate(name: &str, shards: u32) -> Key {
    // FNV-1a: stable across processes, versions and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let shard = ShardId((h % u64::from(shards.max(1))) as u32);
    Key::in_shard(TABLE, shard, mix64(h))
}

/// One `kv.*` transaction.
#[derive(Clone, Debug)]
pub struct KvTxn {
    op: Op,
    pieces: Vec<PieceSpec>,
    /// Piece 0's keys, then piece 1's, …: each piece's reads (get, incr) or
    /// writes (put) in this order.
    keys: Vec<Key>,
    /// `put`: the value of each key in `keys`.
    values: Vec<Value>,
    /// `incr`: the amount added.
    by: i64,
    /// For each key in the order the caller named them, its index in `keys`.
    order: Vec<usize>,
}

impl KvTxn {
    /// Read `names` (in this order).
    pub fn get(names: &[&str], shards: u32) -> Result<Self, KvError> {
        let keys = names
            .iter()
            .map(|n| Ok((*n, locate_checked(n, shards)?)))
            .collect::<Result<Vec<_>, KvError>>()?;
        Self::build(
            Op::Get,
            keys.into_iter().map(|(n, k)| (n, k, Value::new())),
            0,
        )
    }

    /// Write each `(name, value)`.
    pub fn put(pairs: &[(&str, Value)], shards: u32) -> Result<Self, KvError> {
        let mut entries = Vec::with_capacity(pairs.len());
        for (n, v) in pairs {
            if v.len() > MAX_VALUE_LEN {
                return Err(KvError::ValueTooLong {
                    key: n.to_string(),
                    len: v.len(),
                });
            }
            entries.push((*n, locate_checked(n, shards)?, v.clone()));
        }
        Self::build(Op::Put, entries, 0)
    }

    /// Add `by` to the decimal integer at `name`.
    pub fn incr(name: &str, by: i64, shards: u32) -> Result<Self, KvError> {
        let key = locate_checked(name, shards)?;
        Self::build(Op::Incr, [(name, key, Value::new())], by)
    }

    pub fn op(&self) -> Op {
        self.op
    }

    /// Group the entries into one piece per shard (ascending), keeping the
    /// caller's order within a shard.
    fn build<'a>(
        op: Op,
        entries: impl IntoIterator<Item = (&'a str, Key, Value)>,
        by: i64,
    ) -> Result<Self, KvError> {
        let mut entries: Vec<(usize, &str, Key, Value)> = entries
            .into_iter()
            .enumerate()
            .map(|(i, (n, k, v))| (i, n, k, v))
            .collect();
        if entries.is_empty() {
            return Err(KvError::NoKeys(op.procedure()));
        }
        if entries.len() > MAX_KEYS {
            return Err(KvError::TooMany {
                op: op.procedure(),
                n: entries.len(),
            });
        }
        entries.sort_by_key(|e| (crate::key_shard(e.2), e.0));
        let mut seen = tessera_core::fast_set();
        for e in &entries {
            if !seen.insert(e.2) {
                let name = match e.1 {
                    "" => format!("{:?}", e.2),
                    n => n.to_string(),
                };
                return Err(KvError::Duplicate(name));
            }
        }
        let mut order = vec![0; entries.len()];
        for (at, e) in entries.iter().enumerate() {
            order[e.0] = at;
        }
        let keys: Vec<Key> = entries.iter().map(|e| e.2).collect();
        let pieces = keys
            .chunk_by(|a, b| crate::key_shard(*a) == crate::key_shard(*b))
            .map(|run| {
                let access: Vec<Access> = run.iter().map(|k| Access::all(*k)).collect();
                PieceSpec {
                    shard: crate::key_shard(run[0]),
                    reads: if op == Op::Put {
                        Vec::new()
                    } else {
                        access.clone()
                    },
                    writes: if op == Op::Get { Vec::new() } else { access },
                    kind: PieceKind::Deferrable,
                    inputs: Vec::new(),
                    dynamic: false,
                }
            })
            .collect();
        Ok(KvTxn {
            op,
            pieces,
            keys,
            values: entries.into_iter().map(|e| e.3).collect(),
            by,
            order,
        })
    }

    /// The first index in `keys` of piece `piece`'s keys.
    fn first_key(&self, piece: usize) -> usize {
        self.pieces[..piece]
            .iter()
            .map(|p| p.reads.len().max(p.writes.len()))
            .sum()
    }

    /// What a committed `get` read, in the order the keys were named
    /// (`None`: no such key), from the pieces' outputs.
    pub fn read_values(&self, outputs: &[Value]) -> Result<Vec<Option<Value>>, DecodeError> {
        if outputs.len() != self.pieces.len() {
            return Err(DecodeError::invalid(
                "kv outputs",
                format!("{} outputs for {} pieces", outputs.len(), self.pieces.len()),
            ));
        }
        let mut found = Vec::with_capacity(self.keys.len());
        for (p, out) in self.pieces.iter().zip(outputs) {
            let mut buf = &out[..];
            for _ in 0..p.reads.len() {
                found.push(match get_u8(&mut buf, "kv presence")? {
                    0 => None,
                    _ => Some(get_value(&mut buf, "kv value")?),
                });
            }
        }
        Ok(self.order.iter().map(|&i| found[i].clone()).collect())
    }

    /// The sum a committed `incr` wrote.
    pub fn incremented(&self, outputs: &[Value]) -> Result<i64, DecodeError> {
        outputs
            .first()
            .and_then(|v| parse_int(v))
            .ok_or_else(|| DecodeError::invalid("kv.incr output", "not a decimal integer"))
    }
}

fn locate_checked(name: &str, shards: u32) -> Result<Key, KvError> {
    check_key(name)?;
    Ok(locate(name, shards))
}

/// A stored value as a decimal `i64` (surrounding whitespace allowed).
pub fn parse_int(v: &[u8]) -> Option<i64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

impl Procedure for KvTxn {
    fn name(&self) -> &'static str {
        self.op.procedure()
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], _inputs: &[Value]) -> PieceResult {
        let first = self.first_key(piece);
        let spec = &self.pieces[piece];
        match self.op {
            Op::Get => {
                let mut out = BytesMut::new();
                for r in reads {
                    match r {
                        Some(v) => {
                            out.put_u8(1);
                            put_bytes(&mut out, v);
                        }
                        None => out.put_u8(0),
                    }
                }
                PieceResult {
                    writes: Vec::new(),
                    output: out.freeze(),
                    user_abort: false,
                }
            }
            Op::Put => PieceResult {
                writes: spec
                    .writes
                    .iter()
                    .zip(&self.values[first..])
                    .map(|(a, v)| (a.key, v.clone()))
                    .collect(),
                output: Value::new(),
                user_abort: false,
            },
            Op::Incr => {
                let old = match reads.first().copied().flatten() {
                    None => Some(0),
                    Some(v) => parse_int(v),
                };
                match old.and_then(|o| o.checked_add(self.by)) {
                    Some(new) => {
                        let v = Bytes::from(new.to_string());
                        PieceResult {
                            writes: vec![(spec.writes[0].key, v.clone())],
                            output: v,
                            user_abort: false,
                        }
                    }
                    None => PieceResult {
                        user_abort: true,
                        ..PieceResult::default()
                    },
                }
            }
        }
    }

    /// Wire parameters: the key count; per key its shard and rank (varints)
    /// and, for `put`, its value; for `incr`, the amount (8 bytes).
    fn encode_params(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        put_varint(out, self.keys.len() as u64);
        for (i, k) in self.keys.iter().enumerate() {
            put_varint(out, u64::from(crate::key_shard(*k).0));
            put_varint(out, crate::key_rank(*k));
            if self.op == Op::Put {
                put_bytes(out, &self.values[i]);
            }
        }
        if self.op == Op::Incr {
            out.put_u64_le(self.by as u64);
        }
        Ok(())
    }
}

/// Rebuild `kv.*` procedure `op` from its parameters, checked against a
/// cluster of `shards` shards (the same limits as the constructors).
fn decode(op: Op, mut buf: &[u8], shards: u32) -> Result<KvTxn, DecodeError> {
    let buf = &mut buf;
    let n = get_len(buf, 2, "kv keys")?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let shard = get_varint(buf, "kv shard")?;
        if shard >= u64::from(shards) {
            return Err(DecodeError::invalid(
                "kv shard",
                format!("{shard} >= shards ({shards})"),
            ));
        }
        let rank = get_varint(buf, "kv rank")?;
        if rank >> crate::RANK_BITS != 0 {
            return Err(DecodeError::invalid("kv rank", "wider than 40 bits"));
        }
        let value = match op {
            Op::Put => Bytes::copy_from_slice(get_bytes(buf, "kv value")?),
            _ => Value::new(),
        };
        entries.push(("", Key::in_shard(TABLE, ShardId(shard as u32), rank), value));
    }
    let by = match op {
        Op::Incr => {
            if n != 1 {
                return Err(DecodeError::invalid("kv.incr", format!("{n} keys, not 1")));
            }
            get_u64(buf, "kv.incr amount")? as i64
        }
        _ => 0,
    };
    if !buf.is_empty() {
        return Err(DecodeError::Trailing(buf.len()));
    }
    if entries.iter().any(|e| e.2.len() > MAX_VALUE_LEN) {
        return Err(DecodeError::invalid("kv value", "too long"));
    }
    KvTxn::build(op, entries, by).map_err(|e| DecodeError::invalid("kv transaction", e.to_string()))
}

/// `inner` with the `kv.*` procedures added to what it decodes; everything
/// else is `inner`'s. The `tcp` servers and clients decode with this, so
/// the shell's transactions run beside any workload's.
pub fn with_builtins(inner: Arc<dyn Workload>) -> Arc<dyn Workload> {
    Arc::new(Builtins { inner })
}

struct Builtins {
    inner: Arc<dyn Workload>,
}

impl Workload for Builtins {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    fn load(&self, shard: ShardId, store: &mut Store) {
        self.inner.load(shard, store)
    }
    fn generator(&self, client: ClientSlot) -> Box<dyn TxnGenerator> {
        self.inner.generator(client)
    }
    fn check_consistency(&self, stores: &[Store]) -> Option<Vec<String>> {
        self.inner.check_consistency(stores)
    }
    fn profiles(&self) -> Vec<TxnProfile> {
        self.inner.profiles()
    }
    fn decode_txn(&self, name: &str, params: &[u8]) -> Result<Txn, DecodeError> {
        match Op::from_procedure(name) {
            Some(op) => Ok(Arc::new(decode(op, params, self.inner.shards())?)),
            None => self.inner.decode_txn(name, params),
        }
    }
}

#[cfg(test)]
mod tests;
