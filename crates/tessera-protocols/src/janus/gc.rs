//! Garbage collection of a Janus replica's dependency graph. The paper's
//! prototype "truncate[s] the dependency graph as transactions finish"
//! (§5) without saying when that is safe; Rococo's epochs (OSDI '14, §3.4,
//! shared code: [`crate::depgraph::graph::DepGraph::collect`]) say *how*:
//! a vertex untouched for two epochs is dropped, leaving a tombstone of
//! ids. This module says *when*, for Janus.
//!
//! A replica forgets a transaction T with pieces here only when
//!
//! 1. it executed T (`processed_S[T]`, Algorithm 4, l. 56) and T is
//!    DECIDED here with every member of its component here finished;
//! 2. **every replica of every shard T involves announced that it executed
//!    T** ([`super::msg::Msg::Executed`]). Until then one of them may still
//!    need T's Commit (a replica that missed it Inquires, Algorithm 4,
//!    l. 45), T's piece outputs (§4), or its consensus dependencies (a
//!    recovery coordinator's Prepare, §3.3, Algorithm 6, runs only at a
//!    replica that has not seen T committed). Once all of them executed
//!    T, no replica will ever recover it, and every dependency on T that
//!    will ever exist was created by a PreAccept before T executed there
//!    (the tracker names only unexecuted transactions and the last
//!    executed ones, and forgets T with its vertex:
//!    [`super::tracker::Tracker::forget`]);
//! 3. T has been untouched for two epochs and nobody here waits for it.
//!
//! A vertex of a transaction without pieces here (an ancestor learnt by
//! Inquire) is forgotten once it is DECIDED with nothing unexecuted behind
//! it here, untouched for two epochs. That says nothing of its own shards,
//! so an Inquire about it is left unanswered here (the asker's retry goes
//! to the replicas of its shards): answered `Forgotten`, it told a replica
//! of its shard that had not seen it yet that it executed everywhere, and
//! that replica never ran it (issue 6, session 24, a restarted replica
//! over `tcp`; `JanusServer::forgot_only_as_ancestor`).
//!
//! What is kept of a forgotten T is a [`Tombstone`]: committed, the abandon
//! flag, and the members of its strongly connected component, ids only
//! (§3.2: every server computes the same component for a committing
//! transaction, since its dependencies are the consensus ones). It answers
//! what can still come late:
//!
//! * **Commit, PreAccept, Accept retransmissions** and a stale recovery
//!   coordinator's **Prepare**: [`super::msg::Msg::Forgotten`] — the
//!   transaction committed and executed everywhere; a coordinator missing
//!   a shard's results reports it in doubt (never wrong, never retried).
//! * **Inquire** from a server one of whose transactions depends on T:
//!   `Forgotten` with T's component, which the asker adopts as DECIDED,
//!   exactly as from a live answer: T is cut off from later walks, and a
//!   member of T's component there gets its place in the same order.
//! * **A dependency on T** in a later Commit or Inquire answer: T is not
//!   put back into the graph; a missing ancestor is a cut-off in
//!   [`crate::depgraph::graph::DepGraph`]'s walks and finished for
//!   execution (it is DECIDED in a component done here), never a STARTED
//!   vertex to wait for or recover.
//!
//! **How long a tombstone lives** (the shared [`crate::tombstones`], as
//! 2PC's participants keep theirs; its clock here is the epoch count).
//! Two kinds of late messages need it, and they are bounded differently:
//!
//! * From T's **own coordinator** (PreAccept, Accept, Commit resent): every
//!   PreAccept carries the coordinator's *floor*, the oldest transaction it
//!   still works on ([`super::msg::Msg::PreAccept`]). Below it the
//!   coordinator never sends again, so a message about T below the floor
//!   that finds no state here is a stale copy and is ignored
//!   ([`Gc::stale`]): without that, a Commit delayed past the tombstone
//!   would execute T a second time (the suspected cause of replicas ahead
//!   of their peers over `tcp` with 2 s tombstones; not the only one, see
//!   *what a replica forgot*). Above its coordinator's floor a tombstone
//!   never expires
//!   by age while that coordinator incarnation is the newest one heard of,
//!   whatever the delays; after a newer incarnation of its node appears
//!   (the old one crashed) or if no floor of its coordinator is known (a
//!   restarted replica learns floors again from new PreAccepts) it lives
//!   `forget_epochs` epochs.
//! * From **other servers**: an Inquire about T (a server whose
//!   transaction depends on T), a replica's nudge about T, a stale
//!   recovery coordinator's message, a dependency on T in a later
//!   transaction. No coordinator's floor bounds these; below its floor a
//!   tombstone still lingers [`super::JanusConfig::forget_epochs`] epochs
//!   for them, and after that the record of what this replica forgot
//!   answers them (*what a replica forgot*, below): how long a tombstone
//!   lives is no longer a timing assumption, only how long the answer
//!   comes from the tombstone rather than the record.
//!
//! **Late answers** (2026-11-29, found with `--forget-epochs 4` and
//! messages held back up to 300 ms, `janus_seeds`'s
//! `janus_never_runs_a_forgotten_transaction_again`): two kinds of other
//! servers' messages about T made a replica that executed and forgot T,
//! its tombstone gone, put T back into its graph as committed and run it
//! again, and no longer can, whatever their delay:
//!
//! * **an InquireOk** answering a question closed since (the replica asked
//!   about T while T's Commit was late, the Commit came, T executed
//!   everywhere and was forgotten; another replica's answer or a delayed
//!   copy came after). An answer is acted on only while its question is
//!   open: a replica asks about T until T commits there (or a `Forgotten`
//!   answer comes), and a late answer after that is dropped.
//! * **a peer's routine announcement** of T ([`super::msg::Announce::Lately`])
//!   arriving after the tombstone: the replica inquired about T and the
//!   peer, which had not forgotten T yet, answered. Such an announcement
//!   of a T unknown here and below its coordinator's floor is not
//!   inquired about: either this replica executed and forgot T, or it
//!   never had T, and then no peer forgets T before this replica executes
//!   it (condition 2) and they nudge it ([`super::msg::Announce::Lagging`])
//!   until then (§3's "a server that misses a Commit inquires", with the
//!   nudge as the trigger).
//!
//! **What a replica forgot** (2026-11-29, session 23). Other servers'
//! late messages left a timing assumption: a dependency on T in a later
//! transaction's Commit or InquireOk arriving after T's tombstone expired
//! made the replica inquire about T as an unknown ancestor — a server
//! still holding T answered and T ran a second time, and if none did the
//! dependent waited forever; a peer's nudge about T after this replica's
//! announcements of T were lost did the same, and a stale recovery
//! coordinator's Accept would register T again (read in the code, not
//! seen in the runs). With tombstones of 1–2
//! epochs and messages held back 300 ms, 107 and 15 of 200 `janus_seeds`
//! runs failed so; over `tcp`, `janus_cluster` needed tombstones of 20 s.
//!
//! The paper's state cannot tell "executed and forgot T" from "never had
//! T" (§5 truncates the graph without saying when), but condition 2 makes
//! one bit enough: a replica forgets T only after executing it, and
//! never before every replica of every shard T involves announced
//! executing it. So a replica keeps an **exact record of what it forgot**
//! for as long as it lives: per coordinator incarnation, a bitmap of the
//! sequence numbers forgotten (the ids of an incarnation are dense, so it
//! is about one bit per transaction the incarnation issued, here or not);
//! for a transaction with pieces here also its abandon flag (the rare
//! abandoned ones, in a set) and its component when of two or more
//! members, ids only — what its tombstone held. Every rule that asked
//! whether a tombstone exists asks whether the transaction was forgotten
//! ([`Gc::is_gone`]), and the record answers where the tombstone expired.
//! It is exact both ways: a bit is set only when T is forgotten, and T is
//! never put back afterwards, since every path that would add it again
//! (its Commit or InquireOk, a PreAccept or an Accept with its procedure,
//! a dependency on it, an announcement, nudge or catch-up list naming it)
//! asks first. So, whatever the delay:
//!
//! * **a dependency on T** is a cut-off, as with a tombstone: T is
//!   DECIDED in a component done here (an ancestor without pieces here
//!   too: it was forgotten only once DECIDED with nothing unexecuted
//!   behind it here);
//! * **a peer's nudge or catch-up list** naming T gets the echo that T
//!   executed here, never an Inquire;
//! * **a recovery coordinator's** Prepare, PreAccept or Accept gets
//!   `Forgotten`: never a promise (a Prepare-OK without T could make it
//!   decide an abandon, §3.3) nor a registration; T's own coordinator's
//!   stale copy below its floor is ignored as before;
//! * **an Inquire** gets `Forgotten` with T's component: a server for
//!   which T is an unknown ancestor needs it, since a member of T's
//!   component with pieces there must come before the dependent there too
//!   (seen without it: `janus_seeds`' expiring seed 145 at 1 epoch, a
//!   replica waiting to the end for a transaction of another shard whose
//!   replicas had all forgotten it).
//!
//! The record of transactions with pieces here is rebuilt from the log's
//! Forgotten records ([`super::wal`]), as the tombstones are: a restarted
//! replica still refuses to run again what it forgot. Ancestors without
//! pieces here are not logged, as before: after a restart a late
//! dependency on one is inquired about, and its shards' replicas answer
//! from their records.
//!
//! **What bounds the record** (2026-11-29, session 24). Who can still
//! name a forgotten T to this replica, and what each needs of the record:
//!
//! * (a) **T's own coordinator** (a PreAccept, Accept or Commit resent):
//!   below its floor the stale copy is ignored; the bit says T was
//!   forgotten.
//! * (b) **a peer's announcement or nudge, a recovery coordinator**: the
//!   bit (echo that it executed here; `Forgotten`, never a promise).
//! * (c) **an Inquire from a server S** for which T is an unknown ancestor
//!   of a transaction D there: the bit, and T's *component*, which S uses
//!   to place the members of it with pieces at S that S has not executed
//!   yet (they come before D there, in the one order every server
//!   computes, §3.2; seed 145 without it). Nothing else reads a component:
//!   a coordinator or recovery coordinator takes only the abandon flag of
//!   a `Forgotten` answer.
//! * (d) **a dependency on T** in a later Commit or InquireOk: the bit (a
//!   cut-off).
//!
//! *Components: bounded.* T's component is useless to every asker once
//! each member M of it executed at every replica of every shard M
//! involves: a member with pieces at S then executed at S (S holds it
//! committed or forgotten, and the server's `on_forgotten` asks
//! about no such member), so the answer without the component — T
//! DECIDED alone, finished — places nothing differently; and D is not a
//! member (it would be unexecuted at S). A replica knows this of M exactly
//! when M is *settled*: it forgot M with pieces here (condition 2 checked
//! every replica of every shard of M), or a replica of another shard
//! answered that it forgot M with pieces there ([`super::msg::Msg::Settled`],
//! the same condition 2 there; a replica that forgot M only as an
//! ancestor does not vouch for it). So each component is stored once,
//! by its first member (`Components`), from the burial of its first
//! member with pieces here until every member is settled; from the epoch
//! after that burial, once an epoch, the replica asks one replica of each
//! other shard (in turn, so a replica that is down or cut off is not asked
//! forever) about its unsettled members, and a lost question or answer is
//! asked again. No timing assumption: a component is dropped only on a
//! proof that no server can need it, whatever the delays of the messages
//! still naming T — those are answered from the bit as before. What it
//! costs: components live about as long as the slowest replica of their
//! members' shards takes to execute and forget them (a few epochs when
//! nothing fails); a replica that is down or cut off, or a member still
//! unexecuted somewhere, stalls the drop of the components it is in, and
//! they go once it is back and executes them — that is the bound, not a
//! leak. After a restart the Forgotten records replay the same burials
//! and the members are asked about again (drops are not logged: derived).
//!
//! *Bitmaps: bounded by the done floor* (session 26). What stayed for as
//! long as the replica lived was one bit per transaction id of each
//! coordinator incarnation between the lowest and highest forgotten here,
//! in two bitmaps (with pieces here, ancestors): about two bits per
//! transaction issued in the whole system, per replica (one-site TPC-C at
//! 60 clients: ~28 KB/s per replica, ~100 MB an hour). Dropping a bit
//! needs a proof that no message naming T (a)–(d) can still arrive, or
//! that every such message can be answered without it. Session 24
//! checked two designs that prove the first (Rococo-style agreed epochs;
//! per-incarnation low-water marks of *issued* transactions) and found
//! that both need a refusal Janus lacks (a server refusing PreAccepts and
//! Accepts of an old epoch, the coordinator retrying under a new id),
//! since a transaction's PreAccept, or a recovery coordinator's Accept
//! with its procedure, can arrive after any agreement, and a server
//! cannot report a transaction it never received.
//!
//! **The done floor** proves the second, with no change to the commit
//! protocol. A coordinator incarnation's done floor D ([`super::done`])
//! is its oldest transaction not known to have executed at every replica
//! of every shard it involves; it learns that of a finished transaction
//! from any replica of its shards that forgot it with pieces there (by
//! condition 2, all of them announced executing it durably), asking
//! ([`super::msg::Msg::Settled`]) one replica at a time. D travels with
//! every PreAccept and, every 10 epochs while it rises, to every server
//! ([`super::msg::Msg::Done`]: a replica that holds a coordinator's
//! transactions only as ancestors, or is no longer sent any, learns it
//! too); a replica drops its bits below D. Then for T below D,
//! at a replica R of a shard T involves, holding nothing of T (no
//! PreAccept, Commit or vertex): R executed T durably (D says so), and
//! holds nothing of it, so R forgot it — exactly what the bit said. Who
//! knows that T involves R's shard and is not held there: every message
//! about T that comes to R *as a replica of T's shards* — T's own
//! coordinator's (below its floor anyway), a recovery coordinator's
//! Prepare, PreAccept and Accept, a peer's announcement, nudge, echo or
//! catch-up list, a fetch of T's output, and an Inquire whose asker knew
//! T's shards ([`super::msg::Msg::Inquire`]'s `its_shard`); a dependency
//! on T carries T's shards. What the floor cannot say is whether a
//! replica of *another* shard forgot T as an ancestor: such a dependency
//! below D that finds no bit is inquired about again, and T's shards'
//! replicas answer `Forgotten` from the floor (with the component, which
//! [`Components`] keeps independently of the bits) — a late message's
//! extra round trip, no wrong answer. A transaction still held here below
//! D is as before (its announcements counted, forgotten by the usual
//! conditions — condition 2 then holds by D); an Inquire about an id
//! below D that came as to its shard and finds nothing is answered
//! `Forgotten` (for an id never issued, vacuously).
//!
//! What is left: the bits between D and the highest id forgotten (a few
//! epochs of transactions), the rare abandoned ids, and per incarnation
//! one map entry. A replica down or cut off holds every D whose
//! transactions involve its shard (nothing is forgotten without it) and
//! the bits grow meanwhile: a stall, not a leak; they go once it catches
//! up. An old incarnation's bits above its last D stay (its last few
//! epochs' transactions). After a restart the log's Forgotten records
//! replay every bit, and the next floors (PreAccept or `Done`) drop them;
//! a checkpoint's image ([`super::image`]) keeps only the bits above the
//! floors, and the floors.
//!
//! Measured (`docs/results/janus.md`, *session 24*): one-site TPC-C at
//! 60 clients for 2 s keeps 1,650–1,990 components over its 18 replicas
//! from 250 ms to the end (before: every one, 5.1 MB of record at the end,
//! now 1.3 MB, the rest bitmaps); `Settled` adds 6 bytes per transaction.
//! With the done floor (*session 26*), the same run keeps ~206 KB of
//! bits and abandoned ids over the 18 replicas at 2 s and at 4 s alike
//! (627 KB and 759 KB of record in all, the rest components in flight).
//!
//! A replica cut off (or down) while the others announced T learns that
//! they executed it from their echo of its own announcement of T. A
//! replica that executed T a while ago and has not heard a replica of one
//! of T's shards (its own or another) announce T tells that replica about
//! T again ([`super::msg::Announce::Lagging`], itself an announcement):
//! the replica inquires T if it missed it, or echoes that it executed it.
//! Until session 25 only the replicas of the nudger's own shard were told,
//! and an announcement lost across shards (both copies sent while the
//! receiver was cut off; or heard, and then forgotten by a restart, which
//! empties `executed_by`) kept T at every replica for good: in
//! `janus_seeds`' crash runs 30 of 200 seeds ended so, and with messages
//! held back 300 ms every one, ~250 transactions a run. A replica
//! announces executing T only once T's Executed record is durable
//! ([`super::wal`]): after a crash it must still hold what the others
//! forgot.

