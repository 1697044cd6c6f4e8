//! Transactions as stored procedures made of pieces (DESIGN §4).
//!
//! A transaction is a [`Procedure`]: a list of [`PieceSpec`]s plus a
//! deterministic function per piece. A piece names its shard, the keys it
//! reads and writes (with the columns, for Rococo's offline SC-graph checker),
//! whether it is immediate or deferrable, and which earlier pieces feed its
//! inputs. Where the function runs (at the server under locks, at the server
//! optimistically, at the coordinator) is the protocol's business, so the same
//! workload runs unchanged on every protocol.

use crate::ids::{Key, ShardId, TxnId, Version};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// A record's value. Cheap to clone (reference counted).
pub type Value = bytes::Bytes;

/// A set of columns of a table, as a bit mask (column i = bit i).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Columns(pub u64);

impl Columns {
    pub const ALL: Columns = Columns(u64::MAX);
    pub const fn one(col: u32) -> Self {
        Columns(1 << col)
    }

    /// The bits, with the empty set read as every column: an access that
    /// declares no column covers the whole row, never nothing.
    pub const fn bits(self) -> u64 {
        if self.0 == 0 {
            u64::MAX
        } else {
            self.0
        }
    }
}

/// One key a piece reads or writes, with the columns it touches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Access {
    pub key: Key,
    pub columns: Columns,
}

impl Access {
    pub const fn all(key: Key) -> Self {
        Access {
            key,
            columns: Columns::ALL,
        }
    }
}

/// Rococo §3.1: an immediate piece must run (and return its output) during
/// the start phase; a deferrable one may be buffered and reordered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PieceKind {
    Immediate,
    Deferrable,
}

/// The static description of one piece.
///
/// A piece's shard is always static (the coordinator routes on it). Its keys
/// may depend on its inputs, as TPC-C's order lines depend on the order id a
/// district piece hands out: such a piece lists placeholder keys of the right
/// tables and columns here (enough for Rococo's offline checker, which looks
/// only at tables and columns) and returns its real keys from
/// [`Procedure::resolve`]. Every protocol dispatches a piece only once its
/// inputs are ready, so the keys are known before the piece reaches a server.
#[derive(Clone, Debug)]
pub struct PieceSpec {
    pub shard: ShardId,
    pub reads: Vec<Access>,
    /// The keys the piece may write. A piece's function must write only
    /// these keys (it may skip some).
    pub writes: Vec<Access>,
    pub kind: PieceKind,
    /// Earlier pieces (by index) whose outputs are this piece's inputs.
    pub inputs: Vec<u16>,
    /// The keys depend on the inputs: ask [`Procedure::resolve`].
    pub dynamic: bool,
}

impl PieceSpec {
    /// The columns of `key` this piece declares it writes: the union of
    /// its write accesses of `key` ([`Columns::ALL`] if none names it).
    /// What a store that keeps per-column last writers installs, and what
    /// the history records ([`written_columns`]): the two must agree.
    pub fn write_columns(&self, key: Key) -> Columns {
        self.writes
            .iter()
            .filter(|a| a.key == key)
            .map(|a| a.columns)
            .reduce(|a, b| Columns(a.0 | b.0))
            .unwrap_or(Columns::ALL)
    }

    /// This piece's inputs, once every input piece has produced its output
    /// (`output(j)` is piece `j`'s, if it ran): what every coordinator needs
    /// to dispatch pieces as their inputs become ready.
    pub fn gather_inputs<'a>(
        &self,
        output: impl Fn(usize) -> Option<&'a Value>,
    ) -> Option<Vec<Value>> {
        self.inputs
            .iter()
            .map(|&j| output(j as usize).cloned())
            .collect()
    }
}

/// What a piece's function produced.
#[derive(Clone, Debug, Default)]
pub struct PieceResult {
    /// New values for keys among the piece's declared writes.
    pub writes: Vec<(Key, Value)>,
    /// The piece's output: fed to the pieces that name it as an input, and
    /// returned to the client.
    pub output: Value,
    /// The procedure asked to roll back (e.g. TPC-C's invalid item). A user
    /// abort is final: the client does not retry it.
    pub user_abort: bool,
}

/// A transaction instance: pieces plus their deterministic functions.
pub trait Procedure: Send + Sync + fmt::Debug {
    /// The procedure's name (a workload's transaction type).
    fn name(&self) -> &'static str;
    fn pieces(&self) -> &[PieceSpec];
    /// Run piece `piece` on the values of its declared reads (in order;
    /// `None` for a missing key) and the outputs of its input pieces (in the
    /// order of [`PieceSpec::inputs`]). Must be deterministic.
    ///
    /// Reads are borrowed from the store: cloning a value costs an atomic
    /// reference count on a cache line of its own, which measured 15% of
    /// OCC's CPU on YCSB when reads were passed by value.
    fn execute(&self, piece: usize, reads: &[Option<&Value>], inputs: &[Value]) -> PieceResult;
    /// The piece with its real keys, given its inputs. Only pieces marked
    /// [`PieceSpec::dynamic`] need to override this; the default borrows the
    /// static spec, so static pieces pay nothing.
    fn resolve(&self, piece: usize, inputs: &[Value]) -> Cow<'_, PieceSpec> {
        let _ = inputs;
        Cow::Borrowed(&self.pieces()[piece])
    }
    /// Piece `piece` is [`PieceSpec::dynamic`], yet its static spec's keys
    /// (placeholders included) cover every key it may resolve to: every
    /// other piece that can touch one of its real keys declares one of the
    /// same placeholders (TPC-C's order rows, keyed by an `o_id` every
    /// reader also learns at run time). Tracking conflicts on the static
    /// spec then orders the piece correctly, which is what a protocol that
    /// fixes a transaction's place before executing it needs (Janus §4,
    /// "transactions with pre-determined keys"). The default says no: the
    /// keys depend on values read, and such a protocol must refuse it.
    fn placeholders_cover(&self, piece: usize) -> bool {
        let _ = piece;
        false
    }
    /// Write the procedure's parameters for the wire: everything its
    /// workload's [`crate::workload::Workload::decode_txn`] needs to rebuild
    /// it (the code is on both sides). The default says the procedure
    /// cannot cross processes, so new workloads compile before they have a
    /// codec and fail clearly on `tcp`.
    fn encode_params(&self, out: &mut bytes::BytesMut) -> Result<(), crate::codec::EncodeError> {
        let _ = out;
        Err(crate::codec::EncodeError::NotEncodable(self.name()))
    }
    /// True when no piece writes anything.
    fn read_only(&self) -> bool {
        self.pieces().iter().all(|p| p.writes.is_empty())
    }
    /// A read-only procedure's *ordered form*: the same reads, run as a
    /// read-write transaction that a dependency graph orders (Rococo §4.1's
    /// rounds otherwise retry without bound under writes). Its immediate
    /// pieces all sit at one server and every other piece takes (through
    /// them) its inputs from them, so the runner can hold its first request
    /// until the data those pieces read has no unfinished writer there
    /// (Rococo's coordinator docs have the argument); its deferrable pieces
    /// only meet deferrable writers. `None` (the default): there is no
    /// such form.
    fn ordered(&self) -> Option<Txn> {
        None
    }
}

