//! The epoch manager (COCO §3.1): one coordinator node commits the
//! transactions of an epoch together, with one 2PC per epoch.
//!
//! Every `epoch` of time the manager asks every server to prepare the open
//! epoch (**EpochPrepare**). A server moves its own current epoch past it at
//! once, waits until every transaction it tagged with that epoch (or an
//! earlier one) has finished and every write of those epochs is replicated,
//! forces its redo log of the epoch to disk and answers **EpochPrepared**.
//! With every answer in, the manager forces a commit record and announces
//! **EpochCommit** to the servers and the client hosts; client hosts release
//! the results of that epoch's transactions. Aborted transactions simply
//! never reach write-back: they hold no epoch up.
//!
//! Failures (§3.2): a server that has not prepared the epoch within
//! `timeout` (crashed, cut off, or too slow) aborts it — failure points
//! 1–4 of Fig. 1. Each such abort doubles the deadline of the next prepare
//! (up to [`MAX_BACKOFF`] times `timeout`), and each commit halves it
//! again (down to `timeout`), as TCP backs off its retransmission timer: a
//! deadline that every prepare misses — servers that are slow, not
//! failed, such as starved threads on a loaded machine — would otherwise
//! abort every epoch and commit nothing, each abort adding re-runs to
//! the next epoch. Once the commit record is being forced (points 5–9) the
//! epoch commits whatever happens. The manager sends **EpochAbort** for the
//! epoch and the one the servers already moved on to; every server reverts
//! their writes (see [`super::undo`]), drops their locks and acknowledges,
//! and client hosts report their transactions aborted, to be re-run. No
//! epoch is prepared until every server has acknowledged the abort. Each
//! later **EpochCommit** lists the aborted ranges, so a client host that
//! missed the abort never releases a result of an aborted epoch.
//!
//! Crashes (§3.2, recovery in [`super::redo`]): the manager forces an
//! abort record before it prepares again, and a commit record before
//! **EpochCommit**. A restarted server lost the writes of the epochs it had
//! not prepared, so it asks the manager to **Rejoin**: the manager aborts
//! the open epochs (extending an abort in progress) and, once that abort
//! is durable, answers **EpochStatus** with the last committed epoch and
//! every aborted range, from which the server replays its log. A restarted
//! manager aborts the epoch after the last one it committed or aborted,
//! and the one servers may have moved on to, before anything else.
//!
//! The barrier (`CocoConfig::barrier`, off by default): in COCO a
//! participant "prepares to execute transactions from the next epoch" only
//! once the commit reaches it (§3.1), and "the system uses a global
//! barrier" at each epoch commit (§7.7; the authors' workers stop at the
//! epoch's end, finish the transaction in hand and wait until every node
//! has replicated and acknowledged before the next epoch starts). With it
//! the manager also sends **EpochPrepare** to the client hosts, which then
//! start no transaction until that epoch's **EpochCommit** (or an
//! **EpochAbort**); without it they go on across the boundary, and only
//! servers see the prepare.
//!
//! The manager lives on shard 0's first replica (the topology has no
//! dedicated role for it); its messages to its own node are delivered
//! locally by the server.

use super::msg::Msg;
use tessera_core::ids::{NodeId, Time};

/// The prepare deadline grows to at most this many times the configured
/// timeout after consecutive timed-out epochs.
pub const MAX_BACKOFF: Time = 16;

pub struct EpochManager {
    /// The epoch being prepared, or the next one to prepare.
    epoch: u64,
    servers: Vec<NodeId>,
    clients: Vec<NodeId>,
    /// Servers that have not yet answered the prepare in progress.
    waiting: Vec<NodeId>,
    preparing: bool,
    /// Waiting for the commit record to be durable.
    committing: bool,
    /// When the prepare in progress started, and when it was last sent.
    started_at: Time,
    sent_at: Time,
    /// A prepare still unanswered this long aborts the epoch...
    timeout: Time,
    /// ...this long, after consecutive timed-out epochs (see the module
    /// documentation).
    deadline: Time,
    /// The abort in progress: its range, servers yet to acknowledge, and
    /// whether its abort record is durable (it ends with both).
    aborting: Option<(u64, u64, Vec<NodeId>, bool)>,
    /// Every range `[from, to)` of epochs aborted so far.
    aborted: Vec<(u64, u64)>,
    /// The last epoch whose commit record is durable.
    committed: u64,
    /// Restarted servers waiting for an [`Msg::EpochStatus`].
    rejoining: Vec<NodeId>,
    /// Stop the client hosts at each prepare (the barrier, see the module
    /// documentation).
    barrier: bool,
}

