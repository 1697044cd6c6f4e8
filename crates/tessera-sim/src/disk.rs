//! A node's log device: fsync latency with group commit.
//!
//! Records issued while a flush is in progress wait for it and are flushed
//! together in the next one, as a group-committing WAL does. A record is
//! durable only once its flush completes; a crash before that loses it.

use bytes::Bytes;
use tessera_core::ids::Time;

#[derive(Default)]
pub struct Disk {
    /// Durable records, in order, kept only for a node that can restart
    /// ([`Disk::for_restarts`]).
    pub records: Vec<Bytes>,
    /// The total length of every durable record, kept or not.
    pub bytes: u64,
    /// Whether durable records are kept: only a restarted node reads them.
    keeps_records: bool,
    /// Bytes of records issued since the last checkpoint was taken.
    pub since_checkpoint: u64,
    /// Start and end of the most recently scheduled flush.
    batch_start: Time,
    batch_end: Time,
}

impl Disk {
    /// The disk of a node that restarts (a crash is planned for it) if
    /// `restarts`: its durable records are kept for the restart to
    /// recover from. A node that never restarts never reads its log, and
    /// keeping it was most of a long run's memory (COCO's TPC-C on the
    /// testbed, 24 warehouses x 3 replicas: ~5.6 GB of log per simulated
    /// second at `fsync` 0, 10 GB peak; docs/results/coco.md).
    pub fn for_restarts(restarts: bool) -> Self {
        Disk {
            keeps_records: restarts,
            ..Disk::default()
        }
    }

    /// `record` is durable: counted, and kept if the node can restart.
    pub fn append(&mut self, record: Bytes) {
        self.bytes += record.len() as u64;
        if self.keeps_records {
            self.records.push(record);
        }
    }

    /// Whether this disk's records are kept, and so checkpointed.
    pub fn keeps_records(&self) -> bool {
        self.keeps_records
    }

    /// A checkpoint is durable: `snapshot` replaces every record before
    /// it (the node's state as of the records issued before it was taken,
    /// all of which are durable by now).
    pub fn checkpoint(&mut self, snapshot: Bytes) {
        self.bytes += snapshot.len() as u64;
        if self.keeps_records {
            self.records.clear();
            self.records.push(snapshot);
        }
    }

    /// When a record issued at `t` becomes durable.
    pub fn schedule(&mut self, t: Time, fsync: Time) -> Time {
        if t >= self.batch_end {
            self.batch_start = t;
            self.batch_end = t + fsync;
        } else if t >= self.batch_start {
            // A flush is running: this record goes into the next one.
            self.batch_start = self.batch_end;
            self.batch_end += fsync;
        }
        // Otherwise the scheduled flush has not started yet: join it.
        self.batch_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_commit_batches_records_behind_a_running_flush() {
        let mut d = Disk::default();
        assert_eq!(d.schedule(0, 100), 100);
        // Arrives during the first flush: waits for the next one.
        assert_eq!(d.schedule(10, 100), 200);
        // Arrives before the second flush starts: joins it.
        assert_eq!(d.schedule(50, 100), 200);
        // Idle disk again.
        assert_eq!(d.schedule(500, 100), 600);
    }

    #[test]
    fn only_a_disk_for_restarts_keeps_its_records() {
        let mut kept = Disk::for_restarts(true);
        let mut counted = Disk::for_restarts(false);
        for d in [&mut kept, &mut counted] {
            d.append(Bytes::from_static(b"abc"));
            d.append(Bytes::from_static(b"de"));
            assert_eq!(d.bytes, 5);
        }
        assert_eq!(kept.records, vec![&b"abc"[..], &b"de"[..]]);
        assert!(counted.records.is_empty());
    }
}
