//! The coordinator on a compute node: Algorithm 1 as a phase machine over
//! one-sided verbs (see the module doc of [`super`] for the phases).
//!
//! Each round posts one batch of verbs per memory node and waits for every
//! answer; the phase then moves on. Execution runs in *waves*: a piece whose
//! keys depend on earlier pieces' outputs (§III.C "Unknown Read Set") is
//! fetched in a later wave, after its inputs are known. A key whose slot
//! address is not in the machine's address cache is first located by
//! reading its bucket (§VIII.A).

use super::drift::{DriftMeter, Verdict};
use super::lease::{Leases, Stage, DRIFT_BOUND_PPM};
use super::lock::{self, Seen};
use super::manager::{Action, LeaseManager, LeaseMsg, RoStats};
use super::OoccConfig;
use crate::by_type::ByType;
use crate::disagg::client::{self, Endpoint, Exec, Incoming, Step};
use crate::disagg::verbs::{LogRecord, SlotWrite};
use crate::disagg::{Msg, Verb, VerbResult};
use std::collections::{BTreeMap, VecDeque};
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::txn::{AbortReason, Attempt, TxnOutcome};
use tessera_core::FastMap;

/// The Lease Manager's period, its drain, and the clock synchronization
/// (lease waits are numbered from 1, far below).
const TICK: TimerId = TimerId(1 << 62);
const DRAIN: TimerId = TimerId((1 << 62) + 1);
const SYNC: TimerId = TimerId((1 << 62) + 2);

type Round = client::Round<Purpose>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Execute,
    /// Validate & Logging, and with delayed write locks the *revalidation*
    /// that may follow it (see [`Run::upgrade_posted`]).
    Validate,
    Commit,
    Release,
}

/// What one verb of a batch was for.
#[derive(Clone, Copy, Debug)]
enum Purpose {
    /// Bucket read `probe` buckets past `key`'s own.
    Locate {
        key: Key,
        probe: u32,
    },
    Lock {
        key: Key,
    },
    Fetch {
        key: Key,
    },
    Validate {
        key: Key,
    },
    /// A WRITE or a log record: only its acknowledgement matters.
    Ack,
}

/// OOCC's state of a record the transaction touched.
#[derive(Default)]
struct Lock {
    /// The lock word this transaction set on it, if any.
    held: Option<u64>,
    /// Read while another transaction held an intention lock: a read-only
    /// transaction must validate it even within the lease (Alg. 1 l. 13).
    intention_seen: bool,
}

struct Run {
    exec: Exec<Lock>,
    phase: Phase,
    /// Batches of the current round still unanswered.
    pending: usize,
    exec_start: Option<Time>,
    exec_end: Time,
    /// When the last of the transaction's lock CASes (intention or write
    /// lock) was answered: the write-wait lease runs from here. §III.A:
    /// "when a coordinator successfully locks a tuple, it operates under
    /// the assumption that an implicit read lease has been set on the
    /// record", and the lease to wait out is that of a reader that read a
    /// written record before it was locked (Lemma VI.2, scenario 1: "before
    /// the Execution&Locking phase"). A reader that finds the intention
    /// lock gets no lease on the record and validates it (§IV, Alg. 1
    /// l. 13), so the later upgrade to a write lock does not restart the
    /// wait. Such a reader started before the CAS reached the memory node,
    /// hence before its answer: the answer's arrival on this clock is the
    /// earliest start that bounds every such lease (the memory node's own
    /// CAS time is on no clock we can compare with). The Validate&Logging
    /// round(s) then overlap the wait, as §I says of the logging.
    locked_at: Time,
    /// Delayed write lock: when the Validate&Logging round that validated
    /// the reads and upgraded the intention locks was posted, until it is
    /// checked (`None` after). Alg. 1 puts both in one round, which is
    /// sound only if the upgrades land within the read-validate lease of
    /// the validation: a reader that validates a record it found
    /// intention-locked orders itself before this writer, and may do so
    /// until the upgrade lands; what it read must then be older than
    /// anything ordered after this writer, and the writers that overwrite
    /// this transaction's validated reads wait out the write-wait lease
    /// from their locks, which came after the validation. A round answered
    /// later than that (or without leases, where no writer waits) is
    /// followed by a second validation of the reads, now that the write
    /// locks are visible. See the module doc for the counter-example.
    upgrade_posted: Option<Time>,
    /// Delayed write lock: when the upgrade to write locks was posted (kept
    /// for the lock-time counters; `upgrade_posted` is taken when checked).
    upgraded_at: Option<Time>,
    /// A READ found another transaction's lock (Alg. 1 l. 4), as opposed
    /// to a lock CAS that lost: the two causes of a lock abort.
    read_locked: bool,
    /// When the attempt started, and the round trips it waited for: the
    /// counters by transaction type.
    started: Time,
    rounds: u64,
    /// When the latest round was posted, and how long the latest answered
    /// one took: the estimate of a round trip that places the late upgrade
    /// ([`OoccConfig::late_upgrade`]).
    posted_at: Time,
    last_round: Time,
    /// Late upgrade: the reads are validated (with the redo log) and the
    /// upgrade to write locks is still to be posted.
    upgrade_held: bool,
}

