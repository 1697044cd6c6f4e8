//! OOCC §VIII.B's TATP and TAOBench-like workloads on the memory-node
//! protocols (OOCC, FORD-style OCC, DrTM, DSLR) under the simulator's RDMA
//! preset, with held-back messages and clock drift within OOCC's bound:
//! small populations so that the NURand / zipf hot records conflict, every
//! history checked for strict serializability, and every transaction type
//! committed somewhere over the seeds.
//!
//! `TESSERA_SEEDS` sets the number of seeds (default 20).

mod rdma;

use std::collections::BTreeSet;
use tessera_core::ids::MS;
use tessera_harness::{BenchSpec, WorkloadSpec};
use tessera_workloads::{TaoBenchConfig, TatpConfig};

fn seeds() -> u64 {
    rdma::seeds(20)
}

fn tatp() -> WorkloadSpec {
    WorkloadSpec::Tatp(TatpConfig {
        subscribers: 200,
        partitions: 2,
        ro_keys: 2,
    })
}

fn taobench() -> WorkloadSpec {
    WorkloadSpec::TaoBench(TaoBenchConfig {
        objects: 2_000,
        edges: 1_000,
        partitions: 2,
        // More writes than TAOBench's 5%, so that the seeds conflict.
        read_only: 0.8,
        ..TaoBenchConfig::default()
    })
}

fn spec(protocol: &str, workload: WorkloadSpec, seed: u64) -> BenchSpec {
    rdma::spec(protocol, workload, seed, 3 * MS)
}

fn replay(protocol: &str, workload: &str, seed: u64) -> String {
    let w = match workload {
        "tatp" => "tatp --subscribers 200",
        _ => "taobench --objects 2000 --edges 1000 (read_only 0.8)",
    };
    format!(
        "tessera bench --runtime sim --net rdma --reorder 0.05 --drift-ppm 1000 --protocol {protocol} \
         --workload {w} --shards 2 --clients 16 --duration 3ms --warmup 500us --cooldown 500us \
         --seed {seed} --check (reorder delay 30us)"
    )
}

/// Run the seeds; return the transaction types that committed.
fn seed_loop(protocol: &str, workload: fn() -> WorkloadSpec) -> BTreeSet<String> {
    let mut types = BTreeSet::new();
    for seed in 0..seeds() {
        let s = spec(protocol, workload(), seed);
        let name = s.workload.name();
        let out = rdma::run_checked(&s, &replay(protocol, name, seed));
        assert!(
            out.row.committed > 100,
            "seed {seed}: {} committed\nreplay: {}",
            out.row.committed,
            replay(protocol, name, seed)
        );
        for t in &out.row.by_type {
            if t.commit_rate > 0.0 {
                types.insert(t.name.clone());
            }
        }
    }
    types
}

fn tatp_types(protocol: &str) {
    let types = seed_loop(protocol, tatp);
    for k in tessera_workloads::tatp::TatpKind::ALL {
        assert!(
            types.contains(k.name()),
            "{protocol}: no {} committed: {types:?}",
            k.name()
        );
    }
}

fn taobench_types(protocol: &str) {
    let types = seed_loop(protocol, taobench);
    assert!(
        types.contains("tao_read") && types.contains("tao_write"),
        "{types:?}"
    );
}

#[test]
fn tatp_oocc() {
    tatp_types("oocc");
}

#[test]
fn tatp_ford_occ() {
    tatp_types("ford-occ");
}

#[test]
fn tatp_drtm() {
    tatp_types("drtm");
}

#[test]
fn tatp_dslr() {
    tatp_types("dslr");
}

#[test]
fn taobench_oocc() {
    taobench_types("oocc");
}

#[test]
fn taobench_ford_occ() {
    taobench_types("ford-occ");
}

#[test]
fn taobench_drtm() {
    taobench_types("drtm");
}

#[test]
fn taobench_dslr() {
    taobench_types("dslr");
}
