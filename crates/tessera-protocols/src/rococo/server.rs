//! The server role (§3.2, Figs. 6, 7 and 10): it keeps the shard's data, the
//! dependency graph `S.dep` and the one-hop tracker; runs immediate pieces
//! at start and deferred ones at commit, in the order every server agrees
//! on; answers status requests of other servers; serves read-only requests;
//! collects old vertices by epochs (§3.4); and drives to commit the
//! transactions whose coordinator fell silent (§3.5).
//!
//! Every handler is idempotent: a repeated start request gets the same
//! replies (the pieces are not run again), a repeated commit request gets
//! the same deferred results once they exist.

mod guard;
mod log;
mod merged;
mod view;

use super::driver::{well_formed, Driver};
use super::msg::{Edge, Msg, PieceReply, Start, Status, Vertex};
use super::tracker::Tracker;
use super::RococoConfig;
use crate::by_type::ByType;
use crate::depgraph::graph::{Decision, DepGraph};
use crate::depgraph::{dry_run, read_piece, run_piece, Granularity, Wakeups};
use rand::Rng;
use std::borrow::Cow;
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId, US};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::topology::Topology;
use tessera_core::txn::{participants, PieceKind, PieceSpec, Txn, Value};
use tessera_core::{FastMap, FastSet};

/// A piece of a local transaction, as received.
struct Received {
    piece: u16,
    inputs: Vec<Value>,
    kind: PieceKind,
    /// The reply of an immediate piece (it ran at start).
    reply: Option<PieceReply>,
}

/// What this server keeps of a transaction with pieces here.
struct Local {
    proc: Txn,
    pieces: Vec<Received>,
    /// Keys the transaction touched here (to forget them in the tracker).
    keys: Vec<Key>,
    /// Keys it wrote here so far: reading them again is reading its own
    /// write, not an observation of another transaction.
    written: Vec<Key>,
    /// The deferred pieces' replies, once `T.finished` (§3.2).
    deferred: Option<Vec<PieceReply>>,
    /// Who asked for the commit reply.
    commit_waiters: Vec<NodeId>,
    /// When a start or commit request for it last arrived.
    last_heard: Time,
    /// Its coordinator has all commit replies (§3.4: committed).
    committed: bool,
    /// When to push the commit reply to the coordinator again, and the
    /// backoff after that: set when the reply was held for ancestors (see
    /// [`RococoServer::push_replies`]), cleared by `Committed`.
    push: Option<(Time, Time)>,
    /// When its first commit request came, and when it was decided here
    /// (the commit phase's waits, counted by type).
    commit_at: Option<Time>,
    decided_at: Option<Time>,
}

/// A status request of ours, unanswered.
struct Asking {
    sent_at: Time,
    tries: u32,
}

/// A read-only request waiting for the writers it conflicts with (Fig. 10).
struct ParkedRo {
    from: NodeId,
    txn: TxnId,
    tag: u32,
    proc: Txn,
    pieces: Vec<u16>,
    inputs: Vec<Vec<Value>>,
    pending: Vec<TxnId>,
}

/// The first start request of a read-only transaction's ordered form,
/// held until no row its immediate pieces read has an unfinished writer
/// here (the coordinator docs have the argument).
struct HeldPass {
    from: NodeId,
    req: Start,
    /// The unfinished writers it waits for.
    pending: Vec<TxnId>,
    since: Time,
}

/// Ordered passes run here (`rococo_passes`), those held first
/// (`rococo_passes_held`) and how long, µs (`rococo_pass_hold_us`).
#[derive(Default)]
struct PassStats {
    passes: u64,
    held: u64,
    hold_us: u64,
}

/// The inputs of `spec` in a start request that gave `given`: those, or,
/// for a piece sent in a chain with the pieces that feed it (none given),
/// their outputs here (`output`); `None` if one has none.
fn fed(
    spec: &PieceSpec,
    given: &[Value],
    output: impl Fn(usize) -> Option<Value>,
) -> Option<Vec<Value>> {
    if !given.is_empty() || spec.inputs.is_empty() {
        return Some(given.to_vec());
    }
    spec.inputs.iter().map(|&j| output(j as usize)).collect()
}

/// The spec of `piece` resolved with the inputs a start request gave;
/// `None` for a piece that does not exist or is chained (sent without the
/// inputs it declares, [`fed`] at its run).
fn given_spec<'a>(proc: &'a Txn, piece: u16, given: &[Value]) -> Option<Cow<'a, PieceSpec>> {
    let p = proc.pieces().get(usize::from(piece))?;
    if given.is_empty() && !p.inputs.is_empty() {
        return None;
    }
    Some(proc.resolve(usize::from(piece), given))
}

const SWEEP: TimerId = TimerId(1);

/// The members of a component of two or more, in execution order.
type Component = Arc<[TxnId]>;

/// The server role of [`super::Rococo`].
pub struct RococoServer {
    cfg: RococoConfig,
    shard: ShardId,
    topology: Arc<Topology>,
    store: Store,
    graph: DepGraph,
    tracker: Tracker,
    locals: FastMap<TxnId, Local>,
    /// Local transactions still STARTED (candidates for recovery).
    started: FastSet<TxnId>,
    wakeups: Wakeups,
    /// Status requests of other servers, answered once the transaction is
    /// COMMITTING here.
    inquiries: FastMap<TxnId, (u64, Vec<NodeId>)>,
    asking: FastMap<TxnId, Asking>,
    ro_parked: Vec<ParkedRo>,
    /// Ordered passes held (see [`HeldPass`]).
    held: Vec<HeldPass>,
    pass_stats: PassStats,
    /// What read-only requests read: the data as of finished transactions.
    view: view::FinishedView,
    /// Read-only requests answered, and those of them that waited.
    ro_reads: (u64, u64),
    /// Recovery drivers started (reported as `rococo_recoveries`; with
    /// `rococo_blocker_recoveries`, those started early for a blocker).
    recoveries: (u64, u64),
    /// Where the commit phase waits (Fig. 7), reported as counters.
    waits: CommitWaits,
    /// Transactions this server drives to commit for a silent coordinator.
    recovering: FastMap<TxnId, Driver>,
    epoch: u64,
    /// Local transactions collected, with the epoch they went and their
    /// component: late duplicates are ignored and status requests answered.
    gone: FastMap<TxnId, (u64, Option<Component>)>,
    /// Merged pieces' OCC+2PC (§4.2), see [`merged`].
    occ: merged::Occ,
    /// The durable log and the replies waiting for it (§3.5), see [`log`].
    log: log::Pending,
    /// The records of the log before a crash, replayed at start.
    recovered: Vec<bytes::Bytes>,
    codec: tessera_core::codec::DecodeCx,
    /// Set while replaying: nothing is logged or sent.
    replaying: bool,
    /// After a restart, until the replayed transactions have finished: the
    /// start requests that wait for them ([`guard`]).
    guard: Option<guard::Guard>,
    /// Events handled and commit-phase waits, by transaction type.
    by_type: ByType,
}

