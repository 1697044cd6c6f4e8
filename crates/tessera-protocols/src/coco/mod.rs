//! COCO: epoch-based commit and replication (VLDB '21), first slice.
//!
//! Guarantees: strict serializability (PT-OCC, S2PL), serializability
//! (LT-OCC), or snapshot isolation with `--isolation snapshot` (§5.3, see
//! [`Isolation`]), with every replica of a shard converging to the
//! primary's data.
//!
//! Three concurrency controls ([`Cc`]) share everything below: PT-OCC
//! and LT-OCC (§5), and the S2PL NO_WAIT baseline (§7.1.2), which locks
//! at the primaries as it executes and so skips steps 2 and 3 — see
//! [`locks`] for how it fits, where it reads (always at the primary) and
//! how it runs under epoch commit, which the paper does not do.
//!
//! Phases of a transaction (§4), by message:
//!
//! 1. **execution** — the coordinator sends each piece whose inputs are
//!    ready to the *nearest* replica of its shard (**Read**); the replica
//!    runs it on its data and returns the reads with their TIDs and the
//!    writes, which the coordinator buffers. (S2PL: the primary, which
//!    locks what the piece reads and writes, NO_WAIT.)
//! 2. **lock** — the write set is locked at the primaries, NO_WAIT
//!    (**Prepare** with writes); with several primaries this round ends
//!    everywhere before any read is validated.
//! 3. **validate** — the primaries check that every record read still has
//!    the TID read (PT-OCC, §5.1) or that its [wts, rts] can be extended to
//!    the commit timestamp (LT-OCC, §5.2).
//!
//!    Snapshot transactions (§5.3.3) run steps 2 and 3 as one round.
//! 4. **write back** — the primaries install the writes with the commit
//!    timestamp and release the locks; the backups get the writes and
//!    apply a write only if its timestamp is newer than theirs (Thomas
//!    write rule). In `epoch` mode the coordinator sends them to the
//!    backups itself, as Fig. 3 does, and each primary checks once per
//!    epoch that its backups have all it installed (see [`Replication`]);
//!    in `2pc-sync` it sends them to the primary and the backups at once,
//!    waits for every acknowledgement, and only then lets the primary
//!    release the write locks (**Release**, §7.1.2, as the authors' code
//!    does). S2PL's primaries that were only read get a **Release** too.
//!
//! Commit modes ([`CommitMode`]), the same code configured three ways:
//! `2pc` (no replication, result released at write-back), `2pc-sync`
//! (write-back acknowledged once every backup has the writes) and `epoch`
//! (replication asynchronous, results released when the transaction's
//! epoch commits, §3.1, see [`epoch`]).
//!
//! Failures (§3.2): in `epoch` mode an epoch whose prepare is overdue
//! (a server crashed, cut off or stuck behind the locks of a crashed
//! coordinator) aborts, with the next one: servers revert every tuple to
//! its last committed-epoch version ([`undo`]), drop the epoch's locks,
//! and client hosts report its transactions aborted, so clients re-run
//! them. See [`epoch`].
//!
//! Crash recovery (§3.2, §6.2, `epoch` mode): every server logs its writes
//! tagged with their epoch, forced at the end of each epoch before its
//! prepared record, and checkpoints every `checkpoint_every` committed
//! epochs once the log has grown by the last checkpoint's size ([`redo`]). A restarted server rebuilds its store from its last
//! checkpoint and the log after it, asks the epoch manager to **Rejoin**
//! (which aborts the open epochs, whose unforced writes it lost) and
//! replays only the epochs the answer says committed; it serves nothing
//! before. A restarted manager (shard 0's first replica) learns from its
//! commit and abort records what was decided and aborts the rest. Every
//! concurrency control, and both snapshot modes, is crashed at every one
//! of Fig. 1's nine failure points on each of 200 seeds, the coordinator
//! or a participant (`coco_seeds.rs`).
//!
//! Deletes and inserts (§6.3, see [`gc`]): an insert locks a placeholder
//! (invisible to readers, so concurrent inserts of a key conflict and a
//! reader that saw it absent fails validation); a delete writes the empty
//! value, the delete bit, with its commit timestamp, and is replicated,
//! logged and reverted like any write; deleted records and placeholders are
//! removed once their epoch committed, on every replica, in every commit
//! mode. LT-OCC records the rts of a read that found a key absent in a
//! placeholder, so that a later insert commits above it.
//!
//! Known deviations and what is not done yet:
//! * S2PL under `epoch` is ours (see [`locks`]).
//! * No backup takeover of a crashed primary: while any server is down no
//!   epoch commits (its prepare cannot be answered); the system resumes
//!   when it restarts. The epoch manager is not replicated.
//! * Recovery is built for `epoch` mode only; in the 2PC modes a crashed
//!   server restarts from the load. In the 2PC modes a coordinator forces
//!   the commit decision of a distributed transaction before write-back,
//!   as 2PC does, so that primaries of a crashed coordinator learn its
//!   outcome (**Inquire**, presumed abort), after a record standing for
//!   its participants' prepare records; a single-shard one forces
//!   neither (§7.4, [`CommitMode::forces_decision`]); in `epoch` mode it writes back at once and a
//!   restarted coordinator aborts the open epochs instead (§3.2, see
//!   `CocoCoordinator`).
//! * Our network does not keep a worker's messages in order, which the
//!   paper's connections do: in `epoch` mode a request to a primary
//!   carries the coordinator's unacknowledged write-backs there (see
//!   `msg::Decided`). S2PL's **Release** of read locks is not carried,
//!   so a worker's next transaction can still meet its own read locks.
//! * The log is one buffer per server (a simulated server is one worker),
//!   and the simulator keeps the whole log: a checkpoint bounds what
//!   recovery reads, not what the disk holds. A checkpoint is a full image
//!   of the records written since the load.
//! * A read of a key whose deleted record was collected reports the
//!   initial version to the history checker (the deleter's version went
//!   with the record).
//! * The epoch manager lives on shard 0's first replica.

