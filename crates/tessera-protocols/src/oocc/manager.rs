//! The Lease Manager (§VII.A): changes every coordinator's lease in two
//! phases so that Property 2 — max(read-validate lease) ≤ min(write-wait
//! lease) over all coordinators — holds at every moment, and adapts the
//! lease to the read-only transactions' execution windows.
//!
//! An adjustment from `old` to `new`:
//! 1. **Prepare**: every coordinator moves to the intermediate state of
//!    Table II (read-validate at `min(old, new)`, write-wait at
//!    `max(old, new)`) and acknowledges. When growing, this raises the
//!    write-wait lease everywhere before any read-validate lease grows;
//!    when shrinking, it lowers every read-validate lease before any
//!    write-wait lease shrinks.
//! 2. **Drain**: with every acknowledgement in, the manager waits out the
//!    larger write-wait lease. A writer that set its release time with the
//!    old write-wait lease before its coordinator prepared holds its locks
//!    at most that long after the last acknowledgement; a reader that
//!    overlaps it started before then, and with a window shorter than the
//!    new lease it finishes before the Commit can reach it. (The paper
//!    waits "the old lease"; growing needs the new one, since a reader
//!    compares its window with the lease it holds when it decides.)
//! 3. **Commit**: every coordinator moves to `new` (Table III).
//!
//! Messages may be late or repeated ([`super::lease::Leases`] applies each
//! phase once, in order); the manager resends the current phase to the
//! coordinators that have not acknowledged it at every period.
//!
//! Adaptation (§VII.A, last paragraph): every period the manager polls the
//! coordinators' statistics of read-only transactions (how many decided,
//! how many skipped validation, a histogram of their execution windows)
//! and proposes a lease ([`proposal`]): larger when fewer than the target
//! share (80%) skipped validation, smaller when the lease is over twice what
//! the windows need. The manager lives on the first client host, whose
//! clock is also the reference the others measure their drift against
//! ([`super::drift`]).

use super::lease::{Offset, Stage};
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::ids::{NodeId, Time, MS, US};

/// What the Lease Manager and the coordinators tell each other.
#[derive(Clone, Debug, PartialEq)]
pub enum LeaseMsg {
    /// Manager → coordinators: adjustment `epoch`, phase one (Table II).
    Prepare {
        epoch: u64,
        old: Time,
        new: Time,
    },
    /// Manager → coordinators: adjustment `epoch`, phase two (Table III).
    Commit {
        epoch: u64,
        new: Time,
    },
    /// Coordinator → manager: `stage` of `epoch` applied.
    Ack {
        epoch: u64,
        stage: Stage,
    },
    /// Manager → coordinators: send the statistics gathered since the last
    /// poll.
    Poll {
        round: u64,
    },
    Stats {
        round: u64,
        stats: RoStats,
    },
    /// Coordinator → the reference clock's node: a time request (§VII.B).
    Sync {
        seq: u64,
    },
    /// The reference clock's reading when it answered.
    SyncReply {
        seq: u64,
        time: Time,
    },
}

impl LeaseMsg {
    pub fn wire_size(&self) -> usize {
        1 + match self {
            LeaseMsg::Prepare { .. } => 24,
            LeaseMsg::Stats { stats, .. } => 24 + 9 * stats.windows.len(),
            _ => 16,
        }
    }
}

/// Read-only transactions' statistics over one period (§VII.A): those that
/// reached the commit decision, those of them that skipped validation, and
/// their execution windows (first READ posted to last answer) on a
/// histogram of quarter-octave buckets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoStats {
    pub decided: u64,
    pub skipped: u64,
    pub windows: BTreeMap<u8, u64>,
}

/// The bucket of a window: exact below 4 ns, then four buckets per octave
/// (each bound 19% above the last).
fn bucket(d: Time) -> u8 {
    if d < 4 {
        return d as u8;
    }
    let b = 63 - d.leading_zeros() as u64;
    let mant = d >> (b - 2);
    (4 * (b - 1) + (mant - 4)) as u8
}

/// The exclusive upper bound of bucket `i`.
fn upper(i: u8) -> Time {
    if i < 4 {
        return Time::from(i) + 1;
    }
    let b = u64::from(i) / 4 + 1;
    let mant = u64::from(i) % 4 + 4;
    (mant + 1) << (b - 2)
}

impl RoStats {
    pub fn record(&mut self, window: Time, skipped: bool) {
        self.decided += 1;
        self.skipped += u64::from(skipped);
        *self.windows.entry(bucket(window)).or_insert(0) += 1;
    }

