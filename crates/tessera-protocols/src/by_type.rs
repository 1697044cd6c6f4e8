//! Costs by transaction type (the procedure's name), reported as counters
//! named `<protocol>_<field>.<type>`: which of a workload's transactions
//! take the servers' events and where their latency goes
//! (docs/results/rococo.md, Fig. 14 at 100 clients per server; OOCC's
//! rounds and lease waits per TPC-C type, docs/results/oocc.md).
//! Measurement only: nothing reads them back.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use tessera_core::FastMap;

/// Sums per (type, field), named with the protocol's prefix.
pub(crate) struct ByType {
    prefix: &'static str,
    sums: FastMap<(&'static str, &'static str), u64>,
}

impl ByType {
    pub fn new(prefix: &'static str) -> Self {
        ByType {
            prefix,
            sums: tessera_core::fast_map(),
        }
    }

    pub fn add(&mut self, ty: &'static str, field: &'static str, n: u64) {
        *self.sums.entry((ty, field)).or_default() += n;
    }

    /// The sums as counters, in name order, and reset.
    pub fn take(&mut self) -> Vec<(&'static str, u64)> {
        let mut out: Vec<(&'static str, u64)> = std::mem::take(&mut self.sums)
            .into_iter()
            .map(|((ty, field), n)| (name(self.prefix, ty, field), n))
            .collect();
        out.sort_unstable();
        out
    }
}

/// `<prefix>_<field>.<type>` as a `&'static str` (counters are named so):
/// made once per triple and kept, so a run leaks at most one short string
/// per protocol, field and transaction type of its workload.
fn name(prefix: &'static str, ty: &'static str, field: &'static str) -> &'static str {
    type Names = HashMap<(&'static str, &'static str, &'static str), &'static str>;
    static NAMES: OnceLock<Mutex<Names>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    names
        .entry((prefix, ty, field))
        .or_insert_with(|| Box::leak(format!("{prefix}_{field}.{ty}").into_boxed_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_come_out_named_by_field_and_type() {
        let mut s = ByType::new("rococo");
        s.add("neworder", "events", 2);
        s.add("neworder", "events", 3);
        s.add("payment", "events", 1);
        assert_eq!(
            s.take(),
            [("rococo_events.neworder", 5), ("rococo_events.payment", 1)]
        );
        assert!(s.take().is_empty(), "taking resets");
    }
}
