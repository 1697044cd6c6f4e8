//! The lock word at the end of every slot (§IV, §V).
//!
//! ```text
//!  63                              2  1  0
//! [ owner: the locking attempt's id | state ]
//! ```
//! State 0 is free (the whole word is 0), 1 an intention lock (blocks
//! read-write transactions, lets readers through to validation), 2 a write
//! lock (blocks everyone). The memory node never interprets it.

use tessera_core::ids::TxnId;

pub const FREE: u64 = 0;
const INTENTION: u64 = 1;
const WRITE: u64 = 2;

pub fn intention(owner: TxnId) -> u64 {
    (owner.0 << 2) | INTENTION
}

pub fn write(owner: TxnId) -> u64 {
    (owner.0 << 2) | WRITE
}

/// What a transaction finds in a lock word it does not own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    Free,
    Intention,
    Write,
}

pub fn seen(word: u64) -> Seen {
    match word & 3 {
        0 => Seen::Free,
        INTENTION => Seen::Intention,
        _ => Seen::Write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::NodeId;

    #[test]
    fn states_are_told_apart_and_owners_differ() {
        let a = TxnId::new(NodeId(3), 1, 7);
        let b = TxnId::new(NodeId(3), 1, 8);
        assert_eq!(seen(FREE), Seen::Free);
        assert_eq!(seen(intention(a)), Seen::Intention);
        assert_eq!(seen(write(a)), Seen::Write);
        assert_ne!(write(a), write(b));
        assert_ne!(intention(a), FREE);
    }
}
