//! The server role (Algorithms 2–5): a replica of one shard. It answers
//! PreAccept with the transaction's direct dependencies here and Accept
//! under ballots; on Commit it puts the consensus dependencies into its
//! dependency graph (shared with Rococo, [`crate::depgraph`]), waits until
//! every ancestor is committing — asking a server of an ancestor it does
//! not know (Inquire) — and executes strongly connected components in the
//! deterministic order every replica computes.
//!
//! A replica that pre-accepted a transaction and never hears its commit
//! (the Commit was lost) asks the other replicas for it after a while, so
//! every replica of a shard executes every committed transaction. If it is
//! still not committed later (its coordinator may have crashed), the
//! replica becomes its recovery coordinator (§3.3, Algorithm 6): the same
//! phases as the coordinator's ([`super::driver`]) with a higher ballot.
//!
//! Crashes: every promise is durable before it is answered ([`super::wal`]).
//! A restarted replica rebuilds its ballots, dependencies, graph, store and
//! tombstones from its log ([`JanusServer::new`]), resumes what was left
//! (inquiries, recoveries, execution) and asks the other replicas of its
//! shard what committed while it was down ([`Msg::CatchUp`]).

use super::driver::{Driver, Progress};
use super::gc::Gc;
use super::image::{self, LiveTxn, Parts};
use super::msg::{Announce, Ballot, CommitInfo, Dep, Msg, Prepared};
use super::stats::{trace_on, DepStats, Sent, TRACE};
use super::tracker::{Item, Tracker};
use super::wal::{Component, Components, Record};
use super::JanusConfig;
use crate::depgraph::graph::{Decision, DepGraph};
use crate::depgraph::taint::{Mark, Tarjan, NONE};
use crate::depgraph::{run_piece, Edge, Granularity, PieceReply, Status, Vertex, Wakeups};
use std::collections::VecDeque;
use std::sync::Arc;
use tessera_core::codec::DecodeError;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId, US};
use tessera_core::node::{Ctx, Effect, Node, NodeReport};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, Txn, Value};
use tessera_core::FastMap;

/// What this replica keeps of a transaction with pieces at its shard.
struct Local {
    proc: Txn,
    /// Highest ballot seen (`highest_ballot_S[T]`).
    ballot: Ballot,
    /// The ballot at which `deps` (and `abandon`) were accepted (§3.3: a
    /// recovery coordinator must prefer an accepted value to pre-accepted
    /// ones).
    accepted: Option<Ballot>,
    /// Its dependencies here: from PreAccept, replaced by Accept.
    deps: Vec<Dep>,
    /// The piece results once executed (`processed_S[T]`).
    results: Option<Vec<PieceReply>>,
    /// The persist token of its Executed record ([`super::wal`]).
    logged: u64,
    /// The pieces executed so far while execution waits for another
    /// shard's output (§4).
    run: Run,
    /// The accepted, then committed, abandon flag.
    abandon: bool,
    commit_waiters: Vec<NodeId>,
    since: Time,
    /// Become its recovery coordinator if it is not committed by then.
    recover_at: Time,
}

impl Local {
    /// Pre-accepted (or learnt committed) with `deps` at `ballot`, since
    /// `since`: nothing accepted, executed or waiting yet.
    fn new(proc: Txn, ballot: Ballot, deps: Vec<Dep>, since: Time, recover_at: Time) -> Local {
        Local {
            proc,
            ballot,
            accepted: None,
            deps,
            results: None,
            logged: 0,
            run: Run::default(),
            abandon: false,
            commit_waiters: Vec::new(),
            since,
            recover_at,
        }
    }
}

/// A transaction's execution here, piece by piece (§4): the replies of
/// the pieces run (or skipped) so far, in piece order, and the keys they
/// wrote.
#[derive(Default)]
struct Run {
    replies: Vec<PieceReply>,
    written: Vec<Key>,
    /// The other shards' outputs its pieces need have been asked for
    /// ([`super::JanusConfig::prefetch_outputs`]).
    prefetched: bool,
}

/// A piece of another shard whose output a piece here waits for.
type PieceRef = (TxnId, u16);

struct Asking {
    sent_at: Time,
    tries: u32,
    /// A request has gone out (an Inquire about an ancestor with pieces
    /// here waits a retransmit period first: its Commit normally comes).
    sent: bool,
    /// A replica that announced it committed (for a transaction this one
    /// knows nothing else of).
    via: Option<NodeId>,
}

const SWEEP: TimerId = TimerId(1);

/// Messages about a transaction forgotten here that came after its
/// tombstone expired, by what the record of forgotten transactions
/// ([`super::gc`], *what a replica forgot*) did with them; reported as
/// counters when not zero.
#[derive(Clone, Copy)]
enum Late {
    /// A dependency on it in a later transaction's Commit or InquireOk:
    /// a cut-off, not an ancestor to inquire about.
    Dependency,
    /// A PreAccept, Accept, Prepare, Commit or Inquire about it: answered
    /// `Forgotten` from the record (a stale copy from its own coordinator
    /// is ignored, as with no record).
    Answered,
    /// A peer's announcement of it (routine, nudge or catch-up): not
    /// inquired about.
    Announced,
    /// It was executed again here: never, unless the record is wrong.
    RunAgain,
}

const LATE: [&str; 4] = [
    "janus_late_dependency",
    "janus_late_answered",
    "janus_late_announced",
    "janus_forgotten_run_again",
];

/// Why a component stopped short of executing (a trace line's `why`).
#[derive(Clone, Copy)]
enum Stop {
    /// A member known only from an adopted component: inquired.
    Unknown = 0,
    /// An unprocessed ancestor with pieces here outside the component.
    Blocker = 1,
    /// A member waits for another shard's output (§4).
    Output = 2,
}

/// What waits for every record issued so far to be durable.
enum AfterSync {
    /// An answer that promises (PreAccept-, Accept-, Prepare-OK).
    Send(NodeId, Msg),
    /// Announce executing `t` ([`super::gc`]): the others may forget it
    /// then, so its Executed record must not be lost.
    Executed(TxnId),
    /// Start recovering `t` with `ballot`, promised durably first.
    Recover(TxnId, Ballot),
}

/// A restarted replica catching up (see [`Msg::CatchUp`]).
struct CatchUp {
    /// When it restarted.
    since: Time,
    asked_at: Time,
    /// Some peer answered.
    answered: bool,
    /// Committed here or at a peer, not executed here yet.
    waiting: tessera_core::FastSet<TxnId>,
}

/// A component's start of [`JanusServer::blocker`]'s walk: every member
/// waiting in a large component walks from all the members' parents, again
/// at each wake-up; over three sites at zipf 0.9 building that start was
/// 65% of a run (`perf`). Kept while no member's parents change (they only
/// grow while the vertex is here; forgetting one clears every frontier).
struct Frontier {
    members: Vec<TxnId>,
    /// Each member's number of parents when the frontier was made.
    parents: Vec<usize>,
    /// The members' marks.
    marks: FastMap<TxnId, Mark>,
    /// The members' parents, each outside the component and only at its
    /// last place in the members' parent lists in order (the walk takes
    /// them from the end: an earlier repetition, or a member, would only
    /// be met again with no effect).
    roots: Vec<TxnId>,
}

impl Frontier {
    fn new(graph: &DepGraph, members: &[TxnId], parents: Vec<usize>) -> Frontier {
        let marks: FastMap<TxnId, Mark> = members
            .iter()
            .map(|&m| {
                let mark = Mark {
                    index: u32::MAX,
                    tainted: true,
                };
                (m, mark)
            })
            .collect();
        let mut all: Vec<TxnId> = Vec::new();
        for &m in members {
            if let Some(n) = graph.get(m) {
                all.extend(n.parents.iter().map(|(p, _)| *p));
            }
        }
        let mut seen: tessera_core::FastSet<TxnId> = tessera_core::fast_set();
        let mut roots: Vec<TxnId> = all
            .into_iter()
            .rev()
            .filter(|p| !marks.contains_key(p) && seen.insert(*p))
            .collect();
        roots.reverse();
        Frontier {
            members: members.to_vec(),
            parents,
            marks,
            roots,
        }
    }
}

/// The server role of [`super::Janus`].
pub struct JanusServer {
    cfg: JanusConfig,
    me: NodeId,
    shard: ShardId,
    topology: Arc<Topology>,
    store: Store,
    graph: DepGraph,
    tracker: Tracker,
    locals: FastMap<TxnId, Local>,
    /// Every transaction known committing here, as committed.
    committed: FastMap<TxnId, Arc<CommitInfo>>,
    wakeups: Wakeups,
    inquiries: FastMap<TxnId, Vec<NodeId>>,
    /// Ballots promised by Prepare for transactions never pre-accepted
    /// here, so that their late PreAccept from a lower ballot is refused
    /// once a recovery coordinator may have abandoned them (§3.3).
    promised: FastMap<TxnId, Ballot>,
    asking: FastMap<TxnId, Asking>,
    /// Transactions this replica is the recovery coordinator of.
    recoveries: FastMap<TxnId, Driver>,
    /// Other shards' piece outputs fetched for pieces here (§4), `None`
    /// for a piece that rolled back; those still awaited, and who asked
    /// this replica for the output of a piece it has not run yet.
    outputs: FastMap<PieceRef, Option<Value>>,
    fetching: FastMap<PieceRef, Asking>,
    output_waiters: FastMap<PieceRef, Vec<NodeId>>,
    /// Committed here since the last announcement, and in the one before.
    fresh: Vec<TxnId>,
    announced: Arc<[TxnId]>,
    announce_at: Time,
    /// When to tell lagging peers what they missed next.
    nudge_at: Time,
    executed: u64,
    /// Outputs fetched from other shards since the last report.
    fetched: u64,
    /// Recoveries started, and decided as abandon, since the last report.
    recovering: u64,
    /// [`Self::blocker`]'s start for a component, by its first member.
    frontiers: FastMap<TxnId, Frontier>,
    abandoned: u64,
    /// Graph garbage collection ([`super::gc`]).
    gc: Gc,
    /// Whether records are written ([`ServerEnv::durable`], and every
    /// procedure so far had a codec).
    durable: bool,
    /// Records issued, and durable, so far; the last record of the write
    /// in flight (0: none), and the records issued since, each
    /// length-prefixed ([`super::wal::records`]).
    issued: u64,
    synced: u64,
    flushing: u64,
    unflushed: bytes::BytesMut,
    after_sync: VecDeque<(u64, AfterSync)>,
    /// Set from a restart until caught up.
    catch_up: Option<CatchUp>,
    /// When this incarnation started, and the epoch its log restored
    /// ([`Self::sweep`]).
    epoch_from: (Time, u64),
    /// Records replayed at the last start, restarts caught up and the time
    /// they took (µs), since the last report.
    replayed: u64,
    /// Restarts from a checkpoint's image, since the last report.
    from_image: u64,
    /// Vertices dropped after the last replay as reached by nothing still
    /// to run here ([`DepGraph::drop_unreached`]), since the last report.
    unreached: u64,
    /// Records an image said to pass over were not in the log (their
    /// write was lost in the crash): this incarnation's first record ends
    /// the pass ([`super::image`]).
    lost_skip: bool,
    caught_up: u64,
    catch_up_us: u64,
    /// The last component listed in this replica's log ([`super::wal`]).
    components: Components,
    stats: DepStats,
    /// Late messages about forgotten transactions, by [`Late`], since the
    /// last report.
    late: [u64; 4],
    /// Per-transaction event lines on ([`trace_on`]), and the sender and
    /// kind of the message being handled (`u32::MAX`: a timer or a sync).
    trace: bool,
    heard: (u32, usize),
}

impl JanusServer {
    /// A replica, rebuilt from `env.recovered` after a crash: the records
    /// are applied in the order they were written ([`Self::restore`]).
    pub fn new(cfg: JanusConfig, env: ServerEnv) -> Self {
        let gc = Gc::new(cfg.forget_epochs);
        let mut s = JanusServer {
            cfg,
            me: env.me,
            shard: env.shard,
            topology: env.topology,
            store: env.store,
            graph: DepGraph::default(),
            tracker: Tracker::default(),
            locals: tessera_core::fast_map(),
            committed: tessera_core::fast_map(),
            wakeups: Wakeups::default(),
            inquiries: tessera_core::fast_map(),
            promised: tessera_core::fast_map(),
            asking: tessera_core::fast_map(),
            recoveries: tessera_core::fast_map(),
            outputs: tessera_core::fast_map(),
            fetching: tessera_core::fast_map(),
            output_waiters: tessera_core::fast_map(),
            fresh: Vec::new(),
            announced: Arc::from([]),
            announce_at: 0,
            nudge_at: 0,
            executed: 0,
            fetched: 0,
            recovering: 0,
            frontiers: FastMap::default(),
            abandoned: 0,
            gc,
            durable: env.durable,
            issued: 0,
            synced: 0,
            flushing: 0,
            unflushed: bytes::BytesMut::new(),
            after_sync: VecDeque::new(),
            catch_up: None,
            epoch_from: (0, 0),
            replayed: 0,
            from_image: 0,
            unreached: 0,
            lost_skip: false,
            caught_up: 0,
            catch_up_us: 0,
            components: Components::default(),
            stats: DepStats::new(),
            late: [0; 4],
            trace: trace_on(),
            heard: (u32::MAX, 0),
        };
        // Records issued before a checkpoint's image and written after it.
        let mut skip = 0;
        for write in &env.recovered {
            let me = s.me;
            let recs = super::wal::records(write).unwrap_or_else(|e| undecodable(me, e));
            for rec in recs {
                if image::is_image(rec) {
                    assert!(
                        s.replayed == 0,
                        "Janus server {:?}: a checkpoint's image after {} records of its log",
                        s.me,
                        s.replayed
                    );
                    let img = image::decode(rec, &env.codec).unwrap_or_else(|e| undecodable(me, e));
                    skip = img.skip;
                    s.restore_image(img);
                    s.from_image += 1;
                } else if skip > 0 && !image::is_restart(rec) {
                    skip -= 1;
                    continue;
                } else {
                    if image::is_restart(rec) {
                        skip = 0;
                    }
                    let rec =
                        Record::decode(rec, &env.codec).unwrap_or_else(|e| undecodable(me, e));
                    s.restore(rec);
                }
                s.replayed += 1;
            }
        }
        s.lost_skip = skip > 0;
        // A vertex of this shard's stays whatever reaches it: it tells
        // this replica that it has not executed that transaction
        // ([`Self::holds_none`]).
        let (locals, committed, shard) = (&s.locals, &s.committed, s.shard);
        let held = |t, shards: &[ShardId]| {
            locals.contains_key(&t) || committed.contains_key(&t) || shards.contains(&shard)
        };
        s.unreached = s.graph.drop_unreached(held) as u64;
        // This incarnation lists its first component again.
        s.components = Components::default();
        if !env.recovered.is_empty() {
            s.gc.forgotten = 0;
            s.catch_up = Some(CatchUp {
                since: 0,
                asked_at: 0,
                answered: false,
                waiting: tessera_core::fast_set(),
            });
        }
        s
    }

