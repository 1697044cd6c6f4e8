//! tessera-client: run transactions on a running tessera cluster from an
//! application.
//!
//! A [`Client`] is one client host of a cluster file (`[clients] hosts`)
//! running inside the application: the same coordinator state machine the
//! `tessera bench --runtime tcp` driver runs, on the same `tcp` runtime (a
//! thread of its own with a tokio current-thread runtime, connections to
//! every server, a write-ahead log for the coordinator's decisions). Only
//! where transactions come from differs: the application hands them over
//! one call at a time ([`tessera_core::embedded`]).
//!
//! ```no_run
//! use tessera_client::{Call, Client};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect("examples/cluster-3.toml")?;
//! client.call_blocking(&Call::put([("k1", "40")])?)?;
//! client.call_blocking(&Call::incr("k1", 2)?)?;
//! let got = client.call_blocking(&Call::get(["k1", "k2"])?)?;
//! println!("{got}"); // k1 = 42
//!                    // k2 (not found)
//! assert_eq!(got.value("k1").as_deref(), Some(&b"42"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! From async code, [`Client::call`] and [`Client::run`] are `async` (they
//! need a tokio runtime); [`Client::call_blocking`] and
//! [`Client::run_blocking`] must not be called from one.
//!
//! **Procedures.** [`Call`] builds the built-in key-value procedures
//! (`get`, `put`, `incr` on named keys, [`tessera_workloads::kv`]), which
//! every server accepts whatever its workload. [`Client::run`] takes any
//! other [`Txn`] the servers' workload can decode (e.g. a YCSB transaction)
//! and returns its pieces' raw outputs.
//!
//! **Outcomes.** A transaction that loses a conflict is retried with
//! randomized exponential backoff, as the benchmark clients retry, until it
//! commits or [`Options::timeout`] passes (or [`Options::max_attempts`]
//! attempts failed). Everything else is a typed [`TxnError`]: a
//! final abort with its reason, an in-doubt outcome, a timeout, or an
//! unreachable server.
//!
//! **One process per client host.** Two processes running the same client
//! host would mint the same transaction ids, so a client claims its host
//! (a lock in the cluster's run directory) and [`Client::connect`] takes
//! the first free one; raise `[clients] hosts` for more concurrent clients.

use bytes::BytesMut;
use std::fmt;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;
use tessera_core::codec::{encode_txn, DecodeError, EncodeError};
use tessera_core::embedded::{Reply, Request, RetryPolicy, INBOX};
use tessera_core::ids::{Time, MS, US};
pub use tessera_core::txn::{Procedure, Txn, Value};
use tessera_core::{NodeId, TimerId};
use tessera_harness::tcp::Embedding;
use tessera_tcp::{ClusterConfig, TcpError};
use tessera_workloads::kv::{KvError, Op};

pub use tessera_core::txn::AbortReason;

mod call;
pub use call::{Call, CallError, CallResult};

/// How a [`Client`] connects and runs transactions.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long one call may take, retries included (default 5 s).
    pub timeout: Duration,
    /// Attempts before a transaction that keeps aborting is given up
    /// (default: no limit, retried until [`Options::timeout`]; the
    /// benchmark clients stop at 20 as in Janus §6.1, but an application
    /// wants its transaction, not a statistic).
    pub max_attempts: u32,
    /// The client host to run as; `None` (the default): the first one that
    /// no other process runs.
    pub host: Option<u32>,
    /// Check at connect time that every server accepts connections, and
    /// fail with [`ClientError::Unreachable`] if one does not (default
    /// true). Without it, a call against a server that is down ends with
    /// [`TxnError::Unreachable`] when its timeout passes.
    pub probe: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Duration::from_secs(5),
            max_attempts: u32::MAX,
            host: None,
            probe: true,
        }
    }
}

