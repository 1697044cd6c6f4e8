//! Merged pieces at the server (§4.2): the OCC+2PC that runs the pieces the
//! offline checker merged, in the start phase, "execute-prepare-commit".
//!
//! * **Execute** ([`Msg::OccExecute`]): run the pieces on the current data,
//!   install nothing, return their outputs.
//! * **Prepare** ([`Msg::OccPrepare`], sent by the 2PC leader: the server
//!   of the lowest shard among the merged pieces'): run the pieces again
//!   and compare their outputs with the execution's; if they agree and no
//!   key they touch is locked against them by another transaction, lock
//!   those keys (shared to read, exclusive to write) and vote yes. A prepare of an attempt older than one seen votes no.
//! * **Commit** ([`Msg::OccDecide`]): unlock and run the pieces as an
//!   ordinary start request — edges, dependency graph, `StartOk` to the
//!   transaction's driver (§4.2: "each server will then add appropriate
//!   edges and vertexes to its dep graph"). The keys were locked since the
//!   prepare and the outputs matched then, so the pieces see what their
//!   execution saw (deferrable pieces never touch a merged piece's columns:
//!   the checker made any such piece immediate).
//!
//! While keys are locked, a start request whose immediate pieces touch one
//! of them waits (parked) for the decision: merged pieces hold their keys
//! across servers from prepare to commit, which is what makes them atomic.
//! A prepare never waits (it votes no), so nothing waits in a cycle.
//!
//! The leader is a server, so a crashed client coordinator does not leave
//! locks behind: the leader resends prepares and decisions until answered.
//!
//! **Server crashes** (§3.5 with §4.2's 2PC): a participant logs its
//! prepare (attempt, locked keys) before voting yes, the release of an
//! aborted attempt before acknowledging it, and the commit as a start
//! request ([`super::log::Record::Merged`]); the leader logs each decision
//! with every participant's request before sending it, and forgets it in
//! the log once all acknowledged a commit. Replayed, a participant holds
//! the locks it voted for and a leader resends its decisions; an attempt
//! the leader never decided is presumed aborted.
//!
//! **Termination**: a participant that voted yes and heard nothing for
//! `ask_decision_after` asks the leader ([`Msg::OccAsk`], resent with
//! backoff until a decision comes). Needed when the leader crashed before
//! deciding and no driver resends the commit request (the client crashed
//! too): the restarted leader has no record of the attempt, so nothing
//! else would ever release the participant's locks. See
//! `RococoServer::on_occ_ask` for why presuming abort is safe.
//! A leader votes yes for a transaction whose pieces it already committed,
//! so a driver that retries after the leader forgot the 2PC still ends.

use super::log::Record;
use super::{Local, RococoServer};
use crate::depgraph::{dry_run, PieceReply};
use crate::rococo::msg::{Msg, Start};
use std::borrow::Cow;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TxnId};
use tessera_core::node::Ctx;
use tessera_core::txn::{PieceKind, PieceSpec, Txn, Value};
use tessera_core::FastMap;

/// One server's share of a 2PC led here.
struct Part {
    node: NodeId,
    req: Start,
    outputs: Vec<Value>,
    vote: Option<bool>,
    acked: bool,
}

/// A 2PC of merged pieces led by this server.
struct Lead {
    attempt: u32,
    /// The driver that asked for the commit: start replies go there.
    reply_to: NodeId,
    parts: Vec<Part>,
    decided: Option<bool>,
    sent_at: Time,
    tries: u32,
}

/// The locks of prepared merged pieces on one key: a writer excludes
/// everyone, readers exclude writers only.
#[derive(Default)]
struct Lock {
    writer: Option<TxnId>,
    readers: Vec<TxnId>,
}

impl Lock {
    /// May `txn` access the key (`write`: to write it)?
    fn allows(&self, txn: TxnId, write: bool) -> bool {
        self.writer.is_none_or(|w| w == txn) && (!write || self.readers.iter().all(|r| *r == txn))
    }
}

/// A transaction whose merged pieces are prepared here (a yes vote).
struct Prepared {
    attempt: u32,
    /// The keys it locked, each with whether it writes it.
    keys: Vec<(Key, bool)>,
    /// The 2PC's leader: asked for the decision if none comes.
    leader: NodeId,
    /// When the leader was last heard of (or asked), and how many times
    /// it was asked since.
    heard: Time,
    asked: u32,
}

