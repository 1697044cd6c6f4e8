//! A TAOBench-like social-graph workload (OOCC §VIII.B: "The TAOBench that
//! captures the social graph workload at Meta represents a read-mostly
//! workload that contains 95% read-only transactions and 5% read-write
//! transactions. A read-only transaction may query ranging from a few to
//! hundreds of objects and edges. We generate 500k edges and 1 million
//! objects following the distribution given by TAOBench.")
//!
//! TAOBench (Cheng et al., VLDB '22) publishes its distributions as JSON;
//! the numbers below are those of its workload A
//! (`github.com/audreyccheng/taobench`, `src/workload_a.json`).
//!
//! What we model:
//!
//! * **Graph.** [`TaoBenchConfig::objects`] objects (16 B: the edge count,
//!   then data) and [`TaoBenchConfig::edges`] edges (16 B: `id2`, then
//!   data). Each edge's source object (`id1`) is drawn by the same zipf as
//!   the accesses (θ = [`TaoBenchConfig::zipf_theta`]) from a fixed seed, so
//!   popular objects have long edge lists; an object's edges live beside it
//!   (TAO shards an edge with its `id1`): object `o` on shard `o mod
//!   partitions`, its edges consecutive ranks of that shard's edge table.
//! * **Mix.** A transaction is read-only with probability
//!   [`TaoBenchConfig::read_only`] (0.95, OOCC's). Its operation count is
//!   drawn from TAOBench's `read_txn_sizes` (2 to 500, mostly 2–4),
//!   truncated at [`TaoBenchConfig::max_read_ops`]. Each operation is, with
//!   TAOBench's `read_operation_types` weights, an object read (475; the
//!   edge-count read, 39, also reads the object, which holds the count), an
//!   edge-list read — the object and its first
//!   [`TaoBenchConfig::range_limit`] edges, TAO's `assoc_range` — (376), or
//!   an edge point read (68). (TAOBench's read *transactions* use object and
//!   edge point reads only, 1:5; we use the per-operation mix so that edge
//!   lists are read, as the OOCC paper describes.) A read-write
//!   transaction has TAOBench's `write_txn_sizes` operations (1–7, 99% of
//!   its weight; larger sizes are dropped), each an object update (214) or
//!   an edge update (380), TAOBench's `write_txn_operation_types` without
//!   the adds and deletes (the memory-node protocols cannot insert).
//! * **Keys.** Objects are chosen by zipf (rank 0 hottest); an edge point
//!   read or edge update picks an edge uniformly, so its source follows the
//!   same skew. Keys within a transaction are distinct.
//! * **Pieces.** One deferrable, input-free piece per shard touched
//!   ([`crate::slots::pieces_by_shard`]). An update reads the record and
//!   rewrites its data bytes from their old contents and a seed.
//! * **Wire.** A transaction travels as its [`TaoOp`]s and seed; the
//!   receiver checks the ids against its graph and derives the same keys.

use crate::error::{check_positive, check_ratio, ConfigError};
use crate::slots::{fill, key_seed, pick, pieces_by_shard, rewrite};
use crate::zipf::Zipf;
use crate::{key_rank, mix64};
use bytes::{BufMut, BytesMut};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tessera_core::codec::{
    get_len, get_u64, get_u8, get_varint, put_varint, DecodeError, EncodeError,
};
use tessera_core::storage::Store;
use tessera_core::txn::{Columns, PieceKind, PieceResult, PieceSpec, Procedure, Txn, Value};
use tessera_core::workload::{ClientSlot, PieceProfile, TxnGenerator, TxnProfile, Workload};
use tessera_core::{Key, ShardId, TableId};

/// Table ids.
pub const OBJECTS: u32 = 0;
pub const EDGES: u32 = 1;

/// Bytes per object and per edge.
pub const RECORD_SIZE: usize = 16;
/// Object bytes an update rewrites (after the edge count).
const OBJECT_DATA: std::ops::Range<usize> = 4..16;
/// Edge bytes an update rewrites (after `id2`).
const EDGE_DATA: std::ops::Range<usize> = 8..16;

/// TAOBench workload A's `read_txn_sizes` weights for 1, 2, …, 32
/// operations (its sizes run to 500).
pub const READ_TXN_SIZES: [u64; 32] = [
    0, 553162, 311751, 166458, 106694, 80485, 62975, 53430, 33268, 27819, 36732, 21447, 18031,
    15122, 14191, 12506, 10894, 10053, 9326, 8482, 7752, 7189, 6773, 6265, 5995, 5982, 5503, 5473,
    4896, 5001, 9323, 4619,
];