pub struct OoccCoordinator {
    cfg: OoccConfig,
    me: NodeId,
    /// This coordinator's leases, as the Lease Manager set them (§VII.A).
    leases: Leases,
    net: Endpoint<Purpose>,
    runs: FastMap<TxnId, Run>,
    /// Lease waits: timer id → transaction.
    waits: FastMap<u64, TxnId>,
    next_timer: u64,
    counters: Counters,
    /// Attempts, commits, round trips, lease waits and attempt time by
    /// transaction type (`oocc_<field>.<type>`): what each of TPC-C's types
    /// gains or pays for each technique (Fig. 12d).
    by_type: ByType,
    /// The Lease Manager's host, which is also the reference clock
    /// (`None` without leases).
    manager_node: Option<NodeId>,
    /// The Lease Manager, on its host.
    manager: Option<LeaseManager>,
    /// This clock against the reference (`None` on the reference's host
    /// and without leases).
    drift: Option<DriftMeter>,
    /// Stopped for drift beyond the bound (§VII.B): starts nothing more.
    stopped: bool,
    /// Attempts submitted before the clock was calibrated.
    held: Vec<Attempt>,
    /// Read-only statistics since the manager's last poll.
    period: RoStats,
    /// Lease messages to this node itself, handled after the current step.
    local: VecDeque<(NodeId, LeaseMsg)>,
    /// The Lease Manager's lease at the start and after each adjustment
    /// (reference time, ns), for the results row's timeline.
    samples: Vec<(&'static str, Time, u64)>,
}

/// Totals over the whole run (warm-up and cool-down included), so that
/// ratios are taken between counters, not against the measured window.
#[derive(Default)]
struct Counters {
    attempts_started: u64,
    /// Round trips: rounds of batches posted and waited for (the unsignaled
    /// unlocks of an abort are not waited for).
    rounds: u64,
    ro_commits: u64,
    ro_one_round: u64,
    lock_aborts: u64,
    /// The lock aborts whose transaction READ a record locked by another.
    locked_read_aborts: u64,
    validation_aborts: u64,
    /// Read-write transactions validated a second time after the lock
    /// upgrade (delayed write lock; see [`Run::upgrade_posted`]).
    revalidations: u64,
    /// The procedure rolled back (TPC-C's 1% of NewOrders).
    user_aborts: u64,
    lease_wait_ns: u64,
    /// READs of read-only transactions that met another's intention lock
    /// and read through it (delayed write lock, §IV).
    reads_met_intention: u64,
    /// READs that met another's lock that stops them (a write lock, or an
    /// intention lock met by a read-write transaction): Alg. 1 l. 4.
    reads_met_lock: u64,
    /// Read-write attempts that reached the commit WRITE, and over them the
    /// time from the last lock CAS's answer to the upgrade's post (records
    /// intention-locked; about a round trip more at the memory node, from
    /// the CAS's landing to the upgrade's) and from the upgrade's post (or,
    /// without delayed locks, the last lock CAS's answer) to the commit
    /// WRITE's post (write-locked), ns.
    locked_commits: u64,
    intention_locked_ns: u64,
    write_locked_ns: u64,
    drift_stops: u64,
    stopped_aborts: u64,
    drift_syncs: u64,
}

impl OoccCoordinator {
    pub fn new(cfg: OoccConfig, env: CoordinatorEnv) -> Self {
        let hosts: Vec<NodeId> = env.topology.client_hosts().map(|n| n.id).collect();
        let manager_node = cfg.lease.then(|| hosts[0]);
        let here = manager_node == Some(env.me);
        OoccCoordinator {
            me: env.me,
            leases: Leases::new(cfg.lease_ns, cfg.offset),
            net: Endpoint::new(&env, cfg.connect_retry),
            runs: tessera_core::fast_map(),
            waits: tessera_core::fast_map(),
            next_timer: 1,
            counters: Counters::default(),
            by_type: ByType::new("oocc"),
            manager: here
                .then(|| LeaseManager::new(hosts, cfg.lease_ns, cfg.adapt.clone(), cfg.offset)),
            drift: (manager_node.is_some() && !here).then(|| {
                // §VII.B: stop at 80% of the bound.
                DriftMeter::new(0.8 * DRIFT_BOUND_PPM as f64, cfg.calibration)
            }),
            manager_node,
            stopped: false,
            held: Vec::new(),
            period: RoStats::default(),
            local: VecDeque::new(),
            samples: Vec::new(),
            cfg,
        }
    }

