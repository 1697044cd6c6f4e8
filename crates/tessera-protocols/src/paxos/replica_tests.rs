//! Scenarios driven by hand: a tiny network whose every delivery, disk
//! flush and crash the test decides.

use super::*;
use crate::paxos::kv::{KvCmd, KvOp};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tessera_core::ids::{Key, TxnId, MS};
use tessera_core::node::Effect;

type Msg = PaxosMsg<KvCmd>;

struct Net {
    reps: Vec<Replica<KvCmd>>,
    rngs: Vec<SmallRng>,
    now: Time,
    /// Messages sent and not delivered: (from, to, msg).
    wire: Vec<(usize, usize, Msg)>,
    /// Per replica: records issued, not yet durable (token, record).
    disk: Vec<Vec<(u64, Bytes)>>,
    durable: Vec<Vec<Bytes>>,
    chosen: Vec<BTreeMap<Slot, Vec<KvCmd>>>,
    leading: Vec<bool>,
}

fn cfg() -> PaxosConfig {
    PaxosConfig {
        snapshot_every: 0,
        ..PaxosConfig::default()
    }
}

fn cmd(n: u32) -> KvCmd {
    KvCmd {
        process: n as u64,
        id: TxnId::new(NodeId(9), 0, n),
        op: KvOp::Write(Key::new(0, 1)),
    }
}

fn ids(b: &[KvCmd]) -> Vec<TxnId> {
    b.iter().map(|c| c.id).collect()
}

impl Net {
    fn new(n: usize) -> Self {
        let group: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
        Net {
            reps: group
                .iter()
                .map(|&me| Replica::new(cfg(), me, group.clone(), &[]))
                .collect(),
            rngs: (0..n as u64).map(SmallRng::seed_from_u64).collect(),
            now: 0,
            wire: Vec::new(),
            disk: vec![Vec::new(); n],
            durable: vec![Vec::new(); n],
            chosen: vec![BTreeMap::new(); n],
            leading: vec![false; n],
        }
    }

    /// Step replica `i` with `f`, then collect its effects and outputs.
    fn step(&mut self, i: usize, f: impl FnOnce(&mut Replica<KvCmd>, &mut Ctx<Msg>)) {
        let mut effects = Vec::new();
        {
            let mut ctx = Ctx::new(self.now, NodeId(i as u32), &mut self.rngs[i], &mut effects);
            f(&mut self.reps[i], &mut ctx);
        }
        for e in effects {
            match e {
                Effect::Send { to, msg } => self.wire.push((i, to.0 as usize, msg)),
                Effect::Persist { token, record } => self.disk[i].push((token, record)),
                Effect::Timer { .. }
                | Effect::Done { .. }
                | Effect::Finished { .. }
                | Effect::Charge { .. } => {}
            }
        }
        while let Some(o) = self.reps[i].poll_output() {
            match o {
                Output::Chosen { slot, batch } => {
                    assert!(
                        self.chosen[i].insert(slot, batch).is_none(),
                        "slot {slot} twice"
                    );
                }
                Output::Leading { .. } => self.leading[i] = true,
                Output::Following { .. } => self.leading[i] = false,
                Output::Restore(_) | Output::SnapshotDue { .. } => {}
            }
        }
    }

    fn propose(&mut self, i: usize, c: KvCmd) -> Result<(), NotLeader> {
        let mut res = Ok(());
        self.step(i, |r, ctx| res = r.propose(ctx, c));
        res
    }

    fn chosen_ids(&self, i: usize) -> Vec<(Slot, Vec<TxnId>)> {
        self.chosen[i].iter().map(|(s, b)| (*s, ids(b))).collect()
    }

    /// Flush replica `i`'s disk.
    fn flush(&mut self, i: usize) {
        for (token, rec) in std::mem::take(&mut self.disk[i]) {
            self.durable[i].push(rec);
            self.step(i, |r, ctx| {
                assert!(r.on_persisted(ctx, token));
            });
        }
    }

    /// Deliver messages and flush disks until nothing moves, dropping
    /// messages for which `cut(from, to)` holds.
    fn settle(&mut self, cut: impl Fn(usize, usize) -> bool) {
        for _ in 0..1000 {
            if self.wire.is_empty() && self.disk.iter().all(Vec::is_empty) {
                return;
            }
            for i in 0..self.reps.len() {
                self.flush(i);
            }
            for (from, to, msg) in std::mem::take(&mut self.wire) {
                if !cut(from, to) {
                    self.step(to, |r, ctx| r.on_message(ctx, NodeId(from as u32), msg));
                }
            }
        }
        panic!("the network did not settle");
    }

    /// Advance time by `dt` and tick every replica in `who`.
    fn tick(&mut self, dt: Time, who: &[usize]) {
        self.now += dt;
        for &i in who {
            self.step(i, |r, ctx| {
                let t = r.timer();
                assert!(r.on_timer(ctx, t));
            });
        }
    }

    /// Crash replica `i` (its unflushed records are lost) and restart it.
    fn restart(&mut self, i: usize) {
        self.disk[i].clear();
        self.wire.retain(|(f, t, _)| *f != i && *t != i);
        let group = self.reps[i].group.clone();
        self.reps[i] = Replica::new(cfg(), NodeId(i as u32), group, &self.durable[i]);
        self.chosen[i].clear();
        self.leading[i] = false;
        self.step(i, |r, ctx| r.start(ctx));
    }
}

