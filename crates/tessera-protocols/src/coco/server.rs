//! A shard replica: serves reads on any replica; locks, validates and
//! writes back at the primary; applies replicated writes at the backups;
//! takes part in epoch commit (and hosts the epoch manager on shard 0's
//! first replica).

use super::epoch::{Action, EpochManager};
use super::gc::{self, Garbage};
use super::locks::{lock_exclusive, lock_shared, unlock_shared};
use super::msg::{Decided, Granted, Msg, PieceReply, TsRead};
use super::redo::{self, Entry, Recovered};
use super::undo::{Saved, Undo};
use super::{Cc, CocoConfig, CommitMode, Isolation};
use crate::tombstones::Tombstones;
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, Time, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::ServerEnv;
use tessera_core::storage::Store;
use tessera_core::topology::{Role, Topology};
use tessera_core::txn::{Txn, Value};
use tessera_core::FastMap;

/// A transaction holding locks at this primary.
struct Held {
    coord: NodeId,
    /// The write set here, locked exclusively.
    writes: Vec<(Key, Value)>,
    /// S2PL: records locked shared, and the writes of each piece run here,
    /// by piece (merged into `writes` in piece order, as the coordinator
    /// merges them; a duplicate **Read** re-runs a piece but records
    /// nothing).
    shared: Vec<Key>,
    pieces: Vec<(u16, Vec<(Key, Value)>)>,
    /// The epoch it took its first write lock in: an EpochPrepare of this
    /// epoch or a later one waits for it to finish (one holding only read
    /// locks holds no epoch up).
    tag: u64,
    /// The answer to its lock request, resent on duplicates.
    answer: (u64, u64),
    heard: Time,
    /// When it was created here (its first lock): what the write-lock
    /// hold counters measure from.
    since: Time,
}

/// Why a primary refused a lock or validation request (Fig. 4's lock and
/// validate steps, §5.1 / §5.2): a write lock held by another transaction
/// (NO_WAIT), a read whose record changed since, or one whose record is
/// unchanged but write-locked by another transaction.
#[derive(Clone, Copy)]
enum Conflict {
    Lock,
    Changed,
    Locked,
}

/// `conflicts_<cause>_t<table>` for tables 0 to 15, `..._t16plus` above.
macro_rules! conflict_counters {
    ($cause:literal) => {
        [
            concat!("conflicts_", $cause, "_t0"),
            concat!("conflicts_", $cause, "_t1"),
            concat!("conflicts_", $cause, "_t2"),
            concat!("conflicts_", $cause, "_t3"),
            concat!("conflicts_", $cause, "_t4"),
            concat!("conflicts_", $cause, "_t5"),
            concat!("conflicts_", $cause, "_t6"),
            concat!("conflicts_", $cause, "_t7"),
            concat!("conflicts_", $cause, "_t8"),
            concat!("conflicts_", $cause, "_t9"),
            concat!("conflicts_", $cause, "_t10"),
            concat!("conflicts_", $cause, "_t11"),
            concat!("conflicts_", $cause, "_t12"),
            concat!("conflicts_", $cause, "_t13"),
            concat!("conflicts_", $cause, "_t14"),
            concat!("conflicts_", $cause, "_t15"),
            concat!("conflicts_", $cause, "_t16plus"),
        ]
    };
}

impl Conflict {
    /// The results counter of a conflict on `key`, by cause and table.
    fn counter(self, key: Key) -> &'static str {
        const LOCK: [&str; 17] = conflict_counters!("lock");
        const CHANGED: [&str; 17] = conflict_counters!("changed");
        const LOCKED: [&str; 17] = conflict_counters!("locked");
        let names = match self {
            Conflict::Lock => &LOCK,
            Conflict::Changed => &CHANGED,
            Conflict::Locked => &LOCKED,
        };
        names[(key.table.0 as usize).min(names.len() - 1)]
    }
}

/// Writes sent to the backups, not yet acknowledged by all.
struct Replication {
    epoch: u64,
    txn: TxnId,
    coord: NodeId,
    msg: Msg,
    waiting: Vec<NodeId>,
    sent_at: Time,
    /// 2PC(Sync): when the transaction's write locks here were taken (they
    /// go with the last acknowledgement); `None` for copies that hold no
    /// lock.
    locked_since: Option<Time>,
}

/// A transaction this primary installed in an epoch not yet synced with
/// its backups (coordinator replication, see [`super::Replication`]): kept
/// to send to a backup that lacks it.
struct Installed {
    txn: TxnId,
    ts: u64,
    writes: Vec<(Key, Value)>,
}

/// What to do once a record is durable.
enum AfterPersist {
    EpochPrepared(u64),
    ReplicaAck {
        to: NodeId,
        seq: u64,
    },
    Synced {
        to: NodeId,
        epoch: u64,
        missing: Vec<TxnId>,
    },
    EpochCommit(u64),
    EpochAbort(u64, u64),
}

pub struct CocoServer {
    me: NodeId,
    config: CocoConfig,
    store: Store,
    /// The other replicas of this shard, when this is its primary and the
    /// commit mode replicates.
    backups: Vec<NodeId>,
    held: FastMap<TxnId, Held>,
    /// Finished transactions (true: committed), so that duplicates neither
    /// lock again nor install twice.
    ended: Tombstones<bool>,
    replication: BTreeMap<u64, Replication>,
    next_seq: u64,
    /// Coordinator replication, at a primary: what it installed by epoch,
    /// not yet known to be at every backup; the last epoch each backup
    /// (in `backups` order) confirmed; the last **EpochSync** sent (epoch,
    /// when).
    unsynced: BTreeMap<u64, Vec<Installed>>,
    synced: Vec<u64>,
    sync_sent: Option<(u64, Time)>,
    /// Coordinator replication, at a backup: the transactions whose writes
    /// arrived, by epoch (until it commits or aborts).
    received: FastMap<TxnId, u64>,
    /// Events handled, as a primary or a backup (results counters).
    primary: bool,
    events: u64,
    /// The same events by cause ([`Msg::event_counters`], timers, log
    /// forces done): the per-message CPU breakdown of a run.
    by_cause: BTreeMap<&'static str, u64>,
    /// Why lock and validation requests failed here, by cause and table
    /// ([`Conflict::counter`]), and the write-lock hold times of committed
    /// transactions (lock to release, summed, and how many): what Fig. 9's
    /// abort rates are made of (§7.2).
    conflicts: BTreeMap<&'static str, u64>,
    lock_hold_ns: u64,
    lock_holds: u64,
    /// This server's current epoch (§3.1): transactions that lock here now
    /// are tagged with it.
    epoch: u64,
    /// The latest epoch the manager asked to prepare and which is not yet
    /// answered, and the latest one answered.
    prepare_wanted: Option<u64>,
    prepared: u64,
    flushing: bool,
    /// Redo records of writes not yet forced (§6.2).
    log: BytesMut,
    /// Every redo entry of an epoch not yet committed, forced or not
    /// (`epoch` mode): a checkpoint carries them (see [`redo`]).
    open: Vec<Entry>,
    /// Every key installed since the load (`epoch` mode): what a
    /// checkpoint's image holds.
    written: tessera_core::FastSet<Key>,
    /// The last epoch known committed, and the last one checkpointed.
    committed: u64,
    checkpointed: u64,
    /// Redo bytes logged since the last checkpoint, and that checkpoint's
    /// size.
    logged: usize,
    checkpoint_bytes: usize,
    /// Restarted and waiting for the manager's [`Msg::EpochStatus`] to
    /// replay this log; nothing else is served meanwhile (§3.2).
    recovering: Option<Recovered>,
    /// Restarts recovered, redo entries replayed and log bytes read
    /// (results counters).
    recoveries: u64,
    from_checkpoint: u64,
    replayed: u64,
    replayed_bytes: u64,
    persists: FastMap<u64, AfterPersist>,
    next_token: u64,
    manager: Option<EpochManager>,
    manager_node: NodeId,
    /// Messages to this node itself (the epoch manager's), delivered after
    /// the current step's handler returns.
    local: VecDeque<Msg>,
    /// Last committed-epoch versions of what open epochs wrote (`epoch`
    /// mode only, §3.2).
    undo: Undo,
    /// The first epoch after the last abort carried out here (0: none).
    floor: u64,
    /// Epoch ranges `[from, to)` aborted: late writes of theirs are dropped.
    aborted: Vec<(u64, u64)>,
    /// Tuples put back by epoch aborts, and the manager's aborts already
    /// reported (results counters).
    reverted: u64,
    aborts_reported: u64,
    /// Deleted records and placeholders waiting for their epoch to commit
    /// (§6.3, see [`gc`]), and how many were removed (results counter).
    garbage: Garbage,
    collected: u64,
}

