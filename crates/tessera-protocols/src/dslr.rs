//! DSLR's concurrency control on memory nodes (OOCC §II, §VIII.E; DSLR,
//! SIGMOD'18): two-phase locking with reader-writer *ticket* locks taken by
//! FAA, which cannot fail, so conflicting transactions queue
//! (first-come-first-served) instead of aborting.
//!
//! The lock word holds four 16-bit counters ([`word`]): tickets handed out
//! to exclusive and shared lockers (`max_x`, `max_s`) and locks released
//! (`n_x`, `n_s`). Acquiring adds one to `max_x` or `max_s`; the word
//! before the add is the ticket. A shared ticket is granted once every
//! earlier exclusive ticket is released (`n_x == ticket.max_x`), an
//! exclusive one once every earlier ticket of both kinds is (`n_x ==
//! ticket.max_x && n_s == ticket.max_s`). The FAA and a READ go in one
//! batch: a ticket granted at once is read in one round trip; otherwise
//! the coordinator polls the record with READs until the word grants it
//! (the image read with the granting word is the committed data). Commit
//! WRITEs the data, then releases with FAAs in the same batch.
//!
//! Polling: as DSLR does, a waiter estimates its wait from the tickets
//! still ahead of it in the word it last read and polls after `poll_ns`
//! per ticket ahead (at most `max_poll_ns`), not at a fixed rate: a long
//! queue would otherwise be spent polling, and on real threads the polls
//! crowd out the releases they wait for.
//!
//! Counter overflow (DSLR's reset): a ticket taken when a counter had
//! reached `count_max` (half the field, so the overshoot never carries) is
//! void; its taker subtracts its add again and polls until the word is
//! reset, then takes a new ticket. Whoever's FAA leaves a word with a
//! counter at `count_max`, every valid ticket released and no void one
//! outstanding, CASes it to zero.
//!
//! Deadlock: the OOCC paper does not say how its DSLR baseline handles it.
//! Ours uses a timeout on *progress*: a transaction whose queued tickets
//! have seen no release for `timeout` and for at least [`STALLED_POLLS`]
//! polls in a row aborts, releases what it was granted at once and keeps
//! polling the tickets still queued, releasing each as soon as it is
//! granted (a ticket cannot be withdrawn). A transaction that holds nothing
//! never blocks anyone for long, so every cycle breaks. Counting from the
//! last release seen rather than from the start of the wait keeps a long
//! queue that moves from being taken for a deadlock; asking for several
//! polls as well keeps a thread descheduled for longer than `timeout` (the
//! `local` runtime on a loaded machine) from aborting every waiter at
//! once when it runs again: it must first see that nothing moved. A record read under a
//! shared ticket and written later by the same transaction would wait for
//! itself: that transaction aborts (no upgrades; YCSB never does it).

use crate::disagg::client::{self, Driven, Driver, Endpoint, Exec, Step};
use crate::disagg::{Addr, MemoryNode, Msg, NicCosts, RegionConfig, Verb, VerbResult};
use tessera_core::ids::{Key, ShardId, Time, TimerId, TxnId, MS, US};
use tessera_core::node::Ctx;
use tessera_core::protocol::{CoordinatorEnv, Protocol, ServerEnv};
use tessera_core::txn::{AbortReason, Attempt, TxnOutcome};
use tessera_core::FastMap;

#[derive(Clone, Debug)]
pub struct DslrConfig {
    /// Wait between polls of a queued ticket, per ticket ahead of it.
    pub poll_ns: Time,
    /// The longest wait between two polls.
    pub max_poll_ns: Time,
    /// Queued tickets that see no release for this long (and for
    /// [`STALLED_POLLS`] polls) count as a deadlock.
    pub timeout_ns: Time,
    /// A counter at this value triggers the reset (at most 2^15).
    pub count_max: u64,
    /// The memory nodes' region layout.
    pub region: RegionConfig,
    pub nic: NicCosts,
    pub connect_retry: Time,
}