#[test]
fn first_replica_leads_at_once_and_batches_while_a_batch_is_in_flight() {
    let mut net = Net::new(3);
    for i in 0..3 {
        net.step(i, |r, ctx| r.start(ctx));
    }
    net.settle(|_, _| false);
    assert!(net.leading[0] && net.reps[0].is_ready_leader());
    net.propose(0, cmd(1)).unwrap();
    for n in 2..6 {
        net.propose(0, cmd(n)).unwrap();
    }
    let accepts: Vec<usize> = net
        .wire
        .iter()
        .filter_map(|(_, _, m)| match m {
            PaxosMsg::Accept { batches, .. } => Some(batches[0].len()),
            _ => None,
        })
        .collect();
    assert_eq!(
        accepts,
        vec![1, 1],
        "one batch in flight, to both followers"
    );
    net.settle(|_, _| false);
    let leader = &net.chosen[0];
    assert_eq!(leader.len(), 2, "the four later proposals share one slot");
    assert_eq!(ids(&leader[&2]), ids(&[cmd(2), cmd(3), cmd(4), cmd(5)]));
    assert_eq!(
        net.propose(1, cmd(9)),
        Err(NotLeader {
            leader: Some(NodeId(0))
        })
    );
}

#[test]
fn no_prepare_before_the_candidates_own_promise_is_durable() {
    let mut net = Net::new(3);
    net.step(0, |r, ctx| r.start(ctx));
    assert!(net.wire.is_empty(), "Prepare waits for the disk");
    net.flush(0);
    let prepares = |net: &Net| -> Vec<Ballot> {
        net.wire
            .iter()
            .filter_map(|(_, _, m)| match m {
                PaxosMsg::Prepare { ballot, .. } => Some(*ballot),
                _ => None,
            })
            .collect()
    };
    let first = prepares(&net);
    assert_eq!(first.len(), 2);
    // A crash once the ballot is out: the restarted replica never uses it
    // again, and waits for a timeout before it stands.
    net.restart(0);
    net.flush(0);
    assert!(net.wire.is_empty());
    net.tick(100 * MS, &[0]);
    net.flush(0);
    let second = prepares(&net);
    assert_eq!(second.len(), 2);
    assert!(second[0] > first[0], "{:?} then {:?}", first[0], second[0]);
}

/// A follower holding a value of an older ballot at a slot the new leader
/// filled differently must not take the commit point as a licence to apply
/// its own value: it fetches the chosen one.
#[test]
fn a_follower_learns_only_values_of_the_leaders_ballot() {
    let mut net = Net::new(3);
    for i in 0..3 {
        net.step(i, |r, ctx| r.start(ctx));
    }
    net.settle(|_, _| false);
    // Replica 0 proposes X; only replica 2 hears it, and 0 crashes before
    // its own record is durable.
    net.propose(0, cmd(1)).unwrap();
    for (from, to, msg) in std::mem::take(&mut net.wire) {
        if to == 2 {
            net.step(2, |r, ctx| r.on_message(ctx, NodeId(from as u32), msg));
        }
    }
    assert_eq!(net.reps[2].acc.entries[&1].batch[0].id, cmd(1).id);
    net.restart(0);
    // Replica 1 takes over with replica 0 alone; replica 2 is cut off.
    let cut2 = |f: usize, t: usize| f == 2 || t == 2;
    net.tick(100 * MS, &[1]);
    net.settle(cut2);
    assert!(net.leading[1], "replica 1 leads");
    net.propose(1, cmd(2)).unwrap();
    net.settle(cut2);
    let chosen_at_1: Vec<TxnId> = net.chosen[1].values().flat_map(|b| ids(b)).collect();
    assert_eq!(
        chosen_at_1,
        vec![cmd(2).id],
        "slot 1 got a no-op or Y, never X"
    );
    // Replica 2 rejoins and hears the commit point.
    net.tick(5 * MS, &[1]);
    net.settle(|_, _| false);
    assert_eq!(
        net.chosen_ids(2),
        net.chosen_ids(1),
        "replica 2 applies what was chosen"
    );
    assert!(net.chosen[2]
        .values()
        .all(|b| b.iter().all(|c| c.id != cmd(1).id)));
}

#[test]
fn a_stale_leader_steps_down_on_a_nack() {
    let mut net = Net::new(3);
    for i in 0..3 {
        net.step(i, |r, ctx| r.start(ctx));
    }
    net.settle(|_, _| false);
    // Replica 0 is cut off while replica 1 wins a higher ballot.
    let cut0 = |f: usize, t: usize| f == 0 || t == 0;
    net.tick(100 * MS, &[1]);
    net.settle(cut0);
    assert!(net.leading[1] && net.leading[0], "two believe they lead");
    // Back together: 0's heartbeat is refused and it follows.
    net.tick(5 * MS, &[0]);
    net.settle(|_, _| false);
    assert!(!net.leading[0] && net.leading[1]);
    assert!(net.propose(0, cmd(3)).is_err());
}

#[test]
fn timeouts_scale_with_the_round_trip() {
    let lan = PaxosConfig::for_round_trip(MS / 10);
    assert_eq!(lan.retransmit, PaxosConfig::default().retransmit);
    let geo = PaxosConfig::for_round_trip(243 * MS);
    assert!(geo.retransmit > 243 * MS && geo.election_timeout > 4 * geo.retransmit);
    assert!(geo.heartbeat < geo.election_timeout / 4);
}
