//! The messages of Janus (§3.1, Algorithms 1–5), and the dependency lists
//! they carry.

use crate::depgraph::{replies_size, PieceReply};
use std::sync::Arc;
use tessera_core::ids::{ShardId, TxnId};
use tessera_core::node::WireSize;
use tessera_core::txn::{Txn, Value};

/// A ballot (§3.2–3.3): 0 for the transaction's own coordinator.
pub type Ballot = u64;

/// One direct dependency `T′ → T`, with the shards T′ involves so that a
/// server that does not know T′ can send it an Inquire (Algorithm 4, l. 45).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dep {
    pub txn: TxnId,
    pub shards: Arc<[ShardId]>,
}

/// What a replica holds of a transaction it pre-accepted, in answer to a
/// recovery coordinator's Prepare (§3.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The ballot at which `deps` were accepted, `None` if they are still
    /// the replica's own PreAccept answer.
    pub accepted: Option<Ballot>,
    pub deps: Vec<Dep>,
    /// The accepted value is an abandon (§3.3).
    pub abandon: bool,
}

/// A transaction as committed: its procedure (so that a replica that missed
/// its PreAccept can still execute it), the consensus dependencies, and the
/// abandon flag (§3.3).
#[derive(Debug)]
pub struct CommitInfo {
    pub txn: TxnId,
    pub proc: Txn,
    pub deps: Vec<Dep>,
    pub abandon: bool,
}

/// Why a replica sends [`Msg::Committed`] to another of its shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announce {
    /// Committed here lately (each in two consecutive announcements).
    Lately,
    /// Executed here (durably) a while ago, and the receiver, a replica of
    /// one of their shards, has not announced executing them: it may have
    /// missed both their PreAccept and Commit while cut off or down, and
    /// the announcements of that time too (seen with an isolated replica:
    /// nothing later depended on them, so it never inquired), or its
    /// announcements were lost, or it restarted and forgot whom it heard.
    /// The receiver takes it as the sender's announcement of executing
    /// them, inquires those it does not know, and answers with those it
    /// executed (an echoed [`Msg::Executed`]), so the sender stops asking
    /// and may forget them ([`super::gc`]).
    Lagging,
    /// The answer to a [`Msg::CatchUp`]: every transaction with pieces here
    /// that the sender holds committed.
    CatchUp,
}

