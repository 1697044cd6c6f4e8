//! The coordinator on a compute node: Algorithm 1 as a phase machine over
//! one-sided verbs (see the module doc of [`super`] for the phases).
//!
//! Each round posts one batch of verbs per memory node and waits for every
//! answer; the phase then moves on. Execution runs in *waves*: a piece whose
//! keys depend on earlier pieces' outputs (§III.C "Unknown Read Set") is
//! fetched in a later wave, after its inputs are known. A key whose slot
//! address is not in the machine's address cache is first located by
//! reading its bucket (§VIII.A).

use super::lease::Lease;
use super::lock::{self, Seen};
use super::OoccConfig;
use crate::disagg::verbs::{LogRecord, SlotWrite};
use crate::disagg::{Addr, Geometry, Msg, SlotImage, Verb, VerbResult};
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::Topology;
use tessera_core::txn::{AbortReason, Attempt, PieceSpec, ReadObs, TxnOutcome, Value};
use tessera_core::FastMap;

const CONNECT: TimerId = TimerId(0);

/// One round's verbs and what each is for, per memory node.
type Round = BTreeMap<ShardId, (Vec<Verb>, Vec<Purpose>)>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Execute,
    /// Delayed write lock: the round that upgrades intention locks to write
    /// locks (and logs) comes before validation, not with it. Validating
    /// in the same round lets a reader that finds an intention lock after
    /// the writer validated order itself before the writer while it read
    /// what the writer's reads were ordered after (a cycle the seed tests
    /// found); the lease wait that follows hides the extra round.
    Upgrade,
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

/// A record the transaction touched.
struct Rec {
    shard: ShardId,
    value: Option<Value>,
    version: Version,
    /// Read from memory at least once.
    fetched: bool,
    /// The lock word this transaction set on it, if any.
    held: Option<u64>,
    /// Read while another transaction held an intention lock: a read-only
    /// transaction must validate it even within the lease (Alg. 1 l. 13).
    intention_seen: bool,
}

struct Run {
    attempt: Attempt,
    read_only: bool,
    phase: Phase,
    /// Batches of the current round still unanswered.
    pending: usize,
    recs: FastMap<Key, Rec>,
    /// Keys read from memory (not the transaction's own writes), in order.
    read_order: Vec<Key>,
    /// Keys whose bucket is being probed, with the probe to read next.
    probe: FastMap<Key, u32>,
    /// Keys in no slot of the region.
    absent: Vec<Key>,
    outputs: Vec<Option<Value>>,
    writes: Vec<(Key, Value)>,
    exec_start: Option<Time>,
    exec_end: Time,
    /// When the write locks were visible to readers at the latest: the
    /// write-wait lease runs from here (§III.A).
    locked_at: Time,
    failed: Option<AbortReason>,
}

impl Run {
    fn rec(&mut self, key: Key, shard: ShardId) -> &mut Rec {
        self.recs.entry(key).or_insert(Rec {
            shard,
            value: None,
            version: Version::INITIAL,
            fetched: false,
            held: None,
            intention_seen: false,
        })
    }

    fn fail(&mut self, reason: AbortReason) {
        self.failed.get_or_insert(reason);
    }
}

pub struct OoccCoordinator {
    cfg: OoccConfig,
    lease: Lease,
    topology: Arc<Topology>,
    /// Each shard's region shape, once connected.
    geometry: Vec<Option<Geometry>>,
    /// The machine's address cache (§VIII.A).
    addrs: FastMap<Key, Addr>,
    /// Attempts submitted before every memory node answered.
    queued: Vec<Attempt>,
    runs: FastMap<TxnId, Run>,
    batches: FastMap<u64, (TxnId, Vec<Purpose>)>,
    next_batch: u64,
    /// Lease waits: timer id → transaction.
    waits: FastMap<u64, TxnId>,
    next_timer: u64,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    ro_commits: u64,
    ro_one_round: u64,
    lock_aborts: u64,
    validation_aborts: u64,
    lease_wait_ns: u64,
    bucket_reads: u64,
}