/// Counts of the commit phase's waits (Fig. 7) at one server, to tell
/// where a commit's time goes: a decision blocked until ancestors reach
/// COMMITTING, status requests sent for those another server holds
/// (§3.2), components decided and their sizes (Tarjan's SCCs; a member
/// count above the components means cycles), and executions held back by
/// an unfinished local ancestor outside the component.
#[derive(Default)]
struct CommitWaits {
    /// `rococo_decide_blocked`: decisions that found an ancestor still
    /// STARTED; `rococo_decide_blocked_on`: the ancestors each found that
    /// it had not found before, summed.
    blocked: u64,
    blocked_on: u64,
    /// `rococo_inquiries_sent`: status requests sent, resends included.
    inquiries: u64,
    /// `rococo_components`, `rococo_component_members`,
    /// `rococo_components_cyclic` (more than one member).
    components: u64,
    members: u64,
    cyclic: u64,
    /// `rococo_decided_passed`: vertices decided by the decisions' walks,
    /// the components decided included (those of transactions that do not
    /// involve this server among them).
    passed: u64,
    /// `rococo_exported_start`, `rococo_exported_inquire`: vertices sent in
    /// start replies and in status replies (§3.4: the undecided ancestors);
    /// `rococo_exported_started`: those of them still STARTED here.
    exported_start: u64,
    exported_inquire: u64,
    exported_started: u64,
    /// `rococo_execute_waits`: executions held for an ancestor outside
    /// the component.
    execute_waits: u64,
}

impl CommitWaits {
    fn counters(self) -> [(&'static str, u64); 11] {
        [
            ("rococo_decide_blocked", self.blocked),
            ("rococo_decide_blocked_on", self.blocked_on),
            ("rococo_inquiries_sent", self.inquiries),
            ("rococo_components", self.components),
            ("rococo_component_members", self.members),
            ("rococo_components_cyclic", self.cyclic),
            ("rococo_decided_passed", self.passed),
            ("rococo_exported_start", self.exported_start),
            ("rococo_exported_inquire", self.exported_inquire),
            ("rococo_exported_started", self.exported_started),
            ("rococo_execute_waits", self.execute_waits),
        ]
    }
}

impl RococoServer {
    pub fn new(cfg: RococoConfig, env: ServerEnv) -> Self {
        RococoServer {
            cfg,
            shard: env.shard,
            topology: env.topology,
            store: env.store,
            graph: DepGraph::default(),
            tracker: Tracker::default(),
            locals: tessera_core::fast_map(),
            started: tessera_core::fast_set(),
            wakeups: Wakeups::default(),
            inquiries: tessera_core::fast_map(),
            asking: tessera_core::fast_map(),
            ro_parked: Vec::new(),
            held: Vec::new(),
            pass_stats: PassStats::default(),
            view: view::FinishedView::default(),
            ro_reads: (0, 0),
            recovering: tessera_core::fast_map(),
            epoch: 0,
            gone: tessera_core::fast_map(),
            recoveries: (0, 0),
            waits: CommitWaits::default(),
            occ: merged::Occ::default(),
            log: log::Pending::new(env.durable),
            recovered: env.recovered,
            codec: env.codec,
            replaying: false,
            guard: None,
            by_type: ByType::new("rococo"),
        }
    }

    /// Rebuild the graph and the store from the log (§3.5): start requests
    /// and finishes again, in their order, with nothing logged or sent.
    /// Transactions left DECIDED and unfinished run once the replay is over;
    /// those left STARTED are driven to their decision from here at once,
    /// as a silent coordinator's are (`recover`). Until they have finished,
    /// new start requests that touch their keys wait ([`guard`]).
    fn replay(&mut self, ctx: &mut Ctx<Msg>) {
        let records = std::mem::take(&mut self.recovered);
        if records.is_empty() {
            return;
        }
        self.epoch = ctx.now() / self.cfg.epoch.max(1);
        self.replaying = true;
        let me = ctx.me();
        for (i, bytes) in records.iter().enumerate() {
            match log::Record::decode(bytes, &self.codec) {
                Ok(log::Record::Start(req)) => self.on_start(ctx, me, req, false),
                Ok(log::Record::Merged(req)) => self.occ_replay_commit(ctx, req),
                Ok(log::Record::Prepared {
                    txn,
                    attempt,
                    leader,
                    keys,
                }) => self.occ_replay_prepared(ctx.now(), txn, attempt, leader, keys),
                Ok(log::Record::Aborted { txn, attempt }) => {
                    self.occ_release(ctx.now(), txn, attempt);
                }
                Ok(log::Record::Decided {
                    txn,
                    attempt,
                    commit,
                    reply_to,
                    parts,
                }) => self.occ_replay_decided(txn, attempt, commit, reply_to, parts),
                Ok(log::Record::LeadDone { txn }) => self.occ_replay_lead_done(txn),
                Ok(log::Record::Finish { txn, members }) => {
                    let mut rose = Vec::new();
                    self.graph.mark_decided(&members, self.epoch, &mut rose);
                    self.on_rose(ctx, rose);
                    if self.graph.get(txn).is_some_and(|n| n.local && !n.finished) {
                        self.finish(ctx, txn);
                    }
                }
                Err(e) => {
                    tracing::error!(shard = self.shard.0, record = i, %e, "unreadable log record");
                }
            }
        }
        self.replaying = false;
        let nonce = ctx.rng().random();
        let unfinished = self
            .locals
            .iter()
            .filter(|(t, _)| self.graph.get(**t).is_some_and(|n| n.local && !n.finished));
        self.guard = guard::Guard::new(unfinished.map(|(t, l)| (*t, l.keys.clone())), nonce);
        tracing::debug!(
            shard = self.shard.0,
            records = records.len(),
            "server replayed its log"
        );
        self.drain(ctx);
        // The commit requests of the transactions left STARTED were lost
        // with the crash, and their coordinators resend them only after a
        // backed-off timeout (or have crashed too): ask their servers for
        // the decision now, as for a silent coordinator.
        let mut open: Vec<TxnId> = self.started.iter().copied().collect();
        open.sort_unstable();
        for t in open {
            self.recover(ctx, t);
        }
    }

    /// Vertices in the dependency graph (for tests and statistics).
    pub fn graph_len(&self) -> usize {
        self.graph.len()
    }

    /// The order in which this server finished local transactions is
    /// visible in the versions of the store; tests read it there.
    pub fn store_ref(&self) -> &Store {
        &self.store
    }

    // ---- start phase (Fig. 6) ----