    pub fn merge(&mut self, o: &RoStats) {
        self.decided += o.decided;
        self.skipped += o.skipped;
        for (b, n) in &o.windows {
            *self.windows.entry(*b).or_insert(0) += n;
        }
    }

    /// A bound that at least share `q` of the windows are below.
    pub fn quantile(&self, q: f64) -> Option<Time> {
        let total: u64 = self.windows.values().sum();
        let need = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, n) in &self.windows {
            seen += n;
            if seen >= need {
                return Some(upper(*b));
            }
        }
        None
    }
}

/// The adaptation's knobs.
#[derive(Clone, Debug)]
pub struct AdaptConfig {
    /// How often the manager polls statistics (the paper: once a second;
    /// our default suits simulated runs of tens of milliseconds).
    pub period: Time,
    /// The lease stays within `[min, max]`.
    pub min: Time,
    pub max: Time,
    /// The share of read-only transactions that should skip validation
    /// (§VII.A: at least 80%).
    pub target: f64,
}

impl Default for AdaptConfig {
    fn default() -> Self {
        AdaptConfig {
            period: MS,
            min: 2 * US,
            max: 1_000 * US,
            target: 0.8,
        }
    }
}

/// Fewer decided read-only transactions than this in a period say too
/// little to move the lease.
const MIN_SAMPLES: u64 = 32;

/// The lease the statistics of one period ask for, if it should change.
/// The proposed lease covers the windows of a share halfway between the
/// target and all (90% for an 80% target), so that a lease just grown
/// does not fall back under the target at the next period. It grows when
/// fewer than the target share skipped validation and the windows need
/// more; it shrinks when it is over twice what the windows need (the
/// paper: "significantly larger than the execution delay").
pub fn proposal(stats: &RoStats, lease: Time, cfg: &AdaptConfig, offset: Offset) -> Option<Time> {
    if stats.decided < MIN_SAMPLES {
        return None;
    }
    let cover = (cfg.target + 1.0) / 2.0;
    let window = stats.quantile(cover)?;
    let want = offset.covering(window).clamp(cfg.min, cfg.max);
    let skipped = stats.skipped as f64 / stats.decided as f64;
    let grow = skipped < cfg.target && want > lease;
    let shrink = want < lease && want.saturating_mul(2) <= lease;
    (grow || shrink).then_some(want)
}

#[derive(Clone, Debug, PartialEq)]
enum Adjust {
    Idle,
    Prepare {
        old: Time,
        new: Time,
        waiting: BTreeSet<NodeId>,
    },
    Drain {
        new: Time,
    },
    Commit {
        new: Time,
        waiting: BTreeSet<NodeId>,
    },
}

/// What the manager asks its host to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Send(NodeId, LeaseMsg),
    /// Call [`LeaseManager::wake`] after this delay.
    Wake(Time),
}

pub struct LeaseManager {
    coordinators: Vec<NodeId>,
    /// `None`: the lease is fixed; the manager only serves as the reference
    /// clock.
    adapt: Option<AdaptConfig>,
    lease: Time,
    offset: Offset,
    epoch: u64,
    adjust: Adjust,
    round: u64,
    merged: RoStats,
    /// Adjustments committed.
    pub adjustments: u64,
}

impl LeaseManager {
    pub fn new(
        coordinators: Vec<NodeId>,
        lease: Time,
        adapt: Option<AdaptConfig>,
        offset: Offset,
    ) -> Self {
        LeaseManager {
            coordinators,
            adapt,
            lease,
            offset,
            epoch: 0,
            adjust: Adjust::Idle,
            round: 0,
            merged: RoStats::default(),
            adjustments: 0,
        }
    }

    /// The lease every coordinator holds once no adjustment is running.
    pub fn lease(&self) -> Time {
        self.lease
    }

    pub fn idle(&self) -> bool {
        self.adjust == Adjust::Idle
    }

    /// The adjustment period, when adapting.
    pub fn period(&self) -> Option<Time> {
        self.adapt.as_ref().map(|a| a.period)
    }

    /// One period passed: poll the next period's statistics, resend the
    /// running phase to the coordinators that have not acknowledged it, and
    /// adjust to what the last period's statistics ask for.
    pub fn tick(&mut self, out: &mut Vec<Action>) {
        let Some(cfg) = &self.adapt else {
            return;
        };
        let proposed = proposal(&self.merged, self.lease, cfg, self.offset);
        self.merged = RoStats::default();
        self.round += 1;
        for &c in &self.coordinators {
            out.push(Action::Send(c, LeaseMsg::Poll { round: self.round }));
        }
        self.resend(out);
        if let Some(new) = proposed {
            self.begin(new, out);
        }
    }

