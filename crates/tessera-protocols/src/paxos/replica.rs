//! One replica of a Multi-Paxos group: acceptor, learner, and — when it
//! wins an election — proposer (the stable leader).
//!
//! The replica is a component, not a [`Node`]: an embedder (the test
//! register's server, later a 2PC participant) owns it and forwards the
//! replica's events to it. See the module docs of [`super`] for the wiring.
//!
//! [`Node`]: tessera_core::node::Node

use super::acceptor::{choose, Acceptor, Record};
use super::ballot::Ballot;
use super::codec::Command;
use super::msg::{PaxosMsg, PromisedEntry, Snapshot};
use super::{NotLeader, Output, PaxosConfig, Slot};
use bytes::Bytes;
use rand::Rng;
use std::collections::{BTreeMap, VecDeque};
use tessera_core::ids::{NodeId, Time, TimerId};
use tessera_core::node::Ctx;

/// Something to do once a persisted record (and every earlier one) is
/// durable.
enum Waiter<C> {
    Send {
        to: NodeId,
        msg: PaxosMsg<C>,
    },
    /// The candidate's own promise: it may now send Prepare.
    SelfPromise(Ballot),
    /// The leader's own acceptance of slots `first..first + count`.
    SelfAccept {
        ballot: Ballot,
        first: Slot,
        count: u32,
    },
}

/// A slot the leader proposed and has not seen chosen yet.
struct InFlight {
    /// Replicas (by index in the group) that accepted it.
    acks: u64,
    sent_at: Time,
}

/// What one acceptor reported in its Promise.
type Promised<C> = (Vec<PromisedEntry<C>>, Option<Snapshot>);

enum Role<C> {
    Follower,
    Candidate {
        ballot: Ballot,
        /// First slot the Prepare asks about.
        from: Slot,
        /// Set once our own promise is durable and Prepare went out.
        prepared: bool,
        /// Promises by replica index (ours is taken live from the
        /// acceptor at the end).
        promises: Vec<Option<Promised<C>>>,
    },
    Leader {
        ballot: Ballot,
        /// Next free slot.
        next: Slot,
        /// Proposals waiting for the next batch (passive batching).
        pending: Vec<C>,
        inflight: BTreeMap<Slot, InFlight>,
        /// Highest slot recovered in phase 1; the leader is ready (its
        /// state machine up to date) once it is chosen.
        recovered_to: Slot,
        ready: bool,
    },
}

/// A replica of one Multi-Paxos group, generic over the command type.
pub struct Replica<C: Command> {
    cfg: PaxosConfig,
    me: NodeId,
    /// The group, in a fixed order known to all members.
    group: Vec<NodeId>,
    acc: Acceptor<C>,
    /// Every slot up to `commit` is chosen, and has been handed out as
    /// [`Output::Chosen`] (or covered by a snapshot).
    commit: Slot,
    /// The highest commit point a leader told us about.
    leader_commit: Slot,
    role: Role<C>,
    leader: Option<NodeId>,
    /// The highest ballot seen anywhere (elections go above it).
    max_seen: Ballot,
    election_at: Time,
    catchup_at: Time,
    /// Persist tokens: issued so far, and durable so far.
    issued: u64,
    durable: u64,
    waiting: VecDeque<(u64, Waiter<C>)>,
    outputs: VecDeque<Output<C>>,
    /// Commit point at which the last snapshot was asked for.
    snapshot_asked: Slot,
}

impl<C: Command> Replica<C> {
    /// A replica of `group` (which must contain `me`, at most 64 members),
    /// rebuilt from this node's durable `records` (empty at first start).
    /// A recovered snapshot comes out first as [`Output::Restore`].
    ///
    /// # Panics
    /// If `me` is not in `group` or the group has more than 64 replicas
    /// (the embedder's bug: groups come from the topology).
    pub fn new(cfg: PaxosConfig, me: NodeId, group: Vec<NodeId>, records: &[Bytes]) -> Self {
        assert!(group.contains(&me), "paxos: {me:?} is not in its group");
        assert!(group.len() <= 64, "paxos: groups of at most 64 replicas");
        let acc = Acceptor::<C>::recover(records);
        let mut outputs = VecDeque::new();
        let commit = acc.snapshot.slot;
        if commit > 0 {
            outputs.push_back(Output::Restore(acc.snapshot.clone()));
        }
        Replica {
            me,
            group,
            commit,
            leader_commit: commit,
            role: Role::Follower,
            leader: None,
            max_seen: acc.promised,
            election_at: 0,
            catchup_at: 0,
            issued: 0,
            durable: 0,
            waiting: VecDeque::new(),
            outputs,
            snapshot_asked: commit,
            acc,
            cfg,
        }
    }

