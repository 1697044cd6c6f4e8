//! The compute-node side shared by every protocol on memory nodes (`oocc`,
//! `ford-occ`, `drtm`, `dslr`): the connection to each memory node, the
//! machine's address cache (OOCC §VIII.A: "a global cache in a single
//! machine ... to cache the remote data addresses"; a miss reads the whole
//! bucket), posting a round of verb batches, and running a transaction's
//! pieces in waves over the records fetched so far.
//!
//! What a protocol adds is only its locking and commit: which verbs fetch a
//! key, when a fetched image may be used ([`Exec::take`]), and when the
//! transaction commits ([`Exec::committed`]).
//!
//! # Inserts, deletes and reads of absent keys (FORD, FAST'22, §4.2)
//!
//! A key in no slot is *vacant*: the bucket READ that looked for it also
//! names its **insert slot**, the first free slot on its probe path (in its
//! bucket, or in the next ones when that is full). The transaction then
//! treats that slot as the key's record, in every protocol alike:
//!
//! * an **insert** (a write of a vacant key) locks the insert slot as it
//!   would lock a record (CAS or FAA on its lock word), and the READ posted
//!   after the lock in the same batch must still find the slot free (or
//!   already holding the key): a slot another key's insert took in between
//!   aborts the transaction. The commit WRITE carries the key with the data
//!   (a whole-record WRITE), which publishes the key; an abort only frees
//!   the lock word, so the slot stays free. This is FORD's insert: "find a
//!   free slot in the bucket, lock it, write the record at commit";
//! * a **read of a vacant key** reads the insert slot and is locked or
//!   validated like any read, with the free slot's version
//!   ([`Version::INITIAL`], as a missing key reads in every store): an
//!   insert of the key must lock that very slot and writes its own version
//!   there, so a concurrent insert is seen (a lock, or a changed version) —
//!   point reads are phantom-free. The insert of another key into that slot
//!   changes its version too: a false conflict, never a missed one;
//! * a **delete** is a write like any other: the TPC-C workload deletes a
//!   new-order row by writing its empty value, the tombstone every store
//!   here reads as a missing record (see `tessera_workloads::tpcc`). The
//!   slot keeps the key, so slots never turn free again.
//!
//! Why one slot per key suffices: slots only go from free to holding a key
//! (under a lock, by the insert's commit WRITE) and never back, and a key is
//! inserted only into the first free slot of its probe path, after a READ
//! that found every slot before it holding other keys. So no key is ever
//! in two slots, and a key, once inserted, lies before every free slot of
//! its probe path, where a later bucket READ finds it.

use super::verbs::SlotWrite;
use super::{Addr, Geometry, Msg, SlotImage, Verb, VerbResult};
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera_core::ids::{Key, NodeId, ShardId, Time, TimerId, TxnId, Version};
use tessera_core::node::{Ctx, Node, NodeReport};
use tessera_core::protocol::{Coordinator, CoordinatorEnv};
use tessera_core::topology::Topology;
use tessera_core::txn::{AbortReason, Attempt, PieceSpec, ReadObs, TxnOutcome, Value};
use tessera_core::FastMap;

/// The timer that resends connection requests; protocols number their own
/// timers from 1.
pub const CONNECT: TimerId = TimerId(0);

/// One round's verbs and what each is for (`P`, the protocol's purposes),
/// per memory node.
pub type Round<P> = BTreeMap<ShardId, (Vec<Verb>, Vec<P>)>;

/// Add a verb with its purpose to `round`'s batch for `shard`.
pub fn push<P>(round: &mut Round<P>, shard: ShardId, verb: Verb, purpose: P) {
    let b = round.entry(shard).or_default();
    b.0.push(verb);
    b.1.push(purpose);
}

/// What a coordinator must act on after [`Endpoint::on_message`].
pub enum Incoming {
    Start(Vec<Attempt>),
    Done(u64, Vec<VerbResult>),
    Nothing,
}