use super::wal::{get_txns, put_txns};
use crate::tombstones::Tombstones;
use bytes::{BufMut, BytesMut};
use std::sync::Arc;
use tessera_core::codec::{
    get_len, get_txn_id, get_u32, get_u64, get_varint, put_txn_id, put_varint, DecodeError,
};
use tessera_core::ids::{NodeId, TxnId};
use tessera_core::{FastMap, FastSet};

/// A set of sequence numbers of one coordinator incarnation, one bit each
/// from the lowest word inserted to the highest: ids of an incarnation are
/// dense (its client numbers every attempt), so this is about one bit per
/// transaction that incarnation issued, here or not.
#[derive(Default, Debug)]
struct SeqSet {
    /// The index of `words[0]` (sequence number / 64).
    base: u32,
    words: Vec<u64>,
    /// The incarnation's *done floor* (see [`Gc::raise_done`]): every
    /// sequence number below it executed at every replica of every shard
    /// it involves, and is not stored.
    floor: u32,
}

impl SeqSet {
    fn insert(&mut self, seq: u32) {
        if seq < self.floor {
            return;
        }
        let w = seq / 64;
        if self.words.is_empty() {
            self.base = w;
        } else if w < self.base {
            let grow = (self.base - w) as usize;
            self.words.splice(0..0, std::iter::repeat_n(0, grow));
            self.base = w;
        }
        let i = (w - self.base) as usize;
        if i >= self.words.len() {
            self.words.resize(i + 1, 0);
        }
        self.words[i] |= 1 << (seq % 64);
    }