    /// Whether attempts may start: not stopped, and with the stop switch
    /// on, the clock measured over the calibration span.
    fn serving(&self) -> bool {
        !self.stopped
            && (!self.cfg.drift_stop || self.drift.as_ref().is_none_or(|d| d.calibrated()))
    }

    /// Start `attempt`, hold it until the clock is calibrated, or refuse it
    /// once stopped.
    fn admit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        if self.stopped {
            self.counters.stopped_aborts += 1;
            ctx.done(attempt.id, TxnOutcome::Aborted(AbortReason::Timeout));
        } else if !self.serving() {
            self.held.push(attempt);
        } else if let Some(a) = self.net.admit(attempt) {
            self.start(ctx, a);
        }
    }

    fn send_lease(&mut self, ctx: &mut Ctx<Msg>, to: NodeId, msg: LeaseMsg) {
        if to == self.me {
            self.local.push_back((to, msg));
        } else {
            ctx.send(to, Msg::Lease(msg));
        }
    }

    /// Run `f` on the Lease Manager (on its host) and carry out its actions.
    fn run_manager(
        &mut self,
        ctx: &mut Ctx<Msg>,
        f: impl FnOnce(&mut LeaseManager, &mut Vec<Action>),
    ) {
        let Some(m) = self.manager.as_mut() else {
            return;
        };
        let mut out = Vec::new();
        let before = m.lease();
        f(m, &mut out);
        if m.lease() != before {
            self.samples
                .push(("lease_ns", ctx.observed_now(), m.lease()));
        }
        for a in out {
            match a {
                Action::Send(to, msg) => self.send_lease(ctx, to, msg),
                Action::Wake(delay) => ctx.set_timer(delay, DRAIN),
            }
        }
    }

    /// Deliver lease messages this node sent itself.
    fn flush_local(&mut self, ctx: &mut Ctx<Msg>) {
        while let Some((from, msg)) = self.local.pop_front() {
            self.on_lease(ctx, from, msg);
        }
    }

    fn on_lease(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: LeaseMsg) {
        match msg {
            LeaseMsg::Prepare { epoch, old, new } => {
                self.leases.prepare(epoch, old, new);
                let stage = Stage::Prepare;
                self.send_lease(ctx, from, LeaseMsg::Ack { epoch, stage });
            }
            LeaseMsg::Commit { epoch, new } => {
                self.leases.commit(epoch, new);
                let stage = Stage::Commit;
                self.send_lease(ctx, from, LeaseMsg::Ack { epoch, stage });
            }
            LeaseMsg::Ack { epoch, stage } => {
                self.run_manager(ctx, |m, out| m.on_ack(from, epoch, stage, out));
            }
            LeaseMsg::Poll { round } => {
                let stats = std::mem::take(&mut self.period);
                self.send_lease(ctx, from, LeaseMsg::Stats { round, stats });
            }
            LeaseMsg::Stats { round, stats } => {
                if let Some(m) = self.manager.as_mut() {
                    m.on_stats(round, &stats);
                }
            }
            LeaseMsg::Sync { seq } => {
                let time = ctx.now();
                self.send_lease(ctx, from, LeaseMsg::SyncReply { seq, time });
            }
            LeaseMsg::SyncReply { seq, time } => self.on_sync_reply(ctx, seq, time),
        }
    }

    /// A clock sample: stop on drift beyond the bound (with the switch on),
    /// start the held attempts once calibrated.
    fn on_sync_reply(&mut self, ctx: &mut Ctx<Msg>, seq: u64, time: Time) {
        let now = ctx.now();
        let Some(v) = self.drift.as_mut().and_then(|d| d.on_reply(seq, time, now)) else {
            return;
        };
        self.counters.drift_syncs += 1;
        match v {
            Verdict::Beyond { ppm } if self.cfg.drift_stop && !self.stopped => {
                tracing::warn!(node = ?self.me, ppm, "clock drift beyond the bound: stopping");
                self.stop(ctx);
            }
            _ if self.serving() => {
                for a in std::mem::take(&mut self.held) {
                    self.admit(ctx, a);
                }
            }
            _ => {}
        }
    }

