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
//! The manager lives on shard 0's first replica (the topology has no
//! dedicated role for it); its messages to its own node are delivered
//! locally by the server.

use super::msg::Msg;
use tessera_core::ids::{NodeId, Time};

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
    sent_at: Time,
}

/// What the manager asks its host server to do.
pub enum Action {
    Send(NodeId, Msg),
    /// Force the commit record of `epoch`, then call
    /// [`EpochManager::commit_durable`].
    PersistCommit(u64),
}

impl EpochManager {
    pub fn new(servers: Vec<NodeId>, clients: Vec<NodeId>) -> Self {
        EpochManager {
            epoch: 1,
            servers,
            clients,
            waiting: Vec::new(),
            preparing: false,
            committing: false,
            sent_at: 0,
        }
    }

    /// The epoch timer fired: start preparing the open epoch unless the
    /// previous one is still in progress (a slow epoch delays the next).
    pub fn tick(&mut self, now: Time, out: &mut Vec<Action>) {
        if self.preparing || self.committing {
            return;
        }
        self.preparing = true;
        self.waiting = self.servers.clone();
        self.sent_at = now;
        for &s in &self.servers {
            out.push(Action::Send(s, Msg::EpochPrepare { epoch: self.epoch }));
        }
    }

    /// Resend the prepare to servers that did not answer within `rto`.
    pub fn retransmit(&mut self, now: Time, rto: Time, out: &mut Vec<Action>) {
        if !self.preparing || now.saturating_sub(self.sent_at) < rto {
            return;
        }
        self.sent_at = now;
        for &s in &self.waiting {
            out.push(Action::Send(s, Msg::EpochPrepare { epoch: self.epoch }));
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
    pub fn commit_durable(&mut self, epoch: u64, out: &mut Vec<Action>) {
        if !self.committing || epoch != self.epoch {
            return;
        }
        self.committing = false;
        for &n in self.servers.iter().chain(&self.clients) {
            out.push(Action::Send(n, Msg::EpochCommit { epoch }));
        }
        self.epoch += 1;
    }
}