/// A compute node's connections, address cache and outstanding batches.
pub struct Endpoint<P> {
    topology: Arc<Topology>,
    /// Each shard's region shape, once connected.
    geometry: Vec<Option<Geometry>>,
    /// The machine's address cache (§VIII.A).
    addrs: FastMap<Key, Addr>,
    /// Attempts submitted before every memory node answered.
    queued: Vec<Attempt>,
    batches: FastMap<u64, (TxnId, Vec<P>)>,
    next_batch: u64,
    connect_retry: Time,
    /// Bucket READs issued on address-cache misses.
    pub bucket_reads: u64,
}

impl<P> Endpoint<P> {
    pub fn new(env: &CoordinatorEnv, connect_retry: Time) -> Self {
        Endpoint {
            topology: env.topology.clone(),
            geometry: vec![None; env.topology.shards.len()],
            addrs: tessera_core::fast_map(),
            queued: Vec::new(),
            batches: tessera_core::fast_map(),
            next_batch: 0,
            connect_retry,
            bucket_reads: 0,
        }
    }

    fn connected(&self) -> bool {
        self.geometry.iter().all(Option::is_some)
    }

    /// Ask every memory node not yet answered for its geometry (at start
    /// and on [`CONNECT`]).
    pub fn connect(&self, ctx: &mut Ctx<Msg>) {
        if self.connected() {
            return;
        }
        for (s, g) in self.geometry.iter().enumerate() {
            if g.is_none() {
                ctx.send(self.topology.leader(ShardId(s as u32)), Msg::Connect);
            }
        }
        ctx.set_timer(self.connect_retry, CONNECT);
    }

    /// `attempt`, if it may start now; otherwise it waits for the
    /// connections.
    pub fn admit(&mut self, attempt: Attempt) -> Option<Attempt> {
        if self.connected() {
            Some(attempt)
        } else {
            self.queued.push(attempt);
            None
        }
    }

    /// A memory node answered: the attempts that may start now.
    fn on_connected(&mut self, from: NodeId, g: Geometry) -> Vec<Attempt> {
        if let Some(s) = self
            .topology
            .shards
            .iter()
            .position(|grp| grp.leader() == from)
        {
            self.geometry[s] = Some(g);
        }
        if self.connected() {
            std::mem::take(&mut self.queued)
        } else {
            Vec::new()
        }
    }

    /// A message for the coordinator: connection answers are handled here
    /// (the attempts that may start now come back), batch answers are the
    /// protocol's.
    pub fn on_message(&mut self, from: NodeId, msg: Msg) -> Incoming {
        match msg {
            Msg::Connected(g) => Incoming::Start(self.on_connected(from, g)),
            Msg::Done { id, results } => Incoming::Done(id, results),
            Msg::Connect | Msg::Batch { .. } | Msg::Lease(_) => {
                tracing::warn!(?from, "coordinator got a message it does not serve");
                Incoming::Nothing
            }
        }
    }

    /// Whether `id` was the connection timer (handled here).
    pub fn on_timer(&self, ctx: &mut Ctx<Msg>, id: TimerId) -> bool {
        if id == CONNECT {
            self.connect(ctx);
        }
        id == CONNECT
    }

    /// Post one round: a batch per memory node (`ack` false: unsignaled).
    /// Returns the number of batches posted.
    pub fn post(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, round: Round<P>, ack: bool) -> usize {
        let mut posted = 0;
        for (shard, (verbs, purposes)) in round {
            if verbs.is_empty() {
                continue;
            }
            self.next_batch += 1;
            let id = self.next_batch;
            if ack {
                self.batches.insert(id, (txn, purposes));
            }
            ctx.send(self.topology.leader(shard), Msg::Batch { id, ack, verbs });
            posted += 1;
        }
        posted
    }

    /// [`post`](Self::post) signaled, and note in `pending` (the
    /// transaction's, if it still runs) how many answers to await.
    pub fn post_awaited(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        round: Round<P>,
        pending: Option<&mut usize>,
    ) -> usize {
        let posted = self.post(ctx, txn, round, true);
        if let Some(pending) = pending {
            *pending = posted;
        }
        posted
    }

    /// The transaction and purposes of an answered batch (`None`: a
    /// duplicate).
    pub fn answered(&mut self, id: u64) -> Option<(TxnId, Vec<P>)> {
        self.batches.remove(&id)
    }