    /// Stop for drift (§VII.B): refuse what is held, abort every
    /// transaction that has not begun its commit writes (a writer waiting
    /// out its lease releases its locks without writing; the others abort
    /// when their round is answered), and start nothing more.
    fn stop(&mut self, ctx: &mut Ctx<Msg>) {
        self.stopped = true;
        self.counters.drift_stops += 1;
        for a in std::mem::take(&mut self.held) {
            self.admit(ctx, a);
        }
        let waiting: Vec<(u64, TxnId)> = self.waits.drain().collect();
        for (_, txn) in waiting {
            self.abort(ctx, txn, AbortReason::Timeout);
        }
        for run in self.runs.values_mut() {
            if matches!(run.phase, Phase::Execute | Phase::Validate) {
                run.exec.fail(AbortReason::Timeout);
            }
        }
    }

    fn start(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let id = attempt.id;
        self.runs.insert(
            id,
            Run {
                exec: Exec::new(attempt),
                phase: Phase::Execute,
                pending: 0,
                exec_start: None,
                exec_end: 0,
                locked_at: 0,
                upgrade_posted: None,
                upgraded_at: None,
                read_locked: false,
                started: ctx.now(),
                rounds: 0,
                posted_at: 0,
                last_round: 0,
                upgrade_held: false,
            },
        );
        self.counters.attempts_started += 1;
        self.advance(ctx, id);
    }

    /// Post one round (signaled) and wait for its answers. Returns the
    /// number of batches: none means there was nothing to post.
    fn post(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, round: Round) -> usize {
        let pending = self.runs.get_mut(&txn).map(|r| &mut r.pending);
        let batches = self.net.post_awaited(ctx, txn, round, pending);
        let posted = u64::from(batches > 0);
        self.counters.rounds += posted;
        if let Some(r) = self.runs.get_mut(&txn) {
            r.rounds += posted;
            r.posted_at = ctx.now();
        }
        batches
    }

    /// Move `txn` on after its round finished (or at its start).
    fn advance(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let Some(run) = self.runs.get(&txn) else {
            return;
        };
        if let Some(reason) = run.exec.failed {
            return self.abort(ctx, txn, reason);
        }
        match run.phase {
            Phase::Execute => self.execute(ctx, txn),
            Phase::Validate => self.after_validate(ctx, txn),
            Phase::Commit => {
                if self.cfg.write_unlock {
                    self.finish(ctx, txn);
                } else {
                    self.release(ctx, txn);
                }
            }
            Phase::Release => self.finish(ctx, txn),
        }
    }

    /// Run every piece whose keys are fetched; then fetch the keys of the
    /// pieces whose inputs are ready, or move to validation.
    fn execute(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("advanced");
        let need = match run.exec.step(|l| l.held.is_some()) {
            Step::Done => return self.validate(ctx, txn),
            Step::Failed => return self.advance(ctx, txn),
            Step::Need(need) => need,
        };
        // Locate unknown addresses first.
        let mut round = Round::new();
        if self
            .net
            .locate(&run.exec, &need, &mut round, |key, probe| Purpose::Locate {
                key,
                probe,
            })
        {
            self.post(ctx, txn, round);
            return;
        }
        let delayed = self.cfg.delayed_lock;
        for n in need {
            let addr = self.net.addr(&run.exec.vacant, n.key).expect("located");
            if n.write {
                let word = if delayed {
                    lock::intention(txn)
                } else {
                    lock::write(txn)
                };
                client::push(
                    &mut round,
                    n.shard,
                    Verb::Cas {
                        addr,
                        expect: lock::FREE,
                        swap: word,
                    },
                    Purpose::Lock { key: n.key },
                );
            }
            client::push(
                &mut round,
                n.shard,
                Verb::Read { addr, len: 1 },
                Purpose::Fetch { key: n.key },
            );
        }
        run.exec_start.get_or_insert(ctx.now());
        self.post(ctx, txn, round);
    }

    /// Idle `txn` until `at` for the write-wait lease; then its held
    /// upgrade, or its commit, is posted.
    fn wait_until(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, at: Time) {
        let wait = at - ctx.now();
        self.counters.lease_wait_ns += wait;
        let ty = self.runs[&txn].exec.attempt.txn.name();
        self.by_type.add(ty, "lease_wait_ns", wait);
        let id = self.next_timer;
        self.next_timer += 1;
        self.waits.insert(id, txn);
        ctx.set_timer(wait, TimerId(id));
    }