    /// The keys `proc`'s pieces at this shard read and write, as declared:
    /// known before execution (§4), placeholders standing for a dynamic
    /// piece's real keys ([`super::admit`]).
    ///
    /// Items are per column where the pieces declare columns and
    /// [`JanusConfig::per_column`] is on ([`Item::of`]).
    fn keys(&self, proc: &Txn) -> (Vec<Item>, Vec<Item>) {
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let per_column = self.cfg.per_column;
        for p in proc.pieces().iter().filter(|p| p.shard == self.shard) {
            p.reads
                .iter()
                .for_each(|a| Item::of(a, per_column, &mut reads));
            p.writes
                .iter()
                .for_each(|a| Item::of(a, per_column, &mut writes));
        }
        (reads, writes)
    }

    /// Track conflicts per column or per row (hand-stepped tests).
    #[cfg(test)]
    pub(crate) fn set_per_column(&mut self, on: bool) {
        self.cfg.per_column = on;
    }

    /// What the store's versions are of: columns when conflicts are
    /// tracked per column, so that the history shows the order the
    /// replicas kept (see [`super::tracker`]).
    fn granularity(&self) -> Granularity {
        match self.cfg.per_column {
            true => Granularity::Column,
            false => Granularity::Row,
        }
    }

    fn deps_of(&self, ids: Vec<TxnId>) -> Vec<Dep> {
        let mut deps: Vec<Dep> = ids
            .into_iter()
            .map(|t| Dep {
                txn: t,
                shards: self.shards_of(t),
            })
            .collect();
        deps.sort_unstable();
        deps.dedup_by(|a, b| a.txn == b.txn);
        deps
    }

    /// Nothing of `t` is held here (no PreAccept, Commit or vertex): if
    /// `t` involves this shard and is below its done floor, this replica
    /// executed it and forgot it ([`super::gc`], *the done floor*).
    fn holds_none(&self, t: TxnId) -> bool {
        !self.locals.contains_key(&t)
            && !self.committed.contains_key(&t)
            && self.graph.get(t).is_none()
    }

    /// A message about `t` that came to this replica as one of `t`'s
    /// shards' (an announcement, a nudge, a catch-up list, a fetch)
    /// finds it forgotten here.
    fn forgotten(&self, t: TxnId) -> bool {
        self.gc.forgot(t, self.holds_none(t))
    }

    /// `from` announced executing `t` (true the first time), unless `t` is
    /// forgotten here: a late announcement is not recorded again.
    fn heard(&mut self, t: TxnId, from: NodeId) -> bool {
        !self.forgotten(t) && self.gc.heard(t, from)
    }

    /// The garbage-collection epoch this replica has reached.
    #[cfg(test)]
    pub(super) fn epoch(&self) -> u64 {
        self.gc.epoch
    }

    fn shards_of(&self, t: TxnId) -> Arc<[ShardId]> {
        if let Some(l) = self.locals.get(&t) {
            return participants(l.proc.as_ref()).into();
        }
        self.graph
            .get(t)
            .map_or_else(|| Arc::from([]), |n| n.shards.clone())
    }

    // ---- PreAccept (Algorithm 2) ----

    fn on_pre_accept(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        ballot: Ballot,
        proc: Txn,
        (floor, done): (Option<TxnId>, Option<TxnId>),
    ) {
        if let Some(f) = floor {
            self.gc.raise_floor(f);
        }
        if let Some(d) = done {
            self.gc.raise_done(d);
        }
        if self.answer_forgotten(ctx, from, txn, true) {
            return;
        }
        if let Some(info) = self.committed.get(&txn) {
            // Late, or a suspected coordinator's retransmission: Tx-Done.
            ctx.send(from, Msg::InquireOk(info.clone()));
            return;
        }
        if let Some(l) = self.locals.get_mut(&txn) {
            if l.ballot > ballot {
                ctx.send(
                    from,
                    Msg::PreAcceptNotOk {
                        txn,
                        ballot: l.ballot,
                    },
                );
                return;
            }
            let raised = ballot > l.ballot;
            l.ballot = ballot;
            let deps = l.deps.clone();
            if raised {
                self.log(ctx, Record::Promised { txn, ballot });
            }
            self.reply(ctx, from, Msg::PreAcceptOk { txn, ballot, deps });
            return;
        }
        if let Some(&promised) = self.promised.get(&txn) {
            if promised > ballot {
                ctx.send(
                    from,
                    Msg::PreAcceptNotOk {
                        txn,
                        ballot: promised,
                    },
                );
                return;
            }
        }
        if self.stale(from, txn) {
            return;
        }
        if let Err(e) = super::admit(proc.as_ref()) {
            tracing::error!(?txn, "refused: {e}");
            return;
        }
        let deps = self.register(ctx, txn, ballot, proc);
        self.reply(ctx, from, Msg::PreAcceptOk { txn, ballot, deps });
    }

    /// Algorithm 2, ll. 26–31: record `txn`'s conflicts here and keep it,
    /// pre-accepted at `ballot`; its dependencies here.
    fn register(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, ballot: Ballot, proc: Txn) -> Vec<Dep> {
        let (reads, writes) = self.keys(&proc);
        let mut ids = Vec::new();
        self.tracker.pre_accept(txn, &reads, &writes, &mut ids);
        let deps = self.deps_of(ids);
        if self.stats.on() {
            self.stats.pre_accept_ok.push(deps.len() as u32);
        }
        self.promised.remove(&txn);
        self.log(
            ctx,
            Record::PreAccepted {
                txn,
                ballot,
                deps: deps.clone(),
                proc: proc.clone(),
            },
        );
        let recover_at = self.recover_at(ctx, self.cfg.recover_after);
        self.locals.insert(
            txn,
            Local::new(proc, ballot, deps.clone(), ctx.now(), recover_at),
        );
        deps
    }

    /// `after` from now, plus up to half of it at random, so that the
    /// replicas of a shard do not all start recovering one transaction at
    /// once (duelling recovery coordinators only delay each other).
    fn recover_at(&self, ctx: &mut Ctx<Msg>, after: Time) -> Time {
        use rand::Rng;
        let jitter = ctx.rng().random_range(0..=after / 2);
        ctx.now() + after + jitter
    }

    // ---- Accept (Algorithm 3) ----

    #[allow(clippy::too_many_arguments)]
    fn on_accept(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        ballot: Ballot,
        deps: &[Dep],
        abandon: bool,
        proc: Option<Txn>,
    ) {
        if self.stats.on() {
            self.stats.accept.push(deps.len() as u32);
        }
        if self.answer_forgotten(ctx, from, txn, true) {
            return;
        }
        if let Some(info) = self.committed.get(&txn) {
            ctx.send(from, Msg::InquireOk(info.clone()));
            return;
        }
        if !self.locals.contains_key(&txn) {
            let promised = self.promised.get(&txn).copied().unwrap_or(0);
            if promised > ballot {
                ctx.send(
                    from,
                    Msg::AcceptNotOk {
                        txn,
                        ballot: promised,
                    },
                );
                return;
            }
            // Never pre-accepted here (lost, or down meanwhile): accept it
            // with the procedure the Accept carries to a replica that did
            // not answer PreAccept ([`Msg::Accept`]); the majority may need
            // this replica.
            let Some(proc) = proc else { return };
            if self.stale(from, txn) {
                return;
            }
            self.register(ctx, txn, ballot, proc);
        }
        let l = self.locals.get_mut(&txn).expect("registered");
        if l.ballot > ballot {
            ctx.send(
                from,
                Msg::AcceptNotOk {
                    txn,
                    ballot: l.ballot,
                },
            );
            return;
        }
        l.ballot = ballot;
        l.accepted = Some(ballot);
        l.deps = deps.to_vec();
        l.abandon = abandon;
        let deps = l.deps.clone();
        self.log(
            ctx,
            Record::Accepted {
                txn,
                ballot,
                deps,
                abandon,
            },
        );
        self.reply(ctx, from, Msg::AcceptOk { txn, ballot });
    }

    // ---- Prepare (§3.3, the replica's side of recovery) ----

    /// Promises `ballot` unless a higher one was seen, and reports what is
    /// held of `txn`; a committed transaction is answered with its Commit,
    /// which the recovery coordinator then only has to spread.
    fn on_prepare(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, ballot: Ballot) {
        if self.answer_forgotten(ctx, from, txn, true) {
            return;
        }
        if let Some(info) = self.committed.get(&txn) {
            ctx.send(from, Msg::InquireOk(info.clone()));
            return;
        }
        let seen = match self.locals.get(&txn) {
            Some(l) => l.ballot,
            None => self.promised.get(&txn).copied().unwrap_or(0),
        };
        // Algorithm 7, l. 87: only a strictly higher ballot refuses, so a
        // recovery coordinator's retransmitted Prepare is promised again.
        if seen > ballot {
            ctx.send(from, Msg::PrepareNotOk { txn, ballot: seen });
            return;
        }
        let prepared = match self.locals.get_mut(&txn) {
            Some(l) => {
                l.ballot = ballot;
                Some(Prepared {
                    accepted: l.accepted,
                    deps: l.deps.clone(),
                    abandon: l.abandon,
                })
            }
            None => {
                self.promised.insert(txn, ballot);
                None
            }
        };
        if seen < ballot {
            self.log(ctx, Record::Promised { txn, ballot });
        }
        self.reply(
            ctx,
            from,
            Msg::PrepareOk {
                txn,
                ballot,
                prepared,
            },
        );
    }

    // ---- Commit (Algorithm 4) ----

    /// Put a committed transaction into the graph: its dependencies replace
    /// whatever this replica had (l. 39), its status becomes committing.
    fn apply_commit(&mut self, ctx: &mut Ctx<Msg>, info: Arc<CommitInfo>) {
        let t = info.txn;
        let here = participants(info.proc.as_ref()).contains(&self.shard);
        if self.committed.contains_key(&t) || self.gc.forgot(t, here && self.holds_none(t)) {
            return;
        }
        // A PreAccepted record carries the procedure already.
        let logged = self.locals.contains_key(&t);
        let mine = self.graft(&info, ctx.now());
        if self.trace {
            tracing::debug!(target: TRACE, me = self.me.0, at = ctx.now(), txn = t.0, mine, from = self.heard.0, kind = self.heard.1, "K");
        }
        if mine {
            let rec = Record::Committed {
                txn: t,
                deps: info.deps.clone(),
                abandon: info.abandon,
                proc: (!logged).then(|| info.proc.clone()),
            };
            self.log(ctx, rec);
        }
        self.asking.remove(&t);
        if let Some(d) = self.recoveries.get_mut(&t) {
            d.learned(ctx, info, self.cfg.retransmit);
        }
        self.wakeups.wake(t);
        if self.stats.on() {
            self.count_commit_known(ctx.now(), t, mine);
            let info = self.committed[&t].clone();
            self.count_two_cycles(&info);
        }
        if let Some(askers) = self.inquiries.remove(&t) {
            let info = self.committed[&t].clone();
            for a in askers {
                ctx.send(a, Msg::InquireOk(info.clone()));
            }
        }
        if mine {
            self.fresh.push(t);
            self.wakeups.push(t);
        }
        self.drain(ctx);
    }