impl Default for DslrConfig {
    fn default() -> Self {
        DslrConfig {
            poll_ns: 2 * US,
            max_poll_ns: 50 * US,
            timeout_ns: 500 * US,
            count_max: word::COUNT_MAX,
            region: RegionConfig::default(),
            nic: NicCosts::default(),
            connect_retry: MS,
        }
    }
}

pub struct Dslr;

/// Polls in a row that must see no release before a wait can count as a
/// deadlock (with `timeout_ns` elapsed since the last release seen).
pub const STALLED_POLLS: u32 = 3;

impl Protocol for Dslr {
    type Msg = Msg;
    type Config = DslrConfig;
    type Server = MemoryNode;
    type Coordinator = Driven<DslrCoordinator>;

    fn server(config: &DslrConfig, env: ServerEnv) -> MemoryNode {
        MemoryNode::new(env, config.region, config.nic.clone())
    }

    fn coordinator(config: &DslrConfig, env: CoordinatorEnv) -> Driven<DslrCoordinator> {
        Driven(DslrCoordinator::new(config.clone(), env))
    }
}

/// The lock word: `[max_x | max_s | n_x | n_s]`, 16 bits each, high to
/// low.
pub mod word {
    pub const COUNT_MAX: u64 = 1 << 15;
    const MASK: u64 = 0xffff;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Fields {
        pub max_x: u64,
        pub max_s: u64,
        pub n_x: u64,
        pub n_s: u64,
    }

    pub fn fields(w: u64) -> Fields {
        Fields {
            max_x: (w >> 48) & MASK,
            max_s: (w >> 32) & MASK,
            n_x: (w >> 16) & MASK,
            n_s: w & MASK,
        }
    }

    /// The FAA operand that takes a ticket.
    pub fn acquire(exclusive: bool) -> u64 {
        if exclusive {
            1 << 48
        } else {
            1 << 32
        }
    }

    /// The FAA operand that releases a granted ticket.
    pub fn release(exclusive: bool) -> u64 {
        if exclusive {
            1 << 16
        } else {
            1
        }
    }

    /// The FAA operand that takes back `add` (a void ticket).
    pub fn undo(add: u64) -> u64 {
        add.wrapping_neg()
    }

    /// Whether `ticket` (the word before its FAA) is granted in `now`.
    pub fn granted(ticket: u64, exclusive: bool, now: u64) -> bool {
        let (t, w) = (fields(ticket), fields(now));
        w.n_x == t.max_x && (!exclusive || w.n_s == t.max_s)
    }

    /// How many tickets must still be released before `ticket` is granted
    /// in `now` (exclusive ones, and shared ones too for an exclusive
    /// ticket).
    pub fn ahead(ticket: u64, exclusive: bool, now: u64) -> u64 {
        let (t, w) = (fields(ticket), fields(now));
        let x = t.max_x.saturating_sub(w.n_x);
        if exclusive {
            x + t.max_s.saturating_sub(w.n_s)
        } else {
            x
        }
    }

    /// Releases recorded in `now` since `before`.
    pub fn released_since(before: u64, now: u64) -> bool {
        let (b, w) = (fields(before), fields(now));
        (w.n_x, w.n_s) != (b.n_x, b.n_s)
    }

    /// A ticket taken on a counter at the limit is void.
    pub fn void(ticket: u64, count_max: u64) -> bool {
        let t = fields(ticket);
        t.max_x >= count_max || t.max_s >= count_max
    }

    /// A word at the limit with every valid ticket released and no void
    /// one outstanding: it may be reset to zero.
    pub fn resettable(w: u64, count_max: u64) -> bool {
        let f = fields(w);
        (f.max_x == count_max || f.max_s == count_max)
            && f.max_x <= count_max
            && f.max_s <= count_max
            && f.n_x == f.max_x
            && f.n_s == f.max_s
    }
}

/// One ticket of a transaction.
#[derive(Clone, Copy, Debug)]
struct Ticket {
    /// The word before the FAA.
    ticket: u64,
    /// The word last seen (after the FAA, then at each poll).
    seen: u64,
    exclusive: bool,
    granted: bool,
    released: bool,
    /// Void (counter overflow): `undone` once its add is taken back.
    void: bool,
    undone: bool,
}

