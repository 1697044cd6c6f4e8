//! TATP (Telecom Application Transaction Processing benchmark, IBM
//! Solid/Nokia, spec v1.0) as OOCC §VIII.B runs it: "4 tables with record
//! sizes up to 48B, and a workload of 80% read-only and 20% read-write
//! transactions, in which we implement the read-only transactions to include
//! two key reads"; subscriber ids are "generated using a non-uniform-random
//! method following the specification" (§VIII.C).
//!
//! * **Tables.** `SUBSCRIBER` (48 B), `ACCESS_INFO` (16 B),
//!   `SPECIAL_FACILITY` (16 B), `CALL_FORWARDING` (24 B). Every subscriber
//!   has 4 access-info slots (one per `ai_type`), 4 special-facility slots
//!   (`sf_type`) and 12 call-forwarding slots (`sf_type` × `start_time` in
//!   {0, 8, 16}): 21 records. Byte 0 of the last three is a *present* flag;
//!   the load marks rows present as the specification populates them (1–4
//!   access-info and special-facility rows per subscriber, `is_active` 85%,
//!   0–3 call-forwarding rows per special facility, `end_time = start_time +
//!   1..8`), deterministically from the subscriber id.
//! * **Deviation: no inserts or deletes.** The memory-node protocols find
//!   records but never allocate them, so INSERT_CALL_FORWARDING sets a
//!   slot's present flag (and writes nothing when the special facility is
//!   missing or the row already present: the specification's failed insert)
//!   and DELETE_CALL_FORWARDING clears it (nothing when absent). A failed
//!   TATP transaction rolls back; here it commits without writing, so it
//!   counts as a commit and still takes its locks and validations.
//! * **Mix** (the specification's): GET_SUBSCRIBER_DATA 35%,
//!   GET_NEW_DESTINATION 10%, GET_ACCESS_DATA 35% (read-only, 80%);
//!   UPDATE_SUBSCRIBER_DATA 2%, UPDATE_LOCATION 14%, INSERT_CALL_FORWARDING
//!   2%, DELETE_CALL_FORWARDING 2%.
//! * **Two-key reads** (OOCC's variant): GET_SUBSCRIBER_DATA and
//!   GET_ACCESS_DATA read [`TatpConfig::ro_keys`] (default 2) records of
//!   distinct subscribers, each drawn by NURand; GET_NEW_DESTINATION reads
//!   its special facility and one call-forwarding slot (the specification
//!   reads every row with `start_time <= t`: we draw one slot). With
//!   `ro_keys = 1` the first two are the specification's.
//! * **Keys.** `s_id = (rand(0..=A) | rand(0..P)) mod P` with the
//!   specification's A (65,535 up to 1M subscribers, 1,048,575 up to 10M,
//!   else 2,097,151). Subscriber `s` and its rows live on shard `s mod
//!   partitions`, rank `s / partitions` (×4 or ×12 plus the slot for the
//!   other tables). Lookups by `sub_nbr` go straight to `s_id` (no
//!   secondary index: every record is addressed by key).
//! * **Pieces.** One deferrable, input-free piece per shard touched
//!   ([`crate::slots::pieces_by_shard`]); a read-write transaction touches
//!   one subscriber, so it is one piece.
//! * **Wire.** A transaction travels as its [`TatpParams`] (type,
//!   subscribers, types, slot, time, seed); the receiver checks them against
//!   its configuration and derives the same keys.

use crate::error::{check_positive, ConfigError};
use crate::mix64;
use crate::slots::{fill, pick, pieces_by_shard};
use bytes::{BufMut, Bytes, BytesMut};
use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tessera_core::codec::{
    get_len, get_u64, get_u8, get_varint, put_varint, DecodeError, EncodeError,
};
use tessera_core::storage::Store;
use tessera_core::txn::{PieceResult, PieceSpec, Procedure, Txn, Value};
use tessera_core::workload::{ClientSlot, TxnGenerator, TxnProfile, Workload};
use tessera_core::{Key, ShardId, TableId};

/// Table ids.
pub const SUBSCRIBER: u32 = 0;
pub const ACCESS_INFO: u32 = 1;
pub const SPECIAL_FACILITY: u32 = 2;
pub const CALL_FORWARDING: u32 = 3;