/// What the manager asks its host server to do.
pub enum Action {
    Send(NodeId, Msg),
    /// Force the commit record of `epoch`, then call
    /// [`EpochManager::commit_durable`].
    PersistCommit(u64),
    /// Force the abort record of `[epoch, next)`, then call
    /// [`EpochManager::abort_durable`].
    PersistAbort(u64, u64),
}

impl EpochManager {
    pub fn new(servers: Vec<NodeId>, clients: Vec<NodeId>, timeout: Time) -> Self {
        EpochManager {
            epoch: 1,
            servers,
            clients,
            barrier: false,
            waiting: Vec::new(),
            preparing: false,
            committing: false,
            started_at: 0,
            sent_at: 0,
            timeout,
            deadline: timeout,
            aborting: None,
            aborted: Vec::new(),
            committed: 0,
            rejoining: Vec::new(),
        }
    }

    /// Restarted from the log: `committed` is the last epoch with a
    /// durable commit record, `aborted` every durable abort. Call
    /// [`EpochManager::abort_open`] next.
    ///
    /// Every epoch after `committed` is aborted or open, and an abort in
    /// progress at the crash may not have reached every server: the
    /// restart's abort covers them all, from `committed + 1` on, as if it
    /// extended that abort (reverting a range twice is a no-op).
    /// Stop the client hosts at every prepare (see the module documentation).
    pub fn with_barrier(mut self, on: bool) -> Self {
        self.barrier = on;
        self
    }

    pub fn restart(&mut self, committed: u64, aborted: Vec<(u64, u64)>) {
        let floor = aborted.iter().map(|r| r.1).max().unwrap_or(0);
        self.epoch = (committed + 1).max(floor);
        self.committed = committed;
        self.aborted = aborted;
        self.aborting = Some((committed + 1, self.epoch, Vec::new(), true));
    }

    /// The range [`EpochManager::abort_open`] aborts now.
    pub fn open_range(&self) -> (u64, u64) {
        match &self.aborting {
            Some((from, ..)) => (*from, self.epoch + 2),
            None => (self.epoch, self.epoch + 2),
        }
    }

    /// Abort the epochs a crash may have left open (after a restart of
    /// the manager itself).
    pub fn abort_open(&mut self, now: Time, out: &mut Vec<Action>) {
        self.abort(now, out);
    }

    /// A restarted server asks to rejoin (§3.2): abort the open epochs
    /// (whose writes it lost) and answer once that abort is durable; a
    /// commit being forced finishes first.
    pub fn rejoin(&mut self, from: NodeId, now: Time, out: &mut Vec<Action>) {
        if !self.rejoining.contains(&from) {
            self.rejoining.push(from);
        }
        if !self.committing {
            self.abort(now, out);
        }
    }

    /// No abort is in progress: every server has reverted the aborted
    /// epochs (§3.2) and the abort record is durable. Until then a server
    /// that has not heard of the abort (its **EpochAbort** lost, the
    /// manager resending it) still holds writes its replicas have reverted.
    pub fn settled(&self) -> bool {
        self.aborting.is_none()
    }

    /// Every range of epochs aborted so far.
    pub fn aborted(&self) -> &[(u64, u64)] {
        &self.aborted
    }

    /// The epoch timer fired: start preparing the open epoch unless the
    /// previous one is still in progress (a slow epoch delays the next).
    pub fn tick(&mut self, now: Time, out: &mut Vec<Action>) {
        if self.preparing || self.committing || self.aborting.is_some() {
            return;
        }
        self.preparing = true;
        self.waiting = self.servers.clone();
        self.started_at = now;
        self.sent_at = now;
        let stopped: &[NodeId] = if self.barrier { &self.clients } else { &[] };
        for &s in self.servers.iter().chain(stopped) {
            out.push(Action::Send(s, Msg::EpochPrepare { epoch: self.epoch }));
        }
    }

