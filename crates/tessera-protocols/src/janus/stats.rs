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
    pub msgs: MsgStats,
}

/// Counts since the last line of what costs a replica CPU (issue 6:
/// messages per transaction grew with the clients in TPC-C).
#[derive(Default)]
pub(super) struct MsgStats {
    /// Messages received and sent, by [`super::msg::KINDS`]: each received
    /// one is an event, the simulator's unit of server CPU.
    pub rx: [u64; 19],
    pub tx: [u64; 19],
    /// Steps that were not messages: timers and log syncs.
    pub other_events: u64,
    /// Inquires started (Algorithm 4, l. 45), by why: a STARTED ancestor
    /// met by the wait and sent at once / left to the sweep (it involves
    /// this replica), of those sent at once the ancestors that involve this
    /// shard (the paper waits for their Commit instead), and those asked by
    /// the execution's walk (an unknown member or blocker).
    pub ask_wait_now: u64,
    pub ask_wait_later: u64,
    pub ask_wait_now_involving_me: u64,
    pub ask_execute: u64,
    /// Inquires received about a transaction not committed here (parked),
    /// and answers received for one already committed here.
    pub inquire_parked: u64,
    pub inquire_ok_redundant: u64,
    /// Dependencies carried by the InquireOks received.
    pub inquire_ok_deps: u64,
    /// Settles that blocked, and the STARTED ancestors they named.
    pub blocked: u64,
    pub blocked_ancestors: u64,
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