/// Record sizes in bytes (OOCC §VIII.B: "record sizes up to 48B").
pub const SUBSCRIBER_SIZE: usize = 48;
pub const ACCESS_INFO_SIZE: usize = 16;
pub const SPECIAL_FACILITY_SIZE: usize = 16;
pub const CALL_FORWARDING_SIZE: usize = 24;

/// Byte of a subscriber record holding `bit_1` (its low bit).
const BIT_1: usize = 0;
/// Bytes of a subscriber record holding `vlr_location`.
const VLR_LOCATION: std::ops::Range<usize> = 40..44;
/// Byte 0 of the other tables: 1 when the row exists.
const PRESENT: usize = 0;
/// Special facility: `is_active`, `data_a`.
const IS_ACTIVE: usize = 1;
const DATA_A: usize = 3;
/// Call forwarding: `end_time`, then `numberx`.
const END_TIME: usize = 1;
const NUMBERX: std::ops::Range<usize> = 2..17;

/// The call-forwarding `start_time`s (one slot each).
pub const START_TIMES: [u8; 3] = [0, 8, 16];

/// Most records a read-only transaction may read per kind.
pub const MAX_RO_KEYS: u32 = 16;

/// The transaction types, in the order of [`MIX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TatpKind {
    GetSubscriberData,
    GetNewDestination,
    GetAccessData,
    UpdateSubscriberData,
    UpdateLocation,
    InsertCallForwarding,
    DeleteCallForwarding,
}

impl TatpKind {
    pub const ALL: [TatpKind; 7] = [
        TatpKind::GetSubscriberData,
        TatpKind::GetNewDestination,
        TatpKind::GetAccessData,
        TatpKind::UpdateSubscriberData,
        TatpKind::UpdateLocation,
        TatpKind::InsertCallForwarding,
        TatpKind::DeleteCallForwarding,
    ];

    /// The specification's transaction name (the procedure name).
    pub fn name(self) -> &'static str {
        match self {
            TatpKind::GetSubscriberData => "get_subscriber_data",
            TatpKind::GetNewDestination => "get_new_destination",
            TatpKind::GetAccessData => "get_access_data",
            TatpKind::UpdateSubscriberData => "update_subscriber_data",
            TatpKind::UpdateLocation => "update_location",
            TatpKind::InsertCallForwarding => "insert_call_forwarding",
            TatpKind::DeleteCallForwarding => "delete_call_forwarding",
        }
    }

    pub fn read_only(self) -> bool {
        matches!(
            self,
            TatpKind::GetSubscriberData | TatpKind::GetNewDestination | TatpKind::GetAccessData
        )
    }
}

/// The specification's mix, percent, in the order of [`TatpKind::ALL`].
pub const MIX: [u64; 7] = [35, 10, 35, 2, 14, 2, 2];

/// TATP's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TatpConfig {
    /// Subscribers in total (the specification's scale factor; its smallest
    /// population is 100,000). Default 100,000: 2.1M records, a few hundred
    /// MB per deployment.
    pub subscribers: u64,
    /// Partitions (= shards); subscribers are dealt round robin. Default 1.
    pub partitions: u32,
    /// Records GET_SUBSCRIBER_DATA and GET_ACCESS_DATA read, of distinct
    /// subscribers, in `1..=MAX_RO_KEYS` (OOCC: 2). Default 2.
    pub ro_keys: u32,
}

impl Default for TatpConfig {
    fn default() -> Self {
        TatpConfig {
            subscribers: 100_000,
            partitions: 1,
            ro_keys: 2,
        }
    }
}

