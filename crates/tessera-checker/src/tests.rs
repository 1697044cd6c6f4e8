//! Whole-checker tests: hand-built histories with known answers, scale, and
//! property tests against a serial store and brute-force oracles.

use crate::testkit::*;
use crate::{check, write_elle, Checker, EdgeKind, Level, Violation};
use proptest::prelude::*;
use std::time::{Duration, Instant};
use tessera_core::history::{History, Outcome};
use tessera_core::Time;

fn cycle_kinds(v: &Violation) -> Vec<EdgeKind> {
    match v {
        Violation::Cycle { edges } => edges.iter().map(|e| e.kind).collect(),
        other => panic!("expected a cycle, got {other}"),
    }
}

fn ok_at(h: &History) -> [bool; 3] {
    let c = Checker::new(h);
    Level::ALL.map(|l| c.check(l).ok)
}

#[test]
fn serial_history_passes_every_level() {
    let h = history(vec![
        txn(1, 0, 10, &[(1, 0)], &[1]),
        txn(2, 20, 30, &[(1, 1), (2, 0)], &[2]),
        txn(3, 40, 50, &[(1, 1), (2, 2)], &[]),
        txn(4, 60, 70, &[(1, 1), (2, 2)], &[1, 2]),
    ]);
    for level in Level::ALL {
        let r = check(&h, level);
        assert!(r.ok, "{r}");
        assert_eq!(r.committed, 4);
        assert!(r.unordered_writes.is_empty());
    }
}

#[test]
fn empty_history_passes() {
    for level in Level::ALL {
        assert!(check(&History::default(), level).ok);
    }
}

#[test]
fn lost_update_is_caught() {
    // T1 and T2 both read x's initial version and both overwrite it.
    let h = history(vec![
        txn(1, 0, 10, &[(1, 0)], &[1]),
        txn(2, 5, 15, &[(1, 0)], &[1]),
        txn(3, 20, 30, &[(1, 2)], &[]),
    ]);
    for level in Level::ALL {
        let r = check(&h, level);
        assert!(!r.ok);
        assert!(
            r.violations.contains(&Violation::LostUpdate {
                column: None,
                key: key(1),
                version: ver(0),
                first: tid(1),
                second: tid(2),
            }),
            "{r}"
        );
    }
}

#[test]
fn write_skew_is_snapshot_isolation_but_not_serializable() {
    // Each reads both x and y as initial, then writes a different one.
    let h = history(vec![
        txn(1, 0, 10, &[(1, 0), (2, 0)], &[1]),
        txn(2, 0, 10, &[(1, 0), (2, 0)], &[2]),
    ]);
    assert!(check(&h, Level::SnapshotIsolation).ok);
    let r = check(&h, Level::Serializable);
    assert_eq!(r.violations.len(), 1, "{r}");
    assert_eq!(r.violations[0].name(), "G2");
    assert_eq!(cycle_kinds(&r.violations[0]), [EdgeKind::Rw, EdgeKind::Rw]);
    assert!(!check(&h, Level::StrictSerializable).ok);
}

#[test]
fn read_skew_is_not_snapshot_isolation() {
    // T2 updates x and y; T1 sees the old x but the new y.
    let h = history(vec![
        txn(1, 0, 30, &[(1, 0), (2, 2)], &[]),
        txn(2, 10, 20, &[(1, 0), (2, 0)], &[1, 2]),
    ]);
    let r = check(&h, Level::SnapshotIsolation);
    assert_eq!(r.violations.len(), 1, "{r}");
    assert_eq!(r.violations[0].name(), "G-single");
    assert!(!check(&h, Level::Serializable).ok);
}

#[test]
fn stale_read_fails_only_strict_serializability() {
    // T2 starts after T1 committed x, yet reads x's initial version.
    let h = history(vec![
        txn(1, 0, 10, &[(1, 0)], &[1]),
        txn(2, 20, 30, &[(1, 0)], &[]),
    ]);
    assert!(check(&h, Level::Serializable).ok);
    assert!(check(&h, Level::SnapshotIsolation).ok);
    let r = check(&h, Level::StrictSerializable);
    assert_eq!(r.violations.len(), 1, "{r}");
    assert_eq!(r.violations[0].name(), "G-single-realtime");
    assert_eq!(
        r.violations[0].to_string(),
        format!(
            "G-single-realtime cycle: {:?} -rt-> {:?} -rw(1:1)-> {:?}",
            tid(1),
            tid(2),
            tid(1)
        )
    );
    // Overlapping in time, the same reads are fine.
    let h = history(vec![
        txn(1, 0, 20, &[(1, 0)], &[1]),
        txn(2, 10, 30, &[(1, 0)], &[]),
    ]);
    assert!(check(&h, Level::StrictSerializable).ok);
}

