//! The simulated deployment the memory-node seed tests share
//! (`oocc_seeds.rs`, `oocc_workload_seeds.rs`, `oocc_tpcc_seeds.rs`): the
//! RDMA preset with messages held back past the lease (5% by 30 µs) and
//! clock drift within OOCC's bound (1000 ppm, §VII.B), 16 clients, every
//! history checked.

use tessera_core::ids::{Time, MS, US};
use tessera_harness::{run_bench, BenchOutcome, BenchSpec, RuntimeKind, SimConfig, WorkloadSpec};

/// `TESSERA_SEEDS`, or `default`.
pub fn seeds(default: u64) -> u64 {
    std::env::var("TESSERA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A checked run of `duration` (half a millisecond trimmed at each end).
pub fn spec(protocol: &str, workload: WorkloadSpec, seed: u64, duration: Time) -> BenchSpec {
    let mut s = BenchSpec::new(RuntimeKind::Sim, protocol, workload);
    s.seed = seed;
    s.clients = 16;
    s.duration = duration;
    s.warmup = MS / 2;
    s.cooldown = MS / 2;
    s.check = true;
    s.sim = SimConfig {
        reorder: 0.05,
        reorder_delay: 30 * US,
        drift_ppm: 1_000,
        ..SimConfig::rdma()
    };
    s
}

/// Run `s`; it must run and pass the isolation checker (else panic with
/// `replay`, the command that reproduces it).
pub fn run_checked(s: &BenchSpec, replay: &str) -> BenchOutcome {
    let out = run_bench(s)
        .unwrap_or_else(|e| panic!("{} seed {}: {e:#}\nreplay: {replay}", s.protocol, s.seed));
    let report = out.check.as_ref().expect("checked");
    assert!(
        report.ok,
        "{} seed {}: {report}\nreplay: {replay}",
        s.protocol, s.seed
    );
    out
}