    /// A start request. `merged`: the commit of merged pieces (§4.2), run
    /// under their own locks; any other request whose immediate pieces
    /// touch a key locked by merged pieces waits for their decision.
    fn on_start(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, req: Start, merged: bool) {
        if self.gone.contains_key(&req.txn) {
            // A late request of a transaction long finished.
            if !self.replaying {
                ctx.send(from, Msg::Gone { txn: req.txn });
            }
            return;
        }
        // Replayed requests were not blocked when they were logged.
        if !merged && !self.replaying && self.occ.blocks(self.shard, &req, &self.locals) {
            tracing::trace!(shard = self.shard.0, txn = ?req.txn, "start waits for merged pieces' locks");
            self.occ.park(from, req);
            return;
        }
        if !merged && self.guard.is_some() && self.held_after_restart(ctx, from, &req) {
            return;
        }
        if !merged && !self.replaying && self.is_pass(&req) {
            if self.hold_pass(ctx, from, &req) {
                return;
            }
            self.pass_stats.passes += 1;
        }
        let Start {
            txn,
            proc,
            pieces,
            inputs,
        } = req;
        if !self.locals.contains_key(&txn) {
            if !well_formed(proc.as_ref()) {
                tracing::error!(
                    ?txn,
                    name = proc.name(),
                    "a deferrable piece feeds another piece: not runnable under Rococo"
                );
                return;
            }
            let shards: Arc<[ShardId]> = participants(proc.as_ref()).into();
            self.graph.start_local(txn, shards, self.epoch);
            self.started.insert(txn);
            self.locals.insert(
                txn,
                Local {
                    proc: proc.clone(),
                    pieces: Vec::new(),
                    keys: Vec::new(),
                    written: Vec::new(),
                    deferred: None,
                    commit_waiters: Vec::new(),
                    push: None,
                    last_heard: ctx.now(),
                    committed: false,
                    commit_at: None,
                    decided_at: None,
                },
            );
        }
        let local = self.locals.get_mut(&txn).expect("just ensured");
        local.last_heard = ctx.now();
        tracing::trace!(
            shard = self.shard.0,
            ?txn,
            ?pieces,
            ?from,
            now = ctx.now(),
            "start"
        );
        let mut immediate = Vec::new();
        let mut parents: Vec<(TxnId, Edge)> = Vec::new();
        // An ordered pass, here past its hold (or replayed).
        let pass = proc.read_only();
        let mut added = Start {
            txn,
            proc: proc.clone(),
            pieces: Vec::new(),
            inputs: Vec::new(),
        };
        for (piece, inputs) in pieces.iter().copied().zip(inputs) {
            if let Some(r) = local.pieces.iter().find(|r| r.piece == piece) {
                immediate.extend(r.reply.clone());
                continue;
            }
            let Some(static_spec) = proc.pieces().get(piece as usize) else {
                tracing::warn!(?txn, piece, "start request for a piece that does not exist");
                continue;
            };
            let output = |j: usize| {
                let r = local.pieces.iter().find(|r| usize::from(r.piece) == j)?;
                r.reply.as_ref().map(|r| r.output.clone())
            };
            let Some(inputs) = fed(static_spec, &inputs, output) else {
                tracing::warn!(
                    ?txn,
                    piece,
                    "a chained piece before the pieces that feed it"
                );
                continue;
            };
            let spec = proc.resolve(piece as usize, &inputs);
            if spec.shard != self.shard {
                tracing::warn!(?txn, piece, "start request for another shard's piece");
                continue;
            }
            if pass && spec.kind == PieceKind::Immediate {
                self.tracker.access_held(txn, &spec.reads, &mut parents);
            } else {
                self.tracker
                    .access(txn, spec.kind, &spec.reads, &spec.writes, &mut parents);
            }
            local
                .keys
                .extend(spec.reads.iter().chain(&spec.writes).map(|a| a.key));
            let reply = (spec.kind == PieceKind::Immediate).then(|| {
                let declared = spec.writes.iter().map(|a| a.key);
                self.view.before_immediate(&self.store, declared.clone());
                let reply = run_piece(
                    &mut self.store,
                    txn,
                    &mut local.written,
                    &local.proc,
                    &spec,
                    piece,
                    &inputs,
                    Granularity::Row,
                );
                self.view
                    .after_immediate(&self.store, txn, declared, &reply.writes);
                reply
            });
            immediate.extend(reply.clone());
            added.pieces.push(piece);
            added.inputs.push(inputs.clone());
            local.pieces.push(Received {
                piece,
                inputs,
                kind: spec.kind,
                reply,
            });
        }
        self.graph.add_parents(txn, &parents);
        if self.replaying {
            return;
        }
        if !added.pieces.is_empty() {
            let rec = if merged {
                log::Record::Merged(added)
            } else {
                log::Record::Start(added)
            };
            self.log.append(ctx, &rec);
        }
        let deps = self.export(txn, false);
        self.log.reply(
            ctx,
            from,
            Msg::StartOk {
                txn,
                immediate,
                received: pieces,
                deps,
            },
        );
    }

    /// After a restart, whether `req` must wait for the replayed
    /// transactions ([`guard`]): it is held when its new pieces touch a key
    /// of a protected one. New pieces of a protected transaction show that
    /// it was never reported, so it is protected no more.
    fn held_after_restart(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, req: &Start) -> bool {
        let local = self.locals.get(&req.txn);
        let mut keys = Vec::new();
        for (&piece, inputs) in req.pieces.iter().zip(&req.inputs) {
            let received = local.is_some_and(|l| l.pieces.iter().any(|r| r.piece == piece));
            if received {
                continue;
            }
            // A chained piece (sent without its inputs) is keyed by its
            // feeders' outputs, which do not exist before it runs: its
            // rows are the held pass's to check ([`Self::hold_pass`]).
            let Some(spec) = given_spec(&req.proc, piece, inputs) else {
                continue;
            };
            if spec.shard == self.shard {
                keys.extend(spec.reads.iter().chain(&spec.writes).map(|a| a.key));
            }
        }
        let Some(g) = self.guard.as_mut() else {
            return false;
        };
        if keys.is_empty() {
            return false;
        }
        g.unprotect(req.txn);
        if !g.conflicts(&keys) {
            self.release_held(ctx);
            return false;
        }
        tracing::trace!(shard = self.shard.0, txn = ?req.txn, "start waits for the replayed transactions");
        g.hold(from, req.clone(), keys);
        if self.unprotect_waiting(req.txn) {
            self.release_held(ctx);
        }
        true
    }

    /// `x` was never COMMITTING before the restart (a request of it is held
    /// here or at another server, [`guard`]), so no protected transaction
    /// whose commit waits for it was reported: stop protecting them.
    /// Whether there were any.
    fn unprotect_waiting(&mut self, x: TxnId) -> bool {
        let Some(g) = self.guard.as_mut() else {
            return false;
        };
        let waiting: Vec<TxnId> = g
            .protected()
            .into_iter()
            .filter(|&t| matches!(self.graph.decide(t), Decision::Blocked(a) if a.contains(&x)))
            .collect();
        for &t in &waiting {
            g.unprotect(t);
        }
        !waiting.is_empty()
    }

