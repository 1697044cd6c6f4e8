//! A local cluster of `tessera server` processes on loopback for the
//! multi-process tests (`cluster.rs`, `txn.rs`).

#![allow(dead_code)] // each test crate uses its own part

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_tessera");

/// `n` distinct free ports: every listener is held until all are bound
/// (one released before the next bind could be handed out again: CI
/// 2026-11-25 saw two nodes of one cluster given the same port).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub ports: Vec<u16>,
    pub servers: Vec<Option<Child>>,
}

impl Cluster {
    /// YCSB over three shards, contended.
    pub fn new(protocol: &str, fsync: bool) -> Self {
        Cluster::with_workload(
            protocol,
            fsync,
            "name = \"ycsb\"\npartitions = 3\nkeys_per_partition = 2000\nmulti_partition = 0.3\nzipf_theta = 0.6\n",
        )
    }

    /// `workload`: the body of the cluster file's `[workload]` table.
    pub fn with_workload(protocol: &str, fsync: bool, workload: &str) -> Self {
        Cluster::replicated(protocol, fsync, workload, 3, 1)
    }

    /// `shards` shards of `replicas` replicas each: server `i` (node
    /// `s<i>`) is replica `i % replicas` of shard `i / replicas`.
    pub fn replicated(
        protocol: &str,
        fsync: bool,
        workload: &str,
        shards: usize,
        replicas: usize,
    ) -> Self {
        let wal = format!("fsync = {fsync}\ncheckpoint_mb = 1");
        Cluster::build(protocol, &wal, workload, shards, replicas, 1)
    }

    /// `shards` unreplicated shards and `hosts` client hosts in the bench
    /// driver, without a write-ahead log (memory nodes keep none).
    pub fn unlogged(protocol: &str, workload: &str, shards: usize, hosts: u32) -> Self {
        Cluster::build(protocol, "enabled = false", workload, shards, 1, hosts)
    }

    /// `wal`: the body of the cluster file's `[wal]` table.
    fn build(
        protocol: &str,
        wal: &str,
        workload: &str,
        shards: usize,
        replicas: usize,
        hosts: u32,
    ) -> Self {
        let n = shards * replicas;
        let dir = tempfile::tempdir().unwrap();
        let ports = free_ports(n);
        let mut text = format!(
            r#"
[cluster]
protocol = "{protocol}"
run_dir = "run"
[workload]
{workload}
[clients]
clients = 12
hosts = {hosts}
[wal]
{wal}
[net]
stats_every_s = 0
"#
        );
        for (i, p) in ports.iter().enumerate() {
            text += &format!("[[nodes]]\nname = \"s{i}\"\naddr = \"127.0.0.1:{p}\"\n");
        }
        for s in 0..shards {
            let names: Vec<String> = (0..replicas)
                .map(|r| format!("\"s{}\"", s * replicas + r))
                .collect();
            text += &format!("[[shards]]\nreplicas = [{}]\n", names.join(", "));
        }
        let config = dir.path().join("cluster.toml");
        std::fs::write(&config, text).unwrap();
        let mut c = Cluster {
            dir,
            config,
            ports,
            servers: Vec::new(),
        };
        for i in 0..n {
            let child = c.spawn(i);
            c.servers.push(Some(child));
        }
        for i in 0..n {
            c.wait_up(i);
        }
        c
    }

    pub fn spawn(&self, i: usize) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("s{i}.log")))
            .unwrap();
        Command::new(BIN)
            .args(["server", "--config"])
            .arg(&self.config)
            .args(["--node", &format!("s{i}")])
            .env("TESSERA_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    pub fn wait_up(&mut self, i: usize) {
        let t = Instant::now();
        let addr = format!("127.0.0.1:{}", self.ports[i]).parse().unwrap();
        while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            if let Some(Ok(Some(st))) = self.servers[i].as_mut().map(|c| c.try_wait()) {
                panic!("server s{i} exited: {st}; log:\n{}", self.log(i));
            }
            assert!(t.elapsed() < Duration::from_secs(30), "s{i} not up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("s{i}.log"))).unwrap_or_default()
    }

    /// Every server's log, each under its name.
    pub fn logs(&self) -> String {
        (0..self.ports.len())
            .map(|i| format!("--- s{i}\n{}", self.log(i)))
            .collect()
    }

    pub fn bench(&self, duration: &str) -> Child {
        self.bench_with(duration, &[])
    }

    /// `bench` with more flags (e.g. `--warmup`).
    pub fn bench_with(&self, duration: &str, extra: &[&str]) -> Child {
        Command::new(BIN)
            .args([
                "bench",
                "--runtime",
                "tcp",
                "--check",
                "--duration",
                duration,
            ])
            .arg("--config")
            .arg(&self.config)
            .arg("--out")
            .arg(self.dir.path().join("rows.jsonl"))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn kill9(&mut self, i: usize) {
        let mut c = self.servers[i].take().unwrap();
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
    }

    pub fn restart(&mut self, i: usize) {
        self.servers[i] = Some(self.spawn(i));
        self.wait_up(i);
    }

    /// The kill -9 scenario every tcp recovery test runs: `after` into a
    /// running bench, server `i` dies with SIGKILL, stays down for `down`,
    /// and is restarted (it must replay its log to rejoin).
    pub fn kill9_mid_run(&mut self, i: usize, after: Duration, down: Duration) {
        std::thread::sleep(after);
        self.kill9(i);
        std::thread::sleep(down);
        self.restart(i);
    }

    /// Where a bench given `--history` with it writes its history.
    pub fn history_path(&self) -> PathBuf {
        self.dir.path().join("history.jsonl")
    }

    pub fn rows(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.path().join("rows.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// The bench's output once it exits, or a failure if it runs for more
/// than `limit` (a hang).
pub fn finish_within(mut bench: Child, limit: Duration, c: &Cluster) -> Output {
    let t = Instant::now();
    while bench.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            bench.kill().unwrap();
            let out = bench.wait_with_output().unwrap();
            panic!(
                "bench still running after {limit:?}: {}\nlogs:\n{}",
                String::from_utf8_lossy(&out.stderr),
                c.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bench.wait_with_output().unwrap()
}

/// The bench's last row, after it exited successfully (within two
/// minutes).
pub fn row(bench: Child, c: &Cluster) -> serde_json::Value {
    let out = finish_within(bench, Duration::from_secs(120), c);
    assert!(
        out.status.success(),
        "bench failed: {}\n{}\nlogs:\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout),
        c.logs()
    );
    c.rows().pop().expect("a row")
}

/// Protocol counter `name` of a bench row.
pub fn counter(row: &serde_json::Value, name: &str) -> u64 {
    row["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name} in {row}"))
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.servers.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Commits per client in a bench's `--history` file (Elle JSON lines)
/// that completed at or after `after` into the bench run: an "ok" event's
/// `time` is in ns since the driver's start, and the client is the low 32
/// bits of its `process` (`tessera_core::client`).
pub fn commits_by_client(history: &std::path::Path, after: Duration) -> BTreeMap<u64, u64> {
    let text =
        std::fs::read_to_string(history).unwrap_or_else(|e| panic!("{}: {e}", history.display()));
    let mut by = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["type"] == "ok" && v["time"].as_u64().unwrap() >= after.as_nanos() as u64 {
            *by.entry(v["process"].as_u64().unwrap() & 0xffff_ffff)
                .or_insert(0) += 1;
        }
    }
    by
}