impl TatpConfig {
    /// Check every parameter; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_positive("subscribers", self.subscribers)?;
        check_positive("partitions", self.partitions.into())?;
        if self.subscribers < u64::from(self.partitions) {
            return Err(ConfigError::new(
                "subscribers",
                format!(
                    "must be at least partitions ({}) so every shard holds one, got {}",
                    self.partitions, self.subscribers
                ),
            ));
        }
        // Ranks must fit in the 40 bits of a key (12 call-forwarding slots
        // per subscriber).
        if self.subscribers > (1 << 36) {
            return Err(ConfigError::new(
                "subscribers",
                format!("must be at most 2^36, got {}", self.subscribers),
            ));
        }
        if !(1..=MAX_RO_KEYS).contains(&self.ro_keys) || u64::from(self.ro_keys) > self.subscribers
        {
            return Err(ConfigError::new(
                "ro_keys",
                format!(
                    "must be in 1..={} and at most subscribers ({}), got {}",
                    MAX_RO_KEYS, self.subscribers, self.ro_keys
                ),
            ));
        }
        Ok(())
    }

    /// TATP's NURand constant A for this population.
    pub fn nurand_a(&self) -> u64 {
        match self.subscribers {
            0..=1_000_000 => 65_535,
            1_000_001..=10_000_000 => 1_048_575,
            _ => 2_097_151,
        }
    }
}

/// Where subscriber `s`'s rows live: its shard and its rank there.
fn place(cfg: &TatpConfig, s: u64) -> (ShardId, u64) {
    let p = u64::from(cfg.partitions);
    (ShardId((s % p) as u32), s / p)
}

pub fn subscriber_key(cfg: &TatpConfig, s: u64) -> Key {
    let (shard, r) = place(cfg, s);
    Key::in_shard(SUBSCRIBER, shard, r)
}

/// `ai_type` 0..4 (the specification's 1..4).
pub fn access_info_key(cfg: &TatpConfig, s: u64, ai_type: u8) -> Key {
    let (shard, r) = place(cfg, s);
    Key::in_shard(ACCESS_INFO, shard, r * 4 + u64::from(ai_type))
}

/// `sf_type` 0..4 (the specification's 1..4).
pub fn special_facility_key(cfg: &TatpConfig, s: u64, sf_type: u8) -> Key {
    let (shard, r) = place(cfg, s);
    Key::in_shard(SPECIAL_FACILITY, shard, r * 4 + u64::from(sf_type))
}

/// `slot` indexes [`START_TIMES`].
pub fn call_forwarding_key(cfg: &TatpConfig, s: u64, sf_type: u8, slot: u8) -> Key {
    let (shard, r) = place(cfg, s);
    Key::in_shard(
        CALL_FORWARDING,
        shard,
        r * 12 + u64::from(sf_type) * 3 + u64::from(slot),
    )
}

/// A deterministic subset of `0..n` (n ≤ 4) with `count` members, as a bit
/// mask: TATP's "random subset" population rule.
fn subset(h: u64, n: u8, count: u8) -> u8 {
    let mut order: [u8; 4] = [0, 1, 2, 3];
    let mut g = mix64(h);
    for i in (1..n as usize).rev() {
        let j = (g % (i as u64 + 1)) as usize;
        order.swap(i, j);
        g = mix64(g);
    }
    order[..count as usize].iter().fold(0, |m, &i| m | (1 << i))
}

/// The population of subscriber `s`: which access-info and
/// special-facility types exist, which special facilities are active, and
/// which call-forwarding slots exist per special facility.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Population {
    pub access_info: u8,
    pub special_facility: u8,
    pub active: u8,
    pub call_forwarding: [u8; 4],
}

pub fn population(s: u64) -> Population {
    let h = mix64(s ^ 0x7a7f_0000_0000_0001);
    // 1..=4 access-info and special-facility rows.
    let special_facility = subset(mix64(h ^ 2), 4, 1 + (mix64(h ^ 3) % 4) as u8);
    let mut active = 0;
    let mut call_forwarding = [0; 4];
    for t in 0..4u8 {
        let ht = mix64(h ^ (16 + u64::from(t)));
        if ht % 100 < 85 {
            active |= 1 << t;
        }
        if special_facility & (1 << t) != 0 {
            // 0..=3 rows out of the 3 start times.
            call_forwarding[t as usize] = subset(mix64(ht ^ 5), 3, (mix64(ht) % 4) as u8);
        }
    }
    Population {
        access_info: subset(mix64(h ^ 1), 4, 1 + (mix64(h ^ 4) % 4) as u8),
        special_facility,
        active: active & special_facility,
        call_forwarding,
    }
}