impl Ticket {
    /// Still queued, or void and waiting for the reset.
    fn waiting(&self) -> bool {
        (!self.granted && !self.void) || (self.void && self.undone)
    }
}

/// DSLR's state of one record.
#[derive(Default)]
struct Lock {
    ticket: Option<Ticket>,
}

/// What a verb of a round is for (the shared client's `P`).
#[derive(Clone, Copy, Debug)]
pub enum Purpose {
    Locate {
        key: Key,
        probe: u32,
    },
    Acquire {
        key: Key,
        exclusive: bool,
    },
    /// A READ after an acquire, or a poll.
    Fetch {
        key: Key,
    },
    /// A release or undo FAA: its result may call for the reset.
    Faa {
        addr: Addr,
        shard: ShardId,
        add: u64,
    },
    Ack,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Acquire,
    /// The write-back and releases are posted; their answers commit.
    Commit,
    /// Reported (a read-only commit or an abort): releasing what is held,
    /// undoing void tickets, polling the queued ones to release them.
    Drain,
}

struct Run {
    exec: Exec<Lock>,
    phase: Phase,
    pending: usize,
    /// When the transaction last saw a release on a ticket it waits for
    /// (or began to wait).
    waiting_since: Option<Time>,
    /// Polls in a row that saw no release.
    stalled_polls: u32,
    /// What the last answered round saw: a release, and the fewest tickets
    /// ahead of any queued one.
    saw_release: bool,
    fewest_ahead: u64,
    polling: bool,
}

#[derive(Default)]
struct Counters {
    ro_commits: u64,
    queued: u64,
    polls: u64,
    deadlock_aborts: u64,
    upgrade_aborts: u64,
    resets: u64,
}

pub struct DslrCoordinator {
    cfg: DslrConfig,
    net: Endpoint<Purpose>,
    runs: FastMap<TxnId, Run>,
    polls: FastMap<u64, TxnId>,
    next_timer: u64,
    counters: Counters,
}

impl DslrCoordinator {
    pub fn new(cfg: DslrConfig, env: CoordinatorEnv) -> Self {
        DslrCoordinator {
            net: Endpoint::new(&env, cfg.connect_retry),
            cfg,
            runs: tessera_core::fast_map(),
            polls: tessera_core::fast_map(),
            next_timer: 1,
            counters: Counters::default(),
        }
    }

    fn post(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, round: client::Round<Purpose>) -> usize {
        let pending = self.runs.get_mut(&txn).map(|r| &mut r.pending);
        self.net.post_awaited(ctx, txn, round, pending)
    }

    /// The last round is answered (or a poll is due): undo void tickets,
    /// release in `Drain`, wait for queued tickets, or go on.
    fn settle(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let Some(run) = self.runs.get_mut(&txn) else {
            return;
        };
        let drain = run.phase == Phase::Drain;
        let mut round = client::Round::new();
        let vacant = &run.exec.vacant;
        for (key, r) in run.exec.recs.iter_mut() {
            let Some(t) = r.lock.ticket.as_mut() else {
                continue;
            };
            let addr = self
                .net
                .addr(vacant, *key)
                .expect("ticketed keys are located");
            let add = if t.void && !t.undone {
                t.undone = true;
                word::undo(word::acquire(t.exclusive))
            } else if drain && t.granted && !t.released {
                t.released = true;
                word::release(t.exclusive)
            } else {
                continue;
            };
            let faa = Verb::Faa { addr, add };
            let p = Purpose::Faa {
                addr,
                shard: r.shard,
                add,
            };
            client::push(&mut round, r.shard, faa, p);
        }
        if self.post(ctx, txn, round) > 0 {
            return;
        }
        let run = self.runs.get_mut(&txn).expect("settled");
        if let (Phase::Acquire, Some(reason)) = (run.phase, run.exec.failed) {
            return self.abort(ctx, txn, reason);
        }
        let waiting = run
            .exec
            .recs
            .values()
            .any(|r| r.lock.ticket.is_some_and(|t| t.waiting()));
        if waiting {
            let now = ctx.now();
            if std::mem::take(&mut run.saw_release) || run.waiting_since.is_none() {
                run.waiting_since = Some(now);
                run.stalled_polls = 0;
            } else {
                run.stalled_polls += 1;
            }
            let since = run.waiting_since.unwrap_or(now);
            if run.phase == Phase::Acquire
                && now - since > self.cfg.timeout_ns
                && run.stalled_polls >= STALLED_POLLS
            {
                self.counters.deadlock_aborts += 1;
                return self.abort(ctx, txn, AbortReason::LockConflict);
            }
            if !run.polling {
                run.polling = true;
                let ahead = std::mem::replace(&mut run.fewest_ahead, u64::MAX).max(1);
                let wait = self
                    .cfg
                    .poll_ns
                    .saturating_mul(ahead)
                    .min(self.cfg.max_poll_ns);
                self.next_timer += 1;
                self.polls.insert(self.next_timer, txn);
                ctx.set_timer(wait, TimerId(self.next_timer));
            }
            return;
        }
        run.waiting_since = None;
        run.stalled_polls = 0;
        match run.phase {
            Phase::Drain => {
                self.runs.remove(&txn);
            }
            Phase::Commit => {
                let run = self.runs.remove(&txn).expect("settled");
                ctx.done(txn, run.exec.committed());
            }
            Phase::Acquire => self.acquire(ctx, txn),
        }
    }

