//! The TAPIR client (coordinator): executes the pieces itself on values it
//! reads from one replica per shard, then prepares at every replica of
//! every participant shard through IR's consensus operation and tells them
//! the outcome through IR's inconsistent operations (TAPIR §5.2).

use super::msg::{Footprint, Msg, Vote};
use super::TapirConfig;
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::{Role, Topology};
use tessera_core::txn::{participants, AbortReason, Attempt, ReadObs, TxnOutcome, Value};
use tessera_core::FastMap;

/// One participant shard's prepare, as IR's client sees it.
struct ShardPrepare {
    shard: ShardId,
    footprint: Footprint,
    /// The highest view a replica answered in: IR counts only replies of
    /// one view towards a quorum, so a reply from a newer view clears the
    /// older ones (IR §3.2.2).
    view: u64,
    /// Per replica (by index in the group): its vote in `view`.
    votes: Vec<Option<Vote>>,
    /// Slow path: the vote sent in Finalize, and the results confirmed in
    /// `view` (a view change's merge may have finalized another).
    finalizing: Option<Vote>,
    confirms: Vec<Option<Vote>>,
    /// The shard's result.
    result: Option<Vote>,
    /// When f+1 replicas had voted in `view`: the fast path waits from
    /// then, not from the Prepare (see [`TapirClient::progress`]).
    majority_at: Option<Time>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Executing,
    Preparing,
}

struct TxnState {
    attempt: Attempt,
    phase: Phase,
    /// Per piece: its output once executed; whether its read is out.
    outputs: Vec<Option<Value>>,
    asked: Vec<Option<(usize, Time)>>,
    /// Versions read of data this transaction did not write itself, with
    /// their shard.
    reads: Vec<(ShardId, ReadObs)>,
    /// Buffered writes (last value per key), with their shard.
    writes: Vec<(ShardId, Key, Value)>,
    ts: u64,
    shards: Vec<ShardPrepare>,
    phase_at: Time,
    retransmit_at: Time,
    /// Times the Prepares (or Finalizes) were resent
    /// ([`TapirConfig::resend_after`]).
    resends: u32,
}

/// A decided transaction whose outcome not every replica has acknowledged.
struct Finishing {
    commit: Option<(u64, Vec<Footprint>)>,
    shards: Vec<ShardId>,
    acked: Vec<Vec<bool>>,
    until: Time,
    retransmit_at: Time,
    resends: u32,
}

/// The coordinator role of [`super::Tapir`].
pub struct TapirClient {
    cfg: TapirConfig,
    topology: Arc<Topology>,
    me: NodeId,
    /// This host's clock offset (loosely synchronized clocks).
    skew: Time,
    last_ts: u64,
    txns: FastMap<TxnId, TxnState>,
    finishing: FastMap<TxnId, Finishing>,
    /// Per shard, the newest view one of its replicas answered in: new
    /// prepares count replies of that view only.
    views: Vec<u64>,
    stats: Stats,
}

/// Counters for the results row: how shards were decided, which votes
/// came back, and how much was sent again.
#[derive(Default)]
struct Stats {
    fast_path: u64,
    slow_path: u64,
    votes_abort: u64,
    votes_abstain: u64,
    votes_retry: u64,
    prepare_resends: u64,
    outcome_resends: u64,
}

const TICK: TimerId = TimerId(1);

/// Fast-path quorum of IR for `n` replicas (f = (n - 1) / 2): ⌈3f/2⌉ + 1.
pub fn fast_quorum(n: usize) -> usize {
    let f = (n - 1) / 2;
    (3 * f).div_ceil(2) + 1
}

impl TapirClient {
    pub fn new(cfg: TapirConfig, env: CoordinatorEnv) -> Self {
        TapirClient {
            cfg,
            me: env.me,
            skew: 0,
            last_ts: 0,
            txns: tessera_core::fast_map(),
            finishing: tessera_core::fast_map(),
            views: vec![0; env.topology.shards.len()],
            topology: env.topology,
            stats: Stats::default(),
        }
    }