    /// Algorithm 4, l. 39, in the graph: a committed transaction's
    /// dependencies replace whatever this replica had, its status becomes
    /// committing. True if it has pieces here. Shared by live commits and
    /// the replay of Committed records.
    fn graft(&mut self, info: &Arc<CommitInfo>, now: Time) -> bool {
        let t = info.txn;
        self.promised.remove(&t);
        let epoch = self.gc.epoch;
        let shards: Arc<[ShardId]> = participants(info.proc.as_ref()).into();
        let mine = shards.contains(&self.shard);
        let mut rose = Vec::new();
        // A forgotten dependency stays out of the graph: it is DECIDED in a
        // component done here, a cut-off (see [`super::gc`]), also once
        // its tombstone is gone.
        let late = info.deps.iter().filter(|d| self.gc.only_recorded(d.txn));
        self.late[Late::Dependency as usize] += late.count() as u64;
        let shard = self.shard;
        let live: Vec<&Dep> = info
            .deps
            .iter()
            .filter(|d| {
                !self
                    .gc
                    .forgot(d.txn, d.shards.contains(&shard) && self.holds_none(d.txn))
            })
            .collect();
        for d in live {
            let v = Vertex {
                txn: d.txn,
                status: Status::Started,
                shards: d.shards.clone(),
                parents: Vec::new(),
                scc: None,
            };
            self.graph.merge(&v, epoch, &mut rose);
        }
        if mine {
            self.graph.start_local(t, shards.clone(), epoch);
            let l = self
                .locals
                .entry(t)
                .or_insert_with(|| Local::new(info.proc.clone(), 0, Vec::new(), now, Time::MAX));
            l.deps = info.deps.clone();
            l.abandon = info.abandon;
        } else {
            let v = Vertex {
                txn: t,
                status: Status::Started,
                shards,
                parents: Vec::new(),
                scc: None,
            };
            self.graph.merge(&v, epoch, &mut rose);
        }
        let parents: Vec<(TxnId, Edge)> = info.deps.iter().map(|d| (d.txn, Edge::D)).collect();
        self.graph.add_parents(t, &parents);
        self.graph.raise(t, Status::Committing, epoch);
        self.committed.insert(t, info.clone());
        mine
    }

    fn on_commit(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, info: Arc<CommitInfo>) {
        let t = info.txn;
        if self.stats.on() {
            self.stats.commit.push(info.deps.len() as u32);
        }
        let involves = info.proc.pieces().iter().any(|p| p.shard == self.shard);
        if !involves {
            tracing::warn!(txn = ?t, "commit for a transaction without pieces here");
            return;
        }
        if self.answer_forgotten(ctx, from, t, true) {
            return;
        }
        if let Some(l) = self.locals.get_mut(&t) {
            if let Some(results) = &l.results {
                ctx.send(
                    from,
                    Msg::CommitOk {
                        txn: t,
                        abandon: l.abandon,
                        results: results.clone(),
                    },
                );
                return;
            }
        } else if !self.committed.contains_key(&t) && self.stale(from, t) {
            return;
        }
        self.apply_commit(ctx, info);
        if let Some(l) = self.locals.get_mut(&t) {
            match &l.results {
                Some(results) => ctx.send(
                    from,
                    Msg::CommitOk {
                        txn: t,
                        abandon: l.abandon,
                        results: results.clone(),
                    },
                ),
                None if !l.commit_waiters.contains(&from) => l.commit_waiters.push(from),
                None => {}
            }
        }
    }

    fn drain(&mut self, ctx: &mut Ctx<Msg>) {
        while let Some(t) = self.wakeups.pop() {
            self.progress(ctx, t);
        }
    }

    /// Wait & Inquire, then Execute (Algorithms 4 and 5) as far as `t` can
    /// go now.
    fn progress(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let mut rose = Vec::new();
        match self.graph.status(t) {
            None | Some(Status::Started) => {}
            Some(Status::Committing) => match self.graph.settle(t, self.gc.epoch, &mut rose) {
                Decision::Blocked(ancestors) => {
                    if self.stats.on() {
                        self.count_wait_asks(&ancestors);
                    }
                    for a in ancestors {
                        if !self.cfg.wait_one_blocker {
                            self.wakeups.wait(a, t);
                        }
                        // An ancestor with pieces here will normally be
                        // committed here by its coordinator: ask only if it
                        // does not come (the sweep sends it).
                        let here = self.locals.contains_key(&a);
                        self.ask(ctx, a, !here);
                    }
                    if self.cfg.wait_one_blocker {
                        self.wait_for_a_blocker(t);
                    }
                }
                Decision::Scc(_) => {
                    if self.trace {
                        tracing::debug!(target: TRACE, me = self.me.0, at = ctx.now(), txn = t.0, members = self.graph.members(t).len(), "D");
                    }
                    // Local ancestors decided with `t` run when their own
                    // turn comes; make sure it comes.
                    for v in rose {
                        if v != t && self.graph.get(v).is_some_and(|n| n.local && !n.finished) {
                            self.wakeups.push(v);
                        }
                    }
                    self.try_execute(ctx, t);
                }
            },
            Some(Status::Decided) => self.try_execute(ctx, t),
        }
    }

    /// Debug counts ([`DepStats`]) of a blocked settle and the Inquires it
    /// starts, by why.
    fn count_wait_asks(&mut self, ancestors: &[TxnId]) {
        self.stats.msgs.blocked += 1;
        self.stats.msgs.blocked_ancestors += ancestors.len() as u64;
        for &a in ancestors {
            if self.asking.contains_key(&a) {
                continue;
            }
            if self.locals.contains_key(&a) {
                self.stats.msgs.ask_wait_later += 1;
            } else {
                self.stats.msgs.ask_wait_now += 1;
                if self.shards_of(a).contains(&self.shard) {
                    self.stats.msgs.ask_wait_now_involving_me += 1;
                }
            }
        }
    }

    /// With [`super::JanusConfig::wait_one_blocker`]: Algorithm 4, l. 41
    /// ("wait until all ancestors are committing"), waiting for one STARTED
    /// ancestor at a time: `t` cannot be decided
    /// before every one of them rises, and the settle at that one's rise
    /// finds those still STARTED ([`DepGraph::settle`] resumes behind all
    /// that rose meanwhile), so waiting for each is not needed. It was
    /// waiters × blockers pairs: 33.5M over the nine replicas at 0.4 s of
    /// the three-site zipf 0.9 point (and as many in the graph's lists of
    /// waiters, ~2.4 GB together). A STARTED vertex is never collected
    /// ([`Self::collect`] drops only DECIDED ones), and every rise wakes
    /// its waiters, so the one waited for does come.
    fn wait_for_a_blocker(&mut self, t: TxnId) {
        let mut first = None;
        for b in self.graph.blockers(t) {
            if self.wakeups.waits(b, t) {
                return;
            }
            first.get_or_insert(b);
        }
        if let Some(b) = first {
            self.wakeups.wait(b, t);
        }
    }

    /// Algorithm 5: run the component once every ancestor outside it with
    /// pieces here is processed; members in the deterministic order.
    fn try_execute(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let members = self.graph.members(t);
        // A member known only from an adopted component may have pieces
        // here that come first: learn it (see [`Self::blocker`]).
        let unknown = members.iter().copied().find(|m| {
            !self.committed.contains_key(m) && self.graph.get(*m).is_some_and(|n| !n.finished)
        });
        if let Some(m) = unknown {
            self.trace_wait(ctx, t, Stop::Unknown, m);
            if self.stats.on() && !self.asking.contains_key(&m) {
                self.stats.msgs.ask_execute += 1;
            }
            self.wakeups.wait(m, t);
            self.ask(ctx, m, true);
            return;
        }
        if self.cfg.prefetch_outputs {
            for &m in members.iter() {
                self.prefetch(ctx, m);
            }
        }
        if let Some(p) = self.blocker(&members) {
            self.trace_wait(ctx, t, Stop::Blocker, p);
            self.wakeups.wait(p, t);
            if !self.committed.contains_key(&p) {
                if self.stats.on() && !self.asking.contains_key(&p) {
                    self.stats.msgs.ask_execute += 1;
                }
                self.ask(ctx, p, true);
            }
            return;
        }
        for &m in members.iter() {
            if self.graph.get(m).is_some_and(|n| n.local && !n.finished) && !self.execute(ctx, m) {
                // Waits for another shard's output (§4): the members
                // after it wait too, so the order stays the same.
                self.trace_wait(ctx, t, Stop::Output, m);
                return;
            }
        }
    }

    /// A trace line ([`trace_on`]): the component of `t` stopped short of
    /// executing, waiting for `on` (why: [`Stop`]).
    fn trace_wait(&self, ctx: &Ctx<Msg>, t: TxnId, why: Stop, on: TxnId) {
        if self.trace {
            tracing::debug!(target: TRACE, me = self.me.0, at = ctx.now(), txn = t.0, why = why as u8, on = on.0, "W");
        }
    }

    /// An unprocessed ancestor with pieces here outside `members`. Unlike
    /// Rococo's one-hop graph, the committed graph may order two local
    /// transactions only through a path over transactions that do not
    /// involve this shard, so the walk goes through those. A non-local
    /// vertex found with nothing unprocessed behind it is marked finished
    /// (its ancestors are fixed), which keeps later walks short.
    ///
    /// What the walk has met is hashed: over three sites with 10,800 clients a component
    /// and the walk behind it reach thousands of vertices, and a list's
    /// linear look-up made each walk quadratic (98% of a janus-micro-wan
    /// run's time at zipf 0.7, `perf`).
    ///
    /// A walk that stops at a blocker still marks finished the vertices it
    /// has proved clear: those whose strongly connected component (Tarjan,
    /// on the walk's depth-first order) it left without meeting a blocker
    /// or a member of `members`. Without that, every transaction waiting
    /// behind the same unexecuted one walked the same non-local history
    /// again at each wake-up (67% of a janus-micro-wan zipf 0.7 run,
    /// `perf`). The marking changes no answer: what is behind such a vertex
    /// is fixed (committed, not local), so a later walk would pass it and
    /// find nothing, and only [`Self::collect`] reads `finished` of a
    /// committed non-local vertex, after marking every such vertex with
    /// nothing unprocessed behind it itself. The order of the walk is the
    /// original stack's (last parent first), so the blocker found is the
    /// same.
    fn blocker(&mut self, members: &[TxnId]) -> Option<TxnId> {
        /// A vertex being walked: its parents still to visit (taken from
        /// the end), its Tarjan index and low link, whether it reaches a
        /// member of `members`.
        struct Frame {
            todo: Vec<TxnId>,
            index: u32,
            low: u32,
            tainted: bool,
        }
        const ROOT: u32 = u32::MAX;
        // Members and vertices reaching one: not proved clear.
        let (mut marks, roots) = if members.len() > 1 {
            let f = self.frontier(members);
            (f.marks.clone(), f.roots.clone())
        } else {
            let f = Frontier::new(&self.graph, members, Vec::new());
            (f.marks, f.roots)
        };
        let mut tarjan = Tarjan::default();
        let mut through: Vec<TxnId> = Vec::new();
        let mut clear: Vec<TxnId> = Vec::new();
        let mut frames = vec![Frame {
            todo: roots,
            index: ROOT,
            low: ROOT,
            tainted: false,
        }];
        let found = loop {
            let top = frames.last_mut().expect("the root frame is last to go");
            let Some(v) = top.todo.pop() else {
                let done = frames.pop().expect("non-empty");
                if done.index == ROOT {
                    break None;
                }
                if let Some(parent) = frames.last_mut() {
                    parent.low = parent.low.min(done.low);
                    parent.tainted |= done.tainted;
                }
                if done.low == done.index {
                    tarjan.close(done.index, done.tainted, &mut marks, &mut clear);
                }
                continue;
            };
            let entry = match marks.entry(v) {
                std::collections::hash_map::Entry::Occupied(e) => {
                    tarjan.met(*e.get(), &mut top.low, &mut top.tainted);
                    continue;
                }
                std::collections::hash_map::Entry::Vacant(e) => e,
            };
            let unvisited = Mark {
                index: NONE,
                tainted: false,
            };
            let Some(n) = self.graph.get(v) else {
                entry.insert(unvisited);
                continue;
            };
            if n.finished {
                entry.insert(unvisited);
                continue;
            }
            // A vertex DECIDED here only as a member of a component adopted
            // from another server (a Forgotten answer, or this replica's
            // own log after a restart) was never committed here: it may
            // have pieces here. Ask before passing it.
            if n.local || n.status == Status::Started || !self.committed.contains_key(&v) {
                break Some(v);
            }
            through.push(v);
            self.graph.add_steps(1 + n.parents.len());
            let i = entry.insert(tarjan.push(v)).index;
            frames.push(Frame {
                todo: n.parents.iter().map(|(p, _)| *p).collect(),
                index: i,
                low: i,
                tainted: false,
            });
        };
        let finished = if found.is_none() { through } else { clear };
        for v in finished {
            if let Some(n) = self.graph.get_mut(v) {
                n.finished = true;
            }
        }
        found
    }

    /// [`Self::blocker`]'s start for `members` (a component of two or
    /// more), made again when a member's parents changed.
    fn frontier(&mut self, members: &[TxnId]) -> &Frontier {
        let graph = &self.graph;
        let parents: Vec<usize> = members
            .iter()
            .map(|&m| graph.get(m).map_or(0, |n| n.parents.len()))
            .collect();
        let key = members.first().copied().unwrap_or(TxnId(0));
        let fresh = self
            .frontiers
            .get(&key)
            .is_some_and(|f| f.parents == parents && f.members == members);
        if !fresh {
            let f = Frontier::new(graph, members, parents);
            self.frontiers.insert(key, f);
        }
        &self.frontiers[&key]
    }

