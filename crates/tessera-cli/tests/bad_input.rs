//! Bad input: a one-line error naming the flag, exit code 2, no panic.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("tessera runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

fn rejects(args: &[&str], needle: &str) {
    let (code, err) = run(args);
    assert_eq!(code, 2, "{args:?} exited {code}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: error should name {needle}: {err}"
    );
}

#[test]
fn unknown_names_are_rejected_with_the_allowed_values() {
    rejects(&["bench", "--protocol", "paxos"], "--protocol");
    rejects(&["bench", "--protocol", "paxos"], "2pl-ww");
    rejects(&["bench", "--workload", "tpcx"], "--workload");
    rejects(&["bench", "--workload", "tpcx"], "ycsb");
    rejects(&["bench", "--runtime", "cloud"], "--runtime");
    rejects(&["experiment", "nope"], "compare");
    rejects(
        &["bench", "--protocol", "pt-occ", "--isolation", "si"],
        "snapshot",
    );
}

/// Snapshot transactions are COCO's (§5.3): s2pl refuses them, and
/// protocols without the knob refuse the flag.
#[test]
fn isolation_is_refused_where_it_does_not_apply() {
    let s2pl = ["bench", "--runtime", "sim", "--protocol", "s2pl"];
    rejects(
        &[&s2pl[..], &["--isolation", "snapshot"]].concat(),
        "--isolation",
    );
    rejects(
        &[&s2pl[..], &["--isolation", "snapshot"]].concat(),
        "serializable for s2pl",
    );
    rejects(
        &[
            "bench",
            "--runtime",
            "sim",
            "--protocol",
            "occ",
            "--isolation",
            "snapshot",
        ],
        "--isolation",
    );
}