fn record(size: usize, key: Key, present: Option<bool>) -> Value {
    let mut v = vec![0u8; size];
    fill(&mut v, crate::slots::key_seed(key));
    if let Some(p) = present {
        v[PRESENT] = u8::from(p);
    }
    v.into()
}

/// The TATP workload.
#[derive(Clone, Debug)]
pub struct Tatp {
    cfg: TatpConfig,
}

impl Tatp {
    pub fn new(cfg: TatpConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Tatp { cfg })
    }

    pub fn config(&self) -> &TatpConfig {
        &self.cfg
    }

    /// A concrete generator (no boxing).
    pub fn tatp_generator(&self) -> TatpGenerator {
        TatpGenerator { cfg: self.cfg }
    }
}

impl Workload for Tatp {
    fn name(&self) -> &'static str {
        "tatp"
    }

    fn shards(&self) -> u32 {
        self.cfg.partitions
    }

    fn load(&self, shard: ShardId, store: &mut Store) {
        let cfg = &self.cfg;
        assert!(
            shard.0 < cfg.partitions,
            "tatp: shard {} out of range",
            shard.0
        );
        let n = (cfg.subscribers - u64::from(shard.0)).div_ceil(u64::from(cfg.partitions)) as usize;
        store.reserve(TableId(SUBSCRIBER), n);
        store.reserve(TableId(ACCESS_INFO), 4 * n);
        store.reserve(TableId(SPECIAL_FACILITY), 4 * n);
        store.reserve(TableId(CALL_FORWARDING), 12 * n);
        for s in (u64::from(shard.0)..cfg.subscribers).step_by(cfg.partitions as usize) {
            let pop = population(s);
            let k = subscriber_key(cfg, s);
            store.load(k, record(SUBSCRIBER_SIZE, k, None));
            for t in 0..4u8 {
                let bit = 1 << t;
                let k = access_info_key(cfg, s, t);
                store.load(
                    k,
                    record(ACCESS_INFO_SIZE, k, Some(pop.access_info & bit != 0)),
                );
                let k = special_facility_key(cfg, s, t);
                let mut sf = record(
                    SPECIAL_FACILITY_SIZE,
                    k,
                    Some(pop.special_facility & bit != 0),
                )
                .to_vec();
                sf[IS_ACTIVE] = u8::from(pop.active & bit != 0);
                store.load(k, sf.into());
                for slot in 0..3u8 {
                    let k = call_forwarding_key(cfg, s, t, slot);
                    let present = pop.call_forwarding[t as usize] & (1 << slot) != 0;
                    let mut cf = record(CALL_FORWARDING_SIZE, k, Some(present)).to_vec();
                    cf[END_TIME] = START_TIMES[slot as usize] + 1 + (cf[END_TIME] % 8);
                    store.load(k, cf.into());
                }
            }
        }
    }

    fn generator(&self, _client: ClientSlot) -> Box<dyn TxnGenerator> {
        Box::new(self.tatp_generator())
    }

    /// One sample per type, in its largest shape: the multi-subscriber
    /// reads on as many shards as they can span.
    fn profiles(&self) -> Vec<TxnProfile> {
        let cfg = &self.cfg;
        let spread = u64::from(cfg.ro_keys.min(cfg.partitions));
        TatpKind::ALL
            .iter()
            .map(|&kind| {
                let n = match kind {
                    TatpKind::GetSubscriberData | TatpKind::GetAccessData => spread,
                    _ => 1,
                };
                let params = TatpParams {
                    kind,
                    subscribers: (0..n).collect(),
                    ai_types: if kind == TatpKind::GetAccessData {
                        vec![0; n as usize]
                    } else {
                        Vec::new()
                    },
                    sf_type: 0,
                    slot: 0,
                    time: 0,
                    seed: 0,
                };
                TxnProfile::of(&TatpTxn::new(cfg, params))
            })
            .collect()
    }

    fn decode_txn(&self, name: &str, params: &[u8]) -> Result<Txn, DecodeError> {
        let p = decode_params(&self.cfg, params)?;
        if p.kind.name() != name {
            return Err(DecodeError::invalid(
                "procedure",
                format!("'{name}' carries the parameters of {}", p.kind.name()),
            ));
        }
        Ok(Arc::new(TatpTxn::new(&self.cfg, p)))
    }
}