#[derive(Clone, Debug)]
pub enum Msg {
    /// Coordinator → every replica of every participating shard
    /// (Algorithm 1, l. 3). Janus transactions are one-shot (§3): each
    /// server finds its pieces in the procedure.
    PreAccept {
        txn: TxnId,
        ballot: Ballot,
        proc: Txn,
        /// The own coordinator's floor: the oldest transaction it still
        /// works on when it sent this (it never sends about an older one
        /// of its incarnation again), so that replicas drop tombstones and
        /// ignore stale copies ([`super::gc`]). `None` from a recovery
        /// coordinator, which cannot speak for the coordinator.
        floor: Option<TxnId>,
        /// The own coordinator's *done floor*: every transaction of its
        /// incarnation below it executed at every replica of every shard
        /// it involves (a replica of one of its shards said it forgot it,
        /// [`Msg::Settled`]), so that replicas drop their record of them
        /// ([`super::gc`], *the done floor*). `None` from a recovery
        /// coordinator.
        done: Option<TxnId>,
    },
    /// Algorithm 2, l. 31: the transaction's direct dependencies here,
    /// sorted by id.
    PreAcceptOk {
        txn: TxnId,
        ballot: Ballot,
        deps: Vec<Dep>,
    },
    /// Algorithm 2, l. 25: a higher ballot was seen.
    PreAcceptNotOk {
        txn: TxnId,
        ballot: Ballot,
    },
    /// Coordinator → every replica (Algorithm 1, l. 16). A recovery
    /// coordinator's Accept (§3.3) may carry the abandon flag, and carries
    /// the procedure: a replica that never pre-accepted the transaction
    /// must be able to accept it, since an abandon is decided exactly when
    /// the replicas that answered the Prepare do not hold it. The own
    /// coordinator's carries it to the replicas whose PreAccept-OK it does
    /// not have, for the same reason: its majority may need them.
    Accept {
        txn: TxnId,
        ballot: Ballot,
        deps: Arc<Vec<Dep>>,
        abandon: bool,
        proc: Option<Txn>,
    },
    AcceptOk {
        txn: TxnId,
        ballot: Ballot,
    },
    /// Algorithm 3, l. 34, with the highest ballot seen.
    AcceptNotOk {
        txn: TxnId,
        ballot: Ballot,
    },
    /// Coordinator → every replica (Algorithm 1, l. 22).
    Commit(Arc<CommitInfo>),
    /// Algorithm 4, l. 57: the results of the transaction's pieces at this
    /// replica's shard.
    CommitOk {
        txn: TxnId,
        abandon: bool,
        results: Vec<PieceReply>,
    },
    /// Recovery coordinator → every replica of every participating shard
    /// (§3.3): promise not to take part in lower ballots of `txn`.
    Prepare {
        txn: TxnId,
        ballot: Ballot,
    },
    /// The promise, with what the replica holds of `txn`: `None` if it
    /// never pre-accepted it (a shard none of whose answering replicas has
    /// it makes the recovery coordinator set the abandon flag, §3.3). A
    /// replica that knows `txn` committed answers with `InquireOk` instead.
    PrepareOk {
        txn: TxnId,
        ballot: Ballot,
        prepared: Option<Prepared>,
    },
    /// A higher ballot was promised.
    PrepareNotOk {
        txn: TxnId,
        ballot: Ballot,
    },
    /// Server → server: tell me `txn` once it is committing there
    /// (Algorithm 4, l. 45). `its_shard`: the asker knows that the
    /// receiver is a replica of a shard `txn` involves (not so for a
    /// member of a component whose shards are unknown, asked of every
    /// server); only then may the receiver answer from its done floor,
    /// having executed and forgotten `txn` ([`super::gc`]).
    Inquire {
        txn: TxnId,
        its_shard: bool,
    },
    /// The answer: the transaction as committed.
    InquireOk(Arc<CommitInfo>),
    /// Replica → the other replicas of its shard, periodically: the
    /// transactions with pieces here that committed here lately (each in
    /// two consecutive announcements). Not in the paper: a replica that
    /// missed both the PreAccept and the Commit of a transaction whose
    /// coordinator then failed would learn it only when a later
    /// transaction depends on it, and until then hold a stale state.
    /// Also sent for the other reasons of [`Announce`].
    Committed {
        txns: Arc<[TxnId]>,
        why: Announce,
    },
    /// A replica restarted from its log (see [`super::wal`]) → the other
    /// replicas of its shard, until one answers (a `Committed` with
    /// [`Announce::CatchUp`]). Not in the paper, whose replicas do not crash: a
    /// replica that was down missed the PreAccepts and Commits of that
    /// time, and would learn a transaction only when a later one depends on
    /// it. The others forget a transaction only once every replica of its
    /// shards executed it ([`super::gc`]), so what they still hold
    /// committed is all this replica can have missed.
    CatchUp,
    /// Replica → every other replica of the shards of `txns`,
    /// periodically: these transactions executed here (each in two
    /// consecutive announcements). Not in the paper, whose prototype
    /// truncates the graph "as transactions finish" (§5) without saying
    /// how: a replica forgets a transaction only once every replica of
    /// every shard it involves executed it, since until then any of them
    /// may still need its Commit (an Inquire), its outputs (§4) or its
    /// place in the graph (garbage collection, [`super::gc`]).
    /// The receiver answers with those of `txns` it executed too, as an
    /// `echo` (not answered again): a replica that was cut off while the
    /// others announced learns from it that they did.
    Executed {
        txns: Arc<[TxnId]>,
        echo: bool,
    },
    /// The answer to a PreAccept, Accept, Prepare, Commit or Inquire about
    /// a transaction this replica forgot: it committed (abandoned or not),
    /// executed at every replica of every shard it involves, and was
    /// decided in the component `scc` (its members in execution order;
    /// `None`: alone), ids only. A server waiting for it adopts that
    /// component as DECIDED, exactly as from a live replica's answer.
    Forgotten {
        txn: TxnId,
        abandon: bool,
        scc: Option<Arc<[TxnId]>>,
    },
    /// Server → a replica of the shard of `piece` (§4, transactions with
    /// pre-determined keys): send me the output of `txn`'s piece `piece`
    /// once you executed it.
    FetchOutput {
        txn: TxnId,
        piece: u16,
    },
    /// The answer: the piece's output, or `None` if it did not run because
    /// it or an input of it rolled back (a user abort, §4) or `txn` was
    /// abandoned; every replica of the shard answers the same.
    Output {
        txn: TxnId,
        piece: u16,
        output: Option<Value>,
    },
    /// Replica → one replica of each other shard, each epoch, `ask`: which
    /// of `txns` did you forget with pieces at your shard (or know below
    /// their done floor)? The answer (`ask` false) lists them: each
    /// executed at every replica of every shard it involves (condition 2
    /// of [`super::gc`]). Not in the paper: a replica keeps a forgotten
    /// transaction's component while a member of it may still be
    /// unexecuted somewhere, and a member without pieces here is announced
    /// only to its own shards' replicas ([`super::gc`], *what bounds the
    /// record*). A coordinator asks the same of a replica of its finished
    /// transactions' shards, to raise its done floor.
    Settled {
        txns: Arc<[TxnId]>,
        ask: bool,
    },
    /// Coordinator → every server, every few epochs while it changes: its
    /// done floor, as a PreAccept carries it ([`super::done`]). Not in the
    /// paper: a replica of a shard the coordinator no longer sends to (or
    /// never did, holding its transactions only as ancestors) learns it
    /// too, and drops its record below it.
    Done {
        floor: TxnId,
    },
}