    /// Whether a writer's upgrade to write locks leaves its Validate&Logging
    /// round for a round of its own late in the wait
    /// ([`OoccConfig::late_upgrade`]): only with room for the validation,
    /// the upgrade and a round of margin within the read-validate lease,
    /// which bounds the upgrade's answer (see [`Run::upgrade_posted`]).
    fn upgrade_late(&self, txn: TxnId) -> bool {
        let c = &self.cfg;
        let run = &self.runs[&txn];
        c.late_upgrade
            && c.delayed_lock
            && c.lease
            && c.wait_lease
            && !run.exec.read_only
            && self.leases.get().reads_hold(0, 3 * run.last_round)
    }

    /// Late upgrade, the reads validated: post the upgrade so that it is
    /// answered a round before the earlier of the write-wait's end and the
    /// validation's read-validate lease, or now if that has passed.
    fn hold_upgrade(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = &self.runs[&txn];
        let l = self.leases.get();
        let validated = run.upgrade_posted.unwrap_or(run.locked_at);
        let bound = validated.saturating_add(l.read_validate);
        let by = l.release_at(run.locked_at).min(bound);
        let at = by.saturating_sub(2 * run.last_round);
        if at > ctx.now() {
            return self.wait_until(ctx, txn, at);
        }
        self.post_upgrade(ctx, txn);
    }

    /// Late upgrade: WRITE the write locks over the intention locks.
    fn post_upgrade(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.upgrade_held = false;
        run.upgraded_at = Some(ctx.now());
        let round = self.upgrades(txn);
        if self.post(ctx, txn, round) == 0 {
            self.after_validate(ctx, txn);
        }
    }

    /// Validate & Logging (Alg. 1 l. 11–21): one round. With delayed write
    /// locks a read-write transaction may validate again after it (see
    /// [`Run::upgrade_posted`]), or upgrade in a late round of its own.
    fn validate(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = &self.runs[&txn];
        let (read_only, exec_end) = (run.exec.read_only, run.exec_end);
        let late = self.upgrade_late(txn);
        let mut round = self.checks(txn, !self.cfg.validate_writers);
        if !read_only {
            if self.cfg.delayed_lock && !late {
                merge(&mut round, self.upgrades(txn));
            }
            merge(&mut round, self.logs(txn));
        }
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.phase = Phase::Validate;
        if !read_only && self.cfg.delayed_lock {
            run.upgrade_posted = Some(ctx.now());
            run.upgrade_held = late;
            if !late {
                run.upgraded_at = Some(ctx.now());
            }
        }
        let window = run.exec_start.map(|s| exec_end.saturating_sub(s));
        let skipped = self.post(ctx, txn, round) == 0;
        if read_only && self.cfg.lease {
            // The Lease Manager's statistics (§VII.A).
            self.period.record(window.unwrap_or(0), skipped);
        }
        if skipped {
            if read_only {
                // Every read held its lease: committed in one round trip.
                self.counters.ro_one_round += 1;
                let ty = self.runs[&txn].exec.attempt.txn.name();
                self.by_type.add(ty, "one_round", 1);
            }
            self.after_validate(ctx, txn);
        }
    }

    /// The validation READs (Alg. 1 l. 13–16): every read not covered by
    /// the transaction's own locks, except, for a read-only transaction
    /// whose reads held their lease, those that saw no intention lock (and
    /// the same for a read-write one if `writers_skip`: Alg. 1's
    /// Validate&Logging without [`OoccConfig::validate_writers`]; never in
    /// the validation after a slow upgrade round, [`Run::upgrade_posted`]).
    fn checks(&self, txn: TxnId, writers_skip: bool) -> Round {
        let run = &self.runs[&txn];
        let x = &run.exec;
        let within_lease = self.cfg.lease
            && (x.read_only || writers_skip)
            && run
                .exec_start
                .is_none_or(|s| self.leases.get().reads_hold(s, run.exec_end));
        let mut round = Round::new();
        for key in &x.read_order {
            let r = &x.recs[key];
            if r.lock.held.is_some() {
                continue;
            }
            if within_lease && !r.lock.intention_seen {
                continue;
            }
            let addr = self
                .net
                .addr(&x.vacant, *key)
                .expect("read keys are located");
            client::push(
                &mut round,
                r.shard,
                Verb::Read { addr, len: 1 },
                Purpose::Validate { key: *key },
            );
        }
        round
    }

