//! The memory node: a passive server of one-sided verbs.
//!
//! It answers a connection request with its region's geometry and applies
//! each batch of verbs in order ([`super::region::Region::apply`]). It never
//! looks at what a lock word means. Log records are kept in a log area per
//! sender (the latest one; recovery from them is not implemented).
//!
//! Costs: a real memory node's CPU does nothing; its NIC's throughput bounds
//! the verbs. In the simulator each verb charges the NIC time of
//! [`NicCosts`] (atomics much slower than READs, as OOCC Fig. 2 measures).

use super::region::{Region, RegionConfig};
use super::verbs::{LogRecord, Msg, SlotWrite, Verb, VerbResult};
use tessera_core::ids::{NodeId, Time, TimerId};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::FastMap;

/// NIC time per verb (simulator only; real runtimes pay real time).
#[derive(Clone, Debug)]
pub struct NicCosts {
    pub read: Time,
    /// Extra per slot beyond the first of a READ (bucket reads).
    pub per_slot: Time,
    pub write: Time,
    /// CAS and FAA: atomics serialize in the NIC (Fig. 2: a fraction of the
    /// READ rate).
    pub atomic: Time,
}

impl Default for NicCosts {
    fn default() -> Self {
        NicCosts {
            read: 20,
            per_slot: 5,
            write: 25,
            atomic: 120,
        }
    }
}

pub struct MemoryNode {
    region: Region,
    /// The region's records as a store, for the harness's end-of-run checks
    /// (not read by any verb).
    view: Store,
    costs: NicCosts,
    logs: FastMap<NodeId, LogRecord>,
    reads: u64,
    writes: u64,
    atomics: u64,
}

impl MemoryNode {
    pub fn new(env: ServerEnv, layout: RegionConfig, costs: NicCosts) -> Self {
        let region = Region::load(&env.store, layout);
        MemoryNode {
            region,
            view: env.store,
            costs,
            logs: tessera_core::fast_map(),
            reads: 0,
            writes: 0,
            atomics: 0,
        }
    }

    fn cost(&self, v: &Verb) -> Time {
        let c = &self.costs;
        match v {
            Verb::Read { len, .. } => c.read + c.per_slot * (*len as Time).saturating_sub(1),
            Verb::Write { .. } | Verb::Log(_) => c.write,
            Verb::Cas { .. } | Verb::Faa { .. } => c.atomic,
        }
    }

    fn serve(&mut self, from: NodeId, v: Verb) -> VerbResult {
        match &v {
            Verb::Read { .. } => self.reads += 1,
            Verb::Write { .. } | Verb::Log(_) => self.writes += 1,
            Verb::Cas { .. } | Verb::Faa { .. } => self.atomics += 1,
        }
        let r = self.region.apply(&v);
        match v {
            Verb::Write {
                addr,
                data: SlotWrite::Data { .. } | SlotWrite::DataAndLock { .. },
            } if r == VerbResult::Written => {
                if let (Some(key), Some((value, version))) =
                    (self.region.key_at(addr), self.region.value_at(addr))
                {
                    self.view.install(key, value.clone(), version);
                }
            }
            Verb::Log(rec) => {
                self.logs.insert(from, rec);
            }
            _ => {}
        }
        r
    }
}

impl Node<Msg> for MemoryNode {
    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Connect => ctx.send(from, Msg::Connected(self.region.geometry())),
            Msg::Batch { id, ack, verbs } => {
                let cost: Time = verbs.iter().map(|v| self.cost(v)).sum();
                ctx.charge(cost);
                let results: Vec<VerbResult> =
                    verbs.into_iter().map(|v| self.serve(from, v)).collect();
                if ack {
                    ctx.send(from, Msg::Done { id, results });
                }
            }
            Msg::Connected(_) | Msg::Done { .. } | Msg::Lease(_) => {
                tracing::warn!(?from, "memory node got a message for compute nodes");
            }
        }
    }

    fn on_timer(&mut self, _ctx: &mut Ctx<Msg>, _id: TimerId) {}

    fn store(&self) -> Option<&Store> {
        Some(&self.view)
    }

    fn take_report(&mut self) -> NodeReport {
        NodeReport {
            client: None,
            counters: vec![
                ("mem_reads", std::mem::take(&mut self.reads)),
                ("mem_writes", std::mem::take(&mut self.writes)),
                ("mem_atomics", std::mem::take(&mut self.atomics)),
            ],
            ..NodeReport::default()
        }
    }
}
