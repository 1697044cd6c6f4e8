//! `tessera server`, `tessera cluster up/down`, `tessera txn`, `tessera bench-net`.

use crate::Failure;
use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_core::codec::DecodeCx;
use tessera_core::ids::Time;
use tessera_core::NodeId;
use tessera_harness::{registry, run};
use tessera_tcp::nullrpc::{Echo, Null, Pinger};
use tessera_tcp::{run_process, ClusterConfig, LocalNode, NetConfig, ProcessSpec, Stop};

type Result<T> = std::result::Result<T, Failure>;

pub fn server(config: &Path, node: &str) -> Result<()> {
    let c = Arc::new(ClusterConfig::load(config)?);
    c.require_node(node)?;
    let spec = tessera_harness::tcp::spec_of(c)?;
    spec.validate()?;
    let entry = registry::find(&spec.protocol)?;
    let wl = run::workload(&spec.workload)?;
    entry.serve(&spec, wl, node)?;
    Ok(())
}

/// `tessera txn`: one built-in key-value transaction through the client
/// library; its result on stdout, one `KEY = VALUE` line per key.
pub fn txn(config: &Path, timeout: Time, host: Option<u32>, command: &[String]) -> Result<()> {
    let call = tessera_client::Call::parse(command)?;
    let c = ClusterConfig::load(config)?;
    let options = tessera_client::Options {
        timeout: Duration::from_nanos(timeout),
        host,
        ..Default::default()
    };
    let client = match tessera_client::Client::connect_with(c, options) {
        Ok(client) => client,
        Err(tessera_client::ClientError::Config(e)) => return Err(e.into()),
        Err(e @ tessera_client::ClientError::Cluster(_)) => {
            return Err(Failure::Usage(e.to_string()))
        }
        Err(e) => return Err(Failure::Run(e.into())),
    };
    let result = client
        .call_blocking(&call)
        .map_err(|e| Failure::Run(e.into()))?;
    println!("{result}");
    Ok(())
}

fn pid_dir(c: &ClusterConfig) -> PathBuf {
    c.cluster.run_dir.join("pids")
}

fn pid_file(c: &ClusterConfig, node: &str) -> PathBuf {
    pid_dir(c).join(format!("{node}.pid"))
}

fn log_file(c: &ClusterConfig, node: &str) -> PathBuf {
    c.cluster.run_dir.join("logs").join(format!("{node}.log"))
}

fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn read_pid(path: &Path) -> Option<i32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn io_fail(what: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure::Run(anyhow::anyhow!("{what} {}: {e}", path.display()))
}

/// The tail of a server's log, for error messages.
fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n  ")
}