    /// `key`'s slot: cached, or the insert slot a transaction found for it
    /// (`vacant`: its [`Exec::vacant`]).
    pub fn addr(&self, vacant: &Vacant, key: Key) -> Option<Addr> {
        self.addrs.get(&key).or_else(|| vacant.get(&key)).copied()
    }

    /// The image a READ of `key`'s slot returned, if it may stand for
    /// `key`: the slot holds `key`, or it is the free insert slot of a
    /// vacant `key`. A vacant key found in its insert slot (inserted
    /// meanwhile) is cached and no longer vacant. `None`: another key's
    /// insert took the slot (the caller aborts).
    pub fn image<'a, L: Default>(
        &mut self,
        exec: &mut Exec<L>,
        key: Key,
        imgs: &'a [SlotImage],
    ) -> Option<&'a SlotImage> {
        let img = imgs.first()?;
        match img.key {
            Some(k) if k == key => {
                if exec.vacant.remove(&key).is_some() {
                    self.addrs.insert(key, img.addr);
                }
                Some(img)
            }
            None if exec.vacant.get(&key) == Some(&img.addr) => Some(img),
            _ => None,
        }
    }

    /// Bucket READs for every key of `need` whose address is not cached
    /// (`purpose(key, probe)` names each). Returns whether any was added:
    /// the keys can be fetched once they are answered.
    pub fn locate(
        &mut self,
        exec: &Exec<impl Default>,
        need: &[Need],
        round: &mut Round<P>,
        purpose: impl Fn(Key, u32) -> P,
    ) -> bool {
        let mut any = false;
        for n in need {
            if self.addrs.contains_key(&n.key) {
                continue;
            }
            let g = self.geometry[n.shard.0 as usize].expect("connected before starting");
            if exec.vacant.contains_key(&n.key) {
                continue;
            }
            let probe = exec.probe.get(&n.key).copied().unwrap_or(0);
            let start = g.bucket_start(g.bucket_of(n.key).wrapping_add(probe));
            push(
                round,
                n.shard,
                Verb::Read {
                    addr: start,
                    len: g.bucket_slots,
                },
                purpose(n.key, probe),
            );
            self.bucket_reads += 1;
            any = true;
        }
        any
    }

    /// The WRITEs that install `txn`'s writes on every record it holds
    /// (`held`). With `unlock`, each WRITE also sets the lock word to
    /// `free` (OOCC's write unlock, §V; DrTM's release), and held records
    /// without a write get their lock word WRITE alone; without it, only
    /// the data is written and the protocol releases on its own.
    pub fn write_back<L: Default>(
        &self,
        exec: &Exec<L>,
        txn: TxnId,
        held: impl Fn(&L) -> bool,
        unlock: Option<u64>,
        purpose: impl Fn() -> P,
    ) -> Round<P> {
        let mut round = Round::new();
        for (key, r) in &exec.recs {
            if !held(&r.lock) {
                continue;
            }
            let version = txn.version();
            let data = match (exec.write_of(*key), unlock) {
                (Some(v), Some(lock)) => SlotWrite::DataAndLock {
                    key: *key,
                    value: v.clone(),
                    version,
                    lock,
                },
                (Some(v), None) => SlotWrite::Data {
                    key: *key,
                    value: v.clone(),
                    version,
                },
                (None, Some(lock)) => SlotWrite::Lock(lock),
                (None, None) => continue,
            };
            let addr = self
                .addr(&exec.vacant, *key)
                .expect("held keys are located");
            push(&mut round, r.shard, Verb::Write { addr, data }, purpose());
        }
        round
    }

    /// WRITEs of `free` to the lock word of every record `held`.
    pub fn unlocks<L: Default>(
        &self,
        exec: &Exec<L>,
        held: impl Fn(&L) -> bool,
        free: u64,
        purpose: impl Fn() -> P,
    ) -> Round<P> {
        let mut round = Round::new();
        for (key, r) in &exec.recs {
            if held(&r.lock) {
                let addr = self
                    .addr(&exec.vacant, *key)
                    .expect("held keys are located");
                push(
                    &mut round,
                    r.shard,
                    Verb::Write {
                        addr,
                        data: SlotWrite::Lock(free),
                    },
                    purpose(),
                );
            }
        }
        round
    }

    /// A bucket READ for `key` answered: cache its address, probe the next
    /// bucket (a full bucket may have overflowed), or note it vacant with
    /// its insert slot, the bucket's first free slot (see the module doc).
    /// A region with no free slot on the key's whole probe path fails the
    /// attempt with an error: it was sized too small for the inserts.
    pub fn on_located<L: Default>(
        &mut self,
        exec: &mut Exec<L>,
        key: Key,
        probe: u32,
        imgs: &[SlotImage],
    ) {
        exec.probe.remove(&key);
        let shard = exec.recs.get(&key).map(|r| r.shard);
        if let Some(img) = imgs.iter().find(|i| i.key == Some(key)) {
            self.addrs.insert(key, img.addr);
        } else if let Some(free) = imgs.iter().find(|i| i.key.is_none()) {
            exec.vacant.insert(key, free.addr);
        } else if shard
            .and_then(|s| self.geometry[s.0 as usize])
            .is_some_and(|g| probe + 1 < g.buckets)
        {
            exec.probe.insert(key, probe + 1);
        } else {
            tracing::error!(
                ?key,
                ?shard,
                "memory node region full: no free slot to insert into"
            );
            exec.fail(AbortReason::Timeout);
        }
    }
}

