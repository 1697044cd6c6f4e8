//! DrTM's concurrency control on memory nodes (OOCC §II "2PL based
//! methods", §VIII.A; DrTM, SOSP'15): two-phase locking whose shared locks
//! are *leases* kept in the lock word, so that readers never release.
//!
//! The lock word (the slot's last word, [`crate::disagg`]):
//!
//! ```text
//!  63                                   1   0
//! [ lease end time (ns) / writer's attempt id | 1 = write lock ]
//! ```
//! 0 is free. A reader READs the record; if the word holds a lease that
//! is still valid (its end later than `now + delta`), the image read with it
//! is committed data no writer can change before the lease ends: one round
//! trip. Otherwise (free, or a lease too short) it CASes a new lease
//! (`now + lease`) over the word it saw and READs again in the same batch
//! ("two or more RTTs", §VIII.C). A writer CASes its write lock over the
//! word it last saw (free, then an expired lease); while a lease is still
//! valid it waits until `end + delta` and tries again, and it aborts on
//! another writer's lock (no waiting between writers, so no deadlock).
//!
//! Commit: every read's lease must still be valid at the commit point
//! (`end > now + delta`: all reads then hold at once, which orders the
//! transaction there); a read-only transaction is done at that moment
//! (nothing to release); a read-write one WRITEs each record with its lock
//! word free in one verb.
//!
//! `delta` bounds the clocks' disagreement (DrTM synchronizes clocks with
//! PTP). Our simulator drifts clock *rates* and never resynchronizes, so the
//! skew grows with the run: with `--drift-ppm` the runs must be short
//! enough that `2 × drift × run length ≤ delta` (the seed tests: 5 ms at
//! 1000 ppm is 10 µs of the default 20 µs). A key read under a lease and
//! then written by the same transaction waits its own lease out (DrTM has
//! no lease upgrade); YCSB never does that.

use crate::disagg::client::{self, Driven, Driver, Endpoint, Exec, Step};
use crate::disagg::{MemoryNode, Msg, NicCosts, RegionConfig, SlotImage, Verb, VerbResult};
use tessera_core::ids::{Key, Time, TimerId, TxnId, MS, US};
use tessera_core::node::Ctx;
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv};
use tessera_core::txn::{AbortReason, Attempt, TxnOutcome};
use tessera_core::FastMap;

#[derive(Clone, Debug)]
pub struct DrtmConfig {
    /// The shared-lock lease (§VIII.A: 400 µs, "as set in the origin
    /// paper").
    pub lease_ns: Time,
    /// Clock uncertainty: a lease is valid for readers until `end - delta`
    /// and expired for writers from `end + delta`.
    pub delta_ns: Time,
    /// A writer gives up after this many failed CASes on one record (each
    /// after waiting a lease out): readers may keep renewing expired
    /// leases.
    pub max_cas: u32,
    /// The memory nodes' region layout.
    pub region: RegionConfig,
    pub nic: NicCosts,
    pub connect_retry: Time,
}

impl Default for DrtmConfig {
    fn default() -> Self {
        DrtmConfig {
            lease_ns: 400 * US,
            delta_ns: 20 * US,
            max_cas: 4,
            region: RegionConfig::default(),
            nic: NicCosts::default(),
            connect_retry: MS,
        }
    }
}

pub struct Drtm;

impl Protocol for Drtm {
    type Msg = Msg;
    type Config = DrtmConfig;
    type Server = MemoryNode;
    type Coordinator = Driven<DrtmCoordinator>;

    fn server(config: &DrtmConfig, env: ServerEnv) -> MemoryNode {
        MemoryNode::new(env, config.region, config.nic.clone())
    }

    fn coordinator(config: &DrtmConfig, env: CoordinatorEnv) -> Driven<DrtmCoordinator> {
        Driven(DrtmCoordinator::new(config.clone(), env))
    }
}

/// The lock word's encodings.
mod word {
    use tessera_core::ids::{Time, TxnId};

    pub const FREE: u64 = 0;

    pub fn write(owner: TxnId) -> u64 {
        (owner.0 << 1) | 1
    }

    pub fn lease(end: Time) -> u64 {
        end << 1
    }

    /// The lease end a word holds (`None`: free or write-locked).
    pub fn lease_end(w: u64) -> Option<Time> {
        (w != FREE && w & 1 == 0).then_some(w >> 1)
    }

    pub fn is_write(w: u64) -> bool {
        w & 1 == 1
    }
}

/// DrTM's state of one record.
#[derive(Default)]
struct Lock {
    /// The lock word the next CAS expects (the word last seen); `None`
    /// before the first READ of a record only read.
    expect: Option<u64>,
    /// Holds the write lock.
    write: bool,
    /// The end of the lease the read holds.
    lease_end: Time,
    cas_tries: u32,
}

