//! Debug measurements of what a replica's dependency lists hold (issue 6:
//! the three-site zipf 0.9 point outgrew memory in them). Collected only
//! when the `tessera_protocols::janus::stats` target logs at debug level,
//! and never touching the run (no time, no randomness, no messages): rows
//! stay byte-identical with it on or off.

use tessera_core::ids::{NodeId, Time, TxnId};
use tessera_core::FastMap;
use tracing::Level;

/// Whether the per-transaction event lines are wanted (issue 6, the three-site Inquire gap): who
/// learnt which commit when and from whom, when each replica decided and
/// executed each transaction, and the coordinators' start, commit (with
/// its dependencies) and answer, for offline analysis
/// (`measurements/2026-11-29/janus25c-*.py`). Logged only when this
/// target is at debug level; like [`DepStats`] they touch no time,
/// randomness or message.
pub(super) fn trace_on() -> bool {
    tracing::enabled!(target: TRACE, Level::DEBUG)
}

/// The log target of the per-transaction event lines ([`trace_on`]).
pub(super) const TRACE: &str = "tessera_protocols::janus::trace";

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
    /// Inquires (issue 6, three sites): when this replica first sent an
    /// Inquire about each transaction it asks about, and whether it has
    /// retried since; when each Inquire parked here came, by asker; when
    /// each transaction with pieces here was first known committing here.
    pub asked_at: FastMap<TxnId, (Time, bool)>,
    pub parked_at: FastMap<TxnId, Vec<(NodeId, Time)>>,
    pub committed_at: FastMap<TxnId, Time>,
}

/// Why an Inquire went ([`MsgStats::inquire_sent`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Sent {
    /// The first Inquire about a transaction (Algorithm 4, l. 45).
    First = 0,
    /// A resend after a retransmit period without an answer.
    Retry = 1,
    /// To the replica that announced the transaction or named it in a
    /// forgotten component (`via`).
    Via = 2,
}

/// Counts since the last line of what costs a replica CPU (issue 6:
/// messages per transaction grew with the clients in TPC-C).
#[derive(Default)]
pub(super) struct MsgStats {
    /// Messages received and sent, by [`super::msg::KINDS`]: each received
    /// one is an event, the simulator's unit of server CPU.
    pub rx: [u64; 20],
    pub tx: [u64; 20],
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
    /// Inquire messages sent, by [`Sent`] and by where the receiver sits:
    /// `[why][0]` on this replica's site, `[why][1]` on another.
    pub inquire_sent: [[u64; 2]; 3],
    /// InquireOks that brought a commit not known here, by the answerer's
    /// site (0 same, 1 other) and whether the Inquire had been retried;
    /// and redundant ones (commit already known) by the answerer's site.
    pub inquire_ok_new: [[u64; 2]; 2],
    pub inquire_ok_redundant_by_site: [u64; 2],
    /// Asks ended by the transaction's own Commit (or an announcement)
    /// before any InquireOk.
    pub ask_ended_otherwise: u64,
    /// µs from the first Inquire sent to the answer that brought the
    /// commit, by whether it was retried (0 no, 1 yes).
    pub ask_wait_us: [Vec<u32>; 2],
    /// µs an Inquire parked here waited for the commit, by the asker's
    /// site (0 same, 1 other).
    pub parked_us: [Vec<u32>; 2],
    /// µs from knowing a transaction with pieces here committing to
    /// executing it (Algorithm 4's wait & inquire, then Algorithm 5).
    pub commit_to_exec_us: Vec<u32>,
    /// Two-cycles met when a transaction becomes known committed here: a
    /// dependency committed here already that has it as a dependency, by
    /// the site of the committing one's coordinator and of the other's
    /// (`[a][b]`, sites 0–2; others counted as 2).
    pub two_cycles: [[u64; 3]; 3],
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

    /// `(count, mean, p50, p90, p99, max)` of `v`, which is emptied.
    pub fn spread(v: &mut Vec<u32>) -> (usize, u64, u32, u32, u32, u32) {
        if v.is_empty() {
            return (0, 0, 0, 0, 0, 0);
        }
        v.sort_unstable();
        let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
        let sum: u64 = v.iter().map(|&x| u64::from(x)).sum();
        let r = (
            v.len(),
            sum / v.len() as u64,
            q(0.5),
            q(0.9),
            q(0.99),
            v[v.len() - 1],
        );
        v.clear();
        r
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