    /// While a guard is up, once per retransmission timeout: ask the
    /// servers of the protected transactions still STARTED, and of the
    /// STARTED ancestors the protected ones wait for, whether they hold a
    /// start request of them ([`guard`]: servers restarted close together
    /// may each hold what the other's protected transactions wait for).
    /// The status requests about those that do not involve this server go
    /// again too, at this pace rather than backed off: the guard holds
    /// every new request on the protected keys meanwhile, and in
    /// `rococo_servers_survive_crashes` seed 1825 a backed-off status
    /// request (up to `8 × retransmit`) met the asked server down three
    /// times and a loss once, so the guard, and every request it held,
    /// waited 460 ms for an answer the asked server had all along.
    fn ask_held(&mut self, ctx: &mut Ctx<Msg>, now: Time) {
        let every = self.cfg.retransmit;
        let Some(g) = self.guard.as_mut() else {
            return;
        };
        if !g.ask_due(now, every) {
            return;
        }
        let mut about = Vec::new();
        for t in g.protected() {
            // A STARTED `t` is its own blocker.
            if let Decision::Blocked(a) = self.graph.decide(t) {
                about.extend(a);
            }
        }
        about.sort_unstable();
        about.dedup();
        let nonce = g.nonce();
        let mut elsewhere = Vec::new();
        for x in about {
            if g.never_committing(x) {
                continue;
            }
            let Some(n) = self.graph.get(x) else {
                continue;
            };
            for &s in n.shards.iter().filter(|&&s| s != self.shard) {
                ctx.send(self.topology.leader(s), Msg::AskHeld { txn: x, nonce });
            }
            if !n.local {
                elsewhere.push(x);
            }
        }
        for x in elsewhere {
            let ask = self.asking.entry(x).or_insert(Asking {
                sent_at: now,
                tries: 0,
            });
            ask.sent_at = now;
            let tries = ask.tries;
            if let Some(to) = self.asked_server(x, tries) {
                self.waits.inquiries += 1;
                ctx.send(to, Msg::Inquire { txn: x });
            }
        }
    }

    /// Another server holds a request of `x`, and says so to a question of
    /// this incarnation (`nonce`): neither `x` nor what waits for it was
    /// reported before the restart ([`guard`]).
    fn on_held(&mut self, ctx: &mut Ctx<Msg>, x: TxnId, nonce: u64) {
        let Some(g) = self.guard.as_mut().filter(|g| g.nonce() == nonce) else {
            return;
        };
        tracing::trace!(shard = self.shard.0, txn = ?x, "held at another server");
        g.learn_unreported(x);
        self.unprotect_waiting(x);
        self.release_held(ctx);
    }

    /// Serve the held requests that touch no protected key any more, and
    /// drop the guard once nothing is protected or held.
    fn release_held(&mut self, ctx: &mut Ctx<Msg>) {
        let Some(g) = self.guard.as_mut() else {
            return;
        };
        let free = g.releasable();
        if g.is_done() {
            self.guard = None;
            tracing::debug!(shard = self.shard.0, "replayed transactions finished");
        }
        for (from, req) in free {
            self.on_start(ctx, from, req, false);
        }
    }

    // ---- commit phase (Fig. 7) ----

    fn on_commit(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, deps: &[Vertex]) {
        let Some(local) = self.locals.get_mut(&txn) else {
            if self.gone.contains_key(&txn) {
                ctx.send(from, Msg::Gone { txn });
            } else {
                tracing::warn!(
                    ?txn,
                    "commit request for a transaction that never started here"
                );
            }
            return;
        };
        local.last_heard = ctx.now();
        local.commit_at.get_or_insert(ctx.now());
        tracing::trace!(shard = self.shard.0, ?txn, ?from, now = ctx.now(), "commit");
        if let Some(results) = &local.deferred {
            let msg = Msg::CommitOk {
                txn,
                deferred: results.clone(),
            };
            self.log.reply(ctx, from, msg);
        } else if !local.commit_waiters.contains(&from) {
            local.commit_waiters.push(from);
        }
        let mut rose = Vec::new();
        for v in deps {
            self.graph.merge(v, self.epoch, &mut rose);
        }
        if self.graph.raise(txn, Status::Committing, self.epoch) {
            rose.push(txn);
        }
        self.on_rose(ctx, rose);
        self.wakeups.push(txn);
        self.drain(ctx);
    }

    /// Transactions whose status rose: wake who waits for them, answer the
    /// status requests parked on them.
    fn on_rose(&mut self, ctx: &mut Ctx<Msg>, rose: Vec<TxnId>) {
        for t in rose {
            self.started.remove(&t);
            self.asking.remove(&t);
            self.wakeups.wake(t);
            // A local transaction known COMMITTING has all its pieces here:
            // it is decided and executed here even if its own commit request
            // never comes (its coordinator crashed after sending others).
            if self.graph.get(t).is_some_and(|n| n.local && !n.finished) {
                self.wakeups.push(t);
            }
            if let Some((_, askers)) = self.inquiries.remove(&t) {
                let deps = self.export(t, true);
                for a in askers {
                    ctx.send(
                        a,
                        Msg::InquireOk {
                            txn: t,
                            deps: deps.clone(),
                        },
                    );
                }
            }
        }
    }

    /// Look again at every transaction whose awaited event happened.
    fn drain(&mut self, ctx: &mut Ctx<Msg>) {
        while let Some(t) = self.wakeups.pop() {
            self.progress(ctx, t);
        }
        self.release_held(ctx);
    }

    /// Move `t` along Fig. 7 as far as it can go now.
    fn progress(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        match self.graph.status(t) {
            None | Some(Status::Started) => {}
            Some(Status::Committing) => self.settle(ctx, t),
            Some(Status::Decided) => self.try_execute(ctx, t),
        }
    }

    /// Fig. 7 for the COMMITTING `t`: wait for its STARTED ancestors, or
    /// decide its component — and with it every component the walk passed
    /// ([`crate::depgraph::DepGraph::settle`]), so that transactions that
    /// never involve this server do not stay COMMITTING here, crossed by
    /// every later walk and sent again in every export as undecided
    /// (§3.4: only undecided ancestors are sent). At Fig. 14's 100 clients
    /// per server, deciding only `t`'s own component left ~969 KB of graph
    /// in each transaction's replies (docs/results/rococo.md).
    fn settle(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let mut rose = Vec::new();
        match self.graph.settle(t, self.epoch, &mut rose) {
            Decision::Blocked(ancestors) => {
                tracing::trace!(shard = self.shard.0, txn = ?t, ?ancestors, "blocked");
                if let Some(g) = self.guard.as_mut() {
                    // Waits for a request held here or elsewhere: never
                    // reported.
                    if g.is_protected(t) && ancestors.iter().any(|&a| g.never_committing(a)) {
                        g.unprotect(t);
                    }
                }
                self.waits.blocked += 1;
                self.waits.blocked_on += ancestors.len() as u64;
                for a in ancestors {
                    self.wakeups.wait(a, t);
                    let local = self.graph.get(a).is_some_and(|n| n.local);
                    if !local {
                        self.ask(ctx, a);
                    }
                }
            }
            Decision::Scc(members) => {
                tracing::trace!(shard = self.shard.0, txn = ?t, ?members, "decided");
                self.waits.components += 1;
                self.waits.members += members.len() as u64;
                self.waits.cyclic += u64::from(members.len() > 1);
                self.waits.passed += rose.len() as u64;
                for m in &rose {
                    if let Some(l) = self.locals.get_mut(m) {
                        l.decided_at.get_or_insert(ctx.now());
                    }
                }
                self.on_rose(ctx, rose);
                self.try_execute(ctx, t);
            }
        }
    }

