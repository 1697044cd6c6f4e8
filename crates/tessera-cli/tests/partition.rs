//! A network partition between three `tessera server` processes and the
//! bench driver's client host, over real sockets, healed mid-run.
//!
//! The test thread moves into a network namespace of its own
//! (`unshare(CLONE_NEWNET)`, which is per thread), so every process it
//! spawns — the servers, the bench driver, `tc` — shares a private
//! loopback and nothing outside the namespace sees a packet or a rule.
//! The partition cuts one server off: every packet to or from its port is
//! classified by `tc`'s u32 filter into an HTB class of 8 bit/s with a
//! one-packet queue, a black hole (the kernels we run on have no `gact`
//! drop action and no nftables; the class passes at most one packet, and
//! the counters it keeps prove that packets were held back). Where the
//! machine allows no namespace or lacks `ip`/`tc`, the test says so on
//! stderr and passes without running: it cannot be checked there.
//!
//! After the run the isolation check and the lost-write check of
//! `tessera bench --check` must pass over the whole history, and more than
//! a hundred transactions must commit in the measured window, which opens
//! half a second after the partition healed.

mod common;

use common::Cluster;
use std::process::Command;
use std::time::Duration;

/// Runs `script` with `sh -c` in the current thread's namespaces.
fn sh(script: &str) -> Result<String, String> {
    let out = Command::new("sh")
        .args(["-c", script])
        .output()
        .map_err(|e| format!("sh: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("`{script}` failed: {text}"))
    }
}

/// Moves this thread into a new network namespace with its loopback up and
/// checks that `tc` can build the black hole; the reason if not.
fn private_network() -> Result<(), String> {
    // SAFETY: unshare only changes this thread's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        ));
    }
    sh("ip link set lo up")?;
    cut(1)?;
    heal()?;
    Ok(())
}

/// Black-holes every packet from or to `port` on the loopback.
fn cut(port: u16) -> Result<String, String> {
    sh(&format!(
        "tc qdisc add dev lo root handle 1: htb default 1 && \
         tc class add dev lo parent 1: classid 1:1 htb rate 10gbit && \
         tc class add dev lo parent 1: classid 1:2 htb rate 8bit ceil 8bit burst 1 cburst 1 && \
         tc qdisc add dev lo parent 1:2 handle 2: pfifo limit 1 && \
         tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dport {port} 0xffff flowid 1:2 && \
         tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport {port} 0xffff flowid 1:2"
    ))
}

/// Packets the black hole held back or dropped (its HTB class was over its
/// limit, or its queue was full).
fn held_back() -> u64 {
    let stats = sh("tc -s class show dev lo classid 1:2").unwrap_or_default();
    let number_after = |word: &str| {
        stats
            .split(word)
            .nth(1)
            .and_then(|s| {
                s.trim_start()
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    number_after("dropped") + number_after("overlimits")
}

fn heal() -> Result<String, String> {
    sh("tc qdisc del dev lo root")
}

#[test]
fn a_partitioned_server_rejoins_and_the_check_passes() {
    if let Err(why) = private_network() {
        eprintln!("skipped: no private network namespace with tc here ({why})");
        return;
    }
    for protocol in ["occ", "2pl-ww"] {
        let c = Cluster::new(protocol, false);
        // Only what commits after the partition healed is measured.
        let bench = c.bench_with("4s", &["--warmup", "2500ms", "--cooldown", "200ms"]);
        std::thread::sleep(Duration::from_millis(1000));
        cut(c.ports[1]).unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        let held = held_back();
        heal().unwrap();
        let out = bench.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{protocol}: bench failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(held > 0, "{protocol}: the partition held back no packet");
        let rows = c.rows();
        let row = rows.last().unwrap();
        eprintln!(
            "{protocol}: {} packets held back; committed {}, attempts {}, failed {}",
            held, row["committed"], row["attempts"], row["failed"]
        );
        assert_eq!(row["check"], "pass", "{protocol}: {row}");
        assert!(
            row["committed"].as_u64().unwrap() > 100,
            "{protocol}: {row}"
        );
    }
}