/// The names of [`Msg`]'s kinds, indexed by [`Msg::kind`], for the debug
/// counts of messages by kind ([`super::stats`]).
pub const KINDS: [&str; 21] = [
    "PreAccept",
    "PreAcceptOk",
    "PreAcceptNotOk",
    "Accept",
    "AcceptOk",
    "AcceptNotOk",
    "Commit",
    "CommitOk",
    "Prepare",
    "PrepareOk",
    "PrepareNotOk",
    "Inquire",
    "InquireOk",
    "Committed",
    "CatchUp",
    "Executed",
    "Forgotten",
    "FetchOutput",
    "Output",
    "Settled",
    "Done",
];

impl Msg {
    /// This message's index in [`KINDS`].
    pub fn kind(&self) -> usize {
        match self {
            Msg::PreAccept { .. } => 0,
            Msg::PreAcceptOk { .. } => 1,
            Msg::PreAcceptNotOk { .. } => 2,
            Msg::Accept { .. } => 3,
            Msg::AcceptOk { .. } => 4,
            Msg::AcceptNotOk { .. } => 5,
            Msg::Commit(_) => 6,
            Msg::CommitOk { .. } => 7,
            Msg::Prepare { .. } => 8,
            Msg::PrepareOk { .. } => 9,
            Msg::PrepareNotOk { .. } => 10,
            Msg::Inquire { .. } => 11,
            Msg::InquireOk(_) => 12,
            Msg::Committed { .. } => 13,
            Msg::CatchUp => 14,
            Msg::Executed { .. } => 15,
            Msg::Forgotten { .. } => 16,
            Msg::FetchOutput { .. } => 17,
            Msg::Output { .. } => 18,
            Msg::Settled { .. } => 19,
            Msg::Done { .. } => 20,
        }
    }
}

fn deps_size(deps: &[Dep]) -> usize {
    deps.iter().map(|d| 8 + 1 + 4 * d.shards.len()).sum()
}

fn info_size(i: &CommitInfo) -> usize {
    // The procedure travels as its name and arguments; 64 bytes is what the
    // micro and YCSB procedures take in a compact codec.
    1 + 64 + deps_size(&i.deps)
}

/// Header (type, txn id) plus payload, as a compact binary codec would
/// encode it.
impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        const HEADER: usize = 1 + 8;
        HEADER
            + match self {
                Msg::PreAccept { floor, done, .. } => {
                    8 + 64 + 2 + 8 * (usize::from(floor.is_some()) + usize::from(done.is_some()))
                }
                Msg::PreAcceptOk { deps, .. } => 8 + deps_size(deps),
                Msg::Accept { deps, proc, .. } => {
                    8 + 1 + deps_size(deps) + if proc.is_some() { 64 } else { 0 }
                }
                Msg::PreAcceptNotOk { .. }
                | Msg::AcceptOk { .. }
                | Msg::AcceptNotOk { .. }
                | Msg::Prepare { .. }
                | Msg::PrepareNotOk { .. } => 8,
                Msg::PrepareOk { prepared, .. } => {
                    8 + 1 + prepared.as_ref().map_or(0, |p| 9 + deps_size(&p.deps))
                }
                Msg::Commit(i) | Msg::InquireOk(i) => info_size(i),
                Msg::CommitOk { results, .. } => 1 + replies_size(results),
                Msg::Inquire { .. } => 1,
                Msg::Done { .. } => 0,
                Msg::CatchUp => 0,
                Msg::FetchOutput { .. } => 2,
                Msg::Output { output, .. } => 2 + 1 + output.as_ref().map_or(0, |v| 4 + v.len()),
                Msg::Committed { txns, .. }
                | Msg::Executed { txns, .. }
                | Msg::Settled { txns, .. } => 4 + 8 * txns.len(),
                Msg::Forgotten { scc, .. } => 1 + 4 + scc.as_ref().map_or(0, |s| 8 * s.len()),
            }
    }
}
