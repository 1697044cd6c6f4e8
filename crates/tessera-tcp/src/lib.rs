//! tessera-tcp: the real-cluster runtime.
//!
//! The same sans-IO nodes the `sim` and `local` runtimes drive, one process
//! per server over TCP: [`process`] runs a process's nodes (their timers,
//! logs and messages), [`net`] its connections, [`frame`] the framing and
//! handshake, and [`config`] reads and validates a cluster file.
//!
//! One thread per process (a tokio current-thread runtime): on the 2-core
//! machines this project measures on, a process per server plus a bench
//! driver already outnumber the cores, and handing messages between threads
//! costs a wake-up each (~17 µs here, DESIGN stack notes).

pub mod config;
pub mod frame;
pub mod net;
pub mod nullrpc;
pub mod process;

pub use config::{ClusterConfig, ConfigError};
pub use net::NetConfig;
pub use process::{
    claim, fetch_store, run_process, Claim, LocalNode, ProcessOutput, ProcessSpec, Stop, TcpError,
    Wakeups, WalSettings,
};
