//! NOCC under the simulator: many seeds with contention and faults, with
//! one and with two switches (NOCC §2 "Expected Deployment": a switch that
//! does not see all traffic must stay correct), every history checked.
//!
//! `TESSERA_SEEDS` sets the number of seeds (default 200).

use tessera_core::ids::MS;
use tessera_harness::deploy::topology;
use tessera_harness::faults::random_plan;
use tessera_harness::{run_bench, BenchSpec, RuntimeKind, WorkloadSpec};
use tessera_workloads::CounterConfig;

fn spec(protocol: &str, seed: u64) -> BenchSpec {
    let workload = WorkloadSpec::Counter(CounterConfig {
        keys: 10,
        write_ratio: 0.5,
        zipf_theta: 0.99,
    });
    let mut s = BenchSpec::new(RuntimeKind::Sim, protocol, workload);
    s.seed = seed;
    s.clients = 16;
    s.switches = Some(1 + (seed % 2) as u32);
    s.duration = 300 * MS;
    s.warmup = 30 * MS;
    s.cooldown = 20 * MS;
    s.check = true;
    s.sim = random_plan(seed, &topology(&s), s.duration);
    s
}

#[test]
fn nocc_is_serializable_under_faults_with_one_and_two_switches() {
    let seeds: u64 = std::env::var("TESSERA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let (mut switch_aborts, mut store_aborts) = (0, 0);
    for seed in 0..seeds {
        let s = spec("nocc", seed);
        let replay = format!(
            "tessera bench --runtime sim --protocol nocc --workload counter --keys 10 \
             --write-ratio 0.5 --zipf 0.99 --clients 16 --switches {} --duration 300ms \
             --warmup 30ms --cooldown 20ms --seed {seed} --faults --check",
            s.switches.unwrap()
        );
        let out = run_bench(&s).unwrap_or_else(|e| panic!("seed {seed}: {e:#}\nreplay: {replay}"));
        let report = out.check.as_ref().expect("checked");
        assert!(report.ok, "seed {seed}: {report}\nreplay: {replay}");
        assert!(
            out.row.committed > 0,
            "seed {seed}: nothing committed\nreplay: {replay}"
        );
        switch_aborts += out.row.counters.get("switch_aborts").copied().unwrap_or(0);
        store_aborts += out.row.counters.get("store_aborts").copied().unwrap_or(0);
    }
    // Both kinds of abort happened, so both paths were exercised.
    assert!(
        switch_aborts > 0 && store_aborts > 0,
        "{switch_aborts} {store_aborts}"
    );
}

/// With verification off, the switch never aborts; with it on and a hot
/// counter, it aborts before the store, and the store aborts less.
#[test]
fn the_switch_takes_aborts_off_the_store() {
    let run = |p: &str| {
        let mut s = spec(p, 3);
        s.sim = Default::default();
        s.switches = Some(1);
        s.clients = 24;
        run_bench(&s).unwrap().row
    };
    let on = run("nocc");
    let off = run("nocc-off");
    assert_eq!(off.counters.get("switch_aborts"), Some(&0));
    let switch = on.counters["switch_aborts"];
    assert!(switch > 0);
    assert!(
        on.counters["store_aborts"] < off.counters["store_aborts"],
        "store aborts: nocc {} vs nocc-off {}",
        on.counters["store_aborts"],
        off.counters["store_aborts"]
    );
    assert_eq!(on.check, "pass");
    assert_eq!(off.check, "pass");
}

/// The check is real: a store that does not check compares loses
/// increments, and the checker says so.
#[test]
fn checker_catches_a_store_that_does_not_check_compares() {
    for seed in 0..3 {
        let mut s = spec("nocc-unsafe", seed);
        s.sim = Default::default();
        let out = run_bench(&s).unwrap();
        assert_eq!(out.row.check, "fail", "seed {seed}");
    }
}