pub(super) const SWEEP: TimerId = TimerId(1);
const EPOCH: TimerId = TimerId(2);

impl CocoServer {
    pub fn new(config: CocoConfig, env: ServerEnv) -> Self {
        let topo: &Arc<Topology> = &env.topology;
        let group = &topo.shards[env.shard.0 as usize].replicas;
        let primary = group[0] == env.me;
        let backups = if primary && config.commit.replicates() {
            group[1..].to_vec()
        } else {
            Vec::new()
        };
        let manager_node = topo.shards[0].replicas[0];
        let mut manager = (manager_node == env.me).then(|| {
            let servers = topo
                .nodes
                .iter()
                .filter(|n| matches!(n.role, Role::Server { .. }))
                .map(|n| n.id)
                .collect();
            let clients = topo.client_hosts().map(|n| n.id).collect();
            // Only epoch mode can take an epoch back: the 2PC modes have
            // released their results already.
            let timeout = if config.commit == CommitMode::Epoch {
                config.epoch_timeout
            } else {
                Time::MAX
            };
            EpochManager::new(servers, clients, timeout).with_barrier(config.barrier)
        });
        let recovered = (config.commit.recovers_from_log() && !env.recovered.is_empty())
            .then(|| redo::recover(&env.recovered).expect("a server's own log decodes"));
        let mut server = CocoServer {
            me: env.me,
            ended: Tombstones::new(config.tombstone),
            config,
            store: env.store,
            backups: backups.clone(),
            held: tessera_core::fast_map(),
            replication: BTreeMap::new(),
            next_seq: 0,
            unsynced: BTreeMap::new(),
            synced: vec![0; backups.len()],
            sync_sent: None,
            received: tessera_core::fast_map(),
            primary,
            events: 0,
            by_cause: BTreeMap::new(),
            conflicts: BTreeMap::new(),
            lock_hold_ns: 0,
            lock_holds: 0,
            epoch: 1,
            prepare_wanted: None,
            prepared: 0,
            flushing: false,
            log: BytesMut::new(),
            persists: tessera_core::fast_map(),
            next_token: 0,
            manager: None,
            manager_node,
            local: VecDeque::new(),
            undo: Undo::default(),
            floor: 0,
            aborted: Vec::new(),
            reverted: 0,
            aborts_reported: 0,
            open: Vec::new(),
            written: Default::default(),
            committed: 0,
            checkpointed: 0,
            logged: 0,
            checkpoint_bytes: 0,
            recovering: None,
            recoveries: 0,
            from_checkpoint: 0,
            replayed: 0,
            replayed_bytes: 0,
            garbage: Garbage::default(),
            collected: 0,
        };
        if let Some(rec) = recovered {
            match manager.as_mut() {
                // The manager's own log says what is decided; the open
                // epochs abort as it starts (see [`EpochManager::restart`]).
                Some(m) => {
                    m.restart(rec.committed, rec.aborted.clone());
                    let mut aborted = rec.aborted.clone();
                    aborted.push(m.open_range());
                    let committed = rec.committed;
                    server.replay(rec, committed, aborted);
                }
                None => server.recovering = Some(rec),
            }
        }
        server.manager = manager;
        server
    }

    /// Rebuild the store from the log as of the committed epochs (§3.2,
    /// see [`redo`]) and take up the decided epochs.
    fn replay(&mut self, rec: Recovered, committed: u64, aborted: Vec<(u64, u64)>) {
        let lt_occ = self.config.cc == Cc::LtOcc;
        let applied = rec.replay(&mut self.store, committed, &aborted, lt_occ);
        self.written.extend(rec.image.iter().map(|r| r.0));
        self.written.extend(rec.entries.iter().map(|e| e.key));
        self.committed = committed;
        self.checkpointed = committed;
        self.prepared = rec.prepared;
        self.floor = aborted.iter().map(|r| r.1).max().unwrap_or(0);
        self.epoch = self.floor.max(committed + 1);
        self.aborted = aborted;
        self.recoveries += 1;
        self.from_checkpoint += rec.from_checkpoint as u64;
        self.replayed += applied as u64;
        self.replayed_bytes += rec.bytes as u64;
        // Replayed deletes leave deleted records of committed epochs.
        for k in rec
            .image
            .iter()
            .map(|r| r.0)
            .chain(rec.entries.iter().map(|e| e.key))
        {
            self.garbage.note(k);
        }
        self.collect_garbage(committed);
        tracing::debug!(
            target: "coco_epoch",
            phase = "recovered",
            node = self.me.0,
            epoch = committed,
            entries = applied,
            records = rec.records,
            bytes = rec.bytes,
        );
    }

    /// Every epoch up to `committed` committed: remove the deleted records
    /// and placeholders nothing needs any more (§6.3, see [`gc`]).
    fn collect_garbage(&mut self, committed: u64) {
        let removed = self.garbage.collect(&mut self.store, &self.undo, committed);
        self.collected += removed.len() as u64;
        for k in removed {
            self.written.remove(&k);
        }
    }

    /// Count an event under its primary or backup counter.
    fn count(&mut self, (primary, backup): (&'static str, &'static str)) {
        let name = if self.primary { primary } else { backup };
        *self.by_cause.entry(name).or_default() += 1;
    }

    /// A phase of epoch commit (§3.1, Fig. 1), for tests that crash nodes
    /// at a chosen point.
    fn trace(ctx: &Ctx<Msg>, phase: &'static str, node: NodeId, epoch: u64) {
        tracing::debug!(
            target: "coco_epoch",
            phase,
            node = node.0,
            epoch,
            at = ctx.observed_now()
        );
    }