/// Why [`Client::connect`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The cluster file is missing or wrong.
    #[error(transparent)]
    Config(#[from] tessera_tcp::ConfigError),
    /// The cluster file names a protocol or workload that cannot run here.
    #[error("{0}")]
    Cluster(String),
    /// A server does not accept connections.
    #[error("cannot reach node '{node}' at {addr}: {source} (is the cluster up? `tessera cluster up --config ...`)")]
    Unreachable {
        node: String,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// Every client host is run by another process.
    #[error("every client host of {path} is in use by another process ({hosts} hosts); raise [clients] hosts")]
    Busy { path: String, hosts: u32 },
    /// The client host asked for ([`Options::host`]) is run by another
    /// process.
    #[error("client host {host} of {path} is in use by another process")]
    HostBusy { path: String, host: u32 },
    /// The client host could not start (its log, its state directory).
    #[error("the client host could not start: {0}")]
    Start(String),
}

/// Why a transaction did not commit (or its outcome is not known).
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// The transaction could not be built (bad key, duplicate key, ...).
    #[error(transparent)]
    Invalid(#[from] KvError),
    /// The procedure has no wire encoding, so no server could run it.
    #[error(transparent)]
    NotEncodable(#[from] EncodeError),
    /// Aborted for good: the procedure rolled back ([`AbortReason::User`],
    /// never retried), or the last of `attempts` attempts aborted.
    #[error("{procedure} aborted after {attempts} attempt(s): {}", describe(*.reason, .procedure))]
    Aborted {
        procedure: &'static str,
        reason: AbortReason,
        attempts: u32,
    },
    /// It may have committed, but what it read is lost (a participant
    /// restarted between committing it and answering). Not retried.
    #[error("{procedure} is in doubt after {attempts} attempt(s): it may have committed, but its result is lost")]
    InDoubt {
        procedure: &'static str,
        attempts: u32,
    },
    /// The timeout passed first. An attempt may still commit.
    #[error("{procedure} did not finish within {timeout:?} ({attempts} attempt(s){}); it may still commit", last_abort.map(|r| format!(", the last aborted: {}", describe(r, procedure))).unwrap_or_default())]
    Timeout {
        procedure: &'static str,
        timeout: Duration,
        attempts: u32,
        last_abort: Option<AbortReason>,
    },
    /// The timeout passed and a server does not accept connections.
    #[error("{procedure} did not finish: cannot reach node '{node}' at {addr}: {source}")]
    Unreachable {
        procedure: &'static str,
        node: String,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The client host's thread is gone (it failed; see the log).
    #[error("the client host stopped: {0}")]
    Stopped(String),
    /// The servers answered with outputs this client cannot read.
    #[error("malformed result: {0}")]
    Result(#[from] DecodeError),
}

/// A reason as a user reads it.
fn describe(reason: AbortReason, procedure: &str) -> String {
    match reason {
        AbortReason::LockConflict => "lock conflict".into(),
        AbortReason::Validation => "validation failed (a value it read changed)".into(),
        AbortReason::Timeout => "a participant timed out".into(),
        AbortReason::Stale => "it read stale values".into(),
        AbortReason::User if procedure == Op::Incr.procedure() => {
            "rolled back: the value is not a decimal integer, or the sum overflows".into()
        }
        AbortReason::User => "the procedure rolled back".into(),
    }
}

/// A connection to a cluster: one client host running in this process.
///
/// `Client` is `Send + Sync`: share it (e.g. in an `Arc`) and call it
/// from several threads or tasks at once; calls run side by side. Dropping
/// it stops the host (its log is checkpointed) and joins its thread.
pub struct Client {
    requests: Option<mpsc::Sender<Request>>,
    wake: Option<tokio::sync::mpsc::UnboundedSender<(NodeId, TimerId)>>,
    node: NodeId,
    host: u32,
    shards: u32,
    servers: Arc<Vec<(String, SocketAddr)>>,
    options: Options,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

/// How long [`Client::connect`] waits for its host to start.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a probe waits for a server to accept a connection.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

impl Client {
    /// Connect to the cluster of the cluster file at `path`, with the
    /// default [`Options`].
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        Self::connect_with(ClusterConfig::load(path.as_ref())?, Options::default())
    }

    /// Connect to the cluster `config` describes.
    pub fn connect_with(config: ClusterConfig, options: Options) -> Result<Client, ClientError> {
        let cluster = |e: anyhow::Error| ClientError::Cluster(format!("{e:#}"));
        let config = Arc::new(config);
        let spec = tessera_harness::tcp::spec_of(config.clone()).map_err(cluster)?;
        spec.validate().map_err(|e| cluster(e.into()))?;
        let entry = Arc::new(
            tessera_harness::registry::find(&spec.protocol).map_err(|e| cluster(e.into()))?,
        );
        let workload = tessera_harness::run::workload(&spec.workload).map_err(cluster)?;
        let servers: Arc<Vec<(String, SocketAddr)>> = Arc::new(
            config
                .nodes
                .iter()
                .zip(config.servers())
                .map(|(n, (_, a))| (n.name.clone(), a))
                .collect(),
        );
        if options.probe {
            if let Some((node, addr, source)) = probe(&servers) {
                return Err(ClientError::Unreachable { node, addr, source });
            }
        }
        let topology = config.topology();
        let hosts = topology.client_hosts().count() as u32;
        let candidates: Vec<u32> = match options.host {
            Some(h) => vec![h],
            None => (0..hosts).collect(),
        };
        for host in candidates {
            let node =
                tessera_harness::deploy::client_host_id(&topology, host).ok_or_else(|| {
                    ClientError::Cluster(format!(
                        "{}: client host {host} does not exist ([clients] hosts = {hosts})",
                        config.path.display()
                    ))
                })?;
            let (requests, inbox) = mpsc::channel();
            let (wake, wakeups) = tokio::sync::mpsc::unbounded_channel();
            let (ready_tx, ready_rx) = mpsc::channel();
            let embedding = Embedding {
                host,
                policy: RetryPolicy {
                    max_attempts: options.max_attempts.max(1),
                    backoff_base: 20 * US,
                    backoff_cap: 5 * MS,
                },
                inbox,
                wakeups,
                ready: Box::new(move || {
                    let _ = ready_tx.send(());
                }),
            };
            let (entry, spec, workload) = (entry.clone(), spec.clone(), workload.clone());
            let thread = std::thread::Builder::new()
                .name(format!("tessera-client-{host}"))
                .spawn(move || entry.embed(&spec, workload, embedding))
                .map_err(|e| ClientError::Start(e.to_string()))?;
            match ready_rx.recv_timeout(START_TIMEOUT) {
                Ok(()) => {
                    return Ok(Client {
                        requests: Some(requests),
                        wake: Some(wake),
                        node,
                        host,
                        shards: config.shards.len() as u32,
                        servers,
                        options,
                        thread: Some(thread),
                    })
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(ClientError::Start(format!(
                        "client host {host} did not start within {START_TIMEOUT:?}"
                    )))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let e = match thread.join() {
                        Ok(Err(e)) => e,
                        Ok(Ok(())) => anyhow::anyhow!("it stopped at once"),
                        Err(_) => anyhow::anyhow!("its thread panicked"),
                    };
                    if !matches!(e.downcast_ref(), Some(TcpError::Busy { .. })) {
                        return Err(ClientError::Start(format!("{e:#}")));
                    }
                }
            }
        }
        let path = config.path.display().to_string();
        Err(match options.host {
            Some(host) => ClientError::HostBusy { path, host },
            None => ClientError::Busy { path, hosts },
        })
    }

    /// The client host this client runs as.
    pub fn host(&self) -> u32 {
        self.host
    }

    /// The cluster's shard count (what [`Call`]'s keys are mapped over).
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// Run `txn` and return its pieces' outputs, in piece order.
    pub async fn run(&self, txn: Txn) -> Result<Vec<Value>, TxnError> {
        let name = txn.name();
        let rx = self.submit(txn)?;
        let reply = rx.await.map_err(|_| self.stopped())?;
        let servers = self.servers.clone();
        let unreachable = match reply {
            Reply::TimedOut { .. } => tokio::task::spawn_blocking(move || probe(&servers))
                .await
                .ok()
                .flatten(),
            _ => None,
        };
        self.conclude(name, reply, unreachable)
    }

    /// [`Client::run`] for code outside an async runtime.
    pub fn run_blocking(&self, txn: Txn) -> Result<Vec<Value>, TxnError> {
        let name = txn.name();
        let rx = self.submit(txn)?;
        let reply = rx.blocking_recv().map_err(|_| self.stopped())?;
        let unreachable = match reply {
            Reply::TimedOut { .. } => probe(&self.servers),
            _ => None,
        };
        self.conclude(name, reply, unreachable)
    }

    /// Run a built-in key-value procedure.
    pub async fn call(&self, call: &Call) -> Result<CallResult, TxnError> {
        let txn = call.txn(self.shards)?;
        let outputs = self.run(txn.clone()).await?;
        call.result(&txn, &outputs)
    }

    /// [`Client::call`] for code outside an async runtime.
    pub fn call_blocking(&self, call: &Call) -> Result<CallResult, TxnError> {
        let txn = call.txn(self.shards)?;
        let outputs = self.run_blocking(txn.clone())?;
        call.result(&txn, &outputs)
    }

    /// Hand `txn` to the host and wake it.
    fn submit(&self, txn: Txn) -> Result<tokio::sync::oneshot::Receiver<Reply>, TxnError> {
        // A procedure without a wire form would be dropped by the network
        // layer and time out: refuse it here instead.
        encode_txn(txn.as_ref(), &mut BytesMut::new())?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let request = Request {
            txn,
            timeout: self.options.timeout.as_nanos().min(u128::from(Time::MAX)) as Time,
            reply: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        };
        let sent = self
            .requests
            .as_ref()
            .is_some_and(|r| r.send(request).is_ok())
            && self
                .wake
                .as_ref()
                .is_some_and(|w| w.send((self.node, INBOX)).is_ok());
        if sent {
            Ok(rx)
        } else {
            Err(self.stopped())
        }
    }

    fn stopped(&self) -> TxnError {
        TxnError::Stopped(format!(
            "client host {} is no longer running (see the log above)",
            self.host
        ))
    }

    /// The end of a call; `unreachable` is a server found down after a
    /// timeout.
    fn conclude(
        &self,
        procedure: &'static str,
        reply: Reply,
        unreachable: Option<(String, SocketAddr, std::io::Error)>,
    ) -> Result<Vec<Value>, TxnError> {
        match reply {
            Reply::Committed { outputs, .. } => Ok(outputs),
            Reply::Aborted { reason, attempts } => Err(TxnError::Aborted {
                procedure,
                reason,
                attempts,
            }),
            Reply::InDoubt { attempts } => Err(TxnError::InDoubt {
                procedure,
                attempts,
            }),
            Reply::TimedOut {
                attempts,
                last_abort,
            } => Err(match unreachable {
                Some((node, addr, source)) => TxnError::Unreachable {
                    procedure,
                    node,
                    addr,
                    source,
                },
                None => TxnError::Timeout {
                    procedure,
                    timeout: self.options.timeout,
                    attempts,
                    last_abort,
                },
            }),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Closing the wake-up channel ends the host's process loop.
        self.requests.take();
        self.wake.take();
        if let Some(t) = self.thread.take() {
            if let Ok(Err(e)) = t.join() {
                eprintln!(
                    "tessera-client: client host {} ended with: {e:#}",
                    self.host
                );
            }
        }
    }
}

/// The first server that does not accept a connection, with the error.
fn probe(servers: &[(String, SocketAddr)]) -> Option<(String, SocketAddr, std::io::Error)> {
    servers.iter().find_map(|(name, addr)| {
        TcpStream::connect_timeout(addr, PROBE_TIMEOUT)
            .err()
            .map(|e| (name.clone(), *addr, e))
    })
}

/// A value as text: itself when it is printable UTF-8, else hex.
pub fn display_value(v: &[u8]) -> String {
    match std::str::from_utf8(v) {
        Ok(s) if !s.chars().any(char::is_control) => s.to_string(),
        _ => {
            let hex: String = v.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("host", &self.host)
            .field("node", &self.node)
            .field("shards", &self.shards)
            .finish()
    }
}

#[cfg(test)]
mod tests;
