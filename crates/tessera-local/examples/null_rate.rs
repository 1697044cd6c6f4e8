//! Null-message rates: the ceiling of the `local` runtime.
//!
//! Ping-pong pairs whose nodes do nothing but answer, so every nanosecond is
//! runtime overhead (queueing, batching, channel, clock, dispatch).
//!
//! ```text
//! cargo run --release -p tessera-local --example null_rate [seconds] [filter]
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessera_core::node::{NodeReport, WireSize};
use tessera_core::runtime::{Deployment, NodeFactory, Restart};
use tessera_core::topology::Topology;
use tessera_core::{Ctx, Node, NodeId, TimerId};
use tessera_local::{run, LocalConfig};

struct Null(u64);

impl WireSize for Null {
    fn wire_size(&self) -> usize {
        8
    }
}

struct Pinger {
    peer: NodeId,
    round_trips: u64,
    out: Arc<AtomicU64>,
}

impl Node<Null> for Pinger {
    fn on_start(&mut self, ctx: &mut Ctx<Null>) {
        ctx.send(self.peer, Null(0));
    }
    fn on_message(&mut self, ctx: &mut Ctx<Null>, from: NodeId, msg: Null) {
        self.round_trips += 1;
        ctx.send(from, Null(msg.0 + 1));
    }
    fn on_timer(&mut self, _: &mut Ctx<Null>, _: TimerId) {}
    fn take_report(&mut self) -> NodeReport {
        self.out.fetch_add(self.round_trips, Ordering::Relaxed);
        NodeReport::default()
    }
}

struct Ponger;

impl Node<Null> for Ponger {
    fn on_message(&mut self, ctx: &mut Ctx<Null>, from: NodeId, msg: Null) {
        ctx.send(from, msg);
    }
    fn on_timer(&mut self, _: &mut Ctx<Null>, _: TimerId) {}
}

/// `pairs` pairs; pair `p` is nodes `2p` (pinger) and `2p + 1` (ponger),
/// placed by `place(p) -> (pinger worker, ponger worker)`.
fn bench(
    filter: &str,
    name: &str,
    seconds: f64,
    workers: usize,
    pairs: usize,
    place: impl Fn(usize) -> (usize, usize),
) {
    if !name.contains(filter) {
        return;
    }
    let total = Arc::new(AtomicU64::new(0));
    let mut factories: Vec<NodeFactory<Null>> = Vec::new();
    let mut placement = Vec::new();
    for p in 0..pairs {
        let out = total.clone();
        let peer = NodeId(2 * p as u32 + 1);
        factories.push(Box::new(move |_: Restart| {
            Box::new(Pinger {
                peer,
                round_trips: 0,
                out: out.clone(),
            }) as Box<dyn Node<Null>>
        }));
        factories.push(Box::new(|_: Restart| {
            Box::new(Ponger) as Box<dyn Node<Null>>
        }));
        let (a, b) = place(p);
        placement.push(a);
        placement.push(b);
    }
    let dep = Deployment {
        topology: Arc::new(Topology::new(2 * pairs as u32, 1, 0)),
        factories,
        seed: 1,
        duration: (seconds * 1e9) as u64,
    };
    let cfg = LocalConfig {
        workers,
        placement,
        settle: 0,
    };
    let out = run(dep, &cfg).expect("run");
    let secs = out.elapsed as f64 / 1e9;
    let rt = total.load(Ordering::Relaxed) as f64 / secs;
    let msgs = out.net.messages as f64 / secs;
    println!(
        "{name:<44} {:>7.2} M round trips/s  {:>7.2} M msgs/s  {:>6.0} ns/msg/worker",
        rt / 1e6,
        msgs / 1e6,
        workers as f64 * 1e9 / msgs
    );
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("seconds"))
        .unwrap_or(2.0);
    let filter = std::env::args().nth(2).unwrap_or_default();
    let filter = filter.as_str();
    println!(
        "null-message rates ({seconds} s per line, {} CPUs)",
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );
    bench(
        filter,
        "same worker, 1 pair (1 worker)",
        seconds,
        1,
        1,
        |_| (0, 0),
    );
    bench(
        filter,
        "same worker, 64 pairs (1 worker)",
        seconds,
        1,
        64,
        |_| (0, 0),
    );
    bench(
        filter,
        "cross worker, 1 pair (2 workers)",
        seconds,
        2,
        1,
        |_| (0, 1),
    );
    bench(
        filter,
        "cross worker, 64 pairs (2 workers)",
        seconds,
        2,
        64,
        |_| (0, 1),
    );
    bench(
        filter,
        "cross worker, 64 pairs, both ways (2 workers)",
        seconds,
        2,
        64,
        |p| (p % 2, 1 - p % 2),
    );
    bench(
        filter,
        "same worker, 64 pairs (2 workers, 32 each)",
        seconds,
        2,
        64,
        |p| (p % 2, p % 2),
    );
    bench(
        filter,
        "same worker, 64 pairs (2 workers, contiguous)",
        seconds,
        2,
        64,
        |p| (p / 32, p / 32),
    );
}