    /// Force a checkpoint as of the last committed epoch (§6.2, see
    /// [`redo`]) once `checkpoint_every` epochs have committed since the
    /// last one and the log has grown by at least that checkpoint's size:
    /// recovery then reads at most about two images' worth, and the
    /// checkpoints never take more disk than the log itself. The unforced
    /// redo buffer goes with it: its entries are among the open ones.
    fn maybe_checkpoint(&mut self, ctx: &mut Ctx<Msg>) {
        if !self.config.commit.recovers_from_log()
            || self.committed < self.checkpointed + self.config.checkpoint_every
            || self.logged < self.checkpoint_bytes
        {
            return;
        }
        self.checkpointed = self.committed;
        let mut keys: Vec<Key> = self.written.iter().copied().collect();
        keys.sort_unstable();
        let image: Vec<(Key, Saved)> = keys
            .into_iter()
            .map(|k| {
                let s = self.undo.oldest(k).cloned();
                (k, s.unwrap_or_else(|| Saved::of(&self.store, k)))
            })
            .filter(|(_, s)| s.wts > 0)
            .collect();
        let record = redo::checkpoint_record(self.committed, &self.aborted, &image, &self.open);
        self.log.clear();
        self.logged = 0;
        self.checkpoint_bytes = record.len();
        self.next_token += 1;
        ctx.persist(self.next_token, record);
    }

    fn send(&mut self, ctx: &mut Ctx<Msg>, to: NodeId, msg: Msg) {
        if to == self.me {
            self.local.push_back(msg);
        } else {
            ctx.send(to, msg);
        }
    }

    fn persist(&mut self, ctx: &mut Ctx<Msg>, record: Bytes, then: AfterPersist) {
        self.next_token += 1;
        self.persists.insert(self.next_token, then);
        ctx.persist(self.next_token, record);
    }

    fn run_manager(
        &mut self,
        ctx: &mut Ctx<Msg>,
        f: impl FnOnce(&mut EpochManager, &mut Vec<Action>),
    ) {
        let Some(m) = self.manager.as_mut() else {
            return;
        };
        let mut out = Vec::new();
        f(m, &mut out);
        for a in out {
            match a {
                Action::Send(to, msg) => {
                    if let Msg::EpochPrepare { epoch } = msg {
                        Self::trace(ctx, "prepare_sent", to, epoch);
                    }
                    self.send(ctx, to, msg)
                }
                Action::PersistCommit(e) => {
                    let record = redo::commit_record(e);
                    self.persist(ctx, record, AfterPersist::EpochCommit(e));
                }
                Action::PersistAbort(e, next) => {
                    tracing::debug!(
                        target: "coco_epoch",
                        phase = "abort",
                        epoch = e,
                        next,
                        at = ctx.observed_now()
                    );
                    let record = redo::abort_record(e, next);
                    self.persist(ctx, record, AfterPersist::EpochAbort(e, next));
                }
            }
        }
    }

    /// Append redo records of `writes` of `epoch` (§6.2: key, timestamp,
    /// value).
    fn log_writes(&mut self, epoch: u64, ts: u64, version: Version, writes: &[(Key, Value)]) {
        let before = self.log.len();
        for (k, v) in writes {
            let e = Entry {
                epoch,
                key: *k,
                ts,
                version,
                value: v.clone(),
            };
            e.encode(&mut self.log);
            if self.config.commit == CommitMode::Epoch {
                self.written.insert(*k);
                self.open.push(e);
            }
        }
        self.logged += self.log.len() - before;
    }

    /// Run pieces on this replica's data (§4 execution phase). S2PL locks
    /// what a piece reads before it runs and what it writes after, NO_WAIT
    /// (see [`super::locks`]).
    #[allow(clippy::too_many_arguments)]
    fn on_read(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        floor: TxnId,
        proc: Txn,
        pieces: Vec<u16>,
        inputs: Vec<Vec<Value>>,
        mut own: Vec<(Key, Value)>,
    ) {
        let s2pl = self.config.cc == Cc::S2pl;
        if s2pl && !self.s2pl_admit(ctx, from, txn, floor) {
            return;
        }
        let mut results = Vec::with_capacity(pieces.len());
        for (piece, inputs) in pieces.into_iter().zip(inputs) {
            let spec = proc.resolve(piece as usize, &inputs);
            if s2pl {
                let keys: Vec<Key> = spec
                    .reads
                    .iter()
                    .map(|a| a.key)
                    .filter(|k| !own.iter().any(|(o, _)| o == k))
                    .collect();
                if !self.s2pl_lock(txn, &keys, false) {
                    return self.refuse_read(ctx, from, txn);
                }
            }
            let mut reads = Vec::with_capacity(spec.reads.len());
            let values: Vec<Option<&Value>> = spec
                .reads
                .iter()
                .map(|a| {
                    if let Some((_, v)) = own.iter().rev().find(|(k, _)| *k == a.key) {
                        return Some(v).filter(|v| !v.is_empty()); // its own delete
                    }
                    let r = self.store.get(a.key);
                    reads.push(TsRead {
                        key: a.key,
                        version: r.map_or(Version::INITIAL, |r| r.meta.version),
                        wts: r.map_or(0, |r| r.meta.wts),
                    });
                    // A placeholder or a deleted record reads as absent (§6.3).
                    r.filter(|r| !gc::is_absent(r)).map(|r| &r.value)
                })
                .collect();
            let res = proc.execute(piece as usize, &values, &inputs);
            drop(values);
            let wts_of = |store: &Store, k: Key| store.get(k).map_or(0, |r| r.meta.wts);
            // S2PL: the TIDs of the records written, for the commit TID
            // (Silo's rule (a)); locked, they stay put until write-back.
            let written = if s2pl {
                let keys: Vec<Key> = res.writes.iter().map(|(k, _)| *k).collect();
                if !self.s2pl_lock(txn, &keys, true) {
                    return self.refuse_read(ctx, from, txn);
                }
                self.s2pl_record(txn, piece, &res.writes);
                keys.into_iter()
                    .map(|k| (k, wts_of(&self.store, k)))
                    .collect()
            } else {
                match self.config.isolation {
                    Isolation::Serializable => Vec::new(),
                    Isolation::Snapshot => res
                        .writes
                        .iter()
                        .map(|(k, _)| (*k, wts_of(&self.store, *k)))
                        .collect(),
                }
            };
            own.extend(res.writes.iter().cloned());
            results.push(PieceReply {
                piece,
                reads,
                written,
                writes: res.writes,
                output: res.output,
                user_abort: res.user_abort,
            });
        }
        let locks = s2pl.then_some(Granted {
            ok: true,
            epoch: self.epoch,
            floor: self.floor,
        });
        ctx.send(
            from,
            Msg::ReadOk {
                txn,
                results,
                locks,
            },
        );
    }

    /// S2PL: may `txn`'s pieces run (and lock) here? Not once it ended
    /// here — refused if it aborted; a committed one's coordinator no
    /// longer waits — nor when its coordinator has declared it over.
    fn s2pl_admit(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, floor: TxnId) -> bool {
        self.ended.raise_floor(floor);
        match self.ended.get(txn) {
            Some(false) => {
                self.refuse_read(ctx, from, txn);
                return false;
            }
            Some(true) => return false,
            None if self.ended.below_floor(txn) && !self.held.contains_key(&txn) => return false,
            None => {}
        }
        let now = ctx.now();
        let h = self.held.entry(txn).or_insert_with(|| Held {
            coord: from,
            writes: Vec::new(),
            shared: Vec::new(),
            pieces: Vec::new(),
            tag: 0,
            answer: (0, 0),
            heard: now,
            since: now,
        });
        h.heard = now;
        true
    }