    fn group(&self, s: ShardId) -> &[NodeId] {
        &self.topology.shards[s.0 as usize].replicas
    }

    /// The replica to read from (TAPIR reads at the closest): one on this
    /// host's site when the world has several, else one picked by host so
    /// that reads spread over the replicas; the next one on each retry.
    fn read_replica(&self, s: ShardId, tries: usize) -> usize {
        let group = self.group(s);
        let site_of = |n: NodeId| self.topology.nodes[n.0 as usize].site;
        let sites = self.topology.nodes.iter().any(|n| n.site != 0);
        let local = group.iter().position(|&n| site_of(n) == site_of(self.me));
        let base = match local {
            Some(i) if sites => i,
            _ => self.me.0 as usize,
        };
        (base + tries) % group.len()
    }

    /// A timestamp from this host's clock, unique and increasing here.
    fn timestamp(&mut self, now: Time) -> u64 {
        let ts = ((now + self.skew) << 10) | (self.me.0 as u64 & 0x3FF);
        self.last_ts = ts.max(self.last_ts + 1);
        self.last_ts
    }

    /// Ask for the reads of every piece whose inputs are ready.
    fn dispatch(&self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &mut TxnState) {
        let now = ctx.now();
        let proc = st.attempt.txn.clone();
        for (i, p) in proc.pieces().iter().enumerate() {
            if st.outputs[i].is_some() || st.asked[i].is_some() {
                continue;
            }
            if !p.inputs.iter().all(|&j| st.outputs[j as usize].is_some()) {
                continue;
            }
            st.asked[i] = Some((0, now));
            self.send_read(ctx, txn, st, i, 0);
        }
    }

    fn send_read(&self, ctx: &mut Ctx<Msg>, txn: TxnId, st: &TxnState, piece: usize, tries: usize) {
        let spec = st.attempt.txn.resolve(piece, &Self::inputs(st, piece));
        let r = self.read_replica(spec.shard, tries);
        let keys = spec.reads.iter().map(|a| a.key).collect();
        ctx.send(
            self.group(spec.shard)[r],
            Msg::Read {
                txn,
                piece: piece as u16,
                keys,
            },
        );
    }

    fn inputs(st: &TxnState, piece: usize) -> Vec<Value> {
        st.attempt.txn.pieces()[piece]
            .inputs
            .iter()
            .map(|&j| st.outputs[j as usize].clone().unwrap_or_default())
            .collect()
    }

    /// Run a piece on the values read and the transaction's own writes.
    fn on_read_reply(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        piece: u16,
        values: Vec<(Option<Value>, tessera_core::ids::Version)>,
    ) {
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        let i = piece as usize;
        if st.phase != Phase::Executing || i >= st.outputs.len() || st.outputs[i].is_some() {
            return;
        }
        let inputs = Self::inputs(st, i);
        let proc = st.attempt.txn.clone();
        let spec = proc.resolve(i, &inputs);
        if values.len() != spec.reads.len() {
            return;
        }
        let mut vals: Vec<Option<&Value>> = Vec::with_capacity(values.len());
        for (a, (v, version)) in spec.reads.iter().zip(&values) {
            match st.writes.iter().find(|(_, k, _)| *k == a.key) {
                Some((_, _, own)) => vals.push(Some(own)),
                None => {
                    vals.push(v.as_ref());
                    let obs = ReadObs::row(a.key, *version);
                    st.reads.push((spec.shard, obs));
                }
            }
        }
        let res = proc.execute(i, &vals, &inputs);
        for (k, v) in res.writes {
            match st.writes.iter_mut().find(|(_, wk, _)| *wk == k) {
                Some(w) => w.2 = v,
                None => st.writes.push((spec.shard, k, v)),
            }
        }
        st.outputs[i] = Some(res.output);
        if res.user_abort {
            self.decide(ctx, txn, Some(AbortReason::User));
            return;
        }
        if st.outputs.iter().all(Option::is_some) {
            self.prepare(ctx, txn);
        } else {
            let mut st = self.txns.remove(&txn).expect("present");
            self.dispatch(ctx, txn, &mut st);
            self.txns.insert(txn, st);
        }
    }