    /// What to send about `t` (§3.4), counted: in a status reply
    /// (`inquire`) or a start reply.
    fn export(&mut self, t: TxnId, inquire: bool) -> Vec<Vertex> {
        let deps = self.graph.export(t);
        let n = deps.len() as u64;
        if inquire {
            self.waits.exported_inquire += n;
        } else {
            self.waits.exported_start += n;
        }
        self.waits.exported_started +=
            deps.iter().filter(|v| v.status == Status::Started).count() as u64;
        deps
    }

    /// Send a status request for `a`, which does not involve this server,
    /// to a server it involves (§3.2).
    fn ask(&mut self, ctx: &mut Ctx<Msg>, a: TxnId) {
        if self.asking.contains_key(&a) {
            return;
        }
        let Some(to) = self.asked_server(a, 0) else {
            return;
        };
        self.waits.inquiries += 1;
        ctx.send(to, Msg::Inquire { txn: a });
        self.asking.insert(
            a,
            Asking {
                sent_at: ctx.now(),
                tries: 0,
            },
        );
    }

    fn asked_server(&self, a: TxnId, tries: u32) -> Option<NodeId> {
        let n = self.graph.get(a)?;
        if n.shards.is_empty() {
            return None;
        }
        let s = n.shards[tries as usize % n.shards.len()];
        Some(self.topology.leader(s))
    }

    /// Run the deferred pieces of `t`'s component here, in its order, once
    /// every local ancestor outside the component has finished (Fig. 7).
    fn try_execute(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let members = self.graph.members(t);
        for &m in members.iter() {
            let Some(n) = self.graph.get(m) else {
                continue;
            };
            if !n.local || n.finished {
                continue;
            }
            let blocker = n.parents.iter().map(|(p, _)| *p).find(|p| {
                !members.contains(p)
                    && self
                        .graph
                        .get(*p)
                        .is_some_and(|pn| pn.local && !pn.finished)
            });
            if let Some(p) = blocker {
                tracing::trace!(shard = self.shard.0, txn = ?t, waits = ?p, "execution waits");
                self.waits.execute_waits += 1;
                self.wakeups.wait(p, t);
                return;
            }
        }
        for &m in members.iter() {
            let runnable = self.graph.get(m).is_some_and(|n| n.local && !n.finished);
            if runnable {
                self.finish(ctx, m);
            }
        }
        // Read-only requests read once the whole component finished here:
        // none sees some of its members and not others.
        for &m in members.iter() {
            self.release_ro(ctx, m);
            self.release_passes(ctx, m);
        }
    }

    /// Execute `t`'s deferred pieces here, set `T.finished`, reply.
    fn finish(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let local = self.locals.get_mut(&t).expect("a local transaction");
        let proc = local.proc.clone();
        let mut order: Vec<usize> = (0..local.pieces.len())
            .filter(|&i| local.pieces[i].kind == PieceKind::Deferrable)
            .collect();
        order.sort_unstable_by_key(|&i| local.pieces[i].piece);
        let mut replies = Vec::with_capacity(order.len());
        for i in order {
            let r = &local.pieces[i];
            let spec = proc.resolve(r.piece as usize, &r.inputs);
            let reply = run_piece(
                &mut self.store,
                t,
                &mut local.written,
                &proc,
                &spec,
                r.piece,
                &r.inputs,
                Granularity::Row,
            );
            for &k in &reply.writes {
                self.view.deferred(k);
            }
            replies.push(reply);
        }
        self.view.finished(t, &local.written);
        if let (Some(c), Some(d)) = (local.commit_at, local.decided_at) {
            let ty = proc.name();
            let now = ctx.now();
            self.by_type.add(ty, "srv_commits", 1);
            self.by_type
                .add(ty, "srv_decide_wait_us", d.saturating_sub(c) / US);
            self.by_type
                .add(ty, "srv_execute_wait_us", now.saturating_sub(d) / US);
        }
        let waiters = std::mem::take(&mut local.commit_waiters);
        if waiters.contains(&t.node()) {
            let rto = self.cfg.retransmit;
            local.push = Some((ctx.now() + rto, rto));
        }
        local.deferred = Some(replies.clone());
        tracing::trace!(shard = self.shard.0, txn = ?t, "finished");
        // The replies wait for the records before the finish, not for the
        // finish itself: a crash that takes it back leaves what the
        // deferred pieces ran on, and the restarted server runs them again
        // before anything else touches their keys ([`guard`]).
        for w in waiters {
            let msg = Msg::CommitOk {
                txn: t,
                deferred: replies.clone(),
            };
            self.log.reply(ctx, w, msg);
        }
        if !self.replaying {
            let members = self.graph.members(t);
            self.log
                .append(ctx, &log::Record::Finish { txn: t, members });
        }
        if let Some(g) = self.guard.as_mut() {
            g.unprotect(t);
        }
        if let Some(n) = self.graph.get_mut(t) {
            n.finished = true;
            n.epoch = self.epoch;
        }
        self.wakeups.wake(t);
    }

    // ---- status requests ----

    fn on_inquire(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if self
            .graph
            .status(txn)
            .is_some_and(|s| s >= Status::Committing)
        {
            let mut deps = self.export(txn, true);
            // DECIDED with no shard known: collected here, then adopted
            // again as a member of a component (`DepGraph::mark_decided`).
            // This shard is one of its shards, as for a tombstone below.
            if deps[0].shards.is_empty() {
                deps[0].shards = Arc::from([self.shard]);
            }
            ctx.send(from, Msg::InquireOk { txn, deps });
        } else if let Some((_, scc)) = self.gone.get(&txn) {
            // A collected transaction had pieces here: this shard is one of
            // its shards, and a vertex names at least one (the codec refuses
            // none; with none, the asker's process refused the reply and
            // closed the connection at each resend of its status request).
            let v = Vertex {
                txn,
                status: Status::Decided,
                shards: Arc::from([self.shard]),
                parents: Vec::new(),
                scc: scc.clone(),
            };
            ctx.send(from, Msg::InquireOk { txn, deps: vec![v] });
        } else if self.locals.contains_key(&txn) {
            let epoch = self.epoch;
            let (_, askers) = self.inquiries.entry(txn).or_insert((epoch, Vec::new()));
            if !askers.contains(&from) {
                askers.push(from);
            }
        } else {
            ctx.send(from, Msg::NotHere { txn });
        }
    }

    /// `from` has not seen `txn` start: ask its next server at once, once
    /// around its servers; after that the sweep's backed-off resends go on.
    fn on_not_here(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        let servers = self.graph.get(txn).map_or(0, |n| n.shards.len());
        let Some(ask) = self.asking.get_mut(&txn) else {
            return;
        };
        if ask.tries as usize + 1 >= servers {
            return;
        }
        ask.tries += 1;
        ask.sent_at = ctx.now();
        let tries = ask.tries;
        if let Some(to) = self.asked_server(txn, tries).filter(|to| *to != from) {
            self.waits.inquiries += 1;
            ctx.send(to, Msg::Inquire { txn });
        }
    }