    // ----- the embedder's interface -----

    /// Arm the timers; call from the embedder's `on_start`. The group's
    /// first replica, starting with an empty log, stands for election at
    /// once so that a fresh cluster has a leader without waiting a timeout.
    pub fn start<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>) {
        ctx.set_timer(self.cfg.heartbeat, self.timer());
        self.reset_election(ctx);
        let fresh = self.acc.promised == Ballot::ZERO && self.acc.entries.is_empty();
        if fresh && self.group[0] == self.me {
            self.start_election(ctx);
        }
    }

    /// Propose `cmd` for the log. Only the leader accepts proposals; the
    /// error names the leader this replica believes in. A proposal is not
    /// guaranteed to be chosen (the leader may lose its office first): the
    /// embedder learns what was chosen from [`Output::Chosen`], and clients
    /// retry.
    pub fn propose<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        cmd: C,
    ) -> Result<(), NotLeader> {
        match &mut self.role {
            Role::Leader { pending, .. } => {
                pending.push(cmd);
                self.flush(ctx);
                Ok(())
            }
            _ => Err(NotLeader {
                leader: self.leader.filter(|&l| l != self.me),
            }),
        }
    }

    /// The next thing for the embedder to act on, in log order.
    pub fn poll_output(&mut self) -> Option<Output<C>> {
        self.outputs.pop_front()
    }

    /// Compact the log: `data` is the application state after applying
    /// every slot up to `slot` (answer to [`Output::SnapshotDue`]).
    pub fn compact<M>(&mut self, ctx: &mut Ctx<M>, slot: Slot, data: Bytes) {
        if slot > self.commit {
            tracing::warn!(
                slot,
                commit = self.commit,
                "paxos: snapshot beyond the commit point ignored"
            );
            return;
        }
        let s = Snapshot { slot, data };
        if self.acc.install(s.clone()) {
            self.persist(ctx, Record::Snapshot(s), None);
        }
    }

    /// Handle a message from another replica of the group.
    pub fn on_message<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        from: NodeId,
        msg: PaxosMsg<C>,
    ) {
        let Some(idx) = self.index(from) else {
            tracing::warn!(?from, "paxos: message from outside the group");
            return;
        };
        match msg {
            PaxosMsg::Prepare { ballot, from: slot } => self.on_prepare(ctx, from, ballot, slot),
            PaxosMsg::Promise {
                ballot,
                entries,
                snapshot,
            } => self.on_promise(ctx, idx, ballot, entries, snapshot),
            PaxosMsg::Accept {
                ballot,
                first,
                batches,
                commit,
            } => self.on_accept(ctx, from, ballot, first, batches, commit),
            PaxosMsg::Accepted {
                ballot,
                first,
                count,
            } => self.on_accepted(ctx, idx, ballot, first, count),
            PaxosMsg::Nack { ballot, promised } => self.on_nack(ctx, ballot, promised),
            PaxosMsg::Commit { ballot, commit } => self.on_commit(ctx, from, ballot, commit),
            PaxosMsg::CatchUp { from: slot } => self.on_catch_up(ctx, from, slot),
            PaxosMsg::Learn { first, batches } => self.on_learn(ctx, first, batches),
            PaxosMsg::InstallSnapshot { snapshot } => self.on_install(ctx, snapshot),
        }
    }

    /// Handle a timer; `false` if `id` is not this replica's.
    pub fn on_timer<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>, id: TimerId) -> bool {
        if id != self.timer() {
            return false;
        }
        ctx.set_timer(self.cfg.heartbeat, self.timer());
        self.tick(ctx);
        true
    }

    /// Handle a durable-write completion; `false` if `token` is not this
    /// replica's.
    pub fn on_persisted<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>, token: u64) -> bool {
        if token >> 56 != self.cfg.id_space as u64 {
            return false;
        }
        let seq = token & ((1 << 56) - 1);
        // Records become durable in order: everything up to `seq` is.
        self.durable = self.durable.max(seq);
        while let Some((t, _)) = self.waiting.front() {
            if *t > self.durable {
                break;
            }
            let (_, w) = self.waiting.pop_front().expect("peeked");
            self.run(ctx, w);
        }
        true
    }

    /// The leader this replica believes in (itself included).
    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }

    /// Standing for election (phase 1 under way).
    pub fn campaigning(&self) -> bool {
        matches!(self.role, Role::Candidate { .. })
    }

    /// Leading, with every slot from before its election chosen and
    /// handed out.
    pub fn is_ready_leader(&self) -> bool {
        matches!(self.role, Role::Leader { ready: true, .. })
    }

    /// Every slot up to this one is chosen and handed out.
    pub fn commit_index(&self) -> Slot {
        self.commit
    }

    /// The last compacted slot.
    pub fn snapshot_slot(&self) -> Slot {
        self.acc.snapshot.slot
    }

    // ----- durability -----

    fn timer(&self) -> TimerId {
        TimerId((self.cfg.id_space as u64) << 56)
    }

    fn persist<M>(&mut self, ctx: &mut Ctx<M>, rec: Record<C>, then: Option<Waiter<C>>) {
        self.issued += 1;
        let token = ((self.cfg.id_space as u64) << 56) | self.issued;
        ctx.persist(token, rec.encode());
        if let Some(w) = then {
            self.waiting.push_back((self.issued, w));
        }
    }

    /// Run `w` once every record issued so far is durable (at once if all
    /// are).
    fn after_durable<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>, w: Waiter<C>) {
        if self.durable >= self.issued {
            self.run(ctx, w);
        } else {
            self.waiting.push_back((self.issued, w));
        }
    }

    fn run<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>, w: Waiter<C>) {
        match w {
            Waiter::Send { to, msg } => ctx.send(to, msg.into()),
            Waiter::SelfPromise(b) => self.on_self_promise(ctx, b),
            Waiter::SelfAccept {
                ballot,
                first,
                count,
            } => {
                let me = self.index(self.me).expect("member");
                self.on_accepted(ctx, me, ballot, first, count);
            }
        }
    }

    // ----- helpers -----

    fn index(&self, n: NodeId) -> Option<usize> {
        self.group.iter().position(|&g| g == n)
    }

    fn majority(&self) -> usize {
        self.group.len() / 2 + 1
    }

    fn broadcast<M: From<PaxosMsg<C>>>(&self, ctx: &mut Ctx<M>, msg: PaxosMsg<C>) {
        for &g in &self.group {
            if g != self.me {
                ctx.send(g, msg.clone().into());
            }
        }
    }

    fn reset_election<M>(&mut self, ctx: &mut Ctx<M>) {
        let t = self.cfg.election_timeout;
        self.election_at = ctx.now() + t + ctx.rng().random_range(0..t.max(1));
    }

    fn note_ballot(&mut self, b: Ballot) {
        self.max_seen = self.max_seen.max(b);
    }

    /// Our ballot, if we are a candidate or the leader.
    fn own_ballot(&self) -> Option<Ballot> {
        match &self.role {
            Role::Follower => None,
            Role::Candidate { ballot, .. } | Role::Leader { ballot, .. } => Some(*ballot),
        }
    }

    /// Stop leading or campaigning; `leader` is who we now believe leads.
    fn become_follower(&mut self, leader: Option<NodeId>) {
        if matches!(self.role, Role::Leader { .. }) {
            self.outputs.push_back(Output::Following { leader });
        }
        self.role = Role::Follower;
        self.leader = leader;
    }

    /// A message of ballot `b` from its leader or candidate arrived and
    /// `b` is not below our promise: give way if we hold a lower ballot.
    fn yield_to(&mut self, b: Ballot) {
        self.note_ballot(b);
        if self.own_ballot().is_some_and(|own| own < b) {
            self.become_follower(None);
        }
    }

    // ----- election (phase 1) -----

    fn start_election<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>) {
        let ballot = Ballot::next_after(self.max_seen.max(self.acc.promised), self.me);
        self.note_ballot(ballot);
        self.become_follower(None);
        self.acc
            .prepare(ballot)
            .expect("a fresh ballot is above every promise");
        self.role = Role::Candidate {
            ballot,
            from: self.commit + 1,
            prepared: false,
            promises: vec![None; self.group.len()],
        };
        self.reset_election(ctx);
        tracing::debug!(me = self.me.0, ?ballot, "paxos: election");
        // The ballot must be durable before anyone hears of it.
        self.persist(
            ctx,
            Record::Promise(ballot),
            Some(Waiter::SelfPromise(ballot)),
        );
    }

    fn on_self_promise<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>, b: Ballot) {
        let Role::Candidate {
            ballot,
            from,
            prepared,
            ..
        } = &mut self.role
        else {
            return;
        };
        if *ballot != b {
            return;
        }
        *prepared = true;
        let from = *from;
        self.broadcast(ctx, PaxosMsg::Prepare { ballot: b, from });
        self.try_lead(ctx);
    }

    fn on_prepare<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        from: NodeId,
        ballot: Ballot,
        slot: Slot,
    ) {
        self.note_ballot(ballot);
        match self.acc.prepare(ballot) {
            Err(promised) => ctx.send(from, PaxosMsg::Nack { ballot, promised }.into()),
            Ok(raised) => {
                self.yield_to(ballot);
                // Leave the candidate time to finish phase 1.
                self.reset_election(ctx);
                let snapshot = (self.acc.snapshot.slot >= slot).then(|| self.acc.snapshot.clone());
                let msg = PaxosMsg::Promise {
                    ballot,
                    entries: self.acc.promised_entries(slot),
                    snapshot,
                };
                let w = Waiter::Send { to: from, msg };
                if raised {
                    self.persist(ctx, Record::Promise(ballot), Some(w));
                } else {
                    self.after_durable(ctx, w);
                }
            }
        }
    }

    fn on_promise<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        idx: usize,
        b: Ballot,
        entries: Vec<PromisedEntry<C>>,
        snapshot: Option<Snapshot>,
    ) {
        if let Role::Candidate {
            ballot, promises, ..
        } = &mut self.role
        {
            if *ballot == b && promises[idx].is_none() {
                promises[idx] = Some((entries, snapshot));
                self.try_lead(ctx);
            }
        }
    }

    /// With our own durable promise and enough others, take office: adopt
    /// the newest snapshot reported, re-propose every slot above the commit
    /// point with phase 1's choice, and start the log after them.
    fn try_lead<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>) {
        let me = self.index(self.me).expect("member");
        let majority = self.majority();
        let Role::Candidate {
            ballot,
            prepared: true,
            promises,
            ..
        } = &mut self.role
        else {
            return;
        };
        let others = promises
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != me && p.is_some())
            .count();
        if others + 1 < majority {
            return;
        }
        let ballot = *ballot;
        let promises = std::mem::take(promises);
        let newest = promises
            .iter()
            .flatten()
            .filter_map(|(_, s)| s.as_ref())
            .max_by_key(|s| s.slot)
            .cloned();
        if let Some(s) = newest {
            self.install(ctx, s);
        }
        let own = self.acc.promised_entries(self.commit + 1);
        let values = choose(
            self.commit,
            promises
                .iter()
                .flatten()
                .flat_map(|(e, _)| e.iter())
                .chain(own.iter()),
        );
        let first = self.commit + 1;
        let recovered_to = self.commit + values.len() as Slot;
        tracing::debug!(
            me = self.me.0,
            ?ballot,
            first,
            recovered_to,
            "paxos: leading"
        );
        self.leader = Some(self.me);
        self.role = Role::Leader {
            ballot,
            next: recovered_to + 1,
            pending: Vec::new(),
            inflight: BTreeMap::new(),
            recovered_to,
            ready: false,
        };
        if !values.is_empty() {
            let batches: Vec<Vec<C>> = values.into_iter().map(|(_, b)| b).collect();
            self.send_accept(ctx, ballot, first, batches);
        }
        self.check_ready();
    }

    // ----- normal operation (phase 2) -----

    /// Leader: accept `batches` at `first..` ourselves (durably) and ask
    /// the others.
    fn send_accept<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        ballot: Ballot,
        first: Slot,
        batches: Vec<Vec<C>>,
    ) {
        let count = batches.len() as u32;
        let now = ctx.now();
        if let Role::Leader { inflight, .. } = &mut self.role {
            for s in first..first + count as Slot {
                inflight.insert(
                    s,
                    InFlight {
                        acks: 0,
                        sent_at: now,
                    },
                );
            }
        }
        self.broadcast(
            ctx,
            PaxosMsg::Accept {
                ballot,
                first,
                batches: batches.clone(),
                commit: self.commit,
            },
        );
        let rec = self
            .acc
            .accept(ballot, first, batches)
            .expect("the leader's ballot is its own promise");
        self.persist(
            ctx,
            rec,
            Some(Waiter::SelfAccept {
                ballot,
                first,
                count,
            }),
        );
    }

    /// Passive batching (Janus §6): while fewer than `pipeline` batches are
    /// in flight, everything proposed since the last batch goes out as one
    /// Accept; otherwise proposals wait for a batch to be chosen.
    fn flush<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>) {
        loop {
            let Role::Leader {
                ballot,
                next,
                pending,
                inflight,
                ..
            } = &mut self.role
            else {
                return;
            };
            if pending.is_empty() || inflight.len() >= self.cfg.pipeline {
                return;
            }
            let n = pending.len().min(self.cfg.max_batch);
            let batch: Vec<C> = pending.drain(..n).collect();
            let (b, slot) = (*ballot, *next);
            *next += 1;
            self.send_accept(ctx, b, slot, vec![batch]);
        }
    }

    fn on_accept<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        from: NodeId,
        ballot: Ballot,
        first: Slot,
        batches: Vec<Vec<C>>,
        commit: Slot,
    ) {
        self.note_ballot(ballot);
        let count = batches.len() as u32;
        match self.acc.accept(ballot, first, batches) {
            Err(promised) => ctx.send(from, PaxosMsg::Nack { ballot, promised }.into()),
            Ok(rec) => {
                self.follow(ctx, from, ballot);
                let reply = Waiter::Send {
                    to: from,
                    msg: PaxosMsg::Accepted {
                        ballot,
                        first,
                        count,
                    },
                };
                self.persist(ctx, rec, Some(reply));
                self.learn_commit(ctx, ballot, commit);
            }
        }
    }

    /// `from` leads at `ballot`, which is not below our promise.
    fn follow<M>(&mut self, ctx: &mut Ctx<M>, from: NodeId, ballot: Ballot) {
        self.yield_to(ballot);
        if self.own_ballot().is_none() {
            self.leader = Some(from);
            self.reset_election(ctx);
        }
    }

    fn on_accepted<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        idx: usize,
        b: Ballot,
        first: Slot,
        count: u32,
    ) {
        let majority = self.majority();
        let Role::Leader {
            ballot, inflight, ..
        } = &mut self.role
        else {
            return;
        };
        if *ballot != b {
            return;
        }
        let mut chosen = Vec::new();
        for s in first..first + count as Slot {
            if let Some(f) = inflight.get_mut(&s) {
                f.acks |= 1 << idx;
                if f.acks.count_ones() as usize >= majority {
                    inflight.remove(&s);
                    chosen.push(s);
                }
            }
        }
        if chosen.is_empty() {
            return;
        }
        for s in chosen {
            if let Some(e) = self.acc.entries.get_mut(&s) {
                e.chosen = true;
            }
        }
        self.advance(ctx);
        self.flush(ctx);
    }

    fn on_nack<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        ballot: Ballot,
        promised: Ballot,
    ) {
        self.note_ballot(promised);
        if self.own_ballot() == Some(ballot) && promised > ballot {
            tracing::debug!(me = self.me.0, ?ballot, ?promised, "paxos: pre-empted");
            self.become_follower(None);
            self.reset_election(ctx);
        }
    }

    // ----- learning -----

    /// Hand out every newly chosen slot in order, and say when the leader
    /// is ready or a snapshot is due.
    fn advance<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>) {
        while let Some(e) = self.acc.entries.get(&(self.commit + 1)) {
            if !e.chosen {
                break;
            }
            self.commit += 1;
            self.outputs.push_back(Output::Chosen {
                slot: self.commit,
                batch: e.batch.clone(),
            });
        }
        self.leader_commit = self.leader_commit.max(self.commit);
        self.check_ready();
        let every = self.cfg.snapshot_every;
        if every > 0 && self.commit >= self.snapshot_asked + every {
            self.snapshot_asked = self.commit;
            self.outputs
                .push_back(Output::SnapshotDue { slot: self.commit });
        }
        self.maybe_catch_up(ctx);
    }

    fn check_ready(&mut self) {
        if let Role::Leader {
            ballot,
            recovered_to,
            ready,
            ..
        } = &mut self.role
        {
            if !*ready && self.commit >= *recovered_to {
                *ready = true;
                self.outputs.push_back(Output::Leading { ballot: *ballot });
            }
        }
    }

    /// The leader of `ballot` says every slot up to `commit` is chosen. A
    /// value we accepted in that same ballot is the leader's value, so it is
    /// the chosen one; other slots we must fetch.
    fn learn_commit<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        ballot: Ballot,
        commit: Slot,
    ) {
        self.leader_commit = self.leader_commit.max(commit);
        if commit > self.commit {
            for (_, e) in self.acc.entries.range_mut(self.commit + 1..=commit) {
                if e.ballot == ballot {
                    e.chosen = true;
                }
            }
        }
        self.advance(ctx);
    }

    fn maybe_catch_up<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>) {
        if self.commit >= self.leader_commit || ctx.now() < self.catchup_at {
            return;
        }
        let Some(l) = self.leader.filter(|&l| l != self.me) else {
            return;
        };
        self.catchup_at = ctx.now() + self.cfg.retransmit;
        ctx.send(
            l,
            PaxosMsg::CatchUp {
                from: self.commit + 1,
            }
            .into(),
        );
    }

    fn on_commit<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        from: NodeId,
        ballot: Ballot,
        commit: Slot,
    ) {
        self.note_ballot(ballot);
        if ballot < self.acc.promised {
            ctx.send(
                from,
                PaxosMsg::Nack {
                    ballot,
                    promised: self.acc.promised,
                }
                .into(),
            );
            return;
        }
        self.follow(ctx, from, ballot);
        self.learn_commit(ctx, ballot, commit);
    }

    fn on_catch_up<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>, from: NodeId, slot: Slot) {
        if slot <= self.acc.snapshot.slot {
            let snapshot = self.acc.snapshot.clone();
            ctx.send(from, PaxosMsg::InstallSnapshot { snapshot }.into());
            return;
        }
        let last = self
            .commit
            .min(slot.saturating_add(self.cfg.max_learn as Slot - 1));
        if slot > last {
            return;
        }
        let batches: Vec<Vec<C>> = (slot..=last)
            .map_while(|s| self.acc.entries.get(&s).map(|e| e.batch.clone()))
            .collect();
        ctx.send(
            from,
            PaxosMsg::Learn {
                first: slot,
                batches,
            }
            .into(),
        );
    }

    fn on_learn<M: From<PaxosMsg<C>>>(
        &mut self,
        ctx: &mut Ctx<M>,
        first: Slot,
        batches: Vec<Vec<C>>,
    ) {
        let before = self.commit;
        for (i, b) in batches.into_iter().enumerate() {
            let s = first + i as Slot;
            if s > self.commit {
                self.acc.learn(s, b);
            }
        }
        if self.commit < self.leader_commit && self.acc.entries.contains_key(&(self.commit + 1)) {
            // Progress: ask for the next part at once.
            self.catchup_at = ctx.now();
        }
        self.advance(ctx);
        if self.commit == before {
            tracing::trace!(me = self.me.0, first, "paxos: learn brought nothing new");
        }
    }

    fn on_install<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>, s: Snapshot) {
        if s.slot <= self.commit {
            return;
        }
        self.install(ctx, s);
        self.catchup_at = ctx.now();
        self.advance(ctx);
    }

    /// Jump to a snapshot of chosen slots beyond our commit point.
    fn install<M>(&mut self, ctx: &mut Ctx<M>, s: Snapshot) {
        if s.slot <= self.commit {
            return;
        }
        tracing::debug!(
            me = self.me.0,
            slot = s.slot,
            "paxos: installing a snapshot"
        );
        self.commit = s.slot;
        self.leader_commit = self.leader_commit.max(s.slot);
        self.snapshot_asked = s.slot;
        self.outputs.push_back(Output::Restore(s.clone()));
        if self.acc.install(s.clone()) {
            self.persist(ctx, Record::Snapshot(s), None);
        }
    }

    // ----- time -----

    fn tick<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>) {
        let now = ctx.now();
        match &self.role {
            Role::Leader { ballot, .. } => {
                let ballot = *ballot;
                self.broadcast(
                    ctx,
                    PaxosMsg::Commit {
                        ballot,
                        commit: self.commit,
                    },
                );
                self.retransmit(ctx);
            }
            Role::Candidate { .. } | Role::Follower if now >= self.election_at => {
                self.start_election(ctx);
            }
            Role::Candidate {
                ballot,
                from,
                prepared: true,
                promises,
            } => {
                let msg = PaxosMsg::Prepare {
                    ballot: *ballot,
                    from: *from,
                };
                let missing: Vec<NodeId> = self
                    .group
                    .iter()
                    .zip(promises)
                    .filter(|(&g, p)| g != self.me && p.is_none())
                    .map(|(&g, _)| g)
                    .collect();
                for g in missing {
                    ctx.send(g, msg.clone().into());
                }
            }
            Role::Candidate { .. } | Role::Follower => self.maybe_catch_up(ctx),
        }
    }

    /// Leader: resend Accept for slots a replica has not acknowledged
    /// within the retransmission timeout, one message per run of
    /// consecutive slots.
    fn retransmit<M: From<PaxosMsg<C>>>(&mut self, ctx: &mut Ctx<M>) {
        let now = ctx.now();
        let Role::Leader {
            ballot, inflight, ..
        } = &mut self.role
        else {
            return;
        };
        let ballot = *ballot;
        let stale: Vec<(Slot, u64)> = inflight
            .iter_mut()
            .filter(|(_, f)| f.sent_at + self.cfg.retransmit <= now)
            .map(|(&s, f)| {
                f.sent_at = now;
                (s, f.acks)
            })
            .collect();
        for (i, &g) in self.group.iter().enumerate() {
            if g == self.me {
                continue;
            }
            let mut run: Option<(Slot, Vec<Vec<C>>)> = None;
            for &(s, acks) in &stale {
                if acks & (1 << i) != 0 {
                    continue;
                }
                let Some(e) = self.acc.entries.get(&s) else {
                    continue;
                };
                match &mut run {
                    Some((first, b)) if *first + b.len() as Slot == s => b.push(e.batch.clone()),
                    _ => {
                        if let Some((first, batches)) = run.take() {
                            let msg = PaxosMsg::Accept {
                                ballot,
                                first,
                                batches,
                                commit: self.commit,
                            };
                            ctx.send(g, msg.into());
                        }
                        run = Some((s, vec![e.batch.clone()]));
                    }
                }
            }
            if let Some((first, batches)) = run {
                let msg = PaxosMsg::Accept {
                    ballot,
                    first,
                    batches,
                    commit: self.commit,
                };
                ctx.send(g, msg.into());
            }
        }
    }
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