    /// Validation: IR's consensus operation Prepare at every replica of
    /// every participant shard, at a timestamp from this host's clock.
    fn prepare(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let now = ctx.now();
        let ts = self.timestamp(now);
        let st = self.txns.get_mut(&txn).expect("present");
        st.phase = Phase::Preparing;
        st.ts = ts;
        st.phase_at = now;
        st.retransmit_at = now + self.cfg.retransmit;
        for sp in &mut st.shards {
            sp.footprint.reads = st
                .reads
                .iter()
                .filter(|(s, _)| *s == sp.shard)
                .map(|(_, r)| (r.key, r.version))
                .collect();
            sp.footprint.writes = st
                .writes
                .iter()
                .filter(|(s, _, _)| *s == sp.shard)
                .map(|(_, k, v)| (*k, v.clone()))
                .collect();
        }
        let st = &self.txns[&txn];
        for sp in &st.shards {
            for (r, &node) in self.group(sp.shard).iter().enumerate() {
                if sp.votes[r].is_none() {
                    ctx.send(
                        node,
                        Msg::Prepare {
                            txn,
                            ts,
                            footprint: sp.footprint.clone(),
                        },
                    );
                }
            }
        }
    }

    fn replica_index(&self, shard: ShardId, node: NodeId) -> Option<usize> {
        self.group(shard).iter().position(|&n| n == node)
    }

    /// A reply in `view` for `sp`: false when it is from an older view
    /// than others' and must not count. A newer view clears the replies of
    /// the older one; the replicas that gave them are returned, to be
    /// asked again.
    fn note_view(sp: &mut ShardPrepare, view: u64, again: &mut Vec<usize>) -> bool {
        if view < sp.view {
            return false;
        }
        if view > sp.view {
            sp.view = view;
            sp.majority_at = None;
            for (r, (v, c)) in sp.votes.iter_mut().zip(&mut sp.confirms).enumerate() {
                if v.take().is_some() | c.take().is_some() {
                    again.push(r);
                }
            }
        }
        true
    }

    /// Ask replicas `again` of shard `i` of `txn` for their reply anew:
    /// the Prepare, or the Finalize on the slow path.
    fn ask_again(&self, ctx: &mut Ctx<Msg>, txn: TxnId, i: usize, again: &[usize]) {
        let Some(st) = self.txns.get(&txn) else {
            return;
        };
        let sp = &st.shards[i];
        for &r in again {
            let msg = match sp.finalizing {
                Some(vote) => Msg::Finalize {
                    txn,
                    ts: st.ts,
                    vote,
                    footprint: sp.footprint.clone(),
                },
                None => Msg::Prepare {
                    txn,
                    ts: st.ts,
                    footprint: sp.footprint.clone(),
                },
            };
            ctx.send(self.group(sp.shard)[r], msg);
        }
    }

    /// The newest view a replica of `shard` answered in.
    fn seen_view(&mut self, shard: ShardId, view: u64) {
        let v = &mut self.views[shard.0 as usize];
        *v = (*v).max(view);
    }

    fn on_vote(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, vote: Vote, view: u64) {
        let Role::Server { shard, .. } = self.topology.role(from) else {
            return;
        };
        let Some(r) = self.replica_index(shard, from) else {
            return;
        };
        self.seen_view(shard, view);
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if st.phase != Phase::Preparing {
            return;
        }
        let mut again = Vec::new();
        if let Some(i) = st.shards.iter().position(|sp| sp.shard == shard) {
            let sp = &mut st.shards[i];
            if Self::note_view(sp, view, &mut again) && sp.votes[r].is_none() {
                sp.votes[r] = Some(vote);
                match vote {
                    Vote::Ok => {}
                    Vote::Abort => self.stats.votes_abort += 1,
                    Vote::Abstain => self.stats.votes_abstain += 1,
                    Vote::Retry(_) => self.stats.votes_retry += 1,
                }
            }
            again.retain(|&x| x != r);
            self.ask_again(ctx, txn, i, &again);
        }
        self.progress(ctx, txn);
    }