    /// S2PL: lock `keys` for `txn`, shared or exclusive, NO_WAIT; false on
    /// a conflict (the caller refuses the whole transaction).
    fn s2pl_lock(&mut self, txn: TxnId, keys: &[Key], exclusive: bool) -> bool {
        let h = self.held.get_mut(&txn).expect("admitted");
        for &k in keys {
            if self.store.get(k).is_none() {
                // A placeholder to lock; it reads as empty until installed.
                self.store.load(k, Value::new());
            }
            let meta = &mut self.store.get_mut(k).expect("just ensured").meta;
            let written = h.writes.iter().any(|(w, _)| *w == k);
            if exclusive {
                let shared = h.shared.iter().position(|s| *s == k);
                if !lock_exclusive(meta, txn, shared.is_some()) {
                    return false;
                }
                if let Some(i) = shared {
                    h.shared.swap_remove(i);
                }
                if !written {
                    if h.writes.is_empty() {
                        h.tag = self.epoch;
                    }
                    h.writes.push((k, Value::new()));
                }
            } else if !written && !h.shared.contains(&k) {
                if !lock_shared(meta, txn) {
                    return false;
                }
                h.shared.push(k);
            }
        }
        true
    }

    /// S2PL: keep what piece `piece` wrote (the first run of it only) and
    /// bring the locked write set's values up to date, later pieces last.
    fn s2pl_record(&mut self, txn: TxnId, piece: u16, writes: &[(Key, Value)]) {
        let h = self.held.get_mut(&txn).expect("admitted");
        if h.pieces.iter().any(|(p, _)| *p == piece) {
            return;
        }
        h.pieces.push((piece, writes.to_vec()));
        h.pieces.sort_unstable_by_key(|(p, _)| *p);
        for (k, v) in h.pieces.iter().flat_map(|(_, w)| w) {
            if let Some(w) = h.writes.iter_mut().find(|(wk, _)| wk == k) {
                w.1 = v.clone();
            }
        }
    }

    /// S2PL: a lock conflict (or a Read of a transaction aborted here):
    /// drop everything `txn` holds here and say so.
    fn refuse_read(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if let Some(h) = self.held.remove(&txn) {
            self.release(txn, &h);
        }
        self.ended.insert(txn, false, ctx.now());
        let locks = Some(Granted {
            ok: false,
            epoch: self.epoch,
            floor: self.floor,
        });
        ctx.send(
            from,
            Msg::ReadOk {
                txn,
                results: Vec::new(),
                locks,
            },
        );
        self.try_prepare(ctx);
    }

    /// Drop every lock `h` holds for `txn`.
    fn release(&mut self, txn: TxnId, h: &Held) {
        self.unlock(txn, h.writes.iter().map(|(k, _)| *k));
        self.unlock_shared(&h.shared);
    }

    fn unlock_shared(&mut self, keys: &[Key]) {
        for &k in keys {
            if let Some(r) = self.store.get_mut(k) {
                unlock_shared(&mut r.meta);
            }
        }
    }

    /// The coordinator decided and `txn` only read here (S2PL), or every
    /// replica has the writes it installed here (2PC(Sync) with
    /// coordinator replication): drop its locks.
    fn on_release(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        if let Some(h) = self.held.remove(&txn) {
            debug_assert!(h.writes.is_empty(), "released a write set");
            self.release(txn, &h);
            self.ended.insert(txn, true, ctx.now());
            return;
        }
        let kept = self
            .replication
            .iter()
            .find(|(_, r)| r.txn == txn && r.locked_since.is_some())
            .map(|(seq, _)| *seq);
        if let Some(seq) = kept {
            let r = self.replication.remove(&seq).expect("found");
            self.replicated(ctx, r);
        }
    }

    /// A primary answers a write-back once it installed it, before its
    /// backups have it: in epoch mode (replication is asynchronous), and
    /// under 2PC(Sync) when the coordinator replicates (it waits for the
    /// backups itself). 2PC(Sync) replicated by the primary answers when
    /// the last backup has.
    fn answers_at_install(&self) -> bool {
        self.config.commit != CommitMode::TwoPcSync || self.config.coordinator_replicates_sync()
    }

    fn unlock(&mut self, txn: TxnId, keys: impl Iterator<Item = Key>) {
        for k in keys {
            if let Some(r) = self.store.get_mut(k) {
                if r.meta.lock == txn.0 {
                    r.meta.lock = 0;
                }
            }
        }
    }

    /// Lock `writes` NO_WAIT; the bound their metadata puts on the commit
    /// timestamp, or `None` on a conflict (nothing stays locked).
    fn lock(&mut self, txn: TxnId, writes: &[(Key, Value)]) -> Option<u64> {
        let mut bound = 0;
        for (i, (k, _)) in writes.iter().enumerate() {
            if self.store.get(*k).is_none() {
                // An insert's placeholder to lock; it reads as absent until
                // installed (§6.3, see [`gc`]).
                self.store.load(*k, Value::new());
                self.garbage.note(*k);
            }
            let r = self.store.get_mut(*k).expect("just ensured");
            if r.meta.lock != 0 && r.meta.lock != txn.0 {
                self.unlock(txn, writes[..i].iter().map(|(k, _)| *k));
                self.conflict(Conflict::Lock, *k);
                return None;
            }
            r.meta.lock = txn.0;
            bound = bound.max(match self.config.cc {
                Cc::PtOcc | Cc::S2pl => r.meta.wts,
                Cc::LtOcc => r.meta.rts + 1,
            });
        }
        Some(bound)
    }

    /// Validate `reads` at timestamp `ts` (§5.1 / §5.2); a failure is
    /// counted by its first failing read.
    fn validate(&mut self, txn: TxnId, reads: &[(Key, u64)], ts: u64) -> bool {
        let failed = self.first_invalid(txn, reads, ts);
        if let Some((kind, k)) = failed {
            self.conflict(kind, k);
        }
        failed.is_none()
    }