pub fn up(config: &Path) -> Result<()> {
    let c = ClusterConfig::load(config)?;
    // Fail before starting anything if the protocol or workload is bad.
    let spec = tessera_harness::tcp::spec_of(Arc::new(c.clone()))?;
    spec.validate()?;
    registry::find(&spec.protocol)?.accepts(&spec)?;
    let exe = std::env::current_exe().map_err(|e| Failure::Run(e.into()))?;
    for d in [pid_dir(&c), c.cluster.run_dir.join("logs")] {
        fs::create_dir_all(&d).map_err(|e| io_fail("cannot create", &d, e))?;
    }
    let mut started = Vec::new();
    for (n, addr) in c.nodes.iter().zip(c.servers()) {
        let pf = pid_file(&c, &n.name);
        if let Some(pid) = read_pid(&pf).filter(|p| alive(*p)) {
            return Err(Failure::Usage(format!(
                "node '{}' is already running (pid {pid}, {}); `tessera cluster down` first",
                n.name,
                pf.display()
            )));
        }
        let lf = log_file(&c, &n.name);
        let log = fs::File::create(&lf).map_err(|e| io_fail("cannot write", &lf, e))?;
        let err = log
            .try_clone()
            .map_err(|e| io_fail("cannot write", &lf, e))?;
        let child = Command::new(&exe)
            .arg("server")
            .arg("--config")
            .arg(config)
            .arg("--node")
            .arg(&n.name)
            .env(
                "TESSERA_LOG",
                std::env::var("TESSERA_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| Failure::Run(anyhow::anyhow!("cannot start {}: {e}", exe.display())))?;
        fs::write(&pf, child.id().to_string()).map_err(|e| io_fail("cannot write", &pf, e))?;
        started.push((n.name.clone(), addr.1, child));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for (name, addr, child) in &mut started {
        loop {
            if TcpStream::connect_timeout(addr, Duration::from_millis(200)).is_ok() {
                println!("{name} up at {addr} (pid {})", child.id());
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let lf = log_file(&c, name);
                return Err(Failure::Run(anyhow::anyhow!(
                    "server {name} exited ({status}); {}:\n  {}",
                    lf.display(),
                    log_tail(&lf)
                )));
            }
            if Instant::now() > deadline {
                return Err(Failure::Run(anyhow::anyhow!(
                    "server {name} does not accept connections at {addr} after 60 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

pub fn down(config: &Path) -> Result<()> {
    let c = ClusterConfig::load(config)?;
    let mut stopping = Vec::new();
    for n in &c.nodes {
        let pf = pid_file(&c, &n.name);
        match read_pid(&pf) {
            Some(pid) if alive(pid) => {
                // SAFETY: sending a signal to a pid we started and recorded.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                stopping.push((n.name.clone(), pid, pf));
            }
            Some(_) => {
                let _ = fs::remove_file(&pf);
            }
            None => {}
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for (name, pid, pf) in stopping {
        while alive(pid) && !reaped(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(pid) && !reaped(pid) {
            eprintln!("{name} (pid {pid}) ignored SIGTERM for 10 s: killing it");
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = fs::remove_file(&pf);
        println!("{name} stopped");
    }
    Ok(())
}

/// True once `pid` is a zombie we may reap (our own child), or gone.
fn reaped(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: WNOHANG never blocks; a pid that is not our child fails.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    r == pid
}

pub fn bench_net(duration: Time, window: u64, serve: Option<SocketAddr>) -> Result<()> {
    let run_for = Duration::from_nanos(duration);
    if let Some(addr) = serve {
        run_process::<Null>(ProcessSpec {
            nodes: vec![LocalNode {
                id: NodeId(0),
                factory: Box::new(|_| Box::new(Echo)),
                wal: None,
                state_dir: None,
            }],
            listen: Some(addr),
            peers: vec![],
            cx: DecodeCx::default(),
            seed: 1,
            stop: Stop::After(run_for + Duration::from_secs(5)),
            net: NetConfig::default(),
            stats_every: None,
            wakeups: None,
        })
        .map_err(|e| Failure::Run(e.into()))?;
        return Ok(());
    }
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| Failure::Run(e.into()))?;
    let exe = std::env::current_exe().map_err(|e| Failure::Run(e.into()))?;
    let mut child = Command::new(exe)
        .args(["bench-net", "--serve", &addr.to_string()])
        .arg("--duration")
        .arg(format!("{}ms", duration / 1_000_000))
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| Failure::Run(e.into()))?;
    while TcpStream::connect(addr).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    let started = Instant::now();
    let out = run_process::<Null>(ProcessSpec {
        nodes: vec![LocalNode {
            id: NodeId(1),
            factory: Box::new(move |_| {
                Box::new(Pinger {
                    target: NodeId(0),
                    window,
                    done: d.clone(),
                })
            }),
            wal: None,
            state_dir: None,
        }],
        listen: None,
        peers: vec![(NodeId(0), addr)],
        cx: DecodeCx::default(),
        seed: 1,
        stop: Stop::After(run_for),
        net: NetConfig::default(),
        stats_every: None,
        wakeups: None,
    })
    .map_err(|e| Failure::Run(e.into()))?;
    let secs = started.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    let n = done.load(Ordering::Relaxed);
    println!(
        "null RPC over loopback TCP, 2 processes, {window} in flight: {:.0} round trips/s \
         ({n} in {secs:.1} s; {} bytes sent by the pinger)",
        n as f64 / secs,
        out.net.bytes
    );
    Ok(())
}