    /// Resend the prepare (or the abort) to servers that did not answer
    /// within `rto`; abort the epoch when its prepare is overdue, and give
    /// the next one longer.
    pub fn retransmit(&mut self, now: Time, rto: Time, out: &mut Vec<Action>) {
        if self.preparing && now.saturating_sub(self.started_at) >= self.deadline {
            let cap = self.timeout.saturating_mul(MAX_BACKOFF);
            self.deadline = self.deadline.saturating_mul(2).min(cap);
            self.abort(now, out);
            return;
        }
        if now.saturating_sub(self.sent_at) < rto {
            return;
        }
        if let Some((epoch, next, waiting, _)) = &self.aborting {
            self.sent_at = now;
            for &s in waiting {
                out.push(Action::Send(
                    s,
                    Msg::EpochAbort {
                        epoch: *epoch,
                        next: *next,
                    },
                ));
            }
        } else if self.preparing {
            self.sent_at = now;
            for &s in &self.waiting {
                out.push(Action::Send(s, Msg::EpochPrepare { epoch: self.epoch }));
            }
        }
    }

    /// Abort the epoch being prepared (or the open one) and the one after
    /// it, which servers entered when the prepare reached them. An abort
    /// in progress is extended: its range grows to cover the new epochs,
    /// and every server must acknowledge the larger range.
    fn abort(&mut self, now: Time, out: &mut Vec<Action>) {
        let (epoch, next) = self.open_range();
        tracing::debug!(epoch, next, waiting = ?self.waiting, "epoch abort");
        self.preparing = false;
        self.aborted.push((epoch, next));
        self.sent_at = now;
        self.aborting = Some((epoch, next, self.servers.clone(), false));
        self.epoch = next;
        out.push(Action::PersistAbort(epoch, next));
        for &n in self.servers.iter().chain(&self.clients) {
            out.push(Action::Send(n, Msg::EpochAbort { epoch, next }));
        }
    }

    /// The abort record of `[epoch, next)` is durable: answer the servers
    /// that asked to rejoin (they must never see an abort a restarted
    /// manager could forget), and end the abort if all acknowledged it.
    /// Until then no epoch is prepared, so a manager that crashes first
    /// restarts in the very same range (see [`EpochManager::restart`]).
    pub fn abort_durable(&mut self, epoch: u64, next: u64, out: &mut Vec<Action>) {
        let Some((e, n, waiting, durable)) = &mut self.aborting else {
            return;
        };
        if (*e, *n) != (epoch, next) {
            return;
        }
        *durable = true;
        if waiting.is_empty() {
            self.aborting = None;
        }
        for s in std::mem::take(&mut self.rejoining) {
            let msg = Msg::EpochStatus {
                committed: self.committed,
                aborted: self.aborted.clone(),
            };
            out.push(Action::Send(s, msg));
        }
    }

    pub fn abort_acknowledged(&mut self, from: NodeId, epoch: u64, next: u64) {
        if let Some((e, n, waiting, durable)) = &mut self.aborting {
            if (*e, *n) == (epoch, next) {
                waiting.retain(|n| *n != from);
                if waiting.is_empty() && *durable {
                    self.aborting = None;
                }
            }
        }
    }

    pub fn prepared(&mut self, from: NodeId, epoch: u64, out: &mut Vec<Action>) {
        if !self.preparing || epoch != self.epoch {
            return;
        }
        self.waiting.retain(|n| *n != from);
        if self.waiting.is_empty() {
            self.preparing = false;
            self.committing = true;
            out.push(Action::PersistCommit(self.epoch));
        }
    }

