//! YCSB as COCO runs it (COCO, VLDB '21, §7.1.1; see
//! `/work/shared/papers/coco-vldb21.txt`).
//!
//! "There is a single table and each row has ten attributes. The primary key
//! of the table is a 64-bit integer and each attribute has 10 random bytes.
//! We run a workload mix of 80/20, i.e., each transaction has 8 read
//! operations and 2 read/write operations. By default, we run this workload
//! with 20% multi-partition transactions." COCO loads 400K records per
//! partition; our default is [`YcsbConfig::keys_per_partition`] = 200,000.
//!
//! What this module does:
//!
//! * **Operations.** A transaction has [`YcsbConfig::ops_per_txn`] operations
//!   on distinct keys (a duplicate draw is redrawn, as COCO does). Each is,
//!   independently, a read with probability [`YcsbConfig::read_ratio`], else
//!   a read-modify-write (COCO's code also draws per operation, so "8/2" is
//!   the mean). A read-modify-write reads the record and writes a copy in
//!   which one field (drawn uniformly) is replaced by bytes derived from the
//!   field's old bytes and a per-operation seed drawn at generation: the new
//!   value depends on the value read, as a real update does, and `execute`
//!   stays deterministic.
//! * **Keys.** Each partition (= shard) holds ranks `0..keys_per_partition`
//!   of table 0, rank `r` of partition `p` at key
//!   [`Key::in_shard`]`(TABLE, p, r)` (unique across partitions); a rank is
//!   drawn by zipf ([`crate::zipf`], θ = [`YcsbConfig::zipf_theta`], default
//!   0 = uniform), so rank 0 is the hottest of every partition.
//! * **Partitions.** A client's home partition is `ClientSlot::home` (modulo
//!   the partition count). A single-partition transaction puts every
//!   operation at home and is one piece. With probability
//!   [`YcsbConfig::multi_partition`] a transaction is multi-partition: each
//!   operation draws its partition uniformly among *all* partitions (home
//!   included); should every operation land on one partition, the last one
//!   is moved to another partition drawn uniformly, so a multi-partition
//!   transaction always spans at least two. (COCO's released code draws each
//!   operation's partition among the partitions other than home and does not
//!   force two; with two partitions that makes its "multi-partition"
//!   transactions single-partition on the remote shard.)
//! * **Pieces.** One deferrable, input-free piece per partition touched, in
//!   ascending shard order, reading that partition's keys (in the order the
//!   operations were drawn) and writing the read-modify-write keys. Reads
//!   declare all columns; a write declares the one column it changes. Piece
//!   outputs are empty (the reads' values are not shipped back).
//! * **Loading.** Every key of a partition gets a deterministic
//!   `fields × field_size` (default 100) byte value derived from (partition,
//!   rank); a partition's values are slices of one buffer (one allocation).

use crate::error::{check_positive, check_ratio, ConfigError};
use crate::zipf::Zipf;
use crate::{key_rank, mix64};
use bytes::{BufMut, Bytes, BytesMut};
use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tessera_core::codec::{
    get_bool, get_len, get_u64, get_varint, put_varint, DecodeError, EncodeError,
};
use tessera_core::storage::Store;
use tessera_core::txn::{
    Access, Columns, PieceKind, PieceResult, PieceSpec, Procedure, Txn, Value,
};
use tessera_core::workload::{ClientSlot, PieceProfile, TxnGenerator, TxnProfile, Workload};
use tessera_core::{Key, ShardId, TableId};

/// The table the records live in.
pub const TABLE: u32 = 0;

/// The procedure name of a YCSB transaction.
pub const PROCEDURE: &str = "ycsb";

/// Most fields a record may have: a write names its field in a 64-bit
/// column mask ([`Columns`]).
pub const MAX_FIELDS: u32 = 64;