/// A shared handle to a transaction instance.
pub type Txn = Arc<dyn Procedure>;

/// A read a client observed: the key and the version it saw.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReadObs {
    pub key: Key,
    pub version: Version,
    /// The columns of `key` whose last writer is `version`:
    /// [`Columns::ALL`] where versions are per row (every protocol but
    /// those that order conflicts per column, which report one
    /// observation per distinct last writer of the columns read; see
    /// [`crate::storage::Store::column_versions`]).
    pub columns: Columns,
}

impl ReadObs {
    /// A read of the whole row `key` at `version`.
    pub const fn row(key: Key, version: Version) -> Self {
        ReadObs {
            key,
            version,
            columns: Columns::ALL,
        }
    }
}

/// Why an attempt did not commit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AbortReason {
    /// Lost a lock conflict (no-wait) or was wounded (wound-wait).
    LockConflict,
    /// OCC validation found a read version changed or a record locked.
    Validation,
    /// A participant timed out or did not know the transaction.
    Timeout,
    /// The procedure itself rolled back; not retried.
    User,
    /// Read values were stale and the abort brought the current ones (NOCC's
    /// corrections): the client retries at once, without backoff, since the
    /// retry runs on fresh values.
    Stale,
}

impl AbortReason {
    pub fn retryable(self) -> bool {
        !matches!(self, AbortReason::User)
    }
}

/// The end of one attempt, as its coordinator reports it.
#[derive(Clone, Debug)]
pub enum TxnOutcome {
    Committed {
        reads: Vec<ReadObs>,
        /// Keys written; each gets version `txn.version()`.
        writes: Vec<Key>,
        outputs: Vec<Value>,
    },
    Aborted(AbortReason),
    /// The attempt committed, or may have, but what it read is lost (a
    /// participant restarted between committing it and answering). Not
    /// retried, since a retry could apply it twice; the history records it
    /// as [`crate::history::Outcome::Unknown`] with its declared writes.
    InDoubt,
}

/// The columns each of `writes` covers, for a history checked per column:
/// per key, the union of [`PieceSpec::write_columns`] over the pieces,
/// each resolved ([`Procedure::resolve`]) on the inputs `outputs` give
/// (`outputs[i]`: piece `i`'s output; a piece whose inputs are not all
/// there keeps its static spec). A key no piece declares is written whole.
pub fn written_columns(txn: &dyn Procedure, outputs: &[Value], writes: &[Key]) -> Vec<Columns> {
    let specs: Vec<Cow<'_, PieceSpec>> = txn
        .pieces()
        .iter()
        .enumerate()
        .map(|(i, p)| match p.dynamic {
            false => Cow::Borrowed(p),
            true => match p.gather_inputs(|j| outputs.get(j)) {
                Some(inputs) => txn.resolve(i, &inputs),
                None => Cow::Borrowed(p),
            },
        })
        .collect();
    writes
        .iter()
        .map(|&k| {
            specs
                .iter()
                .filter(|p| p.writes.iter().any(|a| a.key == k))
                .map(|p| p.write_columns(k))
                .reduce(|a, b| Columns(a.0 | b.0))
                .unwrap_or(Columns::ALL)
        })
        .collect()
}

/// Helper for protocols: the shards a transaction touches, sorted, unique.
pub fn participants(txn: &dyn Procedure) -> Vec<ShardId> {
    let mut s: Vec<ShardId> = txn.pieces().iter().map(|p| p.shard).collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// The id an attempt is known by, with its transaction.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub id: TxnId,
    pub txn: Txn,
    /// When the transaction's first attempt started: a retried transaction
    /// keeps its age, so wound-wait never starves it (Rosenkrantz et al.).
    pub since: crate::ids::Time,
    /// The closed-loop client (slot) that runs it, 0 where there is none:
    /// the Janus authors' 2PL ranks transactions by their coordinator
    /// (Janus §6.1; `twopl::Wound::JanusBaseline`).
    pub client: u32,
}

impl Attempt {
    /// A transaction's first attempt, started at time 0 by no client (for
    /// tests and tools that drive a coordinator directly).
    pub fn at_zero(id: TxnId, txn: Txn) -> Self {
        Attempt {
            id,
            txn,
            since: 0,
            client: 0,
        }
    }
}
