//! The participant: a shard's server role in 2PC over pieces.
//!
//! It executes pieces against the shard's [`Store`] under a
//! [`ConcurrencyControl`], buffers their writes until commit, and answers the
//! coordinator. Live transactions have their state in one map; a finished
//! transaction leaves a tombstone (its outcome) in [`Tombstones`] until its
//! coordinator's floor passes it, so that duplicated or late messages are
//! answered, never re-executed.

use super::cc::{Admit, ConcurrencyControl, Priority};
use super::msg::{Execute, Msg, PieceReply};
use super::Timeouts;
use crate::tombstones::Tombstones;
use std::collections::VecDeque;
use tessera_core::ids::{Key, NodeId, Time, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::txn::{AbortReason, PieceSpec, ReadObs, Txn, Value};
use tessera_core::FastMap;

mod recovery;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Active,
    /// Write set locked in a lock round; reads not yet validated.
    Locked,
    Prepared,
    Committed,
    Aborted(AbortReason),
}

struct TxnState {
    coord: NodeId,
    prio: Priority,
    proc: Option<Txn>,
    phase: Phase,
    /// Replies of the pieces run so far (resent on a duplicate Execute).
    done: Vec<PieceReply>,
    /// Pieces admitted by nobody yet, with their inputs.
    waiting: VecDeque<(u16, Vec<Value>)>,
    /// Reads of data this transaction did not write itself: (key, version).
    reads: Vec<(Key, Version)>,
    /// Buffered writes, last value per key: keys and values apart, so the
    /// concurrency control gets the key set as a slice without copying it.
    write_keys: Vec<Key>,
    write_values: Vec<Value>,
    last_heard: Time,
    /// When we last asked the coordinator about this transaction.
    inquired_at: Time,
}

impl TxnState {
    fn new(coord: NodeId, prio: Priority, phase: Phase, now: Time) -> Self {
        TxnState {
            coord,
            prio,
            proc: None,
            phase,
            done: Vec::new(),
            waiting: VecDeque::new(),
            reads: Vec::new(),
            write_keys: Vec::new(),
            write_values: Vec::new(),
            last_heard: now,
            inquired_at: now,
        }
    }
}

/// The server role of [`super::TwoPc`].
pub struct Participant<C> {
    cc: C,
    store: Store,
    timeouts: Timeouts,
    txns: FastMap<TxnId, TxnState>,
    /// Outcomes of finished transactions, so that duplicated or late
    /// messages are answered, never re-executed. Kept apart from `txns` so
    /// that the periodic sweep visits live transactions only.
    ended: Tombstones<Phase>,
    /// Transactions granted locks by a release, to resume.
    granted: Vec<TxnId>,
    wounded: Vec<TxnId>,
    // Crash recovery (see `recovery`): this replica's shard, replies
    // waiting for their log records, and the last log token used.
    shard: tessera_core::ids::ShardId,
    pending: FastMap<u64, recovery::Pending>,
    log_seq: u64,
}

const SWEEP: TimerId = TimerId(1);

impl<C: ConcurrencyControl> Participant<C> {
    pub fn new(cc: C, timeouts: Timeouts, env: ServerEnv) -> Self {
        let ended = Tombstones::new(timeouts.tombstone);
        let mut p = Participant {
            cc,
            store: env.store,
            timeouts,
            txns: tessera_core::fast_map(),
            ended,
            granted: Vec::new(),
            wounded: Vec::new(),
            shard: env.shard,
            pending: tessera_core::fast_map(),
            log_seq: 0,
        };
        p.recover(&env.recovered);
        p
    }

    fn sweep_period(&self) -> Time {
        (self.timeouts.inquire.min(self.timeouts.participant) / 4).max(1)
    }

