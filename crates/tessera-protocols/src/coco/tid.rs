//! Commit timestamps of PT-OCC and LT-OCC (COCO §5.1, §5.2, §6.1).
//!
//! Both kinds are 64-bit words with the same layout, documented here once:
//!
//! ```text
//!  63            40 39                             2 1      0
//! +----------------+--------------------------------+--------+
//! | epoch (24 bit) | sequence (38 bit)              | status |
//! +----------------+--------------------------------+--------+
//! ```
//!
//! The status bits are Silo's lock and latest-version bits; tessera keeps a
//! record's lock in its own word ([`tessera_core::storage::Meta::lock`]), so
//! stored timestamps always have them clear. A record's `wts` holds the TID
//! (PT-OCC) or the write timestamp (LT-OCC); LT-OCC also keeps `rts`.
//!
//! Putting the epoch into LT-OCC's timestamps too is our choice (the paper's
//! TicToc timestamps are plain counters): any timestamp at least as large
//! as TicToc's lower bound is a valid commit timestamp, and the epoch in
//! the top bits tells a reader which epoch wrote what it read, so that its
//! result is released no earlier than that epoch's commit.

/// Bits below the sequence (Silo's status bits).
pub const STATUS_BITS: u32 = 2;
/// Where the epoch starts.
pub const EPOCH_SHIFT: u32 = 40;
/// One step of the sequence.
pub const SEQ_ONE: u64 = 1 << STATUS_BITS;

/// The epoch a timestamp belongs to.
pub fn epoch_of(ts: u64) -> u64 {
    ts >> EPOCH_SHIFT
}

/// The smallest timestamp of `epoch`.
pub fn epoch_start(epoch: u64) -> u64 {
    epoch << EPOCH_SHIFT
}

/// PT-OCC's TID (§5.1, Silo's three rules): (a) larger than the TID of
/// every record read or written (`seen`, their maximum), (b) larger than
/// the worker's last TID (`last`), (c) in the current global epoch
/// (`epoch`, which is at least the epoch of `seen` and `last`).
pub fn pt_occ_tid(seen: u64, last: u64, epoch: u64) -> u64 {
    debug_assert!(epoch >= epoch_of(seen) && epoch >= epoch_of(last));
    let floor = seen.max(last).max(epoch_start(epoch));
    let tid = (floor | (SEQ_ONE - 1)) + 1;
    debug_assert_eq!(epoch_of(tid), epoch, "sequence overflow in epoch {epoch}");
    tid
}

/// LT-OCC's commit timestamp (§5.2, TicToc): at least the `wts` of every
/// record read (`max_read_wts`), above the `rts` of every record written
/// (`lock_bound` = max rts + 1 over the write set) and, by our layout, in
/// an epoch no earlier than `epoch`.
pub fn lt_occ_ts(max_read_wts: u64, lock_bound: u64, epoch: u64) -> u64 {
    max_read_wts.max(lock_bound).max(epoch_start(epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pt_occ_tid_follows_the_three_rules() {
        let e = 7;
        let read = epoch_start(6) + 5 * SEQ_ONE;
        let tid = pt_occ_tid(read, 0, e);
        assert_eq!(epoch_of(tid), e, "rule (c): current epoch");
        assert!(tid > read, "rule (a)");
        let next = pt_occ_tid(0, tid, e);
        assert!(next > tid, "rule (b): larger than the worker's last");
        let same_epoch = pt_occ_tid(tid, 0, e);
        assert_eq!(same_epoch, tid + SEQ_ONE);
        assert_eq!(tid & (SEQ_ONE - 1), 0, "status bits clear");
    }

    #[test]
    fn lt_occ_ts_is_the_smallest_satisfying_ts() {
        assert_eq!(
            lt_occ_ts(epoch_start(3) + 9, epoch_start(3) + 4, 3),
            epoch_start(3) + 9
        );
        assert_eq!(
            lt_occ_ts(epoch_start(3) + 9, epoch_start(3) + 12, 3),
            epoch_start(3) + 12
        );
        assert_eq!(lt_occ_ts(1, 2, 4), epoch_start(4));
    }
}