    fn contains(&self, seq: u32) -> bool {
        let w = seq / 64;
        w.checked_sub(self.base)
            .and_then(|i| self.words.get(i as usize))
            .is_some_and(|word| word & (1 << (seq % 64)) != 0)
    }

    /// Drop the bits of the words wholly below `floor` (a floor never
    /// falls).
    fn trim(&mut self, floor: u32) {
        if floor <= self.floor {
            return;
        }
        self.floor = floor;
        let w = floor / 64;
        if w > self.base {
            let gone = ((w - self.base) as usize).min(self.words.len());
            self.words.drain(..gone);
            self.base = w;
            // After a stall (a replica down holds the floor) the span
            // shrinks back: give the memory back too.
            let len = self.words.len().max(16);
            if self.words.capacity() > 4 * len {
                self.words.shrink_to(2 * len);
            }
        }
    }

    fn bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.floor);
        out.put_u32_le(self.base);
        put_varint(out, self.words.len() as u64);
        for &w in &self.words {
            out.put_u64_le(w);
        }
    }

    fn decode(buf: &mut &[u8]) -> Result<SeqSet, DecodeError> {
        let floor = get_u32(buf, "done floor")?;
        let base = get_u32(buf, "bitmap base")?;
        let n = get_len(buf, 8, "bitmap words")?;
        let mut words = Vec::with_capacity(n);
        for _ in 0..n {
            words.push(get_u64(buf, "bitmap word")?);
        }
        Ok(SeqSet { base, words, floor })
    }
}