mod coordinator;
pub mod epoch;
pub mod gc;
pub mod locks;
mod msg;
pub mod redo;
mod server;
pub mod tid;
pub mod undo;

pub use coordinator::CocoCoordinator;
pub use msg::Msg;
pub use server::CocoServer;

use tessera_core::ids::{Time, MS};
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv};

/// The concurrency control (§5, and the S2PL baseline of §7.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cc {
    /// Physical-time OCC (Silo TIDs).
    PtOcc,
    /// Logical-time OCC (TicToc's [wts, rts]).
    LtOcc,
    /// Strict two-phase locking, NO_WAIT (§7.1.2): read and write locks
    /// taken at the primaries as the transaction executes, held to
    /// write-back; no validation. Its commit timestamps are PT-OCC's
    /// (see [`locks`]).
    S2pl,
}

/// How a transaction commits and is replicated (§7.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitMode {
    /// 2PC without replication: reads and writes at the primaries only.
    TwoPc,
    /// 2PC with synchronous replication before the commit is acknowledged.
    TwoPcSync,
    /// COCO's epoch-based commit with asynchronous replication.
    Epoch,
}

impl CommitMode {
    pub const NAMES: &'static [&'static str] = &["2pc", "2pc-sync", "epoch"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "2pc" => Some(CommitMode::TwoPc),
            "2pc-sync" => Some(CommitMode::TwoPcSync),
            "epoch" => Some(CommitMode::Epoch),
            _ => None,
        }
    }

    /// Writes go to the backups (and reads may be served by them).
    pub fn replicates(self) -> bool {
        self != CommitMode::TwoPc
    }

    /// The durable writes a transaction waits for, one rule for both roles
    /// (§7.4: "the prepare and commit records of 2PC and epoch-based commit
    /// must be written to durable secondary storage", and "durable write
    /// latency exists only in distributed transactions"; COCO's code
    /// charges the delay only to a `distributed_transaction`).
    ///
    /// The coordinator of a 2PC mode forces two records before the
    /// write-back, and only when the transaction spans more than one shard
    /// (`shards`, its participants): one for the prepare round, then the
    /// commit decision, as COCO's executor spins twice the durable-write
    /// cost for a distributed transaction. The participants' prepare
    /// records are charged at the coordinator, as COCO's code charges them
    /// at the worker: participants force theirs in parallel, so the
    /// transaction waits one durable write for them all, and our S2PL
    /// has no prepare round of its own to carry them (its locks, taken as
    /// it executes, are its vote); a server's log is not read back in the
    /// 2PC modes, so only the wait matters. With one participant the primary's
    /// vote is the outcome, so a restarted coordinator that finds no
    /// record may presume abort (**Inquire**) without contradicting
    /// anyone — nobody heard of a commit before the primary installed the
    /// writes, and a primary that installed them never asks. Such a
    /// transaction's synchronous replication round stays (2PC(Sync) holds
    /// its write locks until every backup has the writes, §7.1.2): in the
    /// paper that replication *is* its durability ("durable secondary
    /// storage, such as disks and replication to a remote node").
    /// Epoch mode forces nothing per transaction (§3.1).
    pub fn forces_decision(self, shards: usize) -> bool {
        self != CommitMode::Epoch && shards > 1
    }

    /// Whether a server's own log is read back after a crash, so that what
    /// it acknowledges outside an epoch's prepare must be forced first:
    /// epoch mode only. The 2PC modes restart a crashed server from the
    /// load (recovery is built for epoch mode only, see the module doc),
    /// so a backup forcing a late write there before acknowledging it made
    /// a 2PC(Sync) transaction wait for a durable write that nothing ever
    /// reads and §7.4's model does not have.
    pub fn recovers_from_log(self) -> bool {
        self == CommitMode::Epoch
    }
}

