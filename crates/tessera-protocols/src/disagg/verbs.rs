//! The one-sided verbs a memory node serves, and the control messages of a
//! connection.

use super::region::{Addr, Geometry};
use tessera_core::ids::{Key, Version};
use tessera_core::node::WireSize;
use tessera_core::txn::Value;

/// What a WRITE covers of one slot. The lock word is the slot's last word:
/// a write of the data alone leaves it, a write of the lock alone leaves
/// the data, and a write of both publishes the data with the lock (§V).
/// The data is the whole record, key included (FORD writes whole records):
/// a WRITE of an insert's data into the free slot it locked is what makes
/// the key present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotWrite {
    Lock(u64),
    Data {
        key: Key,
        value: Value,
        version: Version,
    },
    DataAndLock {
        key: Key,
        value: Value,
        version: Version,
        lock: u64,
    },
}

/// A log record written to the memory node's log area: the redo (new
/// values) or undo (old values) images of a transaction's write set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub txn: u64,
    pub entries: Vec<(Key, Option<Value>, Version)>,
}

/// One one-sided operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Read `len` consecutive slots (one record, or a whole bucket).
    Read {
        addr: Addr,
        len: u32,
    },
    Write {
        addr: Addr,
        data: SlotWrite,
    },
    /// Compare-and-swap the slot's lock word.
    Cas {
        addr: Addr,
        expect: u64,
        swap: u64,
    },
    /// Fetch-and-add on the slot's lock word.
    Faa {
        addr: Addr,
        add: u64,
    },
    /// A WRITE to the sender's log area.
    Log(LogRecord),
}

/// A slot as a READ returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotImage {
    pub addr: Addr,
    /// `None`: a free slot.
    pub key: Option<Key>,
    pub value: Option<Value>,
    pub version: Version,
    pub lock: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerbResult {
    Read(Vec<SlotImage>),
    Written,
    /// CAS and FAA return the lock word as it was before.
    Atomic {
        old: u64,
    },
    /// The address lies outside the region (a remote access error).
    OutOfRange,
}

#[derive(Clone, Debug)]
pub enum Msg {
    /// Connection setup: ask for the region's geometry.
    Connect,
    Connected(Geometry),
    /// Verbs posted together (one doorbell), applied in order. `id` is the
    /// sender's; `ack` false asks for no answer (unsignaled verbs).
    Batch {
        id: u64,
        ack: bool,
        verbs: Vec<Verb>,
    },
    /// The results of a signaled batch, in order.
    Done {
        id: u64,
        results: Vec<VerbResult>,
    },
    /// Between compute nodes: OOCC's Lease Manager and clock
    /// synchronization (§VII); memory nodes never see it.
    Lease(crate::oocc::manager::LeaseMsg),
}

const HEADER: usize = 1 + 8;
/// RDMA request header (opcode, remote address, rkey, length).
const VERB: usize = 16;
const WORD: usize = 8;

fn value_len(v: &Option<Value>) -> usize {
    v.as_ref().map_or(0, |v| v.len())
}

impl Verb {
    fn wire_size(&self) -> usize {
        VERB + match self {
            Verb::Read { .. } => 0,
            Verb::Write { data, .. } => match data {
                SlotWrite::Lock(_) => WORD,
                SlotWrite::Data { value, .. } => value.len() + 2 * WORD,
                SlotWrite::DataAndLock { value, .. } => value.len() + 3 * WORD,
            },
            Verb::Cas { .. } => 2 * WORD,
            Verb::Faa { .. } => WORD,
            Verb::Log(r) => {
                WORD + r
                    .entries
                    .iter()
                    .map(|(_, v, _)| 2 * WORD + value_len(v))
                    .sum::<usize>()
            }
        }
    }
}

impl VerbResult {
    fn wire_size(&self) -> usize {
        match self {
            VerbResult::Read(imgs) => imgs
                .iter()
                .map(|i| 3 * WORD + value_len(&i.value))
                .sum::<usize>(),
            VerbResult::Written | VerbResult::OutOfRange => 1,
            VerbResult::Atomic { .. } => WORD,
        }
    }
}

impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        HEADER
            + match self {
                Msg::Connect => 0,
                Msg::Connected(_) => 2 * 4,
                Msg::Batch { verbs, .. } => verbs.iter().map(Verb::wire_size).sum(),
                Msg::Done { results, .. } => results.iter().map(VerbResult::wire_size).sum(),
                Msg::Lease(m) => m.wire_size(),
            }
    }
}
