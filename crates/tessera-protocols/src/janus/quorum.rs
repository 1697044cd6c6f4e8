//! The coordinator's choice after PreAccept (Algorithm 1, ll. 4–13): the fast
//! path when every shard has a fast quorum — all `r` replicas (§3.1) — with
//! identical dependencies; otherwise the slow path through Accept once every
//! shard has a majority, with the union of what they returned.

use super::msg::Dep;
use tessera_core::ids::{NodeId, Time};
use tessera_core::FastMap;

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

/// A coordinator's estimates of each replica's PreAccept round trip, a
/// moving average (7/8 old, 1/8 new) of what it measured.
#[derive(Default)]
pub struct RoundTrips(FastMap<NodeId, Time>);

impl RoundTrips {
    /// A PreAccept-OK from `node` came `sample` after the PreAccept went.
    pub fn observe(&mut self, node: NodeId, sample: Time) {
        let e = self.0.entry(node).or_insert(sample);
        *e = *e - *e / 8 + sample / 8;
    }

    pub fn get(&self, node: NodeId) -> Option<Time> {
        self.0.get(&node).copied()
    }
}

/// Whether waiting for the fast quorum's missing replies may pay, once
/// every shard has a majority whose replies agree (`choose` waits): the
/// fast path commits when the last of them comes, the slow path about one
/// majority round trip (Accept) from `now`. Wait only when the time the
/// fast path may save is more than the time it costs when the late reply
/// differs (as likely, break-even at even odds). Algorithm 1 does not say
/// how long to wait; over three sites, waiting for the farthest replica
/// whenever the two nearer ones agreed made a slow path that failed it
/// commit one far round trip late (Seoul: 365 instead of 244 ms), and every
/// transaction waits for its ancestors' commits (Algorithm 4, l. 41):
/// `docs/results/janus.md`, *session 25*. Unknown estimates wait, as
/// before.
///
/// `groups[s]`: shard `s`'s replicas; `replies[s][i]` as for `choose`;
/// `sent`: when the PreAccepts went.
pub fn fast_path_pays(
    groups: &[Vec<NodeId>],
    replies: &[Vec<Option<Vec<Dep>>>],
    rtts: &RoundTrips,
    sent: Time,
    now: Time,
) -> bool {
    let mut fast_at = now;
    let mut accept_rtt: Time = 0;
    for (g, got) in groups.iter().zip(replies) {
        let mut est = Vec::with_capacity(g.len());
        for (i, &n) in g.iter().enumerate() {
            let Some(rtt) = rtts.get(n) else {
                return true;
            };
            if got[i].is_none() {
                fast_at = fast_at.max(sent + rtt);
            }
            est.push(rtt);
        }
        est.sort_unstable();
        accept_rtt = accept_rtt.max(est[g.len() / 2]);
    }
    let slow_at = now + accept_rtt;
    slow_at.saturating_sub(fast_at) > fast_at - now
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

    /// Replicas at round trips 1, 122 and 243 ms (Seoul's coordinator
    /// over Janus's three regions) and 1, 122, 140 ms (Oregon's).
    fn rtts(far: Time) -> (Vec<Vec<NodeId>>, RoundTrips) {
        use tessera_core::ids::MS;
        let g = vec![NodeId(0), NodeId(1), NodeId(2)];
        let mut r = RoundTrips::default();
        for (n, t) in g.iter().zip([MS, 122 * MS, far * MS]) {
            r.observe(*n, t);
        }
        (vec![g], r)
    }

    #[test]
    fn the_fast_path_is_awaited_only_where_it_may_pay() {
        use tessera_core::ids::MS;
        let agree = vec![Some(vec![d(1)]), Some(vec![d(1)]), None];
        let replies = [agree];
        // Seoul: the fast path would commit at 243 ms, the slow path at
        // 244: nothing to win, a far round trip to lose.
        let (g, r) = rtts(243);
        assert!(!fast_path_pays(&g, &replies, &r, 0, 122 * MS));
        // Oregon: 140 against 244 ms, 18 ms at stake.
        let (g, r) = rtts(140);
        assert!(fast_path_pays(&g, &replies, &r, 0, 122 * MS));
        // A replica never measured: wait, as without estimates.
        let (g, _) = rtts(243);
        assert!(fast_path_pays(
            &g,
            &replies,
            &RoundTrips::default(),
            0,
            122 * MS
        ));
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