    /// Every ticket is granted: run the pieces, take tickets for what they
    /// need, or commit.
    fn acquire(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("settled");
        let held = |l: &Lock| l.ticket.is_some_and(|t| t.exclusive && t.granted);
        let need = match run.exec.step(held) {
            Step::Done => return self.commit(ctx, txn),
            Step::Failed => return self.settle(ctx, txn),
            Step::Need(need) => need,
        };
        let mut round = client::Round::new();
        let locate = |key, probe| Purpose::Locate { key, probe };
        if self.net.locate(&run.exec, &need, &mut round, locate) {
            self.post(ctx, txn, round);
            return;
        }
        for n in need {
            let r = run.exec.rec(n.key, n.shard);
            if r.lock.ticket.is_some() {
                // Read under a shared ticket, now to be written.
                self.counters.upgrade_aborts += 1;
                run.exec.fail(AbortReason::LockConflict);
                return self.settle(ctx, txn);
            }
            let addr = self.net.addr(&run.exec.vacant, n.key).expect("located");
            let add = word::acquire(n.write);
            let acquire = Purpose::Acquire {
                key: n.key,
                exclusive: n.write,
            };
            client::push(&mut round, n.shard, Verb::Faa { addr, add }, acquire);
            let read = Verb::Read { addr, len: 1 };
            client::push(&mut round, n.shard, read, Purpose::Fetch { key: n.key });
        }
        self.post(ctx, txn, round);
    }

    /// All locks are held: the commit point. A read-only transaction
    /// reports now and releases in the background; a read-write one WRITEs
    /// its data and releases in the same batches, and reports once they
    /// are answered (its writes are visible then).
    fn commit(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let run = self.runs.get_mut(&txn).expect("settled");
        if run.exec.read_only {
            self.counters.ro_commits += 1;
            ctx.done(txn, run.exec.committed());
            run.phase = Phase::Drain;
            return self.settle(ctx, txn);
        }
        let held = |l: &Lock| l.ticket.is_some_and(|t| t.exclusive);
        let mut round = self
            .net
            .write_back(&run.exec, txn, held, None, || Purpose::Ack);
        let vacant = &run.exec.vacant;
        for (key, r) in run.exec.recs.iter_mut() {
            if let Some(t) = r.lock.ticket.as_mut() {
                t.released = true;
                let addr = self
                    .net
                    .addr(vacant, *key)
                    .expect("ticketed keys are located");
                let add = word::release(t.exclusive);
                let p = Purpose::Faa {
                    addr,
                    shard: r.shard,
                    add,
                };
                client::push(&mut round, r.shard, Verb::Faa { addr, add }, p);
            }
        }
        run.phase = Phase::Commit;
        if self.post(ctx, txn, round) == 0 {
            self.settle(ctx, txn);
        }
    }