    /// Upgrade intention locks to write locks (delayed write lock, §IV).
    fn upgrades(&self, txn: TxnId) -> Round {
        let run = &self.runs[&txn];
        let mut round = Round::new();
        for (key, r) in &run.exec.recs {
            if r.lock.held.is_none() {
                continue;
            }
            let addr = self
                .net
                .addr(&run.exec.vacant, *key)
                .expect("held keys are located");
            client::push(
                &mut round,
                r.shard,
                Verb::Write {
                    addr,
                    data: SlotWrite::Lock(lock::write(txn)),
                },
                Purpose::Ack,
            );
        }
        round
    }

    /// WRITE the log: redo images with write unlock, undo images without
    /// (§V).
    fn logs(&self, txn: TxnId) -> Round {
        let run = &self.runs[&txn];
        let mut round = Round::new();
        let mut logs: BTreeMap<ShardId, LogRecord> = BTreeMap::new();
        for (key, r) in &run.exec.recs {
            if r.lock.held.is_none() {
                continue;
            }
            let new = run.exec.write_of(*key);
            let entry = if self.cfg.write_unlock {
                new.map(|v| (*key, Some(v.clone()), txn.version()))
            } else {
                new.map(|_| (*key, r.value.clone(), r.version))
            };
            if let Some(e) = entry {
                logs.entry(r.shard)
                    .or_insert_with(|| LogRecord {
                        txn: txn.0,
                        entries: Vec::new(),
                    })
                    .entries
                    .push(e);
            }
        }
        for (shard, rec) in logs {
            client::push(&mut round, shard, Verb::Log(rec), Purpose::Ack);
        }
        round
    }

    /// Validation answered: commit a read-only transaction; a read-write
    /// one waits out the write-wait lease, then commits.
    fn after_validate(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("advanced");
        if let Some(reason) = run.exec.failed {
            return self.abort(ctx, txn, reason);
        }
        if run.upgrade_held {
            return self.hold_upgrade(ctx, txn);
        }
        if let Some(posted) = run.upgrade_posted.take() {
            let bounded = self.cfg.lease && self.leases.get().reads_hold(posted, ctx.now());
            if !bounded && self.cfg.bound_upgrade {
                // The write locks are visible now: validate the reads again.
                self.counters.revalidations += 1;
                let round = self.checks(txn, false);
                if self.post(ctx, txn, round) > 0 {
                    return;
                }
            }
        }
        let run = self.runs.get_mut(&txn).expect("advanced");
        if run.exec.read_only {
            self.counters.ro_commits += 1;
            return self.finish(ctx, txn);
        }
        run.phase = Phase::Commit;
        if self.cfg.lease && self.cfg.wait_lease {
            let at = self.leases.get().release_at(run.locked_at);
            if at > ctx.now() {
                return self.wait_until(ctx, txn, at);
            }
        }
        self.commit(ctx, txn);
    }

    /// Commit (Alg. 1 l. 22–26): update the records, releasing the locks in
    /// the same WRITE when write unlock is on.
    fn commit(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.phase = Phase::Commit;
        // How long readers met this writer's intention locks, then its
        // write locks (§IV), each window measured on this clock from the
        // post or answer that bounds it.
        let c = &mut self.counters;
        c.locked_commits += 1;
        if let Some(up) = run.upgraded_at {
            c.intention_locked_ns += up.saturating_sub(run.locked_at);
        }
        let write_from = run.upgraded_at.unwrap_or(run.locked_at);
        c.write_locked_ns += ctx.now().saturating_sub(write_from);
        let unlock = self.cfg.write_unlock.then_some(lock::FREE);
        let round = self
            .net
            .write_back(&run.exec, txn, held, unlock, || Purpose::Ack);
        if self.post(ctx, txn, round) == 0 {
            self.advance(ctx, txn);
        }
    }

    /// Release (without write unlock): WRITE the lock words free.
    fn release(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.phase = Phase::Release;
        let round = self.unlocks(txn);
        if self.post(ctx, txn, round) == 0 {
            self.advance(ctx, txn);
        }
    }

    fn unlocks(&self, txn: TxnId) -> Round {
        self.net
            .unlocks(&self.runs[&txn].exec, held, lock::FREE, || Purpose::Ack)
    }

    /// Report the commit: the writes are readable (unlocked) by now.
    fn finish(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.remove(&txn).expect("advanced");
        self.count_attempt(ctx, &run, "commits", "commit_rounds", "commit_ns");
        ctx.done(txn, run.exec.committed());
    }