/// One awaited answer came in: whether it was the last of its round.
pub fn last_answer(pending: &mut usize) -> bool {
    *pending = pending.saturating_sub(1);
    *pending == 0
}

/// What makes a memory-node coordinator itself. [`Driven`] does the rest
/// alike for each: admission, connecting, handing on answers and timers,
/// and the report.
pub trait Driver: Send {
    type Purpose;
    fn net(&mut self) -> &mut Endpoint<Self::Purpose>;
    /// Run an admitted attempt.
    fn start(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt);
    /// Batch `id` (signaled) answered.
    fn on_done(&mut self, ctx: &mut Ctx<Msg>, id: u64, results: Vec<VerbResult>);
    /// A timer of the protocol's own (numbered from 1).
    fn on_own_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId);
    /// The protocol's counters, taken for the report (`bucket_reads`
    /// follows them).
    fn take_counters(&mut self) -> Vec<(&'static str, u64)>;
}

/// A [`Driver`] run as a coordinator node.
pub struct Driven<D>(pub D);

impl<D: Driver> Coordinator<Msg> for Driven<D> {
    fn submit(&mut self, ctx: &mut Ctx<Msg>, attempt: Attempt) {
        if let Some(a) = self.0.net().admit(attempt) {
            self.0.start(ctx, a);
        }
    }
}

impl<D: Driver> Node<Msg> for Driven<D> {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        self.0.net().connect(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match self.0.net().on_message(from, msg) {
            Incoming::Start(attempts) => {
                for a in attempts {
                    self.0.start(ctx, a);
                }
            }
            Incoming::Done(id, results) => self.0.on_done(ctx, id, results),
            Incoming::Nothing => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        if !self.0.net().on_timer(ctx, id) {
            self.0.on_own_timer(ctx, id);
        }
    }

    fn take_report(&mut self) -> NodeReport {
        let mut counters = self.0.take_counters();
        let bucket_reads = std::mem::take(&mut self.0.net().bucket_reads);
        counters.push(("bucket_reads", bucket_reads));
        NodeReport {
            client: None,
            counters,
            ..NodeReport::default()
        }
    }
}

/// The keys a transaction found in no slot, with their insert slots (see
/// the module doc).
pub type Vacant = FastMap<Key, Addr>;

/// A record the transaction touched; `lock` is the protocol's state of it.
pub struct Rec<L> {
    pub shard: ShardId,
    pub value: Option<Value>,
    pub version: Version,
    /// Read from memory at least once (its image may be used).
    pub fetched: bool,
    pub lock: L,
}

/// A key the next round must fetch, and whether the transaction writes it
/// (and so must lock it for writing first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    pub key: Key,
    pub shard: ShardId,
    pub write: bool,
}

/// What [`Exec::step`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Every piece ran.
    Done,
    /// A piece failed (a user abort).
    Failed,
    /// These keys must be fetched (sorted, one entry per key, writes first).
    Need(Vec<Need>),
}