#[test]
fn same_process_order_counts_even_at_equal_times() {
    // The client re-issues at the instant its previous commit returned.
    let mut t2 = txn(2, 10, 20, &[(1, 0)], &[]);
    t2.process = 1;
    let h = history(vec![txn(1, 0, 10, &[(1, 0)], &[1]), t2.clone()]);
    assert!(!check(&h, Level::StrictSerializable).ok);
    // Another client starting at that instant may be ordered either way.
    t2.process = 2;
    let h = history(vec![txn(1, 0, 10, &[(1, 0)], &[1]), t2]);
    assert!(check(&h, Level::StrictSerializable).ok);
}

#[test]
fn aborted_and_garbage_reads_are_g1a() {
    let mut t1 = txn(1, 0, 10, &[(1, 0)], &[1]);
    t1.outcome = Outcome::Aborted;
    let h = history(vec![
        t1,
        txn(2, 20, 30, &[(1, 1)], &[]),
        txn(3, 20, 30, &[(2, 99)], &[]),
    ]);
    for level in Level::ALL {
        let r = check(&h, level);
        assert_eq!(r.committed, 2);
        assert_eq!(
            r.violations,
            [
                Violation::AbortedRead {
                    column: None,
                    reader: tid(2),
                    key: key(1),
                    version: ver(1),
                    writer: tid(1),
                },
                Violation::GarbageRead {
                    column: None,
                    reader: tid(3),
                    key: key(2),
                    version: ver(99),
                },
            ]
        );
        assert!(r.violations.iter().all(|v| v.name() == "G1a"));
    }
    // Reading a version of a key the writer never wrote is garbage too.
    let h = history(vec![
        txn(1, 0, 10, &[(1, 0)], &[1]),
        txn(2, 20, 30, &[(2, 1)], &[]),
    ]);
    assert_eq!(check(&h, Level::Serializable).violations[0].name(), "G1a");
}

#[test]
fn in_doubt_writes_count_only_when_observed() {
    let mut u = txn(1, 0, Time::MAX, &[], &[1]);
    u.outcome = Outcome::Unknown;
    let mut dropped = txn(2, 0, Time::MAX, &[], &[2]);
    dropped.outcome = Outcome::Unknown;
    let h = history(vec![u, dropped, txn(3, 20, 30, &[(1, 1), (2, 0)], &[1])]);
    let r = check(&h, Level::StrictSerializable);
    assert!(r.ok, "{r}");
    assert_eq!(r.committed, 2);
    assert_eq!(r.dropped_unknown, 1);
    // The in-doubt writer recorded no reads: its write is unordered.
    assert_eq!(r.unordered_writes, [(tid(1), key(1))]);
}

/// An in-doubt attempt whose recorded writes miss a key (a dynamic piece's
/// placeholder stood for it) still wrote what committed readers saw.
#[test]
fn in_doubt_writes_include_what_readers_observed() {
    // Attempt 1 recorded only key 9 (its placeholder) but installed key 1.
    let mut u = txn(1, 0, Time::MAX, &[], &[9]);
    u.outcome = Outcome::Unknown;
    let h = history(vec![u, txn(2, 20, 30, &[(1, 1)], &[1])]);
    let r = check(&h, Level::StrictSerializable);
    assert!(r.ok, "{r}");
    assert_eq!(r.committed, 2);
    // Without the completion, the read has no writer: a garbage read.
    let raw = Checker::new(&h).check(Level::StrictSerializable);
    assert_eq!(raw.violations[0].name(), "G1a", "{raw}");
    // An aborted attempt is not in doubt: reading its write stays G1a.
    let mut a = txn(1, 0, 10, &[], &[9]);
    a.outcome = Outcome::Aborted;
    let h = history(vec![a, txn(2, 20, 30, &[(1, 1)], &[1])]);
    assert!(!check(&h, Level::StrictSerializable).ok);
}

