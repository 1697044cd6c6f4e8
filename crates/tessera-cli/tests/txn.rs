//! The client library and `tessera txn` against three `tessera server`
//! processes on loopback: what is written is read back, increments add
//! up (also when concurrent), and failures exit non-zero with the reason.

mod common;

use common::{Cluster, BIN};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_client::{AbortReason, Call, Client, TxnError, Value};

/// `tessera txn --config FILE ARGS...`: exit code, stdout, stderr.
fn txn(config: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .arg("txn")
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn value(client: &Client, key: &str) -> Option<Value> {
    client
        .call_blocking(&Call::get([key]).unwrap())
        .unwrap()
        .value(key)
}

#[test]
fn put_get_and_incr_through_the_library_and_the_shell() {
    for protocol in ["occ", "2pl-ww"] {
        let c = Cluster::new(protocol, false);
        {
            let client = Client::connect(&c.config).unwrap();
            // Twenty keys span the three shards: one piece per shard.
            let pairs: Vec<(String, String)> = (0..20)
                .map(|i| (format!("k{i}"), format!("v{i}")))
                .collect();
            client
                .call_blocking(&Call::put(pairs.clone()).unwrap())
                .unwrap();
            let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
            let got = client.call_blocking(&Call::get(keys).unwrap()).unwrap();
            for (k, v) in &pairs {
                assert_eq!(got.value(k), Some(Value::from(v.clone())), "{protocol} {k}");
            }
            assert_eq!(value(&client, "never-written"), None);

            client
                .call_blocking(&Call::put([("n", "40")]).unwrap())
                .unwrap();
            for want in [41, 42] {
                let r = client.call_blocking(&Call::incr("n", 1).unwrap()).unwrap();
                assert_eq!(r.value("n"), Some(Value::from(want.to_string())));
            }
            assert_eq!(value(&client, "n"), Some(Value::from("42")), "{protocol}");

            // Not a number: the procedure rolls back, once, nothing written.
            let e = client
                .call_blocking(&Call::incr("k0", 1).unwrap())
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    TxnError::Aborted {
                        reason: AbortReason::User,
                        attempts: 1,
                        ..
                    }
                ),
                "{protocol}: {e}"
            );
            assert_eq!(value(&client, "k0"), Some(Value::from("v0")));
        }
        // The library's client is gone, its host free: the shell's turn.
        let (code, out, err) = txn(&c.config, &["get", "n", "k3", "nope"]);
        assert_eq!(code, Some(0), "{protocol}: {err}");
        assert_eq!(out, "n = 42\nk3 = v3\nnope (not found)\n");
        let (code, out, err) = txn(&c.config, &["incr", "n"]);
        assert_eq!((code, out.as_str()), (Some(0), "n = 43\n"), "{err}");
        let (code, out, err) = txn(&c.config, &["incr", "n", "-45"]);
        assert_eq!((code, out.as_str()), (Some(0), "n = -2\n"), "{err}");
        let (code, out, err) = txn(&c.config, &["put", "greeting=hello world", "x=1"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out, "greeting = hello world\nx = 1\n");
        let (_, out, _) = txn(&c.config, &["get", "greeting"]);
        assert_eq!(out, "greeting = hello world\n");

        for (args, want, says) in [
            (&["incr", "greeting"][..], 1, "not a decimal integer"),
            (&["get", "bad key"], 2, "bad key 'bad key'"),
            (&["delete", "k"], 2, "unknown command 'delete'"),
            (&["put", "novalue"], 2, "'novalue' is not KEY=VALUE"),
        ] {
            let (code, _, err) = txn(&c.config, args);
            assert_eq!(code, Some(want), "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {err}");
        }
    }
}

#[test]
fn concurrent_async_increments_all_count() {
    let c = Cluster::new("2pl-nowait", false);
    let client = Arc::new(Client::connect(&c.config).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (tasks, each) = (8, 10);
    rt.block_on(async {
        let mut handles = Vec::new();
        for _ in 0..tasks {
            let client = client.clone();
            handles.push(tokio::spawn(async move {
                for _ in 0..each {
                    client.call(&Call::incr("hot", 1).unwrap()).await.unwrap();
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    assert_eq!(
        value(&client, "hot"),
        Some(Value::from((tasks * each).to_string()))
    );
}

#[test]
fn txn_against_a_cluster_that_is_down_exits_1_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.path().join("cluster.toml");
    std::fs::write(
        &config,
        format!(
            "[cluster]\nprotocol = \"occ\"\nrun_dir = \"run\"\n[workload]\nname = \"ycsb\"\n\
             [[nodes]]\nname = \"s0\"\naddr = \"127.0.0.1:{port}\"\n[[shards]]\nreplicas = [\"s0\"]\n"
        ),
    )
    .unwrap();
    let t = Instant::now();
    let (code, _, err) = txn(&config, &["get", "k"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("cannot reach node 's0'"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(5));
}