    /// Count an attempt's end by its transaction type: one more commit or
    /// abort, its round trips and its time from start to end.
    fn count_attempt(
        &mut self,
        ctx: &Ctx<Msg>,
        run: &Run,
        ends: &'static str,
        rounds: &'static str,
        time: &'static str,
    ) {
        let ty = run.exec.attempt.txn.name();
        self.by_type.add(ty, ends, 1);
        self.by_type.add(ty, rounds, run.rounds);
        self.by_type
            .add(ty, time, ctx.now().saturating_sub(run.started));
    }

    /// Abort at a round's end: free the locks held (unsignaled WRITEs) and
    /// report.
    fn abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: AbortReason) {
        match reason {
            _ if self.stopped => self.counters.stopped_aborts += 1,
            AbortReason::Validation => self.counters.validation_aborts += 1,
            AbortReason::User => self.counters.user_aborts += 1,
            _ => {
                self.counters.lock_aborts += 1;
                let read_locked = self.runs.get(&txn).is_some_and(|r| r.read_locked);
                self.counters.locked_read_aborts += u64::from(read_locked);
            }
        }
        let round = self.unlocks(txn);
        self.net.post(ctx, txn, round, false);
        if let Some(run) = self.runs.remove(&txn) {
            self.count_attempt(ctx, &run, "aborts", "abort_rounds", "abort_ns");
        }
        ctx.done(txn, TxnOutcome::Aborted(reason));
    }

    fn on_done(&mut self, ctx: &mut Ctx<Msg>, id: u64, results: Vec<VerbResult>) {
        let Some((txn, purposes)) = self.net.answered(id) else {
            return; // a duplicate
        };
        let Some(run) = self.runs.get_mut(&txn) else {
            return;
        };
        let x = &mut run.exec;
        let own = [lock::intention(txn), lock::write(txn)];
        if purposes.iter().any(|p| matches!(p, Purpose::Lock { .. })) {
            run.locked_at = ctx.now();
        }
        for (p, r) in purposes.iter().zip(results) {
            match (*p, r) {
                (_, VerbResult::OutOfRange) => {
                    tracing::error!(?txn, ?p, "remote access outside the region");
                    x.fail(AbortReason::Timeout);
                }
                (Purpose::Locate { key, probe }, VerbResult::Read(imgs)) => {
                    self.net.on_located(x, key, probe, &imgs);
                }
                (Purpose::Lock { key }, VerbResult::Atomic { old }) => {
                    if old == lock::FREE {
                        x.recs
                            .get_mut(&key)
                            .expect("fetched keys have records")
                            .lock
                            .held = Some(if self.cfg.delayed_lock {
                            lock::intention(txn)
                        } else {
                            lock::write(txn)
                        });
                    } else {
                        x.fail(AbortReason::LockConflict);
                    }
                }
                (Purpose::Fetch { key }, VerbResult::Read(imgs)) => {
                    let read_only = x.read_only;
                    let Some(img) = self.net.image(x, key, &imgs) else {
                        // Another key's insert took this insert slot.
                        x.fail(AbortReason::LockConflict);
                        continue;
                    };
                    let r = x.recs.get_mut(&key).expect("fetched keys have records");
                    let mut conflict = None;
                    if r.fetched && r.version != img.version {
                        // Read unlocked in an earlier wave, locked now.
                        conflict = Some(AbortReason::Validation);
                    }
                    if !own.contains(&img.lock) {
                        match lock::seen(img.lock) {
                            Seen::Free => {}
                            Seen::Intention if read_only => {
                                r.lock.intention_seen = true;
                                self.counters.reads_met_intention += 1;
                            }
                            Seen::Intention | Seen::Write => {
                                conflict = Some(AbortReason::LockConflict);
                                run.read_locked = true;
                                self.counters.reads_met_lock += 1;
                            }
                        }
                    }
                    x.take(key, img);
                    if let Some(c) = conflict {
                        x.fail(c);
                    }
                }
                (Purpose::Validate { key }, VerbResult::Read(imgs)) => {
                    let r = &x.recs[&key];
                    let ok = imgs.first().is_some_and(|i| {
                        i.version == r.version
                            && match lock::seen(i.lock) {
                                Seen::Free => true,
                                Seen::Intention => x.read_only,
                                Seen::Write => false,
                            }
                    });
                    if !ok {
                        x.fail(AbortReason::Validation);
                    }
                }
                (Purpose::Ack, VerbResult::Written) => {}
                (p, r) => {
                    tracing::error!(?txn, ?p, ?r, "unexpected verb result");
                    x.fail(AbortReason::Timeout);
                }
            }
        }
        if run.phase == Phase::Execute {
            run.exec_end = ctx.now();
        }
        if client::last_answer(&mut run.pending) {
            run.last_round = ctx.now().saturating_sub(run.posted_at);
            self.advance(ctx, txn);
        }
    }
}