    /// Algorithm 4, ll. 53–57: execute `t`'s pieces here unless abandoned,
    /// mark it processed, reply to who asked. False when a piece waits for
    /// another shard's output (§4): it has been asked for, and `t` is
    /// woken when it comes.
    fn execute(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) -> bool {
        if self.gc.forgot_mine(t) {
            tracing::error!(me = ?self.me, txn = ?t, "a forgotten transaction runs again");
            self.late[Late::RunAgain as usize] += 1;
        }
        let proc = self.locals[&t].proc.clone();
        let abandon = self.locals[&t].abandon;
        let (results, written) = if abandon {
            (Vec::new(), Vec::new())
        } else {
            let mut run = std::mem::take(&mut self.locals.get_mut(&t).expect("local").run);
            let done = self.run_pieces(ctx, t, &proc, &mut run);
            self.locals.get_mut(&t).expect("local").run = run;
            self.answer_fetches(ctx, t);
            if !done {
                return false;
            }
            self.executed += 1;
            let run = std::mem::take(&mut self.locals.get_mut(&t).expect("local").run);
            (run.replies, run.written)
        };
        if self.trace {
            tracing::debug!(target: TRACE, me = self.me.0, at = ctx.now(), txn = t.0, "E");
        }
        if self.stats.on() {
            if let Some(at) = self.stats.committed_at.remove(&t) {
                let us = micros(ctx.now().saturating_sub(at));
                self.stats.msgs.commit_to_exec_us.push(us);
            }
        }
        let (reads, writes) = self.keys(&proc);
        self.tracker.finished(t, &reads, &writes, !abandon);
        for (j, p) in proc.pieces().iter().enumerate() {
            if p.shard != self.shard {
                self.outputs.remove(&(t, j as u16));
            }
        }
        let written = written
            .into_iter()
            .filter_map(|k| {
                let r = self.store.get(k)?;
                Some((
                    k,
                    self.store.columns_written_by(k, t.version()),
                    r.value.clone(),
                ))
            })
            .collect();
        let scc = Some(self.graph.members(t)).filter(|m| m.len() > 1);
        if self.stats.on() {
            self.stats
                .scc
                .push(scc.as_ref().map_or(1, |m| m.len()) as u32);
        }
        let rec = Record::Executed {
            txn: t,
            scc: self.components.write(scc),
            written,
            results: results.clone(),
        };
        self.log(ctx, rec);
        let logged = self.issued;
        let l = self.locals.get_mut(&t).expect("local");
        l.logged = logged;
        for w in l.commit_waiters.drain(..) {
            ctx.send(
                w,
                Msg::CommitOk {
                    txn: t,
                    abandon,
                    results: results.clone(),
                },
            );
        }
        l.results = Some(results);
        self.answer_fetches(ctx, t);
        if let Some(n) = self.graph.get_mut(t) {
            n.finished = true;
            n.epoch = self.gc.epoch;
        }
        self.after_sync(ctx, AfterSync::Executed(t));
        self.caught(ctx.now(), Some(t));
        tracing::trace!(me = ?self.me, txn = ?t, "executed");
        self.wakeups.wake(t);
        true
    }

    /// Run `t`'s pieces here after those in `run`, in piece order, each
    /// once its inputs are known (§4); false at the first that waits for
    /// another shard's output. A piece an input of which rolled back (a
    /// user abort) is skipped and reports a user abort itself, so that the
    /// pieces it feeds and the client learn it.
    fn run_pieces(&mut self, ctx: &mut Ctx<Msg>, t: TxnId, proc: &Txn, run: &mut Run) -> bool {
        let pieces = proc.pieces();
        let todo: Vec<usize> = (0..pieces.len())
            .filter(|&i| pieces[i].shard == self.shard)
            .skip(run.replies.len())
            .collect();
        for i in todo {
            let mut inputs = Vec::with_capacity(pieces[i].inputs.len());
            let mut rolled_back = false;
            for &j in &pieces[i].inputs {
                let out = if pieces[j as usize].shard == self.shard {
                    run.replies
                        .iter()
                        .find(|r| r.piece == j)
                        .and_then(|r| (!r.user_abort).then(|| r.output.clone()))
                } else if let Some(out) = self.outputs.get(&(t, j)) {
                    out.clone()
                } else {
                    self.fetch(ctx, t, j, pieces[j as usize].shard);
                    return false;
                };
                match out {
                    Some(v) => inputs.push(v),
                    None => rolled_back = true,
                }
            }
            let reply = if rolled_back {
                PieceReply {
                    piece: i as u16,
                    reads: Vec::new(),
                    writes: Vec::new(),
                    output: Value::new(),
                    user_abort: true,
                }
            } else {
                let spec = proc.resolve(i, &inputs);
                let granularity = self.granularity();
                run_piece(
                    &mut self.store,
                    t,
                    &mut run.written,
                    proc,
                    &spec,
                    i as u16,
                    &inputs,
                    granularity,
                )
            };
            run.replies.push(reply);
        }
        true
    }

    // ---- Fetching other shards' outputs (§4) ----

    /// Ask now for every output of another shard that `t`'s pieces here
    /// will need, once ([`super::JanusConfig::prefetch_outputs`]): `t` is
    /// a member of a decided component, so its turn will come.
    fn prefetch(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        if !self.graph.get(t).is_some_and(|n| n.local && !n.finished) {
            return;
        }
        let Some(l) = self.locals.get_mut(&t) else {
            return;
        };
        if l.abandon || std::mem::replace(&mut l.run.prefetched, true) {
            return;
        }
        let pieces = l.proc.pieces();
        let needed: Vec<(u16, ShardId)> = pieces
            .iter()
            .filter(|p| p.shard == self.shard)
            .flat_map(|p| p.inputs.iter().map(|&j| (j, pieces[j as usize].shard)))
            .filter(|&(j, shard)| shard != self.shard && !self.outputs.contains_key(&(t, j)))
            .collect();
        for (j, shard) in needed {
            self.fetch(ctx, t, j, shard);
        }
    }

    /// Ask a replica of `shard` for the output of `t`'s piece `piece`,
    /// unless already asked; the sweep asks the next replica if no answer
    /// comes.
    fn fetch(&mut self, ctx: &mut Ctx<Msg>, t: TxnId, piece: u16, shard: ShardId) {
        if self.fetching.contains_key(&(t, piece)) {
            return;
        }
        if self.trace {
            tracing::debug!(target: TRACE, me = self.me.0, at = ctx.now(), txn = t.0, piece, "F");
        }
        ctx.send(
            self.counterpart(shard, 0),
            Msg::FetchOutput { txn: t, piece },
        );
        self.fetching.insert(
            (t, piece),
            Asking {
                sent_at: ctx.now(),
                tries: 0,
                sent: true,
                via: None,
            },
        );
    }

    /// The `tries`-th replica of `shard` to ask for an output or a first
    /// Inquire: starting with the one at this replica's place in its own
    /// group (the same site when replicas are spread over sites: the
    /// paper's "nearest server", §3.1), then the others in turn.
    fn counterpart(&self, shard: ShardId, tries: u32) -> NodeId {
        let mine = &self.topology.shards[self.shard.0 as usize].replicas;
        let at = mine.iter().position(|n| *n == self.me).unwrap_or(0);
        let theirs = &self.topology.shards[shard.0 as usize].replicas;
        theirs[(at + tries as usize) % theirs.len()]
    }

    /// The output of `t`'s piece `piece` here, once it ran: `Some(None)`
    /// if it rolled back or `t` was abandoned.
    fn output_of(&self, t: TxnId, piece: u16) -> Option<Option<Value>> {
        let l = self.locals.get(&t)?;
        let replies = l.results.as_ref().unwrap_or(&l.run.replies);
        match replies.iter().find(|r| r.piece == piece) {
            Some(r) => Some((!r.user_abort).then(|| r.output.clone())),
            None => l.results.is_some().then_some(None),
        }
    }

    fn on_fetch_output(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, piece: u16) {
        if self.forgotten(txn) {
            return; // every replica executed it: a late duplicate
        }
        match self.output_of(txn, piece) {
            Some(output) => ctx.send(from, Msg::Output { txn, piece, output }),
            None => {
                let waiters = self.output_waiters.entry((txn, piece)).or_default();
                if !waiters.contains(&from) {
                    waiters.push(from);
                }
            }
        }
    }

    /// Send the outputs of `t`'s pieces that ran here to who asked.
    fn answer_fetches(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        if self.output_waiters.is_empty() {
            return;
        }
        let n = self.locals[&t].proc.pieces().len() as u16;
        for piece in 0..n {
            let Some(output) = self.output_of(t, piece) else {
                continue;
            };
            for w in self.output_waiters.remove(&(t, piece)).unwrap_or_default() {
                ctx.send(
                    w,
                    Msg::Output {
                        txn: t,
                        piece,
                        output: output.clone(),
                    },
                );
            }
        }
    }

    fn on_output(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, piece: u16, output: Option<Value>) {
        if self.fetching.remove(&(txn, piece)).is_none() {
            return; // a duplicate, or for a transaction executed already
        }
        self.fetched += 1;
        if self.trace {
            tracing::debug!(target: TRACE, me = self.me.0, at = ctx.now(), txn = txn.0, piece, "O");
        }
        self.outputs.insert((txn, piece), output);
        self.wakeups.push(txn);
        self.drain(ctx);
    }

    // ---- Inquire ----

    /// Ask a server that `a` involves for it (Algorithm 4, l. 45); `now`:
    /// send at once, else let the sweep send it after a retransmit period.
    fn ask(&mut self, ctx: &mut Ctx<Msg>, a: TxnId, now: bool) {
        if self.asking.contains_key(&a) {
            return;
        }
        if now {
            for to in self.inquirees(a, false, None) {
                self.inquire(ctx, to, a, Sent::First);
            }
        }
        self.asking.insert(
            a,
            Asking {
                sent_at: ctx.now(),
                tries: 0,
                sent: now,
                via: None,
            },
        );
    }

    /// Whom to ask about `a`: the replicas of its shards other than this
    /// one — the first time, the one of its first shard at this replica's
    /// place ([`Self::counterpart`]), every one of them on a retry. Asking
    /// the first replica of the shard instead, as this did until
    /// 2026-11-29, sent every server's Inquires about a shard's
    /// transactions to that shard's first replica: in one-site TPC-C at
    /// 100 clients per partition the six first replicas handled 2.8–3.5x
    /// the events of the others (Inquire and InquireOk were 31 of the 46
    /// server events per transaction) and were the servers that saturated
    /// (issue 6, `docs/results/janus.md`, *2026-11-29 morning*). When its shards are not known here (a member of a component
    /// adopted from a `Forgotten` answer), `via`, the replica that named
    /// it, the first time, and every server on a retry: `via` may know it
    /// only as a member too, or have lost what it learnt by Inquire in a
    /// restart (crash seed 629: a restarted replica asked only `via`, of
    /// another shard, until the end of the run, and lagged behind).
    /// Asking one replica per try, in turn, left a restarted replica
    /// without the ancestor it waited for until the end of a run (crash
    /// seed 187): its first Inquire was lost, the next replica asked was
    /// down, the next cut off, and the backoff of up to eight retransmit
    /// periods put the following tries, lost again, past the cool-down.
    /// Replicas answer a duplicate Inquire alike, and the asker ignores a
    /// second answer.
    fn inquirees(&self, a: TxnId, retry: bool, via: Option<NodeId>) -> Vec<NodeId> {
        let shards = self.shards_of(a);
        let groups: Vec<&tessera_core::topology::ReplicaGroup> = if shards.is_empty() && retry {
            self.topology.shards.iter().collect()
        } else {
            shards
                .iter()
                .map(|s| &self.topology.shards[s.0 as usize])
                .collect()
        };
        if !retry {
            if let Some(&first) = shards.first() {
                let to = self.counterpart(first, 0);
                if to != self.me {
                    return vec![to];
                }
            }
        }
        let mut all: Vec<NodeId> = groups
            .into_iter()
            .flat_map(|g| g.replicas.iter().copied())
            .filter(|n| *n != self.me)
            .collect();
        if all.is_empty() {
            all.extend(via);
        } else if !retry {
            all.truncate(1);
        }
        all
    }

    fn on_inquire(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, its_shard: bool) {
        if self.forgot_only_as_ancestor(txn) {
            return;
        }
        if self.answer_forgotten(ctx, from, txn, its_shard) {
            return;
        }
        if let Some(info) = self.committed.get(&txn) {
            ctx.send(from, Msg::InquireOk(info.clone()));
        } else if self.moot(txn) {
            // Nothing here will ever answer it: the asker's retry goes to
            // every replica of the transaction's shards ([`Self::ask`]).
        } else {
            if self.stats.on() {
                self.stats.msgs.inquire_parked += 1;
                let parked = self.stats.parked_at.entry(txn).or_default();
                if !parked.iter().any(|(a, _)| *a == from) {
                    parked.push((from, ctx.now()));
                }
            }
            if self.trace {
                tracing::debug!(target: TRACE, me = self.me.0, at = ctx.now(), txn = txn.0, from = from.0, "P");
            }
            let askers = self.inquiries.entry(txn).or_default();
            if !askers.contains(&from) {
                askers.push(from);
            }
        }
    }