/// TAOBench workload A's `write_txn_sizes` weights for 1, …, 7 operations.
pub const WRITE_TXN_SIZES: [u64; 7] = [0, 104440, 283626, 340601, 43853, 5878, 107888];

/// Read operations: object read (with the edge-count read), edge-list
/// read, edge point read.
pub const READ_OPS: [u64; 3] = [475 + 39, 376, 68];

/// Write operations: object update, edge update.
pub const WRITE_OPS: [u64; 2] = [214, 380];

/// The seed the graph's edges are drawn from (fixed: every process of a
/// deployment builds the same graph).
const GRAPH_SEED: u64 = 0x7a0b_e9c4;

/// The procedure names.
pub const READ: &str = "tao_read";
pub const WRITE: &str = "tao_write";

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaoBenchConfig {
    /// Objects (OOCC: 1 million). Default 1,000,000.
    pub objects: u64,
    /// Edges (OOCC: 500k). Default 500,000.
    pub edges: u64,
    /// Partitions (= shards). Default 1.
    pub partitions: u32,
    /// Zipf exponent of the object choice and of the edges' sources, in
    /// `[0, 1.5)`. Default 0.9 (our choice: TAOBench's popularity is
    /// skewed, its exponent is not published in the workload files).
    pub zipf_theta: f64,
    /// Share of read-only transactions. Default 0.95 (OOCC).
    pub read_only: f64,
    /// Most operations per read-only transaction, in `1..=32`. Default 32.
    pub max_read_ops: u32,
    /// Edges an edge-list read returns at most (TAO's `assoc_range`
    /// limit), `1..=1000`. Default 10.
    pub range_limit: u32,
}

impl Default for TaoBenchConfig {
    fn default() -> Self {
        TaoBenchConfig {
            objects: 1_000_000,
            edges: 500_000,
            partitions: 1,
            zipf_theta: 0.9,
            read_only: 0.95,
            max_read_ops: 32,
            range_limit: 10,
        }
    }
}

impl TaoBenchConfig {
    /// Check every parameter; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_positive("partitions", self.partitions.into())?;
        // Transactions draw up to 7 distinct objects.
        if self.objects < 8 || self.objects < u64::from(self.partitions) {
            return Err(ConfigError::new(
                "objects",
                format!(
                    "must be at least 8 and at least partitions ({}), got {}",
                    self.partitions, self.objects
                ),
            ));
        }
        if self.objects > (1 << 40) {
            return Err(ConfigError::new(
                "objects",
                format!("must be at most 2^40, got {}", self.objects),
            ));
        }
        if !(8..=u64::from(u32::MAX)).contains(&self.edges) {
            return Err(ConfigError::new(
                "edges",
                format!("must be in 8..=2^32-1, got {}", self.edges),
            ));
        }
        Zipf::new(self.objects, self.zipf_theta).map_err(|e| ConfigError {
            param: "zipf_theta",
            reason: e.reason,
        })?;
        check_ratio("read_only", self.read_only)?;
        if !(1..=READ_TXN_SIZES.len() as u32).contains(&self.max_read_ops) {
            return Err(ConfigError::new(
                "max_read_ops",
                format!(
                    "must be in 1..={}, got {}",
                    READ_TXN_SIZES.len(),
                    self.max_read_ops
                ),
            ));
        }
        if !(1..=1000).contains(&self.range_limit) {
            return Err(ConfigError::new(
                "range_limit",
                format!("must be in 1..=1000, got {}", self.range_limit),
            ));
        }
        Ok(())
    }

    fn place(&self, o: u64) -> (ShardId, u64) {
        let p = u64::from(self.partitions);
        (ShardId((o % p) as u32), o / p)
    }

    pub fn object_key(&self, o: u64) -> Key {
        let (s, r) = self.place(o);
        Key::in_shard(OBJECTS, s, r)
    }
}

/// Where the edges are: per shard, the first edge rank of each of its
/// objects (by local rank), and the number of edges before each shard.
#[derive(Debug)]
struct Graph {
    /// `offsets[s][r]..offsets[s][r + 1]`: the edge ranks of shard `s`'s
    /// object of local rank `r`.
    offsets: Vec<Vec<u32>>,
    /// `shard_base[s]`: edges on shards before `s`; one more entry for the
    /// total.
    shard_base: Vec<u64>,
}