/// Add `from`'s batches to `into`'s, memory node by memory node.
fn merge(into: &mut Round, from: Round) {
    for (shard, (v, p)) in from {
        let b = into.entry(shard).or_default();
        b.0.extend(v);
        b.1.extend(p);
    }
}

/// Whether the transaction holds a lock on the record.
fn held(l: &Lock) -> bool {
    l.held.is_some()
}

impl Coordinator<Msg> for OoccCoordinator {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        self.admit(ctx, attempt);
        self.flush_local(ctx);
    }
}

impl OoccCoordinator {
    /// Send the next clock Sync to the reference (§VII.B), and again in a
    /// sync period.
    fn sync(&mut self, ctx: &mut Ctx<Msg>) {
        let (Some(d), Some(to)) = (self.drift.as_mut(), self.manager_node) else {
            return;
        };
        let seq = d.request(ctx.now());
        ctx.send(to, Msg::Lease(LeaseMsg::Sync { seq }));
        ctx.set_timer(self.cfg.sync_period, SYNC);
    }
}

impl Node<Msg> for OoccCoordinator {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        self.net.connect(ctx);
        if let Some(m) = &self.manager {
            self.samples
                .push(("lease_ns", ctx.observed_now(), m.lease()));
        }
        if let Some(period) = self.manager.as_ref().and_then(LeaseManager::period) {
            ctx.set_timer(period, TICK);
        }
        self.sync(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        if let Msg::Lease(m) = msg {
            self.on_lease(ctx, from, m);
            self.flush_local(ctx);
            return;
        }
        match self.net.on_message(from, msg) {
            Incoming::Start(attempts) => {
                for a in attempts {
                    if self.stopped {
                        self.admit(ctx, a);
                    } else {
                        self.start(ctx, a);
                    }
                }
            }
            Incoming::Done(id, results) => self.on_done(ctx, id, results),
            Incoming::Nothing => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if self.net.on_timer(ctx, id) {
            return;
        }
        match id {
            TICK => {
                self.run_manager(ctx, |m, out| m.tick(out));
                if let Some(period) = self.manager.as_ref().and_then(LeaseManager::period) {
                    ctx.set_timer(period, TICK);
                }
            }
            DRAIN => self.run_manager(ctx, |m, out| m.wake(out)),
            SYNC => self.sync(ctx),
            _ => {
                if let Some(txn) = self.waits.remove(&id.0) {
                    // A held upgrade, or the commit.
                    match self.runs.get(&txn).map(|r| r.upgrade_held) {
                        Some(true) => self.post_upgrade(ctx, txn),
                        Some(false) => self.commit(ctx, txn),
                        None => {}
                    }
                }
            }
        }
        self.flush_local(ctx);
    }

    fn take_report(&mut self) -> NodeReport {
        let c = std::mem::take(&mut self.counters);
        NodeReport {
            client: None,
            counters: vec![
                ("ro_commits", c.ro_commits),
                ("ro_one_round", c.ro_one_round),
                ("attempts_started", c.attempts_started),
                ("rounds", c.rounds),
                ("lock_aborts", c.lock_aborts),
                ("locked_read_aborts", c.locked_read_aborts),
                ("validation_aborts", c.validation_aborts),
                ("revalidations", c.revalidations),
                ("user_aborts", c.user_aborts),
                ("lease_wait_ns", c.lease_wait_ns),
                ("reads_met_intention", c.reads_met_intention),
                ("reads_met_lock", c.reads_met_lock),
                ("locked_commits", c.locked_commits),
                ("intention_locked_ns", c.intention_locked_ns),
                ("write_locked_ns", c.write_locked_ns),
                ("bucket_reads", std::mem::take(&mut self.net.bucket_reads)),
                ("drift_stops", c.drift_stops),
                ("stopped_aborts", c.stopped_aborts),
                ("drift_syncs", c.drift_syncs),
                (
                    "lease_adjustments",
                    self.manager.as_ref().map_or(0, |m| m.adjustments),
                ),
                (
                    "lease_final_ns",
                    self.manager.as_ref().map_or(0, LeaseManager::lease),
                ),
            ]
            .into_iter()
            .chain(self.by_type.take())
            .collect(),
            gauges: Vec::new(),
            samples: std::mem::take(&mut self.samples),
        }
    }
}