#[test]
fn duplicate_ids_are_reported() {
    let h = history(vec![
        txn(1, 0, 10, &[(1, 0)], &[1]),
        txn(1, 20, 30, &[(1, 0)], &[1]),
    ]);
    let r = check(&h, Level::Serializable);
    assert_eq!(r.violations, [Violation::DuplicateTxn { txn: tid(1) }]);
    assert_eq!(r.committed, 1);
}

#[test]
fn cycle_display_names_keys() {
    let h = history(vec![
        txn(1, 0, 10, &[(1, 0), (2, 0)], &[1]),
        txn(2, 0, 10, &[(1, 0), (2, 0)], &[2]),
    ]);
    let r = check(&h, Level::Serializable);
    let text = r.violations[0].to_string();
    assert_eq!(
        text,
        format!(
            "G2 cycle: {:?} -rw(1:2)-> {:?} -rw(1:1)-> {:?}",
            tid(1),
            tid(2),
            tid(1)
        )
    );
    assert!(r.to_string().contains(&text));
}

/// `n` read-modify-writes of one key, one after another.
fn chain(n: u32) -> Vec<tessera_core::history::HistoryTxn> {
    (1..=n)
        .map(|i| {
            let t = 10 * i as Time;
            txn(i, t, t + 5, &[(1, i - 1), (2, 0)], &[1])
        })
        .collect()
}

#[test]
fn long_chains_are_fast() {
    let n = 100_000;
    let began = Instant::now();
    let h = history(chain(n));
    let c = Checker::new(&h);
    for level in Level::ALL {
        let r = c.check(level);
        assert!(r.ok, "{level}");
        assert_eq!(r.committed, n as usize);
    }
    // Close a cycle through all of them: the last one writes y, which the
    // first one read as initial, and that last write... is read by nobody,
    // so make the first transaction write z, which the last read as initial.
    let mut txns = chain(n);
    txns[0].writes.push(tessera_core::Key::new(1, 3));
    txns[0].reads.push(tessera_core::txn::ReadObs::row(
        tessera_core::Key::new(1, 3),
        ver(0),
    ));
    txns[n as usize - 1]
        .reads
        .push(tessera_core::txn::ReadObs::row(
            tessera_core::Key::new(1, 3),
            ver(0),
        ));
    // Overlap the last with the first so real time does not order them.
    txns[n as usize - 1].start = 0;
    let h = history(txns);
    let r = check(&h, Level::Serializable);
    assert_eq!(r.violations.len(), 1);
    let kinds = cycle_kinds(&r.violations[0]);
    assert_eq!(kinds.len(), n as usize);
    assert_eq!(kinds.iter().filter(|&&k| k == EdgeKind::Rw).count(), 1);
    assert!(!check(&h, Level::SnapshotIsolation).ok);
    let elapsed = began.elapsed();
    // Generous: debug build, shared machine. Typical is well under a second.
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");
}

/// Scale check: `cargo test -p tessera-checker --release -- --ignored
/// --nocapture million`. A million read-modify-write transactions over
/// 10^4 hot keys, overlapping in time.
#[test]
#[ignore = "slow in debug builds; run with --release"]
fn million_transactions() {
    let mut seed = 1u64;
    let mut next = |below: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % below
    };
    let plan: Vec<Planned> = (0..1_000_000)
        .map(|_| {
            let reads: Vec<u64> = (0..1 + next(8)).map(|_| 1 + next(10_000)).collect();
            let mut reads = reads;
            reads.sort_unstable();
            reads.dedup();
            let writes = reads.iter().copied().filter(|_| next(2) == 0).collect();
            Planned {
                reads,
                writes,
                fate: match next(50) {
                    0 => Fate::Abort,
                    1 => Fate::Unknown { applied: true },
                    _ => Fate::Commit,
                },
                before: next(400),
                after: next(400),
            }
        })
        .collect();
    let h = simulate(&plan);
    let began = Instant::now();
    let c = Checker::new(&h);
    println!("prepare: {:?}", began.elapsed());
    for level in Level::ALL {
        let t = Instant::now();
        let r = c.check(level);
        println!(
            "{level}: {:?}, ok={} committed={}",
            t.elapsed(),
            r.ok,
            r.committed
        );
        assert!(r.ok);
    }
    let t = Instant::now();
    let mut out = std::io::sink();
    write_elle(&h, &mut out).unwrap();
    println!("elle export: {:?}", t.elapsed());
}