/// The exact record of which transactions a replica forgot, by coordinator
/// incarnation (see the module docs, *what a replica forgot*).
#[derive(Default, Debug)]
struct Forgot {
    by_incarnation: FastMap<u64, SeqSet>,
}

impl Forgot {
    fn insert(&mut self, t: TxnId) {
        self.by_incarnation
            .entry(t.0 >> 32)
            .or_default()
            .insert(t.0 as u32);
    }

    fn contains(&self, t: TxnId) -> bool {
        self.by_incarnation
            .get(&(t.0 >> 32))
            .is_some_and(|s| s.contains(t.0 as u32))
    }

    /// `t` is below its incarnation's done floor.
    fn below_floor(&self, t: TxnId) -> bool {
        self.by_incarnation
            .get(&(t.0 >> 32))
            .is_some_and(|s| (t.0 as u32) < s.floor)
    }

    /// `done`'s incarnation's done floor rises to `done`.
    fn trim(&mut self, done: TxnId) {
        self.by_incarnation
            .entry(done.0 >> 32)
            .or_default()
            .trim(done.0 as u32);
    }

    fn bytes(&self) -> usize {
        self.by_incarnation
            .values()
            .map(SeqSet::bytes)
            .sum::<usize>()
            + self.by_incarnation.capacity() * (8 + std::mem::size_of::<SeqSet>())
    }

    fn encode(&self, out: &mut BytesMut) {
        put_varint(out, self.by_incarnation.len() as u64);
        for (&inc, set) in &self.by_incarnation {
            out.put_u64_le(inc);
            set.encode(out);
        }
    }

    fn decode(buf: &mut &[u8]) -> Result<Forgot, DecodeError> {
        let n = get_len(buf, 17, "incarnations forgotten")?;
        let mut by_incarnation = tessera_core::fast_map();
        for _ in 0..n {
            let inc = get_u64(buf, "incarnation")?;
            by_incarnation.insert(inc, SeqSet::decode(buf)?);
        }
        Ok(Forgot { by_incarnation })
    }
}

/// The components of forgotten transactions with pieces here, each stored
/// once, and dropped once no server can need them (see the module docs,
/// *what bounds the record*).
#[derive(Default, Debug)]
struct Components {
    /// By its first member: every server lists a component's members in
    /// the same order (§3.2), so all of them name it alike.
    by_first: FastMap<TxnId, Held>,
    /// Each member forgotten here with pieces here: its component's first
    /// member.
    of: FastMap<TxnId, TxnId>,
    /// Each member of a kept component not known executed at every replica
    /// of its shards yet: its component's first member, and the epoch
    /// from which to ask the other shards about it.
    unsettled: FastMap<TxnId, (TxnId, u64)>,
}

#[derive(Debug)]
struct Held {
    members: Arc<[TxnId]>,
    /// Members neither forgotten here with pieces here nor settled by
    /// another shard's answer.
    pending: usize,
    /// The members without pieces here (asked about; in `unsettled`
    /// until settled).
    foreign: Box<[TxnId]>,
}

impl Components {
    /// `t` (forgotten here, with pieces here, in `scc`) was just added to
    /// `mine`, and was not in it before; `here`: a member has pieces here
    /// (the server holds it); `epoch`: now.
    fn keep(
        &mut self,
        t: TxnId,
        scc: &Arc<[TxnId]>,
        mine: &Forgot,
        here: &dyn Fn(TxnId) -> bool,
        epoch: u64,
    ) {
        let Some(&first) = scc.first() else { return };
        if !self.by_first.contains_key(&first) {
            // A member below its done floor executed everywhere: settled.
            let waiting: Vec<TxnId> = scc
                .iter()
                .copied()
                .filter(|&m| !mine.contains(m) && !mine.below_floor(m))
                .collect();
            if waiting.is_empty() {
                return;
            }
            let foreign: Box<[TxnId]> = waiting.iter().copied().filter(|&m| !here(m)).collect();
            for &m in foreign.iter() {
                // Asked about from the next epoch on: its replicas forget
                // it about when this one forgets the members it holds.
                self.unsettled.insert(m, (first, epoch + 1));
            }
            let held = Held {
                members: scc.clone(),
                // `t` too, settled just below.
                pending: waiting.len() + 1,
                foreign,
            };
            self.by_first.insert(first, held);
        }
        // `t` leaves `pending` once: here, unless another shard's answer
        // settled it already (it was taken for one without pieces here).
        let settled_before =
            self.by_first[&first].foreign.contains(&t) && self.unsettled.remove(&t).is_none();
        if !settled_before {
            self.release(first);
        }
        if self.by_first.contains_key(&first) {
            self.of.insert(t, first);
        }
    }

    /// `m` executed at every replica of every shard it involves (another
    /// shard's replica forgot it with pieces there).
    fn settle(&mut self, m: TxnId) {
        if let Some((first, _)) = self.unsettled.remove(&m) {
            self.release(first);
        }
    }

    /// One member of the component `first` is settled: it goes once none
    /// is left.
    fn release(&mut self, first: TxnId) {
        let Some(held) = self.by_first.get_mut(&first) else {
            return;
        };
        held.pending = held.pending.saturating_sub(1);
        if held.pending > 0 {
            return;
        }
        if let Some(held) = self.by_first.remove(&first) {
            for m in held.members.iter() {
                self.of.remove(m);
            }
            for m in held.foreign.iter() {
                self.unsettled.remove(m);
            }
        }
    }

    /// Settle the unsettled members that `done` says executed everywhere.
    fn settle_done(&mut self, done: &dyn Fn(TxnId) -> bool) {
        let now: Vec<TxnId> = self
            .unsettled
            .keys()
            .copied()
            .filter(|&m| done(m))
            .collect();
        for m in now {
            self.settle(m);
        }
    }

    /// The unsettled members to ask the other shards about at `epoch`.
    fn to_ask(&self, epoch: u64) -> Vec<TxnId> {
        let mut ask: Vec<TxnId> = self
            .unsettled
            .iter()
            .filter(|(_, &(_, from))| from <= epoch)
            .map(|(&m, _)| m)
            .collect();
        ask.sort_unstable();
        ask
    }