    /// The commit record of the epoch is durable: announce it.
    pub fn commit_durable(&mut self, epoch: u64, now: Time, out: &mut Vec<Action>) {
        if !self.committing || epoch != self.epoch {
            return;
        }
        self.committing = false;
        self.committed = epoch;
        self.deadline = (self.deadline / 2).max(self.timeout);
        for &n in self.servers.iter().chain(&self.clients) {
            let aborted = self.aborted.clone();
            out.push(Action::Send(n, Msg::EpochCommit { epoch, aborted }));
        }
        self.epoch += 1;
        if !self.rejoining.is_empty() {
            self.abort(now, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 110 of the cut-off-server seeds: a checked run stopped (its
    /// clients idle) while one backup's **EpochAbort** was lost and not yet
    /// resent, and that backup still held the aborted epoch's writes.
    #[test]
    fn an_abort_is_unsettled_until_every_server_acknowledged_it() {
        let servers = vec![NodeId(0), NodeId(1), NodeId(2)];
        let mut m = EpochManager::new(servers, vec![NodeId(9)], 10);
        let mut out = Vec::new();
        m.tick(0, &mut out);
        assert!(m.settled(), "a prepare in progress reverts nothing");
        m.retransmit(10, 5, &mut out);
        assert_eq!(m.aborted(), &[(1, 3)]);
        assert!(!m.settled());
        m.abort_durable(1, 3, &mut out);
        m.abort_acknowledged(NodeId(0), 1, 3);
        m.abort_acknowledged(NodeId(2), 1, 3);
        assert!(!m.settled(), "server 1 has not reverted the epochs");
        out.clear();
        m.retransmit(15, 5, &mut out);
        assert!(matches!(
            out[..],
            [Action::Send(
                NodeId(1),
                Msg::EpochAbort { epoch: 1, next: 3 }
            )]
        ));
        m.abort_acknowledged(NodeId(1), 1, 3);
        assert!(m.settled());
    }

    /// Run epochs whose every server prepares `slow` after the prepare is
    /// sent (and acknowledges aborts at once) for `until`; return the
    /// epochs committed and aborted.
    fn run_slow_servers(timeout: Time, slow: Time, until: Time) -> (u64, usize) {
        let servers = vec![NodeId(0), NodeId(1), NodeId(2)];
        let mut m = EpochManager::new(servers.clone(), vec![NodeId(9)], timeout);
        let (mut now, mut out) = (0, Vec::new());
        let mut sent: Option<(u64, Time)> = None;
        while now < until {
            m.tick(now, &mut out);
            m.retransmit(now, timeout / 5, &mut out);
            for a in std::mem::take(&mut out) {
                match a {
                    Action::Send(_, Msg::EpochPrepare { epoch }) => {
                        sent.get_or_insert((epoch, now));
                    }
                    Action::Send(s, Msg::EpochAbort { epoch, next }) => {
                        sent = None;
                        m.abort_acknowledged(s, epoch, next);
                    }
                    Action::PersistAbort(e, n) => m.abort_durable(e, n, &mut out),
                    Action::PersistCommit(e) => m.commit_durable(e, now, &mut out),
                    Action::Send(..) => {}
                }
            }
            if let Some((epoch, at)) = sent {
                if now >= at + slow {
                    sent = None;
                    for &s in &servers {
                        m.prepared(s, epoch, &mut out);
                    }
                }
            }
            now += 1;
        }
        (m.committed, m.aborted().len())
    }

    /// Starved servers (a loaded machine running `local`) prepare every
    /// epoch, 3x slower than the deadline: with a fixed deadline every
    /// epoch aborted and none committed; the doubled deadline lets the
    /// third try commit, and a commit halves it again.
    #[test]
    fn servers_slower_than_the_prepare_deadline_still_commit_epochs() {
        let (committed, aborted) = run_slow_servers(50, 150, 5_000);
        assert!(committed >= 10, "{committed} epochs committed");
        assert!(aborted >= 10, "the deadline comes back after a commit");
        let (committed, aborted) = run_slow_servers(50, 10, 5_000);
        assert!(committed > 100 && aborted == 0, "{committed} / {aborted}");
    }

    /// With the barrier the prepare also goes to the client hosts, which
    /// stop until the commit; without it only servers get it.
    #[test]
    fn the_barrier_sends_the_prepare_to_client_hosts_too() {
        let servers = vec![NodeId(0), NodeId(1)];
        for barrier in [false, true] {
            let mut m =
                EpochManager::new(servers.clone(), vec![NodeId(9)], 10).with_barrier(barrier);
            let mut out = Vec::new();
            m.tick(0, &mut out);
            let to: Vec<NodeId> = out
                .iter()
                .filter_map(|a| match a {
                    Action::Send(n, Msg::EpochPrepare { epoch: 1 }) => Some(*n),
                    _ => None,
                })
                .collect();
            let mut want = servers.clone();
            if barrier {
                want.push(NodeId(9));
            }
            assert_eq!(to, want);
        }
    }
}