    /// Whether the fast path of a shard whose (f+1)-th vote came
    /// `majority_at` has waited long enough for the other replicas at
    /// `now`: [`TapirConfig::fast_wait`], or as long again as the majority
    /// took since the Prepare (`phase_at`), whichever is longer.
    ///
    /// IR (TAPIR §3.2.1) takes the slow path when a fast quorum does not
    /// answer in time; "in time" is relative to how fast its peers answer.
    /// A timer fixed from the Prepare fires on every prepare once servers
    /// queue for longer than it (900 clients on `sim`: 30 ms), and then
    /// every shard pays a Finalize round (three more messages and log
    /// writes per shard), which deepens the queue that caused it. The wait
    /// starts at the majority rather than the Prepare so that a replica a
    /// little behind its peers (one catching up after a restart) still
    /// makes the fast quorum: timed from the Prepare, the crash test's
    /// throughput after recovery fell from 83% to 78% of that before it
    /// (`layered_seeds`, seed 1).
    fn fast_wait_over(&self, phase_at: Time, majority_at: Option<Time>, now: Time) -> bool {
        majority_at.is_some_and(|t| now >= t + self.cfg.fast_wait.max(t.saturating_sub(phase_at)))
    }

    /// Settle what the votes allow: a shard's result by the fast path
    /// (⌈3f/2⌉+1 matching votes) or, once a majority voted and the fast
    /// path waited long enough ([`Self::fast_wait_over`]), by the slow
    /// path (decide, then Finalize at a majority); then the transaction's
    /// outcome.
    fn progress(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let now = ctx.now();
        let Some(st) = self.txns.get(&txn) else {
            return;
        };
        let waited: Vec<bool> = st
            .shards
            .iter()
            .map(|sp| self.fast_wait_over(st.phase_at, sp.majority_at, now))
            .collect();
        let st = self.txns.get_mut(&txn).expect("present");
        let mut finalize = Vec::new();
        for (i, sp) in st.shards.iter_mut().enumerate() {
            if sp.result.is_some() || sp.finalizing.is_some() {
                continue;
            }
            let n = sp.votes.len();
            let f = (n - 1) / 2;
            let got: Vec<Vote> = sp.votes.iter().flatten().copied().collect();
            let oks = got.iter().filter(|v| **v == Vote::Ok).count();
            if got.len() > f && sp.majority_at.is_none() {
                sp.majority_at = Some(now);
            }
            let wait_over = waited[i];
            if got.contains(&Vote::Abort) {
                // A stale read never validates anywhere: abort at once.
                sp.result = Some(Vote::Abort);
            } else if oks >= fast_quorum(n) {
                sp.result = Some(Vote::Ok);
                self.stats.fast_path += 1;
            } else if got.len() > f && (got.len() == n || wait_over) {
                if oks > f {
                    self.stats.slow_path += 1;
                    sp.finalizing = Some(Vote::Ok);
                    finalize.push(i);
                } else {
                    sp.result = Some(Vote::Abort);
                }
            }
        }
        for i in finalize {
            let sp = &st.shards[i];
            for &node in &self.topology.shards[sp.shard.0 as usize].replicas {
                ctx.send(
                    node,
                    Msg::Finalize {
                        txn,
                        ts: st.ts,
                        vote: Vote::Ok,
                        footprint: sp.footprint.clone(),
                    },
                );
            }
        }
        let results: Vec<Option<Vote>> = st.shards.iter().map(|sp| sp.result).collect();
        if results.contains(&Some(Vote::Abort)) {
            self.decide(ctx, txn, Some(AbortReason::Validation));
        } else if results.iter().all(|r| *r == Some(Vote::Ok)) {
            self.decide(ctx, txn, None);
        }
    }

