//! What needs no cluster: parsing, validation, printing, and the typed
//! errors of a cluster that is not there.

use super::*;

fn parse(s: &str) -> Result<Call, CallError> {
    Call::parse(&s.split_whitespace().collect::<Vec<_>>())
}

#[test]
fn shell_commands_parse() {
    assert_eq!(
        parse("get k1 k2").unwrap(),
        Call::Get(vec!["k1".into(), "k2".into()])
    );
    assert_eq!(
        parse("put a=1 b=x=y").unwrap(),
        Call::Put(vec![
            ("a".into(), Value::from("1")),
            ("b".into(), Value::from("x=y"))
        ])
    );
    assert_eq!(
        parse("incr c").unwrap(),
        Call::Incr {
            key: "c".into(),
            by: 1
        }
    );
    assert_eq!(
        parse("incr c -5").unwrap(),
        Call::Incr {
            key: "c".into(),
            by: -5
        }
    );
}

#[test]
fn bad_commands_say_what_is_wrong() {
    let err = |s: &str| parse(s).unwrap_err().to_string();
    assert_eq!(parse("").unwrap_err(), CallError::Missing);
    assert!(err("delete k").contains("unknown command 'delete'"));
    assert!(err("get").contains("no key given"));
    assert!(err("put k").contains("'k' is not KEY=VALUE"));
    assert!(err("put").contains("no KEY=VALUE"));
    assert!(err("incr k five").contains("'five' is not a 64-bit integer"));
    assert!(err("incr k 1 2").contains("at most 2"));
    assert!(err("get a b!c").contains("bad key 'b!c'"));
    assert!(err("put a=1 a=2").contains("'a' is named twice"));
    assert!(err("put =1").contains("bad key ''"));
}

#[test]
fn results_print_one_line_per_key() {
    let r = CallResult::Read(vec![
        ("k1".into(), Some(Value::from("42"))),
        ("k2".into(), None),
        ("k3".into(), Some(Value::from(vec![0u8, 255]))),
    ]);
    assert_eq!(r.to_string(), "k1 = 42\nk2 (not found)\nk3 = 0x00ff");
    assert_eq!(r.value("k1"), Some(Value::from("42")));
    assert_eq!(r.value("k2"), None);
    let r = CallResult::Incremented {
        key: "c".into(),
        value: -3,
    };
    assert_eq!(r.to_string(), "c = -3");
    assert_eq!(r.value("c"), Some(Value::from("-3")));
}

/// A cluster file whose three servers listen nowhere (ports bound and
/// released, so nothing accepts).
fn dead_cluster(dir: &Path) -> ClusterConfig {
    let mut text = String::from(
        "[cluster]\nprotocol = \"occ\"\nrun_dir = \"run\"\n[workload]\nname = \"ycsb\"\npartitions = 3\nkeys_per_partition = 10\n[wal]\nfsync = false\n",
    );
    for i in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        text += &format!(
            "[[nodes]]\nname = \"s{i}\"\naddr = \"127.0.0.1:{port}\"\n[[shards]]\nreplicas = [\"s{i}\"]\n"
        );
    }
    let path = dir.join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    ClusterConfig::load(&path).unwrap()
}

#[test]
fn connecting_to_a_cluster_that_is_down_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let e = Client::connect_with(dead_cluster(dir.path()), Options::default()).unwrap_err();
    assert!(
        matches!(e, ClientError::Unreachable { ref node, .. } if node == "s0"),
        "{e}"
    );
    assert!(e.to_string().contains("cannot reach node 's0'"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_call_against_a_cluster_that_is_down_ends_unreachable_at_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        timeout: Duration::from_millis(300),
        probe: false,
        ..Options::default()
    };
    let client = Client::connect_with(dead_cluster(dir.path()), options).unwrap();
    let t = std::time::Instant::now();
    let e = client
        .call_blocking(&Call::incr("c", 1).unwrap())
        .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, TxnError::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains("kv.incr did not finish"), "{e}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[test]
fn a_second_client_takes_the_next_free_host_and_a_third_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = dead_cluster(dir.path());
    config.clients.hosts = 2;
    let options = Options {
        probe: false,
        ..Options::default()
    };
    let a = Client::connect_with(config.clone(), options.clone()).unwrap();
    let b = Client::connect_with(config.clone(), options.clone()).unwrap();
    assert_eq!((a.host(), b.host()), (0, 1));
    let e = Client::connect_with(config.clone(), options.clone()).unwrap_err();
    assert!(matches!(e, ClientError::Busy { hosts: 2, .. }), "{e}");
    let e = Client::connect_with(
        config.clone(),
        Options {
            host: Some(1),
            ..options.clone()
        },
    )
    .unwrap_err();
    assert!(matches!(e, ClientError::HostBusy { host: 1, .. }), "{e}");
    drop(a);
    let c = Client::connect_with(config, options).unwrap();
    assert_eq!(c.host(), 0, "a dropped client frees its host");
}