    fn get(&self, t: TxnId) -> Option<Arc<[TxnId]>> {
        let first = self.of.get(&t)?;
        self.by_first.get(first).map(|h| h.members.clone())
    }

    /// The maps' slots (key, value, a control byte) and each component's
    /// ids behind its reference counts.
    fn bytes(&self) -> usize {
        let members: usize = self
            .by_first
            .values()
            .map(|h| 16 + 8 * h.members.len() + 8 * h.foreign.len())
            .sum();
        self.of.capacity() * (2 * std::mem::size_of::<TxnId>() + 1)
            + self.unsettled.capacity() * (std::mem::size_of::<(TxnId, (TxnId, u64))>() + 1)
            + self.by_first.capacity() * (std::mem::size_of::<(TxnId, Held)>() + 1)
            + members
    }

    fn len(&self) -> usize {
        self.by_first.len()
    }

    fn encode(&self, out: &mut BytesMut) {
        put_varint(out, self.by_first.len() as u64);
        for (&first, h) in &self.by_first {
            put_txn_id(out, first);
            put_txns(out, &h.members);
            put_varint(out, h.pending as u64);
            put_txns(out, &h.foreign);
        }
        put_varint(out, self.of.len() as u64);
        for (&t, &first) in &self.of {
            put_txn_id(out, t);
            put_txn_id(out, first);
        }
        put_varint(out, self.unsettled.len() as u64);
        for (&m, &(first, epoch)) in &self.unsettled {
            put_txn_id(out, m);
            put_txn_id(out, first);
            put_varint(out, epoch);
        }
    }

    fn decode(buf: &mut &[u8]) -> Result<Components, DecodeError> {
        let mut c = Components::default();
        for _ in 0..get_len(buf, 11, "components kept")? {
            let first = get_txn_id(buf)?;
            let members = get_txns(buf, "component")?;
            let pending = get_varint(buf, "members pending")? as usize;
            let foreign = get_txns(buf, "members elsewhere")?.to_vec().into();
            let held = Held {
                members,
                pending,
                foreign,
            };
            c.by_first.insert(first, held);
        }
        for _ in 0..get_len(buf, 16, "members forgotten")? {
            let t = get_txn_id(buf)?;
            c.of.insert(t, get_txn_id(buf)?);
        }
        for _ in 0..get_len(buf, 17, "members unsettled")? {
            let m = get_txn_id(buf)?;
            let first = get_txn_id(buf)?;
            c.unsettled.insert(m, (first, get_varint(buf, "epoch")?));
        }
        Ok(c)
    }
}

/// What [`Gc::encode_record`] wrote, decoded, for [`Gc::restore`].
#[derive(Debug)]
pub(super) struct Kept {
    epoch: u64,
    mine: Forgot,
    abandoned: FastSet<TxnId>,
    components: Components,
}

impl Kept {
    pub fn decode(buf: &mut &[u8]) -> Result<Kept, DecodeError> {
        let epoch = get_varint(buf, "epoch")?;
        let mine = Forgot::decode(buf)?;
        let n = get_len(buf, 8, "abandoned")?;
        let mut abandoned = tessera_core::fast_set();
        for _ in 0..n {
            abandoned.insert(get_txn_id(buf)?);
        }
        let components = Components::decode(buf)?;
        Ok(Kept {
            epoch,
            mine,
            abandoned,
            components,
        })
    }
}

/// What is kept of a forgotten transaction (ids only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Tombstone {
    pub abandon: bool,
    /// Its component when of two or more members, in execution order.
    pub scc: Option<Arc<[TxnId]>>,
}

/// A replica's garbage-collection state: the epoch, the tombstones, which
/// replicas announced executing which transactions, and what to announce.
pub(super) struct Gc {
    pub epoch: u64,
    /// Timed in epochs.
    gone: Tombstones<Tombstone>,
    executed_by: FastMap<TxnId, Vec<NodeId>>,
    /// Executed here since the last announcement, and in the one before.
    fresh: Vec<TxnId>,
    announced: Arc<[TxnId]>,
    /// Forgotten since the last report.
    pub forgotten: u64,
    /// Every transaction with pieces here this replica forgot, for as long
    /// as it lives, rebuilt from its log after a crash; and those of them
    /// that were abandoned (§3.3: rare, a recovery's decision).
    mine: Forgot,
    abandoned: FastSet<TxnId>,
    /// The components of two or more members those of them were decided
    /// in, while a server for which one is an unknown ancestor may need it.
    components: Components,
    /// Every ancestor without pieces here it forgot (not logged: after a
    /// restart these are asked about again, as before).
    ancestors: Forgot,
}

impl Gc {
    /// Tombstones of coordinators without a known floor live `keep`
    /// epochs, and those below their floor at least as long (see above).
    pub fn new(keep: u64) -> Self {
        Gc {
            epoch: 0,
            gone: Tombstones::lingering(keep, keep),
            executed_by: tessera_core::fast_map(),
            fresh: Vec::new(),
            announced: Arc::from([]),
            forgotten: 0,
            mine: Forgot::default(),
            abandoned: tessera_core::fast_set(),
            components: Components::default(),
            ancestors: Forgot::default(),
        }
    }

    /// `floor`'s coordinator says everything of its below `floor` is over.
    pub fn raise_floor(&mut self, floor: TxnId) {
        self.gone.raise_floor(floor);
    }

    /// A message about `t` that finds no state here (no live transaction,
    /// no tombstone) comes too late when `t` is below its coordinator's
    /// floor: the coordinator is done with it, and either this replica
    /// executed and forgot it or the others hold it and will tell this one
    /// ([`super::msg::Announce::Lagging`]) while they have not forgotten
    /// it. Acting on the message could only run `t` again.
    pub fn stale(&self, t: TxnId) -> bool {
        !self.gone.contains(t) && self.gone.below_floor(t)
    }

    /// `t`'s tombstone, while it lives.
    pub fn gone(&self, t: TxnId) -> Option<&Tombstone> {
        self.gone.get(t)
    }

    /// `t`'s coordinator says every transaction of its incarnation below
    /// `done` executed at every replica of every shard it involves
    /// ([`super::msg::Msg::PreAccept`]'s `done`): the record of those
    /// forgotten here is dropped (see the module docs, *the done floor*).
    pub fn raise_done(&mut self, done: TxnId) {
        self.mine.trim(done);
        self.ancestors.trim(done);
    }

