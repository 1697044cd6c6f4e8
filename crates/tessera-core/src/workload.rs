//! The trait a workload implements: load each shard, then generate
//! transactions for each closed-loop client; and describe its transaction
//! types for offline analysis (Rococo's SC-graph checker, §3.1).

use crate::codec::DecodeError;
use crate::ids::{ShardId, TableId};
use crate::storage::Store;
use crate::txn::{Access, Columns, PieceKind, Procedure, Txn};
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

/// One piece of a [`TxnProfile`]: the tables and columns it reads and
/// writes (not the rows: the offline checker does not know them, Rococo
/// §3.1), whether it is immediate, and which pieces feed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieceProfile {
    pub reads: Vec<(TableId, Columns)>,
    pub writes: Vec<(TableId, Columns)>,
    pub kind: PieceKind,
    /// Earlier pieces (by index) whose outputs are this piece's inputs.
    pub inputs: Vec<u16>,
}

/// A transaction type as an offline analysis sees it: its pieces' table and
/// column accesses, kinds and inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnProfile {
    pub name: String,
    pub pieces: Vec<PieceProfile>,
}

fn tables(accesses: &[Access]) -> Vec<(TableId, Columns)> {
    let mut out: Vec<(TableId, Columns)> = Vec::new();
    for a in accesses {
        match out.iter_mut().find(|(t, _)| *t == a.key.table) {
            Some((_, c)) => c.0 |= a.columns.0,
            None => out.push((a.key.table, a.columns)),
        }
    }
    out
}

impl TxnProfile {
    /// The profile of a sample transaction: its pieces' declared tables and
    /// columns (rows dropped), kinds and inputs. A workload whose
    /// transaction type always has the same piece structure describes it
    /// with one sample; one whose piece count varies (YCSB) lists the
    /// largest shape.
    pub fn of(proc: &dyn Procedure) -> Self {
        TxnProfile {
            name: proc.name().to_string(),
            pieces: proc
                .pieces()
                .iter()
                .map(|p| PieceProfile {
                    reads: tables(&p.reads),
                    writes: tables(&p.writes),
                    kind: p.kind,
                    inputs: p.inputs.clone(),
                })
                .collect(),
        }
    }

    /// True when no piece writes: Rococo runs such transactions with its
    /// read-only protocol (§4.1) and its checker leaves them out.
    pub fn read_only(&self) -> bool {
        self.pieces.iter().all(|p| p.writes.is_empty())
    }
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
    /// The workload's own invariants over every shard's final store (indexed
    /// by shard), e.g. TPC-C's consistency conditions (clause 3.3.2): the
    /// violations found, or `None` when the workload defines none. Meaningful
    /// only on quiescent stores (no transaction half-committed).
    fn check_consistency(&self, stores: &[Store]) -> Option<Vec<String>> {
        let _ = stores;
        None
    }

    /// Every transaction type the workload generates, as profiles for
    /// offline analysis (Rococo's SC-graph checker). Empty when the
    /// workload does not describe itself; the checker then refuses it.
    fn profiles(&self) -> Vec<TxnProfile> {
        Vec::new()
    }

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
