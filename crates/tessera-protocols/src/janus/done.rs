//! A coordinator's *done floor* ([`super::gc`], *the done floor*): the
//! lowest transaction of its incarnation not known to have executed at
//! every replica of every shard it involves. Sent with every PreAccept
//! ([`super::msg::Msg::PreAccept`]'s `done`), it lets replicas drop their
//! record of what they forgot below it, which otherwise grows by about
//! two bits per transaction issued in the whole system (issue 6, audit
//! item 3).
//!
//! Who can vouch for it: a replica forgets a transaction with pieces there
//! only once every replica of every shard it involves announced executing
//! it durably (condition 2 of [`super::gc`]), so one such replica's word
//! is enough. The coordinator asks ([`super::msg::Msg::Settled`]) about
//! each transaction whose driver finished, once an epoch from two epochs
//! after (a replica forgets two epochs after the last announcement, at the
//! earliest), one replica of one of its shards at a time, in turn, so that
//! a replica down or cut off is not asked forever; a transaction asked
//! about in vain is asked again after twice as long each time (up to 64
//! epochs), so that a stall does not turn into ever larger questions. A
//! transaction whose replicas cannot forget it (one of them down) holds the
//! floor where it is until they can: a stall, not a leak, as with the
//! replicas' kept components.

use std::collections::BTreeMap;
use tessera_core::ids::{NodeId, ShardId, Time, TxnId};
use tessera_core::topology::Topology;

/// At most this many transactions are asked about per round, the oldest
/// first (they hold the floor): more than an epoch's worth of one client
/// host's transactions at the rates measured (one-site TPC-C, 60 clients:
/// ~1,000 per host per epoch).
const ASK_AT_ONCE: usize = 8_192;

/// A finished transaction not confirmed yet.
struct Unconfirmed {
    shards: Box<[ShardId]>,
    /// When to ask (again).
    ask_at: Time,
    tries: u32,
}

/// The transactions whose drivers finished and that no replica confirmed
/// yet.
#[derive(Default)]
pub(super) struct DoneFloor {
    unconfirmed: BTreeMap<TxnId, Unconfirmed>,
}

impl DoneFloor {
    /// `txn`'s driver finished at `now`: nothing more of it is sent, but it
    /// may not have executed everywhere yet.
    pub fn finished(&mut self, txn: TxnId, shards: Box<[ShardId]>, now: Time) {
        let u = Unconfirmed {
            shards,
            ask_at: now,
            tries: 0,
        };
        self.unconfirmed.insert(txn, u);
    }

    /// A replica said it forgot these (or knows them below the floor):
    /// how many were unconfirmed.
    pub fn confirmed(&mut self, txns: &[TxnId]) -> usize {
        txns.iter()
            .filter(|t| self.unconfirmed.remove(t).is_some())
            .count()
    }

    /// The done floor, given the oldest transaction still driven.
    pub fn floor(&self, oldest_open: TxnId) -> TxnId {
        self.unconfirmed
            .keys()
            .next()
            .map_or(oldest_open, |&t| t.min(oldest_open))
    }

    /// One round of questions: the oldest transactions due, grouped by the
    /// replica to ask — per transaction one of its shards' replicas, a
    /// different one each try. A transaction is first due `settle` after
    /// it finished, then `settle` times 2, 4, … 64 after each try.
    pub fn questions(
        &mut self,
        now: Time,
        settle: Time,
        topology: &Topology,
    ) -> Vec<(NodeId, Vec<TxnId>)> {
        let mut by: BTreeMap<NodeId, Vec<TxnId>> = BTreeMap::new();
        let due = self
            .unconfirmed
            .iter_mut()
            .filter(|(_, u)| u.ask_at.saturating_add(settle) <= now)
            .take(ASK_AT_ONCE);
        for (&t, u) in due {
            let turn = u.tries.wrapping_add(t.0 as u32);
            u.ask_at = now + settle.saturating_mul((1 << u.tries.min(6)) - 1);
            u.tries += 1;
            if let Some(n) = Self::target(&u.shards, turn, topology) {
                by.entry(n).or_default().push(t);
            }
        }
        by.into_iter().collect()
    }

    /// Turn `round`'s replica to ask about a transaction of `shards`:
    /// every replica of every shard in turn.
    fn target(shards: &[ShardId], round: u32, topology: &Topology) -> Option<NodeId> {
        let s = shards.get(round as usize % shards.len().max(1))?;
        let replicas = &topology.shards.get(s.0 as usize)?.replicas;
        let turn = round as usize / shards.len().max(1);
        replicas.get(turn % replicas.len().max(1)).copied()
    }

    pub fn len(&self) -> usize {
        self.unconfirmed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(i: u32) -> TxnId {
        TxnId::new(NodeId(9), 0, i)
    }

    fn topology() -> Topology {
        Topology::new(2, 3, 1)
    }

    /// The floor is the oldest transaction not confirmed everywhere,
    /// driven or finished; confirmations in any order raise it.
    #[test]
    fn the_floor_is_the_oldest_unconfirmed_transaction() {
        let mut d = DoneFloor::default();
        assert_eq!(d.floor(t(1)), t(1));
        d.finished(t(1), Box::from([ShardId(0)]), 0);
        d.finished(t(2), Box::from([ShardId(1)]), 0);
        assert_eq!(d.floor(t(3)), t(1));
        d.confirmed(&[t(2)]);
        assert_eq!(d.floor(t(3)), t(1));
        d.confirmed(&[t(1), t(7)]);
        assert_eq!(d.floor(t(3)), t(3));
        assert_eq!(d.len(), 0);
    }

    /// Only transactions finished `settle` ago are asked about, and each
    /// round asks another replica, over every replica of every shard.
    #[test]
    fn questions_wait_and_go_round_the_replicas() {
        let topo = topology();
        let mut d = DoneFloor::default();
        d.finished(t(1), Box::from([ShardId(0), ShardId(1)]), 100);
        assert!(
            d.questions(150, 100, &topo).is_empty(),
            "finished too lately"
        );
        let mut asked = std::collections::BTreeSet::new();
        let mut at = Vec::new();
        for now in (200..20_000).step_by(100) {
            let round = d.questions(now, 100, &topo);
            if let Some((n, txns)) = round.first() {
                assert_eq!((round.len(), &txns[..]), (1, &[t(1)][..]));
                asked.insert(*n);
                at.push(now);
            }
        }
        assert_eq!(asked.len(), 6, "every replica of both shards: {asked:?}");
        // Then twice as long after each try, up to 64 epochs.
        assert_eq!(at[..8], [200, 300, 500, 900, 1_700, 3_300, 6_500, 12_900]);
    }
}