    fn on_execute(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, req: Execute) {
        let Execute {
            txn,
            since,
            proc,
            floor,
            pieces,
            inputs,
        } = req;
        let now = ctx.now();
        self.ended.raise_floor(floor);
        if self.ended.below_floor(txn) && !self.txns.contains_key(&txn) {
            return; // stale: the coordinator is done with it
        }
        match self.ended.get(txn).copied() {
            Some(Phase::Aborted(reason)) => {
                ctx.send(from, Msg::ExecuteFailed { txn, reason });
                return;
            }
            Some(_) => return, // a late duplicate
            None => {}
        }
        if !self.txns.contains_key(&txn)
            && !recovery::first_contact_ok(proc.as_ref(), self.shard, &pieces)
        {
            let reason = AbortReason::Timeout;
            self.tombstone(now, txn);
            ctx.send(from, Msg::ExecuteFailed { txn, reason });
            return;
        }
        let st = self
            .txns
            .entry(txn)
            .or_insert_with(|| TxnState::new(from, Priority { since, txn }, Phase::Active, now));
        st.last_heard = now;
        if st.phase != Phase::Active {
            return; // a late duplicate
        }
        if st.proc.is_none() {
            st.proc = Some(proc);
        }
        let mut resend = Vec::new();
        for (piece, inputs) in pieces.into_iter().zip(inputs) {
            if let Some(r) = st.done.iter().find(|r| r.piece == piece) {
                resend.push(r.clone());
            } else if !st.waiting.iter().any(|(p, _)| *p == piece) {
                st.waiting.push_back((piece, inputs));
            }
        }
        if !resend.is_empty() {
            ctx.send(
                from,
                Msg::ExecuteOk {
                    txn,
                    results: resend,
                },
            );
        }
        self.run_waiting(ctx, txn);
        self.resume_granted(ctx);
    }

    /// Admit and run the transaction's waiting pieces in order until one
    /// must wait; reply with what ran.
    fn run_waiting(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let mut results = Vec::new();
        loop {
            let Some(st) = self.txns.get_mut(&txn) else {
                return;
            };
            if st.phase != Phase::Active {
                return;
            }
            let Some((piece, inputs)) = st.waiting.front() else {
                break;
            };
            let proc = st
                .proc
                .clone()
                .expect("an active transaction has its procedure");
            let spec = proc.resolve(*piece as usize, inputs);
            let admit = self.cc.admit(
                &mut self.store,
                st.prio,
                &spec.reads,
                &spec.writes,
                &mut self.wounded,
            );
            let wounded = std::mem::take(&mut self.wounded);
            for w in &wounded {
                self.abort_local(ctx, *w, AbortReason::LockConflict, true);
            }
            self.wounded = wounded;
            self.wounded.clear();
            match admit {
                Admit::Go => {
                    let st = self.txns.get_mut(&txn).expect("present");
                    let (piece, inputs) = st.waiting.pop_front().expect("front exists");
                    let reply = execute_piece(&self.store, st, &proc, &spec, piece, &inputs);
                    st.done.push(reply.clone());
                    results.push(reply);
                }
                Admit::Wait => break,
                Admit::Abort(reason) => {
                    self.abort_local(ctx, txn, reason, true);
                    return;
                }
            }
        }
        if !results.is_empty() {
            let coord = self.txns[&txn].coord;
            ctx.send(coord, Msg::ExecuteOk { txn, results });
        }
    }

    fn resume_granted(&mut self, ctx: &mut Ctx<Msg>) {
        while let Some(t) = self.granted.pop() {
            self.run_waiting(ctx, t);
        }
    }

    /// Abort `txn` here (wounded, conflicted, timed out, or told to) and,
    /// when `notify`, tell its coordinator.
    fn abort_local(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: AbortReason, notify: bool) {
        let Some(st) = self.txns.get_mut(&txn) else {
            return;
        };
        if !matches!(st.phase, Phase::Active | Phase::Locked | Phase::Prepared) {
            return;
        }
        st.phase = Phase::Aborted(reason);
        st.waiting.clear();
        let coord = st.coord;
        self.cc
            .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
        self.finish(ctx.now(), txn);
        if notify {
            ctx.send(coord, Msg::ExecuteFailed { txn, reason });
        }
    }

    /// Move a transaction whose phase is now final to the tombstones.
    fn finish(&mut self, now: Time, txn: TxnId) {
        if let Some(st) = self.txns.remove(&txn) {
            debug_assert!(matches!(st.phase, Phase::Committed | Phase::Aborted(_)));
            self.ended.insert(txn, st.phase, now);
        }
    }

    /// Remember that `txn` is aborted here although it never ran, so that a
    /// late Execute (overtaken by this message) does not run it.
    fn tombstone(&mut self, now: Time, txn: TxnId) {
        self.ended
            .insert(txn, Phase::Aborted(AbortReason::Timeout), now);
    }

