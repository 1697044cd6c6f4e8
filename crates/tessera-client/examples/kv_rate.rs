//! Calls per second through the client library against a running cluster:
//! one caller in a loop (latency of a call), then many concurrent callers
//! in one client (throughput of one client host).
//!
//! ```sh
//! tessera cluster up --config examples/cluster-3.toml
//! cargo run --release -p tessera-client --example kv_rate -- examples/cluster-3.toml [SECONDS] [CALLERS]
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_client::{Call, Client};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let config = args
        .next()
        .ok_or("usage: kv_rate CLUSTER.toml [SECONDS] [CALLERS]")?;
    let secs: u64 = args.next().map_or(Ok(3), |s| s.parse())?;
    let callers: usize = args.next().map_or(Ok(64), |s| s.parse())?;
    let client = Arc::new(Client::connect(&config)?);
    let run_for = Duration::from_secs(secs);

    // One caller: incr of one key, then a 3-key get spanning shards.
    for call in [
        Call::incr("rate:seq", 1)?,
        Call::get(["rate:a", "rate:b", "rate:c"])?,
    ] {
        let mut lat = Vec::new();
        let start = Instant::now();
        while start.elapsed() < run_for {
            let t = Instant::now();
            client.call_blocking(&call)?;
            lat.push(t.elapsed());
        }
        lat.sort();
        println!(
            "1 caller, {call:?}: {:.0} calls/s, p50 {:?}, p99 {:?}",
            lat.len() as f64 / start.elapsed().as_secs_f64(),
            lat[lat.len() / 2],
            lat[lat.len() * 99 / 100]
        );
    }

    // Many callers, each incrementing its own key (no conflicts).
    let done = Arc::new(AtomicU64::new(0));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let start = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = (0..callers)
            .map(|i| {
                let (client, done) = (client.clone(), done.clone());
                tokio::spawn(async move {
                    let call = Call::incr(format!("rate:{i}"), 1).expect("a valid key");
                    while start.elapsed() < run_for {
                        if client.call(&call).await.is_ok() {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
    println!(
        "{callers} concurrent callers, incr of own key: {:.0} commits/s",
        done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
    );
    Ok(())
}