/// What a verb of a round is for (the shared client's `P`).
#[derive(Clone, Copy, Debug)]
pub enum Purpose {
    Locate {
        key: Key,
        probe: u32,
    },
    /// CAS of a lease for a read (its READ, next, tells the outcome).
    Lease,
    /// CAS of the write lock.
    Lock {
        key: Key,
    },
    Fetch {
        key: Key,
        write: bool,
    },
    Ack,
}

struct Run {
    exec: Exec<Lock>,
    pending: usize,
    /// Writing back: the next answers end the transaction.
    committing: bool,
    /// A writer waits for a lease to expire before `wake`.
    wake: Option<Time>,
}

#[derive(Default)]
struct Counters {
    ro_commits: u64,
    lock_aborts: u64,
    lease_aborts: u64,
    lease_cas: u64,
    lease_wait_ns: u64,
}

pub struct DrtmCoordinator {
    cfg: DrtmConfig,
    net: Endpoint<Purpose>,
    runs: FastMap<TxnId, Run>,
    waits: FastMap<u64, TxnId>,
    next_timer: u64,
    counters: Counters,
}

impl DrtmCoordinator {
    pub fn new(cfg: DrtmConfig, env: CoordinatorEnv) -> Self {
        DrtmCoordinator {
            net: Endpoint::new(&env, cfg.connect_retry),
            cfg,
            runs: tessera_core::fast_map(),
            waits: tessera_core::fast_map(),
            next_timer: 1,
            counters: Counters::default(),
        }
    }

    fn post(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, round: client::Round<Purpose>) -> usize {
        let pending = self.runs.get_mut(&txn).map(|r| &mut r.pending);
        self.net.post_awaited(ctx, txn, round, pending)
    }

    /// Every answer of the last round is in: run pieces, fetch and lock
    /// what they need, or commit.
    fn advance(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let Some(run) = self.runs.get_mut(&txn) else {
            return;
        };
        if let Some(reason) = run.exec.failed {
            return self.abort(ctx, txn, reason);
        }
        if run.committing {
            let run = self.runs.remove(&txn).expect("advanced");
            return ctx.done(txn, run.exec.committed());
        }
        if let Some(at) = run.wake.take() {
            if at > ctx.now() {
                self.counters.lease_wait_ns += at - ctx.now();
                self.next_timer += 1;
                self.waits.insert(self.next_timer, txn);
                return ctx.set_timer(at - ctx.now(), TimerId(self.next_timer));
            }
        }
        let need = match run.exec.step(|l| l.write) {
            Step::Done => return self.commit(ctx, txn),
            Step::Failed => return self.advance(ctx, txn),
            Step::Need(need) => need,
        };
        let mut round = client::Round::new();
        let locate = |key, probe| Purpose::Locate { key, probe };
        if self.net.locate(&run.exec, &need, &mut round, locate) {
            self.post(ctx, txn, round);
            return;
        }
        let lease = word::lease(ctx.now() + self.cfg.lease_ns);
        for n in need {
            let addr = self.net.addr(&run.exec.vacant, n.key).expect("located");
            let l = &run.exec.recs[&n.key].lock;
            if n.write {
                let expect = l.expect.unwrap_or(word::FREE);
                let cas = Verb::Cas {
                    addr,
                    expect,
                    swap: word::write(txn),
                };
                client::push(&mut round, n.shard, cas, Purpose::Lock { key: n.key });
            } else if let Some(expect) = l.expect {
                let cas = Verb::Cas {
                    addr,
                    expect,
                    swap: lease,
                };
                client::push(&mut round, n.shard, cas, Purpose::Lease);
                self.counters.lease_cas += 1;
            }
            let read = Verb::Read { addr, len: 1 };
            let fetch = Purpose::Fetch {
                key: n.key,
                write: n.write,
            };
            client::push(&mut round, n.shard, read, fetch);
        }
        self.post(ctx, txn, round);
    }

    /// The commit point: every read's lease must hold now; then write
    /// back and unlock.
    fn commit(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("advanced");
        let valid_after = ctx.now() + self.cfg.delta_ns;
        let x = &run.exec;
        let expired = x.read_order.iter().any(|k| {
            let l = &x.recs[k].lock;
            !l.write && l.lease_end <= valid_after
        });
        if expired {
            self.counters.lease_aborts += 1;
            run.exec.fail(AbortReason::Validation);
            return self.advance(ctx, txn);
        }
        if x.read_only {
            self.counters.ro_commits += 1;
            let run = self.runs.remove(&txn).expect("advanced");
            return ctx.done(txn, run.exec.committed());
        }
        run.committing = true;
        let round = self
            .net
            .write_back(x, txn, |l| l.write, Some(word::FREE), || Purpose::Ack);
        if self.post(ctx, txn, round) == 0 {
            self.advance(ctx, txn);
        }
    }

    /// Free the write locks held (unsignaled) and report.
    fn abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: AbortReason) {
        if reason == AbortReason::LockConflict {
            self.counters.lock_aborts += 1;
        }
        let run = self.runs.remove(&txn).expect("advanced");
        let round = self
            .net
            .unlocks(&run.exec, |l| l.write, word::FREE, || Purpose::Ack);
        self.net.post(ctx, txn, round, false);
        ctx.done(txn, TxnOutcome::Aborted(reason));
    }
}