    /// Tell the shard's other replicas what committed here lately
    /// ([`Msg::Committed`]).
    fn announce(&mut self, ctx: &mut Ctx<Msg>) {
        self.announce_at = ctx.now() + self.cfg.announce;
        self.announce_executed(ctx);
        self.nudge_laggards(ctx);
        let fresh = std::mem::take(&mut self.fresh);
        let mut txns = self.announced.to_vec();
        txns.extend_from_slice(&fresh);
        self.announced = fresh.into();
        if txns.is_empty() {
            return;
        }
        let txns: Arc<[TxnId]> = txns.into();
        let group = &self.topology.shards[self.shard.0 as usize].replicas;
        for &peer in group.iter().filter(|n| **n != self.me) {
            ctx.send(
                peer,
                Msg::Committed {
                    txns: txns.clone(),
                    why: Announce::Lately,
                },
            );
        }
    }

    /// Tell every other replica of the shards of the transactions executed
    /// here lately that they were ([`Msg::Executed`]), one batch per
    /// replica: what garbage collection waits for ([`super::gc`]).
    fn announce_executed(&mut self, ctx: &mut Ctx<Msg>) {
        let mut to: FastMap<NodeId, Vec<TxnId>> = tessera_core::fast_map();
        for t in self.gc.announcement() {
            let Some(l) = self.locals.get(&t) else {
                continue;
            };
            for s in participants(l.proc.as_ref()) {
                for &r in &self.topology.shards[s.0 as usize].replicas {
                    if r != self.me {
                        to.entry(r).or_default().push(t);
                    }
                }
            }
        }
        let mut to: Vec<(NodeId, Vec<TxnId>)> = to.into_iter().collect();
        to.sort_unstable();
        for (r, txns) in to {
            ctx.send(
                r,
                Msg::Executed {
                    txns: txns.into(),
                    echo: false,
                },
            );
        }
    }

    /// Every [`JanusConfig::inquire_after`], tell each replica of every
    /// shard of a transaction executed here (durably) at least
    /// [`JanusConfig::recover_after`] ago that has not announced executing
    /// it ([`Announce::Lagging`]): all the replicas condition 2 of
    /// [`super::gc`] waits for, not only this shard's. An announcement
    /// goes out twice and is echoed once; both can be lost while a
    /// replica is cut off, and a replica that restarts forgets whom it
    /// heard (crash runs of `janus_seeds` ended with transactions executed
    /// at every replica of their shards and forgotten by none, issue 6,
    /// session 25). The nudge counts as this replica's announcement, and
    /// the receiver echoes those it executed.
    fn nudge_laggards(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        if now < self.nudge_at {
            return;
        }
        self.nudge_at = now + self.cfg.inquire_after;
        let mut to: FastMap<NodeId, Vec<TxnId>> = tessera_core::fast_map();
        for (&t, l) in &self.locals {
            if !self.executed_durably(t) || now.saturating_sub(l.since) < self.cfg.recover_after {
                continue;
            }
            for s in participants(l.proc.as_ref()) {
                for &r in &self.topology.shards[s.0 as usize].replicas {
                    if r != self.me && !self.gc.announced_by(t, r) {
                        to.entry(r).or_default().push(t);
                    }
                }
            }
        }
        let mut to: Vec<(NodeId, Vec<TxnId>)> = to.into_iter().collect();
        to.sort_unstable();
        for (r, mut txns) in to {
            txns.sort_unstable();
            ctx.send(
                r,
                Msg::Committed {
                    txns: txns.into(),
                    why: Announce::Lagging,
                },
            );
        }
    }

    /// `t` executed here and its Executed record is durable: this replica
    /// may say so ([`super::gc`]).
    fn executed_durably(&self, t: TxnId) -> bool {
        self.locals
            .get(&t)
            .is_some_and(|l| l.results.is_some() && l.logged <= self.synced)
    }

    /// A peer thinks this replica lags behind on `txns`: tell it those
    /// executed here.
    fn echo_executed(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txns: &[TxnId]) {
        let done: Vec<TxnId> = txns
            .iter()
            .copied()
            .filter(|t| self.forgotten(*t) || self.executed_durably(*t))
            .collect();
        if !done.is_empty() {
            ctx.send(
                from,
                Msg::Executed {
                    txns: done.into(),
                    echo: true,
                },
            );
        }
    }

    /// Record who executed what; echo, the first time `from` announces
    /// them, those executed here too, since `from` may have been cut off
    /// when this replica announced them.
    fn on_executed(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txns: &[TxnId], echo: bool) {
        let mut mine = Vec::new();
        for &t in txns {
            let new = self.heard(t, from);
            let here = self.forgotten(t) || (new && self.executed_durably(t));
            if !echo && here {
                mine.push(t);
            }
        }
        if !mine.is_empty() {
            ctx.send(
                from,
                Msg::Executed {
                    txns: mine.into(),
                    echo: true,
                },
            );
        }
    }

    /// A message from `txn`'s own coordinator about a transaction unknown
    /// here that its coordinator's floor has passed: a stale copy
    /// ([`Gc::stale`]), ignored. Recovery coordinators' messages are not
    /// judged by a floor they cannot speak for.
    fn stale(&self, from: NodeId, txn: TxnId) -> bool {
        from == txn.node()
            && !self.locals.contains_key(&txn)
            && !self.committed.contains_key(&txn)
            && self.gc.stale(txn)
    }

    /// An InquireOk about `t` is acted on only while this replica asks
    /// about `t` (it asks until `t` commits here, [`Self::ask`]): a late
    /// copy, or another replica's answer to the same question, arriving
    /// after `t` committed here, executed, was forgotten and its tombstone
    /// expired would run `t` a second time ([`super::gc`], *late answers*).
    fn answers_an_open_question(&self, t: TxnId) -> bool {
        self.asking.contains_key(&t)
    }

    /// An Inquire about `txn` this replica would park is moot when `txn`
    /// is unknown here and below its coordinator's floor: it either
    /// executed and forgot `txn` (its tombstone gone too), or never had it
    /// and learns it only from the replicas that hold it, which the asker
    /// also asks. Parked, the request would wait forever.
    fn moot(&self, txn: TxnId) -> bool {
        !self.locals.contains_key(&txn) && !self.committed.contains_key(&txn) && self.gc.stale(txn)
    }

    /// `txn` was forgotten here as an ancestor without pieces here
    /// ([`super::gc`]): DECIDED with nothing unexecuted behind it *here*,
    /// which says nothing of its own shards. Its `Forgotten` answer would
    /// tell an asker that it executed everywhere, and a replica of its
    /// shards that has not seen it yet (a restarted one catching up over
    /// `tcp`, issue 6, session 24) adopted it as done and never ran its
    /// pieces: a dependent ran before it and the replica diverged. Such an
    /// Inquire is left unanswered, as a moot one: the asker's retry goes to
    /// every replica of `txn`'s shards (or every server), and those answer
    /// from what they hold or from their record of what they forgot.
    ///
    /// Not below its coordinator's done floor: there `txn` executed at
    /// every replica of every shard it involves, so the answer is true
    /// whoever asks — and the floor drops the bit that tells a
    /// transaction forgotten with pieces here, so that while its tombstone
    /// lived every replica of its own shard took itself for one that forgot
    /// it only as an ancestor and stayed silent (issue 6, session 27,
    /// `janus27a`: three-site TPC-C at 50 and 100 clients per partition
    /// lost 10% and 5% to askers retrying for 1–2 s).
    fn forgot_only_as_ancestor(&self, txn: TxnId) -> bool {
        self.gc.is_gone(txn) && !self.gc.forgot_mine(txn) && !self.gc.below_done(txn)
    }

    /// Release parked Inquires that nothing here will answer: about a
    /// transaction forgotten since (answered with its tombstone) or moot
    /// ([`Self::moot`], dropped).
    fn release_inquiries(&mut self, ctx: &mut Ctx<Msg>) {
        let done: Vec<TxnId> = self
            .inquiries
            .keys()
            .copied()
            .filter(|&t| self.gc.is_gone(t) || self.moot(t))
            .collect();
        for t in done {
            let askers = self.inquiries.remove(&t).unwrap_or_default();
            if self.gc.is_gone(t) && !self.forgot_only_as_ancestor(t) {
                for a in askers {
                    self.answer_forgotten(ctx, a, t, false);
                }
            }
            self.stats.parked_at.remove(&t);
        }
    }

    /// Answer a message about a forgotten transaction with its tombstone
    /// ([`Msg::Forgotten`]), or once that is gone with what the record of
    /// forgotten transactions keeps of it ([`super::gc`], *what a replica
    /// forgot*) — unless it is a stale copy from its own coordinator
    /// ([`Self::stale`]), ignored as before; false if it is not forgotten.
    /// `its_shard`: the message came to this replica as one of `txn`'s
    /// shards' (so the done floor may answer, [`Self::holds_none`]).
    fn answer_forgotten(
        &mut self,
        ctx: &mut Ctx<Msg>,
        to: NodeId,
        txn: TxnId,
        its_shard: bool,
    ) -> bool {
        let ours = its_shard && self.holds_none(txn);
        let g = match self.gc.gone(txn) {
            Some(g) => g.clone(),
            None => match self.gc.recorded_tombstone(txn, ours) {
                Some(_) if self.stale(to, txn) => return true,
                Some(g) => {
                    self.late[Late::Answered as usize] += 1;
                    g
                }
                None => return false,
            },
        };
        let msg = Msg::Forgotten {
            txn,
            abandon: g.abandon,
            scc: g.scc,
        };
        ctx.send(to, msg);
        true
    }

    /// Another server forgot `txn`, which this one inquired about: it
    /// committed and executed everywhere, DECIDED in `scc`. Adopt that as
    /// a DECIDED vertex (as a live answer would make it), so that what
    /// waits for it moves on ([`super::gc`]).
    fn on_forgotten(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        scc: Option<Arc<[TxnId]>>,
    ) {
        self.asking.remove(&txn);
        self.stats.asked_at.remove(&txn);
        if self.gc.is_gone(txn) || self.committed.contains_key(&txn) {
            return;
        }
        if self.locals.contains_key(&txn) {
            // Forgotten elsewhere only once this replica executed it.
            tracing::warn!(me = ?self.me, ?txn, "a transaction pending here was forgotten elsewhere");
            return;
        }
        let Some(n) = self.graph.get(txn) else {
            return;
        };
        let v = Vertex {
            txn,
            status: Status::Decided,
            shards: n.shards.clone(),
            parents: Vec::new(),
            scc: scc.clone(),
        };
        let mut rose = Vec::new();
        self.graph.merge(&v, self.gc.epoch, &mut rose);
        // Members this replica forgot (or that executed everywhere, below
        // their done floor) came back with the component as DECIDED
        // vertices that nothing finishes: a waiter behind one asked about
        // it, the answer was `Forgotten`, and it waited to the end (crash
        // runs with checkpoints, seed 27). Out again: a missing parent is
        // a cut-off, as it was.
        if let Some(scc) = &scc {
            self.drop_forgotten_members(scc, txn);
        }
        // The other members: some may have pieces here. The sender decided
        // the component but answers about a member only if it had pieces
        // there: one it forgot only as an ancestor it does not answer
        // ([`Self::forgot_only_as_ancestor`]). So each is asked at once of
        // its shards' replicas, or of every server when its shards are not
        // known here, as a retry would after a retransmit period: asked of
        // the sender alone, components of up to 280 transactions waited
        // ~490 ms behind such a member at three sites (TPC-C, 3,000
        // clients, `docs/results/janus.md`, *session 26*).
        for &m in scc.iter().flat_map(|s| s.iter()) {
            // A member adopted already (finished) is not asked again: two
            // unknown members' answers would otherwise ask for each other
            // back and forth (crash seed 629, until a message was lost).
            let known = m == txn
                || self.committed.contains_key(&m)
                || self.gc.is_gone(m)
                || self.gc.below_done(m)
                || self.graph.get(m).is_some_and(|n| n.finished);
            if !known && !self.asking.contains_key(&m) {
                for to in self.inquirees(m, true, Some(from)) {
                    self.inquire(ctx, to, m, Sent::Via);
                }
                self.asking.insert(
                    m,
                    Asking {
                        sent_at: ctx.now(),
                        tries: 0,
                        sent: true,
                        via: Some(from),
                    },
                );
            }
        }
        // Executed everywhere: done here too. The other members of its
        // component are not known done here ([`Self::blocker`] asks).
        if let Some(n) = self.graph.get_mut(txn) {
            n.finished = true;
        }
        self.wakeups.wake(txn);
        for r in rose {
            self.wakeups.wake(r);
            if self.locals.contains_key(&r) {
                self.wakeups.push(r);
            }
        }
        self.drain(ctx);
    }

    /// Ask the announcer for every transaction announced that this replica
    /// has not seen committed — except, in a routine announcement
    /// ([`Announce::Lately`]), one unknown here below its coordinator's
    /// floor ([`Self::moot`]): this replica may have executed and forgotten
    /// it, its tombstone expired, and the answer would run it again. If it
    /// never had it, the announcer cannot forget it before this replica
    /// executes it, and nudges ([`Announce::Lagging`]) until then.
    fn on_committed(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txns: &[TxnId], why: Announce) {
        for &t in txns {
            if self.gc.only_recorded(t) {
                self.late[Late::Announced as usize] += 1;
            }
            if self.committed.contains_key(&t)
                || self.asking.contains_key(&t)
                || self.forgotten(t)
                || (why == Announce::Lately && self.moot(t))
            {
                continue;
            }
            self.inquire(ctx, from, t, Sent::Via);
            self.asking.insert(
                t,
                Asking {
                    sent_at: ctx.now(),
                    tries: 0,
                    sent: true,
                    via: Some(from),
                },
            );
        }
    }