/// The epoch prepare deadline (COCO §3.2) is 1 ms to a minute, and only
/// epoch commit has one.
#[test]
fn prepare_deadline_is_checked() {
    let coco = ["bench", "--runtime", "sim", "--protocol", "pt-occ"];
    let with = |extra: &[&'static str]| [&coco[..], extra].concat();
    for bad in ["0", "60001", "-5", "soon"] {
        rejects(
            &with(&["--prepare-deadline-ms", bad]),
            "--prepare-deadline-ms",
        );
    }
    let sync = with(&["--commit", "2pc-sync", "--prepare-deadline-ms", "100"]);
    rejects(&sync, "--prepare-deadline-ms");
    rejects(&sync, "--commit epoch");
    let occ = ["bench", "--runtime", "sim", "--protocol", "occ"];
    let occ = [&occ[..], &["--prepare-deadline-ms", "100"]].concat();
    rejects(&occ, "--prepare-deadline-ms");
    // The barrier stops at epochs: epoch commit only, on|off.
    rejects(
        &with(&["--commit", "2pc-sync", "--epoch-barrier", "on"]),
        "--epoch-barrier",
    );
    rejects(&with(&["--epoch-barrier", "always"]), "--epoch-barrier");
}

/// Rococo's bound on a read-only transaction's rounds: at least 1, and
/// only Rococo has it.
#[test]
fn ro_rounds_is_checked() {
    let rococo = ["bench", "--runtime", "sim", "--protocol", "rococo"];
    for bad in ["0", "-1", "many", "4294967296"] {
        rejects(
            &[&rococo[..], &["--ro-rounds", bad]].concat(),
            "--ro-rounds",
        );
    }
    let occ = ["bench", "--runtime", "sim", "--protocol", "occ"];
    rejects(&[&occ[..], &["--ro-rounds", "2"]].concat(), "--ro-rounds");
}

#[test]
fn counts_must_be_positive() {
    rejects(&["bench", "--clients", "0"], "--clients");
    rejects(&["bench", "--clients", "-3"], "--clients");
    rejects(&["bench", "--shards", "0"], "--shards");
    rejects(&["bench", "--keys", "0"], "--keys");
    rejects(&["bench", "--workload", "micro", "--shards", "2"], "shards");
    rejects(&["bench", "--repeat", "0"], "--repeat");
    rejects(&["bench", "--repeat", "101"], "--repeat");
    rejects(&["bench", "--max-unreleased", "0"], "--max-unreleased");
    rejects(&["sweep", "--vary", "commit=3"], "--vary");
    rejects(&["sweep", "--vary", "oocc-lease-adapt=2"], "--vary");
    rejects(&["bench", "--backoff-us", "5001"], "--backoff-us");
    rejects(&["bench", "--backoff-us", "-1"], "--backoff-us");
    rejects(&["sweep", "--vary", "backoff-us=0.5"], "--vary");
}

#[test]
fn skew_and_ratios_are_range_checked() {
    rejects(&["bench", "--zipf", "1.5"], "--zipf");
    rejects(&["bench", "--zipf", "-0.1"], "--zipf");
    rejects(&["bench", "--zipf", "high"], "--zipf");
    rejects(&["bench", "--read-ratio", "1.2"], "--read-ratio");
}

#[test]
fn durations_must_parse() {
    rejects(&["bench", "--duration", "10x"], "--duration");
    rejects(&["bench", "--duration", "ten"], "--duration");
    rejects(&["bench", "--duration", "0s"], "--duration");
    rejects(&["bench", "--duration", "1s", "--warmup", "2s"], "--warmup");
    rejects(&["bench", "--timeline", "0s"], "--timeline");
    rejects(&["bench", "--timeline", "soon"], "--timeline");
}

#[test]
fn unwritable_paths_are_rejected_before_running() {
    rejects(
        &["bench", "--out", "/nonexistent-dir/results.jsonl"],
        "--out",
    );
    rejects(
        &["bench", "--history", "/nonexistent-dir/h.jsonl"],
        "--history",
    );
}

#[test]
fn sim_only_flags_need_sim() {
    rejects(
        &["bench", "--runtime", "local", "--loss", "0.1"],
        "--runtime sim",
    );
    rejects(&["sweep", "--vary", "colour=1,2"], "--vary");
    rejects(
        &["bench", "--runtime", "local", "--fsync-us", "100"],
        "--fsync-us",
    );
    rejects(
        &["bench", "--runtime", "sim", "--fsync-us", "-1"],
        "--fsync-us",
    );
    rejects(
        &["bench", "--runtime", "sim", "--fsync-us", "2000000"],
        "--fsync-us",
    );
    rejects(
        &["bench", "--runtime", "local", "--checkpoint-kb", "64"],
        "--checkpoint-kb",
    );
    rejects(
        &["bench", "--runtime", "sim", "--checkpoint-kb", "-1"],
        "--checkpoint-kb",
    );
    rejects(
        &["sweep", "--runtime", "local", "--vary", "fsync-us=1,100"],
        "fsync-us only with --runtime sim",
    );
    rejects(
        &["bench", "--runtime", "local", "--byte-cpu-ps", "500"],
        "--byte-cpu-ps",
    );
    rejects(
        &["bench", "--runtime", "sim", "--byte-cpu-ps", "2000000"],
        "--byte-cpu-ps",
    );
    rejects(
        &["sweep", "--runtime", "local", "--vary", "byte-cpu-ps=0,500"],
        "byte-cpu-ps only with --runtime sim",
    );
    rejects(
        &["bench", "--runtime", "local", "--server-cpu-ns", "10000"],
        "--server-cpu-ns",
    );
    rejects(
        &["bench", "--runtime", "sim", "--server-cpu-ns", "2000000"],
        "--server-cpu-ns",
    );
    rejects(
        &["sweep", "--runtime", "local", "--vary", "server-cpu-ns=1,2"],
        "server-cpu-ns only with --runtime sim",
    );
    rejects(
        &[
            "bench",
            "--runtime",
            "local",
            "--protocol",
            "janus",
            "--graph-cpu-ns",
            "100",
        ],
        "--graph-cpu-ns",
    );
    rejects(
        &[
            "bench",
            "--runtime",
            "sim",
            "--protocol",
            "occ",
            "--graph-cpu-ns",
            "100",
        ],
        "--graph-cpu-ns",
    );
    rejects(
        &["bench", "--runtime", "sim", "--sites", "mars"],
        "coco-wan",
    );
}

/// `--primary-sites` takes first or spread; spread needs several sites, and
/// then no site holds every leader for `--client-sites leaders`.
#[test]
fn primary_sites_are_checked() {
    let sim = ["bench", "--runtime", "sim", "--protocol", "pt-occ"];
    let with = |extra: &[&'static str]| [&sim[..], extra].concat();
    rejects(
        &with(&["--sites", "coco-wan", "--primary-sites", "random"]),
        "--primary-sites",
    );
    rejects(
        &with(&["--sites", "coco-wan", "--primary-sites", "random"]),
        "first, spread",
    );
    rejects(
        &with(&["--primary-sites", "spread"]),
        "--sites of two or more",
    );
    rejects(
        &with(&["--sites", "one", "--primary-sites", "spread"]),
        "--primary-sites",
    );
    rejects(
        &with(&[
            "--sites",
            "coco-wan",
            "--primary-sites",
            "spread",
            "--client-sites",
            "leaders",
        ]),
        "--client-sites",
    );
}

#[test]
fn tpcc_knobs_are_checked() {
    let t = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = vec!["bench", "--workload", "tpcc"];
        v.extend_from_slice(extra);
        v
    };
    rejects(&t(&["--partition", "shelf"]), "--partition");
    rejects(&t(&["--partition", "shelf"]), "district");
    rejects(&t(&["--remote-payment", "15"]), "--remote-payment");
    rejects(&t(&["--remote-neworder", "10"]), "--warehouses");
    rejects(
        &t(&["--warehouses", "2", "--remote-neworder", "ten"]),
        "--remote-neworder",
    );
    rejects(
        &t(&["--warehouses", "2", "--remote-payment", "150"]),
        "--remote-payment",
    );
    rejects(&t(&["--items", "0"]), "--items");
    rejects(&t(&["--warehouses", "0"]), "--warehouses");
    rejects(&t(&["--home-warehouse", "own"]), "--home-warehouse");
    rejects(
        &t(&["--partition", "district", "--home-warehouse", "per-node"]),
        "--home-warehouse",
    );
    rejects(
        &[
            "bench",
            "--workload",
            "ycsb",
            "--home-warehouse",
            "per-node",
        ],
        "--home-warehouse",
    );
    rejects(
        &t(&["--by-name", "101"]),
        "--by-name (by_name) must be a percentage",
    );
    rejects(
        &["bench", "--workload", "ycsb", "--by-name", "0"],
        "--by-name",
    );
    rejects(&t(&["--mix", "neworder=45,refund=5"]), "--mix");
    rejects(&t(&["--mix", "neworder=0"]), "--mix");
    rejects(&t(&["--partition", "tiny", "--shards", "2"]), "--shards");
    rejects(&t(&["--zipf", "0.5"]), "--zipf");
    rejects(
        &["bench", "--workload", "ycsb", "--warehouses", "2"],
        "--warehouses",
    );
}

#[test]
fn a_short_tpcc_sim_bench_passes_both_checks() {
    let dir = std::env::temp_dir().join(format!("tessera-cli-tpcc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("rows.jsonl");
    let (code, err) = run(&[
        "bench",
        "--runtime",
        "sim",
        "--workload",
        "tpcc",
        "--warehouses",
        "2",
        "--districts",
        "4",
        "--customers",
        "30",
        "--items",
        "200",
        "--clients",
        "8",
        "--duration",
        "200ms",
        "--protocol",
        "occ",
        "--check",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let row: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(row["check"], "pass");
    assert_eq!(row["tpcc_consistency"], "pass");
    assert!(row["neworder_tps"].as_f64().unwrap() > 0.0);
    assert!(row["bytes_per_warehouse"].as_u64().unwrap() > 0);
    assert_eq!(row["by_type"].as_array().unwrap().len(), 5);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_short_sim_bench_writes_a_row_and_passes_the_check() {
    let dir = std::env::temp_dir().join(format!("tessera-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("rows.jsonl");
    let (code, err) = run(&[
        "bench",
        "--runtime",
        "sim",
        "--workload",
        "micro",
        "--keys",
        "1000",
        "--duration",
        "200ms",
        "--protocol",
        "occ",
        "--check",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let row: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    for field in [
        "protocol",
        "workload",
        "runtime",
        "throughput_tps",
        "commit_rate",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "msgs_per_txn",
        "committed",
        "attempts",
        "check",
    ] {
        assert!(row.get(field).is_some(), "row lacks {field}: {row}");
    }
    assert_eq!(row["check"], "pass");
    assert!(row["committed"].as_u64().unwrap() > 0);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn replica_and_site_flags_are_checked() {
    let sim = ["bench", "--runtime", "sim", "--duration", "50ms"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { [&sim[..], extra].concat() };
    rejects(&with(&["--replicas", "0"]), "--replicas");
    rejects(
        &with(&["--protocol", "2pl-ww", "--replicas", "3"]),
        "--replicas",
    );
    rejects(&with(&["--sites", "/nonexistent/sites.txt"]), "--sites");
    rejects(
        &["bench", "--runtime", "local", "--sites", "three-regions"],
        "--sites",
    );
    rejects(&with(&["--client-sites", "moon"]), "--client-sites");
    rejects(
        &with(&["--protocol", "occ-paxos", "--replica-faults"]),
        "--replicas",
    );
    rejects(&with(&["--drain", "1s"]), "--drain");
    let bad = std::env::temp_dir().join("tessera-bad-sites.txt");
    std::fs::write(&bad, "1 100\n100\n").unwrap();
    let mut args = sim.to_vec();
    args.extend(["--sites", bad.to_str().unwrap()]);
    rejects(&args, "--sites");
}

/// `check-workload`: exit 0 with a verdict for a workload that needs no
/// merge, the SC-graph in DOT on request; exit 2 for an unknown workload.
#[test]
fn check_workload_verdict_and_dot() {
    let dot = std::env::temp_dir().join(format!("tessera-sc-{}.dot", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["check-workload", "--workload", "micro", "--dot"])
        .arg(&dot)
        .output()
        .expect("tessera runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("no piece needs merging"), "{stdout}");
    let graph = std::fs::read_to_string(&dot).expect("DOT written");
    assert!(graph.starts_with("graph sc {"), "{graph}");
    let _ = std::fs::remove_file(&dot);
    rejects(&["check-workload", "--workload", "tpcx"], "--workload");
}

/// TPC-C passes Rococo's offline checker with its read-only transactions
/// left out (Rococo §4.1, Fig. 13), in every partition scheme: exit 0.
#[test]
fn check_workload_tpcc_needs_no_merge() {
    for partition in ["warehouse", "district", "tiny"] {
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "check-workload",
                "--workload",
                "tpcc",
                "--partition",
                partition,
            ])
            .output()
            .expect("tessera runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{partition}: {stdout}{stderr}");
        assert!(stdout.contains("no piece needs merging"), "{stdout}");
    }
}

/// Rococo §4.2's example: NewOrder's stock pieces made immediate
/// (`--immediate-stock`) need merging with its home piece: exit 1 and the
/// pieces named. The flag belongs to TPC-C only (exit 2 elsewhere).
#[test]
fn check_workload_immediate_stock_needs_a_merge() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["check-workload", "--workload", "tpcc", "--immediate-stock"])
        .output()
        .expect("tessera runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("merge needed"), "{stdout}");
    assert!(stdout.contains("neworder: merge p0 + p1"), "{stdout}");
    rejects(
        &["check-workload", "--workload", "micro", "--immediate-stock"],
        "--immediate-stock",
    );
}

/// OOCC's Lease Manager and drift knobs: bounds only with adaptation,
/// around the starting lease; adaptation and the offset floor need
/// leases; `--drift-node`
/// names an existing node and a positive clock rate.
#[test]
fn oocc_lease_and_drift_knobs_are_checked() {
    let base = [
        "bench",
        "--runtime",
        "sim",
        "--net",
        "rdma",
        "--protocol",
        "oocc",
        "--workload",
        "ycsb",
        "--shards",
        "2",
        "--duration",
        "1ms",
    ];
    let with = |extra: &[&'static str]| [&base[..], extra].concat();
    rejects(
        &with(&["--oocc-lease-min-us", "5"]),
        "--oocc-lease-adapt on",
    );
    rejects(
        &with(&["--oocc-lease-adapt", "on", "--oocc-lease-min-us", "30"]),
        "--oocc-lease-min-us",
    );
    rejects(
        &with(&["--oocc-lease-adapt", "on", "--oocc-lease-max-us", "10"]),
        "--oocc-lease-max-us",
    );
    rejects(
        &with(&["--oocc-lease-adapt", "on", "--oocc-lease-period-us", "0"]),
        "--oocc-lease-period-us",
    );
    rejects(
        &with(&["--oocc-lease-adapt", "on", "--oocc-lease", "off"]),
        "--oocc-lease-adapt",
    );
    rejects(&with(&["--oocc-drift-stop", "maybe"]), "--oocc-drift-stop");
    rejects(&with(&["--oocc-offset-ns", "-5"]), "--oocc-offset-ns");
    rejects(
        &with(&["--oocc-offset-ns", "2000000000"]),
        "--oocc-offset-ns",
    );
    // No lease, nothing to widen.
    rejects(
        &with(&["--oocc-lease", "off", "--oocc-offset-ns", "500"]),
        "--oocc-lease off",
    );
    let ford = base.map(|a| if a == "oocc" { "ford-occ" } else { a });
    rejects(
        &[&ford[..], &["--oocc-offset-ns", "500"]].concat(),
        "--oocc-offset-ns",
    );
    // A sync period of 0 would send Syncs in a loop (§VII.B).
    rejects(&with(&["--oocc-sync-us", "0"]), "--oocc-sync-us");
    rejects(&with(&["--drift-node", "3:-1000000"]), "--drift-node");
    rejects(&with(&["--drift-node", "99:5"]), "--drift-node");
    rejects(
        &[
            "bench",
            "--protocol",
            "drtm",
            "--workload",
            "ycsb",
            "--oocc-drift-stop",
            "off",
        ],
        "--oocc-drift-stop",
    );
    for (flag, value) in [("--oocc-offset-ns", "500"), ("--oocc-sync-us", "1000")] {
        rejects(
            &[
                "bench",
                "--protocol",
                "dslr",
                "--workload",
                "ycsb",
                flag,
                value,
            ],
            flag,
        );
    }
}

/// TATP and TAOBench (OOCC §VIII.B): their flags name themselves and are
/// refused by the other workloads.
#[test]
fn tatp_and_taobench_flags_are_checked() {
    let sim = ["bench", "--runtime", "sim", "--protocol", "oocc"];
    let with = |extra: &[&'static str]| [&sim[..], extra].concat();
    rejects(
        &with(&["--workload", "tatp", "--subscribers", "1"]),
        "subscribers",
    );
    rejects(
        &with(&["--workload", "tatp", "--subscribers", "0"]),
        "--subscribers",
    );
    rejects(
        &with(&["--workload", "tatp", "--ro-keys", "17"]),
        "--ro-keys",
    );
    rejects(&with(&["--workload", "tatp", "--zipf", "0.5"]), "--zipf");
    rejects(
        &with(&["--workload", "tatp", "--objects", "100"]),
        "--objects",
    );
    rejects(
        &with(&["--workload", "taobench", "--objects", "4"]),
        "--objects",
    );
    rejects(
        &with(&["--workload", "taobench", "--edges", "0"]),
        "--edges",
    );
    rejects(
        &with(&["--workload", "taobench", "--subscribers", "9"]),
        "--subscribers",
    );
    rejects(&with(&["--workload", "taobench", "--keys", "9"]), "--keys");
    rejects(&with(&["--workload", "ycsb", "--edges", "40"]), "--edges");
    rejects(
        &with(&["--workload", "micro", "--ro-keys", "2"]),
        "--ro-keys",
    );
}

/// Janus's `--per-column on|off` (issue 6): either value runs Janus and
/// its check passes at the granularity it names; another value, or
/// another protocol, is refused naming the flag (the tcp runtime's refusal
/// is the registry's unit test).
#[test]
fn per_column_is_on_or_off_and_janus_only() {
    let janus = [
        "bench",
        "--runtime",
        "sim",
        "--protocol",
        "janus",
        "--workload",
        "ycsb",
        "--shards",
        "2",
        "--clients",
        "2",
        "--duration",
        "20ms",
        "--warmup",
        "5ms",
        "--cooldown",
        "5ms",
        "--check",
    ];
    for v in ["on", "off"] {
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([&janus[..], &["--per-column", v]].concat())
            .output()
            .expect("tessera runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "--per-column {v}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("pass"), "--per-column {v}: {stdout}");
    }
    rejects(
        &[&janus[..], &["--per-column", "maybe"]].concat(),
        "--per-column",
    );
    rejects(
        &[&janus[..], &["--per-column", "1"]].concat(),
        "--per-column",
    );
    let tapir = janus.map(|a| if a == "janus" { "tapir" } else { a });
    rejects(
        &[&tapir[..], &["--per-column", "off"]].concat(),
        "--per-column",
    );
}