impl Driver for DrtmCoordinator {
    type Purpose = Purpose;

    fn net(&mut self) -> &mut Endpoint<Purpose> {
        &mut self.net
    }

    fn start(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let id = attempt.id;
        let run = Run {
            exec: Exec::new(attempt),
            pending: 0,
            committing: false,
            wake: None,
        };
        self.runs.insert(id, run);
        self.advance(ctx, id);
    }

    fn on_done(&mut self, ctx: &mut Ctx<Msg>, id: u64, results: Vec<VerbResult>) {
        let Some((txn, purposes)) = self.net.answered(id) else {
            return;
        };
        let Some(run) = self.runs.get_mut(&txn) else {
            return;
        };
        let now = ctx.now();
        for (p, r) in purposes.into_iter().zip(results) {
            match (p, r) {
                (Purpose::Locate { key, probe }, VerbResult::Read(imgs)) => {
                    self.net.on_located(&mut run.exec, key, probe, &imgs);
                }
                (Purpose::Lease, VerbResult::Atomic { .. })
                | (Purpose::Ack, VerbResult::Written) => {}
                (Purpose::Lock { key }, VerbResult::Atomic { old }) => {
                    let cfg = &self.cfg;
                    let x = &mut run.exec;
                    let l = &mut x.recs.get_mut(&key).expect("locked keys have records").lock;
                    if old == l.expect.unwrap_or(word::FREE) {
                        l.write = true;
                        continue;
                    }
                    l.expect = Some(old);
                    l.cas_tries += 1;
                    if l.cas_tries > cfg.max_cas || word::is_write(old) {
                        x.fail(AbortReason::LockConflict);
                    } else if let Some(end) = word::lease_end(old) {
                        // Wait the lease out (a free word: retry at once).
                        let at = end + cfg.delta_ns + 1;
                        run.wake = Some(run.wake.map_or(at, |w| w.max(at)));
                    }
                }
                (Purpose::Fetch { key, write }, VerbResult::Read(imgs)) => {
                    let Some(img) = self.net.image(&mut run.exec, key, &imgs) else {
                        // Another key's insert took this insert slot.
                        run.exec.fail(AbortReason::LockConflict);
                        continue;
                    };
                    fetched(&mut run.exec, key, write, img, now + self.cfg.delta_ns);
                }
                (p, r) => {
                    tracing::error!(?txn, ?p, ?r, "unexpected verb result");
                    run.exec.fail(AbortReason::Timeout);
                }
            }
        }
        let run = self.runs.get_mut(&txn).expect("answered");
        if client::last_answer(&mut run.pending) {
            self.advance(ctx, txn);
        }
    }

    fn on_own_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if let Some(txn) = self.waits.remove(&id.0) {
            self.advance(ctx, txn);
        }
    }

    fn take_counters(&mut self) -> Vec<(&'static str, u64)> {
        let c = std::mem::take(&mut self.counters);
        vec![
            ("ro_commits", c.ro_commits),
            ("lock_aborts", c.lock_aborts),
            ("lease_aborts", c.lease_aborts),
            ("lease_cas", c.lease_cas),
            ("lease_wait_ns", c.lease_wait_ns),
        ]
    }
}

/// A READ of `key` answered. A record to write is used once locked; a
/// record to read if its word holds a lease valid beyond `valid_after`
/// (`now + delta`), else the word is remembered for the next CAS.
fn fetched(x: &mut Exec<Lock>, key: Key, write: bool, img: &SlotImage, valid_after: Time) {
    let r = x.recs.get_mut(&key).expect("fetched keys have records");
    if write {
        if !r.lock.write {
            return;
        }
        if r.fetched && r.version != img.version {
            // Read under a lease in an earlier wave, changed since.
            x.fail(AbortReason::Validation);
        }
        return x.take(key, img);
    }
    match word::lease_end(img.lock) {
        Some(end) if end > valid_after => {
            r.lock.lease_end = end;
            x.take(key, img);
        }
        _ if word::is_write(img.lock) => x.fail(AbortReason::LockConflict),
        _ => r.lock.expect = Some(img.lock),
    }
}

#[cfg(test)]
mod tests {
    use super::word;
    use tessera_core::ids::{NodeId, TxnId};

    #[test]
    fn lease_and_write_words_are_told_apart() {
        let t = TxnId::new(NodeId(5), 1, 9);
        assert_eq!(word::lease_end(word::lease(12_345)), Some(12_345));
        assert_eq!(word::lease_end(word::FREE), None);
        assert_eq!(word::lease_end(word::write(t)), None);
        assert!(word::is_write(word::write(t)));
        assert!(!word::is_write(word::lease(7)));
        assert!(!word::is_write(word::FREE));
    }
}