/// Generates [`TatpTxn`]s.
#[derive(Clone, Debug)]
pub struct TatpGenerator {
    cfg: TatpConfig,
}

impl TatpGenerator {
    /// A subscriber id by TATP's NURand.
    pub fn subscriber<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let a = self.cfg.nurand_a();
        (rng.random_range(0..=a) | rng.random_range(0..self.cfg.subscribers)) % self.cfg.subscribers
    }

    /// `n` distinct subscribers.
    fn subscribers<R: Rng + ?Sized>(&self, rng: &mut R, n: u32) -> Vec<u64> {
        let mut v: Vec<u64> = Vec::with_capacity(n as usize);
        while v.len() < n as usize {
            let s = self.subscriber(rng);
            if !v.contains(&s) {
                v.push(s);
            }
        }
        v
    }

    pub fn generate<R: Rng + ?Sized>(&mut self, rng: &mut R) -> TatpTxn {
        let kind = TatpKind::ALL[pick(&MIX, rng)];
        self.generate_kind(kind, rng)
    }

    /// One transaction of type `kind`.
    pub fn generate_kind<R: Rng + ?Sized>(&mut self, kind: TatpKind, rng: &mut R) -> TatpTxn {
        let cfg = &self.cfg;
        let sf_type: u8 = rng.random_range(0..4);
        let slot: u8 = rng.random_range(0..3);
        let (subscribers, ai_types, time) = match kind {
            TatpKind::GetSubscriberData => (self.subscribers(rng, cfg.ro_keys), Vec::new(), 0),
            TatpKind::GetAccessData => {
                let subs = self.subscribers(rng, cfg.ro_keys);
                let types = subs.iter().map(|_| rng.random_range(0..4)).collect();
                (subs, types, 0)
            }
            // The specification's end_time: rand(1..24).
            TatpKind::GetNewDestination => (
                vec![self.subscriber(rng)],
                Vec::new(),
                rng.random_range(1..=24),
            ),
            // end_time = start_time + rand(1..8).
            TatpKind::InsertCallForwarding => (
                vec![self.subscriber(rng)],
                Vec::new(),
                START_TIMES[slot as usize] + rng.random_range(1..=8),
            ),
            _ => (vec![self.subscriber(rng)], Vec::new(), 0),
        };
        let params = TatpParams {
            kind,
            subscribers,
            ai_types,
            sf_type,
            slot,
            time,
            seed: if kind.read_only() { 0 } else { rng.random() },
        };
        TatpTxn::new(cfg, params)
    }
}

/// What a TATP transaction was drawn with: its type and parameters, from
/// which [`TatpTxn::new`] derives the keys (and the wire carries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TatpParams {
    pub kind: TatpKind,
    /// One subscriber, or `ro_keys` distinct ones for GET_SUBSCRIBER_DATA
    /// and GET_ACCESS_DATA.
    pub subscribers: Vec<u64>,
    /// GET_ACCESS_DATA: the `ai_type` (0..4) read for each subscriber.
    pub ai_types: Vec<u8>,
    /// The special-facility type (0..4).
    pub sf_type: u8,
    /// The call-forwarding slot (index into [`START_TIMES`]).
    pub slot: u8,
    /// GET_NEW_DESTINATION: the end time asked for; INSERT_CALL_FORWARDING:
    /// the new row's end time.
    pub time: u8,
    /// The new values' randomness (bit_1, data_a, vlr_location, numberx).
    pub seed: u64,
}

impl TxnGenerator for TatpGenerator {
    fn next(&mut self, rng: &mut SmallRng) -> Txn {
        Arc::new(self.generate(rng))
    }
}

/// One TATP transaction.
#[derive(Clone, Debug)]
pub struct TatpTxn {
    params: TatpParams,
    pieces: Vec<PieceSpec>,
}