    /// A Confirm: the shard's result is the one f+1 replicas confirm in
    /// one view (IR §3.2.1: after a view change it may differ from what
    /// the client asked for, and then it wins).
    fn on_confirm(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, vote: Vote, view: u64) {
        let Role::Server { shard, .. } = self.topology.role(from) else {
            return;
        };
        let Some(r) = self.replica_index(shard, from) else {
            return;
        };
        self.seen_view(shard, view);
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        let Some(i) = st.shards.iter().position(|sp| sp.shard == shard) else {
            return;
        };
        let sp = &mut st.shards[i];
        let mut again = Vec::new();
        if sp.finalizing.is_none() || !Self::note_view(sp, view, &mut again) {
            return;
        }
        sp.confirms[r] = Some(vote);
        again.retain(|&x| x != r);
        self.ask_again(ctx, txn, i, &again);
        let Some(sp) = self.txns.get_mut(&txn).map(|st| &mut st.shards[i]) else {
            return;
        };
        let f = (sp.confirms.len() - 1) / 2;
        let same = sp.confirms.iter().filter(|c| **c == Some(vote)).count();
        if sp.result.is_none() && same > f {
            sp.result = Some(vote);
        }
        self.progress(ctx, txn);
    }

    /// The outcome: tell the client host, and every replica (IR's
    /// inconsistent operations Commit / Abort, resent until all answer).
    fn decide(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, abort: Option<AbortReason>) {
        let Some(st) = self.txns.remove(&txn) else {
            return;
        };
        let now = ctx.now();
        let shards: Vec<ShardId> = st.shards.iter().map(|sp| sp.shard).collect();
        let prepared = st.phase == Phase::Preparing;
        let commit = match abort {
            None => Some((
                st.ts,
                st.shards.iter().map(|sp| sp.footprint.clone()).collect(),
            )),
            Some(_) => None,
        };
        if prepared {
            let acked = shards
                .iter()
                .map(|s| vec![false; self.group(*s).len()])
                .collect();
            let fin = Finishing {
                commit,
                shards,
                acked,
                until: now + self.cfg.give_up,
                retransmit_at: now + self.cfg.retransmit,
                resends: 0,
            };
            Self::send_outcome(&self.topology, ctx, txn, &fin);
            self.finishing.insert(txn, fin);
        }
        let outcome = match abort {
            None => TxnOutcome::Committed {
                reads: st.reads.into_iter().map(|(_, r)| r).collect(),
                writes: st.writes.iter().map(|(_, k, _)| *k).collect(),
                outputs: st
                    .outputs
                    .into_iter()
                    .map(Option::unwrap_or_default)
                    .collect(),
            },
            Some(reason) => TxnOutcome::Aborted(reason),
        };
        ctx.done(txn, outcome);
    }

    fn send_outcome(topology: &Topology, ctx: &mut Ctx<Msg>, txn: TxnId, fin: &Finishing) {
        for (i, s) in fin.shards.iter().enumerate() {
            for (r, &node) in topology.shards[s.0 as usize].replicas.iter().enumerate() {
                if fin.acked[i][r] {
                    continue;
                }
                let msg = match &fin.commit {
                    Some((ts, footprints)) => Msg::Commit {
                        txn,
                        ts: *ts,
                        footprint: footprints[i].clone(),
                    },
                    None => Msg::Abort { txn },
                };
                ctx.send(node, msg);
            }
        }
    }

    fn on_done(&mut self, from: NodeId, txn: TxnId) {
        let Role::Server { shard, .. } = self.topology.role(from) else {
            return;
        };
        let Some(r) = self.replica_index(shard, from) else {
            return;
        };
        let Some(fin) = self.finishing.get_mut(&txn) else {
            return;
        };
        if let Some(i) = fin.shards.iter().position(|s| *s == shard) {
            fin.acked[i][r] = true;
        }
        if fin.acked.iter().flatten().all(|a| *a) {
            self.finishing.remove(&txn);
        }
    }