/// The execution state of one attempt: what it read, what it will write,
/// the outputs of its pieces.
pub struct Exec<L> {
    pub attempt: Attempt,
    pub read_only: bool,
    pub recs: FastMap<Key, Rec<L>>,
    /// Keys read from memory (not the transaction's own writes), in order.
    pub read_order: Vec<Key>,
    /// Keys whose bucket is being probed, with the probe to read next.
    probe: FastMap<Key, u32>,
    /// Keys in no slot of the region, with their insert slots.
    pub vacant: Vacant,
    outputs: Vec<Option<Value>>,
    pub writes: Vec<(Key, Value)>,
    pub failed: Option<AbortReason>,
}

impl<L: Default> Exec<L> {
    pub fn new(attempt: Attempt) -> Self {
        let n = attempt.txn.pieces().len();
        Exec {
            read_only: attempt.txn.read_only(),
            attempt,
            recs: tessera_core::fast_map(),
            read_order: Vec::new(),
            probe: tessera_core::fast_map(),
            vacant: tessera_core::fast_map(),
            outputs: vec![None; n],
            writes: Vec::new(),
            failed: None,
        }
    }

    pub fn rec(&mut self, key: Key, shard: ShardId) -> &mut Rec<L> {
        self.recs.entry(key).or_insert_with(|| Rec {
            shard,
            value: None,
            version: Version::INITIAL,
            fetched: false,
            lock: L::default(),
        })
    }

    pub fn fail(&mut self, reason: AbortReason) {
        self.failed.get_or_insert(reason);
    }

    /// Use a READ's image of `key` as the transaction's read.
    pub fn take(&mut self, key: Key, img: &SlotImage) {
        if let Some(r) = self.recs.get_mut(&key) {
            r.value = img.value.clone();
            r.version = img.version;
            r.fetched = true;
        }
    }