impl Graph {
    fn build(cfg: &TaoBenchConfig, zipf: &Zipf) -> Graph {
        let p = cfg.partitions as usize;
        let mut degree = vec![0u32; cfg.objects as usize];
        let mut rng = SmallRng::seed_from_u64(GRAPH_SEED);
        for _ in 0..cfg.edges {
            degree[zipf.sample(&mut rng) as usize] += 1;
        }
        let mut offsets: Vec<Vec<u32>> = (0..p)
            .map(|_| Vec::with_capacity(cfg.objects as usize / p + 2))
            .collect();
        let mut next = vec![0u32; p];
        for (o, d) in degree.iter().enumerate() {
            let s = o % p;
            offsets[s].push(next[s]);
            next[s] += d;
        }
        let mut shard_base = vec![0u64];
        for s in 0..p {
            offsets[s].push(next[s]);
            shard_base.push(shard_base[s] + u64::from(next[s]));
        }
        Graph {
            offsets,
            shard_base,
        }
    }

    /// The edge ranks of object `o` on its shard.
    fn edges_of(&self, cfg: &TaoBenchConfig, o: u64) -> std::ops::Range<u64> {
        let (s, r) = cfg.place(o);
        let offs = &self.offsets[s.0 as usize];
        u64::from(offs[r as usize])..u64::from(offs[r as usize + 1])
    }

    /// The key of edge `g` of the global order (shard by shard).
    fn edge_key(&self, g: u64) -> Key {
        let s = self.shard_base.partition_point(|&b| b <= g) - 1;
        Key::in_shard(EDGES, ShardId(s as u32), g - self.shard_base[s])
    }
}

/// The workload.
#[derive(Clone, Debug)]
pub struct TaoBench {
    cfg: TaoBenchConfig,
    zipf: Zipf,
    graph: Arc<Graph>,
}

impl TaoBench {
    /// Validate `cfg` and draw the graph.
    pub fn new(cfg: TaoBenchConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let zipf = Zipf::new(cfg.objects, cfg.zipf_theta).expect("validated");
        let graph = Arc::new(Graph::build(&cfg, &zipf));
        Ok(TaoBench { cfg, zipf, graph })
    }

    pub fn config(&self) -> &TaoBenchConfig {
        &self.cfg
    }

    /// The keys of object `o`'s edges.
    pub fn edge_keys(&self, o: u64) -> impl Iterator<Item = Key> + '_ {
        let (s, _) = self.cfg.place(o);
        self.graph
            .edges_of(&self.cfg, o)
            .map(move |r| Key::in_shard(EDGES, s, r))
    }

    /// A concrete generator.
    pub fn tao_generator(&self) -> TaoGenerator {
        TaoGenerator {
            w: self.clone(),
            scratch: Vec::new(),
        }
    }
}