    fn on_inquire_ok(&mut self, ctx: &mut Ctx<Msg>, deps: &[Vertex]) {
        let mut rose = Vec::new();
        for v in deps {
            self.graph.merge(v, self.epoch, &mut rose);
        }
        self.on_rose(ctx, rose);
        self.drain(ctx);
    }

    // ---- read-only transactions (§4.1, Fig. 10) ----

    /// Fig. 10: wait until every transaction in `S.dep` that conflicts with
    /// the pieces (wrote a key they read) and was unfinished when the
    /// request came has finished, then read the finished view ([`view`]):
    /// writes of transactions that came later are not seen, so they are
    /// not waited for either — a read of a hot row is not starved by the
    /// stream of its writers.
    #[allow(clippy::too_many_arguments)]
    fn on_ro_read(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        tag: u32,
        proc: Txn,
        pieces: Vec<u16>,
        inputs: Vec<Vec<Value>>,
    ) {
        let mut ro = ParkedRo {
            from,
            txn,
            tag,
            proc,
            pieces,
            inputs,
            pending: Vec::new(),
        };
        ro.pending = self.ro_conflicts(&ro);
        if ro.pending.is_empty() {
            self.answer_ro(ctx, ro, false);
        } else {
            self.ro_parked.push(ro);
        }
    }

    /// The unfinished local transactions that last wrote a key `ro` reads
    /// here: Fig. 10's "T' in S.dep conflicts with p and T'.finished is
    /// false". The last writer of a key finishes after the earlier ones
    /// (they are its ancestors, or in its component).
    fn ro_conflicts(&self, ro: &ParkedRo) -> Vec<TxnId> {
        let mut pending = Vec::new();
        for (&piece, inputs) in ro.pieces.iter().zip(&ro.inputs) {
            if piece as usize >= ro.proc.pieces().len() {
                continue;
            }
            let spec = ro.proc.resolve(piece as usize, inputs);
            self.unfinished_writers(&spec, &mut pending);
        }
        pending
    }

    /// Add to `pending` the unfinished local transactions that last wrote a
    /// key `spec` reads here. The last writer of a key finishes after the
    /// earlier ones (they are its ancestors, or in its component).
    fn unfinished_writers(&self, spec: &PieceSpec, pending: &mut Vec<TxnId>) {
        for a in &spec.reads {
            let Some(w) = self.tracker.last_writer(a.key) else {
                continue;
            };
            let unfinished = self.graph.get(w).is_some_and(|n| n.local && !n.finished);
            if unfinished && !pending.contains(&w) {
                pending.push(w);
            }
        }
    }

    /// `req` is the first request here of a read-only transaction's
    /// ordered form with immediate pieces: one the server holds
    /// ([`HeldPass`]). Its procedure promises that its immediate pieces
    /// are all here and feed every other piece, so nothing of it is
    /// anywhere else yet ([`tessera_core::txn::Procedure::ordered`]).
    fn is_pass(&self, req: &Start) -> bool {
        !self.locals.contains_key(&req.txn)
            && req.proc.read_only()
            && req.pieces.iter().any(|&p| {
                req.proc
                    .pieces()
                    .get(usize::from(p))
                    .is_some_and(|s| s.kind == PieceKind::Immediate)
            })
    }

    /// Hold the ordered pass `req` if a row its immediate pieces read has
    /// an unfinished writer here (the coordinator docs have the argument);
    /// whether it is held. A resent request of a held pass is dropped.
    fn hold_pass(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, req: &Start) -> bool {
        if let Some(h) = self.held.iter_mut().find(|h| h.req.txn == req.txn) {
            h.from = from;
            return true;
        }
        let pending = self.pass_writers(req);
        if pending.is_empty() {
            return false;
        }
        tracing::trace!(shard = self.shard.0, txn = ?req.txn, ?pending, "ordered pass held");
        self.pass_stats.held += 1;
        self.held.push(HeldPass {
            from,
            req: req.clone(),
            pending,
            since: ctx.now(),
        });
        true
    }

    /// The unfinished writers of the rows the immediate pieces of `req`
    /// read here, on the current data (a chained piece fed by its feeders'
    /// outputs on it), up to the first piece that has some: those after it
    /// would be keyed by data still to change.
    fn pass_writers(&self, req: &Start) -> Vec<TxnId> {
        let proc = &req.proc;
        let mut outputs: Vec<Option<Value>> = vec![None; proc.pieces().len()];
        let mut pending = Vec::new();
        for (&piece, given) in req.pieces.iter().zip(&req.inputs) {
            let i = usize::from(piece);
            let Some(p) = proc.pieces().get(i) else {
                continue;
            };
            if p.kind != PieceKind::Immediate {
                continue;
            }
            let Some(inputs) = fed(p, given, |j| outputs.get(j).cloned().flatten()) else {
                continue;
            };
            let spec = proc.resolve(i, &inputs);
            self.unfinished_writers(&spec, &mut pending);
            if !pending.is_empty() {
                break;
            }
            outputs[i] = Some(dry_run(&self.store, proc, &spec, piece, &inputs).output);
        }
        pending
    }

    /// `finished` finished here: serve the held passes that waited for it
    /// last and meet no other unfinished writer now.
    fn release_passes(&mut self, ctx: &mut Ctx<Msg>, finished: TxnId) {
        let mut ready = Vec::new();
        let mut i = 0;
        while i < self.held.len() {
            let h = &mut self.held[i];
            h.pending.retain(|t| *t != finished);
            if h.pending.is_empty() {
                ready.push(self.held.remove(i));
            } else {
                i += 1;
            }
        }
        for mut h in ready {
            h.pending = self.pass_writers(&h.req);
            if h.pending.is_empty() {
                self.pass_stats.hold_us += (ctx.now() - h.since) / US;
                self.on_start(ctx, h.from, h.req, false);
            } else {
                self.held.push(h);
            }
        }
    }

    /// `finished` finished here: answer the read-only requests that waited
    /// for it last.
    fn release_ro(&mut self, ctx: &mut Ctx<Msg>, finished: TxnId) {
        let mut i = 0;
        while i < self.ro_parked.len() {
            let ro = &mut self.ro_parked[i];
            ro.pending.retain(|t| *t != finished);
            if ro.pending.is_empty() {
                let ro = self.ro_parked.swap_remove(i);
                self.answer_ro(ctx, ro, true);
            } else {
                i += 1;
            }
        }
    }