/// A server's merged-piece state.
#[derive(Default)]
pub(super) struct Occ {
    locks: FastMap<Key, Lock>,
    /// Per transaction prepared here.
    prepared: FastMap<TxnId, Prepared>,
    /// The lowest attempt still acceptable per transaction, and when it
    /// was last touched.
    seen: FastMap<TxnId, (u32, Time)>,
    /// Start requests waiting for locked keys, in arrival order.
    parked: Vec<(NodeId, Start)>,
    leading: FastMap<TxnId, Lead>,
}

/// The keys a piece touches, each with whether it writes it.
fn accesses(spec: &PieceSpec) -> impl Iterator<Item = (Key, bool)> + '_ {
    let writes = spec.writes.iter().map(|a| (a.key, true));
    let reads = spec
        .reads
        .iter()
        .filter(|a| !spec.writes.iter().any(|w| w.key == a.key))
        .map(|a| (a.key, false));
    writes.chain(reads)
}

impl Occ {
    fn allows(&self, txn: TxnId, key: Key, write: bool) -> bool {
        self.locks.get(&key).is_none_or(|l| l.allows(txn, write))
    }

    /// Does `req` run an immediate piece on a key locked against it by
    /// another transaction's merged pieces?
    pub(super) fn blocks(
        &self,
        shard: ShardId,
        req: &Start,
        locals: &FastMap<TxnId, Local>,
    ) -> bool {
        if self.locks.is_empty() {
            return false;
        }
        let have = locals.get(&req.txn);
        req.pieces.iter().zip(&req.inputs).any(|(&piece, inputs)| {
            if have.is_some_and(|l| l.pieces.iter().any(|r| r.piece == piece)) {
                return false;
            }
            let Some(spec) = super::given_spec(&req.proc, piece, inputs) else {
                return false;
            };
            spec.shard == shard
                && spec.kind == PieceKind::Immediate
                && accesses(&spec).any(|(k, w)| !self.allows(req.txn, k, w))
        })
    }

    pub(super) fn park(&mut self, from: NodeId, req: Start) {
        self.parked.push((from, req));
    }

    fn lock(&mut self, txn: TxnId, p: Prepared) {
        for &(k, write) in &p.keys {
            let l = self.locks.entry(k).or_default();
            if write {
                l.writer = Some(txn);
            } else {
                l.readers.push(txn);
            }
        }
        self.prepared.insert(txn, p);
    }

    fn unlock(&mut self, txn: TxnId) {
        let Some(p) = self.prepared.remove(&txn) else {
            return;
        };
        for (k, _) in p.keys {
            if let Some(l) = self.locks.get_mut(&k) {
                if l.writer == Some(txn) {
                    l.writer = None;
                }
                l.readers.retain(|r| *r != txn);
                if l.writer.is_none() && l.readers.is_empty() {
                    self.locks.remove(&k);
                }
            }
        }
    }
}

fn decide_msg(l: &Lead, p: &Part) -> Msg {
    Msg::OccDecide {
        attempt: l.attempt,
        commit: l.decided == Some(true),
        reply_to: l.reply_to,
        req: p.req.clone(),
    }
}

