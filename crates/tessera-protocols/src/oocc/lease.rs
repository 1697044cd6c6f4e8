//! The lease as coordinators use it (§III, §VII.B).
//!
//! One lease serves two purposes: a read-only transaction whose reads all
//! finished within the *read-validate lease* of its first READ may skip
//! validation, and a writer keeps its write locks for at least the
//! *write-wait lease*. Safety needs read-validate ≤ write-wait (§VII,
//! Property 2); the drift offset widens the gap: `lease - offset` and
//! `lease + offset` (§VII.B).

use tessera_core::ids::Time;

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

    /// When a writer whose write locks were all visible by `locked` may
    /// release them.
    pub fn release_at(&self, locked: Time) -> Time {
        locked.saturating_add(self.write_wait)
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
    }
}
