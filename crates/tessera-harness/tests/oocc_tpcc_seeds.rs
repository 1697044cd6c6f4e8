//! TPC-C (OOCC §VIII.E, Fig. 12) on the memory-node protocols (OOCC,
//! FORD-style OCC, DrTM, DSLR) under the simulator's RDMA preset, with
//! held-back messages and clock drift within OOCC's bound: NewOrder inserts
//! ORDER, NEW-ORDER and ORDER-LINE rows into free slots, Delivery deletes
//! NEW-ORDER rows and reads the (possibly absent) one at the district's
//! cursor. Every history is checked for strict serializability and the final
//! memory nodes for the consistency conditions of clause 3.3.2; over the
//! seeds every transaction type commits, some NewOrder rolls back (clause
//! 2.4.2.3) and some insert lands.
//!
//! `reads_of_absent_keys_are_validated_against_inserts` isolates the
//! phantom case TPC-C cannot show (see there).
//!
//! The runs are short (2 ms measured) and small (2 warehouses of 4
//! districts, so that 16 clients conflict on districts and stock) so that
//! the default 200 seeds per protocol stay within CI's budget.
//! `TESSERA_SEEDS` sets the number of seeds.

mod rdma;

use rand::rngs::SmallRng;
use rand::Rng;
use std::collections::BTreeSet;
use std::sync::Arc;
use tessera_core::history::Outcome;
use tessera_core::ids::{Version, MS};
use tessera_core::storage::Store;
use tessera_core::txn::{Access, PieceKind, PieceResult, PieceSpec, Procedure, Txn, Value};
use tessera_core::workload::{ClientSlot, TxnGenerator, Workload};
use tessera_core::{Key, ShardId};
use tessera_harness::{registry, BenchSpec, WorkloadSpec};
use tessera_workloads::tpcc::RemoteNewOrder;
use tessera_workloads::{TpccConfig, YcsbConfig};

fn config() -> TpccConfig {
    TpccConfig {
        shards: 2,
        warehouses: 2,
        districts: 4,
        customers: 30,
        items: 200,
        remote_neworder: RemoteNewOrder::PerTxn(10.0),
        remote_payment: 15.0,
        ..TpccConfig::default()
    }
}

/// 6 ms, of which the last 3.5 ms start no transaction: the consistency
/// conditions need quiescent memory nodes, and a Payment whose customer is
/// remote commits with a WRITE to each of two memory nodes, so a run cut
/// while one is in flight breaks condition 8 (DSLR's queueing made such a
/// cut once in 200 seeds with a 0.5 ms cool-down).
fn spec(protocol: &str, seed: u64) -> BenchSpec {
    let mut s = rdma::spec(protocol, WorkloadSpec::Tpcc(config()), seed, 6 * MS);
    s.cooldown = 3 * MS + MS / 2;
    s
}

fn replay(protocol: &str, seed: u64) -> String {
    format!(
        "tessera bench --runtime sim --net rdma --reorder 0.05 --drift-ppm 1000 --protocol {protocol} \
         --workload tpcc --shards 2 --warehouses 2 --districts 4 --customers 30 --items 200 \
         --remote-neworder 10 --remote-payment 15 --clients 16 --duration 6ms --warmup 500us \
         --cooldown 3500us --seed {seed} --check (reorder delay 30us)"
    )
}

fn many_seeds(protocol: &str) {
    let mut types = BTreeSet::new();
    let mut user_aborts = 0;
    let mut new_orders = 0.0;
    for seed in 0..rdma::seeds(200) {
        let s = spec(protocol, seed);
        let out = rdma::run_checked(&s, &replay(protocol, seed));
        let violations = out.consistency.as_ref().expect("tpcc has conditions");
        assert!(
            violations.is_empty(),
            "{protocol} seed {seed}: {violations:#?}\nreplay: {}",
            replay(protocol, seed)
        );
        assert!(
            out.row.committed > 20,
            "{protocol} seed {seed}: {} committed\nreplay: {}",
            out.row.committed,
            replay(protocol, seed)
        );
        new_orders += out.row.neworder_tps.unwrap_or(0.0);
        for t in &out.row.by_type {
            if t.commit_rate > 0.0 {
                types.insert(t.name.clone());
            }
            if t.name == "neworder" {
                user_aborts += t.user_aborts;
            }
        }
    }
    // A committed NewOrder inserted its rows (the consistency conditions
    // then found them on the memory nodes).
    assert!(new_orders > 0.0, "{protocol}: no NewOrder committed");
    for t in [
        "neworder",
        "payment",
        "orderstatus",
        "delivery",
        "stocklevel",
    ] {
        assert!(types.contains(t), "{protocol}: no {t} committed: {types:?}");
    }
    if rdma::seeds(200) >= 50 {
        assert!(user_aborts > 0, "{protocol}: no NewOrder rolled back");
    }
}