    /// The first read of `reads` that fails validation at `ts`, and why.
    fn first_invalid(
        &mut self,
        txn: TxnId,
        reads: &[(Key, u64)],
        ts: u64,
    ) -> Option<(Conflict, Key)> {
        let cc = self.config.cc;
        let mine = |lock: u64| lock == 0 || lock == txn.0;
        reads.iter().find_map(|&(k, seen)| {
            if cc == Cc::LtOcc && seen == 0 && ts > 0 && self.store.get(k).is_none() {
                // Seen absent: a placeholder keeps the rts, so that an
                // insert commits above this read (§6.3, see [`gc`]).
                self.store.load(k, Value::new());
                self.garbage.note(k);
            }
            let Some(r) = self.store.get_mut(k) else {
                return (seen != 0).then_some((Conflict::Changed, k));
            };
            let failed = match cc {
                Cc::PtOcc | Cc::S2pl if r.meta.wts != seen => Some(Conflict::Changed),
                Cc::PtOcc | Cc::S2pl => (!mine(r.meta.lock)).then_some(Conflict::Locked),
                // A record this transaction has locked is in its write
                // set: it only must not have changed since the read (Fig. 4,
                // lock step). Extending its rts to `ts` would stretch the
                // old version's validity over the very timestamp the write
                // installs, so a concurrent reader validating at `ts` would
                // see the old version and be ordered together with the
                // writer, not before it (a G2 cycle under contention).
                // Only records in T.RS \ T.WS are extended (§5.2).
                Cc::LtOcc if r.meta.lock == txn.0 => {
                    (r.meta.wts != seen).then_some(Conflict::Changed)
                }
                Cc::LtOcc if r.meta.wts != seen => Some(Conflict::Changed),
                Cc::LtOcc if r.meta.rts >= ts => None,
                Cc::LtOcc if r.meta.lock == 0 => {
                    r.meta.rts = ts;
                    None
                }
                Cc::LtOcc => Some(Conflict::Locked),
            };
            failed.map(|c| (c, k))
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn on_prepare(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        floor: TxnId,
        writes: Vec<(Key, Value)>,
        reads: Vec<(Key, u64)>,
        ts: u64,
        round: u8,
    ) {
        self.ended.raise_floor(floor);
        if self.ended.get(txn) == Some(&false) {
            // Aborted here (a lost lock conflict, or its locks went with an
            // epoch abort, §3.2): the coordinator may still be waiting.
            let (epoch, floor) = (self.epoch, self.floor);
            ctx.send(
                from,
                Msg::Prepared {
                    txn,
                    round,
                    ok: false,
                    epoch,
                    bound: 0,
                    floor,
                },
            );
            return;
        }
        if self.ended.contains(txn)
            || (self.ended.below_floor(txn) && !self.held.contains_key(&txn))
        {
            return; // committed already: the coordinator no longer waits
        }
        let mut bound = 0;
        let mut locked_now = false;
        if !writes.is_empty() {
            if let Some(h) = self.held.get_mut(&txn) {
                h.heard = ctx.now();
                let (epoch, bound) = h.answer;
                if reads.is_empty() {
                    ctx.send(
                        from,
                        Msg::Prepared {
                            txn,
                            round,
                            ok: true,
                            epoch,
                            bound,
                            floor: self.floor,
                        },
                    );
                    return;
                }
            }
            if !self.held.contains_key(&txn) {
                let Some(b) = self.lock(txn, &writes) else {
                    self.ended.insert(txn, false, ctx.now());
                    let epoch = self.epoch;
                    ctx.send(
                        from,
                        Msg::Prepared {
                            txn,
                            round,
                            ok: false,
                            epoch,
                            bound: 0,
                            floor: self.floor,
                        },
                    );
                    return;
                };
                bound = b;
                locked_now = true;
            } else {
                bound = self.held[&txn].answer.1;
            }
        }
        // LT-OCC: with writes locked here the primary picks the timestamp
        // (single round); a validation round brings it from the coordinator.
        // A snapshot transaction's `ts` is its TID_SI, which the reads are
        // validated at whatever the write set asks of the commit timestamp
        // (§5.3.2); the bound still raises that timestamp.
        let commit_ts = match self.config.cc {
            Cc::LtOcc if !writes.is_empty() => super::tid::lt_occ_ts(ts, bound, self.epoch),
            _ => ts,
        };
        if self.config.cc == Cc::LtOcc && !writes.is_empty() {
            bound = commit_ts;
        }
        let validate_at = match self.config.isolation {
            Isolation::Serializable => commit_ts,
            Isolation::Snapshot => ts,
        };
        let ok = self.validate(txn, &reads, validate_at);
        let epoch = self.epoch;
        if locked_now {
            if ok {
                self.held.insert(
                    txn,
                    Held {
                        coord: from,
                        writes,
                        shared: Vec::new(),
                        pieces: Vec::new(),
                        tag: epoch,
                        answer: (epoch, bound),
                        heard: ctx.now(),
                        since: ctx.now(),
                    },
                );
            } else {
                self.unlock(txn, writes.iter().map(|(k, _)| *k));
                self.ended.insert(txn, false, ctx.now());
            }
        }
        ctx.send(
            from,
            Msg::Prepared {
                txn,
                round,
                ok,
                epoch,
                bound,
                floor: self.floor,
            },
        );
    }

    /// Install the write-backs a request carries before serving it (see
    /// [`Decided`]): the coordinator sent them first. Only those still
    /// locked here: one installed already is answered by its own
    /// **WriteBack** (resent until answered). Answering every carried copy
    /// again flooded the client hosts: a request carries every write-back
    /// of its host in flight to this primary, and each drew a
    /// **WrittenBack** — 14 per transaction in the 48-client YCSB.
    fn install_decided(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, decided: Vec<Decided>) {
        for d in decided {
            if self.held.contains_key(&d.txn) {
                self.on_write_back(ctx, from, d.txn, d.ts, d.epoch);
            }
        }
    }

    fn on_write_back(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, ts: u64, epoch: u64) {
        let Some(h) = self.held.remove(&txn) else {
            match self.ended.get(txn) {
                Some(true)
                    if self.answers_at_install()
                        || !self.replication.values().any(|r| r.txn == txn) =>
                {
                    ctx.send(from, Msg::WrittenBack { txn });
                }
                // Its locks went with an epoch abort (§3.2): so did its
                // epoch, everywhere.
                Some(false) => ctx.send(from, Msg::Abort { txn }),
                _ => {}
            }
            return;
        };
        let version = txn.version();
        let keep_undo = self.config.commit == CommitMode::Epoch;
        // 2PC(Sync): "a transaction's write locks are not released until
        // all writes are replicated on all replicas" (§7.1.2); the last
        // backup's **Replicated** releases them (`on_replicated`).
        let hold = self.config.commit == CommitMode::TwoPcSync && !self.backups.is_empty();
        for (k, v) in &h.writes {
            if keep_undo {
                self.undo.before_write(&self.store, *k, epoch);
            }
            let r = self.store.get_mut(*k).expect("locked records exist");
            if v.is_empty() || gc::is_absent(r) {
                self.garbage.note(*k); // a delete, or an insert an abort may revert
            }
            r.value = v.clone();
            r.meta.version = version;
            r.meta.wts = ts;
            if self.config.cc == Cc::LtOcc {
                r.meta.rts = ts;
            }
            if !hold {
                r.meta.lock = 0;
            }
        }
        self.unlock_shared(&h.shared);
        if !hold && !h.writes.is_empty() {
            self.lock_held(ctx.now(), h.since);
        }
        self.log_writes(epoch, ts, version, &h.writes);
        self.ended.insert(txn, true, ctx.now());
        if self.backups.is_empty() {
            ctx.send(h.coord, Msg::WrittenBack { txn });
        } else if self.config.coordinator_replicates() {
            // The coordinator sent the backups their copies (§4.2.3); the
            // epoch's prepare checks that they arrived (`EpochSync`).
            ctx.send(h.coord, Msg::WrittenBack { txn });
            self.unsynced.entry(epoch).or_default().push(Installed {
                txn,
                ts,
                writes: h.writes,
            });
        } else {
            self.next_seq += 1;
            let seq = self.next_seq;
            let msg = Msg::Replicate {
                seq,
                txn,
                ts,
                epoch,
                version,
                writes: h.writes,
            };
            if self.config.coordinator_replicates_sync() {
                // The coordinator sent the backups their copies and
                // releases the locks once all have answered it
                // (**Release**); these copies go out only if that does not
                // come within a resend period (`sweep`).
            } else {
                for &b in &self.backups {
                    ctx.send(b, msg.clone());
                }
            }
            if self.answers_at_install() {
                ctx.send(h.coord, Msg::WrittenBack { txn });
            }
            self.replication.insert(
                seq,
                Replication {
                    epoch,
                    txn,
                    coord: h.coord,
                    msg,
                    waiting: self.backups.clone(),
                    sent_at: ctx.now(),
                    locked_since: hold.then_some(h.since),
                },
            );
        }
        self.try_prepare(ctx);
    }

    fn on_abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        if let Some(h) = self.held.remove(&txn) {
            self.release(txn, &h);
            self.ended.insert(txn, false, ctx.now());
            self.try_prepare(ctx);
        } else if !self.ended.contains(txn) {
            self.ended.insert(txn, false, ctx.now());
        }
    }

    /// A backup applies replicated writes newer than its own (Thomas write
    /// rule) and acknowledges once they are logged, durably if their epoch
    /// is already prepared here.
    #[allow(clippy::too_many_arguments)]
    fn on_replicate(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        seq: u64,
        txn: TxnId,
        ts: u64,
        epoch: u64,
        version: Version,
        writes: Vec<(Key, Value)>,
    ) {
        // `seq` 0: the coordinator's copy, acknowledged per epoch only
        // (see `on_epoch_sync`).
        let ack = seq != 0;
        if self.is_aborted(epoch) || epoch <= self.committed {
            // A late write of an aborted epoch: never applied. A write of
            // a committed epoch is a duplicate (the epoch committed once
            // every backup had it): applied again after its record was
            // deleted and collected, it would bring the record back (§6.3).
            if ack {
                ctx.send(from, Msg::Replicated { seq });
            }
            return;
        }
        if self.received.insert(txn, epoch).is_some() && !ack {
            return; // a duplicate of the coordinator's copy
        }
        let keep_undo = self.config.commit == CommitMode::Epoch;
        for (k, v) in &writes {
            let newer = self.store.get(*k).is_none_or(|r| ts > r.meta.wts);
            if keep_undo {
                if newer {
                    self.undo.before_write(&self.store, *k, epoch);
                } else {
                    self.undo.skipped_write(*k, epoch, ts, v, version);
                }
            }
            if v.is_empty() || self.store.get(*k).is_none_or(gc::is_absent) {
                self.garbage.note(*k);
            }
            if newer {
                self.store.install(*k, v.clone(), version);
                let r = self.store.get_mut(*k).expect("installed");
                r.meta.wts = ts;
                if self.config.cc == Cc::LtOcc {
                    r.meta.rts = r.meta.rts.max(ts);
                }
            }
        }
        self.log_writes(epoch, ts, version, &writes);
        if !ack {
            // Forced with the epoch's prepare, or before the answer to the
            // primary's EpochSync if that prepare is already under way.
        } else if self.must_force(epoch) {
            let record = redo::redo_record(&self.log.split(), None);
            self.persist(ctx, record, AfterPersist::ReplicaAck { to: from, seq });
        } else {
            ctx.send(from, Msg::Replicated { seq });
        }
    }

    /// A write of `epoch` logged now is not covered by this server's
    /// prepared record of it (already forced, or being forced): it must
    /// be forced on its own before it is acknowledged — where the log is
    /// recovered from ([`CommitMode::recovers_from_log`]).
    fn must_force(&self, epoch: u64) -> bool {
        self.config.commit.recovers_from_log()
            && (epoch <= self.prepared || (self.flushing && Some(epoch) <= self.prepare_wanted))
    }

    /// A backup, asked by its primary which of `txns` (epochs up to
    /// `epoch`) it lacks: it answers once the rest are logged, durably
    /// when its own prepare of `epoch` is already forced or under way (its
    /// prepared record covers them otherwise).
    fn on_epoch_sync(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, epoch: u64, txns: Vec<TxnId>) {
        let missing: Vec<TxnId> = txns
            .into_iter()
            .filter(|t| !self.received.contains_key(t))
            .collect();
        if self.must_force(epoch) && !self.log.is_empty() {
            let record = redo::redo_record(&self.log.split(), None);
            let then = AfterPersist::Synced {
                to: from,
                epoch,
                missing,
            };
            self.persist(ctx, record, then);
        } else {
            ctx.send(from, Msg::Synced { epoch, missing });
        }
    }

    /// A primary hears that a backup has every transaction of epochs up to
    /// `epoch` it installed but `missing`, which it now sends itself,
    /// acknowledged one by one (the prepare waits for them).
    fn on_synced(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, epoch: u64, missing: Vec<TxnId>) {
        let Some(i) = self.backups.iter().position(|b| *b == from) else {
            return;
        };
        if self.synced[i] >= epoch || self.sync_sent.is_none_or(|(e, _)| e != epoch) {
            return; // a late answer to an earlier sync
        }
        let now = ctx.now();
        for txn in missing {
            let found = self
                .unsynced
                .range(..=epoch)
                .find_map(|(e, v)| v.iter().find(|w| w.txn == txn).map(|w| (*e, w)));
            let Some((e, w)) = found else {
                continue; // its epoch aborted here meanwhile
            };
            self.next_seq += 1;
            let seq = self.next_seq;
            let msg = Msg::Replicate {
                seq,
                txn,
                ts: w.ts,
                epoch: e,
                version: txn.version(),
                writes: w.writes.clone(),
            };
            ctx.send(from, msg.clone());
            self.replication.insert(
                seq,
                Replication {
                    epoch: e,
                    txn,
                    coord: from,
                    msg,
                    waiting: vec![from],
                    sent_at: now,
                    locked_since: None,
                },
            );
        }
        self.synced[i] = epoch;
        self.try_prepare(ctx);
    }

    fn on_replicated(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, seq: u64) {
        let Some(r) = self.replication.get_mut(&seq) else {
            return;
        };
        r.waiting.retain(|n| *n != from);
        if r.waiting.is_empty() {
            let r = self.replication.remove(&seq).expect("present");
            self.replicated(ctx, r);
        }
    }

    /// Every backup has `r`'s writes: under 2PC(Sync) its write locks go,
    /// and a coordinator that waits for the primary hears so.
    fn replicated(&mut self, ctx: &mut Ctx<Msg>, r: Replication) {
        if self.config.commit == CommitMode::TwoPcSync {
            self.unlock_replicated(&r);
            if let Some(since) = r.locked_since {
                self.lock_held(ctx.now(), since);
            }
            if !self.answers_at_install() {
                ctx.send(r.coord, Msg::WrittenBack { txn: r.txn });
            }
        }
        self.try_prepare(ctx);
    }

    /// A committed transaction's write locks here went, taken at `since`.
    fn lock_held(&mut self, now: Time, since: Time) {
        self.lock_hold_ns += now.saturating_sub(since);
        self.lock_holds += 1;
    }

    fn conflict(&mut self, kind: Conflict, key: Key) {
        *self.conflicts.entry(kind.counter(key)).or_default() += 1;
    }

    /// 2PC(Sync): release the write locks a transaction kept at write-back
    /// until every backup had its writes.
    fn unlock_replicated(&mut self, r: &Replication) {
        if let Msg::Replicate { writes, .. } = &r.msg {
            self.unlock(r.txn, writes.iter().map(|(k, _)| *k));
        }
    }

    fn on_epoch_prepare(&mut self, ctx: &mut Ctx<Msg>, epoch: u64) {
        Self::trace(ctx, "prepare_received", self.me, epoch);
        if epoch <= self.prepared {
            let to = self.manager_node;
            self.send(ctx, to, Msg::EpochPrepared { epoch });
            return;
        }
        self.epoch = self.epoch.max(epoch + 1);
        // Every earlier epoch is decided, and aborted ones are reverted.
        self.undo.committed(epoch.saturating_sub(1));
        self.prepare_wanted = Some(self.prepare_wanted.map_or(epoch, |w| w.max(epoch)));
        self.try_prepare(ctx);
    }

    fn is_aborted(&self, epoch: u64) -> bool {
        self.aborted.iter().any(|&(a, b)| (a..b).contains(&epoch))
    }

    /// The epoch manager aborted epochs `[epoch, next)` (§3.2): drop their
    /// locks and pending replication, put every tuple they wrote back to
    /// its last committed version, discard their unforced redo records,
    /// and move on to `next`.
    fn on_epoch_abort(&mut self, ctx: &mut Ctx<Msg>, epoch: u64, next: u64) {
        if self.floor < next {
            self.floor = next;
            self.aborted.push((epoch, next));
            let mut held: Vec<(TxnId, Held)> = self.held.drain().collect();
            held.sort_unstable_by_key(|(t, _)| *t);
            for (txn, h) in held {
                self.release(txn, &h);
                self.ended.insert(txn, false, ctx.now());
            }
            let dropped: Vec<u64> = (self.replication.iter())
                .filter(|(_, r)| r.epoch >= epoch)
                .map(|(seq, _)| *seq)
                .collect();
            for seq in dropped {
                let r = self.replication.remove(&seq).expect("listed");
                self.unlock_replicated(&r);
            }
            self.unsynced.retain(|e, _| *e < epoch);
            self.received.retain(|_, e| *e < epoch);
            self.sync_sent = None;
            self.open.retain(|e| !(epoch..next).contains(&e.epoch));
            let reverted = self.undo.revert(&mut self.store, epoch, next);
            self.reverted += reverted as u64;
            // Everything not yet forced belongs to the aborted epochs: the
            // prepare of `epoch - 1` forced the rest.
            self.log.clear();
            self.prepare_wanted = None;
            self.epoch = self.epoch.max(next);
            tracing::debug!(node = ?self.me, epoch, next, reverted, "epoch abort");
        }
        let to = self.manager_node;
        self.send(ctx, to, Msg::EpochAborted { epoch, next });
    }

    /// Answer the wanted prepare once nothing of its epoch is in flight
    /// here: force the epoch's redo records, then answer.
    fn try_prepare(&mut self, ctx: &mut Ctx<Msg>) {
        let Some(e) = self.prepare_wanted else {
            return;
        };
        if self.flushing
            || self
                .held
                .values()
                .any(|h| !h.writes.is_empty() && h.tag <= e)
            || self.replication.values().any(|r| r.epoch <= e)
            || !self.backups_synced(ctx, e)
        {
            return;
        }
        self.flushing = true;
        let record = redo::redo_record(&self.log.split(), Some(e));
        self.persist(ctx, record, AfterPersist::EpochPrepared(e));
    }

    /// Coordinator replication: do the backups have every write of epochs
    /// up to `e` installed here? Nothing more of them can be installed
    /// (the caller checked that no transaction of theirs holds locks
    /// here), so ask them once (**EpochSync**) and wait; a primary that
    /// installed nothing since the last sync has nothing to ask.
    fn backups_synced(&mut self, ctx: &mut Ctx<Msg>, e: u64) -> bool {
        if !self.config.coordinator_replicates() || self.synced.iter().all(|s| *s >= e) {
            self.unsynced = self.unsynced.split_off(&(e + 1));
            return true;
        }
        if self.unsynced.range(..=e).next().is_none() {
            self.synced.iter_mut().for_each(|s| *s = (*s).max(e));
            return true;
        }
        if self.sync_sent.is_none_or(|(s, _)| s < e) {
            self.sync_sent = Some((e, ctx.now()));
            self.send_sync(ctx, e);
        }
        false
    }

    /// Ask every backup not yet synced to `e` what it lacks of epochs up
    /// to `e`.
    fn send_sync(&mut self, ctx: &mut Ctx<Msg>, e: u64) {
        let txns: Vec<TxnId> = self
            .unsynced
            .range(..=e)
            .flat_map(|(_, v)| v.iter().map(|w| w.txn))
            .collect();
        for (b, s) in self.backups.iter().zip(&self.synced) {
            if *s < e {
                ctx.send(
                    *b,
                    Msg::EpochSync {
                        epoch: e,
                        txns: txns.clone(),
                    },
                );
            }
        }
    }

    /// Locks of transactions below their coordinator's floor: every one of
    /// its transactions still deciding or writing back is at or above the
    /// floor, so these ended — aborted with the **Abort** lost, or (S2PL)
    /// committed with the **Release** of their read locks lost. Without
    /// this they would wait for an inquiry (`inquire`, as long as the
    /// epoch timeout), holding up the epoch's prepare all along.
    fn drop_stale_locks(&mut self, ctx: &mut Ctx<Msg>) {
        let mut stale: Vec<TxnId> = self
            .held
            .keys()
            .copied()
            .filter(|t| self.ended.below_floor(*t))
            .collect();
        if stale.is_empty() {
            return;
        }
        stale.sort_unstable();
        for txn in stale {
            let h = self.held.remove(&txn).expect("listed");
            self.release(txn, &h);
        }
        self.try_prepare(ctx);
    }

    fn sweep(&mut self, ctx: &mut Ctx<Msg>) {
        let now = ctx.now();
        if self.recovering.is_some() {
            ctx.send(self.manager_node, Msg::Rejoin);
            ctx.set_timer(self.config.retransmit / 2, SWEEP);
            return;
        }
        self.ended.sweep(now);
        self.drop_stale_locks(ctx);
        let mut ask: Vec<(TxnId, NodeId)> = Vec::new();
        for (txn, h) in self.held.iter_mut() {
            if now.saturating_sub(h.heard) > self.config.inquire {
                h.heard = now;
                ask.push((*txn, h.coord));
            }
        }
        ask.sort_unstable();
        for (txn, coord) in ask {
            ctx.send(coord, Msg::Inquire { txn });
        }
        let rto = self.config.retransmit;
        if let Some((e, at)) = self.sync_sent {
            if now.saturating_sub(at) >= rto && self.synced.iter().any(|s| *s < e) {
                self.sync_sent = Some((e, now));
                self.send_sync(ctx, e);
            }
        }
        for r in self.replication.values_mut() {
            if now.saturating_sub(r.sent_at) >= rto {
                r.sent_at = now;
                for &b in &r.waiting {
                    ctx.send(b, r.msg.clone());
                }
            }
        }
        self.run_manager(ctx, |m, out| m.retransmit(now, rto, out));
        ctx.set_timer(rto / 2, SWEEP);
    }

    fn handle(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        if self.recovering.is_some() {
            // Nothing is served from a store that may lack committed
            // epochs; the senders retransmit.
            if let Msg::EpochStatus { committed, aborted } = msg {
                let rec = self.recovering.take().expect("checked");
                self.replay(rec, committed, aborted);
                Self::trace(ctx, "rejoined", self.me, committed);
            }
            return;
        }
        match msg {
            Msg::Read {
                txn,
                floor,
                proc,
                pieces,
                inputs,
                own,
                decided,
            } => {
                self.install_decided(ctx, from, decided);
                self.on_read(ctx, from, txn, floor, proc, pieces, inputs, own)
            }
            Msg::Prepare {
                txn,
                floor,
                decided,
                writes,
                reads,
                ts,
                round,
            } => {
                self.install_decided(ctx, from, decided);
                self.on_prepare(ctx, from, txn, floor, writes, reads, ts, round)
            }
            Msg::WriteBack { txn, ts, epoch } => self.on_write_back(ctx, from, txn, ts, epoch),
            Msg::Abort { txn } => self.on_abort(ctx, txn),
            Msg::Release { txn } => self.on_release(ctx, txn),
            Msg::Replicate {
                seq,
                txn,
                ts,
                epoch,
                version,
                writes,
            } => self.on_replicate(ctx, from, seq, txn, ts, epoch, version, writes),
            Msg::Replicated { seq } => self.on_replicated(ctx, from, seq),
            Msg::EpochSync { epoch, txns } => self.on_epoch_sync(ctx, from, epoch, txns),
            Msg::Synced { epoch, missing } => self.on_synced(ctx, from, epoch, missing),
            Msg::EpochPrepare { epoch } => self.on_epoch_prepare(ctx, epoch),
            Msg::EpochPrepared { epoch } => {
                Self::trace(ctx, "vote_received", from, epoch);
                self.run_manager(ctx, |m, out| m.prepared(from, epoch, out))
            }
            Msg::EpochCommit { epoch, .. } => {
                Self::trace(ctx, "commit_received", self.me, epoch);
                self.epoch = self.epoch.max(epoch + 1);
                self.undo.committed(epoch);
                self.committed = self.committed.max(epoch);
                self.open.retain(|e| e.epoch > epoch);
                self.received.retain(|_, e| *e > epoch);
                self.collect_garbage(self.committed);
                self.maybe_checkpoint(ctx);
            }
            Msg::EpochAbort { epoch, next } => self.on_epoch_abort(ctx, epoch, next),
            Msg::EpochAborted { epoch, next } => {
                self.run_manager(ctx, |m, _| m.abort_acknowledged(from, epoch, next))
            }
            Msg::Rejoin => {
                let now = ctx.now();
                self.run_manager(ctx, |m, out| m.rejoin(from, now, out))
            }
            Msg::EpochStatus { .. } => {}
            Msg::ReadOk { .. }
            | Msg::Prepared { .. }
            | Msg::WrittenBack { .. }
            | Msg::Inquire { .. } => {
                tracing::warn!(?from, ?msg, "server got a coordinator's message");
            }
        }
    }

    fn drain_local(&mut self, ctx: &mut Ctx<Msg>) {
        while let Some(msg) = self.local.pop_front() {
            let me = self.me;
            self.handle(ctx, me, msg);
        }
    }
}

impl Node<Msg> for CocoServer {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.config.retransmit / 2, SWEEP);
        if self.manager.is_some() {
            ctx.set_timer(self.config.epoch, EPOCH);
        }
        if self.recovering.is_some() {
            ctx.send(self.manager_node, Msg::Rejoin);
        } else if self.recoveries > 0 {
            // The manager restarted: abort what its crash left open.
            let now = ctx.now();
            self.run_manager(ctx, |m, out| m.abort_open(now, out));
            Self::trace(ctx, "rejoined", self.me, self.committed);
        }
        self.drain_local(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        self.events += 1;
        self.count(msg.event_counters());
        self.handle(ctx, from, msg);
        self.drain_local(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        self.events += 1;
        self.count(crate::coco_event_counters!("timer"));
        match id {
            SWEEP => self.sweep(ctx),
            EPOCH => {
                let now = ctx.now();
                self.run_manager(ctx, |m, out| m.tick(now, out));
                ctx.set_timer(self.config.epoch, EPOCH);
            }
            _ => {}
        }
        self.drain_local(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        self.events += 1;
        self.count(crate::coco_event_counters!("persisted"));
        match self.persists.remove(&token) {
            Some(AfterPersist::EpochPrepared(e)) => {
                self.flushing = false;
                self.prepared = self.prepared.max(e);
                if self.prepare_wanted.is_some_and(|w| w <= e) {
                    self.prepare_wanted = None;
                }
                Self::trace(ctx, "prepared", self.me, e);
                let to = self.manager_node;
                self.send(ctx, to, Msg::EpochPrepared { epoch: e });
                self.try_prepare(ctx);
            }
            Some(AfterPersist::ReplicaAck { to, seq }) => ctx.send(to, Msg::Replicated { seq }),
            Some(AfterPersist::Synced { to, epoch, missing }) => {
                ctx.send(to, Msg::Synced { epoch, missing })
            }
            Some(AfterPersist::EpochCommit(e)) => {
                Self::trace(ctx, "commit_durable", self.me, e);
                let now = ctx.now();
                self.run_manager(ctx, |m, out| m.commit_durable(e, now, out))
            }
            Some(AfterPersist::EpochAbort(e, next)) => {
                self.run_manager(ctx, |m, out| m.abort_durable(e, next, out))
            }
            None => {}
        }
        self.drain_local(ctx);
    }

    /// A checked run stops only once its replicas can agree: no write
    /// here is still unacknowledged by a backup, and (at the epoch
    /// manager) no epoch abort is still unacknowledged by a server (§3.2,
    /// see [`EpochManager::settled`]). Either way some replica still lacks
    /// a change the others made, until the retransmission gets there.
    fn settled(&self) -> bool {
        self.replication.is_empty()
            && self.unsynced.is_empty()
            && self.manager.as_ref().is_none_or(|m| m.settled())
    }

    fn take_report(&mut self) -> NodeReport {
        let all = self
            .manager
            .as_ref()
            .map_or(0, |m| m.aborted().len() as u64);
        let aborts = all - std::mem::replace(&mut self.aborts_reported, all);
        let events = std::mem::take(&mut self.events);
        let (primary, backup) = if self.primary {
            (events, 0)
        } else {
            (0, events)
        };
        let mut counters = vec![
            ("epoch_aborts", aborts),
            ("tuples_reverted", std::mem::take(&mut self.reverted)),
            ("server_recoveries", std::mem::take(&mut self.recoveries)),
            (
                "recoveries_from_checkpoint",
                std::mem::take(&mut self.from_checkpoint),
            ),
            ("redo_entries_replayed", std::mem::take(&mut self.replayed)),
            ("redo_bytes_read", std::mem::take(&mut self.replayed_bytes)),
            ("records_collected", std::mem::take(&mut self.collected)),
            ("primary_events", primary),
            ("backup_events", backup),
            ("write_lock_hold_ns", std::mem::take(&mut self.lock_hold_ns)),
            ("write_lock_holds", std::mem::take(&mut self.lock_holds)),
        ];
        counters.extend(std::mem::take(&mut self.by_cause));
        counters.extend(std::mem::take(&mut self.conflicts));
        NodeReport {
            client: None,
            counters,
            ..NodeReport::default()
        }
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }
}