    // ---- Recovery coordinator (§3.3, Algorithm 6) ----

    /// Become `t`'s recovery coordinator: Prepare with a ballot above every
    /// one seen, unique by this node's id in the low bits (§3.3, footnote).
    fn start_recovery(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let Some(l) = self.locals.get(&t) else { return };
        let round = (l.ballot >> 16) + 1;
        let ballot = (round << 16) | Ballot::from(self.me.0 & 0xFFFF);
        // The ballot is promised here, durably, before any Prepare with it
        // leaves: after a restart this replica must pick a higher one, never
        // the same ballot with another value.
        let l = self.locals.get_mut(&t).expect("checked");
        l.ballot = ballot;
        l.recover_at = Time::MAX;
        self.log(ctx, Record::Promised { txn: t, ballot });
        self.after_sync(ctx, AfterSync::Recover(t, ballot));
    }

    /// Send the Prepares of a recovery whose ballot is durable, unless the
    /// transaction committed or a higher ballot was promised meanwhile.
    fn recover(&mut self, ctx: &mut Ctx<Msg>, t: TxnId, ballot: Ballot) {
        if self.committed.contains_key(&t) || self.recoveries.contains_key(&t) {
            return;
        }
        let Some(l) = self.locals.get(&t) else { return };
        if l.ballot > ballot {
            let at = self.recover_at(ctx, self.cfg.recover_after / 2);
            self.locals.get_mut(&t).expect("checked").recover_at = at;
            return;
        }
        tracing::debug!(me = ?self.me, txn = ?t, ballot, "recovering");
        let d = Driver::recover(
            ctx,
            t,
            l.proc.clone(),
            &self.topology,
            ballot,
            self.cfg.retransmit,
        );
        self.recoveries.insert(t, d);
        self.recovering += 1;
    }

    fn on_recovery_reply(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, t: TxnId, msg: Msg) {
        let Some(d) = self.recoveries.get_mut(&t) else {
            return; // a late reply to a finished recovery
        };
        let p = d.on_reply(ctx, from, msg, self.cfg.retransmit, None);
        self.after_recovery_step(ctx, t, p);
    }

    fn after_recovery_step(&mut self, ctx: &mut Ctx<Msg>, t: TxnId, p: Progress) {
        if let Some(ballot) = p.rejected {
            // Another recovery coordinator runs: back off, and try again
            // above its ballot only if it does not finish (l. 72).
            self.recoveries.remove(&t);
            let at = self.recover_at(ctx, self.cfg.recover_after / 2);
            if let Some(l) = self.locals.get_mut(&t) {
                l.ballot = l.ballot.max(ballot);
                l.recover_at = at;
            }
        } else if p.finished && self.recoveries.remove(&t).is_some_and(|d| d.abandoned()) {
            self.abandoned += 1;
        }
    }

    // ---- timers ----

    fn sweep(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let len = self.cfg.epoch.max(1);
        // A restarted process's clock may start again at 0 (`tcp`) while
        // its log restored the epoch it had reached: counted from the
        // restart on top of that epoch, or collection would wait as long
        // as the last incarnation lived. On `sim`'s one clock the first
        // term is never smaller (issue 6, session 29).
        let (since, restored) = self.epoch_from;
        let epoch = (now / len).max(restored + now.saturating_sub(since) / len);
        if epoch > self.gc.epoch {
            self.gc.epoch = epoch;
            self.collect(ctx);
        }
        // Pre-accepted here and never committed here: ask the others.
        let mut stale: Vec<TxnId> = self
            .locals
            .iter()
            .filter(|(t, l)| {
                !self.committed.contains_key(t)
                    && !self.asking.contains_key(t)
                    && now.saturating_sub(l.since) > self.cfg.inquire_after
            })
            .map(|(t, _)| *t)
            .collect();
        stale.sort_unstable();
        for t in stale {
            self.ask(ctx, t, true);
        }
        let mut resend = Vec::new();
        for (&a, ask) in self.asking.iter_mut() {
            let rto = self.cfg.retransmit.saturating_mul(1 << ask.tries.min(3));
            if now.saturating_sub(ask.sent_at) >= rto {
                ask.tries += 1;
                ask.sent_at = now;
                resend.push((a, std::mem::replace(&mut ask.sent, true), ask.via));
            }
        }
        resend.sort_unstable();
        for (a, retry, via) in resend {
            let why = if retry { Sent::Retry } else { Sent::First };
            for to in self.inquirees(a, retry, via) {
                self.inquire(ctx, to, a, why);
            }
        }
        let mut refetch = Vec::new();
        for (&(t, piece), ask) in self.fetching.iter_mut() {
            let rto = self.cfg.retransmit.saturating_mul(1 << ask.tries.min(3));
            if now.saturating_sub(ask.sent_at) >= rto {
                ask.tries += 1;
                ask.sent_at = now;
                refetch.push((t, piece, ask.tries));
            }
        }
        refetch.sort_unstable();
        for (t, piece, tries) in refetch {
            let Some(l) = self.locals.get(&t) else {
                continue;
            };
            let shard = l.proc.pieces()[piece as usize].shard;
            ctx.send(
                self.counterpart(shard, tries),
                Msg::FetchOutput { txn: t, piece },
            );
        }
        if now >= self.announce_at {
            self.announce(ctx);
        }
        self.retry_catch_up(ctx);
        // Still not committed: its coordinator may have failed (§3.3).
        let mut suspects: Vec<TxnId> = self
            .locals
            .iter()
            .filter(|(t, l)| {
                l.recover_at <= now
                    && !self.committed.contains_key(t)
                    && !self.recoveries.contains_key(t)
            })
            .map(|(t, _)| *t)
            .collect();
        suspects.sort_unstable();
        for t in suspects {
            self.start_recovery(ctx, t);
        }
        let mut ids: Vec<TxnId> = self.recoveries.keys().copied().collect();
        ids.sort_unstable();
        for t in ids {
            let d = self.recoveries.get_mut(&t).expect("listed");
            let p = d.tick(ctx, self.cfg.retransmit);
            self.after_recovery_step(ctx, t, p);
        }
        ctx.set_timer(self.cfg.sweep, SWEEP);
    }
}

/// Durability and restart (see [`super::wal`]).
impl JanusServer {
    /// Write `rec` to this node's log (nothing on a runtime that keeps no
    /// log). A procedure without a codec cannot be logged: the replica goes
    /// on without a log, and says so.
    fn log(&mut self, ctx: &mut Ctx<Msg>, rec: Record) {
        if !self.durable {
            return;
        }
        match rec.encode() {
            Ok(bytes) => {
                if self.stats.on() {
                    self.stats.log_bytes[usize::from(bytes[1]).min(6)] += bytes.len() as u64;
                }
                self.issued += 1;
                tessera_core::codec::put_bytes(&mut self.unflushed, &bytes);
                if self.flushing == 0 {
                    self.flush(ctx);
                }
            }
            Err(e) => {
                tracing::error!(me = ?self.me, "Janus replica runs without a log (it will not survive a crash): {e}");
                self.durable = false;
            }
        }
    }

    /// Group commit: the records issued since the last flush go to the log
    /// as one write, at most one write in flight at a time. (One write per
    /// record costs the simulator one event per record at the server, as a
    /// WAL without group commit would cost one fsync each.)
    fn flush(&mut self, ctx: &mut Ctx<Msg>) {
        if self.unflushed.is_empty() {
            return;
        }
        self.flushing = self.issued;
        ctx.persist(self.issued, std::mem::take(&mut self.unflushed).freeze());
    }

    /// Do `what` once every record issued so far is durable.
    fn after_sync(&mut self, ctx: &mut Ctx<Msg>, what: AfterSync) {
        if self.synced >= self.issued {
            self.run_after_sync(ctx, what);
        } else {
            self.after_sync.push_back((self.issued, what));
        }
    }

    /// Send an answer that promises something, once that is durable.
    fn reply(&mut self, ctx: &mut Ctx<Msg>, to: NodeId, msg: Msg) {
        self.after_sync(ctx, AfterSync::Send(to, msg));
    }

    fn run_after_sync(&mut self, ctx: &mut Ctx<Msg>, what: AfterSync) {
        match what {
            AfterSync::Send(to, msg) => ctx.send(to, msg),
            AfterSync::Executed(t) => self.gc.executed(t),
            AfterSync::Recover(t, ballot) => self.recover(ctx, t, ballot),
        }
    }

    /// Apply one record of the log, in the order written (at a restart).
    fn restore(&mut self, rec: Record) {
        match rec {
            Record::PreAccepted {
                txn,
                ballot,
                deps,
                proc,
            } => {
                let (reads, writes) = self.keys(&proc);
                self.tracker
                    .pre_accept(txn, &reads, &writes, &mut Vec::new());
                self.promised.remove(&txn);
                self.locals
                    .insert(txn, Local::new(proc, ballot, deps, 0, Time::MAX));
            }
            Record::Promised { txn, ballot } => match self.locals.get_mut(&txn) {
                Some(l) => l.ballot = l.ballot.max(ballot),
                None => {
                    let p = self.promised.entry(txn).or_insert(0);
                    *p = (*p).max(ballot);
                }
            },
            Record::Accepted {
                txn,
                ballot,
                deps,
                abandon,
            } => {
                let l = self
                    .locals
                    .get_mut(&txn)
                    .expect("an Accepted record follows its PreAccepted one");
                l.ballot = l.ballot.max(ballot);
                l.accepted = Some(ballot);
                l.deps = deps;
                l.abandon = abandon;
            }
            Record::Committed {
                txn,
                deps,
                abandon,
                proc,
            } => {
                let proc = proc
                    .or_else(|| self.locals.get(&txn).map(|l| l.proc.clone()))
                    .expect("a Committed record without a procedure follows a PreAccepted one");
                let info = Arc::new(CommitInfo {
                    txn,
                    proc,
                    deps,
                    abandon,
                });
                self.graft(&info, 0);
            }
            Record::Executed {
                txn,
                scc,
                written,
                results,
            } => {
                for (k, columns, v) in written {
                    self.store.install_columns(k, v, txn.version(), columns);
                }
                let l = self
                    .locals
                    .get_mut(&txn)
                    .expect("an Executed record follows its Committed one");
                let (proc, abandon) = (l.proc.clone(), l.abandon);
                l.results = Some(results);
                let (reads, writes) = self.keys(&proc);
                self.tracker.finished(txn, &reads, &writes, !abandon);
                let members = self.component(scc).unwrap_or_else(|| Arc::from([txn]));
                self.replay_executed(txn, &members);
            }
            Record::Restarted => {}
            Record::Forgotten { epoch, txns } => {
                self.gc.epoch = epoch;
                for (t, abandon, scc) in txns {
                    let scc = self.component(scc);
                    self.committed.remove(&t);
                    self.graph.remove(t);
                    self.frontiers.clear();
                    self.forget(t, abandon, scc);
                }
            }
        }
    }

    /// `txn`, replayed as executed in the component `members`: the
    /// component DECIDED in the graph, `txn` finished.
    fn replay_executed(&mut self, txn: TxnId, members: &Arc<[TxnId]>) {
        self.graph
            .mark_decided(members, self.gc.epoch, &mut Vec::new());
        // Every member was committed here before `txn` executed;
        // those without pieces here were not logged, and do not
        // run here.
        for &m in members.iter() {
            if m == txn || !self.committed.contains_key(&m) {
                if let Some(n) = self.graph.get_mut(m) {
                    n.finished = true;
                }
            }
        }
    }

    /// Take out of the graph the members of `members` (but `keep`) that
    /// this replica forgot, or that executed everywhere below their done
    /// floor, and holds nothing of: marking a component DECIDED gave them
    /// vertices back, which nothing finishes; missing, each is a cut-off
    /// (see [`super::gc`]).
    fn drop_forgotten_members(&mut self, members: &[TxnId], keep: TxnId) {
        for &m in members {
            let done = self.gc.is_gone(m) || self.gc.below_done(m);
            let held = self.committed.contains_key(&m) || self.locals.contains_key(&m);
            if m != keep && done && !held {
                self.graph.remove(m);
            }
        }
    }

    /// Start from a checkpoint's image ([`super::image`]) instead of the
    /// records before it: the store, the record of what was forgotten,
    /// the tracker and the promises as they were; the live transactions
    /// as their PreAccepted, Accepted, Committed and Executed records
    /// would rebuild them.
    fn restore_image(&mut self, img: image::Image) {
        self.store = img.store;
        self.gc.restore(img.gc);
        self.tracker = img.tracker;
        self.promised = img.promised.into_iter().collect();
        self.components = Components::listed(img.listed);
        for l in &img.live {
            let mut local = Local::new(l.proc.clone(), l.ballot, l.deps.clone(), 0, Time::MAX);
            local.accepted = l.accepted;
            local.abandon = l.abandon;
            self.locals.insert(l.txn, local);
        }
        for l in img.live.iter().filter(|l| l.committed) {
            let info = Arc::new(CommitInfo {
                txn: l.txn,
                proc: l.proc.clone(),
                deps: l.deps.clone(),
                abandon: l.abandon,
            });
            self.graft(&info, 0);
        }
        for l in img.live {
            let Some((results, scc)) = l.executed else {
                continue;
            };
            self.locals.get_mut(&l.txn).expect("inserted").results = Some(results);
            let members = scc.unwrap_or_else(|| Arc::from([l.txn]));
            self.replay_executed(l.txn, &members);
            // Members forgotten here since, which the log's Forgotten
            // records would have taken out of the graph again.
            self.drop_forgotten_members(&members, l.txn);
        }
    }