impl TatpTxn {
    /// The transaction `params` describe; they must be in range for `cfg`
    /// (as drawn, or as [`Workload::decode_txn`] checks them).
    pub fn new(cfg: &TatpConfig, params: TatpParams) -> TatpTxn {
        let p = &params;
        let s0 = p.subscribers[0];
        let mut accesses: Vec<(Key, bool)> = Vec::new();
        match p.kind {
            TatpKind::GetSubscriberData => {
                for &s in &p.subscribers {
                    accesses.push((subscriber_key(cfg, s), false));
                }
            }
            TatpKind::GetAccessData => {
                for (&s, &t) in p.subscribers.iter().zip(&p.ai_types) {
                    accesses.push((access_info_key(cfg, s, t), false));
                }
            }
            TatpKind::GetNewDestination => {
                accesses.push((special_facility_key(cfg, s0, p.sf_type), false));
                accesses.push((call_forwarding_key(cfg, s0, p.sf_type, p.slot), false));
            }
            TatpKind::UpdateSubscriberData => {
                accesses.push((subscriber_key(cfg, s0), true));
                accesses.push((special_facility_key(cfg, s0, p.sf_type), true));
            }
            TatpKind::UpdateLocation => accesses.push((subscriber_key(cfg, s0), true)),
            TatpKind::InsertCallForwarding => {
                accesses.push((subscriber_key(cfg, s0), false));
                for t in 0..4 {
                    accesses.push((special_facility_key(cfg, s0, t), false));
                }
                accesses.push((call_forwarding_key(cfg, s0, p.sf_type, p.slot), true));
            }
            TatpKind::DeleteCallForwarding => {
                accesses.push((subscriber_key(cfg, s0), false));
                accesses.push((call_forwarding_key(cfg, s0, p.sf_type, p.slot), true));
            }
        }
        TatpTxn {
            pieces: pieces_by_shard(&accesses),
            params,
        }
    }

    pub fn kind(&self) -> TatpKind {
        self.params.kind
    }

    pub fn params(&self) -> &TatpParams {
        &self.params
    }
}

/// Decode the parameters [`TatpTxn::encode_params`] wrote, checking them
/// against `cfg`: a known type, the subscriber count its type takes,
/// subscribers and types in range.
fn decode_params(cfg: &TatpConfig, mut buf: &[u8]) -> Result<TatpParams, DecodeError> {
    let buf = &mut buf;
    let k = get_u8(buf, "tatp type")?;
    let kind = *TatpKind::ALL
        .get(k as usize)
        .ok_or_else(|| DecodeError::invalid("tatp type", format!("{k} >= 7")))?;
    let n = get_len(buf, 1, "tatp subscribers")?;
    let many = matches!(kind, TatpKind::GetSubscriberData | TatpKind::GetAccessData);
    if n == 0 || n > MAX_RO_KEYS as usize || (!many && n != 1) {
        return Err(DecodeError::invalid(
            "tatp subscribers",
            format!("{n} subscribers for {}", kind.name()),
        ));
    }
    let mut subscribers = Vec::with_capacity(n);
    let mut ai_types = Vec::new();
    for _ in 0..n {
        let s = get_varint(buf, "tatp subscriber")?;
        if s >= cfg.subscribers {
            return Err(DecodeError::invalid(
                "tatp subscriber",
                format!("{s} >= subscribers ({})", cfg.subscribers),
            ));
        }
        subscribers.push(s);
        if kind == TatpKind::GetAccessData {
            ai_types.push(get_small(buf, 4, "tatp ai_type")?);
        }
    }
    let params = TatpParams {
        kind,
        subscribers,
        ai_types,
        sf_type: get_small(buf, 4, "tatp sf_type")?,
        slot: get_small(buf, 3, "tatp start_time slot")?,
        time: get_u8(buf, "tatp time")?,
        seed: get_u64(buf, "tatp seed")?,
    };
    if !buf.is_empty() {
        return Err(DecodeError::Trailing(buf.len()));
    }
    Ok(params)
}

/// A byte below `limit`.
fn get_small(buf: &mut &[u8], limit: u8, what: &'static str) -> Result<u8, DecodeError> {
    let v = get_u8(buf, what)?;
    if v >= limit {
        return Err(DecodeError::invalid(what, format!("{v} >= {limit}")));
    }
    Ok(v)
}