#[test]
fn elle_export_orders_and_formats_lines() {
    let mut aborted = txn(3, 12, 18, &[(1, 1)], &[1]);
    aborted.outcome = Outcome::Aborted;
    let mut unknown = txn(4, 15, Time::MAX, &[], &[2]);
    unknown.outcome = Outcome::Unknown;
    let mut t2 = txn(2, 10, 30, &[(1, 1), (2, 0)], &[2]);
    t2.process = 1; // same process as T1, starting the instant T1 ended
    let h = history(vec![t2, unknown, aborted, txn(1, 0, 10, &[(1, 0)], &[1])]);
    let mut out = Vec::new();
    write_elle(&h, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let brief: Vec<(String, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap().to_string(),
                l["process"].as_u64().unwrap(),
            )
        })
        .collect();
    let s = |x: &str, p: u64| (x.to_string(), p);
    assert_eq!(
        brief,
        [
            s("invoke", 1), // T1 at 0
            s("ok", 1),     // T1 at 10, before its process's next invoke
            s("invoke", 1), // T2 at 10
            s("invoke", 3), // T3 at 12
            s("invoke", 4), // T4 at 15
            s("fail", 3),   // T3 at 18
            s("ok", 1),     // T2 at 30
            s("info", 4),   // T4, unknown, at the end
        ]
    );
    assert_eq!(
        text.lines().nth(1).unwrap(),
        r#"{"type":"ok","f":"txn","process":1,"value":[["r","1:1",null],["w","1:1",4294967297]],"time":10,"index":1}"#
            .replace("4294967297", &ver(1).0.to_string())
    );
    assert_eq!(lines[2]["value"][0][2], serde_json::Value::Null); // invoke
    assert_eq!(lines[6]["value"][0][2], ver(1).0); // ok: read T1's x
    assert_eq!(lines[7]["time"], 30);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["index"], i as u64);
    }
}

#[test]
fn elle_export_moves_in_doubt_attempts_off_busy_processes() {
    let mut unknown = txn(1, 0, Time::MAX, &[], &[1]);
    unknown.outcome = Outcome::Unknown;
    let mut later = txn(2, 5, 10, &[(1, 0)], &[]);
    later.process = 1;
    let mut out = Vec::new();
    write_elle(&history(vec![unknown, later]), &mut out).unwrap();
    let procs: Vec<(String, u64)> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["type"].as_str().unwrap().into(),
                v["process"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        procs,
        [
            ("invoke".into(), 2),
            ("invoke".into(), 1),
            ("ok".into(), 1),
            ("info".into(), 2)
        ]
    );
}

// ---- property tests --------------------------------------------------------

const KEYS: u64 = 3;

fn planned(unknown: bool) -> impl Strategy<Value = Planned> {
    (
        1u8..(1 << KEYS),
        any::<u8>(),
        0u8..10,
        0 as Time..150,
        0 as Time..150,
    )
        .prop_map(move |(read_mask, write_bits, fate, before, after)| {
            let rows = |mask: u8| (0..KEYS).filter(move |b| mask >> b & 1 == 1).map(|b| b + 1);
            Planned {
                reads: rows(read_mask).collect(),
                writes: rows(read_mask & write_bits).collect(),
                fate: match fate {
                    0 => Fate::Abort,
                    1 if unknown => Fate::Unknown { applied: false },
                    2 if unknown => Fate::Unknown { applied: true },
                    _ => Fate::Commit,
                },
                before,
                after,
            }
        })
}