    /// Report the abort, then drain: release, undo, poll what is queued.
    fn abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: AbortReason) {
        let run = self.runs.get_mut(&txn).expect("settled");
        run.phase = Phase::Drain;
        ctx.done(txn, TxnOutcome::Aborted(reason));
        self.settle(ctx, txn);
    }

    /// Poll the queued tickets of `txn`.
    fn poll(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let Some(run) = self.runs.get_mut(&txn) else {
            return;
        };
        run.polling = false;
        let mut round = client::Round::new();
        for (key, r) in &run.exec.recs {
            if r.lock.ticket.is_some_and(|t| t.waiting()) {
                let addr = self
                    .net
                    .addr(&run.exec.vacant, *key)
                    .expect("ticketed keys are located");
                let read = Verb::Read { addr, len: 1 };
                client::push(&mut round, r.shard, read, Purpose::Fetch { key: *key });
                self.counters.polls += 1;
            }
        }
        if self.post(ctx, txn, round) == 0 {
            self.settle(ctx, txn);
        }
    }
}

impl Driver for DslrCoordinator {
    type Purpose = Purpose;

    fn net(&mut self) -> &mut Endpoint<Purpose> {
        &mut self.net
    }

    fn start(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        let id = attempt.id;
        let run = Run {
            exec: Exec::new(attempt),
            phase: Phase::Acquire,
            pending: 0,
            waiting_since: None,
            stalled_polls: 0,
            saw_release: false,
            fewest_ahead: u64::MAX,
            polling: false,
        };
        self.runs.insert(id, run);
        self.settle(ctx, id);
    }

    fn on_done(&mut self, ctx: &mut Ctx<Msg>, id: u64, results: Vec<VerbResult>) {
        let Some((txn, purposes)) = self.net.answered(id) else {
            return;
        };
        let count_max = self.cfg.count_max;
        let mut resets = client::Round::new();
        let run = self.runs.get_mut(&txn);
        let Some(run) = run else {
            return;
        };
        let x = &mut run.exec;
        for (p, r) in purposes.into_iter().zip(results) {
            match (p, r) {
                (Purpose::Locate { key, probe }, VerbResult::Read(imgs)) => {
                    self.net.on_located(x, key, probe, &imgs);
                }
                (Purpose::Acquire { key, exclusive }, VerbResult::Atomic { old }) => {
                    // A void ticket is never granted (nor released).
                    let void = word::void(old, count_max);
                    let t = Ticket {
                        ticket: old,
                        seen: old.wrapping_add(word::acquire(exclusive)),
                        exclusive,
                        granted: !void && word::granted(old, exclusive, old),
                        released: false,
                        void,
                        undone: false,
                    };
                    if !t.granted && !t.void {
                        self.counters.queued += 1;
                    }
                    let r = x.recs.get_mut(&key).expect("acquired keys have records");
                    r.lock.ticket = Some(t);
                }
                (Purpose::Fetch { key }, VerbResult::Read(imgs)) => {
                    let Some(img) = self.net.image(x, key, &imgs).or_else(|| {
                        // Another key's insert took this insert slot: abort,
                        // but follow the ticket on (it must be released).
                        x.fail(AbortReason::LockConflict);
                        imgs.first()
                    }) else {
                        x.fail(AbortReason::Timeout);
                        continue;
                    };
                    let r = x.recs.get_mut(&key).expect("fetched keys have records");
                    let Some(t) = r.lock.ticket.as_mut() else {
                        continue;
                    };
                    if t.void {
                        if t.undone && !word::void(img.lock, count_max) {
                            // Reset: take a new ticket.
                            r.lock.ticket = None;
                        }
                        continue;
                    }
                    if !t.granted {
                        if word::released_since(t.seen, img.lock) {
                            run.saw_release = true;
                        }
                        t.seen = img.lock;
                        if word::granted(t.ticket, t.exclusive, img.lock) {
                            t.granted = true;
                        } else {
                            let ahead = word::ahead(t.ticket, t.exclusive, img.lock);
                            run.fewest_ahead = run.fewest_ahead.min(ahead);
                        }
                    }
                    if t.granted && !r.fetched && run.phase == Phase::Acquire {
                        x.take(key, img);
                    }
                }
                (Purpose::Faa { addr, shard, add }, VerbResult::Atomic { old }) => {
                    let after = old.wrapping_add(add);
                    if word::resettable(after, count_max) {
                        self.counters.resets += 1;
                        let cas = Verb::Cas {
                            addr,
                            expect: after,
                            swap: 0,
                        };
                        client::push(&mut resets, shard, cas, Purpose::Ack);
                    }
                }
                (Purpose::Ack, _) => {}
                (p, r) => {
                    tracing::error!(?txn, ?p, ?r, "unexpected verb result");
                    x.fail(AbortReason::Timeout);
                }
            }
        }
        self.net.post(ctx, txn, resets, false);
        let run = self.runs.get_mut(&txn).expect("answered");
        if client::last_answer(&mut run.pending) {
            self.settle(ctx, txn);
        }
    }

