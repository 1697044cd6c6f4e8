//! Ballots: the proposal numbers of Paxos (Lamport, "Paxos made simple").
//!
//! A ballot is a round number made unique by the proposing node's id, and
//! ballots are totally ordered by `(round, node)`. A replica that starts an
//! election picks a round above every ballot it has seen, and makes its own
//! promise durable before it sends any Prepare: a restarted node can never
//! reuse a ballot of an earlier incarnation (two values under one ballot
//! would break Paxos' safety argument).

use tessera_core::ids::NodeId;

/// A Paxos ballot; the leader of ballot `b` is `b.node`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Ballot {
    pub round: u64,
    pub node: NodeId,
}

impl Ballot {
    /// Below every real ballot: nothing promised, nothing accepted.
    pub const ZERO: Ballot = Ballot {
        round: 0,
        node: NodeId(0),
    };

    /// The smallest ballot of `node` above `seen`.
    pub fn next_after(seen: Ballot, node: NodeId) -> Ballot {
        Ballot {
            round: seen.round + 1,
            node,
        }
    }
}

impl Default for Ballot {
    fn default() -> Self {
        Ballot::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ballots_order_by_round_then_node() {
        let a = Ballot {
            round: 1,
            node: NodeId(2),
        };
        let b = Ballot {
            round: 1,
            node: NodeId(3),
        };
        let c = Ballot {
            round: 2,
            node: NodeId(0),
        };
        assert!(Ballot::ZERO < a && a < b && b < c);
        let n = Ballot::next_after(c, NodeId(1));
        assert!(n > c && n.node == NodeId(1));
    }
}