    /// A lock or prepare round reached `txn`. `Err(answer)` when the
    /// transaction has ended here (yes iff committed), or never ran here: it
    /// is then tombstoned and the answer is no.
    fn round_reached(&mut self, now: Time, txn: TxnId) -> Result<(), bool> {
        if let Some(p) = self.ended.get(txn) {
            return Err(*p == Phase::Committed);
        }
        match self.txns.get_mut(&txn) {
            Some(st) => {
                st.last_heard = now;
                Ok(())
            }
            None => {
                self.tombstone(now, txn);
                Err(false)
            }
        }
    }

    /// 2PC phase one. True when the transaction is (now) prepared.
    fn prepare(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) -> bool {
        let now = ctx.now();
        if let Err(answer) = self.round_reached(now, txn) {
            return answer;
        }
        let st = self.txns.get_mut(&txn).expect("live");
        match st.phase {
            Phase::Prepared | Phase::Committed => return true,
            Phase::Aborted(_) => return false,
            Phase::Active | Phase::Locked => {}
        }
        let ok = st.waiting.is_empty()
            && self
                .cc
                .prepare(&mut self.store, txn, &st.reads, &st.write_keys);
        if ok {
            st.phase = Phase::Prepared;
        } else {
            st.phase = Phase::Aborted(AbortReason::Validation);
            st.waiting.clear();
            self.cc
                .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
            self.finish(now, txn);
        }
        ok
    }

    /// The lock round (OCC with several participants).
    fn lock(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) -> bool {
        let now = ctx.now();
        if let Err(answer) = self.round_reached(now, txn) {
            return answer;
        }
        let st = self.txns.get_mut(&txn).expect("live");
        match st.phase {
            Phase::Locked | Phase::Prepared | Phase::Committed => return true,
            Phase::Aborted(_) => return false,
            Phase::Active => {}
        }
        if st.waiting.is_empty() && self.cc.lock(&mut self.store, txn, &st.write_keys) {
            st.phase = Phase::Locked;
            true
        } else {
            self.abort_local(ctx, txn, AbortReason::LockConflict, false);
            false
        }
    }

    fn commit(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let now = ctx.now();
        let Some(st) = self.txns.get_mut(&txn) else {
            if matches!(self.ended.get(txn), Some(Phase::Aborted(_))) {
                tracing::warn!(?txn, "commit for a transaction aborted here");
            }
            return;
        };
        if st.phase != Phase::Prepared {
            tracing::warn!(?txn, phase = ?st.phase, "commit for a transaction that is not prepared");
            return;
        }
        st.phase = Phase::Committed;
        for (&k, v) in st.write_keys.iter().zip(st.write_values.drain(..)) {
            self.store.install(k, v, txn.version());
        }
        self.cc
            .release(&mut self.store, txn, &st.write_keys, &mut self.granted);
        self.finish(now, txn);
    }

    fn sweep(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        self.ended.sweep(now);
        let mut silent = Vec::new();
        let mut ask = Vec::new();
        for (txn, st) in self.txns.iter_mut() {
            let quiet = now - st.last_heard.max(st.inquired_at) > self.timeouts.inquire;
            match st.phase {
                Phase::Active | Phase::Locked
                    if now - st.last_heard > self.timeouts.participant =>
                {
                    silent.push(*txn);
                }
                // Ask a quiet coordinator early: one that restarted has
                // forgotten the transaction and answers Abort at once, so
                // its locks are freed without waiting for the timeout.
                _ if quiet => {
                    st.inquired_at = now;
                    ask.push((*txn, st.coord));
                }
                _ => {}
            }
        }
        ask.sort_unstable();
        for (txn, coord) in ask {
            ctx.send(coord, Msg::Inquire { txn });
        }
        silent.sort_unstable();
        for txn in silent {
            self.abort_local(ctx, txn, AbortReason::Timeout, true);
        }
        self.resume_granted(ctx);
        let period = self.sweep_period();
        ctx.set_timer(period, SWEEP);
    }
}

