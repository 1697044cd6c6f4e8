//! The participant log of the layered baselines: the shard's Multi-Paxos
//! log ([`Replica`]) behind the [`ParticipantLog`] hook.

use crate::paxos::{Output, PaxosConfig, PaxosMsg, Replica, Slot};
use crate::twopc::log::{LogEvent, LogRecord, ParticipantLog, Serving};
use crate::twopc::Msg;
use bytes::Bytes;
use std::collections::VecDeque;
use tessera_core::ids::{NodeId, TimerId};
use tessera_core::node::Ctx;
use tessera_core::protocol::ServerEnv;

/// How the shards' Paxos groups run.
#[derive(Clone, Debug, Default)]
pub struct PaxosLogConfig {
    pub paxos: PaxosConfig,
}

/// A participant log replicated by the shard's Paxos group.
pub struct PaxosLog {
    replica: Replica<LogRecord>,
    me: NodeId,
    events: VecDeque<LogEvent>,
    /// Slots of the snapshots asked for and not yet taken, in order.
    snapshot_due: VecDeque<Slot>,
}

impl PaxosLog {
    /// Move the replica's outputs into our event queue.
    fn pump(&mut self) {
        while let Some(out) = self.replica.poll_output() {
            match out {
                Output::Chosen { batch, .. } => {
                    self.events.extend(batch.into_iter().map(LogEvent::Chosen));
                }
                Output::Restore(s) => self.events.push_back(LogEvent::Restore(s.data)),
                Output::SnapshotDue { slot } => {
                    self.snapshot_due.push_back(slot);
                    self.events.push_back(LogEvent::SnapshotDue);
                }
                Output::Leading { .. } => self.events.push_back(LogEvent::Leading),
                Output::Following { leader } => {
                    self.events.push_back(LogEvent::Following { leader })
                }
            }
        }
    }

    pub fn replica(&self) -> &Replica<LogRecord> {
        &self.replica
    }
}

impl ParticipantLog for PaxosLog {
    type Config = PaxosLogConfig;

    fn open(config: &PaxosLogConfig, env: &ServerEnv) -> Self {
        let group = env.topology.shards[env.shard.0 as usize].replicas.clone();
        PaxosLog {
            replica: Replica::new(config.paxos.clone(), env.me, group, &env.recovered),
            me: env.me,
            events: VecDeque::new(),
            snapshot_due: VecDeque::new(),
        }
    }

    fn start(&mut self, ctx: &mut Ctx<Msg>) {
        self.replica.start(ctx);
        self.pump();
    }

    fn append(&mut self, ctx: &mut Ctx<Msg>, rec: LogRecord) {
        if let Err(e) = self.replica.propose(ctx, rec) {
            // `serving` said yes in this very step; a proposal that is
            // refused is simply never chosen, like one lost to a new leader.
            tracing::warn!(leader = ?e.leader, "layered: proposal refused");
        }
        self.pump();
    }

    fn poll(&mut self) -> Option<LogEvent> {
        self.pump();
        self.events.pop_front()
    }

    fn serving(&self) -> Serving {
        if self.replica.is_ready_leader() {
            Serving::Yes
        } else if self.replica.leader() == Some(self.me) || self.replica.campaigning() {
            Serving::NotYet
        } else {
            Serving::Elsewhere(self.replica.leader())
        }
    }

    fn single_copy(&self) -> bool {
        false
    }

    fn in_order(&self) -> bool {
        false
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: PaxosMsg<LogRecord>) {
        self.replica.on_message(ctx, from, msg);
        self.pump();
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) -> bool {
        let mine = self.replica.on_timer(ctx, id);
        self.pump();
        mine
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) -> bool {
        let mine = self.replica.on_persisted(ctx, token);
        self.pump();
        mine
    }

    fn compact(&mut self, ctx: &mut Ctx<Msg>, state: Bytes) {
        if let Some(slot) = self.snapshot_due.pop_front() {
            self.replica.compact(ctx, slot, state);
        }
    }
}