    /// The value this attempt writes to `key`, if any.
    pub fn write_of(&self, key: Key) -> Option<&Value> {
        self.writes.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Run every piece whose inputs and keys are ready, repeatedly; then
    /// name the keys the ready pieces still need. `locked(lock)` says
    /// whether the transaction already holds what a write needs.
    pub fn step(&mut self, locked: impl Fn(&L) -> bool) -> Step {
        let proc = self.attempt.txn.clone();
        let mut need: Vec<Need> = Vec::new();
        loop {
            let mut progress = false;
            need.clear();
            for i in 0..proc.pieces().len() {
                if self.outputs[i].is_some() {
                    continue;
                }
                let Some(inputs) = proc.pieces()[i].gather_inputs(|j| self.outputs[j].as_ref())
                else {
                    continue;
                };
                let spec = proc.resolve(i, &inputs);
                let missing = self.keys_to_fetch(&spec, &locked);
                if !missing.is_empty() {
                    need.extend(missing);
                    continue;
                }
                self.run_piece(i, &spec, &inputs);
                if self.failed.is_some() {
                    return Step::Failed;
                }
                progress = true;
            }
            if !progress {
                break;
            }
        }
        if self.outputs.iter().all(Option::is_some) {
            return Step::Done;
        }
        need.sort_unstable_by_key(|n| (n.key, !n.write));
        need.dedup_by_key(|n| n.key);
        Step::Need(need)
    }

    /// The keys `spec` needs that are not fetched (or, for writes, not
    /// locked) yet. Keys the transaction wrote itself need nothing.
    fn keys_to_fetch(&mut self, spec: &PieceSpec, locked: &impl Fn(&L) -> bool) -> Vec<Need> {
        let mut out = Vec::new();
        let need = |key, write| Need {
            key,
            shard: spec.shard,
            write,
        };
        if !self.read_only {
            for a in &spec.writes {
                let r = self.rec(a.key, spec.shard);
                if !locked(&r.lock) {
                    out.push(need(a.key, true));
                }
            }
        }
        for a in &spec.reads {
            if self.write_of(a.key).is_some() {
                continue;
            }
            if !self.rec(a.key, spec.shard).fetched {
                out.push(need(a.key, false));
            }
        }
        out
    }

    /// Run piece `i` on the fetched values and the transaction's own
    /// writes.
    fn run_piece(&mut self, i: usize, spec: &PieceSpec, inputs: &[Value]) {
        let mut values: Vec<Option<Value>> = Vec::with_capacity(spec.reads.len());
        for a in &spec.reads {
            if let Some(v) = self.write_of(a.key) {
                values.push(Some(v.clone()));
                continue;
            }
            if !self.read_order.contains(&a.key) {
                self.read_order.push(a.key);
            }
            values.push(self.recs[&a.key].value.clone());
        }
        let refs: Vec<Option<&Value>> = values.iter().map(Option::as_ref).collect();
        let res = self.attempt.txn.execute(i, &refs, inputs);
        if res.user_abort {
            self.fail(AbortReason::User);
            return;
        }
        for (k, v) in res.writes {
            match self.writes.iter_mut().find(|(wk, _)| *wk == k) {
                Some(w) => w.1 = v,
                None => self.writes.push((k, v)),
            }
        }
        self.outputs[i] = Some(res.output);
    }

    /// The outcome of this attempt, committed: what it read and wrote.
    pub fn committed(&self) -> TxnOutcome {
        let reads = self
            .read_order
            .iter()
            .map(|k| ReadObs::row(*k, self.recs[k].version))
            .collect();
        TxnOutcome::Committed {
            reads,
            writes: self.writes.iter().map(|(k, _)| *k).collect(),
            outputs: self
                .outputs
                .iter()
                .map(|o| o.clone().unwrap_or_default())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disagg::region::Region;
    use std::sync::Arc;
    use tessera_core::storage::Store;
    use tessera_core::txn::{Access, PieceKind, PieceResult, Procedure};

    /// One piece that reads `key` and writes `value` to it: an insert when
    /// `key` is absent.
    #[derive(Debug)]
    struct Upsert(Vec<PieceSpec>);

    impl Procedure for Upsert {
        fn name(&self) -> &'static str {
            "upsert"
        }
        fn pieces(&self) -> &[PieceSpec] {
            &self.0
        }
        fn execute(&self, _: usize, reads: &[Option<&Value>], _: &[Value]) -> PieceResult {
            assert!(reads[0].is_none(), "the key is absent: it reads as missing");
            PieceResult {
                writes: vec![(self.0[0].writes[0].key, Value::from_static(b"new"))],
                ..PieceResult::default()
            }
        }
    }

    fn exec(key: Key, seq: u32) -> Exec<()> {
        let access = vec![Access::all(key)];
        let txn = Arc::new(Upsert(vec![PieceSpec {
            shard: ShardId(0),
            reads: access.clone(),
            writes: access,
            kind: PieceKind::Immediate,
            inputs: Vec::new(),
            dynamic: false,
        }]));
        let id = TxnId::new(NodeId(1), 0, seq);
        Exec::new(Attempt::at_zero(id, txn))
    }

    /// A region of `n` records (rows 0..n of table 0) and a connected
    /// endpoint.
    fn setup(n: u64) -> (Region, Endpoint<()>) {
        let mut store = Store::new();
        for r in 0..n {
            store.load(Key::new(0, r), Value::from_static(b"old"));
        }
        let region = Region::load(
            &store,
            crate::disagg::RegionConfig {
                bucket_slots: 4,
                ..Default::default()
            },
        );
        let topology = Arc::new(Topology::new(1, 1, 1));
        let env = CoordinatorEnv {
            me: NodeId(1),
            topology: topology.clone(),
            incarnation: 0,
            recovered: Vec::new(),
        };
        let mut net = Endpoint::new(&env, 1);
        let leader = topology.leader(ShardId(0));
        assert!(matches!(
            net.on_message(leader, Msg::Connected(region.geometry())),
            Incoming::Start(_)
        ));
        (region, net)
    }

    /// Run one round against the region: every verb's result, in order.
    fn run(region: &mut Region, round: Round<()>) -> Vec<VerbResult> {
        round
            .into_values()
            .flat_map(|(verbs, _)| verbs)
            .map(|v| region.apply(&v))
            .collect()
    }

    /// Locate `key` for `x`, probing bucket after bucket as a coordinator
    /// does.
    fn locate(region: &mut Region, net: &mut Endpoint<()>, x: &mut Exec<()>, key: Key) {
        loop {
            let Step::Need(need) = x.step(|_| false) else {
                panic!("the piece needs its key")
            };
            let mut round = Round::new();
            if !net.locate(x, &need, &mut round, |_, _| ()) {
                return;
            }
            let probe = x.probe.get(&key).copied().unwrap_or(0);
            for r in run(region, round) {
                let VerbResult::Read(imgs) = r else { panic!() };
                net.on_located(x, key, probe, &imgs);
            }
            if x.failed.is_some() {
                return;
            }
        }
    }

    fn read(region: &mut Region, addr: Addr) -> Vec<SlotImage> {
        let VerbResult::Read(imgs) = region.apply(&Verb::Read { addr, len: 1 }) else {
            panic!()
        };
        imgs
    }

    #[test]
    fn an_insert_claims_the_first_free_slot_and_its_commit_publishes_the_key() {
        let (mut region, mut net) = setup(40);
        let key = Key::new(0, 1_000);
        let mut x = exec(key, 1);
        locate(&mut region, &mut net, &mut x, key);
        let slot = net
            .addr(&x.vacant, key)
            .expect("vacant keys have an insert slot");
        // The first free slot of the key's probe path.
        let g = region.geometry();
        let first_free = (0..g.slots())
            .map(|i| (g.bucket_start(g.bucket_of(key)) + i) % g.slots())
            .find(|&a| region.key_at(a).is_none())
            .unwrap();
        assert_eq!(slot, first_free);
        // The free slot stands for the key: it reads as missing, version 0.
        let imgs = read(&mut region, slot);
        let img = net.image(&mut x, key, &imgs).expect("the free insert slot");
        assert_eq!((img.value.clone(), img.version), (None, Version::INITIAL));
        x.take(key, &imgs[0]);
        assert_eq!(x.step(|_| true), Step::Done);
        // The commit WRITE carries the key: a later bucket READ finds it.
        let txn = x.attempt.id;
        let round = net.write_back(&x, txn, |_| true, Some(0), || ());
        assert_eq!(run(&mut region, round), vec![VerbResult::Written]);
        assert_eq!(region.key_at(slot), Some(key));
        let mut y = exec(key, 2);
        locate(&mut region, &mut net, &mut y, key);
        assert!(y.vacant.is_empty());
        assert_eq!(net.addr(&y.vacant, key), Some(slot));
    }

    #[test]
    fn an_insert_slot_taken_by_another_key_is_refused_and_by_the_same_key_cached() {
        let (mut region, mut net) = setup(40);
        let key = Key::new(0, 1_000);
        let mut x = exec(key, 1);
        locate(&mut region, &mut net, &mut x, key);
        let slot = net.addr(&x.vacant, key).unwrap();
        let publish = |region: &mut Region, k: Key| {
            let data = SlotWrite::Data {
                key: k,
                value: Value::from_static(b"v"),
                version: Version(9),
            };
            region.apply(&Verb::Write { addr: slot, data });
        };
        // Another key's insert took the slot: the image does not stand for
        // `key`.
        let mut taken = setup(40).0;
        publish(&mut taken, Key::new(0, 2_000));
        assert!(net.image(&mut x, key, &read(&mut taken, slot)).is_none());
        // The key itself was inserted there meanwhile: it is present now.
        publish(&mut region, key);
        let imgs = read(&mut region, slot);
        let img = net.image(&mut x, key, &imgs).expect("the key's own slot");
        assert_eq!(img.version, Version(9));
        assert!(x.vacant.is_empty());
        assert_eq!(net.addr(&x.vacant, key), Some(slot));
    }

    #[test]
    fn a_full_region_fails_the_insert_instead_of_probing_forever() {
        let (mut region, mut net) = setup(8);
        let g = region.geometry();
        for a in 0..g.slots() {
            if region.key_at(a).is_none() {
                let data = SlotWrite::Data {
                    key: Key::new(1, a as u64),
                    value: Value::from_static(b"v"),
                    version: Version(1),
                };
                region.apply(&Verb::Write { addr: a, data });
            }
        }
        let key = Key::new(0, 1_000);
        let mut x = exec(key, 1);
        locate(&mut region, &mut net, &mut x, key);
        assert_eq!(x.failed, Some(AbortReason::Timeout));
        assert!(x.vacant.is_empty());
    }
}