/// YCSB's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct YcsbConfig {
    /// Partitions (= shards). Default 1.
    pub partitions: u32,
    /// Records per partition. Default 200,000.
    pub keys_per_partition: u64,
    /// Operations per transaction, on distinct keys. Default 10.
    pub ops_per_txn: u32,
    /// Probability that an operation is a read (else a read-modify-write).
    /// Default 0.8.
    pub read_ratio: f64,
    /// Fields per record, at most [`MAX_FIELDS`]. Default 10.
    pub fields: u32,
    /// Bytes per field. Default 10.
    pub field_size: u32,
    /// Zipf exponent of the row choice within a partition, in `[0, 1.5)`;
    /// 0 is uniform. Default 0.
    pub zipf_theta: f64,
    /// Share of multi-partition transactions, in `[0, 1]`; above 0 it needs
    /// at least 2 partitions and 2 operations per transaction. Default 0.
    pub multi_partition: f64,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            partitions: 1,
            keys_per_partition: 200_000,
            ops_per_txn: 10,
            read_ratio: 0.8,
            fields: 10,
            field_size: 10,
            zipf_theta: 0.0,
            multi_partition: 0.0,
        }
    }
}

impl YcsbConfig {
    /// Bytes per record: `fields × field_size`.
    pub fn record_size(&self) -> usize {
        self.fields as usize * self.field_size as usize
    }