impl RococoServer {
    fn resolve_here<'a>(
        &self,
        proc: &'a Txn,
        piece: u16,
        inputs: &[Value],
    ) -> Option<Cow<'a, PieceSpec>> {
        if piece as usize >= proc.pieces().len() {
            tracing::warn!(piece, "merged piece that does not exist");
            return None;
        }
        let spec = proc.resolve(piece as usize, inputs);
        (spec.shard == self.shard).then_some(spec)
    }

    /// Execute: the pieces' outputs on the current data, nothing installed
    /// (a piece already committed here answers with its committed output).
    pub(super) fn on_occ_execute(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, req: Start) {
        if self.gone.contains_key(&req.txn) {
            ctx.send(from, Msg::Gone { txn: req.txn });
            return;
        }
        let local = self.locals.get(&req.txn);
        let mut results = Vec::with_capacity(req.pieces.len());
        for (&piece, inputs) in req.pieces.iter().zip(&req.inputs) {
            let committed = local
                .and_then(|l| l.pieces.iter().find(|r| r.piece == piece))
                .and_then(|r| r.reply.as_ref());
            let (output, user_abort) = match committed {
                Some(r) => (r.output.clone(), r.user_abort),
                None => {
                    let Some(spec) = self.resolve_here(&req.proc, piece, inputs) else {
                        continue;
                    };
                    let res = dry_run(&self.store, &req.proc, &spec, piece, inputs);
                    (res.output, res.user_abort)
                }
            };
            results.push(PieceReply {
                piece,
                reads: Vec::new(),
                writes: Vec::new(),
                output,
                user_abort,
            });
        }
        ctx.send(
            from,
            Msg::OccExecuteOk {
                txn: req.txn,
                results,
            },
        );
    }

    /// The leader: start a 2PC attempt over the merged pieces' servers (or
    /// resend the commit of the one that succeeded).
    pub(super) fn on_occ_commit(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        req: Start,
        outputs: Vec<Value>,
    ) {
        let txn = req.txn;
        if self.gone.contains_key(&txn) {
            ctx.send(from, Msg::Gone { txn });
            return;
        }
        if req.pieces.len() != outputs.len() || req.inputs.len() != outputs.len() {
            tracing::warn!(?txn, "malformed merged-piece commit request");
            return;
        }
        let attempt = match self.occ.leading.get_mut(&txn) {
            Some(l) if l.decided == Some(true) => {
                l.reply_to = from;
                for p in &l.parts {
                    self.log.reply(ctx, p.node, decide_msg(l, p));
                }
                return;
            }
            Some(l) if l.decided.is_none() => return,
            Some(l) => l.attempt + 1,
            None => 1,
        };
        let mut parts: Vec<Part> = Vec::new();
        for ((&piece, inputs), out) in req.pieces.iter().zip(req.inputs).zip(outputs) {
            let Some(p) = req.proc.pieces().get(piece as usize) else {
                tracing::warn!(?txn, piece, "merged piece that does not exist");
                return;
            };
            let node = self.topology.leader(p.shard);
            let i = match parts.iter().position(|p| p.node == node) {
                Some(i) => i,
                None => {
                    parts.push(Part {
                        node,
                        req: Start {
                            txn,
                            proc: req.proc.clone(),
                            pieces: Vec::new(),
                            inputs: Vec::new(),
                        },
                        outputs: Vec::new(),
                        vote: None,
                        acked: false,
                    });
                    parts.len() - 1
                }
            };
            parts[i].req.pieces.push(piece);
            parts[i].req.inputs.push(inputs);
            parts[i].outputs.push(out);
        }
        parts.sort_by_key(|p| p.node);
        for p in &parts {
            ctx.send(
                p.node,
                Msg::OccPrepare {
                    attempt,
                    req: p.req.clone(),
                    outputs: p.outputs.clone(),
                },
            );
        }
        self.occ.leading.insert(
            txn,
            Lead {
                attempt,
                reply_to: from,
                parts,
                decided: None,
                sent_at: ctx.now(),
                tries: 0,
            },
        );
    }

    /// Prepare: validate, lock, vote.
    pub(super) fn on_occ_prepare(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        attempt: u32,
        req: Start,
        outputs: Vec<Value>,
    ) {
        let txn = req.txn;
        let ok = self.occ_validate(ctx, from, attempt, &req, &outputs);
        tracing::trace!(
            shard = self.shard.0,
            ?txn,
            attempt,
            ok,
            "merged pieces prepared"
        );
        // A yes leaves once its prepare record is durable (a no promises
        // nothing).
        let vote = Msg::OccVote { txn, attempt, ok };
        if ok {
            self.log.reply(ctx, from, vote);
        } else {
            ctx.send(from, vote);
        }
        self.occ_unpark(ctx);
    }

    fn occ_validate(
        &mut self,
        ctx: &mut Ctx<Msg>,
        leader: NodeId,
        attempt: u32,
        req: &Start,
        outputs: &[Value],
    ) -> bool {
        let now = ctx.now();
        let txn = req.txn;
        let committed = self.gone.contains_key(&txn)
            || self.locals.get(&txn).is_some_and(|l| {
                req.pieces
                    .iter()
                    .all(|p| l.pieces.iter().any(|r| r.piece == *p))
            });
        if committed {
            return true;
        }
        let seen = self.occ.seen.entry(txn).or_insert((attempt, now));
        if attempt < seen.0 {
            return false;
        }
        *seen = (attempt, now);
        match self.occ.prepared.get_mut(&txn) {
            Some(p) if p.attempt == attempt => {
                p.heard = now;
                return true;
            }
            Some(p) => {
                // A newer attempt supersedes it: its locks go, for good.
                let a = p.attempt;
                self.occ.unlock(txn);
                self.log.append(ctx, &Record::Aborted { txn, attempt: a });
            }
            None => {}
        }
        let mut keys: Vec<(Key, bool)> = Vec::new();
        for ((&piece, inputs), expected) in req.pieces.iter().zip(&req.inputs).zip(outputs) {
            let Some(spec) = self.resolve_here(&req.proc, piece, inputs) else {
                return false;
            };
            for (k, write) in accesses(&spec) {
                if !self.occ.allows(txn, k, write) {
                    return false;
                }
                match keys.iter_mut().find(|(x, _)| *x == k) {
                    Some(slot) => slot.1 |= write,
                    None => keys.push((k, write)),
                }
            }
            if dry_run(&self.store, &req.proc, &spec, piece, inputs).output != *expected {
                return false;
            }
        }
        self.log.append(
            ctx,
            &Record::Prepared {
                txn,
                attempt,
                leader,
                keys: keys.clone(),
            },
        );
        let p = Prepared {
            attempt,
            keys,
            leader,
            heard: now,
            asked: 0,
        };
        self.occ.lock(txn, p);
        true
    }

    /// The leader: a vote; decide once every server voted yes or one no.
    pub(super) fn on_occ_vote(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        attempt: u32,
        ok: bool,
    ) {
        let Some(l) = self.occ.leading.get_mut(&txn) else {
            return;
        };
        if attempt != l.attempt {
            // A yes to an attempt already aborted: release its locks.
            if ok && attempt < l.attempt {
                ctx.send(from, Msg::OccAbort { txn, attempt });
            }
            return;
        }
        let Some(i) = l.parts.iter().position(|p| p.node == from) else {
            // A yes to an attempt presumed aborted (`on_occ_ask`).
            if ok && l.decided == Some(false) {
                ctx.send(from, Msg::OccAbort { txn, attempt });
            }
            return;
        };
        if l.decided.is_some() {
            self.log.reply(ctx, from, decide_msg(l, &l.parts[i]));
            return;
        }
        if l.parts[i].vote.is_some() {
            return;
        }
        l.parts[i].vote = Some(ok);
        if !ok {
            self.occ_decide(ctx, txn, false);
        } else if l.parts.iter().all(|p| p.vote == Some(true)) {
            self.occ_decide(ctx, txn, true);
        }
    }

    fn occ_decide(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, commit: bool) {
        let Some(l) = self.occ.leading.get_mut(&txn) else {
            return;
        };
        tracing::trace!(
            shard = self.shard.0,
            ?txn,
            attempt = l.attempt,
            commit,
            "merged pieces decided"
        );
        l.decided = Some(commit);
        l.sent_at = ctx.now();
        l.tries = 0;
        // Durable before anyone hears it (see `log`).
        let rec = Record::Decided {
            txn,
            attempt: l.attempt,
            commit,
            reply_to: l.reply_to,
            parts: l.parts.iter().map(|p| (p.node, p.req.clone())).collect(),
        };
        self.log.append(ctx, &rec);
        for p in &l.parts {
            self.log.reply(ctx, p.node, decide_msg(l, p));
        }
        if !commit {
            self.log.reply(ctx, l.reply_to, Msg::OccRetry { txn });
        }
    }

    /// Commit (run the pieces as a start request of `reply_to`'s) or abort
    /// (release the attempt's locks); acknowledge either way.
    pub(super) fn on_occ_decide(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        attempt: u32,
        commit: bool,
        reply_to: NodeId,
        req: Start,
    ) {
        let txn = req.txn;
        if !commit {
            self.on_occ_abort(ctx, from, txn, attempt);
            return;
        }
        self.occ.unlock(txn);
        self.on_start(ctx, reply_to, req, true);
        // After the commit's record.
        self.log.reply(ctx, from, Msg::OccDecideOk { txn, attempt });
        self.occ_unpark(ctx);
    }

    /// Abort: release the attempt's locks (logged), acknowledge.
    pub(super) fn on_occ_abort(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        attempt: u32,
    ) {
        if self.occ_release(ctx.now(), txn, attempt) {
            self.log.append(ctx, &Record::Aborted { txn, attempt });
        }
        // After the release's record.
        self.log.reply(ctx, from, Msg::OccDecideOk { txn, attempt });
        self.occ_unpark(ctx);
    }

    /// The leader: a participant that voted yes for `attempt` asks for the
    /// decision (termination). A decided attempt's decision is resent; an
    /// attempt older than the current one was aborted (a new attempt
    /// starts only after the last is decided); an attempt still collecting
    /// votes is left to finish (its prepares are resent). An attempt this
    /// leader has no record of was never decided: a decision is logged
    /// before anyone hears it, and a commit every participant acknowledged
    /// (`LeadDone`) leaves none prepared. It is lost with a crash and no
    /// driver resends it, so it is presumed aborted — and the abort is
    /// logged before it is sent, so that a driver that comes back later
    /// gets a new attempt (`attempt + 1`) rather than a second run of this
    /// one that could commit what a participant was told aborted.
    pub(super) fn on_occ_ask(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        attempt: u32,
    ) {
        if let Some(l) = self.occ.leading.get(&txn) {
            if attempt < l.attempt || (attempt == l.attempt && l.decided == Some(false)) {
                self.log.reply(ctx, from, Msg::OccAbort { txn, attempt });
                return;
            }
            if attempt == l.attempt {
                if l.decided.is_some() {
                    if let Some(p) = l.parts.iter().find(|p| p.node == from) {
                        let msg = decide_msg(l, p);
                        self.log.reply(ctx, from, msg);
                    }
                }
                return;
            }
        }
        tracing::debug!(shard = self.shard.0, ?txn, attempt, asker = ?from, "merged pieces: presumed abort");
        let me = ctx.me();
        self.log.append(
            ctx,
            &Record::Decided {
                txn,
                attempt,
                commit: false,
                reply_to: me,
                parts: Vec::new(),
            },
        );
        self.occ_replay_decided(txn, attempt, false, me, Vec::new());
        self.log.reply(ctx, from, Msg::OccAbort { txn, attempt });
    }

    /// `txn`'s `attempt` is aborted: release its locks if it holds them
    /// (whether it did), and refuse its prepares still in flight.
    pub(super) fn occ_release(&mut self, now: Time, txn: TxnId, attempt: u32) -> bool {
        let held = self
            .occ
            .prepared
            .get(&txn)
            .is_some_and(|p| p.attempt == attempt);
        if held {
            self.occ.unlock(txn);
        }
        let seen = self.occ.seen.entry(txn).or_insert((0, now));
        *seen = (seen.0.max(attempt + 1), now);
        held
    }

    /// Replay of a prepare record: lock again what the yes vote promised
    /// (and ask its leader for the decision in due time).
    pub(super) fn occ_replay_prepared(
        &mut self,
        now: Time,
        txn: TxnId,
        attempt: u32,
        leader: NodeId,
        keys: Vec<(Key, bool)>,
    ) {
        self.occ.unlock(txn);
        let seen = self.occ.seen.entry(txn).or_insert((attempt, now));
        *seen = (seen.0.max(attempt), now);
        let p = Prepared {
            attempt,
            keys,
            leader,
            heard: now,
            asked: 0,
        };
        self.occ.lock(txn, p);
    }

    /// Replay of a merged commit: release the locks, run the start request.
    pub(super) fn occ_replay_commit(&mut self, ctx: &mut Ctx<Msg>, req: Start) {
        self.occ.unlock(req.txn);
        let me = ctx.me();
        self.on_start(ctx, me, req, true);
    }

    /// Replay of a leader's decision: resend it until acknowledged (the
    /// sweep does, at once), number the next attempt after it.
    pub(super) fn occ_replay_decided(
        &mut self,
        txn: TxnId,
        attempt: u32,
        commit: bool,
        reply_to: NodeId,
        parts: Vec<(NodeId, Start)>,
    ) {
        let parts = parts
            .into_iter()
            .map(|(node, req)| Part {
                node,
                req,
                outputs: Vec::new(),
                vote: Some(true),
                acked: false,
            })
            .collect();
        self.occ.leading.insert(
            txn,
            Lead {
                attempt,
                reply_to,
                parts,
                decided: Some(commit),
                sent_at: 0,
                tries: 0,
            },
        );
    }

    /// Replay of a commit every participant acknowledged.
    pub(super) fn occ_replay_lead_done(&mut self, txn: TxnId) {
        self.occ.leading.remove(&txn);
    }

    pub(super) fn on_occ_decide_ok(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        attempt: u32,
    ) {
        let Some(l) = self.occ.leading.get_mut(&txn) else {
            return;
        };
        if attempt != l.attempt || l.decided.is_none() {
            return;
        }
        if let Some(p) = l.parts.iter_mut().find(|p| p.node == from) {
            p.acked = true;
        }
        if l.decided == Some(true) && l.parts.iter().all(|p| p.acked) {
            self.occ.leading.remove(&txn);
            self.log.append(ctx, &Record::LeadDone { txn });
        }
    }

    /// Start requests parked on locks: try them again.
    fn occ_unpark(&mut self, ctx: &mut Ctx<Msg>) {
        if self.occ.parked.is_empty() {
            return;
        }
        for (from, req) in std::mem::take(&mut self.occ.parked) {
            self.on_start(ctx, from, req, false);
        }
    }

    /// Resend the leader's unanswered prepares and decisions (backing off);
    /// forget aborted 2PCs and stale attempt marks long untouched.
    pub(super) fn occ_sweep(&mut self, ctx: &mut Ctx<Msg>, now: Time) {
        let forget = self.cfg.forget_after;
        let retransmit = self.cfg.retransmit;
        let mut ids: Vec<TxnId> = self.occ.leading.keys().copied().collect();
        ids.sort_unstable();
        for t in ids {
            let l = self.occ.leading.get_mut(&t).expect("listed");
            let done = l.parts.iter().all(|p| p.acked);
            if l.decided.is_some() && done {
                if now.saturating_sub(l.sent_at) > forget {
                    self.occ.leading.remove(&t);
                }
                continue;
            }
            if now.saturating_sub(l.sent_at) < retransmit.saturating_mul(1 << l.tries.min(3)) {
                continue;
            }
            l.tries += 1;
            l.sent_at = now;
            tracing::trace!(shard = self.shard.0, txn = ?t, attempt = l.attempt, decided = ?l.decided, "merged pieces: resend");
            for p in &l.parts {
                match l.decided {
                    None if p.vote.is_none() => ctx.send(
                        p.node,
                        Msg::OccPrepare {
                            attempt: l.attempt,
                            req: p.req.clone(),
                            outputs: p.outputs.clone(),
                        },
                    ),
                    Some(_) if !p.acked => self.log.reply(ctx, p.node, decide_msg(l, p)),
                    _ => {}
                }
            }
        }
        // Termination: ask the leader of every attempt voted yes for long
        // ago and still undecided here (`on_occ_ask`).
        let ask_after = self.cfg.ask_decision_after;
        let mut ask: Vec<(TxnId, u32, NodeId)> = Vec::new();
        for (&t, p) in self.occ.prepared.iter_mut() {
            let wait = if p.asked == 0 {
                ask_after
            } else {
                retransmit.saturating_mul(1 << p.asked.min(3))
            };
            if now.saturating_sub(p.heard) >= wait {
                p.asked += 1;
                p.heard = now;
                ask.push((t, p.attempt, p.leader));
            }
        }
        ask.sort_unstable();
        for (txn, attempt, leader) in ask {
            tracing::debug!(
                shard = self.shard.0,
                ?txn,
                attempt,
                ?leader,
                "merged pieces: ask the leader for the decision"
            );
            ctx.send(leader, Msg::OccAsk { txn, attempt });
        }
        let prepared = &self.occ.prepared;
        self.occ
            .seen
            .retain(|t, (_, at)| prepared.contains_key(t) || now.saturating_sub(*at) <= forget);
    }
}