impl OoccCoordinator {
    pub fn new(cfg: OoccConfig, env: CoordinatorEnv) -> Self {
        let shards = env.topology.shards.len();
        OoccCoordinator {
            lease: Lease::new(cfg.lease_ns, cfg.offset_ns),
            cfg,
            topology: env.topology,
            geometry: vec![None; shards],
            addrs: tessera_core::fast_map(),
            queued: Vec::new(),
            runs: tessera_core::fast_map(),
            batches: tessera_core::fast_map(),
            next_batch: 0,
            waits: tessera_core::fast_map(),
            next_timer: 1,
            counters: Counters::default(),
        }
    }

    fn connected(&self) -> bool {
        self.geometry.iter().all(Option::is_some)
    }

    fn connect(&self, ctx: &mut Ctx<Msg>) {
        for (s, g) in self.geometry.iter().enumerate() {
            if g.is_none() {
                ctx.send(self.topology.leader(ShardId(s as u32)), Msg::Connect);
            }
        }
        ctx.set_timer(self.cfg.connect_retry, CONNECT);
    }

    fn start(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let id = attempt.id;
        let n = attempt.txn.pieces().len();
        let read_only = attempt.txn.read_only();
        self.runs.insert(
            id,
            Run {
                attempt,
                read_only,
                phase: Phase::Execute,
                pending: 0,
                recs: tessera_core::fast_map(),
                read_order: Vec::new(),
                probe: tessera_core::fast_map(),
                absent: Vec::new(),
                outputs: vec![None; n],
                writes: Vec::new(),
                exec_start: None,
                exec_end: 0,
                locked_at: 0,
                failed: None,
            },
        );
        self.advance(ctx, id);
    }

    /// Post one round: a batch per memory node. Returns false when there is
    /// nothing to post.
    fn post(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, round: Round, ack: bool) -> usize {
        let mut posted = 0;
        for (shard, (verbs, purposes)) in round {
            if verbs.is_empty() {
                continue;
            }
            self.next_batch += 1;
            let id = self.next_batch;
            if ack {
                self.batches.insert(id, (txn, purposes));
            }
            ctx.send(self.topology.leader(shard), Msg::Batch { id, ack, verbs });
            posted += 1;
        }
        if ack {
            if let Some(run) = self.runs.get_mut(&txn) {
                run.pending = posted;
            }
        }
        posted
    }