    /// The members a replayed record's component stands for (`None`:
    /// alone).
    fn component(&mut self, c: Component) -> Option<Arc<[TxnId]>> {
        self.components
            .read(c)
            .unwrap_or_else(|e| panic!("Janus server {:?}: its log does not decode: {e}", self.me))
    }

    /// After a restart: pick up what the log left pending — recoveries of
    /// transactions still uncommitted, execution of committed ones — have
    /// the executed ones announced again (the others may have missed the
    /// announcements, [`super::gc`]), and ask the shard's other replicas
    /// what committed meanwhile ([`Msg::CatchUp`]).
    fn resume(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let mut ids: Vec<TxnId> = self.locals.keys().copied().collect();
        ids.sort_unstable();
        let mut waiting = tessera_core::fast_set();
        for t in ids {
            if self.committed.contains_key(&t) {
                if self.locals[&t].results.is_some() {
                    self.gc.executed(t);
                } else {
                    waiting.insert(t);
                    self.wakeups.push(t);
                }
            } else {
                let at = self.recover_at(ctx, self.cfg.recover_after);
                let l = self.locals.get_mut(&t).expect("listed");
                l.since = now;
                l.recover_at = at;
            }
        }
        self.catch_up = Some(CatchUp {
            since: now,
            asked_at: now,
            answered: false,
            waiting,
        });
        self.ask_catch_up(ctx);
        tracing::debug!(me = ?self.me, records = self.replayed, "restarted from the log");
        self.drain(ctx);
    }

    fn ask_catch_up(&mut self, ctx: &mut Ctx<Msg>) {
        let group = &self.topology.shards[self.shard.0 as usize].replicas;
        for &peer in group.iter().filter(|n| **n != self.me) {
            ctx.send(peer, Msg::CatchUp);
        }
    }

    /// A restarted peer asks what it may have missed: every transaction
    /// with pieces here committed here (and not forgotten).
    fn on_catch_up(&mut self, ctx: &mut Ctx<Msg>, from: NodeId) {
        let mut txns: Vec<TxnId> = self
            .locals
            .keys()
            .filter(|t| self.committed.contains_key(t))
            .copied()
            .collect();
        txns.sort_unstable();
        ctx.send(
            from,
            Msg::Committed {
                txns: txns.into(),
                why: Announce::CatchUp,
            },
        );
    }

    /// A peer's answer to [`Msg::CatchUp`]: caught up once all of it is
    /// executed here.
    fn on_caught_up(&mut self, now: Time, txns: &[TxnId]) {
        if self.catch_up.is_none() {
            return;
        }
        let waiting: Vec<TxnId> = txns
            .iter()
            .copied()
            .filter(|&t| {
                !self.forgotten(t) && self.locals.get(&t).is_none_or(|l| l.results.is_none())
            })
            .collect();
        if let Some(c) = self.catch_up.as_mut() {
            c.answered = true;
            c.waiting.extend(waiting);
        }
        self.caught(now, None);
    }

    /// `t` executed here: one fewer to wait for if catching up.
    fn caught(&mut self, now: Time, t: Option<TxnId>) {
        let Some(c) = self.catch_up.as_mut() else {
            return;
        };
        if let Some(t) = t {
            c.waiting.remove(&t);
        }
        if c.answered && c.waiting.is_empty() {
            let took = now.saturating_sub(c.since);
            tracing::debug!(me = ?self.me, took_us = took / US, "caught up after a restart");
            self.caught_up += 1;
            self.catch_up_us += took / US;
            self.catch_up = None;
        }
    }

    /// Ask again until a peer answers.
    fn retry_catch_up(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let Some(c) = self.catch_up.as_mut() else {
            return;
        };
        if c.answered || now.saturating_sub(c.asked_at) < self.cfg.retransmit {
            return;
        }
        c.asked_at = now;
        self.ask_catch_up(ctx);
    }
}

impl JanusServer {
    /// Drop `t` (committed, as `abandon`, in component `scc`), leaving its
    /// tombstone.
    fn forget(&mut self, t: TxnId, abandon: bool, scc: Option<Arc<[TxnId]>>) {
        let mine = self.locals.remove(&t).map(|l| {
            let (reads, writes) = self.keys(&l.proc);
            self.tracker.forget(t, &reads, &writes);
        });
        let mine = mine.is_some();
        let locals = &self.locals;
        self.gc
            .bury(t, abandon, scc, mine, &|m| locals.contains_key(&m));
    }

    /// Graph garbage collection ([`super::gc`]): forget what every replica
    /// executed, two epochs on, leaving tombstones.
    fn collect(&mut self, ctx: &mut Ctx<Msg>) {
        // Ancestors learnt by Inquire are finished once nothing unexecuted
        // is behind them (as [`Self::blocker`] finds on its walks); those
        // no walk reached since are looked at here.
        let unsure: Vec<TxnId> = self
            .graph
            .iter()
            .filter(|(t, n)| {
                !n.local
                    && !n.finished
                    && n.status == Status::Decided
                    && self.committed.contains_key(t)
            })
            .map(|(t, _)| t)
            .collect();
        for t in unsure {
            if self.blocker(&[t]).is_none() {
                if let Some(n) = self.graph.get_mut(t) {
                    n.finished = true;
                }
            }
        }
        let (locals, committed, wakeups, asking, recoveries, gc) = (
            &self.locals,
            &self.committed,
            &self.wakeups,
            &self.asking,
            &self.recoveries,
            &self.gc,
        );
        self.frontiers.clear();
        let (topology, me) = (&self.topology, self.me);
        let dropped = self.graph.collect(self.gc.epoch, |t, n| {
            if n.status != Status::Decided
                || !n.finished
                || wakeups.awaited(t)
                || asking.contains_key(&t)
                || recoveries.contains_key(&t)
            {
                return false;
            }
            let Some(info) = committed.get(&t) else {
                // Never seen committing here (a member of a component
                // decided elsewhere): it may still involve this shard.
                return false;
            };
            if !n.local {
                return true;
            }
            locals.get(&t).is_some_and(|l| l.results.is_some())
                && gc.everywhere(
                    t,
                    participants(info.proc.as_ref())
                        .into_iter()
                        .flat_map(|s| topology.shards[s.0 as usize].replicas.iter().copied())
                        .filter(|r| *r != me),
                )
        });
        let mut buried = Vec::new();
        for crate::depgraph::graph::Dropped { txn: t, scc, .. } in dropped {
            let abandon = self.committed.remove(&t).is_some_and(|i| i.abandon);
            let local = self.locals.contains_key(&t);
            self.forget(t, abandon, scc.clone());
            if local {
                buried.push((t, abandon, scc));
            }
        }
        if !buried.is_empty() {
            // Members of one component next to each other: it is listed
            // once ([`super::wal`]).
            buried.sort_unstable_by_key(|(t, _, scc)| (scc.as_ref().map(|s| s[0]), *t));
            let components = &mut self.components;
            let buried = buried
                .into_iter()
                .map(|(t, abandon, scc)| (t, abandon, components.write(scc)))
                .collect();
            let epoch = self.gc.epoch;
            self.log(
                ctx,
                Record::Forgotten {
                    epoch,
                    txns: buried,
                },
            );
        }
        self.gc.expire();
        self.ask_settled(ctx);
        self.release_inquiries(ctx);
        if self.stats.on() {
            self.log_stats(ctx.now());
        }
    }

    /// Ask one replica of each other shard, in turn by epoch, which members
    /// of the components this replica's record keeps it forgot with
    /// pieces there ([`Msg::Settled`]; [`super::gc`], *what bounds the
    /// record*). A lost question or answer is asked again the next epoch.
    fn ask_settled(&mut self, ctx: &mut Ctx<Msg>) {
        let txns = self.gc.unsettled();
        if txns.is_empty() {
            return;
        }
        let txns: Arc<[TxnId]> = txns.into();
        let turn = self.gc.epoch as u32;
        for s in 0..self.topology.shards.len() as u32 {
            let shard = ShardId(s);
            if shard != self.shard {
                let to = self.counterpart(shard, turn);
                let ask = true;
                let txns = txns.clone();
                ctx.send(to, Msg::Settled { txns, ask });
            }
        }
    }

    /// [`Msg::Settled`]: answer a question with those of `txns` forgotten
    /// here with pieces here; an answer settles them.
    fn on_settled(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txns: &[TxnId], ask: bool) {
        if !ask {
            self.gc.settled(txns);
            return;
        }
        let forgot: Vec<TxnId> = txns
            .iter()
            .copied()
            .filter(|&t| self.gc.settled_everywhere(t))
            .collect();
        if !forgot.is_empty() {
            let txns = forgot.into();
            ctx.send(from, Msg::Settled { txns, ask: false });
        }
    }

    /// One [`DepStats`] line: the dependency lists seen since the last,
    /// and what this replica stores now.
    fn log_stats(&mut self, now: Time) {
        let (keys, pending, pending_max) = self.tracker.pending();
        let local_deps: usize = self.locals.values().map(|l| l.deps.len()).sum();
        let committed_deps: usize = self.committed.values().map(|i| i.deps.len()).sum();
        let parents: usize = self.graph.iter().map(|(_, n)| n.parents.len()).sum();
        let graph = self.graph.sizes();
        let (awaited, wait_pairs, wake_queue) = self.wakeups.sizes();
        let frontier: usize = self
            .frontiers
            .values()
            .map(|f| f.members.len() + f.marks.len() + f.roots.len())
            .sum();
        let local_deps_cap: usize = self.locals.values().map(|l| l.deps.capacity()).sum();
        let s = &mut self.stats;
        tracing::debug!(
            target: "tessera_protocols::janus::stats",
            me = self.me.0,
            at = now,
            pre_accept_ok = ?DepStats::take(&mut s.pre_accept_ok),
            accept = ?DepStats::take(&mut s.accept),
            commit = ?DepStats::take(&mut s.commit),
            scc = ?DepStats::take(&mut s.scc),
            log_bytes = ?std::mem::take(&mut s.log_bytes),
            keys,
            pending,
            pending_max,
            locals = self.locals.len(),
            local_deps,
            committed = self.committed.len(),
            committed_deps,
            vertices = self.graph.len(),
            parents,
            nodes_cap = graph.nodes_cap,
            behind = graph.behind,
            numbers = graph.numbers,
            blocked_words = graph.blocked_words,
            blocked_cap = graph.blocked_cap,
            parents_cap = graph.parents_cap,
            awaited,
            wait_pairs,
            wake_queue,
            frontiers = self.frontiers.len(),
            frontier,
            after_sync = self.after_sync.len(),
            inquiries = self.inquiries.len(),
            asking = self.asking.len(),
            recoveries = self.recoveries.len(),
            local_deps_cap,
            locals_cap = self.locals.capacity(),
            committed_cap = self.committed.capacity(),
            forgot_record_bytes = self.gc.record_bytes(),
            forgot_components = self.gc.components_kept(),
            forgot_component_bytes = self.gc.component_bytes(),
            tombstones = self.gc.tombstones(),
        );
        let mut s = std::mem::take(&mut self.stats.msgs);
        // The dependency graph's walks ([`crate::depgraph::DepGraph`]'s
        // `WalkStats`): what the settles behind these messages cost.
        let w = self.graph.take_stats();
        tracing::debug!(
            target: "tessera_protocols::janus::stats",
            me = self.me.0,
            at = now,
            rx = ?s.rx,
            tx = ?s.tx,
            other_events = s.other_events,
            ask_wait_now = s.ask_wait_now,
            ask_wait_later = s.ask_wait_later,
            ask_wait_now_involving_me = s.ask_wait_now_involving_me,
            ask_execute = s.ask_execute,
            inquire_parked = s.inquire_parked,
            inquire_ok_redundant = s.inquire_ok_redundant,
            inquire_ok_deps = s.inquire_ok_deps,
            blocked = s.blocked,
            blocked_ancestors = s.blocked_ancestors,
            site = self.site(self.me),
            inquire_sent = ?s.inquire_sent,
            inquire_ok_new = ?s.inquire_ok_new,
            inquire_ok_redundant_by_site = ?s.inquire_ok_redundant_by_site,
            ask_ended_otherwise = s.ask_ended_otherwise,
            ask_wait_us = ?DepStats::spread(&mut s.ask_wait_us[0]),
            ask_wait_retried_us = ?DepStats::spread(&mut s.ask_wait_us[1]),
            parked_same_site_us = ?DepStats::spread(&mut s.parked_us[0]),
            parked_other_site_us = ?DepStats::spread(&mut s.parked_us[1]),
            commit_to_exec_us = ?DepStats::spread(&mut s.commit_to_exec_us),
            two_cycles = ?s.two_cycles,
            unclear_entry = w.unclear_entry,
            unclear_edge = w.unclear_edge,
            unclear_collect = w.unclear_collect,
            unclear_remove = w.unclear_remove,
            cuts = w.cuts,
            walks = w.walks,
            walked = w.walked,
            clear_hits = w.clear_hits,
            clear_stale = w.clear_stale,
            full_walks = w.full_walks,
            full_walked = w.full_walked,
            "messages"
        );
    }
}

