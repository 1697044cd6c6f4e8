//! tessera-harness: turns a [`BenchSpec`] into a checked, measured run.
//!
//! * [`registry`] — the one place that maps protocol names to protocol types
//!   and their default configurations.
//! * [`spec`] — what a run is: runtime, protocol, workload, sizes, faults.
//! * [`deploy`] — builds a runtime deployment (servers, client hosts) for a
//!   protocol type.
//! * [`run`] — runs a spec on its runtime, aggregates the client reports
//!   into a [`ResultRow`], checks isolation.
//! * [`tcp`] — the `tcp` runtime's server processes and bench driver.
//! * [`faults`] — random fault plans for simulator seeds.
//! * [`sites`] — site presets (one data center, Janus' three regions) and
//!   the placement of replicas and clients on them.
//! * [`experiment`] — named, checked-in sweeps.

pub mod deploy;
pub mod experiment;
pub mod faults;
pub mod registry;
pub mod result;
pub mod run;
pub mod sites;
pub mod spec;
pub mod sweep;
pub mod tcp;

pub use result::ResultRow;
pub use run::{check_workload, run_bench, BenchOutcome};
pub use spec::{BenchSpec, RuntimeKind, SpecError, WorkloadSpec};
pub use tessera_sim::{Progress, SimConfig};
