//! tessera-core: the vocabulary every other crate speaks.
//!
//! * [`codec`] — the hand-written binary wire codec (messages, procedures,
//!   store images) that never panics on bad bytes.
//! * [`ids`] — node, shard, transaction and version identifiers; virtual time.
//! * [`node`] — the sans-IO node model: a node is stepped with events
//!   (message, timer, durable-write completion) through a [`node::Ctx`] and
//!   answers with [`node::Effect`]s. Time and randomness come from the
//!   context, never from the system, so one seed replays one run.
//! * [`txn`] — transactions as stored procedures made of pieces (DESIGN §4).
//! * [`storage`] — per-shard in-memory tables: value + protocol metadata.
//! * [`topology`] — shards as replica groups, nodes placed on sites.
//! * [`protocol`] — the trait a concurrency-control protocol implements.
//! * [`runtime`] — what a runtime is given (a deployment) and returns.
//! * [`scc`] — Tarjan's strongly connected components, shared by the
//!   isolation checker and the protocols that order by dependency graphs.
//! * [`workload`] — the trait a workload implements (load + generate).
//! * [`client`] — the closed-loop client host that wraps a protocol's
//!   coordinator: retries with backoff, latency, history recording.
//! * [`embedded`] — a client host an application drives (the client
//!   library): the same coordinator, requests from an inbox, one reply each.
//! * [`history`] / [`stats`] — what a run observed.
//! * [`alloc`] — a counting global-allocator wrapper for memory
//!   investigations.

pub mod alloc;
pub mod client;
pub mod codec;
pub mod embedded;
pub mod history;
pub mod ids;
pub mod node;
pub mod protocol;
pub mod runtime;
pub mod scc;
pub mod stats;
pub mod storage;
pub mod topology;
pub mod txn;
pub mod workload;

pub use ids::{Key, NodeId, ShardId, TableId, Time, TimerId, TxnId, Version};
pub use node::{Ctx, Effect, Node};
pub use txn::{Access, PieceKind, PieceResult, PieceSpec, Procedure, Value};

/// Fast, deterministic hash map used on hot paths (std's SipHash measured
/// ~1.5x slower on our machines; see DESIGN.md stack notes).
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
/// Set counterpart of [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;

/// A new, empty [`FastMap`].
pub fn fast_map<K, V>() -> FastMap<K, V> {
    FastMap::with_hasher(foldhash::fast::FixedState::default())
}

/// A new, empty [`FastSet`].
pub fn fast_set<K>() -> FastSet<K> {
    FastSet::with_hasher(foldhash::fast::FixedState::default())
}