impl Workload for TaoBench {
    fn name(&self) -> &'static str {
        "taobench"
    }

    fn shards(&self) -> u32 {
        self.cfg.partitions
    }

    fn load(&self, shard: ShardId, store: &mut Store) {
        let cfg = &self.cfg;
        assert!(
            shard.0 < cfg.partitions,
            "taobench: shard {} out of range",
            shard.0
        );
        let offs = &self.graph.offsets[shard.0 as usize];
        store.reserve(TableId(OBJECTS), offs.len() - 1);
        store.reserve(TableId(EDGES), *offs.last().expect("sentinel") as usize);
        for (r, w) in offs.windows(2).enumerate() {
            let k = Key::in_shard(OBJECTS, shard, r as u64);
            let mut v = vec![0u8; RECORD_SIZE];
            fill(&mut v, key_seed(k));
            v[..4].copy_from_slice(&(w[1] - w[0]).to_le_bytes());
            store.load(k, v.into());
            for e in w[0]..w[1] {
                let k = Key::in_shard(EDGES, shard, u64::from(e));
                let mut v = vec![0u8; RECORD_SIZE];
                fill(&mut v, key_seed(k));
                let id2 = mix64(key_seed(k)) % cfg.objects;
                v[..8].copy_from_slice(&id2.to_le_bytes());
                store.load(k, v.into());
            }
        }
    }

    fn generator(&self, _client: ClientSlot) -> Box<dyn TxnGenerator> {
        Box::new(self.tao_generator())
    }

    /// The largest shapes: a read transaction reading objects and edges on
    /// every shard, a write transaction updating both on up to 7.
    fn profiles(&self) -> Vec<TxnProfile> {
        let both = vec![
            (TableId(OBJECTS), Columns::ALL),
            (TableId(EDGES), Columns::ALL),
        ];
        let piece = |writes: bool| PieceProfile {
            reads: both.clone(),
            writes: if writes { both.clone() } else { Vec::new() },
            kind: PieceKind::Deferrable,
            inputs: Vec::new(),
        };
        let p = self.cfg.partitions as usize;
        let mut out = Vec::new();
        if self.cfg.read_only < 1.0 {
            out.push(TxnProfile {
                name: WRITE.to_string(),
                pieces: vec![piece(true); p.min(WRITE_TXN_SIZES.len())],
            });
        }
        if self.cfg.read_only > 0.0 {
            out.push(TxnProfile {
                name: READ.to_string(),
                pieces: vec![piece(false); p],
            });
        }
        out
    }

    fn decode_txn(&self, name: &str, params: &[u8]) -> Result<Txn, DecodeError> {
        let t = decode_params(self, params)?;
        if t.name() != name {
            return Err(DecodeError::invalid(
                "procedure",
                format!("'{name}' carries the operations of {}", t.name()),
            ));
        }
        Ok(Arc::new(t))
    }
}

/// One operation of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaoOp {
    /// Read object `o` (TAO's `obj_get`; also the edge-count read).
    ObjectRead(u64),
    /// Read object `o` and its first `range_limit` edges (`assoc_range`).
    EdgeList(u64),
    /// Read edge `g` of the global edge order (`assoc_get`).
    EdgeRead(u64),
    /// Update object `o`.
    ObjectUpdate(u64),
    /// Update edge `g`.
    EdgeUpdate(u64),
}

impl TaoOp {
    fn code(self) -> (u8, u64) {
        match self {
            TaoOp::ObjectRead(x) => (0, x),
            TaoOp::EdgeList(x) => (1, x),
            TaoOp::EdgeRead(x) => (2, x),
            TaoOp::ObjectUpdate(x) => (3, x),
            TaoOp::EdgeUpdate(x) => (4, x),
        }
    }
}

impl TaoBench {
    /// The accesses of `op`: every key read, and written for an update.
    fn accesses(&self, op: TaoOp, out: &mut Vec<(Key, bool)>) {
        let cfg = &self.cfg;
        match op {
            TaoOp::ObjectRead(o) => out.push((cfg.object_key(o), false)),
            TaoOp::EdgeList(o) => {
                out.push((cfg.object_key(o), false));
                out.extend(
                    self.edge_keys(o)
                        .take(cfg.range_limit as usize)
                        .map(|k| (k, false)),
                );
            }
            TaoOp::EdgeRead(g) => out.push((self.graph.edge_key(g), false)),
            TaoOp::ObjectUpdate(o) => out.push((cfg.object_key(o), true)),
            TaoOp::EdgeUpdate(g) => out.push((self.graph.edge_key(g), true)),
        }
    }

    /// The transaction of `ops` (ids in range); `seed` drives its updates.
    pub fn txn(&self, ops: Vec<TaoOp>, seed: u64) -> TaoTxn {
        let mut accesses = Vec::new();
        for &op in &ops {
            self.accesses(op, &mut accesses);
        }
        TaoTxn {
            pieces: pieces_by_shard(&accesses),
            ops,
            seed,
        }
    }
}

/// Generates [`TaoTxn`]s.
#[derive(Clone, Debug)]
pub struct TaoGenerator {
    w: TaoBench,
    scratch: Vec<(Key, bool)>,
}

