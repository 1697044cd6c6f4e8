//! Two processes (threads here) over loopback TCP.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_core::codec::DecodeCx;
use tessera_core::NodeId;
use tessera_tcp::nullrpc::{Echo, Null, Pinger};
use tessera_tcp::{run_process, LocalNode, NetConfig, ProcessSpec, Stop};

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn echo_server(addr: SocketAddr, run_for: Duration) -> std::thread::JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let out = run_process::<Null>(ProcessSpec {
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
            stop: Stop::After(run_for),
            net: NetConfig::default(),
            stats_every: None,
            wakeups: None,
        })
        .unwrap();
        (out.net.messages, out.rejected)
    })
}

fn pinger(addr: SocketAddr, id: u32, run_for: Duration, window: u64) -> Arc<AtomicU64> {
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    run_process::<Null>(ProcessSpec {
        nodes: vec![LocalNode {
            id: NodeId(id),
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
    .unwrap();
    done
}

#[test]
fn round_trips_flow_and_bad_peers_are_cut_off_without_hurting_others() {
    let addr = free_addr();
    let server = echo_server(addr, Duration::from_millis(2500));
    std::thread::sleep(Duration::from_millis(100));
    // Bad peers: garbage, an oversized frame, another protocol version.
    let mut junk = Vec::new();
    for bytes in [
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        u32::MAX.to_le_bytes().to_vec(),
        [&7u32.to_le_bytes()[..], b"TSRA", &[99, 0, 0]].concat(),
    ] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&bytes).unwrap();
        junk.push(s);
    }
    let done = pinger(addr, 1, Duration::from_millis(1500), 16);
    let n = done.load(Ordering::Relaxed);
    assert!(n > 100, "only {n} round trips in 1.5 s");
    let (echoed, rejected) = server.join().unwrap();
    assert_eq!(rejected, 3, "each bad peer is cut off");
    assert!(echoed >= n, "server sent {echoed} answers for {n} received");
}

#[test]
fn a_client_reconnects_to_a_server_that_starts_late() {
    let addr = free_addr();
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        echo_server(addr, Duration::from_millis(1500))
            .join()
            .unwrap()
    });
    let done = pinger(addr, 1, Duration::from_millis(1500), 4);
    assert!(done.load(Ordering::Relaxed) > 10);
    late.join().unwrap();
}