    /// Resend the running phase to the coordinators that have not
    /// acknowledged it.
    fn resend(&self, out: &mut Vec<Action>) {
        let epoch = self.epoch;
        match &self.adjust {
            Adjust::Prepare { old, new, waiting } => {
                for &c in waiting {
                    let (old, new) = (*old, *new);
                    out.push(Action::Send(c, LeaseMsg::Prepare { epoch, old, new }));
                }
            }
            Adjust::Commit { new, waiting } => {
                for &c in waiting {
                    out.push(Action::Send(c, LeaseMsg::Commit { epoch, new: *new }));
                }
            }
            Adjust::Idle | Adjust::Drain { .. } => {}
        }
    }

    /// Start adjusting the lease to `new` (Prepare phase). Refused (false)
    /// while another adjustment runs or when `new` is the lease already.
    pub fn begin(&mut self, new: Time, out: &mut Vec<Action>) -> bool {
        if !self.idle() || new == self.lease {
            return false;
        }
        self.epoch += 1;
        let (epoch, old) = (self.epoch, self.lease);
        for &c in &self.coordinators {
            out.push(Action::Send(c, LeaseMsg::Prepare { epoch, old, new }));
        }
        self.adjust = Adjust::Prepare {
            old,
            new,
            waiting: self.coordinators.iter().copied().collect(),
        };
        self.after_ack(out);
        true
    }

    pub fn on_ack(&mut self, from: NodeId, epoch: u64, stage: Stage, out: &mut Vec<Action>) {
        if epoch != self.epoch {
            return;
        }
        match (&mut self.adjust, stage) {
            (Adjust::Prepare { waiting, .. }, Stage::Prepare)
            | (Adjust::Commit { waiting, .. }, Stage::Commit) => {
                waiting.remove(&from);
            }
            _ => return,
        }
        self.after_ack(out);
    }

    /// Move on once every coordinator acknowledged the running phase.
    fn after_ack(&mut self, out: &mut Vec<Action>) {
        match &self.adjust {
            Adjust::Prepare { old, new, waiting } if waiting.is_empty() => {
                let wait = self.offset.intermediate(*old, *new).write_wait;
                self.adjust = Adjust::Drain { new: *new };
                out.push(Action::Wake(wait));
            }
            Adjust::Commit { new, waiting } if waiting.is_empty() => {
                self.lease = *new;
                self.adjustments += 1;
                self.adjust = Adjust::Idle;
            }
            _ => {}
        }
    }

    /// The drain is over (the host calls this when the [`Action::Wake`]
    /// delay has passed): Commit phase.
    pub fn wake(&mut self, out: &mut Vec<Action>) {
        let Adjust::Drain { new } = self.adjust else {
            return;
        };
        let epoch = self.epoch;
        for &c in &self.coordinators {
            out.push(Action::Send(c, LeaseMsg::Commit { epoch, new }));
        }
        self.adjust = Adjust::Commit {
            new,
            waiting: self.coordinators.iter().copied().collect(),
        };
        self.after_ack(out);
    }