    /// Resend what is unanswered; take the slow path where the fast path
    /// waited long enough.
    fn tick(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        let mut ids: Vec<TxnId> = self.txns.keys().copied().collect();
        ids.sort_unstable();
        for txn in ids {
            let Some(st) = self.txns.get(&txn) else {
                continue;
            };
            match st.phase {
                Phase::Executing => {
                    let late: Vec<(usize, usize)> = st
                        .asked
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| st.outputs[*i].is_none())
                        .filter_map(|(i, a)| a.map(|(tries, at)| (i, tries, at)))
                        .filter(|(_, _, at)| now >= at + self.cfg.retransmit)
                        .map(|(i, tries, _)| (i, tries + 1))
                        .collect();
                    let mut st = self.txns.remove(&txn).expect("present");
                    for (i, tries) in late {
                        st.asked[i] = Some((tries, now));
                        self.send_read(ctx, txn, &st, i, tries);
                    }
                    self.txns.insert(txn, st);
                }
                Phase::Preparing => {
                    if now >= st.retransmit_at {
                        self.resend_prepare(ctx, txn);
                    }
                    self.progress(ctx, txn);
                }
            }
        }
        let mut done = Vec::new();
        let mut ids: Vec<TxnId> = self.finishing.keys().copied().collect();
        ids.sort_unstable();
        for txn in ids {
            let fin = self.finishing.get_mut(&txn).expect("listed");
            if now >= fin.until {
                done.push(txn);
            } else if now >= fin.retransmit_at {
                fin.resends += 1;
                fin.retransmit_at = now + self.cfg.resend_after(fin.resends);
                self.stats.outcome_resends +=
                    fin.acked.iter().flatten().filter(|a| !**a).count() as u64;
                Self::send_outcome(&self.topology, ctx, txn, fin);
            }
        }
        for txn in done {
            self.finishing.remove(&txn);
        }
        ctx.set_timer(self.cfg.fast_wait.min(self.cfg.retransmit) / 2, TICK);
    }

    fn resend_prepare(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let now = ctx.now();
        let st = self.txns.get_mut(&txn).expect("present");
        st.resends += 1;
        st.retransmit_at = now + self.cfg.resend_after(st.resends);
        for sp in &st.shards {
            for (r, &node) in self.topology.shards[sp.shard.0 as usize]
                .replicas
                .iter()
                .enumerate()
            {
                let msg = match sp.finalizing {
                    Some(vote) if sp.confirms[r].is_none() => Msg::Finalize {
                        txn,
                        ts: st.ts,
                        vote,
                        footprint: sp.footprint.clone(),
                    },
                    None if sp.votes[r].is_none() => Msg::Prepare {
                        txn,
                        ts: st.ts,
                        footprint: sp.footprint.clone(),
                    },
                    _ => continue,
                };
                self.stats.prepare_resends += 1;
                ctx.send(node, msg);
            }
        }
    }
}

impl Coordinator<Msg> for TapirClient {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let txn = attempt.id;
        let n = attempt.txn.pieces().len();
        let shards = participants(attempt.txn.as_ref())
            .into_iter()
            .map(|s| {
                let r = self.group(s).len();
                ShardPrepare {
                    shard: s,
                    footprint: Footprint::default(),
                    view: self.views[s.0 as usize],
                    votes: vec![None; r],
                    finalizing: None,
                    confirms: vec![None; r],
                    result: None,
                    majority_at: None,
                }
            })
            .collect();
        let mut st = TxnState {
            attempt,
            phase: Phase::Executing,
            outputs: vec![None; n],
            asked: vec![None; n],
            reads: Vec::new(),
            writes: Vec::new(),
            ts: 0,
            shards,
            phase_at: ctx.now(),
            retransmit_at: ctx.now() + self.cfg.retransmit,
            resends: 0,
        };
        self.dispatch(ctx, txn, &mut st);
        self.txns.insert(txn, st);
    }
}

