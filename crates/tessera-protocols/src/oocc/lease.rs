//! The lease as coordinators use it (§III, §VII.A, §VII.B).
//!
//! One lease serves two purposes: a read-only transaction whose reads all
//! finished within the *read-validate lease* of its first READ may skip
//! validation, and a writer keeps its write locks for at least the
//! *write-wait lease*. Safety needs read-validate ≤ write-wait (§VII,
//! Property 2); the drift offset widens the gap: `lease - offset` and
//! `lease + offset` (§VII.B).
//!
//! [`Leases`] is a coordinator's side of the Lease Manager's two-phase
//! adjustment (§VII.A): **Prepare** moves it to the intermediate state of
//! Table II, **Commit** to the new lease (Table III).

use tessera_core::ids::Time;

/// Clock rates are trusted within this bound (§VII.B: 1000 ppm, ten times
/// the worst drift observed in production).
pub const DRIFT_BOUND_PPM: u64 = 1_000;

/// How a lease is widened against drift (§VII.B): by `lease ×`
/// [`DRIFT_BOUND_PPM`] (20 ns for a 20 µs lease), safe while every clock's
/// rate is within the bound of the reference. A reader whose clock is slow
/// by `b` and a writer whose clock is fast by `b` then still keep the
/// reader's real window ≤ `(lease - offset) / (1 - b)` ≤ `(lease + offset)
/// / (1 + b)`, the writer's real wait. A *floor* widens it further
/// (§VIII.G measures offsets of 0.5–1.5 µs on a 10 µs lease); it never
/// narrows it below the bound's, so no setting weakens the drift argument.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offset {
    pub floor: Time,
}

impl Offset {
    /// The offset of `lease`: the bound's, or the floor if larger.
    pub fn of(self, lease: Time) -> Time {
        lease
            .saturating_mul(DRIFT_BOUND_PPM)
            .div_ceil(1_000_000)
            .max(self.floor)
    }

    /// Both leases at `lease`, widened by its offset.
    pub fn settled(self, lease: Time) -> Lease {
        Lease::new(lease, self.of(lease))
    }

    /// The intermediate state of an adjustment from `old` to `new` (Table
    /// II): read-validate at the smaller lease, write-wait at the larger.
    pub fn intermediate(self, old: Time, new: Time) -> Lease {
        Lease {
            read_validate: self.settled(old.min(new)).read_validate,
            write_wait: self.settled(old.max(new)).write_wait,
        }
    }

    /// A lease whose read-validate lease exceeds `window`, for the Lease
    /// Manager (§VII.A): twice the bound's offset of `window` (at least
    /// 1 ns) covers the bound's offset of the longer lease, and a floor
    /// above that is the whole offset.
    pub fn covering(self, window: Time) -> Time {
        let bound = Offset::default().of(window).saturating_mul(2).max(1);
        window
            .saturating_add(1)
            .saturating_add(bound.max(self.floor))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub read_validate: Time,
    pub write_wait: Time,
}

impl Lease {
    pub fn new(lease: Time, offset: Time) -> Self {
        Lease {
            read_validate: lease.saturating_sub(offset),
            write_wait: lease.saturating_add(offset),
        }
    }

    /// Reads issued from `start` and all answered by `end` hold their
    /// implicit leases.
    pub fn reads_hold(&self, start: Time, end: Time) -> bool {
        end.saturating_sub(start) < self.read_validate
    }

    /// When a writer whose lock CASes (intention or write locks) were all
    /// answered by `locked` may release its locks: every reader that read
    /// one of its records unlocked started before then (§III.A, Lemma
    /// VI.2).
    pub fn release_at(&self, locked: Time) -> Time {
        locked.saturating_add(self.write_wait)
    }
}

/// The two phases of a lease adjustment (§VII.A), in the order a
/// coordinator goes through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Prepare,
    Commit,
}

/// A coordinator's leases under the Lease Manager. Messages of an
/// adjustment may arrive late or twice: each applies only if its `(epoch,
/// stage)` is newer than the last one applied, so a stale Prepare never
/// takes a committed coordinator back to the intermediate state.
#[derive(Clone, Debug)]
pub struct Leases {
    current: Lease,
    at: (u64, Stage),
    offset: Offset,
}

impl Leases {
    pub fn new(lease: Time, offset: Offset) -> Self {
        Leases {
            current: offset.settled(lease),
            at: (0, Stage::Commit),
            offset,
        }
    }

    pub fn get(&self) -> Lease {
        self.current
    }

    /// Prepare of adjustment `epoch` from `old` to `new` (Table II).
    pub fn prepare(&mut self, epoch: u64, old: Time, new: Time) {
        if (epoch, Stage::Prepare) > self.at {
            self.at = (epoch, Stage::Prepare);
            self.current = self.offset.intermediate(old, new);
        }
    }

    /// Commit of adjustment `epoch`: both leases at `new` (Table III).
    pub fn commit(&mut self, epoch: u64, new: Time) {
        if (epoch, Stage::Commit) > self.at {
            self.at = (epoch, Stage::Commit);
            self.current = self.offset.settled(new);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_validate_never_exceeds_write_wait() {
        for (l, o) in [(20_000, 20), (10, 20), (0, 0), (5_000, 5_000)] {
            let x = Lease::new(l, o);
            assert!(x.read_validate <= x.write_wait);
        }
        let x = Lease::new(1_000, 10);
        assert!(x.reads_hold(0, 989));
        assert!(!x.reads_hold(0, 990));
        assert_eq!(x.release_at(5), 1_015);
        assert_eq!(Offset::default().of(20_000), 20);
    }

    #[test]
    fn intermediate_is_the_min_and_max_of_table_ii() {
        for (old, new) in [(4_000, 20_000), (20_000, 4_000)] {
            let i = Offset::default().intermediate(old, new);
            assert_eq!(i.read_validate, 4_000 - 4);
            assert_eq!(i.write_wait, 20_000 + 20);
        }
    }

    #[test]
    fn stale_or_repeated_messages_do_not_move_a_coordinator_back() {
        let mut l = Leases::new(10_000, Offset::default());
        l.prepare(1, 10_000, 30_000);
        l.commit(1, 30_000);
        let done = l.get();
        assert_eq!(done, Offset::default().settled(30_000));
        l.prepare(1, 10_000, 30_000);
        assert_eq!(l.get(), done, "a late Prepare of a committed epoch");
        l.commit(1, 30_000);
        assert_eq!(l.get(), done);
        l.prepare(2, 30_000, 5_000);
        assert_eq!(l.get(), Offset::default().intermediate(30_000, 5_000));
        l.commit(1, 30_000);
        assert_eq!(l.get(), Offset::default().intermediate(30_000, 5_000));
    }

    #[test]
    fn a_floor_widens_the_offset_and_never_narrows_it() {
        // §VIII.G's 10 µs lease with a 1 µs offset.
        let wide = Offset { floor: 1_000 };
        assert_eq!(wide.settled(10_000), Lease::new(10_000, 1_000));
        // Below the floor the bound's offset stays (2 ms × 1000 ppm).
        assert_eq!(Offset { floor: 1 }.of(2_000_000), 2_000);
        // An offset of the whole lease leaves no read-validate lease.
        assert_eq!(wide.settled(1_000).read_validate, 0);
        for o in [Offset::default(), wide] {
            for window in [0, 3_000, 9_999, 1_000_000] {
                assert!(o.settled(o.covering(window)).reads_hold(0, window));
            }
        }
    }
}