    pub fn on_stats(&mut self, round: u64, stats: &RoStats) {
        if round == self.round {
            self.merged.merge(stats);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lease::{Leases, Offset};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_bound_their_windows() {
        let mut last = 0;
        for d in [
            0,
            1,
            3,
            4,
            5,
            7,
            8,
            9,
            15,
            16,
            1_000,
            2_500,
            20_000,
            1 << 40,
        ] {
            let b = bucket(d);
            assert!(d < upper(b), "{d} in bucket {b} < {}", upper(b));
            assert!(b >= last);
            last = b;
            if b > 0 {
                assert!(upper(b - 1) <= d, "{d}");
            }
        }
    }

    fn stats(windows: &[(Time, u64)], skipped_share: f64) -> RoStats {
        let mut s = RoStats::default();
        for &(w, n) in windows {
            for _ in 0..n {
                s.record(w, false);
            }
        }
        s.skipped = (s.decided as f64 * skipped_share) as u64;
        s
    }

    #[test]
    fn adaptation_grows_a_short_lease_and_shrinks_a_long_one() {
        let cfg = AdaptConfig::default();
        // Windows of 3 µs (and a few of 9 µs): a 2 µs lease skips nothing.
        let s = stats(&[(3_000, 95), (9_000, 5)], 0.0);
        let grown = proposal(&s, 2 * US, &cfg, Offset::default()).expect("grows");
        assert!(grown > 3_000 && grown < 9_000, "{grown}");
        assert!(Offset::default().settled(grown).reads_hold(0, 3_000));
        // At the grown lease 95% skip: nothing to do.
        assert_eq!(
            proposal(&stats(&[(3_000, 95)], 0.95), grown, &cfg, Offset::default()),
            None
        );
        // A 100 µs lease for 3 µs windows is too long: shrink.
        let shrunk = proposal(
            &stats(&[(3_000, 100)], 1.0),
            100 * US,
            &cfg,
            Offset::default(),
        )
        .expect("shrinks");
        assert!(shrunk < 10 * US && shrunk > 3_000, "{shrunk}");
        // Few samples, or misses the lease cannot fix (it covers the
        // windows already): no change.
        assert_eq!(
            proposal(&stats(&[(3_000, 10)], 0.0), 2 * US, &cfg, Offset::default()),
            None
        );
        assert_eq!(
            proposal(
                &stats(&[(3_000, 100)], 0.5),
                5 * US,
                &cfg,
                Offset::default()
            ),
            None
        );
        // Bounds hold.
        let tight = AdaptConfig {
            max: 3 * US,
            ..AdaptConfig::default()
        };
        assert_eq!(
            proposal(&s, 2 * US, &tight, Offset::default()),
            Some(3 * US)
        );
        assert_eq!(proposal(&s, 3 * US, &tight, Offset::default()), None);
    }

    fn sends(out: &[Action]) -> Vec<(NodeId, LeaseMsg)> {
        out.iter()
            .filter_map(|a| match a {
                Action::Send(n, m) => Some((*n, m.clone())),
                Action::Wake(_) => None,
            })
            .collect()
    }

    #[test]
    fn commit_waits_for_every_prepare_ack_and_the_drain() {
        let coords = vec![NodeId(1), NodeId(2)];
        let mut m = LeaseManager::new(coords, 4 * US, None, Offset::default());
        let mut out = Vec::new();
        assert!(m.begin(20 * US, &mut out));
        assert!(!m.begin(30 * US, &mut out), "one adjustment at a time");
        out.clear();
        m.on_ack(NodeId(1), 1, Stage::Prepare, &mut out);
        m.on_ack(NodeId(1), 1, Stage::Prepare, &mut out);
        assert!(out.is_empty(), "still waiting for node 2: {out:?}");
        m.on_ack(NodeId(2), 1, Stage::Prepare, &mut out);
        assert_eq!(
            out,
            vec![Action::Wake(Offset::default().settled(20 * US).write_wait)]
        );
        out.clear();
        m.on_ack(NodeId(2), 1, Stage::Commit, &mut out);
        m.wake(&mut out);
        let s = sends(&out);
        assert!(s.iter().all(|(_, msg)| *msg
            == LeaseMsg::Commit {
                epoch: 1,
                new: 20 * US
            }));
        assert_eq!(s.len(), 2);
        assert_eq!(m.lease(), 4 * US);
        m.on_ack(NodeId(1), 1, Stage::Commit, &mut out);
        m.on_ack(NodeId(2), 1, Stage::Commit, &mut out);
        assert!(m.idle());
        assert_eq!((m.lease(), m.adjustments), (20 * US, 1));
    }

    #[test]
    fn ticks_poll_resend_and_adapt() {
        let coords = vec![NodeId(1), NodeId(2)];
        let mut m = LeaseManager::new(
            coords,
            2 * US,
            Some(AdaptConfig::default()),
            Offset::default(),
        );
        let mut out = Vec::new();
        m.tick(&mut out);
        assert!(m.idle(), "no statistics yet");
        assert_eq!(sends(&out).len(), 2);
        out.clear();
        let s = stats(&[(3_000, 40)], 0.1);
        m.on_stats(1, &s);
        m.on_stats(0, &s); // a late answer to an older poll: ignored
        m.tick(&mut out);
        let prepares: Vec<_> = sends(&out)
            .into_iter()
            .filter(|(_, msg)| matches!(msg, LeaseMsg::Prepare { .. }))
            .collect();
        assert_eq!(prepares.len(), 2, "{out:?}");
        out.clear();
        m.on_ack(NodeId(1), 1, Stage::Prepare, &mut out);
        m.tick(&mut out);
        let resent: Vec<_> = sends(&out)
            .into_iter()
            .filter(|(_, msg)| matches!(msg, LeaseMsg::Prepare { .. }))
            .collect();
        assert_eq!(resent.len(), 1);
        assert_eq!(resent[0].0, NodeId(2));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Begin(Time),
        Deliver(usize),
        Duplicate(usize),
        Wake,
        Tick,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u64..100).prop_map(|us| Op::Begin(us * US)),
            (0usize..64).prop_map(Op::Deliver),
            (0usize..64).prop_map(Op::Duplicate),
            Just(Op::Wake),
            Just(Op::Tick),
        ]
    }

