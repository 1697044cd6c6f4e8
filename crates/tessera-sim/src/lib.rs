//! The deterministic discrete-event simulator (DESIGN §2, runtime `sim`).
//!
//! One thread, virtual time, one event queue ordered by (time, sequence
//! number): the same deployment and seed give byte-identical runs. The
//! simulator models what makes distributed protocols hard and servers
//! saturate:
//!
//! * [`net`] — a latency matrix between sites with jitter, message loss,
//!   duplication, reordering and timed partitions;
//! * per-node CPU cost: a node handles one event at a time and each event
//!   keeps it busy for a configured time, so a loaded server queues work the
//!   way a real one does;
//! * a disk per node with fsync latency and group commit: a record becomes
//!   durable (and survives a crash) only when its flush completes;
//! * crashes and restarts: a crashed node loses its memory; on restart it is
//!   rebuilt by its factory from its durable records.
//!
//! FoundationDB and TigerBeetle's VOPR are the models: every failure is a
//! seed you can replay.

mod config;
mod disk;
pub mod net;
mod progress;
mod sim;

pub use config::{Crash, Partition, SimConfig, SimConfigError};
pub use progress::Progress;
pub use sim::{run, run_wire, SimError, Wire};