/// Points `history`'s `which`-th committed read (counting all reads of all
/// committed transactions) at another version of its key that some attempt
/// wrote (or the initial one), chosen by `to`.
fn rewire(h: &mut History, which: prop::sample::Index, to: prop::sample::Index) {
    let slots: Vec<(usize, usize)> = h
        .txns
        .iter()
        .enumerate()
        .filter(|(_, t)| t.outcome == Outcome::Committed)
        .flat_map(|(i, t)| (0..t.reads.len()).map(move |j| (i, j)))
        .collect();
    if slots.is_empty() {
        return;
    }
    let (i, j) = slots[which.index(slots.len())];
    let k = h.txns[i].reads[j].key;
    let mut versions = vec![ver(0)];
    versions.extend(
        h.txns
            .iter()
            .filter(|t| t.writes.contains(&k))
            .map(|t| t.id.version()),
    );
    h.txns[i].reads[j].version = versions[to.index(versions.len())];
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn serial_executions_pass(plan in prop::collection::vec(planned(true), 0..40)) {
        let h = simulate(&plan);
        for level in Level::ALL {
            let r = check(&h, level);
            prop_assert!(r.ok, "{}", r);
        }
    }

    #[test]
    fn dropping_reads_keeps_valid_histories_valid(
        plan in prop::collection::vec(planned(true), 1..30),
        which in any::<prop::sample::Index>(),
    ) {
        let mut h = simulate(&plan);
        let reads: usize = h.txns.iter().map(|t| t.reads.len()).sum();
        if reads > 0 {
            let mut n = which.index(reads);
            for t in &mut h.txns {
                if n < t.reads.len() {
                    t.reads.remove(n);
                    break;
                }
                n -= t.reads.len();
            }
        }
        prop_assert_eq!(ok_at(&h), [true; 3]);
    }

    #[test]
    fn rewired_reads_match_brute_force(
        plan in prop::collection::vec(planned(false), 1..7),
        which in any::<prop::sample::Index>(),
        to in any::<prop::sample::Index>(),
    ) {
        let mut h = simulate(&plan);
        rewire(&mut h, which, to);
        let c = Checker::new(&h);
        let strict = c.check(Level::StrictSerializable);
        prop_assert_eq!(strict.ok, serializable_oracle(&h, true), "{}", strict);
        let ser = c.check(Level::Serializable);
        prop_assert_eq!(ser.ok, serializable_oracle(&h, false), "{}", ser);
        let si = c.check(Level::SnapshotIsolation);
        prop_assert_eq!(si.ok, si_oracle(&h), "{}", si);
    }

    #[test]
    fn with_in_doubt_attempts_there_are_no_false_alarms(
        plan in prop::collection::vec(planned(true), 1..8),
        which in any::<prop::sample::Index>(),
        to in any::<prop::sample::Index>(),
    ) {
        // In-doubt writers record no reads, so their writes are blind and
        // the checker may miss anomalies through them; but whatever it
        // reports must be real.
        let mut h = simulate(&plan);
        rewire(&mut h, which, to);
        let c = Checker::new(&h);
        if serializable_oracle(&h, true) {
            let r = c.check(Level::StrictSerializable);
            prop_assert!(r.ok, "{}", r);
        }
        if serializable_oracle(&h, false) {
            let r = c.check(Level::Serializable);
            prop_assert!(r.ok, "{}", r);
        }
        if si_oracle(&h) {
            let r = c.check(Level::SnapshotIsolation);
            prop_assert!(r.ok, "{}", r);
        }
    }

    #[test]
    fn two_rewired_reads_match_brute_force(
        plan in prop::collection::vec(planned(false), 2..7),
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), any::<prop::sample::Index>()), 2),
    ) {
        let mut h = simulate(&plan);
        for (which, to) in edits {
            rewire(&mut h, which, to);
        }
        let c = Checker::new(&h);
        prop_assert_eq!(c.check(Level::StrictSerializable).ok, serializable_oracle(&h, true));
        prop_assert_eq!(c.check(Level::Serializable).ok, serializable_oracle(&h, false));
        prop_assert_eq!(c.check(Level::SnapshotIsolation).ok, si_oracle(&h));
    }

    #[test]
    fn stale_reads_are_caught_under_strict_serializability(
        plan in prop::collection::vec(planned(false), 2..40),
        which in any::<prop::sample::Index>(),
    ) {
        // Point a committed read at the version its key had before the one
        // it saw. In a serial execution the overwriting transaction took
        // effect before the reader, so the read is stale: with real-time
        // order (here every transaction lasts under 100 units past its
        // point) a cycle appears whenever the overwriter ended before the
        // reader began.
        let mut h = simulate(&plan.iter().cloned().map(|mut p| { p.before = 0; p.after = 50; p }).collect::<Vec<_>>());
        let candidates: Vec<(usize, usize)> = h.txns.iter().enumerate()
            .filter(|(_, t)| t.outcome == Outcome::Committed)
            .flat_map(|(i, t)| t.reads.iter().enumerate()
                .filter(|(_, r)| r.version != ver(0))
                .map(move |(j, _)| (i, j)))
            .collect();
        prop_assume!(!candidates.is_empty());
        let (i, j) = candidates[which.index(candidates.len())];
        let seen = h.txns[i].reads[j];
        // The version the writer of `seen` read: the one before it.
        let writer = h.txns.iter().find(|t| t.id.version() == seen.version).unwrap();
        let before = writer.reads.iter().find(|r| r.key == seen.key).unwrap().version;
        h.txns[i].reads[j].version = before;
        let r = check(&h, Level::StrictSerializable);
        prop_assert!(!r.ok);
    }
}