    /// The test network: messages in flight as (from, to, message).
    type Net = Vec<(NodeId, NodeId, LeaseMsg)>;
    const MANAGER: NodeId = NodeId(0);

    fn absorb(out: Vec<Action>, net: &mut Net, wake_armed: &mut bool) {
        for a in out {
            match a {
                Action::Send(to, msg) => net.push((MANAGER, to, msg)),
                Action::Wake(_) => *wake_armed = true,
            }
        }
    }

    /// Deliver one message: coordinators apply and acknowledge, the
    /// manager takes acknowledgements.
    fn deliver(
        m: &mut LeaseManager,
        coords: &mut [Leases],
        net: &mut Net,
        wake_armed: &mut bool,
        (from, to, msg): (NodeId, NodeId, LeaseMsg),
    ) {
        let mut out = Vec::new();
        if to == MANAGER {
            if let LeaseMsg::Ack { epoch, stage } = msg {
                m.on_ack(from, epoch, stage, &mut out);
            }
        } else {
            let c = &mut coords[to.0 as usize - 1];
            let ack = match msg {
                LeaseMsg::Prepare { epoch, old, new } => {
                    c.prepare(epoch, old, new);
                    Some((epoch, Stage::Prepare))
                }
                LeaseMsg::Commit { epoch, new } => {
                    c.commit(epoch, new);
                    Some((epoch, Stage::Commit))
                }
                _ => None,
            };
            if let Some((epoch, stage)) = ack {
                net.push((to, MANAGER, LeaseMsg::Ack { epoch, stage }));
            }
        }
        absorb(out, net, wake_armed);
    }

    proptest! {
        /// Property 2 under any delivery order, duplicates and
        /// retransmissions: no coordinator's read-validate lease ever
        /// exceeds another's write-wait lease; and once the messages are
        /// all delivered and the manager is idle, every coordinator holds
        /// the manager's lease (Property 1). Any offset floor (§VIII.G),
        /// up to past the lease, keeps both.
        #[test]
        fn properties_1_and_2_hold_under_any_interleaving(
            n in 1usize..5,
            ops in proptest::collection::vec(op(), 1..200),
            floor in prop_oneof![Just(0u64), 0..30 * US],
        ) {
            let ids: Vec<NodeId> = (1..=n as u32).map(NodeId).collect();
            let adapt = AdaptConfig { min: US, max: 200 * US, ..AdaptConfig::default() };
            let offset = Offset { floor };
            let mut m = LeaseManager::new(ids.clone(), 20 * US, Some(adapt), offset);
            let mut coords: Vec<Leases> = ids.iter().map(|_| Leases::new(20 * US, offset)).collect();
            let mut net = Net::new();
            let mut wake_armed = false;
            for o in ops {
                let mut out = Vec::new();
                match o {
                    Op::Begin(new) => {
                        m.begin(new, &mut out);
                    }
                    Op::Tick => m.tick(&mut out),
                    Op::Wake if wake_armed => {
                        wake_armed = false;
                        m.wake(&mut out);
                    }
                    Op::Deliver(i) if !net.is_empty() => {
                        let x = net.remove(i % net.len());
                        deliver(&mut m, &mut coords, &mut net, &mut wake_armed, x);
                    }
                    Op::Duplicate(i) if !net.is_empty() => {
                        let x = net[i % net.len()].clone();
                        deliver(&mut m, &mut coords, &mut net, &mut wake_armed, x);
                    }
                    Op::Wake | Op::Deliver(_) | Op::Duplicate(_) => {}
                }
                absorb(out, &mut net, &mut wake_armed);
                let max_rv = coords.iter().map(|c| c.get().read_validate).max().unwrap();
                let min_ww = coords.iter().map(|c| c.get().write_wait).min().unwrap();
                prop_assert!(max_rv <= min_ww, "Property 2: {} > {}", max_rv, min_ww);
            }
            // Deliver everything and wake the manager until it is quiet.
            while !net.is_empty() || wake_armed {
                if wake_armed {
                    wake_armed = false;
                    let mut out = Vec::new();
                    m.wake(&mut out);
                    absorb(out, &mut net, &mut wake_armed);
                } else {
                    let x = net.remove(0);
                    deliver(&mut m, &mut coords, &mut net, &mut wake_armed, x);
                }
            }
            prop_assert!(m.idle());
            for c in &coords {
                prop_assert_eq!(c.get(), offset.settled(m.lease()));
            }
        }
    }
}
