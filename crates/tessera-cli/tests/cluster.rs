//! Multi-process tests: three `tessera server` processes on loopback, a
//! `tessera bench --runtime tcp` driver, and kill -9 of a server mid-run.
//!
//! `TESSERA_KILL_RUNS` (default 1) sets how many kill/restart runs each
//! protocol gets; CI's acceptance is 20 in a row.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tessera");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Cluster {
    dir: tempfile::TempDir,
    config: PathBuf,
    ports: Vec<u16>,
    servers: Vec<Option<Child>>,
}

impl Cluster {
    fn new(protocol: &str, fsync: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut text = format!(
            r#"
[cluster]
protocol = "{protocol}"
run_dir = "run"
[workload]
name = "ycsb"
partitions = 3
keys_per_partition = 2000
multi_partition = 0.3
zipf_theta = 0.6
[clients]
clients = 12
[wal]
fsync = {fsync}
checkpoint_mb = 1
[net]
stats_every_s = 0
"#
        );
        for (i, p) in ports.iter().enumerate() {
            text += &format!(
                "[[nodes]]\nname = \"s{i}\"\naddr = \"127.0.0.1:{p}\"\n[[shards]]\nreplicas = [\"s{i}\"]\n"
            );
        }
        let config = dir.path().join("cluster.toml");
        std::fs::write(&config, text).unwrap();
        let mut c = Cluster {
            dir,
            config,
            ports,
            servers: Vec::new(),
        };
        for i in 0..3 {
            let child = c.spawn(i);
            c.servers.push(Some(child));
        }
        for i in 0..3 {
            c.wait_up(i);
        }
        c
    }

    fn spawn(&self, i: usize) -> Child {
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

    fn wait_up(&mut self, i: usize) {
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

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("s{i}.log"))).unwrap_or_default()
    }

    fn bench(&self, duration: &str) -> Child {
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
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn kill9(&mut self, i: usize) {
        let mut c = self.servers[i].take().unwrap();
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
    }

    fn restart(&mut self, i: usize) {
        self.servers[i] = Some(self.spawn(i));
        self.wait_up(i);
    }

    fn rows(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.path().join("rows.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.servers.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn finished(bench: Child, cluster: &Cluster) -> Output {
    let out = bench.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench failed: {stderr}\n{}\nlogs:\n{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        cluster.log(0),
        cluster.log(1),
        cluster.log(2)
    );
    out
}

fn committed(rows: &[serde_json::Value]) -> u64 {
    rows.last().unwrap()["committed"].as_u64().unwrap()
}

#[test]
fn three_servers_run_ycsb_with_occ_and_2pl_and_the_check_passes() {
    for protocol in ["occ", "2pl-ww"] {
        let c = Cluster::new(protocol, true);
        finished(c.bench("2s"), &c);
        let rows = c.rows();
        assert_eq!(
            rows.last().unwrap()["check"],
            "pass",
            "{protocol}: {rows:?}"
        );
        assert!(committed(&rows) > 100, "{protocol}: {rows:?}");
    }
}

fn kill_runs() -> usize {
    std::env::var("TESSERA_KILL_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

#[test]
fn a_server_killed_mid_run_recovers_and_no_committed_write_is_lost() {
    for run in 0..kill_runs() {
        for protocol in ["occ", "2pl-ww"] {
            let mut c = Cluster::new(protocol, false);
            let bench = c.bench("4s");
            std::thread::sleep(Duration::from_millis(1200 + 100 * (run as u64 % 7)));
            let victim = 1 + run % 2;
            c.kill9(victim);
            std::thread::sleep(Duration::from_millis(200));
            c.restart(victim);
            finished(bench, &c);
            let rows = c.rows();
            let row = rows.last().unwrap();
            assert_eq!(row["check"], "pass", "run {run} {protocol}: {row}");
            assert!(committed(&rows) > 100, "run {run} {protocol}: {row}");
            assert!(
                c.log(victim).contains("recovered log"),
                "s{victim} did not replay its log:\n{}",
                c.log(victim)
            );
        }
    }
}

#[test]
fn cluster_files_with_mistakes_are_rejected_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.toml");
    let write = |s: &str| std::fs::write(&f, s).unwrap();
    let run = |args: &[&str], f: &Path| {
        let out = Command::new(BIN).args(args).arg(f).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    write(
        "[cluster]\nprotocol = \"occ\"\n[workload]\nname = \"ycsb\"\n[[nodes]]\nname = \"a\"\naddr = \"127.0.0.1:1\"\n[[nodes]]\nname = \"a\"\naddr = \"127.0.0.1:2\"\n[[shards]]\nreplicas = [\"a\"]\n",
    );
    let (code, err) = run(&["cluster", "up", "--config"], &f);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("duplicate node name 'a'"), "{err}");
    write(
        "[cluster]\nprotocol = \"paxos\"\n[workload]\nname = \"ycsb\"\n[[nodes]]\nname = \"a\"\naddr = \"127.0.0.1:1\"\n[[shards]]\nreplicas = [\"a\"]\n",
    );
    let (code, err) = run(&["cluster", "up", "--config"], &f);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("paxos") && err.contains("occ"), "{err}");
}