/// `d` in whole µs, saturating (debug counts only).
/// A log written by another build is refused, never guessed at
/// ([`super::wal`]).
fn undecodable<T>(me: NodeId, e: DecodeError) -> T {
    panic!("Janus server {me:?}: its log does not decode: {e}")
}

fn micros(d: Time) -> u32 {
    u32::try_from(d / US).unwrap_or(u32::MAX)
}

impl JanusServer {
    /// The site `n` sits on (0 without sites).
    fn site(&self, n: NodeId) -> u32 {
        self.topology.nodes.get(n.0 as usize).map_or(0, |i| i.site)
    }

    /// Send an Inquire about `txn` to `to`, counted ([`DepStats`]) by why
    /// and by where `to` sits.
    fn inquire(&mut self, ctx: &mut Ctx<Msg>, to: NodeId, txn: TxnId, why: Sent) {
        if self.stats.on() {
            let far = usize::from(self.site(to) != self.site(self.me));
            self.stats.msgs.inquire_sent[why as usize][far] += 1;
            let now = ctx.now();
            let asked = self.stats.asked_at.entry(txn).or_insert((now, false));
            if why == Sent::Retry {
                asked.1 = true;
            }
        }
        if self.trace {
            tracing::debug!(target: TRACE, me = self.me.0, at = ctx.now(), txn = txn.0, to = to.0, why = why as u8, "I");
        }
        let its_shard = self
            .shards_of(txn)
            .iter()
            .any(|s| self.topology.shards[s.0 as usize].replicas.contains(&to));
        ctx.send(to, Msg::Inquire { txn, its_shard });
    }

    /// Debug counts of an InquireOk from `from`: new or redundant, by the
    /// answerer's site, and how long the ask waited for it.
    fn count_inquire_ok(&mut self, now: Time, from: NodeId, info: &CommitInfo) {
        let far = usize::from(self.site(from) != self.site(self.me));
        let m = &mut self.stats.msgs;
        m.inquire_ok_deps += info.deps.len() as u64;
        if self.committed.contains_key(&info.txn) {
            m.inquire_ok_redundant += 1;
            m.inquire_ok_redundant_by_site[far] += 1;
            return;
        }
        let (at, retried) = self
            .stats
            .asked_at
            .remove(&info.txn)
            .unwrap_or((now, false));
        m.inquire_ok_new[far][usize::from(retried)] += 1;
        m.ask_wait_us[usize::from(retried)].push(micros(now.saturating_sub(at)));
    }

    /// Debug counts when `t` becomes known committing here: an ask that
    /// ended without an InquireOk, the Inquires parked here it answers,
    /// and (`mine`) the start of its wait & inquire.
    fn count_commit_known(&mut self, now: Time, t: TxnId, mine: bool) {
        if self.stats.asked_at.remove(&t).is_some() {
            self.stats.msgs.ask_ended_otherwise += 1;
        }
        let here = self.site(self.me);
        for (a, at) in self.stats.parked_at.remove(&t).unwrap_or_default() {
            let far = usize::from(self.site(a) != here);
            self.stats.msgs.parked_us[far].push(micros(now.saturating_sub(at)));
        }
        if mine {
            self.stats.committed_at.insert(t, now);
        }
    }

    /// Debug counts of the two-cycles `info`'s commit closes here (each
    /// pair once per replica that learns both committed): a
    /// dependency committed here already that depends on `info.txn`, by
    /// the two coordinators' sites (issue 6: components over three sites).
    fn count_two_cycles(&mut self, info: &CommitInfo) {
        let t = info.txn;
        let site = |n: NodeId| self.site(n).min(2) as usize;
        let mine = site(t.node());
        let mut found = [0u64; 3];
        for d in &info.deps {
            let Some(other) = self.committed.get(&d.txn) else {
                continue;
            };
            let back = if other.deps.is_sorted_by_key(|e| e.txn) {
                other.deps.binary_search_by_key(&t, |e| e.txn).is_ok()
            } else {
                other.deps.iter().any(|e| e.txn == t)
            };
            if back {
                found[site(d.txn.node())] += 1;
            }
        }
        for (to, n) in found.into_iter().enumerate() {
            self.stats.msgs.two_cycles[mine][to] += n;
        }
    }

    /// Debug counts ([`DepStats`]) of the messages this step sends.
    fn count_sent(&mut self, ctx: &mut Ctx<Msg>) {
        if !self.stats.on() {
            return;
        }
        for e in ctx.effects_mut().iter() {
            if let Effect::Send { msg, .. } = e {
                self.stats.msgs.tx[msg.kind()] += 1;
            }
        }
    }

    /// One message, by kind.
    fn handle(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::PreAccept {
                txn,
                ballot,
                proc,
                floor,
                done,
            } => self.on_pre_accept(ctx, from, txn, ballot, proc, (floor, done)),
            Msg::Accept {
                txn,
                ballot,
                deps,
                abandon,
                proc,
            } => self.on_accept(ctx, from, txn, ballot, &deps, abandon, proc),
            Msg::Commit(info) => self.on_commit(ctx, from, info),
            Msg::Prepare { txn, ballot } => self.on_prepare(ctx, from, txn, ballot),
            Msg::Inquire { txn, its_shard } => self.on_inquire(ctx, from, txn, its_shard),
            Msg::InquireOk(info) => {
                if self.stats.on() {
                    self.count_inquire_ok(ctx.now(), from, &info);
                }
                if self.answers_an_open_question(info.txn) {
                    self.apply_commit(ctx, info)
                }
            }
            Msg::Committed { txns, why } => {
                match why {
                    Announce::Lately => {}
                    Announce::CatchUp => self.on_caught_up(ctx.now(), &txns),
                    Announce::Lagging => {
                        // Sent only for transactions executed durably there.
                        for &t in txns.iter() {
                            self.heard(t, from);
                        }
                        self.echo_executed(ctx, from, &txns)
                    }
                }
                self.on_committed(ctx, from, &txns, why)
            }
            Msg::CatchUp => self.on_catch_up(ctx, from),
            Msg::Executed { txns, echo } => self.on_executed(ctx, from, &txns, echo),
            Msg::Settled { txns, ask } => self.on_settled(ctx, from, &txns, ask),
            Msg::Done { floor } => self.gc.raise_done(floor),
            Msg::Forgotten { txn, ref scc, .. } => {
                let scc = scc.clone();
                if self.recoveries.contains_key(&txn) {
                    self.on_recovery_reply(ctx, from, txn, msg);
                }
                self.on_forgotten(ctx, from, txn, scc)
            }
            Msg::FetchOutput { txn, piece } => self.on_fetch_output(ctx, from, txn, piece),
            Msg::Output { txn, piece, output } => self.on_output(ctx, txn, piece, output),
            Msg::PreAcceptOk { txn, .. }
            | Msg::PrepareOk { txn, .. }
            | Msg::PrepareNotOk { txn, .. }
            | Msg::PreAcceptNotOk { txn, .. }
            | Msg::AcceptOk { txn, .. }
            | Msg::AcceptNotOk { txn, .. }
            | Msg::CommitOk { txn, .. } => self.on_recovery_reply(ctx, from, txn, msg),
        }
    }
}

impl Node<Msg> for JanusServer {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.cfg.sweep, SWEEP);
        self.epoch_from = (ctx.now(), self.gc.epoch);
        if self.catch_up.is_some() {
            if self.lost_skip {
                self.log(ctx, Record::Restarted);
            }
            self.resume(ctx);
        }
        self.graph.charge_walks(ctx, self.cfg.graph_cpu);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        self.synced = self.synced.max(token);
        if token == self.flushing {
            self.flushing = 0;
            self.flush(ctx);
        }
        while self
            .after_sync
            .front()
            .is_some_and(|(t, _)| *t <= self.synced)
        {
            let (_, what) = self.after_sync.pop_front().expect("front exists");
            self.run_after_sync(ctx, what);
        }
        if self.stats.on() {
            self.stats.msgs.other_events += 1;
        }
        self.count_sent(ctx);
        self.graph.charge_walks(ctx, self.cfg.graph_cpu);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        if self.stats.on() {
            self.stats.msgs.rx[msg.kind()] += 1;
        }
        self.heard = (from.0, msg.kind());
        self.handle(ctx, from, msg);
        self.heard = (u32::MAX, 0);
        self.count_sent(ctx);
        self.graph.charge_walks(ctx, self.cfg.graph_cpu);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == SWEEP {
            self.sweep(ctx);
        }
        if self.stats.on() {
            self.stats.msgs.other_events += 1;
        }
        self.count_sent(ctx);
        self.graph.charge_walks(ctx, self.cfg.graph_cpu);
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }

    /// A checkpoint ([`super::image`]): one write holding the image of
    /// this replica's state, including the records issued since the write
    /// in flight, which reach the log after it and are skipped at replay.
    fn snapshot(&self) -> Option<bytes::Bytes> {
        if !self.durable {
            return None;
        }
        let skip = if self.flushing > 0 {
            self.issued - self.flushing
        } else {
            0
        };
        let mut ids: Vec<TxnId> = self.locals.keys().copied().collect();
        ids.sort_unstable();
        let live = ids
            .into_iter()
            .map(|t| {
                let l = &self.locals[&t];
                let executed = l.results.as_ref().map(|r| {
                    let members = self.graph.members(t);
                    (r.clone(), (members.len() > 1).then_some(members))
                });
                LiveTxn {
                    txn: t,
                    proc: l.proc.clone(),
                    ballot: l.ballot,
                    accepted: l.accepted,
                    deps: l.deps.clone(),
                    abandon: l.abandon,
                    committed: self.committed.contains_key(&t),
                    executed,
                }
            })
            .collect();
        let mut promised: Vec<(TxnId, Ballot)> =
            self.promised.iter().map(|(&t, &b)| (t, b)).collect();
        promised.sort_unstable();
        let parts = Parts {
            skip,
            store: &self.store,
            gc: &self.gc,
            tracker: &self.tracker,
            promised,
            live,
            listed: self.components.last(),
        };
        match image::encode(&parts) {
            Ok(rec) => {
                let mut write = bytes::BytesMut::new();
                tessera_core::codec::put_bytes(&mut write, &rec);
                Some(write.freeze())
            }
            Err(e) => {
                tracing::error!(me = ?self.me, "Janus replica: no checkpoint: {e}");
                None
            }
        }
    }

    /// Every transaction with pieces here that this replica holds has
    /// executed here, and a restart's catch-up is over. A checked run on
    /// `sim` goes on past its end until every node is settled (for at
    /// most the simulator's `settle` bound, 2 s), so that the
    /// replica convergence count and TPC-C's consistency conditions read
    /// replicas that are done executing: without it a one-site TPC-C run
    /// under `--replica-faults` read a first replica with 343 committed
    /// transactions still to execute and failed conditions 8/9 (issue 6,
    /// session 28).
    fn settled(&self) -> bool {
        self.catch_up.is_none() && self.locals.values().all(|l| l.results.is_some())
    }

    /// What is left unfinished or unforgotten here (at the end of a run,
    /// after quiescence, all three should be 0), and how many transactions
    /// this replica executed.
    fn take_report(&mut self) -> NodeReport {
        let waiting = self
            .locals
            .iter()
            .filter(|(t, l)| self.committed.contains_key(t) && l.results.is_none())
            .count() as u64;
        let uncommitted = self
            .locals
            .keys()
            .filter(|t| !self.committed.contains_key(t))
            .count() as u64;
        let unforgotten = self.locals.values().filter(|l| l.results.is_some()).count() as u64;
        let mut counters = vec![
            ("janus_executed", std::mem::take(&mut self.executed)),
            ("janus_fetched", std::mem::take(&mut self.fetched)),
            ("janus_recoveries", std::mem::take(&mut self.recovering)),
            ("janus_abandoned", std::mem::take(&mut self.abandoned)),
            ("janus_forgotten", std::mem::take(&mut self.gc.forgotten)),
            ("janus_replayed", std::mem::take(&mut self.replayed)),
            (
                "janus_restarts_from_image",
                std::mem::take(&mut self.from_image),
            ),
            (
                "janus_replay_unreached",
                std::mem::take(&mut self.unreached),
            ),
            ("janus_caught_up", std::mem::take(&mut self.caught_up)),
            ("janus_catch_up_us", std::mem::take(&mut self.catch_up_us)),
            ("janus_graph_walk_steps", self.graph.take_steps()),
        ];
        for (name, n) in LATE.into_iter().zip(std::mem::take(&mut self.late)) {
            if n > 0 {
                counters.push((name, n));
            }
        }
        NodeReport {
            client: None,
            counters,
            gauges: vec![
                ("janus_committed_unexecuted", waiting),
                ("janus_preaccepted_uncommitted", uncommitted),
                ("janus_executed_unforgotten", unforgotten),
                ("janus_graph_vertices", self.graph.len() as u64),
                ("janus_tombstones", self.gc.tombstones() as u64),
                ("janus_forgot_record_bytes", self.gc.record_bytes() as u64),
                ("janus_forgot_bitmap_bytes", self.gc.bitmap_bytes() as u64),
                ("janus_forgot_components", self.gc.components_kept() as u64),
                (
                    "janus_forgot_component_bytes",
                    self.gc.component_bytes() as u64,
                ),
                ("janus_inquiries_parked", self.inquiries.len() as u64),
            ],
            ..NodeReport::default()
        }
    }
}
