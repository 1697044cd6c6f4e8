//! A node's log device: fsync latency with group commit.
//!
//! Records issued while a flush is in progress wait for it and are flushed
//! together in the next one, as a group-committing WAL does. A record is
//! durable only once its flush completes; a crash before that loses it.

use bytes::Bytes;
use tessera_core::ids::Time;

#[derive(Default)]
pub struct Disk {
    /// Durable records, in order.
    pub records: Vec<Bytes>,
    /// Their total length.
    pub bytes: u64,
    /// Start and end of the most recently scheduled flush.
    batch_start: Time,
    batch_end: Time,
}

impl Disk {
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

    /// `record` is durable now: append it.
    pub fn write(&mut self, record: Bytes) {
        self.bytes += record.len() as u64;
        self.records.push(record);
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
}