    fn on_own_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if let Some(txn) = self.polls.remove(&id.0) {
            self.poll(ctx, txn);
        }
    }

    fn take_counters(&mut self) -> Vec<(&'static str, u64)> {
        let c = std::mem::take(&mut self.counters);
        vec![
            ("ro_commits", c.ro_commits),
            ("queued", c.queued),
            ("polls", c.polls),
            ("deadlock_aborts", c.deadlock_aborts),
            ("upgrade_aborts", c.upgrade_aborts),
            ("resets", c.resets),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::word::*;

    #[test]
    fn tickets_are_granted_in_order() {
        let mut w = 0u64;
        let take = |w: &mut u64, add| {
            let t = *w;
            *w = w.wrapping_add(add);
            t
        };
        let s1 = take(&mut w, acquire(false));
        let x1 = take(&mut w, acquire(true));
        let s2 = take(&mut w, acquire(false));
        assert!(granted(s1, false, w));
        assert!(!granted(x1, true, w), "waits for the earlier reader");
        assert!(!granted(s2, false, w), "waits for the earlier writer");
        w = w.wrapping_add(release(false));
        assert!(granted(x1, true, w));
        assert!(!granted(s2, false, w));
        w = w.wrapping_add(release(true));
        assert!(granted(s2, false, w));
    }

    #[test]
    fn waiters_count_the_tickets_ahead_and_see_releases() {
        let mut w = 0u64;
        let take = |w: &mut u64, add| {
            let t = *w;
            *w = w.wrapping_add(add);
            t
        };
        let x1 = take(&mut w, acquire(true));
        let s1 = take(&mut w, acquire(false));
        let s2 = take(&mut w, acquire(false));
        let x2 = take(&mut w, acquire(true));
        assert_eq!(ahead(x1, true, w), 0);
        assert_eq!(ahead(s1, false, w), 1, "behind x1");
        assert_eq!(ahead(s2, false, w), 1, "readers share: behind x1 only");
        assert_eq!(ahead(x2, true, w), 3, "behind x1, s1 and s2");
        let before = w;
        assert!(!released_since(before, w.wrapping_add(acquire(false))));
        w = w.wrapping_add(release(true));
        assert!(released_since(before, w));
        assert_eq!(ahead(x2, true, w), 2);
        assert!(granted(s1, false, w) && granted(s2, false, w));
    }

    #[test]
    fn void_tickets_undo_and_the_word_resets_when_all_are_released() {
        let max = 2;
        let mut w = 0u64;
        let a = w;
        w = w.wrapping_add(acquire(true));
        let b = w;
        w = w.wrapping_add(acquire(true));
        assert!(!void(a, max) && !void(b, max));
        let c = w;
        w = w.wrapping_add(acquire(false));
        assert!(void(c, max), "taken at the limit");
        w = w.wrapping_add(release(true));
        w = w.wrapping_add(release(true));
        assert!(!resettable(w, max), "the void ticket is outstanding");
        w = w.wrapping_add(undo(acquire(false)));
        assert!(resettable(w, max));
        let f = fields(w);
        assert_eq!((f.max_x, f.max_s, f.n_x, f.n_s), (2, 0, 2, 0));
    }
}
