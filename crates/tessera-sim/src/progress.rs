//! How far a run's virtual clock has got, for a caller that shows
//! progress while the run holds its thread.
//!
//! A long simulation (Janus over three sites runs for tens of minutes of
//! wall time for 4 s of virtual time) otherwise shows only a spinner. The
//! run writes its clock here now and then and never reads it back, so a
//! display cannot change what the run does: one seed still replays one run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessera_core::ids::Time;

/// A shared cell for the virtual time reached, or nothing (the default).
#[derive(Clone, Debug, Default)]
pub struct Progress(Option<Arc<AtomicU64>>);

impl Progress {
    /// A cell the run will write and the caller can read.
    pub fn shared() -> Progress {
        Progress(Some(Arc::new(AtomicU64::new(0))))
    }

    /// The virtual time the run has reached, if this cell is shared.
    pub fn reached(&self) -> Option<Time> {
        self.0.as_ref().map(|t| t.load(Ordering::Relaxed))
    }

    pub(crate) fn set(&self, now: Time) {
        if let Some(t) = &self.0 {
            t.store(now, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_cell_is_seen_by_its_clones_and_the_default_by_none() {
        let p = Progress::shared();
        let q = p.clone();
        q.set(42);
        assert_eq!(p.reached(), Some(42));
        let none = Progress::default();
        none.set(7);
        assert_eq!(none.reached(), None);
    }
}
