//! The replicated protocols — the layered baselines (2PL/OCC +
//! Multi-Paxos) and TAPIR — under the simulator's faults: every shard a group of three, message loss, duplication,
//! reordering, partitions, and crashes of leaders and followers (a minority
//! of each shard at a time, [`replica_plan`]). Every history must be
//! strictly serializable, and once the faults end and the clients stop,
//! every shard's replicas must hold the same data.
//!
//! `TESSERA_SEEDS` sets the number of seeds per protocol (default 200). A
//! failure prints the seed and the command that replays it.

use std::collections::BTreeMap;
use tessera_core::history::Outcome;
use tessera_core::ids::{Time, MS};
use tessera_core::topology::Role;
use tessera_harness::deploy::topology;
use tessera_harness::faults::replica_plan;
use tessera_harness::{run_bench, BenchOutcome, BenchSpec, RuntimeKind, WorkloadSpec};
use tessera_sim::Crash;
use tessera_workloads::{MicroConfig, YcsbConfig};

fn seeds() -> u64 {
    std::env::var("TESSERA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

const DURATION: Time = 500 * MS;
/// Clients stop this long before the end; faults end before that. Longer
/// than the coordinators' largest retransmission timeout (8 x 20 ms), so
/// that a request lost just before the faults end is resent in time.
const DRAIN: Time = 200 * MS;

/// A contended run on three groups of three, faults from `replica_plan`.
fn faulty_spec(protocol: &str, seed: u64) -> BenchSpec {
    let workload = if seed % 2 == 0 {
        WorkloadSpec::Micro(MicroConfig {
            shards: 3,
            keys_per_shard: 500,
            zipf_theta: 0.9,
        })
    } else {
        WorkloadSpec::Ycsb(YcsbConfig {
            partitions: 3,
            keys_per_partition: 500,
            zipf_theta: 0.9,
            multi_partition: 0.5,
            ops_per_txn: 4,
            ..YcsbConfig::default()
        })
    };
    let mut s = BenchSpec::new(RuntimeKind::Sim, protocol, workload);
    s.seed = seed;
    s.clients = 12;
    s.replicas = Some(3);
    s.duration = DURATION;
    s.warmup = 50 * MS;
    s.cooldown = DRAIN;
    s.drain = DRAIN;
    s.check = true;
    s.sim = replica_plan(seed, &topology(&s), DURATION - DRAIN - 20 * MS);
    s
}

fn replay(s: &BenchSpec) -> String {
    format!(
        "tessera bench --runtime sim --protocol {} --workload {} --shards 3 --keys 500 \
         --zipf 0.9 --clients 12 --replicas 3 --duration 500ms --warmup 50ms \
         --cooldown 200ms --drain 200ms --seed {} --replica-faults --check{}",
        s.protocol,
        s.workload.name(),
        s.seed,
        if s.workload.name() == "ycsb" {
            " --multi-partition 0.5 --ops 4"
        } else {
            ""
        }
    )
}

/// Every shard's replicas ended with the same data.
fn assert_converged(out: &BenchOutcome, what: &str) {
    let groups = out.raw.replica_digests();
    assert!(!groups.is_empty(), "{what}: no replica stores reported");
    for (shard, digests) in groups.iter().enumerate() {
        assert!(
            digests.iter().all(|d| *d == digests[0]),
            "{what}: the replicas of shard {shard} diverged: {digests:x?}"
        );
    }
}

/// What the runs of one protocol added up to.
#[derive(Default)]
struct Totals {
    /// Protocol counters, summed over seeds.
    counters: BTreeMap<&'static str, u64>,
    /// Crashes of replicas that restarted.
    replica_restarts: u64,
    /// Of those, restarts followed by another crash of the same replica
    /// within [`RECRASH`]: too soon to be sure its recovery finished (a
    /// lost StartView is resent after a retransmission timeout).
    quick_recrashes: u64,
}

const RECRASH: Time = 25 * MS;

fn many_seeds(protocol: &str) -> Totals {
    let mut leader_crashes = 0;
    let mut totals = Totals::default();
    for seed in 0..seeds() {
        let s = faulty_spec(protocol, seed);
        let what = format!("{protocol} seed {seed}\nreplay: {}", replay(&s));
        let out = run_bench(&s).unwrap_or_else(|e| panic!("{what}: {e:#}"));
        let report = out.check.as_ref().expect("checked");
        assert!(report.ok, "{what}: {report}");
        assert!(out.row.committed > 0, "{what}: nothing committed");
        assert_converged(&out, &what);
        let leaders: Vec<_> = out.raw.topology.shards.iter().map(|g| g.leader()).collect();
        if s.sim.crashes.iter().any(|c| leaders.contains(&c.node)) {
            leader_crashes += 1;
        }
        let crashes = &s.sim.crashes;
        for c in crashes {
            let Some(after) = c.restart_after else {
                continue;
            };
            if !matches!(out.raw.topology.role(c.node), Role::Server { .. }) {
                continue;
            }
            totals.replica_restarts += 1;
            let back = c.at + after;
            if crashes
                .iter()
                .any(|d| d.node == c.node && d.at >= back && d.at < back + RECRASH)
            {
                totals.quick_recrashes += 1;
            }
        }
        for (name, n) in &out.raw.counters {
            *totals.counters.entry(*name).or_insert(0) += n;
        }
    }
    assert!(
        seeds() < 10 || leader_crashes > 0,
        "{protocol}: no plan crashed an initial leader"
    );
    totals
}

#[test]
fn two_phase_locking_over_paxos_survives_replica_faults() {
    many_seeds("2pl-paxos");
}

#[test]
fn occ_over_paxos_survives_replica_faults() {
    many_seeds("occ-paxos");
}

/// TAPIR's replicas recover through IR's view change: every replica that
/// restarted rejoined through a view whose leader merged f+1 records
/// (unless it crashed again before it could).
#[test]
fn tapir_survives_replica_faults() {
    let t = many_seeds("tapir");
    let count = |name| t.counters.get(name).copied().unwrap_or(0);
    eprintln!(
        "tapir: {} replica restarts ({} crashed again within {} ms), {} recoveries, \
         {} views started, {} prepares re-decided",
        t.replica_restarts,
        t.quick_recrashes,
        RECRASH / MS,
        count("tapir_recoveries"),
        count("tapir_views_started"),
        count("tapir_merge_redecided")
    );
    let recovered = count("tapir_recoveries");
    assert!(
        recovered <= t.replica_restarts && recovered + t.quick_recrashes >= t.replica_restarts,
        "every restarted replica recovers, unless it crashed again at once: \
         {recovered} of {} restarts ({} quick re-crashes)",
        t.replica_restarts,
        t.quick_recrashes
    );
    assert!(count("tapir_views_started") >= t.replica_restarts);
}

/// A run of micro transactions (every one touches all three shards) in
/// which replica 0 of shard 0 — the Paxos leader, or TAPIR's leader of
/// view 0 — crashes at `crash_at` and restarts 150 ms later. Checked:
/// strictly serializable, replicas converged.
fn replica0_crash(protocol: &str, seed: u64, crash_at: Time, duration: Time) -> BenchOutcome {
    let mut s = BenchSpec::new(
        RuntimeKind::Sim,
        protocol,
        WorkloadSpec::Micro(MicroConfig {
            shards: 3,
            keys_per_shard: 10_000,
            zipf_theta: 0.5,
        }),
    );
    s.seed = seed;
    s.clients = 24;
    s.replicas = Some(3);
    s.duration = duration;
    s.warmup = 20 * MS;
    s.cooldown = 150 * MS;
    s.drain = 150 * MS;
    s.check = true;
    let topo = topology(&s);
    let leader = topo.shards[0].leader();
    assert!(matches!(topo.role(leader), Role::Server { replica: 0, .. }));
    // It stays down well past an election: the others carry on.
    s.sim.crashes.push(Crash {
        node: leader,
        at: crash_at,
        restart_after: Some(CRASH_LEN),
    });
    let what = format!("{protocol} seed {seed}");
    let out = run_bench(&s).unwrap_or_else(|e| panic!("{what}: {e:#}"));
    let report = out.check.as_ref().expect("checked");
    assert!(report.ok, "{what}: {report}");
    assert_converged(&out, &what);
    out
}

const CRASH_LEN: Time = 150 * MS;

/// Commits that started after `from` and ended before `to`.
fn commits_within(out: &BenchOutcome, from: Time, to: Time) -> usize {
    let h = out.history.as_ref().expect("recorded");
    h.txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .filter(|t| t.start > from && t.end < to)
        .count()
}

/// Janus §5's scenario for the layered designs: the Paxos leader of a
/// shard crashes while distributed transactions are in their 2PC. A new
/// leader takes over from the log; transactions caught in the middle end
/// committed or aborted, the same way on every replica, and the history
/// stays strictly serializable.
#[test]
fn leader_crash_in_the_middle_of_two_phase_commit() {
    for protocol in ["2pl-paxos", "occ-paxos"] {
        for seed in 0..4 {
            let crash_at = 150 * MS + seed * MS / 3;
            let out = replica0_crash(protocol, seed, crash_at, 500 * MS);
            let what = format!("{protocol} seed {seed}");
            let h = out.history.as_ref().expect("recorded");
            // Every micro transaction touches all three shards, shard 0
            // included: some were in flight across the crash and committed
            // through the new leader...
            let across = h
                .txns
                .iter()
                .filter(|t| t.outcome == Outcome::Committed)
                .filter(|t| t.start < crash_at && t.end > crash_at)
                .count();
            assert!(across > 0, "{what}: no transaction spanned the crash");
            // ...and the shard kept committing while its old leader was down.
            let during = commits_within(&out, crash_at + 60 * MS, crash_at + CRASH_LEN);
            assert!(
                during > 50,
                "{what}: {during} commits without the old leader"
            );
        }
    }
}

/// TAPIR with one replica of a shard down, then back through IR's view
/// change: the shard keeps committing on the slow path (two of three
/// replicas answer: no fast quorum), the restarted replica recovers once,
/// and throughput returns once it is back. Prints the commit rate in the
/// three windows (`docs/results/replicated.md` quotes them).
#[test]
fn tapir_replica_crash_and_recovery() {
    const WINDOW: Time = 100 * MS;
    let crash_at = 150 * MS;
    for seed in 0..4 {
        let what = format!("tapir seed {seed}");
        // Clients run until 550 ms: past the after-recovery window.
        let out = replica0_crash("tapir", seed, crash_at, 700 * MS);
        assert_eq!(
            out.raw.counters.get("tapir_recoveries"),
            Some(&1),
            "{what}: one recovery"
        );
        let before = commits_within(&out, crash_at - WINDOW, crash_at);
        let during = commits_within(&out, crash_at + 20 * MS, crash_at + 20 * MS + WINDOW);
        let back = crash_at + CRASH_LEN + 10 * MS;
        let after = commits_within(&out, back, back + WINDOW);
        let per_s = |n: usize| n as u64 * 1_000 / (WINDOW / MS);
        eprintln!(
            "{what}: commits/s before the crash {}, one replica down {}, after its recovery {}",
            per_s(before),
            per_s(during),
            per_s(after)
        );
        assert!(during > 50, "{what}: {during} commits with a replica down");
        assert!(
            after * 10 > before * 8,
            "{what}: {after} commits after the recovery vs {before} before"
        );
    }
}

/// One seed replays one run, faults and all.
#[test]
fn same_seed_gives_identical_runs() {
    for protocol in ["2pl-paxos", "occ-paxos", "tapir"] {
        let s = faulty_spec(protocol, 11);
        let (a, b) = (run_bench(&s).unwrap(), run_bench(&s).unwrap());
        assert_eq!(a.row, b.row, "{protocol}");
        assert_eq!(
            a.raw.replica_digests(),
            b.raw.replica_digests(),
            "{protocol}"
        );
    }
}