/// What a transaction is held to (§5.3). Both levels run the same phases;
/// snapshot transactions differ in three configured places:
///
/// * **parallel locking and validation** (§5.3.3): the coordinator sends
///   one round in which every primary locks its part of the write set and
///   validates its part of the read set, instead of a lock round followed
///   by a validation round — one network round trip fewer;
/// * **the snapshot**: PT-OCC validates each read (TID unchanged, record not
///   locked by another transaction) without holding its write locks first,
///   so the snapshot is taken between the last read and the first
///   validation (§5.3.1); LT-OCC validates reads at `TID_SI`, the smallest
///   timestamp not less than the wts of every record read, instead of at
///   the commit timestamp, which must also exceed the rts of every record
///   written (§5.3.2);
/// * **first committer wins**: every record written, read or not, must
///   still carry the TID (wts) the execution phase saw when it is locked,
///   so a write-write conflict with a transaction that committed since the
///   snapshot aborts. Serializable transactions check only records they
///   read; a blind write needs no check there because its lock is taken
///   before any read is validated (§5.1), which the parallel round gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    Serializable,
    Snapshot,
}

impl Isolation {
    pub const NAMES: &'static [&'static str] = &["serializable", "snapshot"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "serializable" => Some(Isolation::Serializable),
            "snapshot" => Some(Isolation::Snapshot),
            _ => None,
        }
    }
}

/// Who sends a transaction's writes to the backups in epoch mode.
///
/// * `Coordinator` (the default, §4.2.3 and Fig. 3): the coordinator
///   sends the write set with the TID to the primary (**WriteBack**) and
///   to every backup (**Replicate**) at once; nothing is acknowledged per
///   transaction. At the epoch's prepare each primary tells its backups
///   which transactions of the epoch it installed (**EpochSync**, one
///   message per backup and epoch, §3.3: replicas need agree only at epoch
///   boundaries) and sends the few a backup lacks itself, acknowledged, so
///   a lost message or a coordinator that crashed between its messages
///   costs neither the epoch nor a replica's agreement. A primary handles
///   one event per written transaction instead of three.
/// * `Primary`: the primary forwards each write-back to its backups and
///   collects their acknowledgements, per transaction (what tessera did
///   before; kept to measure the difference).
///
/// 2PC(Sync) acknowledges every copy per transaction either way:
///
/// * `Coordinator` (the default): the coordinator sends the writes to the
///   primary (**WriteBack**, installed with the write locks kept) and to
///   every backup (**Replicate**, answered to it) at once, waits for all,
///   reports the commit and tells the primary to **Release** the locks —
///   the authors' 2PC(Sync) (`Silo.h` `write_and_replicate`, then an
///   unanswered lock release): one round trip for a remote primary's
///   writes, as §7.1.2 asks only that "write locks are not released until
///   all writes are replicated on all replicas". A primary that hears no
///   **Release** within a resend period sends the backups its own copies
///   and releases once they answer, so a lost message or a crashed
///   coordinator holds no lock for ever.
/// * `Primary`: the primary forwards the write-back to its backups and
///   answers once they all acknowledged — a remote primary's writes then
///   take two round trips (tessera's 2PC(Sync) until 2026-11-29).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    Coordinator,
    Primary,
}

