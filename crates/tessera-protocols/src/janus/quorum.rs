//! The coordinator's choice after PreAccept (Algorithm 1, ll. 4–13): the fast
//! path when every shard has a fast quorum — all `r` replicas (§3.1) — with
//! identical dependencies; otherwise the slow path through Accept once every
//! shard has a majority, with the union of what they returned.

use super::msg::Dep;

/// What to do with the PreAccept replies received so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Path {
    /// Not enough replies yet.
    Wait,
    /// Skip Accept: commit with these dependencies.
    Fast(Vec<Dep>),
    /// Accept these dependencies first (ballot 0).
    Slow(Vec<Dep>),
}

/// `replies[s][i]`: replica `i` of shard `s`'s PreAccept-OK, if received.
/// `patient`: the fast path may still come (a reply is only late); once
/// false, a majority with differing or missing replies takes the slow path.
pub fn choose(replies: &[Vec<Option<Vec<Dep>>>], patient: bool) -> Path {
    let mut fast = true;
    let mut slow_ready = true;
    let mut hopeless = false;
    for group in replies {
        let r = group.len();
        let got: Vec<&Vec<Dep>> = group.iter().flatten().collect();
        let identical = got.windows(2).all(|w| w[0] == w[1]);
        fast &= got.len() == r && identical;
        slow_ready &= got.len() > r / 2;
        hopeless |= !identical;
    }
    let union = || {
        let mut all: Vec<Dep> = replies
            .iter()
            .flatten()
            .flatten()
            .flat_map(|d| d.iter().cloned())
            .collect();
        all.sort_unstable();
        all.dedup_by(|a, b| a.txn == b.txn);
        all
    };
    if fast {
        Path::Fast(union())
    } else if slow_ready && (hopeless || !patient) {
        Path::Slow(union())
    } else {
        Path::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tessera_core::ids::{NodeId, ShardId, TxnId};

    fn d(i: u32) -> Dep {
        Dep {
            txn: TxnId::new(NodeId(9), 0, i),
            shards: Arc::from([ShardId(0)]),
        }
    }

    #[test]
    fn all_replicas_identical_is_the_fast_path() {
        let same = vec![Some(vec![d(1)]), Some(vec![d(1)]), Some(vec![d(1)])];
        let other = vec![Some(vec![d(2)]), Some(vec![d(2)]), Some(vec![d(2)])];
        assert_eq!(choose(&[same, other], true), Path::Fast(vec![d(1), d(2)]));
    }

    #[test]
    fn differing_replicas_take_the_slow_path_with_the_union() {
        let g = vec![Some(vec![d(1)]), Some(vec![d(1), d(3)]), None];
        assert_eq!(choose(&[g], true), Path::Slow(vec![d(1), d(3)]));
    }

    #[test]
    fn a_missing_reply_waits_then_goes_slow() {
        let g = vec![Some(vec![d(1)]), Some(vec![d(1)]), None];
        assert_eq!(choose(std::slice::from_ref(&g), true), Path::Wait);
        assert_eq!(choose(&[g], false), Path::Slow(vec![d(1)]));
    }

    #[test]
    fn no_majority_waits_even_when_impatient() {
        let g = vec![Some(vec![d(1)]), None, None];
        assert_eq!(choose(&[g], false), Path::Wait);
        // One shard ready, the other not: wait for both.
        let ok = vec![Some(vec![]), Some(vec![]), Some(vec![])];
        let short = vec![Some(vec![d(1)]), Some(vec![]), None];
        assert_eq!(choose(&[ok.clone(), short], false), Path::Slow(vec![d(1)]));
        assert_eq!(choose(&[ok, vec![None, None, None]], false), Path::Wait);
    }
}
