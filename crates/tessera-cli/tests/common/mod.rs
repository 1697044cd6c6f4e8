//! A local cluster of `tessera server` processes on loopback for the
//! multi-process tests (`cluster.rs`, `txn.rs`).

#![allow(dead_code)] // each test crate uses its own part

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_tessera");

/// Ports per block a test process claims (see [`free_ports`]).
const BLOCK: u16 = 100;

/// The blocks of server ports this process claimed in one network
/// namespace, and the next port to hand out.
struct Blocks {
    /// A listener on each claimed block's first port, held until the
    /// process exits: the claim other test processes see.
    claims: Vec<TcpListener>,
    next: u16,
    end: u16,
}

/// Claimed blocks by network namespace (`partition.rs` runs its clusters
/// in a namespace of its own, where claims made outside do not count).
static BLOCKS: Mutex<BTreeMap<String, Blocks>> = Mutex::new(BTreeMap::new());

/// The kernel's ephemeral port range, from which it picks the local port
/// of an outgoing connection and the port of a bind to port 0.
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|w| w.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999))
}

/// First ports of the blocks outside the ephemeral range, from port
/// 10,000 up (below it are well-known services' ports).
fn block_starts() -> Vec<u16> {
    let (low, high) = ephemeral_range();
    (10_000..=u16::MAX - BLOCK + 1)
        .step_by(BLOCK as usize)
        .filter(|&b| b + BLOCK - 1 < low || b > high)
        .collect()
}

/// A block no other process claimed, tried from a place set by the
/// process id so that concurrent test processes rarely collide.
fn claim_block() -> (TcpListener, u16) {
    let starts = block_starts();
    assert!(
        !starts.is_empty(),
        "no block of {BLOCK} ports lies outside the ephemeral range {:?}",
        ephemeral_range()
    );
    let first = std::process::id() as usize % starts.len();
    (0..starts.len())
        .map(|k| starts[(first + k) % starts.len()])
        .find_map(|b| TcpListener::bind(("127.0.0.1", b)).ok().map(|l| (l, b)))
        .unwrap_or_else(|| {
            panic!(
                "every block of {BLOCK} ports outside {:?} is taken",
                ephemeral_range()
            )
        })
}

/// `n` ports for servers, never handed out twice in this process, outside
/// the kernel's ephemeral range and in blocks no other test process
/// claimed. A port found free by binding port 0 (as before, 2026-11-29)
/// is released before its server binds it, and while a killed server is
/// down its port is free again: the kernel may give it to another
/// process's bind to port 0 or to an outgoing connection, and the
/// restart fails to bind. Outside the ephemeral range the kernel gives
/// out no port by itself. A port some other program holds is skipped.
fn free_ports(n: usize) -> Vec<u16> {
    let ns = std::fs::read_link("/proc/thread-self/ns/net")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut blocks = BLOCKS.lock().unwrap_or_else(|e| e.into_inner());
    let b = blocks.entry(ns).or_insert(Blocks {
        claims: Vec::new(),
        next: 0,
        end: 0,
    });
    let mut ports = Vec::with_capacity(n);
    while ports.len() < n {
        if b.next == b.end {
            let (claim, start) = claim_block();
            b.claims.push(claim);
            b.next = start + 1;
            b.end = start + BLOCK;
        }
        let p = b.next;
        b.next += 1;
        if bindable(p) {
            ports.push(p);
        }
    }
    ports
}

/// Whether a server could bind `port` (with `SO_REUSEADDR`, as it does),
/// tried without listening. A listening probe outlives its drop in every
/// child another test thread is spawning at that moment (a copy of the
/// descriptor until the child's exec closes it) and, listening, keeps the
/// server given the port from binding; a bound one does not, and a bind
/// still fails where anything listens.
fn bindable(port: u16) -> bool {
    tokio::net::TcpSocket::new_v4().is_ok_and(|s| {
        s.set_reuseaddr(true).is_ok() && s.bind(([127, 0, 0, 1], port).into()).is_ok()
    })
}

/// Lines of each server's log a failing test prints.
const TAIL: usize = 200;

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
            // TESSERA_TEST_LOG, when set, is the servers' filter (e.g.
            // `info,tessera_protocols::janus::trace=debug` to trace Janus).
            .env(
                "TESSERA_LOG",
                std::env::var("TESSERA_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
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
                panic!("server s{i} exited: {st}");
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

    /// The last [`TAIL`] lines of every server's log (its stdout and
    /// stderr, over all its starts), each under its name and port.
    pub fn tails(&self) -> String {
        (0..self.ports.len())
            .map(|i| {
                let log = self.log(i);
                let lines: Vec<&str> = log.lines().collect();
                let from = lines.len().saturating_sub(TAIL);
                format!(
                    "--- s{i} (127.0.0.1:{}), last {} of {} lines\n{}\n",
                    self.ports[i],
                    lines.len() - from,
                    lines.len(),
                    lines[from..].join("\n")
                )
            })
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
pub fn finish_within(mut bench: Child, limit: Duration) -> Output {
    let t = Instant::now();
    while bench.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            bench.kill().unwrap();
            let out = bench.wait_with_output().unwrap();
            panic!(
                "bench still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bench.wait_with_output().unwrap()
}

/// The bench's last row, after it exited successfully (within two
/// minutes).
pub fn row(bench: Child, c: &Cluster) -> serde_json::Value {
    let out = finish_within(bench, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "bench failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    c.rows().pop().expect("a row")
}

/// Protocol counter `name` of a bench row.
pub fn counter(row: &serde_json::Value, name: &str) -> u64 {
    row["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name} in {row}"))
}

/// A test that fails with a cluster up prints the tails of its servers'
/// logs and keeps the cluster's directory (logs, write-ahead logs, cluster
/// file) instead of deleting it: whatever failed, the servers' side of it
/// is not lost.
impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.servers.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            self.dir.disable_cleanup(true);
            eprintln!(
                "cluster kept in {}; its servers' logs:\n{}",
                self.dir.path().display(),
                self.tails()
            );
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