// ---- per column ---------------------------------------------------------

mod per_column {
    use super::*;
    use crate::check_columns;
    use tessera_core::history::HistoryTxn;
    use tessera_core::storage::Store;
    use tessera_core::txn::{Columns, ReadObs, Value};

    /// Attempt `n` reading `(row, columns, writer)` and writing
    /// `(row, columns)`.
    fn ctxn(
        n: u32,
        start: Time,
        end: Time,
        reads: &[(u64, u64, u32)],
        writes: &[(u64, u64)],
    ) -> HistoryTxn {
        let mut t = txn(n, start, end, &[], &[]);
        t.reads = reads
            .iter()
            .map(|&(row, c, w)| ReadObs {
                columns: Columns(c),
                ..ReadObs::row(key(row), ver(w))
            })
            .collect();
        t.writes = writes.iter().map(|&(row, _)| key(row)).collect();
        t.write_columns = writes.iter().map(|&(_, c)| Columns(c)).collect();
        t
    }

    const A: u64 = 0b01;
    const B: u64 = 0b10;

    /// Two transactions write disjoint columns of row 1 from the same
    /// version, concurrently; two later readers see them installed in
    /// opposite orders (two replicas). Per row: a lost update, and each
    /// reader saw one of the two at the row's version. Per column: two
    /// chains, each serial.
    #[test]
    fn disjoint_columns_in_either_order_pass_per_column_and_fail_per_row() {
        let h = history(vec![
            ctxn(1, 0, 10, &[(1, A, 0)], &[(1, A)]),
            ctxn(2, 0, 10, &[(1, B, 0)], &[(1, B)]),
            // Replica X ran 1 then 2, replica Y 2 then 1: per column the
            // same versions.
            ctxn(3, 20, 30, &[(1, A, 1), (1, B, 2)], &[]),
            ctxn(4, 20, 30, &[(1, B, 2), (1, A, 1)], &[]),
        ]);
        for level in Level::ALL {
            let r = check_columns(&h, level);
            assert!(r.ok, "{r}");
            assert!(
                !check(&h, level).ok,
                "per row, 1 and 2 both overwrote 1:1's initial version"
            );
        }
        let row = check(&h, Level::StrictSerializable);
        assert!(
            row.violations
                .iter()
                .any(|v| matches!(v, Violation::LostUpdate { .. })),
            "{row}"
        );
    }

    /// Two writers of column A of row 1 from the same version: a lost
    /// update per column too, named by its column.
    #[test]
    fn a_lost_update_of_one_column_fails_per_column() {
        let h = history(vec![
            ctxn(1, 0, 10, &[(1, A | B, 0)], &[(1, A)]),
            ctxn(2, 0, 10, &[(1, A, 0)], &[(1, A | B)]),
            ctxn(3, 20, 30, &[(1, A, 2), (1, B, 2)], &[]),
        ]);
        let r = check_columns(&h, Level::Serializable);
        assert!(!r.ok);
        assert!(
            r.violations.contains(&Violation::LostUpdate {
                key: key(1),
                column: Some(0),
                version: ver(0),
                first: tid(1),
                second: tid(2),
            }),
            "{r}"
        );
        assert!(r.to_string().contains("1:1.c0"), "{r}");
    }