fn present(v: Option<&Value>) -> bool {
    v.is_some_and(|v| v.first() == Some(&1))
}

/// `old` with `f` applied to a copy (zeros of `size` bytes when missing).
fn modified(old: Option<&Value>, size: usize, f: impl FnOnce(&mut [u8])) -> Value {
    let mut buf = old.map_or_else(|| vec![0u8; size], |v| v.to_vec());
    buf.resize(size, 0);
    f(&mut buf);
    Bytes::from(buf)
}

impl Procedure for TatpTxn {
    fn name(&self) -> &'static str {
        self.params.kind.name()
    }

    /// Wire parameters: the type's index in [`TatpKind::ALL`], the
    /// subscriber count and ids (each followed by its `ai_type` for
    /// GET_ACCESS_DATA), `sf_type`, slot, time and seed.
    fn encode_params(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let p = &self.params;
        let k = TatpKind::ALL
            .iter()
            .position(|&k| k == p.kind)
            .expect("a kind");
        out.put_u8(k as u8);
        put_varint(out, p.subscribers.len() as u64);
        for (i, &s) in p.subscribers.iter().enumerate() {
            put_varint(out, s);
            if p.kind == TatpKind::GetAccessData {
                out.put_u8(p.ai_types[i]);
            }
        }
        out.put_u8(p.sf_type);
        out.put_u8(p.slot);
        out.put_u8(p.time);
        out.put_u64_le(p.seed);
        Ok(())
    }

    fn pieces(&self) -> &[PieceSpec] {
        &self.pieces
    }

    /// Read-only types write nothing (GET_NEW_DESTINATION outputs `numberx`
    /// when its facility is active and the forwarding outlasts the time
    /// asked for); a read-write transaction is one piece whose reads are in
    /// the order [`TatpGenerator::generate_kind`] drew them.
    fn execute(&self, piece: usize, reads: &[Option<&Value>], _inputs: &[Value]) -> PieceResult {
        let spec = &self.pieces[piece];
        let key = |i: usize| spec.reads[i].key;
        let p = &self.params;
        let seed = p.seed;
        let mut out = PieceResult::default();
        match p.kind {
            TatpKind::GetSubscriberData | TatpKind::GetAccessData => {}
            TatpKind::GetNewDestination => {
                if let (Some(sf), Some(cf)) = (reads[0], reads[1]) {
                    if present(Some(sf))
                        && sf[IS_ACTIVE] == 1
                        && present(Some(cf))
                        && cf[END_TIME] > p.time
                    {
                        out.output = cf.slice(NUMBERX);
                    }
                }
            }
            TatpKind::UpdateSubscriberData => {
                // Fails (writes nothing) without the special facility.
                if present(reads[1]) {
                    out.writes.push((
                        key(0),
                        modified(reads[0], SUBSCRIBER_SIZE, |b| {
                            b[BIT_1] = (b[BIT_1] & !1) | (seed & 1) as u8;
                        }),
                    ));
                    out.writes.push((
                        key(1),
                        modified(reads[1], SPECIAL_FACILITY_SIZE, |b| {
                            b[DATA_A] = (seed >> 8) as u8;
                        }),
                    ));
                }
            }
            TatpKind::UpdateLocation => {
                out.writes.push((
                    key(0),
                    modified(reads[0], SUBSCRIBER_SIZE, |b| {
                        b[VLR_LOCATION].copy_from_slice(&(seed as u32).to_le_bytes());
                    }),
                ));
            }
            TatpKind::InsertCallForwarding => {
                // reads: subscriber, the 4 special facilities, the slot.
                let facility = present(reads[1 + p.sf_type as usize]);
                if facility && !present(reads[5]) {
                    out.writes.push((
                        key(5),
                        modified(reads[5], CALL_FORWARDING_SIZE, |b| {
                            b[PRESENT] = 1;
                            b[END_TIME] = p.time;
                            fill(&mut b[NUMBERX], seed);
                        }),
                    ));
                }
            }
            TatpKind::DeleteCallForwarding => {
                if present(reads[1]) {
                    out.writes.push((
                        key(1),
                        modified(reads[1], CALL_FORWARDING_SIZE, |b| b[PRESENT] = 0),
                    ));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
