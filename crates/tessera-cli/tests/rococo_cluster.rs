//! Rococo over real processes (issue 4): three `tessera server` processes
//! on loopback, each a shard of one TPC-C warehouse split by district and
//! item (Rococo §5.4), and a `tessera bench --runtime tcp` driver whose
//! coordinators run the start and commit phases over TCP (`rococo/codec.rs`).
//! Servers log their start requests in their nodes' write-ahead logs
//! (`rococo/server/log.rs`); malformed Rococo frames close the sender's
//! connection and leave the server serving.

mod common;

use common::{commits_by_client, row, Cluster};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tessera_tcp::frame::{encode_hello, put_frame, Hello, Kind};

/// One warehouse of six districts over three shards, twelve clients: every
/// NewOrder and Payment of a district updates its district row, so
/// transactions conflict all the time (Rococo §5.5's contention).
const TPCC: &str = "name = \"tpcc\"\npartition = \"district\"\nshards = 3\nwarehouses = 1\n\
                    districts = 6\ncustomers = 100\nitems = 2000\n";

/// Transactions that ended other than committed, rolled back by their
/// procedure (TPC-C's invalid item, clause 2.4.2.3) or in doubt: those a
/// protocol aborted for a conflict.
fn conflict_aborts(row: &serde_json::Value) -> u64 {
    let n = |k: &str| row[k].as_u64().unwrap_or_else(|| panic!("no {k} in {row}"));
    let user: u64 = row["by_type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["user_aborts"].as_u64().unwrap())
        .sum();
    n("attempts") - n("committed") - n("failed") - user
}

/// Clients of [`TPCC`]'s cluster (the cluster file's default).
const CLIENTS: u64 = 12;

/// A run of `c` until every client committed `per_client` transactions,
/// or for a minute at most: the count is the liveness claim, and a slow
/// machine only lengthens the run (a fixed 3 s run once ended at 286 of
/// the 300 commits asked for, every check passing). Warm-up 1 ns, the
/// least the flag takes: every
/// commit is in the row.
fn bench_until(c: &Cluster, per_client: u64) -> serde_json::Value {
    let commits = (per_client * CLIENTS).to_string();
    let row = row(
        c.bench_with("60s", &["--warmup", "1ns", "--commits", &commits]),
        c,
    );
    assert!(
        row["committed"].as_u64().unwrap() >= per_client * CLIENTS,
        "not every client committed {per_client} within the minute: {row}"
    );
    row
}

/// The isolation check, the lost-write check and TPC-C's consistency
/// conditions (clause 3.3.2) pass on the servers' final stores; every
/// client commits 30 transactions (360 in all) and none aborts for a
/// conflict (§3: Rococo reorders conflicts instead), nor ends in doubt.
#[test]
fn rococo_runs_contended_tpcc_over_tcp_without_aborts_and_the_check_passes() {
    let c = Cluster::with_workload("rococo", false, TPCC);
    let row = bench_until(&c, 30);
    assert_eq!(row["check"], "pass", "{row}");
    assert_eq!(row["tpcc_consistency"], "pass", "{row}");
    assert!(row["neworder_tps"].as_f64().unwrap() > 0.0, "{row}");
    assert_eq!(row["failed"], 0, "{row}");
    assert_eq!(conflict_aborts(&row), 0, "{row}");
    no_frame_refused(&c);
}

/// No server refused a frame of its peers or the bench driver: a message
/// one side encodes and the other refuses closes the connection with
/// everything batched with it, at every resend (CI 2026-11-27: a status
/// reply naming no shard; the TPC-C check caught it in 2 of 7 such runs).
fn no_frame_refused(c: &Cluster) {
    let logs = c.logs();
    assert!(!logs.contains("closing connection: bad input"), "{logs}");
}

/// A peer connection (claiming client node 1000) that sends `message` to
/// node 0 as a Rococo message.
fn send_frame(port: u16, message: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut out = bytes::BytesMut::new();
    encode_hello(
        &mut out,
        &Hello {
            kind: Kind::Peer,
            nodes: vec![tessera_core::NodeId(1000)],
        },
    );
    put_frame(&mut out, |b| {
        b.extend_from_slice(&1000u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(message);
    });
    s.write_all(&out).unwrap();
    s
}

/// Malformed Rococo messages each close their connection with the reason
/// in the server's log; the server does not panic, and a run afterwards
/// passes its checks.
#[test]
fn bad_rococo_bytes_close_the_connection_and_the_server_keeps_serving() {
    let mut c = Cluster::with_workload("rococo", false, TPCC);
    let txn = 7u64.to_le_bytes();
    let bad: Vec<(Vec<u8>, &str)> = vec![
        // An unknown message tag.
        (vec![200], "unknown Rococo message tag 200"),
        // A Start whose procedure the workload does not know.
        (
            [&[0u8][..], &txn, &[4], b"nope", &[0]].concat(),
            "tpcc has no procedure 'nope'",
        ),
        // A Commit claiming 2^35 vertices in three bytes.
        (
            [
                &[2u8][..],
                &txn,
                &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
                &[1, 2, 3],
            ]
            .concat(),
            "truncated input while reading vertices",
        ),
        // An InquireOk whose one vertex is on shard 9 of 3.
        (
            [&[7u8][..], &txn, &[1], &txn, &[1], &[1, 9], &[0], &[0]].concat(),
            "vertex shard: 9 but the workload has 3 shards",
        ),
        // A CommitOk cut short.
        ([&[3u8][..], &txn[..4]].concat(), "truncated input"),
    ];
    let conns: Vec<TcpStream> = bad.iter().map(|(m, _)| send_frame(c.ports[0], m)).collect();
    // The server reads and refuses them; wait until it logged every one.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while c.log(0).matches("closing connection: bad input").count() < bad.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "s0 did not refuse every bad frame:\n{}",
            c.log(0)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(conns);
    let log = c.log(0);
    for (_, why) in &bad {
        assert!(log.contains(why), "no '{why}' in s0's log:\n{log}");
    }
    assert!(!log.contains("panicked"), "{log}");
    let alive = c.servers[0].as_mut().unwrap().try_wait().unwrap();
    assert!(alive.is_none(), "s0 exited: {alive:?}\n{log}");
    let row = bench_until(&c, 5);
    assert_eq!(row["check"], "pass", "{row}");
}

/// A server killed with SIGKILL mid-run (no goodbye) and restarted
/// replays its log (§3.5: start requests in arrival order, finishes of
/// deferred pieces at their place), the coordinators' resent requests get
/// the same replies, and the run passes every check: no committed write
/// lost, TPC-C's conditions hold, and every client commits again after
/// the restart (every NewOrder and Payment of this split touches the
/// victim's districts or items, so none commits while it is down).
#[test]
fn a_rococo_server_killed_mid_run_restarts_from_its_log_and_the_check_passes() {
    let mut c = Cluster::with_workload("rococo", false, TPCC);
    let history = c.history_path();
    let spawned = Instant::now();
    let bench = c.bench_with("5s", &["--history", history.to_str().unwrap()]);
    let victim = 1;
    c.kill9_mid_run(
        victim,
        Duration::from_millis(1500),
        Duration::from_millis(300),
    );
    // The driver's clock starts after its spawn, so a commit it times
    // later than this came after the restarted server was up.
    let restarted = spawned.elapsed();
    let row = row(bench, &c);
    assert_eq!(row["check"], "pass", "{row}");
    assert_eq!(row["tpcc_consistency"], "pass", "{row}");
    let after = commits_by_client(&history, restarted);
    assert_eq!(
        after.len() as u64,
        CLIENTS,
        "clients committing after the restart ({restarted:?} in): {after:?}\n{row}"
    );
    assert!(
        c.log(victim).contains("recovered log"),
        "s{victim} did not replay its log:\n{}",
        c.log(victim)
    );
    no_frame_refused(&c);
}
