//! Debug measurements of what a replica's dependency lists hold (issue 6:
//! the three-site zipf 0.9 point outgrew memory in them). Collected only
//! when the `tessera_protocols::janus::stats` target logs at debug level,
//! and never touching the run (no time, no randomness, no messages): rows
//! stay byte-identical with it on or off.

use tracing::Level;

/// Sizes seen since the last line, by what carried them.
#[derive(Default)]
pub(super) struct DepStats {
    on: bool,
    /// Dependencies per PreAccept-OK sent, Accept and Commit received.
    pub pre_accept_ok: Vec<u32>,
    pub accept: Vec<u32>,
    pub commit: Vec<u32>,
    /// Members of the component of each transaction executed here.
    pub scc: Vec<u32>,
    /// Log bytes written, by record kind ([`super::wal`]'s tags 1–6).
    pub log_bytes: [u64; 7],
}

impl DepStats {
    pub fn new() -> Self {
        DepStats {
            on: tracing::enabled!(target: "tessera_protocols::janus::stats", Level::DEBUG),
            ..DepStats::default()
        }
    }

    pub fn on(&self) -> bool {
        self.on
    }

    /// `(p50, p99, max, count)` of `v`, which is emptied.
    pub fn take(v: &mut Vec<u32>) -> (u32, u32, u32, usize) {
        if v.is_empty() {
            return (0, 0, 0, 0);
        }
        v.sort_unstable();
        let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
        let r = (q(0.5), q(0.99), v[v.len() - 1], v.len());
        v.clear();
        r
    }
}