impl Node<Msg> for TapirClient {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        use rand::Rng;
        self.skew = ctx.rng().random_range(0..=self.cfg.clock_skew);
        ctx.set_timer(self.cfg.fast_wait.min(self.cfg.retransmit) / 2, TICK);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::ReadReply { txn, piece, values } => self.on_read_reply(ctx, txn, piece, values),
            Msg::PrepareReply { txn, vote, view } => self.on_vote(ctx, from, txn, vote, view),
            Msg::Confirm { txn, vote, view } => self.on_confirm(ctx, from, txn, vote, view),
            Msg::Done { txn } => self.on_done(from, txn),
            Msg::Read { .. }
            | Msg::Prepare { .. }
            | Msg::Finalize { .. }
            | Msg::Commit { .. }
            | Msg::Abort { .. }
            | Msg::StartViewChange { .. }
            | Msg::DoViewChange { .. }
            | Msg::StartView { .. } => {
                tracing::warn!(?from, "tapir: a client got a replica's message");
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == TICK {
            self.tick(ctx);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        let s = std::mem::take(&mut self.stats);
        NodeReport {
            client: None,
            counters: vec![
                ("tapir_fast_path", s.fast_path),
                ("tapir_slow_path", s.slow_path),
                ("tapir_votes_abort", s.votes_abort),
                ("tapir_votes_abstain", s.votes_abstain),
                ("tapir_votes_retry", s.votes_retry),
                ("tapir_prepare_resends", s.prepare_resends),
                ("tapir_outcome_resends", s.outcome_resends),
            ],
            ..NodeReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fast_quorum;

    #[test]
    fn fast_quorums_follow_ir() {
        assert_eq!(fast_quorum(1), 1);
        assert_eq!(fast_quorum(3), 3);
        assert_eq!(fast_quorum(5), 4);
        assert_eq!(fast_quorum(7), 6);
    }
}

/// A client host of three shards of three replicas, stepped by hand.
#[cfg(test)]
mod driven {
    use super::*;
    use crate::tapir::TapirConfig;
    use rand::SeedableRng;
    use tessera_core::ids::{Version, MS};
    use tessera_core::node::Effect;
    use tessera_core::txn::Attempt;
    use tessera_core::workload::TxnGenerator;
    use tessera_workloads::{Micro, MicroConfig};

    struct Host {
        c: TapirClient,
        rng: rand::rngs::SmallRng,
        me: NodeId,
        now: Time,
        done: Vec<(TxnId, TxnOutcome)>,
    }

    impl Host {
        fn new() -> Self {
            let topology = Arc::new(Topology::new(3, 3, 1));
            let me = topology.client_hosts().next().expect("one host").id;
            let env = CoordinatorEnv {
                me,
                topology,
                incarnation: 0,
                recovered: Vec::new(),
            };
            let mut h = Host {
                c: TapirClient::new(TapirConfig::default(), env),
                rng: rand::rngs::SmallRng::seed_from_u64(3),
                me,
                now: 0,
                done: Vec::new(),
            };
            h.step(&mut |c, ctx| c.on_start(ctx));
            h
        }

        fn step(
            &mut self,
            f: &mut dyn FnMut(&mut TapirClient, &mut Ctx<Msg>),
        ) -> Vec<(NodeId, Msg)> {
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(self.now, self.me, &mut self.rng, &mut effects);
            f(&mut self.c, &mut ctx);
            let mut sent = Vec::new();
            for e in effects {
                match e {
                    Effect::Send { to, msg } => sent.push((to, msg)),
                    Effect::Done { txn, outcome } => self.done.push((txn, outcome)),
                    _ => {}
                }
            }
            sent
        }

        fn deliver(&mut self, from: NodeId, msg: Msg) -> Vec<(NodeId, Msg)> {
            let mut msg = Some(msg);
            self.step(&mut |c, ctx| c.on_message(ctx, from, msg.take().expect("once")))
        }

        fn tick(&mut self) -> Vec<(NodeId, Msg)> {
            self.step(&mut |c, ctx| c.on_timer(ctx, TICK))
        }

        /// Submit a micro-benchmark transaction and answer its reads:
        /// returns its id and the Prepares that went out.
        fn submit_and_read(&mut self) -> (TxnId, Vec<(NodeId, Msg)>) {
            let micro = Micro::new(MicroConfig::default()).expect("valid");
            let txn = micro.micro_generator().next(&mut self.rng);
            let id = TxnId::new(self.me, 0, 1);
            let reads = self.step(&mut |c, ctx| {
                c.submit(
                    ctx,
                    Attempt {
                        id,
                        txn: txn.clone(),
                        since: 0,
                        client: 0,
                    },
                )
            });
            let mut prepares = Vec::new();
            for (to, msg) in reads {
                let Msg::Read { txn, piece, keys } = msg else {
                    panic!("a read first: {msg:?}");
                };
                let values = keys.iter().map(|_| (None, Version::INITIAL)).collect();
                prepares.extend(self.deliver(to, Msg::ReadReply { txn, piece, values }));
            }
            (id, prepares)
        }
    }

    fn vote_ok(txn: TxnId) -> Msg {
        Msg::PrepareReply {
            txn,
            vote: Vote::Ok,
            view: 0,
        }
    }

    fn finalizes(sent: &[(NodeId, Msg)]) -> usize {
        sent.iter()
            .filter(|(_, m)| matches!(m, Msg::Finalize { .. }))
            .count()
    }

    /// Servers queue for 10 ms (far beyond `fast_wait`, 2 ms), so two
    /// replicas of each shard answer only then: the client still waits
    /// for the third, which comes 3 ms later, and commits on the fast path
    /// without a Finalize. A third replica that stays silent for as long
    /// as the majority took sends the shard down the slow path.
    #[test]
    fn the_fast_path_waits_from_the_majority_as_long_as_it_took() {
        let mut h = Host::new();
        let (txn, prepares) = h.submit_and_read();
        assert_eq!(prepares.len(), 9, "every replica of every shard");
        let (late, early): (Vec<NodeId>, Vec<NodeId>) = prepares
            .iter()
            .map(|(to, _)| *to)
            .partition(|n| n.0 % 3 == 2);
        h.now = 10 * MS;
        for &n in &early {
            assert_eq!(finalizes(&h.deliver(n, vote_ok(txn))), 0);
        }
        h.now = 13 * MS;
        assert_eq!(finalizes(&h.tick()), 0, "still waiting for the third");
        for &n in &late {
            assert_eq!(finalizes(&h.deliver(n, vote_ok(txn))), 0);
        }
        assert!(matches!(
            h.done.as_slice(),
            [(t, TxnOutcome::Committed { .. })] if *t == txn
        ));
        assert_eq!(
            h.c.take_report().counters[..2],
            [("tapir_fast_path", 3), ("tapir_slow_path", 0)]
        );

        let mut h = Host::new();
        let (txn, _) = h.submit_and_read();
        h.now = 10 * MS;
        for &n in &early {
            h.deliver(n, vote_ok(txn));
        }
        h.now = 20 * MS - 1;
        assert_eq!(finalizes(&h.tick()), 0);
        h.now = 20 * MS;
        assert_eq!(
            finalizes(&h.tick()),
            9,
            "a Finalize to each replica of each shard"
        );
    }

    /// Unanswered Prepares go out again after `retransmit`, then after
    /// twice and four times as long, never more often.
    #[test]
    fn resends_back_off() {
        let cfg = TapirConfig::default();
        let r = cfg.retransmit;
        assert_eq!(
            (0..5).map(|i| cfg.resend_after(i)).collect::<Vec<_>>(),
            [r, 2 * r, 4 * r, 4 * r, 4 * r]
        );
        let mut h = Host::new();
        let (_, prepares) = h.submit_and_read();
        let mut resent_at = Vec::new();
        for t in (0..=8 * r).step_by((MS / 2) as usize) {
            h.now = t;
            let sent = h.tick();
            if !sent.is_empty() {
                assert_eq!(sent.len(), prepares.len());
                resent_at.push(t);
            }
        }
        assert_eq!(resent_at, [r, 3 * r, 7 * r]);
    }
}