    /// `t` executed at every replica of every shard it involves, by its
    /// coordinator's done floor.
    pub fn below_done(&self, t: TxnId) -> bool {
        self.mine.below_floor(t)
    }

    /// This replica forgot `t` by its tombstone or the bits of the record
    /// (exact: not below the done floor): a message about it is late, and
    /// `t` is DECIDED and done here (see the module docs).
    pub fn is_gone(&self, t: TxnId) -> bool {
        self.gone.contains(t) || self.recorded(t)
    }

    /// As [`Self::is_gone`], and below the done floor too when `ours`:
    /// the caller knows that `t` involves this replica's shard and is not
    /// held here, so that this replica executed it and forgot it.
    pub fn forgot(&self, t: TxnId, ours: bool) -> bool {
        self.is_gone(t) || (ours && self.below_done(t))
    }

    fn recorded(&self, t: TxnId) -> bool {
        self.mine.contains(t) || self.ancestors.contains(t)
    }

    /// `t` had pieces here and was forgotten here (the bits of the record).
    pub fn forgot_mine(&self, t: TxnId) -> bool {
        self.mine.contains(t)
    }

    /// `t` executed at every replica of every shard it involves, as far
    /// as this replica knows: forgotten here with pieces here, or below
    /// its done floor ([`super::msg::Msg::Settled`]'s answer).
    pub fn settled_everywhere(&self, t: TxnId) -> bool {
        self.mine.contains(t) || self.below_done(t)
    }

    /// `t` had pieces here and was forgotten here (`ours`: as in
    /// [`Self::forgot`]): what its tombstone said, rebuilt from the record.
    pub fn recorded_tombstone(&self, t: TxnId, ours: bool) -> Option<Tombstone> {
        (self.mine.contains(t) || (ours && self.below_done(t))).then(|| Tombstone {
            abandon: self.abandoned.contains(&t),
            scc: self.components.get(t),
        })
    }

    /// `t` is forgotten here and its tombstone is gone: only the record
    /// knows (the server counts these late messages).
    pub fn only_recorded(&self, t: TxnId) -> bool {
        !self.gone.contains(t) && self.recorded(t)
    }

    /// `from` announced that it executed `t`. True the first time.
    pub fn heard(&mut self, t: TxnId, from: NodeId) -> bool {
        if self.is_gone(t) {
            return false;
        }
        let by = self.executed_by.entry(t).or_default();
        let new = !by.contains(&from);
        if new {
            by.push(from);
        }
        new
    }

    /// `r` announced executing `t`.
    pub fn announced_by(&self, t: TxnId, r: NodeId) -> bool {
        self.executed_by.get(&t).is_some_and(|v| v.contains(&r))
    }

    /// Every one of `replicas` announced executing `t`, or its done floor
    /// passed it.
    pub fn everywhere(&self, t: TxnId, mut replicas: impl Iterator<Item = NodeId>) -> bool {
        if self.below_done(t) {
            return true;
        }
        let by = self.executed_by.get(&t).map_or(&[][..], |v| v.as_slice());
        replicas.all(|r| by.contains(&r))
    }

    /// `t` executed here: announce it twice.
    pub fn executed(&mut self, t: TxnId) {
        self.fresh.push(t);
    }

    /// What to announce now: executed since the last announcement, and in
    /// the one before.
    pub fn announcement(&mut self) -> Vec<TxnId> {
        let fresh = std::mem::take(&mut self.fresh);
        let mut txns = self.announced.to_vec();
        txns.extend_from_slice(&fresh);
        self.announced = fresh.into();
        txns
    }

    /// `t` is forgotten now; `mine`: it has pieces here.
    /// `here`: a transaction has pieces here and is held here (what this
    /// replica learns of the members of `t`'s component itself, not from
    /// other shards).
    pub fn bury(
        &mut self,
        t: TxnId,
        abandon: bool,
        scc: Option<Arc<[TxnId]>>,
        mine: bool,
        here: &dyn Fn(TxnId) -> bool,
    ) {
        self.executed_by.remove(&t);
        self.forgotten += 1;
        if mine {
            let new = !self.mine.contains(t);
            self.mine.insert(t);
            if abandon {
                self.abandoned.insert(t);
            }
            if let Some(c) = scc.as_ref().filter(|_| new) {
                self.components.keep(t, c, &self.mine, here, self.epoch);
            }
        }
        self.gone.insert(t, Tombstone { abandon, scc }, self.epoch);
        if !mine {
            self.ancestors.insert(t);
        }
    }

    /// Drop the tombstones nothing can ask about any more (see above).
    pub fn expire(&mut self) {
        self.gone.sweep(self.epoch);
    }

    pub fn tombstones(&self) -> usize {
        self.gone.len()
    }

    /// Bytes the record of what was forgotten takes (bitmaps, the maps'
    /// slots, the abandoned ids, the components kept).
    pub fn record_bytes(&self) -> usize {
        self.mine.bytes()
            + self.ancestors.bytes()
            + self.abandoned.capacity() * (std::mem::size_of::<TxnId>() + 1)
            + self.components.bytes()
    }

    /// Another shard's replica forgot each of `txns` with pieces there:
    /// each executed at every replica of every shard it involves
    /// (condition 2 there), so no server needs a component for it.
    pub fn settled(&mut self, txns: &[TxnId]) {
        for &m in txns {
            self.components.settle(m);
        }
    }

    /// Members of kept components to ask the other shards about
    /// ([`super::msg::Msg::Settled`]), once an epoch; those below their
    /// done floor are settled without asking.
    pub fn unsettled(&mut self) -> Vec<TxnId> {
        let mine = &self.mine;
        self.components.settle_done(&|m| mine.below_floor(m));
        self.components.to_ask(self.epoch)
    }

    /// Bytes of the record's bitmaps (what the done floor bounds).
    pub fn bitmap_bytes(&self) -> usize {
        self.mine.bytes() + self.ancestors.bytes()
    }

    /// Bytes of the components the record keeps.
    pub fn component_bytes(&self) -> usize {
        self.components.bytes()
    }

    /// Components the record keeps.
    pub fn components_kept(&self) -> usize {
        self.components.len()
    }