#[test]
fn tpcc_oocc() {
    many_seeds("oocc");
}

#[test]
fn tpcc_ford_occ() {
    many_seeds("ford-occ");
}

#[test]
fn tpcc_drtm() {
    many_seeds("drtm");
}

#[test]
fn tpcc_dslr() {
    many_seeds("dslr");
}

/// Write skew through absent keys: transaction `(p, side)` reads key
/// `2p + side`, then (a piece fed by the read) inserts key `2p + 1 - side`
/// (table 1 starts empty). Two
/// transactions of one pair that both read before either commits each read
/// the key the other inserts as absent: unless a read of an absent key is
/// validated (or locked) on the slot the insert takes, both commit and the
/// checker finds the cycle. TPC-C cannot show this: each of its reads of a
/// possibly missing row also reads a counter the inserter writes.
struct AbsentPairs {
    pairs: u64,
}

#[derive(Debug)]
struct PairTxn(Vec<PieceSpec>);

impl Procedure for PairTxn {
    fn name(&self) -> &'static str {
        "pair"
    }
    fn pieces(&self) -> &[PieceSpec] {
        &self.0
    }
    fn execute(&self, piece: usize, _: &[Option<&Value>], _: &[Value]) -> PieceResult {
        let writes = self.0[piece]
            .writes
            .iter()
            .map(|a| (a.key, Value::from_static(b"in")))
            .collect();
        PieceResult {
            writes,
            output: Value::from_static(b"read"),
            ..PieceResult::default()
        }
    }
}

struct Pairs(u64);

impl TxnGenerator for Pairs {
    fn next(&mut self, rng: &mut SmallRng) -> Txn {
        let p = rng.random_range(0..self.0);
        let side = rng.random_range(0..2u64);
        let piece = |reads, writes, inputs| PieceSpec {
            shard: ShardId(0),
            reads,
            writes,
            kind: PieceKind::Immediate,
            inputs,
            dynamic: false,
        };
        // The insert waits for the read's output: it locks in a later
        // round than the read, so only validation can see the conflict.
        Arc::new(PairTxn(vec![
            piece(vec![Access::all(Key::new(1, 2 * p + side))], vec![], vec![]),
            piece(
                vec![],
                vec![Access::all(Key::new(1, 2 * p + 1 - side))],
                vec![0],
            ),
        ]))
    }
}

impl Workload for AbsentPairs {
    fn name(&self) -> &'static str {
        "absent-pairs"
    }
    fn shards(&self) -> u32 {
        1
    }
    /// Room for the inserts: the region has twice the loaded records.
    fn load(&self, _: ShardId, store: &mut Store) {
        for r in 0..4 * self.pairs {
            store.load(Key::new(0, r), Value::from_static(b"filler"));
        }
    }
    fn generator(&self, _: ClientSlot) -> Box<dyn TxnGenerator> {
        Box::new(Pairs(self.pairs))
    }
}

/// Every memory-node protocol keeps absent-key reads serializable against
/// concurrent inserts (FORD §4.2's phantom-free point reads); 50 seeds
/// each by default. A real test: with the validation READs of absent keys
/// left out of OOCC's `checks`, `oocc` fails at seed 0 (three G2 cycles).
#[test]
fn reads_of_absent_keys_are_validated_against_inserts() {
    for protocol in ["oocc", "ford-occ", "drtm", "dslr"] {
        let entry = registry::find(protocol).unwrap();
        let mut absent_reads = 0;
        for seed in 0..rdma::seeds(200) / 4 {
            // The spec gives the deployment one shard; the workload is ours.
            let ycsb = YcsbConfig {
                partitions: 1,
                ..YcsbConfig::default()
            };
            let s = rdma::spec(protocol, WorkloadSpec::Ycsb(ycsb), seed, 3 * MS);
            let raw = entry
                .run(&s, Arc::new(AbsentPairs { pairs: 200 }))
                .unwrap_or_else(|e| panic!("{protocol} seed {seed}: {e:#}"));
            let mut history = tessera_core::history::History::default();
            for c in &raw.clients {
                history.txns.extend(c.history.iter().cloned());
            }
            let report = tessera_checker::check(&history, entry.level(&s));
            assert!(report.ok, "{protocol} seed {seed}: {report}");
            absent_reads += history
                .txns
                .iter()
                .filter(|t| t.outcome == Outcome::Committed)
                .flat_map(|t| &t.reads)
                .filter(|r| r.key.table.0 == 1 && r.version == Version::INITIAL)
                .count();
        }
        assert!(
            absent_reads > 100,
            "{protocol}: {absent_reads} absent reads"
        );
    }
}