    /// Move `txn` on after its round finished (or at its start).
    fn advance(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let Some(run) = self.runs.get(&txn) else {
            return;
        };
        if let Some(reason) = run.failed {
            return self.abort(ctx, txn, reason);
        }
        match run.phase {
            Phase::Execute => self.execute(ctx, txn),
            Phase::Upgrade => self.after_upgrade(ctx, txn),
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
        let proc = run.attempt.txn.clone();
        let n = proc.pieces().len();
        // Keys to fetch: (key, shard, lock).
        let mut need: Vec<(Key, ShardId, bool)> = Vec::new();
        loop {
            let mut progress = false;
            need.clear();
            for i in 0..n {
                if run.outputs[i].is_some() {
                    continue;
                }
                let Some(inputs) = proc.pieces()[i].gather_inputs(|j| run.outputs[j].as_ref())
                else {
                    continue;
                };
                let spec = proc.resolve(i, &inputs);
                let missing = keys_to_fetch(run, &spec, run.read_only);
                if !missing.is_empty() {
                    need.extend(missing);
                    continue;
                }
                run_piece(run, i, &spec, &inputs);
                if run.failed.is_some() {
                    return self.advance(ctx, txn);
                }
                progress = true;
            }
            if !progress {
                break;
            }
        }
        if run.outputs.iter().all(Option::is_some) {
            return self.validate(ctx, txn);
        }
        need.sort_unstable_by_key(|(k, _, lock)| (*k, !*lock));
        need.dedup_by_key(|(k, _, _)| *k);
        // Locate unknown addresses first.
        let mut round: Round = Round::new();
        for &(key, shard, _) in &need {
            if self.addrs.contains_key(&key) {
                continue;
            }
            let g = self.geometry[shard.0 as usize].expect("connected before starting");
            let probe = *run.probe.get(&key).unwrap_or(&0);
            let start = g.bucket_start(g.bucket_of(key).wrapping_add(probe));
            let b = round.entry(shard).or_default();
            b.0.push(Verb::Read {
                addr: start,
                len: g.bucket_slots,
            });
            b.1.push(Purpose::Locate { key, probe });
            self.counters.bucket_reads += 1;
        }
        if !round.is_empty() {
            self.post(ctx, txn, round, true);
            return;
        }
        let delayed = self.cfg.delayed_lock;
        for (key, shard, lock) in need {
            let addr = self.addrs[&key];
            let b = round.entry(shard).or_default();
            if lock {
                let word = if delayed {
                    lock::intention(txn)
                } else {
                    lock::write(txn)
                };
                b.0.push(Verb::Cas {
                    addr,
                    expect: lock::FREE,
                    swap: word,
                });
                b.1.push(Purpose::Lock { key });
            }
            b.0.push(Verb::Read { addr, len: 1 });
            b.1.push(Purpose::Fetch { key });
        }
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.exec_start.get_or_insert(ctx.now());
        self.post(ctx, txn, round, true);
    }

    /// Validate & Logging (Alg. 1 l. 11–21): one round, except that with
    /// delayed write locks a read-write transaction validates only once its
    /// write locks are visible (see [`Phase::Upgrade`]).
    fn validate(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = &self.runs[&txn];
        let (read_only, exec_end) = (run.read_only, run.exec_end);
        let mut round = self.checks(txn);
        if !read_only {
            if let Some(r) = self.runs.get_mut(&txn) {
                r.locked_at = exec_end;
            }
            let upgrade = self.upgrade_and_log(txn);
            if self.cfg.delayed_lock {
                let run = self.runs.get_mut(&txn).expect("advanced");
                run.phase = Phase::Upgrade;
                if self.post(ctx, txn, upgrade, true) == 0 {
                    self.after_upgrade(ctx, txn);
                }
                return;
            }
            for (shard, (v, p)) in upgrade {
                let b = round.entry(shard).or_default();
                b.0.extend(v);
                b.1.extend(p);
            }
        }
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.phase = Phase::Validate;
        if self.post(ctx, txn, round, true) == 0 {
            if read_only {
                // Every read held its lease: committed in one round trip.
                self.counters.ro_one_round += 1;
            }
            self.after_validate(ctx, txn);
        }
    }

    /// The write locks are visible: now validate the reads.
    fn after_upgrade(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let round = self.checks(txn);
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.locked_at = ctx.now();
        run.phase = Phase::Validate;
        if self.post(ctx, txn, round, true) == 0 {
            self.after_validate(ctx, txn);
        }
    }

    /// The validation READs (Alg. 1 l. 13–16): every read not covered by
    /// the transaction's own locks, except, for a read-only transaction
    /// whose reads held their lease, those that saw no intention lock.
    fn checks(&self, txn: TxnId) -> Round {
        let run = &self.runs[&txn];
        let within_lease = self.cfg.lease
            && run
                .exec_start
                .is_none_or(|s| self.lease.reads_hold(s, run.exec_end));
        let mut round = Round::new();
        for key in &run.read_order {
            let r = &run.recs[key];
            if r.held.is_some() || run.absent.contains(key) {
                continue;
            }
            if run.read_only && within_lease && !r.intention_seen {
                continue;
            }
            let b = round.entry(r.shard).or_default();
            b.0.push(Verb::Read {
                addr: self.addrs[key],
                len: 1,
            });
            b.1.push(Purpose::Validate { key: *key });
        }
        round
    }

    /// Upgrade intention locks to write locks (delayed write lock, §IV) and
    /// WRITE the log: redo images with write unlock, undo images without
    /// (§V).
    fn upgrade_and_log(&self, txn: TxnId) -> Round {
        let run = &self.runs[&txn];
        let mut round = Round::new();
        let mut logs: BTreeMap<ShardId, LogRecord> = BTreeMap::new();
        for (key, r) in &run.recs {
            if r.held.is_none() {
                continue;
            }
            if self.cfg.delayed_lock {
                let b = round.entry(r.shard).or_default();
                b.0.push(Verb::Write {
                    addr: self.addrs[key],
                    data: SlotWrite::Lock(lock::write(txn)),
                });
                b.1.push(Purpose::Ack);
            }
            let new = run.writes.iter().find(|(k, _)| k == key);
            let entry = if self.cfg.write_unlock {
                new.map(|(k, v)| (*k, Some(v.clone()), txn.version()))
            } else {
                new.map(|(k, _)| (*k, r.value.clone(), r.version))
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
            let b = round.entry(shard).or_default();
            b.0.push(Verb::Log(rec));
            b.1.push(Purpose::Ack);
        }
        round
    }

    /// Validation answered: commit a read-only transaction; a read-write
    /// one waits out the write-wait lease, then commits.
    fn after_validate(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("advanced");
        if let Some(reason) = run.failed {
            return self.abort(ctx, txn, reason);
        }
        if run.read_only {
            self.counters.ro_commits += 1;
            return self.finish(ctx, txn);
        }
        run.phase = Phase::Commit;
        if self.cfg.lease && self.cfg.wait_lease {
            let at = self.lease.release_at(run.locked_at);
            if at > ctx.now() {
                self.counters.lease_wait_ns += at - ctx.now();
                let id = self.next_timer;
                self.next_timer += 1;
                self.waits.insert(id, txn);
                ctx.set_timer(at - ctx.now(), TimerId(id));
                return;
            }
        }
        self.commit(ctx, txn);
    }

    /// Commit (Alg. 1 l. 22–26): update the records, releasing the locks in
    /// the same WRITE when write unlock is on.
    fn commit(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let unlock = self.cfg.write_unlock;
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.phase = Phase::Commit;
        let mut round: Round = Round::new();
        for (key, r) in &run.recs {
            if r.held.is_none() {
                continue;
            }
            let addr = self.addrs[key];
            let new = run.writes.iter().find(|(k, _)| k == key);
            let data = match (new, unlock) {
                (Some((_, v)), true) => SlotWrite::DataAndLock {
                    value: v.clone(),
                    version: txn.version(),
                    lock: lock::FREE,
                },
                (Some((_, v)), false) => SlotWrite::Data {
                    value: v.clone(),
                    version: txn.version(),
                },
                (None, true) => SlotWrite::Lock(lock::FREE),
                (None, false) => continue,
            };
            let b = round.entry(r.shard).or_default();
            b.0.push(Verb::Write { addr, data });
            b.1.push(Purpose::Ack);
        }
        if self.post(ctx, txn, round, true) == 0 {
            self.advance(ctx, txn);
        }
    }

    /// Release (without write unlock): WRITE the lock words free.
    fn release(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("advanced");
        run.phase = Phase::Release;
        let round = self.unlocks(txn);
        if self.post(ctx, txn, round, true) == 0 {
            self.advance(ctx, txn);
        }
    }

    fn unlocks(&self, txn: TxnId) -> Round {
        let run = &self.runs[&txn];
        let mut round: Round = Round::new();
        for (key, r) in &run.recs {
            if r.held.is_some() {
                let b = round.entry(r.shard).or_default();
                b.0.push(Verb::Write {
                    addr: self.addrs[key],
                    data: SlotWrite::Lock(lock::FREE),
                });
                b.1.push(Purpose::Ack);
            }
        }
        round
    }

    /// Report the commit: the writes are readable (unlocked) by now.
    fn finish(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.remove(&txn).expect("advanced");
        let reads = run
            .read_order
            .iter()
            .map(|k| ReadObs {
                key: *k,
                version: run.recs[k].version,
            })
            .collect();
        let writes = run.writes.iter().map(|(k, _)| *k).collect();
        let outputs = run
            .outputs
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        ctx.done(
            txn,
            TxnOutcome::Committed {
                reads,
                writes,
                outputs,
            },
        );
    }

    /// Abort at a round's end: free the locks held (unsignaled WRITEs) and
    /// report.
    fn abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: AbortReason) {
        match reason {
            AbortReason::Validation => self.counters.validation_aborts += 1,
            _ => self.counters.lock_aborts += 1,
        }
        let round = self.unlocks(txn);
        self.post(ctx, txn, round, false);
        self.runs.remove(&txn);
        ctx.done(txn, TxnOutcome::Aborted(reason));
    }

    fn on_done(&mut self, ctx: &mut Ctx<Msg>, id: u64, results: Vec<VerbResult>) {
        let Some((txn, purposes)) = self.batches.remove(&id) else {
            return; // a duplicate
        };
        let Some(run) = self.runs.get_mut(&txn) else {
            return;
        };
        let own = [lock::intention(txn), lock::write(txn)];
        for (p, r) in purposes.iter().zip(results) {
            match (*p, r) {
                (_, VerbResult::OutOfRange) => {
                    tracing::error!(?txn, ?p, "remote access outside the region");
                    run.fail(AbortReason::Timeout);
                }
                (Purpose::Locate { key, probe }, VerbResult::Read(imgs)) => {
                    if let Some(img) = imgs.iter().find(|i| i.key == Some(key)) {
                        self.addrs.insert(key, img.addr);
                        run.probe.remove(&key);
                    } else if imgs.iter().all(|i| i.key.is_some()) {
                        // A full bucket: the key may have overflowed into
                        // the next one.
                        run.probe.insert(key, probe + 1);
                    } else {
                        run.probe.remove(&key);
                        run.absent.push(key);
                    }
                }
                (Purpose::Lock { key }, VerbResult::Atomic { old }) => {
                    let r = run.recs.get_mut(&key).expect("fetched keys have records");
                    if old == lock::FREE {
                        r.held = Some(if self.cfg.delayed_lock {
                            lock::intention(txn)
                        } else {
                            lock::write(txn)
                        });
                    } else {
                        run.fail(AbortReason::LockConflict);
                    }
                }
                (Purpose::Fetch { key }, VerbResult::Read(imgs)) => {
                    let read_only = run.read_only;
                    let Some(img) = imgs.first().filter(|i| i.key == Some(key)) else {
                        run.fail(AbortReason::Timeout);
                        continue;
                    };
                    let r = run.recs.get_mut(&key).expect("fetched keys have records");
                    let mut conflict = None;
                    if r.fetched && r.version != img.version {
                        // Read unlocked in an earlier wave, locked now.
                        conflict = Some(AbortReason::Validation);
                    }
                    if !own.contains(&img.lock) {
                        match lock::seen(img.lock) {
                            Seen::Free => {}
                            Seen::Intention if read_only => r.intention_seen = true,
                            Seen::Intention | Seen::Write => {
                                conflict = Some(AbortReason::LockConflict)
                            }
                        }
                    }
                    take(r, img);
                    if let Some(c) = conflict {
                        run.fail(c);
                    }
                }
                (Purpose::Validate { key }, VerbResult::Read(imgs)) => {
                    let r = &run.recs[&key];
                    let ok = imgs.first().is_some_and(|i| {
                        i.version == r.version
                            && match lock::seen(i.lock) {
                                Seen::Free => true,
                                Seen::Intention => run.read_only,
                                Seen::Write => false,
                            }
                    });
                    if !ok {
                        run.fail(AbortReason::Validation);
                    }
                }
                (Purpose::Ack, VerbResult::Written) => {}
                (p, r) => {
                    tracing::error!(?txn, ?p, ?r, "unexpected verb result");
                    run.fail(AbortReason::Timeout);
                }
            }
        }
        if run.phase == Phase::Execute {
            run.exec_end = ctx.now();
        }
        run.pending = run.pending.saturating_sub(1);
        if run.pending == 0 {
            self.advance(ctx, txn);
        }
    }
}

/// Copy a READ's image into the record.
fn take(r: &mut Rec, img: &SlotImage) {
    r.value = img.value.clone();
    r.version = img.version;
    r.fetched = true;
}

/// The keys `spec` needs that are not fetched yet (with whether to lock
/// them). Keys the transaction wrote itself need nothing.
fn keys_to_fetch(run: &mut Run, spec: &PieceSpec, read_only: bool) -> Vec<(Key, ShardId, bool)> {
    let mut out = Vec::new();
    for a in &spec.writes {
        if read_only {
            break;
        }
        let r = run.rec(a.key, spec.shard);
        if r.held.is_none() && !run.absent.contains(&a.key) {
            out.push((a.key, spec.shard, true));
        }
    }
    for a in &spec.reads {
        if run.writes.iter().any(|(k, _)| *k == a.key) || run.absent.contains(&a.key) {
            continue;
        }
        let r = run.rec(a.key, spec.shard);
        if !r.fetched {
            out.push((a.key, spec.shard, false));
        }
    }
    out
}

/// Run piece `i` on the fetched values and the transaction's own writes.
fn run_piece(run: &mut Run, i: usize, spec: &PieceSpec, inputs: &[Value]) {
    if let Some(a) = spec.writes.iter().find(|a| run.absent.contains(&a.key)) {
        tracing::error!(key = ?a.key, "a write to a key the memory nodes do not hold (inserts are not supported)");
        run.fail(AbortReason::User);
        return;
    }
    let mut values: Vec<Option<Value>> = Vec::with_capacity(spec.reads.len());
    for a in &spec.reads {
        if let Some((_, v)) = run.writes.iter().find(|(k, _)| *k == a.key) {
            values.push(Some(v.clone()));
            continue;
        }
        if run.absent.contains(&a.key) {
            values.push(None);
            continue;
        }
        let r = &run.recs[&a.key];
        if !run.read_order.contains(&a.key) {
            run.read_order.push(a.key);
        }
        values.push(r.value.clone());
    }
    let refs: Vec<Option<&Value>> = values.iter().map(Option::as_ref).collect();
    let res = run.attempt.txn.execute(i, &refs, inputs);
    if res.user_abort {
        run.fail(AbortReason::User);
        return;
    }
    for (k, v) in res.writes {
        match run.writes.iter_mut().find(|(wk, _)| *wk == k) {
            Some(w) => w.1 = v,
            None => run.writes.push((k, v)),
        }
    }
    run.outputs[i] = Some(res.output);
}

impl Coordinator<Msg> for OoccCoordinator {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        if self.connected() {
            self.start(ctx, attempt);
        } else {
            self.queued.push(attempt);
        }
    }
}

impl Node<Msg> for OoccCoordinator {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        self.connect(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Connected(g) => {
                let shard = self
                    .topology
                    .shards
                    .iter()
                    .position(|grp| grp.leader() == from);
                if let Some(s) = shard {
                    self.geometry[s] = Some(g);
                }
                if self.connected() {
                    for a in std::mem::take(&mut self.queued) {
                        self.start(ctx, a);
                    }
                }
            }
            Msg::Done { id, results } => self.on_done(ctx, id, results),
            Msg::Connect | Msg::Batch { .. } => {
                tracing::warn!(?from, "coordinator got a request");
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if id == CONNECT {
            if !self.connected() {
                self.connect(ctx);
            }
            return;
        }
        if let Some(txn) = self.waits.remove(&id.0) {
            self.commit(ctx, txn);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        let c = std::mem::take(&mut self.counters);
        NodeReport {
            client: None,
            counters: vec![
                ("ro_commits", c.ro_commits),
                ("ro_one_round", c.ro_one_round),
                ("lock_aborts", c.lock_aborts),
                ("validation_aborts", c.validation_aborts),
                ("lease_wait_ns", c.lease_wait_ns),
                ("bucket_reads", c.bucket_reads),
            ],
        }
    }
}
