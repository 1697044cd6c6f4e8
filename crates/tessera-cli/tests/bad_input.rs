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
