//! Torn tails, checksum mismatches, group commit, checkpoints.

use super::*;
use std::sync::{Arc, Mutex};

fn collect() -> (Completion, Arc<Mutex<Vec<Vec<u64>>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    (Box::new(move |t| g.lock().unwrap().push(t)), got)
}

fn rec(i: u64) -> Bytes {
    Bytes::from(format!("record-{i}").into_bytes())
}

fn write_some(dir: &Path, n: u64, fsync: bool) -> Vec<Vec<u64>> {
    let mut cfg = WalConfig::new(dir);
    cfg.fsync = fsync;
    let (done, got) = collect();
    let (wal, _) = Wal::open(cfg, done).unwrap();
    for i in 0..n {
        wal.append(i, rec(i)).unwrap();
    }
    wal.close().unwrap();
    let g = got.lock().unwrap().clone();
    g
}

#[test]
fn records_come_back_in_order_and_every_token_is_reported() {
    let d = tempfile::tempdir().unwrap();
    let groups = write_some(d.path(), 100, true);
    let tokens: Vec<u64> = groups.concat();
    assert_eq!(tokens, (0..100).collect::<Vec<_>>());
    let r = recover(d.path()).unwrap();
    assert_eq!(r.records, (0..100).map(rec).collect::<Vec<_>>());
    assert_eq!(r.truncated, 0);
}

#[test]
fn group_commit_batches_records_appended_within_the_window() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = WalConfig::new(d.path());
    cfg.group_window = Duration::from_millis(50);
    let (done, got) = collect();
    let (wal, _) = Wal::open(cfg, done).unwrap();
    for i in 0..10 {
        wal.append(i, rec(i)).unwrap();
    }
    wal.sync().unwrap();
    let groups = got.lock().unwrap().clone();
    assert_eq!(
        groups.len(),
        1,
        "one fsync for ten quick appends: {groups:?}"
    );
    assert_eq!(groups[0].len(), 10);
    drop(wal);
}

#[test]
fn a_torn_tail_is_cut_and_appends_continue_after_the_last_valid_record() {
    let d = tempfile::tempdir().unwrap();
    write_some(d.path(), 10, false);
    let p = log_path(d.path(), 0);
    let full = fs::read(&p).unwrap();
    // Cut the last record in half, as a crash mid-write would.
    fs::write(&p, &full[..full.len() - 5]).unwrap();
    let r = recover(d.path()).unwrap();
    assert_eq!(r.records.len(), 9);
    assert!(r.truncated > 0);
    assert_eq!(
        fs::metadata(&p).unwrap().len() as usize,
        r.log_bytes as usize
    );
    // Appending after recovery yields a clean log.
    let (done, _) = collect();
    let (wal, rec2) = Wal::open(WalConfig::new(d.path()), done).unwrap();
    assert_eq!(rec2.records.len(), 9);
    wal.append(99, rec(99)).unwrap();
    wal.close().unwrap();
    let r = recover(d.path()).unwrap();
    assert_eq!(r.records.len(), 10);
    assert_eq!(r.records[9], rec(99));
    assert_eq!(r.truncated, 0);
}

#[test]
fn a_checksum_mismatch_ends_the_log_there() {
    let d = tempfile::tempdir().unwrap();
    write_some(d.path(), 10, false);
    let p = log_path(d.path(), 0);
    let mut data = fs::read(&p).unwrap();
    // Flip a payload byte of record 4.
    let (_, at4) = parse_records(&data[..]);
    assert_eq!(at4, data.len());
    let mut at = 0;
    for _ in 0..4 {
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        at += HEADER + len;
    }
    data[at + HEADER] ^= 0xff;
    fs::write(&p, &data).unwrap();
    let r = recover(d.path()).unwrap();
    assert_eq!(r.records, (0..4).map(rec).collect::<Vec<_>>());
}

#[test]
fn garbage_and_forged_lengths_do_not_panic() {
    for data in [
        vec![0xffu8; 64],
        vec![0u8; 3],
        vec![4, 0, 0, 0, 1, 2, 3, 4, 9],
        (0..=255u8).collect(),
    ] {
        let (recs, valid) = parse_records(&data);
        assert!(valid <= data.len());
        assert!(recs.len() <= 1);
    }
}

#[test]
fn a_checkpoint_replaces_the_log_and_survives_a_crash_midway() {
    let d = tempfile::tempdir().unwrap();
    let (done, _) = collect();
    let (wal, _) = Wal::open(WalConfig::new(d.path()), done).unwrap();
    for i in 0..5 {
        wal.append(i, rec(i)).unwrap();
    }
    wal.checkpoint(Bytes::from_static(b"snapshot")).unwrap();
    wal.append(5, rec(5)).unwrap();
    wal.close().unwrap();
    let r = recover(d.path()).unwrap();
    assert_eq!(r.generation, 1);
    assert_eq!(r.records, vec![Bytes::from_static(b"snapshot"), rec(5)]);
    assert!(!log_path(d.path(), 0).exists());

    // A crash after log-2 was opened but before checkpoint-2 was renamed:
    // generation 1 still rules, and log-2's records follow log-1's.
    let mut tmp = Vec::new();
    frame(b"half", &mut tmp);
    fs::write(d.path().join("checkpoint-2.tmp"), &tmp).unwrap();
    let mut l2 = Vec::new();
    frame(b"after", &mut l2);
    fs::write(log_path(d.path(), 2), &l2).unwrap();
    // And a torn checkpoint-3 is ignored.
    fs::write(checkpoint_path(d.path(), 3), &tmp[..tmp.len() - 1]).unwrap();
    let r = recover(d.path()).unwrap();
    assert_eq!(
        r.records,
        vec![
            Bytes::from_static(b"snapshot"),
            rec(5),
            Bytes::from_static(b"after")
        ]
    );
    assert_eq!(r.generation, 2);
}
