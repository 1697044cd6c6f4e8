//! The recovery coordinator's decision after its Prepare phase (§3.3,
//! Algorithm 6, l. 68–83), kept free of I/O so that every case can be
//! tested on its own. Sending Prepare, retrying with higher ballots, and
//! driving the chosen phase are the caller's.

use super::msg::{Ballot, Dep, Prepared};

/// One shard's Prepare-OKs: `None` from a replica that never pre-accepted
/// the transaction.
pub struct ShardReplies<'a> {
    pub replicas: usize,
    pub oks: &'a [Option<Prepared>],
}

/// What the recovery coordinator does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Some shard has no majority of Prepare-OKs yet (l. 71–72).
    Wait,
    /// Accept these dependencies, or the abandon an earlier recovery
    /// coordinator had accepted (l. 75 and l. 78).
    Accept { deps: Vec<Dep>, abandon: bool },
    /// PreAccept again, without the fast path (l. 80).
    PreAccept,
    /// No replica holds the transaction: Accept and Commit it with the
    /// abandon flag (l. 82–83).
    Abandon,
}

/// Algorithm 6, l. 71–83, given every participating shard's Prepare-OKs.
/// (Replies of Tx-Done, l. 68, are the caller's: the transaction is
/// already committed and only its Commit has to be spread.)
pub fn decide(shards: &[ShardReplies<'_>]) -> Next {
    if shards.iter().any(|s| s.oks.len() < s.replicas / 2 + 1) {
        return Next::Wait;
    }
    let held = || shards.iter().flat_map(|s| s.oks.iter().flatten());
    // l. 74–75: the value accepted at the highest ballot.
    if let Some(p) = held()
        .filter(|p| p.accepted.is_some())
        .max_by_key(|p| p.accepted.unwrap_or(Ballot::MIN))
    {
        return Next::Accept {
            deps: p.deps.clone(),
            abandon: p.abandon,
        };
    }
    // l. 76–78: every shard's answering replicas all pre-accepted with
    // identical dependencies — T may have committed on the fast path (whose
    // quorum is every replica), so its union must be kept.
    let fast = shards.iter().all(|s| {
        let first = s.oks.first().and_then(|p| p.as_ref());
        first.is_some() && s.oks.iter().all(|p| p.as_ref() == first)
    });
    if fast {
        let mut deps: Vec<Dep> = held().flat_map(|p| p.deps.iter().cloned()).collect();
        deps.sort();
        deps.dedup();
        return Next::Accept {
            deps,
            abandon: false,
        };
    }
    if held().next().is_some() {
        return Next::PreAccept;
    }
    Next::Abandon
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tessera_core::ids::{NodeId, ShardId, TxnId};

    fn dep(n: u32) -> Dep {
        Dep {
            txn: TxnId::new(NodeId(100), 0, n),
            shards: Arc::from(vec![ShardId(0)]),
        }
    }

    fn pre(deps: &[u32]) -> Option<Prepared> {
        Some(Prepared {
            accepted: None,
            deps: deps.iter().map(|&n| dep(n)).collect(),
            abandon: false,
        })
    }

    fn acc(ballot: Ballot, deps: &[u32]) -> Option<Prepared> {
        Some(Prepared {
            accepted: Some(ballot),
            deps: deps.iter().map(|&n| dep(n)).collect(),
            abandon: false,
        })
    }

    fn shard(oks: &[Option<Prepared>]) -> ShardReplies<'_> {
        ShardReplies { replicas: 3, oks }
    }

    #[test]
    fn no_majority_of_some_shard_waits() {
        let a = [pre(&[1]), pre(&[1])];
        let b = [None];
        assert_eq!(decide(&[shard(&a), shard(&b)]), Next::Wait);
    }

    #[test]
    fn the_highest_accepted_ballot_wins() {
        let a = [acc(1, &[1]), acc(4, &[2]), pre(&[3])];
        let b = [pre(&[5]), None];
        assert_eq!(
            decide(&[shard(&a), shard(&b)]),
            Next::Accept {
                deps: vec![dep(2)],
                abandon: false
            }
        );
    }

    #[test]
    fn identical_pre_accepts_in_every_shard_keep_the_fast_path_union() {
        let a = [pre(&[1, 2]), pre(&[1, 2])];
        let b = [pre(&[2, 3]), pre(&[2, 3])];
        assert_eq!(
            decide(&[shard(&a), shard(&b)]),
            Next::Accept {
                deps: vec![dep(1), dep(2), dep(3)],
                abandon: false
            }
        );
    }

    #[test]
    fn differing_or_partial_pre_accepts_pre_accept_again() {
        let a = [pre(&[1]), None];
        let b = [pre(&[2]), pre(&[2])];
        assert_eq!(decide(&[shard(&a), shard(&b)]), Next::PreAccept);
        let c = [pre(&[1]), pre(&[2])];
        assert_eq!(decide(&[shard(&c)]), Next::PreAccept);
    }

    /// An abandon accepted by an earlier recovery coordinator is kept.
    #[test]
    fn an_accepted_abandon_is_kept() {
        let mut gone = acc(7, &[]);
        if let Some(p) = gone.as_mut() {
            p.abandon = true;
        }
        let a = [gone, None];
        assert_eq!(
            decide(&[shard(&a)]),
            Next::Accept {
                deps: Vec::new(),
                abandon: true
            }
        );
    }

    /// §3.3: the coordinator's PreAccept reached no replica that answered.
    #[test]
    fn held_nowhere_is_abandoned() {
        let a = [None, None];
        let b = [None, None, None];
        assert_eq!(decide(&[shard(&a), shard(&b)]), Next::Abandon);
    }
}
