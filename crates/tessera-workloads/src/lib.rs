//! tessera-workloads: benchmarks that drive the protocols.
//!
//! * [`zipf`] — a rejection-inversion zipfian sampler (exact for θ ≥ 1).
//! * [`micro`] — the Janus micro-benchmark (Janus §6.2): three counters on
//!   three shards incremented per transaction.
//! * [`ycsb`] — YCSB as COCO runs it (COCO §7.1.1): ten read or
//!   read-modify-write operations per transaction, home partitions and a
//!   multi-partition share.
//! * [`kv`] — the built-in `get`/`put`/`incr` procedures on named keys that
//!   every `tcp` server accepts beside its workload (the client library's).
//! * [`counter`] — NOCC's single-counter reads and increments (NOCC §4).
//! * [`tatp`] — TATP (OOCC §VIII.B's variant with two-key reads), its
//!   inserts and deletes modelled as updates of fixed slots.
//! * [`taobench`] — a TAOBench-like social-graph mix of objects and edges
//!   (OOCC §VIII.B; numbers from TAOBench's workload A).
//! * [`tpcc`] — TPC-C, all five transactions, three partitioning schemes
//!   and the clause-3.3.2 consistency checks (its own key layout: see
//!   [`tpcc::keys`]).
//!
//! micro, YCSB and counter implement [`tessera_core::workload::Workload`], put their
//! rows in table 0 of each shard's store and make one deferrable, input-free
//! piece per shard a transaction touches (deferrable: no piece's output
//! feeds another piece, Rococo §3.1). A key is
//! [`Key::in_shard`]`(0, shard, rank)`: the shard in the top 24 bits of the
//! row, the key's rank within its shard in the low 40 ([`key_shard`] and
//! [`key_rank`] decode them), so keys are unique across shards.

#[cfg(test)]
mod codec_tests;
pub mod counter;
pub mod error;
pub mod kv;
pub mod micro;
mod slots;
pub mod taobench;
pub mod tatp;
pub mod tpcc;
pub mod ycsb;
pub mod zipf;

pub use counter::{Counter, CounterConfig};
pub use error::ConfigError;
pub use micro::{IncrementTxn, Micro, MicroConfig, MicroGenerator};
pub use taobench::{TaoBench, TaoBenchConfig};
pub use tatp::{Tatp, TatpConfig};
pub use tpcc::{Tpcc, TpccConfig};
pub use ycsb::{Ycsb, YcsbConfig, YcsbGenerator, YcsbOp, YcsbTxn};
pub use zipf::Zipf;

use tessera_core::{Key, ShardId};

/// Bits of a [`Key::in_shard`] row that hold the rank within the shard.
pub const RANK_BITS: u32 = 40;

/// The rank within its shard of a key built by [`Key::in_shard`]: the low
/// [`RANK_BITS`] bits of its row.
#[inline]
pub const fn key_rank(key: Key) -> u64 {
    key.row & ((1 << RANK_BITS) - 1)
}

/// The shard a key built by [`Key::in_shard`] belongs to: the bits of its
/// row above [`RANK_BITS`].
#[inline]
pub const fn key_shard(key: Key) -> ShardId {
    ShardId((key.row >> RANK_BITS) as u32)
}

/// SplitMix64's output function: a fast, well-mixed 64-bit hash used to
/// derive deterministic record contents.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