impl TaoGenerator {
    pub fn generate<R: Rng + ?Sized>(&mut self, rng: &mut R) -> TaoTxn {
        let w = &self.w;
        let cfg = w.cfg;
        let mut ops = Vec::new();
        let read_only = rng.random::<f64>() < cfg.read_only;
        if read_only {
            let sizes = &READ_TXN_SIZES[..cfg.max_read_ops as usize];
            for _ in 0..1 + pick(sizes, rng) {
                ops.push(match pick(&READ_OPS, rng) {
                    0 => TaoOp::ObjectRead(w.zipf.sample(rng)),
                    1 => TaoOp::EdgeList(w.zipf.sample(rng)),
                    _ => TaoOp::EdgeRead(rng.random_range(0..cfg.edges)),
                });
            }
        } else {
            let n = 1 + pick(&WRITE_TXN_SIZES, rng);
            // Distinct records: redraw a record already updated.
            self.scratch.clear();
            while ops.len() < n {
                let op = match pick(&WRITE_OPS, rng) {
                    0 => TaoOp::ObjectUpdate(w.zipf.sample(rng)),
                    _ => TaoOp::EdgeUpdate(rng.random_range(0..cfg.edges)),
                };
                let before = self.scratch.len();
                w.accesses(op, &mut self.scratch);
                let key = self.scratch[before].0;
                if self.scratch[..before].iter().any(|(k, _)| *k == key) {
                    self.scratch.truncate(before);
                } else {
                    ops.push(op);
                }
            }
        }
        let seed = if read_only { 0 } else { rng.random() };
        w.txn(ops, seed)
    }
}

impl TxnGenerator for TaoGenerator {
    fn next(&mut self, rng: &mut SmallRng) -> Txn {
        Arc::new(self.generate(rng))
    }
}

/// One transaction: reads, or read-modify-writes, of objects and edges.
#[derive(Clone, Debug)]
pub struct TaoTxn {
    ops: Vec<TaoOp>,
    pieces: Vec<PieceSpec>,
    seed: u64,
}

impl TaoTxn {
    pub fn ops(&self) -> &[TaoOp] {
        &self.ops
    }
}

/// Decode the parameters [`TaoTxn::encode_params`] wrote, checking every
/// id against the graph.
fn decode_params(w: &TaoBench, mut buf: &[u8]) -> Result<TaoTxn, DecodeError> {
    let buf = &mut buf;
    let n = get_len(buf, 2, "taobench operations")?;
    if n == 0 {
        return Err(DecodeError::invalid("taobench operations", "none"));
    }
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        let code = get_u8(buf, "taobench operation")?;
        let x = get_varint(buf, "taobench id")?;
        let (limit, what) = match code {
            0 | 1 | 3 => (w.cfg.objects, "objects"),
            2 | 4 => (w.cfg.edges, "edges"),
            c => {
                return Err(DecodeError::invalid(
                    "taobench operation",
                    format!("{c} >= 5"),
                ))
            }
        };
        if x >= limit {
            return Err(DecodeError::invalid(
                "taobench id",
                format!("{x} >= {what} ({limit})"),
            ));
        }
        ops.push(match code {
            0 => TaoOp::ObjectRead(x),
            1 => TaoOp::EdgeList(x),
            2 => TaoOp::EdgeRead(x),
            3 => TaoOp::ObjectUpdate(x),
            _ => TaoOp::EdgeUpdate(x),
        });
    }
    let seed = get_u64(buf, "taobench seed")?;
    if !buf.is_empty() {
        return Err(DecodeError::Trailing(buf.len()));
    }
    Ok(w.txn(ops, seed))
}

impl Procedure for TaoTxn {
    fn name(&self) -> &'static str {
        if self.read_only() {
            READ
        } else {
            WRITE
        }
    }

    /// Wire parameters: the operation count, per operation its code (the
    /// order of [`TaoOp`]) and id, then the seed.
    fn encode_params(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        put_varint(out, self.ops.len() as u64);
        for op in &self.ops {
            let (code, x) = op.code();
            out.put_u8(code);
            put_varint(out, x);
        }
        out.put_u64_le(self.seed);
        Ok(())
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    /// Every written key was read: its new value rewrites the data bytes
    /// (keeping an object's edge count and an edge's `id2`).
    fn execute(&self, piece: usize, reads: &[Option<&Value>], _inputs: &[Value]) -> PieceResult {
        let spec = &self.pieces[piece];
        let mut writes = Vec::with_capacity(spec.writes.len());
        for (a, v) in spec.reads.iter().zip(reads) {
            if spec.writes.iter().any(|w| w.key == a.key) {
                let range = if a.key.table.0 == OBJECTS {
                    OBJECT_DATA
                } else {
                    EDGE_DATA
                };
                let seed = self.seed ^ key_seed(a.key) ^ key_rank(a.key);
                writes.push((a.key, rewrite(*v, RECORD_SIZE, range, seed)));
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