    /// Check every parameter; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_positive("partitions", self.partitions.into())?;
        check_positive("keys_per_partition", self.keys_per_partition)?;
        check_positive("ops_per_txn", self.ops_per_txn.into())?;
        if u64::from(self.ops_per_txn) > self.keys_per_partition {
            return Err(ConfigError::new(
                "ops_per_txn",
                format!(
                    "must not exceed keys_per_partition ({}) as keys within a \
                     transaction are distinct, got {}",
                    self.keys_per_partition, self.ops_per_txn
                ),
            ));
        }
        check_ratio("read_ratio", self.read_ratio)?;
        check_positive("fields", self.fields.into())?;
        if self.fields > MAX_FIELDS {
            return Err(ConfigError::new(
                "fields",
                format!("must be <= {MAX_FIELDS}, got {}", self.fields),
            ));
        }
        check_positive("field_size", self.field_size.into())?;
        zipf_for(self)?;
        check_ratio("multi_partition", self.multi_partition)?;
        if self.multi_partition > 0.0 {
            if self.partitions < 2 {
                return Err(ConfigError::new(
                    "multi_partition",
                    format!(
                        "{} > 0 needs partitions >= 2, got {}",
                        self.multi_partition, self.partitions
                    ),
                ));
            }
            if self.ops_per_txn < 2 {
                return Err(ConfigError::new(
                    "multi_partition",
                    format!(
                        "{} > 0 needs ops_per_txn >= 2, got {}",
                        self.multi_partition, self.ops_per_txn
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn zipf_for(cfg: &YcsbConfig) -> Result<Zipf, ConfigError> {
    Zipf::new(cfg.keys_per_partition, cfg.zipf_theta).map_err(|e| ConfigError {
        param: if e.param == "theta" {
            "zipf_theta"
        } else {
            "keys_per_partition"
        },
        reason: e.reason,
    })
}

/// Fill `buf` with the deterministic initial contents of (partition, row).
fn fill_initial(buf: &mut [u8], partition: u32, row: u64) {
    let mut h = mix64(mix64(u64::from(partition)) ^ row);
    for chunk in buf.chunks_mut(8) {
        h = mix64(h);
        chunk.copy_from_slice(&h.to_le_bytes()[..chunk.len()]);
    }
}

/// The value (partition, row) is loaded with: `record_size` deterministic
/// bytes.
pub fn initial_value(partition: u32, row: u64, record_size: usize) -> Value {
    let mut v = vec![0u8; record_size];
    fill_initial(&mut v, partition, row);
    Bytes::from(v)
}

/// The YCSB workload.
#[derive(Clone, Debug)]
pub struct Ycsb {
    cfg: YcsbConfig,
    zipf: Zipf,
}

impl Ycsb {
    /// Validate `cfg` and build the workload.
    pub fn new(cfg: YcsbConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let zipf = zipf_for(&cfg)?;
        Ok(Ycsb { cfg, zipf })
    }

    pub fn config(&self) -> &YcsbConfig {
        &self.cfg
    }

    /// A concrete generator (no boxing) for a client whose home partition
    /// is `home` (taken modulo the partition count).
    pub fn ycsb_generator(&self, home: ShardId) -> YcsbGenerator {
        YcsbGenerator {
            cfg: self.cfg,
            zipf: self.zipf,
            home: home.0 % self.cfg.partitions,
            scratch: Vec::with_capacity(self.cfg.ops_per_txn as usize),
        }
    }
}

impl Workload for Ycsb {
    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn shards(&self) -> u32 {
        self.cfg.partitions
    }

    fn load(&self, shard: ShardId, store: &mut Store) {
        assert!(
            shard.0 < self.cfg.partitions,
            "ycsb: shard {} out of range (partitions = {})",
            shard.0,
            self.cfg.partitions
        );
        // One allocation per record, not slices of one slab: every clone of
        // a slice would bump the slab's single reference count, a cache line
        // that all worker threads would then fight over.
        let rs = self.cfg.record_size();
        let n = self.cfg.keys_per_partition as usize;
        store.reserve(TableId(TABLE), n);
        for row in 0..n {
            store.load(
                Key::in_shard(TABLE, shard, row as u64),
                initial_value(shard.0, row as u64, rs),
            );
        }
    }

    fn generator(&self, client: ClientSlot) -> Box<dyn TxnGenerator> {
        Box::new(self.ycsb_generator(client.home))
    }

    /// The largest shape: one piece per partition a transaction may touch,
    /// each reading every column of table 0 and (read-modify-write) writing
    /// one field; plus the read-only shape when reads are drawn at all.
    fn profiles(&self) -> Vec<TxnProfile> {
        let cfg = &self.cfg;
        let pieces = if cfg.multi_partition > 0.0 {
            cfg.partitions.min(cfg.ops_per_txn) as usize
        } else {
            1
        };
        let fields = if cfg.fields >= 64 {
            Columns::ALL
        } else {
            Columns((1 << cfg.fields) - 1)
        };
        let piece = |writes: bool| PieceProfile {
            reads: vec![(TableId(TABLE), Columns::ALL)],
            writes: if writes {
                vec![(TableId(TABLE), fields)]
            } else {
                Vec::new()
            },
            kind: PieceKind::Deferrable,
            inputs: Vec::new(),
        };
        let mut out = Vec::new();
        if cfg.read_ratio < 1.0 {
            out.push(TxnProfile {
                name: PROCEDURE.to_string(),
                pieces: vec![piece(true); pieces],
            });
        }
        if cfg.read_ratio > 0.0 {
            out.push(TxnProfile {
                name: format!("{PROCEDURE} (read-only)"),
                pieces: vec![piece(false); pieces],
            });
        }
        out
    }

    fn decode_txn(&self, name: &str, params: &[u8]) -> Result<Txn, DecodeError> {
        if name != PROCEDURE {
            return Err(DecodeError::invalid(
                "procedure",
                format!("ycsb has no procedure '{name}'"),
            ));
        }
        Ok(Arc::new(decode_params(&self.cfg, params)?))
    }
}

/// Per-operation metadata, aligned with its piece's reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YcsbOp {
    /// A read-modify-write (else a plain read).
    pub rmw: bool,
    /// The field a read-modify-write replaces (0 for a read).
    pub field: u32,
    /// The seed the new field bytes derive from (0 for a read).
    pub seed: u64,
}

/// One draw, before grouping by partition.
#[derive(Clone, Copy, Debug)]
struct Draw {
    partition: u32,
    idx: u32,
    row: u64,
    op: YcsbOp,
}

/// Generates [`YcsbTxn`]s for one client.
#[derive(Clone, Debug)]
pub struct YcsbGenerator {
    cfg: YcsbConfig,
    zipf: Zipf,
    home: u32,
    /// Reused across transactions: no per-operation allocation.
    scratch: Vec<Draw>,
}

impl YcsbGenerator {
    /// The client's home partition.
    pub fn home(&self) -> ShardId {
        ShardId(self.home)
    }

    /// One transaction, as a concrete type.
    pub fn generate<R: Rng + ?Sized>(&mut self, rng: &mut R) -> YcsbTxn {
        let cfg = &self.cfg;
        let parts = cfg.partitions;
        let multi = cfg.multi_partition > 0.0 && rng.random::<f64>() < cfg.multi_partition;
        let scratch = &mut self.scratch;
        scratch.clear();
        for idx in 0..cfg.ops_per_txn {
            let rmw = rng.random::<f64>() >= cfg.read_ratio;
            let (partition, row) = loop {
                let p = if multi {
                    rng.random_range(0..parts)
                } else {
                    self.home
                };
                let row = self.zipf.sample(rng);
                if !scratch.iter().any(|d| d.partition == p && d.row == row) {
                    break (p, row);
                }
            };
            let op = if rmw {
                YcsbOp {
                    rmw,
                    field: rng.random_range(0..cfg.fields),
                    seed: rng.random(),
                }
            } else {
                YcsbOp {
                    rmw,
                    field: 0,
                    seed: 0,
                }
            };
            scratch.push(Draw {
                partition,
                idx,
                row,
                op,
            });
        }
        if multi {
            let first = scratch[0].partition;
            if scratch.iter().all(|d| d.partition == first) {
                // Move the last operation elsewhere: it is then distinct
                // from all others, which sit on `first`.
                let other = rng.random_range(0..parts - 1);
                let last = scratch.last_mut().expect("ops_per_txn >= 2");
                last.partition = if other >= first { other + 1 } else { other };
            }
            scratch.sort_unstable_by_key(|d| (d.partition, d.idx));
        }

        assemble(cfg, scratch, multi)
    }
}

/// Group draws (sorted by partition) into one piece per partition.
fn assemble(cfg: &YcsbConfig, draws: &[Draw], multi_partition: bool) -> YcsbTxn {
    let npieces = 1 + draws
        .windows(2)
        .filter(|w| w[0].partition != w[1].partition)
        .count();
    let mut pieces = Vec::with_capacity(npieces);
    let mut ops = Vec::with_capacity(draws.len());
    for run in draws.chunk_by(|a, b| a.partition == b.partition) {
        let nw = run.iter().filter(|d| d.op.rmw).count();
        let mut reads = Vec::with_capacity(run.len());
        let mut writes = Vec::with_capacity(nw);
        for d in run {
            let key = Key::in_shard(TABLE, ShardId(d.partition), d.row);
            reads.push(Access::all(key));
            if d.op.rmw {
                writes.push(Access {
                    key,
                    columns: Columns::one(d.op.field),
                });
            }
            ops.push(d.op);
        }
        pieces.push(PieceSpec {
            shard: ShardId(run[0].partition),
            reads,
            writes,
            kind: PieceKind::Deferrable,
            inputs: Vec::new(),
            dynamic: false,
        });
    }
    YcsbTxn {
        pieces,
        ops,
        fields: cfg.fields,
        field_size: cfg.field_size,
        multi_partition,
    }
}

/// Decode the parameters [`YcsbTxn::encode_params`] wrote, checking them
/// against `cfg`: pieces on distinct ascending partitions of the
/// deployment, ranks in range, fields that exist.
fn decode_params(cfg: &YcsbConfig, mut buf: &[u8]) -> Result<YcsbTxn, DecodeError> {
    let buf = &mut buf;
    let multi = get_bool(buf, "ycsb multi-partition flag")?;
    let npieces = get_len(buf, 2, "ycsb pieces")?;
    let mut draws: Vec<Draw> = Vec::new();
    let mut last: Option<u32> = None;
    for _ in 0..npieces {
        let partition = get_varint(buf, "ycsb partition")?;
        if partition >= u64::from(cfg.partitions) {
            return Err(DecodeError::invalid(
                "ycsb partition",
                format!("{partition} >= partitions ({})", cfg.partitions),
            ));
        }
        let partition = partition as u32;
        if last.is_some_and(|l| l >= partition) {
            return Err(DecodeError::invalid("ycsb partitions", "not ascending"));
        }
        last = Some(partition);
        let nops = get_len(buf, 2, "ycsb operations")?;
        if nops == 0 {
            return Err(DecodeError::invalid("ycsb piece", "no operations"));
        }
        for _ in 0..nops {
            let row = get_varint(buf, "ycsb rank")?;
            if row >= cfg.keys_per_partition {
                return Err(DecodeError::invalid(
                    "ycsb rank",
                    format!("{row} >= keys_per_partition ({})", cfg.keys_per_partition),
                ));
            }
            let op = if get_bool(buf, "ycsb rmw flag")? {
                let field = get_varint(buf, "ycsb field")?;
                if field >= u64::from(cfg.fields) {
                    return Err(DecodeError::invalid(
                        "ycsb field",
                        format!("{field} >= fields ({})", cfg.fields),
                    ));
                }
                YcsbOp {
                    rmw: true,
                    field: field as u32,
                    seed: get_u64(buf, "ycsb seed")?,
                }
            } else {
                YcsbOp {
                    rmw: false,
                    field: 0,
                    seed: 0,
                }
            };
            let idx = draws.len() as u32;
            draws.push(Draw {
                partition,
                idx,
                row,
                op,
            });
        }
    }
    if draws.is_empty() {
        return Err(DecodeError::invalid("ycsb transaction", "no pieces"));
    }
    if !buf.is_empty() {
        return Err(DecodeError::Trailing(buf.len()));
    }
    Ok(assemble(cfg, &draws, multi))
}

impl TxnGenerator for YcsbGenerator {
    fn next(&mut self, rng: &mut SmallRng) -> Txn {
        Arc::new(self.generate(rng))
    }
}

/// One YCSB transaction: one piece per partition touched, plus per-operation
/// metadata aligned with the pieces' reads.
#[derive(Clone, Debug)]
pub struct YcsbTxn {
    pieces: Vec<PieceSpec>,
    /// Piece 0's operations, then piece 1's, …; within a piece, in the order
    /// of its reads.
    ops: Vec<YcsbOp>,
    fields: u32,
    field_size: u32,
    multi_partition: bool,
}

impl YcsbTxn {
    /// The operations of piece `piece`, aligned with its reads.
    pub fn ops(&self, piece: usize) -> &[YcsbOp] {
        let start: usize = self.pieces[..piece].iter().map(|p| p.reads.len()).sum();
        &self.ops[start..start + self.pieces[piece].reads.len()]
    }

    /// Drawn as a multi-partition transaction (then it has ≥ 2 pieces).
    pub fn is_multi_partition(&self) -> bool {
        self.multi_partition
    }

    /// The new value a read-modify-write installs: `old` (or the initial
    /// value when missing) with field `op.field` replaced by bytes hashed
    /// from its old bytes and `op.seed`.
    fn modify(&self, shard: ShardId, key: Key, old: Option<&Value>, op: &YcsbOp) -> Value {
        let fs = self.field_size as usize;
        let rs = self.fields as usize * fs;
        let mut buf = vec![0u8; rs];
        match old {
            Some(v) => {
                let n = v.len().min(rs);
                buf[..n].copy_from_slice(&v[..n]);
            }
            None => fill_initial(&mut buf, shard.0, key_rank(key)),
        }
        let field = &mut buf[op.field as usize * fs..(op.field as usize + 1) * fs];
        let mut h = op.seed;
        for chunk in field.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            h = mix64(h ^ u64::from_le_bytes(w));
        }
        for chunk in field.chunks_mut(8) {
            h = mix64(h);
            chunk.copy_from_slice(&h.to_le_bytes()[..chunk.len()]);
        }
        Bytes::from(buf)
    }
}

impl Procedure for YcsbTxn {
    fn name(&self) -> &'static str {
        PROCEDURE
    }

    /// Wire parameters: the multi-partition flag; the piece count; per
    /// piece its partition and operation count; per operation the key's
    /// rank, the rmw flag and, for a read-modify-write, its field and seed.
    /// Field count and size come from the receiver's configuration.
    fn encode_params(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u8(u8::from(self.multi_partition));
        put_varint(out, self.pieces.len() as u64);
        for (i, p) in self.pieces.iter().enumerate() {
            put_varint(out, u64::from(p.shard.0));
            put_varint(out, p.reads.len() as u64);
            for (op, a) in self.ops(i).iter().zip(&p.reads) {
                put_varint(out, key_rank(a.key));
                out.put_u8(u8::from(op.rmw));
                if op.rmw {
                    put_varint(out, u64::from(op.field));
                    out.put_u64_le(op.seed);
                }
            }
        }
        Ok(())
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    fn execute(&self, piece: usize, reads: &[Option<&Value>], _inputs: &[Value]) -> PieceResult {
        let spec = &self.pieces[piece];
        let mut writes = Vec::with_capacity(spec.writes.len());
        for ((op, access), value) in self.ops(piece).iter().zip(&spec.reads).zip(reads) {
            if op.rmw {
                let new = self.modify(spec.shard, access.key, *value, op);
                writes.push((access.key, new));
            }
        }
        PieceResult {
            writes,
            output: Value::new(),
            user_abort: false,
        }
    }
}

#[cfg(test)]
mod tests;