    fn answer_ro(&mut self, ctx: &mut Ctx<Msg>, ro: ParkedRo, waited: bool) {
        self.ro_reads.0 += 1;
        self.ro_reads.1 += u64::from(waited);
        let mut results = Vec::with_capacity(ro.pieces.len());
        let mut seen = Vec::with_capacity(ro.pieces.len());
        let (view, store) = (&self.view, &self.store);
        for (&piece, inputs) in ro.pieces.iter().zip(&ro.inputs) {
            if piece as usize >= ro.proc.pieces().len() {
                continue;
            }
            let spec = ro.proc.resolve(piece as usize, inputs);
            let (reply, columns) = read_piece(
                |k| view.get(store, k),
                ro.txn,
                &ro.proc,
                &spec,
                piece,
                inputs,
            );
            results.push(reply);
            // Only when rounds are compared by them: they cost bytes.
            if self.cfg.ro_column_versions {
                seen.push(columns);
            }
        }
        // Like every reply (`log`), after the records of what it read: a
        // finish a crash takes back must not have been seen.
        let msg = Msg::RoReadOk {
            txn: ro.txn,
            tag: ro.tag,
            results,
            seen,
        };
        self.log.reply(ctx, ro.from, msg);
    }

    /// The transaction type (procedure name) a message is about, for the
    /// counters by type; `other` when this server does not know it.
    fn type_of(&self, msg: &Msg) -> &'static str {
        let txn = match msg {
            Msg::Start(r) | Msg::OccExecute(r) => return r.proc.name(),
            Msg::OccCommit { req, .. }
            | Msg::OccPrepare { req, .. }
            | Msg::OccDecide { req, .. } => return req.proc.name(),
            Msg::RoRead { proc, .. } => return proc.name(),
            Msg::StartOk { txn, .. }
            | Msg::CommitOk { txn, .. }
            | Msg::Commit { txn, .. }
            | Msg::Committed { txn }
            | Msg::Gone { txn }
            | Msg::Inquire { txn }
            | Msg::InquireOk { txn, .. }
            | Msg::NotHere { txn }
            | Msg::RoReadOk { txn, .. }
            | Msg::OccExecuteOk { txn, .. }
            | Msg::OccVote { txn, .. }
            | Msg::OccDecideOk { txn, .. }
            | Msg::OccRetry { txn }
            | Msg::OccAsk { txn, .. }
            | Msg::OccAbort { txn, .. }
            | Msg::AskHeld { txn, .. }
            | Msg::Held { txn, .. } => *txn,
        };
        self.locals.get(&txn).map_or("other", |l| l.proc.name())
    }

    // ---- timers: resends, recovery, garbage collection ----

    fn sweep(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let epoch = now / self.cfg.epoch.max(1);
        if epoch > self.epoch {
            self.epoch = epoch;
            self.collect(now);
        }
        // Resend our unanswered status requests, to the next server.
        let mut resend = Vec::new();
        for (&a, ask) in self.asking.iter_mut() {
            let rto = self.cfg.retransmit.saturating_mul(1 << ask.tries.min(3));
            if now.saturating_sub(ask.sent_at) >= rto {
                ask.tries += 1;
                ask.sent_at = now;
                resend.push((a, ask.tries));
            }
        }
        resend.sort_unstable();
        for (a, tries) in resend {
            if let Some(to) = self.asked_server(a, tries) {
                self.waits.inquiries += 1;
                ctx.send(to, Msg::Inquire { txn: a });
            }
        }
        // Transactions whose coordinator fell silent in the start phase:
        // drive them to commit from here (§3.5), sooner when others wait.
        let mut silent: Vec<TxnId> = self
            .started
            .iter()
            .copied()
            .filter(|t| {
                let patience = if self.wakeups.awaited(*t) {
                    self.cfg.recover_blocker_after
                } else {
                    self.cfg.recover_after
                };
                !self.recovering.contains_key(t)
                    && self
                        .locals
                        .get(t)
                        .is_some_and(|l| now.saturating_sub(l.last_heard) > patience)
            })
            .collect();
        silent.sort_unstable();
        for t in silent {
            tracing::debug!(txn = ?t, "recovering a transaction of a silent coordinator");
            self.recoveries.0 += 1;
            self.recoveries.1 += u64::from(self.wakeups.awaited(t));
            self.recover(ctx, t);
        }
        self.occ_sweep(ctx, now);
        self.ask_held(ctx, now);
        self.push_replies(ctx, now);
        let cap = self.cfg.retransmit * 8;
        let mut ids: Vec<TxnId> = self.recovering.keys().copied().collect();
        ids.sort_unstable();
        for t in ids {
            if let Some(d) = self.recovering.get_mut(&t) {
                d.tick(ctx, cap);
            }
        }
        ctx.set_timer(self.cfg.sweep, SWEEP);
    }

    /// Push again the commit replies that were held for ancestors until
    /// the coordinator says it has them (`Committed`), backing off to
    /// `8 × retransmit`. While a reply is held the coordinator's resends
    /// back off (nothing is lost, the server just does not answer yet):
    /// when the held reply is then lost (a partition), the coordinator
    /// would not ask again for up to its capped timeout, and every
    /// transaction of the hot key behind it waits as long (TPC-C tiny seed
    /// 57: the replies freed by a blocker's recovery fell into a partition
    /// and the clients' next resend came 77 ms after it healed).
    fn push_replies(&mut self, ctx: &mut Ctx<Msg>, now: Time) {
        let cap = self.cfg.retransmit * 8;
        let mut due: Vec<TxnId> = self
            .locals
            .iter()
            .filter(|(_, l)| !l.committed && l.push.is_some_and(|(at, _)| at <= now))
            .map(|(t, _)| *t)
            .collect();
        due.sort_unstable();
        for t in due {
            let local = self.locals.get_mut(&t).expect("listed");
            let (Some(results), Some((_, rto))) = (&local.deferred, local.push) else {
                continue;
            };
            let msg = Msg::CommitOk {
                txn: t,
                deferred: results.clone(),
            };
            let rto = (rto * 2).min(cap);
            local.push = Some((now + rto, rto));
            self.log.reply(ctx, t.node(), msg);
        }
    }

    /// Drive `t` to commit from here with the coordinator's logic (§3.5):
    /// ask every server of `t` for its start replies again, then send them
    /// the commit request. Idempotent at the servers, so it is safe while
    /// the real coordinator is merely slow.
    fn recover(&mut self, ctx: &mut Ctx<Msg>, t: TxnId) {
        let proc = self.locals[&t].proc.clone();
        let mut d = Driver::new(
            t,
            proc,
            &self.topology,
            &self.cfg.merges,
            ctx.now(),
            self.cfg.retransmit,
        );
        d.begin(ctx);
        self.recovering.insert(t, d);
    }

