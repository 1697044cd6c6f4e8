//! The trait a workload implements: load each shard, then generate
//! transactions for each closed-loop client.

use crate::codec::DecodeError;
use crate::ids::ShardId;
use crate::storage::Store;
use crate::txn::Txn;
use rand::rngs::SmallRng;

/// One closed-loop client.
#[derive(Clone, Copy, Debug)]
pub struct ClientSlot {
    /// Unique over the run's clients, 0-based.
    pub id: u32,
    /// The shard this client prefers for single-partition transactions
    /// (COCO and Deneva bind each worker to a home partition).
    pub home: ShardId,
}

/// Produces a client's transactions.
pub trait TxnGenerator: Send {
    fn next(&mut self, rng: &mut SmallRng) -> Txn;
}

/// A benchmark: schema, population and transaction mix.
pub trait Workload: Send + Sync {
    fn name(&self) -> &'static str;
    /// The number of shards the workload was configured for.
    fn shards(&self) -> u32;
    /// Populate one shard replica's store (deterministic: every replica of a
    /// shard gets the same data).
    fn load(&self, shard: ShardId, store: &mut Store);
    fn generator(&self, client: ClientSlot) -> Box<dyn TxnGenerator>;
    /// Rebuild procedure `name` from the parameters its
    /// [`crate::txn::Procedure::encode_params`] wrote, validating them
    /// against this workload's configuration (shards, key ranges): bytes
    /// from the network must not make a piece panic later. The default
    /// knows no procedure.
    fn decode_txn(&self, name: &str, params: &[u8]) -> Result<Txn, DecodeError> {
        let _ = params;
        Err(DecodeError::invalid(
            "procedure",
            format!("workload '{}' has no wire codec for '{name}'", self.name()),
        ))
    }
}