/// Run one piece on the store and this transaction's own buffered writes.
fn execute_piece(
    store: &Store,
    st: &mut TxnState,
    proc: &Txn,
    spec: &PieceSpec,
    piece: u16,
    inputs: &[Value],
) -> PieceReply {
    let mut obs = Vec::with_capacity(spec.reads.len());
    let res = {
        // Most pieces read a handful of keys: keep their values on the stack.
        const INLINE: usize = 16;
        let mut inline: [Option<&Value>; INLINE] = [None; INLINE];
        let mut heap: Vec<Option<&Value>>;
        let n = spec.reads.len();
        let values: &mut [Option<&Value>] = if n <= INLINE {
            &mut inline[..n]
        } else {
            heap = vec![None; n];
            &mut heap
        };
        for (slot, a) in values.iter_mut().zip(&spec.reads) {
            if let Some(i) = st.write_keys.iter().position(|k| *k == a.key) {
                *slot = Some(&st.write_values[i]);
                continue;
            }
            let (value, version) = match store.get(a.key) {
                Some(r) => (Some(&r.value), r.meta.version),
                None => (None, Version::INITIAL),
            };
            *slot = value;
            obs.push(ReadObs {
                key: a.key,
                version,
            });
        }
        proc.execute(piece as usize, values, inputs)
    };
    st.reads.extend(obs.iter().map(|o| (o.key, o.version)));
    let mut written = Vec::with_capacity(res.writes.len());
    for (k, v) in res.writes {
        debug_assert!(
            spec.writes.iter().any(|a| a.key == k),
            "{} piece {piece} wrote undeclared key {k}",
            proc.name()
        );
        match st.write_keys.iter().position(|wk| *wk == k) {
            Some(i) => st.write_values[i] = v,
            None => {
                st.write_keys.push(k);
                st.write_values.push(v);
            }
        }
        written.push(k);
    }
    PieceReply {
        piece,
        reads: obs,
        writes: written,
        output: res.output,
        user_abort: res.user_abort,
    }
}

impl<C: ConcurrencyControl> Node<Msg> for Participant<C> {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        let period = self.sweep_period();
        ctx.set_timer(period, SWEEP);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Execute(req) => self.on_execute(ctx, from, req),
            Msg::Lock { txn } => {
                let ok = self.lock(ctx, txn);
                ctx.send(from, Msg::Locked { txn, ok });
                self.resume_granted(ctx);
            }
            Msg::Prepare { txn } => {
                self.on_prepare(ctx, from, txn);
                self.resume_granted(ctx);
            }
            Msg::CommitOnePhase { txn } => {
                self.on_commit_one_phase(ctx, from, txn);
                self.resume_granted(ctx);
            }
            Msg::Commit { txn } => {
                self.on_commit(ctx, from, txn);
                self.resume_granted(ctx);
            }
            Msg::Abort { txn } => {
                // The coordinator decided: no need to tell it.
                if self.txns.contains_key(&txn) {
                    self.log_abort(ctx, txn);
                    self.abort_local(ctx, txn, AbortReason::Validation, false);
                } else if !self.ended.contains(txn) {
                    self.tombstone(ctx.now(), txn);
                }
                self.resume_granted(ctx);
            }
            Msg::ExecuteOk { .. }
            | Msg::ExecuteFailed { .. }
            | Msg::Locked { .. }
            | Msg::Vote { .. }
            | Msg::OnePhaseDone { .. }
            | Msg::Ack { .. }
            | Msg::Inquire { .. } => {
                tracing::warn!(?from, ?msg, "participant got a coordinator's message");
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == SWEEP {
            self.sweep(ctx);
        }
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        self.persisted(ctx, token);
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }

    fn snapshot(&self) -> Option<bytes::Bytes> {
        Some(self.snapshot_record())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::occ::{Occ, OccConfig};
    use rand::SeedableRng;
    use std::sync::Arc;
    use tessera_core::ids::ShardId;
    use tessera_core::node::Effect;
    use tessera_core::topology::Topology;
    use tessera_core::txn::{Access, PieceKind, PieceResult, PieceSpec, Procedure};

    /// One piece on shard 0 that overwrites key 7.
    #[derive(Debug)]
    struct Put(Vec<PieceSpec>);

    impl Put {
        fn txn() -> Txn {
            let key = Key::new(0, 7);
            Arc::new(Put(vec![PieceSpec {
                shard: ShardId(0),
                reads: vec![Access::all(key)],
                writes: vec![Access::all(key)],
                kind: PieceKind::Immediate,
                inputs: Vec::new(),
                dynamic: false,
            }]))
        }
    }

    impl Procedure for Put {
        fn name(&self) -> &'static str {
            "put"
        }
        fn pieces(&self) -> &[PieceSpec] {
            &self.0
        }
        fn execute(&self, _: usize, _: &[Option<&Value>], _: &[Value]) -> PieceResult {
            PieceResult {
                writes: vec![(Key::new(0, 7), Value::from_static(b"x"))],
                ..PieceResult::default()
            }
        }
    }