    /// Epoch garbage collection (§3.4): forget transactions committed two
    /// epochs ago (their coordinator has every reply; one whose coordinator
    /// died is forgotten once no request has come for `forget_after`), and
    /// what was learnt of others untouched as long, unless awaited.
    fn collect(&mut self, now: Time) {
        let epoch = self.epoch;
        let mut gone = Vec::new();
        let (wakeups, asking, locals) = (&self.wakeups, &self.asking, &self.locals);
        let forget_after = self.cfg.forget_after;
        for d in self.graph.collect(epoch, |t, n| {
            if n.local {
                locals
                    .get(&t)
                    .is_none_or(|l| l.committed || now.saturating_sub(l.last_heard) > forget_after)
            } else {
                !wakeups.awaited(t) && !asking.contains_key(&t)
            }
        }) {
            if d.local {
                gone.push((d.txn, d.scc));
            }
        }
        for (t, scc) in gone {
            if let Some(l) = self.locals.remove(&t) {
                self.tracker.forget(t, &l.keys);
            }
            self.recovering.remove(&t);
            self.gone.insert(t, (epoch, scc));
        }
        // A collected transaction is remembered (and late requests get
        // `Gone`) for two epochs, and at least `forget_after`: a request
        // that comes after it is forgotten is taken as a new transaction's
        // and runs its pieces again, so the mark must outlive the resends
        // of any driver still going (they stop at the first `Gone`).
        let keep = 2.max(forget_after / self.cfg.epoch.max(1));
        self.gone.retain(|_, (e, _)| *e + keep > epoch);
        // A status request about a transaction that never showed up here
        // is dropped after two epochs; its asker resends it.
        self.inquiries.retain(|_, (e, _)| *e + 2 > epoch);
    }
}

impl Node<Msg> for RococoServer {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        self.replay(ctx);
        ctx.set_timer(self.cfg.sweep, SWEEP);
        self.graph.charge_walks(ctx, self.cfg.graph_cpu);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        self.by_type.add("log", "events", 1);
        self.log.persisted(ctx, token);
        self.graph.charge_walks(ctx, self.cfg.graph_cpu);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        let ty = self.type_of(&msg);
        self.by_type.add(ty, "events", 1);
        match msg {
            Msg::Start(req) => self.on_start(ctx, from, req, false),
            Msg::OccExecute(req) => self.on_occ_execute(ctx, from, req),
            Msg::OccCommit { req, outputs } => self.on_occ_commit(ctx, from, req, outputs),
            Msg::OccPrepare {
                attempt,
                req,
                outputs,
            } => self.on_occ_prepare(ctx, from, attempt, req, outputs),
            Msg::OccVote { txn, attempt, ok } => self.on_occ_vote(ctx, from, txn, attempt, ok),
            Msg::OccDecide {
                attempt,
                commit,
                reply_to,
                req,
            } => self.on_occ_decide(ctx, from, attempt, commit, reply_to, req),
            Msg::OccDecideOk { txn, attempt } => self.on_occ_decide_ok(ctx, from, txn, attempt),
            Msg::OccAsk { txn, attempt } => self.on_occ_ask(ctx, from, txn, attempt),
            Msg::OccAbort { txn, attempt } => self.on_occ_abort(ctx, from, txn, attempt),
            // Replies to this server's own recovery drivers.
            Msg::OccExecuteOk { txn, results } => {
                if let Some(d) = self.recovering.get_mut(&txn) {
                    d.on_occ_execute_ok(ctx, results);
                }
            }
            Msg::OccRetry { txn } => {
                if let Some(d) = self.recovering.get_mut(&txn) {
                    d.on_occ_retry(ctx);
                }
            }
            Msg::Commit { txn, deps } => self.on_commit(ctx, from, txn, &deps),
            Msg::Committed { txn } => {
                // Only the transaction's own coordinator's word lets it be
                // collected two epochs on: when a server's recovery driver
                // finished it, the coordinator may merely be slow and still
                // resending, and must get its replies, not `Gone` (it is
                // collected after `forget_after` without a request).
                if let Some(l) = self.locals.get_mut(&txn).filter(|_| from == txn.node()) {
                    l.committed = true;
                    l.push = None;
                }
                // Another driver has every commit reply: ours must stop
                // before the servers forget the transaction, or its resent
                // requests would find it gone (unanswered, resent for
                // ever) and, once forgotten, run its merged pieces again.
                self.recovering.remove(&txn);
            }
            Msg::Inquire { txn } => self.on_inquire(ctx, from, txn),
            Msg::AskHeld { txn, nonce } => {
                if self.guard.as_ref().is_some_and(|g| g.holds(txn)) {
                    ctx.send(from, Msg::Held { txn, nonce });
                }
            }
            Msg::Held { txn, nonce } => self.on_held(ctx, txn, nonce),
            Msg::InquireOk { deps, .. } => self.on_inquire_ok(ctx, &deps),
            Msg::NotHere { txn } => self.on_not_here(ctx, from, txn),
            // Another driver finished the transaction ours drives. If it is
            // unfinished here (a restart took back its finish), the server
            // that collected it knows its component: ask it (`guard`).
            Msg::Gone { txn } => {
                self.recovering.remove(&txn);
                if self.graph.get(txn).is_some_and(|n| n.local && !n.finished) {
                    self.waits.inquiries += 1;
                    ctx.send(from, Msg::Inquire { txn });
                }
            }
            Msg::RoRead {
                txn,
                tag,
                proc,
                pieces,
                inputs,
            } => self.on_ro_read(ctx, from, txn, tag, proc, pieces, inputs),
            // Replies to this server's own recovery drivers.
            Msg::StartOk {
                txn,
                immediate,
                received,
                deps,
            } => {
                if let Some(d) = self.recovering.get_mut(&txn) {
                    d.on_start_ok(ctx, immediate, received, deps);
                }
            }
            Msg::CommitOk { txn, deferred } => {
                let done = self
                    .recovering
                    .get_mut(&txn)
                    .is_some_and(|d| d.on_commit_ok(ctx.now(), from, deferred).is_some());
                if done {
                    let d = self.recovering.remove(&txn).expect("present");
                    d.send_committed(ctx);
                }
            }
            Msg::RoReadOk { .. } => {
                tracing::warn!(?from, "server got a coordinator's message");
            }
        }
        self.graph.charge_walks(ctx, self.cfg.graph_cpu);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        self.by_type.add("timer", "events", 1);
        if id == SWEEP {
            self.sweep(ctx);
        }
        self.graph.charge_walks(ctx, self.cfg.graph_cpu);
    }

    /// No transaction here is still in its start phase, nor driven by
    /// this server for a silent coordinator: one cut off there has run its
    /// immediate pieces and not its deferred ones.
    fn settled(&self) -> bool {
        self.started.is_empty()
            && self.recovering.is_empty()
            && !self.guard.as_ref().is_some_and(|g| g.holds_any())
            && self.held.is_empty()
    }

    fn take_report(&mut self) -> NodeReport {
        let (all, blockers) = std::mem::take(&mut self.recoveries);
        let ro = std::mem::take(&mut self.ro_reads);
        let mut counters = vec![
            ("rococo_recoveries", all),
            ("rococo_blocker_recoveries", blockers),
            ("rococo_ro_reads", ro.0),
            ("rococo_ro_reads_waited", ro.1),
            ("rococo_graph_walk_steps", self.graph.take_steps()),
        ];
        let passes = std::mem::take(&mut self.pass_stats);
        counters.extend([
            ("rococo_passes", passes.passes),
            ("rococo_passes_held", passes.held),
            ("rococo_pass_hold_us", passes.hold_us),
        ]);
        counters.extend(std::mem::take(&mut self.waits).counters());
        counters.extend(self.by_type.take());
        NodeReport {
            client: None,
            counters,
            ..NodeReport::default()
        }
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }
}