impl Replication {
    pub const NAMES: &'static [&'static str] = &["coordinator", "primary"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "coordinator" => Some(Replication::Coordinator),
            "primary" => Some(Replication::Primary),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct CocoConfig {
    pub cc: Cc,
    pub commit: CommitMode,
    pub isolation: Isolation,
    /// Epoch mode: who replicates (see [`Replication`]).
    pub replication: Replication,
    /// Epoch length E (§3.1; 10 ms by default).
    pub epoch: Time,
    /// Unanswered requests are resent after this long.
    pub retransmit: Time,
    /// A primary asks the coordinator about locks held this long.
    pub inquire: Time,
    /// How long finished transactions are remembered by a primary when
    /// their coordinator's floor does not pass them first.
    pub tombstone: Time,
    /// An epoch whose prepare is unanswered this long aborts (§3.2);
    /// after a timed-out epoch the next deadline doubles, up to
    /// [`epoch::MAX_BACKOFF`] times this (`--prepare-deadline-ms`).
    ///
    /// Why 50 ms by default (the paper gives no value): the timeout is how
    /// §3.2 detects a failed server, so it must exceed what a healthy
    /// prepare takes, which waits for the epoch's last transactions (a
    /// lost message costs a `retransmit`, 10 ms), for each primary's
    /// **EpochSync** round with its backups and for log forces (up to 2 ms
    /// each at §7.4's slowest disk): a few resend periods, five 10 ms
    /// epochs. Much shorter and one lost message aborts a healthy epoch,
    /// whose transactions all re-run; much longer and a crash holds every
    /// result back that long. A wide-area world raises the default to four
    /// of its slowest round trips ([`CocoConfig::covering_round_trip`]); a
    /// value set by flag is taken as given.
    pub epoch_timeout: Time,
    /// A server checkpoints at most every this many committed epochs
    /// (§6.2), and only once its log has grown by the last checkpoint's
    /// size, so that recovery replays only the log after it (`epoch`
    /// mode).
    pub checkpoint_every: u64,
    /// Epoch mode: client hosts start no transaction between an epoch's
    /// prepare and its commit — COCO's global barrier at each epoch
    /// boundary (§3.1, §7.7; see [`epoch`]). Off by default: workers go on
    /// across the boundary (`--epoch-barrier`).
    pub barrier: bool,
}

impl CocoConfig {
    pub fn new(cc: Cc, commit: CommitMode) -> Self {
        CocoConfig {
            cc,
            commit,
            isolation: Isolation::Serializable,
            replication: Replication::Coordinator,
            epoch: 10 * MS,
            retransmit: 10 * MS,
            inquire: 50 * MS,
            tombstone: 2000 * MS,
            epoch_timeout: 50 * MS,
            checkpoint_every: 5,
            barrier: false,
        }
    }

    /// The coordinator sends the write set to the backups itself, each
    /// copy unacknowledged and synced once per epoch (epoch mode with
    /// [`Replication::Coordinator`]).
    pub fn coordinator_replicates(&self) -> bool {
        self.commit == CommitMode::Epoch && self.replication == Replication::Coordinator
    }

    /// 2PC(Sync) with [`Replication::Coordinator`]: the coordinator sends
    /// the write set to the primary and every backup at once, each copy
    /// acknowledged to it, then releases the primary's write locks.
    pub fn coordinator_replicates_sync(&self) -> bool {
        self.commit == CommitMode::TwoPcSync && self.replication == Replication::Coordinator
    }

    /// Timeouts that cover `rtt`, the slowest round trip of the world (as
    /// the layered baselines', TAPIR's and Janus's are): resend after two
    /// round trips, inquire after four, and give an epoch's prepare —
    /// which waits for the epoch's replication to be acknowledged, then
    /// for the prepared records — four round trips before it aborts the
    /// epoch. With the LAN defaults a wide-area run (COCO §7.5: up to
    /// 61 ms) aborted nearly every epoch and committed nothing.
    pub fn covering_round_trip(self, rtt: Time) -> Self {
        CocoConfig {
            retransmit: self.retransmit.max(2 * rtt),
            inquire: self.inquire.max(4 * rtt),
            epoch_timeout: self.epoch_timeout.max(4 * rtt),
            tombstone: self.tombstone.max(40 * rtt),
            ..self
        }
    }
}

/// COCO's protocol: [`CocoServer`] on every replica, [`CocoCoordinator`] on
/// every client host.
pub struct Coco;

impl Protocol for Coco {
    type Msg = Msg;
    type Config = CocoConfig;
    type Server = CocoServer;
    type Coordinator = CocoCoordinator;

    fn server(config: &CocoConfig, env: ServerEnv) -> CocoServer {
        CocoServer::new(config.clone(), env)
    }

    fn coordinator(config: &CocoConfig, env: CoordinatorEnv) -> CocoCoordinator {
        CocoCoordinator::new(config.clone(), env)
    }
}

#[cfg(test)]
mod delete_tests;
#[cfg(test)]
mod tests;
