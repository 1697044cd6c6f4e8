//! Disaggregated memory: passive memory nodes serving one-sided verbs
//! (OOCC §II.A, §VIII.A "Implementation"; FORD).
//!
//! There is no RDMA NIC on our machines, so the disaggregated architecture is
//! built from the engine's own parts. A *memory node* ([`memory`]) is the
//! server role of a shard: it holds the shard's records in fixed-size slots
//! of a hash-addressed region ([`region`]) and serves only the verbs of
//! [`verbs`]: READ, WRITE, CAS and FAA. It runs no protocol logic: every
//! decision is taken by the coordinators on the compute nodes (the client
//! hosts), which address records directly through a per-machine address
//! cache and read a whole bucket only on a miss.
//!
//! Ordering guarantees (what RDMA reliable connections give and the
//! protocols rely on, §V):
//! * the verbs of one batch (one doorbell) are applied in order, so a READ or
//!   CAS sees every earlier verb of the same batch;
//! * a WRITE covering a slot's data and its lock word (the lock is the slot's
//!   last word) is applied at once: a reader never sees the lock released
//!   before the data ("write unlock", §V). RDMA gives only increasing address
//!   order; our slot writes are atomic, which implies it.
//!
//! Coordinators wait for a batch's answer before sending anything that must
//! be ordered after it, so no ordering across batches is needed.

pub mod client;
pub mod codec;
pub mod memory;
pub mod region;
pub mod verbs;

pub use memory::{MemoryNode, NicCosts};
pub use region::{Addr, Geometry, RegionConfig};
pub use verbs::{Msg, SlotImage, Verb, VerbResult};