    /// A cycle through two columns (write skew on A and B with a reader
    /// that saw each write without the other, at strict serializability
    /// by real time) is found per column.
    #[test]
    fn a_read_of_a_column_that_missed_an_earlier_write_fails_per_column() {
        let h = history(vec![
            ctxn(1, 0, 10, &[(1, A, 0)], &[(1, A)]),
            // Started after 1 ended, yet read column A's initial version.
            ctxn(2, 20, 30, &[(1, A, 0), (1, B, 0)], &[(1, B)]),
        ]);
        let r = check_columns(&h, Level::StrictSerializable);
        assert!(!r.ok, "{r}");
        assert!(check_columns(&h, Level::Serializable).ok);
    }

    /// A whole-row access covers every column: a whole-row writer after a
    /// column writer is the next version of both columns, and a reader of
    /// one column that saw the older writer is then stale.
    #[test]
    fn whole_row_accesses_cover_every_column() {
        let h = history(vec![
            ctxn(1, 0, 10, &[(1, A, 0)], &[(1, A)]),
            ctxn(2, 20, 30, &[(1, A, 1), (1, !A, 0)], &[(1, u64::MAX)]),
            ctxn(3, 40, 50, &[(1, B, 2)], &[]),
            ctxn(4, 40, 50, &[(1, u64::MAX, 2)], &[]),
        ]);
        assert!(check_columns(&h, Level::StrictSerializable).ok);
        let mut stale = h.clone();
        stale.txns[2].reads[0].version = ver(0);
        assert!(!check_columns(&stale, Level::StrictSerializable).ok);
    }

    /// One transaction of a serial run over a column store: per row, it
    /// reads some columns of each row and writes some of those.
    #[derive(Clone, Debug)]
    struct Step {
        rows: Vec<(u64, u64, u64)>,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop::collection::vec((1u64..4, 1u64..8, 0u64..8), 1..3).prop_map(|v| Step {
            rows: v
                .into_iter()
                .map(|(row, r, w)| (row, if r == 7 { u64::MAX } else { r }, w & r))
                .collect(),
        })
    }

    /// Runs `plan` serially on a [`Store`] that keeps column versions
    /// (each transaction at its own time, real time respected), recording
    /// the history per column and, separately, per row.
    fn serial(plan: &[Step]) -> (History, History) {
        let mut store = Store::new();
        let (mut cols, mut rows) = (Vec::new(), Vec::new());
        for (i, s) in plan.iter().enumerate() {
            let n = i as u32 + 1;
            let at = 100 * Time::from(n);
            let mut c = txn(n, at, at + 10, &[], &[]);
            let mut r = c.clone();
            for &(row, read, _) in &s.rows {
                let k = key(row);
                for (columns, v) in store.column_versions(k, Columns(read)) {
                    c.reads.push(ReadObs {
                        columns,
                        ..ReadObs::row(k, v)
                    });
                }
                let v = store.get(k).map_or(ver(0), |rec| rec.meta.version);
                r.reads.push(ReadObs::row(k, v));
            }
            for &(row, _, write) in &s.rows {
                if write != 0 && !c.writes.contains(&key(row)) {
                    store.install_columns(key(row), Value::new(), tid(n).version(), Columns(write));
                    c.writes.push(key(row));
                    c.write_columns.push(Columns(write));
                    r.writes.push(key(row));
                }
            }
            cols.push(c);
            rows.push(r);
        }
        (history(cols), history(rows))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// A serial run, which is correct per row, passes per row and per
        /// column, at every level.
        #[test]
        fn serial_column_executions_pass(plan in prop::collection::vec(step(), 0..30)) {
            let (cols, rows) = serial(&plan);
            for level in Level::ALL {
                let r = check_columns(&cols, level);
                prop_assert!(r.ok, "{}", r);
                let r = check(&rows, level);
                prop_assert!(r.ok, "{}", r);
            }
        }

        /// Without column declarations, checking per column is checking
        /// per row: the same verdict and the same violations.
        #[test]
        fn without_columns_per_column_is_per_row(
            plan in prop::collection::vec(planned(true), 1..12),
            which in any::<prop::sample::Index>(),
            to in any::<prop::sample::Index>(),
        ) {
            let mut h = simulate(&plan);
            rewire(&mut h, which, to);
            for level in Level::ALL {
                let (row, col) = (check(&h, level), check_columns(&h, level));
                prop_assert_eq!(&row.violations, &col.violations);
                prop_assert_eq!(row.ok, col.ok);
            }
        }
    }
}