    /// What a checkpoint keeps ([`super::image`]): the epoch and the
    /// record of what was forgotten with pieces here — the bits above each
    /// done floor, the floors, the abandoned ids, the components kept.
    /// That is all the log's Forgotten records rebuild, and less: the
    /// bits the floors dropped stay dropped (a replay of the whole log set
    /// them again until new floors came). Not kept, as not logged: the
    /// tombstones (the record answers for them, as once they expire),
    /// who announced what (announced again after a restart), ancestors
    /// forgotten without pieces here (asked about again).
    pub fn encode_record(&self, out: &mut BytesMut) {
        put_varint(out, self.epoch);
        self.mine.encode(out);
        put_varint(out, self.abandoned.len() as u64);
        for &t in &self.abandoned {
            put_txn_id(out, t);
        }
        self.components.encode(out);
    }

    /// A checkpoint's record taken back ([`Kept::decode`]) by a fresh
    /// replica restarting from it.
    pub fn restore(&mut self, kept: Kept) {
        self.epoch = kept.epoch;
        self.mine = kept.mine;
        self.abandoned = kept.abandoned;
        self.components = kept.components;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    /// The transactions of `t`'s incarnation have pieces here.
    fn here(m: TxnId) -> bool {
        m.0 >> 32 == t(0).0 >> 32
    }

    #[test]
    fn forgettable_only_once_every_replica_announced() {
        let mut gc = Gc::new(10);
        let all = [NodeId(1), NodeId(2), NodeId(4)];
        assert!(!gc.everywhere(t(1), all.iter().copied()));
        assert!(gc.heard(t(1), NodeId(1)));
        assert!(gc.heard(t(1), NodeId(2)));
        assert!(!gc.heard(t(1), NodeId(2)));
        assert!(!gc.everywhere(t(1), all.iter().copied()));
        gc.heard(t(1), NodeId(4));
        assert!(gc.everywhere(t(1), all.iter().copied()));
        // Another transaction's announcements do not count.
        assert!(!gc.everywhere(t(2), all.iter().copied()));
    }

    #[test]
    fn announcements_repeat_once_and_tombstones_expire() {
        let mut gc = Gc::new(10);
        gc.executed(t(1));
        assert_eq!(gc.announcement(), [t(1)]);
        gc.executed(t(2));
        assert_eq!(gc.announcement(), [t(1), t(2)]);
        assert_eq!(gc.announcement(), [t(2)]);
        assert!(gc.announcement().is_empty());

        gc.epoch = 3;
        gc.bury(t(1), true, None, true, &here);
        assert_eq!(gc.gone(t(1)).map(|g| g.abandon), Some(true));
        // A late announcement of a forgotten one is not recorded again.
        gc.heard(t(1), NodeId(1));
        assert!(gc.executed_by.is_empty());
        // Its coordinator sent no floor: it lives `keep` epochs.
        gc.epoch = 12;
        gc.expire();
        assert!(gc.gone(t(1)).is_some());
        assert!(!gc.only_recorded(t(1)));
        gc.epoch = 13;
        gc.expire();
        assert!(gc.gone(t(1)).is_none());
        assert!(!gc.stale(t(1)), "no floor known: not known to be over");
        // The record still knows it, and what the tombstone said.
        assert!(gc.is_gone(t(1)) && gc.only_recorded(t(1)));
        gc.heard(t(1), NodeId(1));
        assert!(gc.executed_by.is_empty());
        assert_eq!(
            gc.recorded_tombstone(t(1), false),
            Some(Tombstone {
                abandon: true,
                scc: None
            })
        );
    }

    /// The record of what a replica forgot is exact: every id buried, no
    /// other, whatever the order, across words and incarnations; a
    /// component and the abandon flag of a transaction with pieces here
    /// are kept, an ancestor without pieces here is only known forgotten.
    #[test]
    fn the_record_of_forgotten_transactions_is_exact() {
        let mut gc = Gc::new(1);
        let other = |i| TxnId::new(NodeId(9), 1, i);
        let buried = [700, 3, 64, 63, 5_000, 1, 128];
        for &i in &buried {
            gc.bury(t(i), false, None, true, &here);
        }
        let scc: Arc<[TxnId]> = Arc::from([other(2), t(9_000)]);
        gc.bury(other(2), false, Some(scc.clone()), true, &here);
        gc.bury(t(9_000), false, Some(scc.clone()), false, &here);
        gc.epoch = 10;
        gc.expire();
        assert_eq!(gc.tombstones(), 0);
        for i in 0..10_000 {
            let forgotten = buried.contains(&i) || i == 9_000;
            assert_eq!(gc.is_gone(t(i)), forgotten, "{i}");
            assert_eq!(gc.forgot_mine(t(i)), buried.contains(&i), "{i}");
            assert!(!gc.is_gone(other(i)) || i == 2, "{i}");
        }
        assert_eq!(
            gc.recorded_tombstone(other(2), false).and_then(|g| g.scc),
            Some(scc)
        );
        assert!(gc.is_gone(t(9_000)));
        assert_eq!(
            gc.recorded_tombstone(t(9_000), false),
            None,
            "no pieces here"
        );
        // About one bit per id of each span (here 1..5,000: 79 words).
        assert!(gc.record_bytes() < 141 * 8 + 4_096, "{}", gc.record_bytes());
    }

    /// Below its coordinator's done floor the record keeps no bits: what
    /// was forgotten there is known from the floor alone, for a caller
    /// that knows the transaction involves this shard and is not held
    /// here (`ours`); an ancestor below it is no longer known forgotten
    /// (a late dependency on it is inquired about again). Above the floor
    /// the record is exact as before, and the bitmaps shrink to the span
    /// between the floor and the highest id forgotten.
    #[test]
    fn the_done_floor_replaces_the_bits_below_it() {
        let mut gc = Gc::new(1);
        let other = |i| TxnId::new(NodeId(8), 0, i);
        for i in 0..10_000 {
            gc.bury(t(i), false, None, i % 3 != 0, &here);
        }
        gc.bury(t(5), true, None, true, &here);
        gc.epoch = 10;
        gc.expire();
        let full = gc.record_bytes();
        gc.raise_done(t(9_000));
        gc.raise_done(t(100));
        assert!(gc.below_done(t(8_999)) && !gc.below_done(t(9_000)));
        assert!(!gc.below_done(other(1)), "another incarnation's floor");
        // (The floor's own word keeps its bits: 8,960 to 8,999.)
        for i in [0, 1, 5, 8_959] {
            assert!(!gc.is_gone(t(i)), "{i}: no bit below the floor");
            assert!(gc.forgot(t(i), true), "{i}");
            assert!(!gc.forgot(t(i), false), "{i}");
            assert!(gc.settled_everywhere(t(i)), "{i}");
        }
        assert_eq!(
            gc.recorded_tombstone(t(5), true).map(|g| g.abandon),
            Some(true)
        );
        assert_eq!(gc.recorded_tombstone(t(5), false), None);
        for i in 9_000..10_000 {
            assert!(gc.is_gone(t(i)), "{i}: exact above the floor");
            assert_eq!(gc.forgot_mine(t(i)), i % 3 != 0, "{i}");
        }
        assert!(!gc.forgot(t(10_000), true), "not below the floor");
        // Burying below the floor adds no bit back.
        gc.bury(t(7), false, None, true, &here);
        gc.epoch = 20;
        gc.expire();
        assert!(!gc.is_gone(t(7)) && gc.forgot(t(7), true));
        assert!(gc.record_bytes() < full, "{} >= {full}", gc.record_bytes());
        // Every replica announced it: a live transaction below the floor.
        assert!(gc.everywhere(t(3), [NodeId(1)].into_iter()));
        assert!(!gc.everywhere(t(9_500), [NodeId(1)].into_iter()));
    }

    /// A component is kept while a member of it is not forgotten here
    /// with pieces here (that member may still be unexecuted at some
    /// replica of its shards, which then needs the component to place it),
    /// once per component whatever its size, and dropped with the last
    /// such member: every member then executed at every replica of its
    /// shards, so no server that asks about one of them can need it. A
    /// component with a member without pieces here is kept.
    #[test]
    fn a_component_is_kept_once_and_only_while_a_member_may_need_it() {
        let mut gc = Gc::new(1);
        let base = gc.record_bytes();
        let scc: Arc<[TxnId]> = Arc::from([t(1), t(2), t(3)]);
        gc.bury(t(2), false, Some(scc.clone()), true, &here);
        gc.bury(t(1), false, Some(scc.clone()), true, &here);
        assert_eq!(gc.components_kept(), 1, "stored once");
        for m in [t(1), t(2)] {
            let kept = gc.recorded_tombstone(m, false).and_then(|g| g.scc);
            assert_eq!(kept, Some(scc.clone()), "t(3) is not forgotten here yet");
        }
        // Buried again (replayed twice): no member is counted twice.
        gc.bury(t(1), false, Some(scc.clone()), true, &here);
        assert_eq!(gc.components_kept(), 1);
        gc.bury(t(3), false, Some(scc.clone()), true, &here);
        assert_eq!(gc.components_kept(), 0);
        // What is left is the maps' capacity, the most held at once: more
        // components dropped alike take no more.
        let slots = gc.component_bytes();
        for i in 0..1_000 {
            let ids: Arc<[TxnId]> = Arc::from([t(100 + 2 * i), t(101 + 2 * i)]);
            for &m in ids.iter() {
                gc.bury(m, false, Some(ids.clone()), true, &here);
            }
        }
        assert_eq!(gc.components_kept(), 0);
        assert_eq!(gc.component_bytes(), slots);
        for m in [t(1), t(2), t(3)] {
            assert!(gc.forgot_mine(m));
            assert_eq!(gc.recorded_tombstone(m, false).and_then(|g| g.scc), None);
        }
        // A member without pieces here is never forgotten here with pieces
        // here: its component stays, for every member that has them, until
        // another shard's replica says it forgot it with pieces there.
        let other = TxnId::new(NodeId(8), 0, 1);
        let mixed: Arc<[TxnId]> = Arc::from([other, t(7), t(8)]);
        gc.bury(other, false, Some(mixed.clone()), false, &here);
        gc.bury(t(7), false, Some(mixed.clone()), true, &here);
        assert!(gc.unsettled().is_empty(), "asked from the next epoch on");
        gc.epoch = 1;
        assert_eq!(gc.unsettled(), [other], "t(8) is held here: not asked");
        gc.bury(t(8), false, Some(mixed.clone()), true, &here);
        assert_eq!(gc.unsettled(), [other]);
        assert_eq!(gc.components_kept(), 1);
        assert_eq!(
            gc.recorded_tombstone(t(8), false).and_then(|g| g.scc),
            Some(mixed)
        );
        assert!(gc.record_bytes() > base);
        gc.settled(&[t(8), t(99)]);
        assert_eq!(gc.components_kept(), 1, "only `other` was unsettled");
        gc.settled(&[other]);
        assert_eq!(gc.components_kept(), 0);
        assert!(gc.unsettled().is_empty());
        assert_eq!(gc.recorded_tombstone(t(7), false).and_then(|g| g.scc), None);
        assert!(gc.forgot_mine(t(7)) && gc.is_gone(other));
        // A member taken for one without pieces here, settled by another
        // shard's answer and then buried here after all, leaves the count
        // once: the component stays for the member still unsettled.
        let odd = TxnId::new(NodeId(7), 0, 1);
        let c: Arc<[TxnId]> = Arc::from([odd, t(20), t(21)]);
        gc.bury(t(20), false, Some(c.clone()), true, &here);
        gc.settled(&[odd]);
        gc.bury(odd, false, Some(c.clone()), true, &here);
        assert_eq!(gc.components_kept(), 1, "t(21) is not settled");
        gc.bury(t(21), false, Some(c.clone()), true, &here);
        assert_eq!(gc.components_kept(), 0);
    }

    /// Above its coordinator's floor a tombstone outlives any age; below
    /// it, it lingers `keep` epochs, and an unknown transaction below the
    /// floor is stale.
    #[test]
    fn tombstones_follow_their_coordinators_floor() {
        let mut gc = Gc::new(10);
        gc.bury(t(1), false, None, true, &here);
        gc.bury(t(2), false, None, true, &here);
        gc.raise_floor(t(2));
        gc.epoch = 1_000;
        gc.expire();
        assert!(
            gc.gone(t(1)).is_none(),
            "below the floor and older than keep"
        );
        assert!(gc.gone(t(2)).is_some(), "its coordinator may still resend");
        assert!(gc.stale(t(1)));
        assert!(!gc.stale(t(2)), "a tombstone answers it");
        assert!(!gc.stale(t(3)), "above the floor: not over");
        gc.bury(t(3), false, None, true, &here);
        gc.raise_floor(t(4));
        gc.expire();
        assert!(gc.gone(t(2)).is_none(), "below the floor now, and old");
        assert!(
            gc.gone(t(3)).is_some(),
            "lingers for other servers' questions"
        );
        gc.epoch = 1_010;
        gc.expire();
        assert!(gc.gone(t(3)).is_none());
    }
}