    struct Harness {
        p: Participant<Occ>,
        rng: rand::rngs::SmallRng,
        now: Time,
    }

    impl Harness {
        fn new() -> Self {
            let env = ServerEnv {
                me: NodeId(0),
                shard: ShardId(0),
                replica: 0,
                topology: Arc::new(Topology::new(1, 1, 1)),
                store: Store::new(),
                recovered: Vec::new(),
            };
            let p = Participant::new(Occ::new(&OccConfig::default()), Timeouts::default(), env);
            Harness {
                p,
                rng: rand::rngs::SmallRng::seed_from_u64(1),
                now: 0,
            }
        }

        /// Deliver `msg` from the coordinator (node 1); the messages sent
        /// back. Log records are durable at once, as on `local`.
        fn deliver(&mut self, msg: Msg) -> Vec<Msg> {
            let mut effects = Vec::new();
            let mut ctx = Ctx::new(self.now, NodeId(0), &mut self.rng, &mut effects);
            self.p.on_message(&mut ctx, NodeId(1), msg);
            let mut sent = Vec::new();
            while !effects.is_empty() {
                for e in std::mem::take(&mut effects) {
                    match e {
                        Effect::Send { msg, .. } => sent.push(msg),
                        Effect::Persist { token, .. } => {
                            let mut more = Vec::new();
                            let mut ctx = Ctx::new(self.now, NodeId(0), &mut self.rng, &mut more);
                            self.p.on_persisted(&mut ctx, token);
                            effects.extend(more);
                        }
                        _ => {}
                    }
                }
            }
            sent
        }
    }

    fn execute(txn: TxnId, floor: TxnId) -> Msg {
        Msg::Execute(Execute {
            txn,
            since: 0,
            proc: Put::txn(),
            floor,
            pieces: vec![0],
            inputs: vec![Vec::new()],
        })
    }

    #[test]
    fn tombstones_last_until_the_floor_passes_them() {
        let mut h = Harness::new();
        let t1 = TxnId::new(NodeId(1), 0, 1);
        let t2 = TxnId::new(NodeId(1), 0, 2);
        assert!(matches!(
            h.deliver(execute(t1, t1))[..],
            [Msg::ExecuteOk { .. }]
        ));
        assert!(matches!(
            h.deliver(Msg::CommitOnePhase { txn: t1 })[..],
            [Msg::OnePhaseDone {
                committed: true,
                ..
            }]
        ));
        // A duplicate while t1 is still the floor: answered from the
        // tombstone, not re-executed.
        assert!(h.deliver(execute(t1, t1)).is_empty());
        assert!(h.p.ended.contains(t1));
        assert!(!h.p.txns.contains_key(&t1));

        // t2 raises the floor past t1: the tombstone goes at the next
        // sweep, and a late duplicate of t1 is still not re-executed.
        assert!(matches!(
            h.deliver(execute(t2, t2))[..],
            [Msg::ExecuteOk { .. }]
        ));
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(h.now, NodeId(0), &mut h.rng, &mut effects);
        h.p.sweep(&mut ctx);
        assert!(!h.p.ended.contains(t1), "tombstone below the floor kept");
        assert!(h.deliver(execute(t1, t1)).is_empty());
        assert!(!h.p.txns.contains_key(&t1), "stale Execute re-ran t1");
        assert_eq!(
            h.p.store.get(Key::new(0, 7)).unwrap().meta.version,
            t1.version()
        );
    }

    #[test]
    fn tombstones_of_a_silent_coordinator_expire_by_time() {
        let mut h = Harness::new();
        let t1 = TxnId::new(NodeId(1), 0, 1);
        h.deliver(execute(t1, t1));
        h.deliver(Msg::Abort { txn: t1 });
        assert!(h.p.ended.contains(t1));
        h.now = Timeouts::default().tombstone + 1;
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(h.now, NodeId(0), &mut h.rng, &mut effects);
        h.p.sweep(&mut ctx);
        assert!(h.p.ended.is_empty());
    }
}
