//! Rococo's wire codec: every message kind round trips, cut, flipped or
//! random bytes are errors, never panics (the shared laws,
//! [`crate::codec_laws`]), and what a server would index with is checked.

use super::*;
use crate::depgraph::{Edge, PieceReply, Status, Vertex};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::Arc;
use tessera_core::ids::{ShardId, TxnId};
use tessera_core::txn::Txn;
use tessera_core::workload::{ClientSlot, Workload};
use tessera_workloads::{Tpcc, TpccConfig};

/// Rococo §5.4's TPC-C split by district and item, small: its procedures
/// have immediate and deferrable pieces and pieces fed by others.
const SHARDS: u32 = 3;

fn tpcc() -> Tpcc {
    Tpcc::new(TpccConfig {
        customers: 30,
        items: 200,
        ..TpccConfig::rococo(SHARDS, 4)
    })
    .unwrap()
}

fn cx() -> DecodeCx {
    DecodeCx::new(Arc::new(tpcc()) as Arc<dyn Workload>)
}

fn proc(seed: u64, home: u32) -> Txn {
    tpcc()
        .generator(ClientSlot {
            id: 0,
            home: ShardId(home),
        })
        .next(&mut SmallRng::seed_from_u64(seed))
}

fn arb_txn() -> impl Strategy<Value = TxnId> + Clone {
    any::<u64>().prop_map(TxnId)
}

fn arb_value() -> impl Strategy<Value = Value> {
    proptest::collection::vec(any::<u8>(), 0..24).prop_map(Value::from)
}

/// A start request of some of a TPC-C procedure's pieces (those in
/// `mask`), each with as many inputs as it declares.
fn arb_start() -> impl Strategy<Value = Start> {
    (
        arb_txn(),
        any::<u64>(),
        0..SHARDS,
        any::<u64>(),
        arb_value(),
    )
        .prop_map(|(txn, seed, home, mask, v)| {
            let proc = proc(seed, home);
            let pieces: Vec<u16> = (0..proc.pieces().len())
                .filter(|i| (mask >> (i % 64)) & 1 == 1)
                .map(|i| i as u16)
                .collect();
            let inputs = pieces
                .iter()
                .map(|&p| vec![v.clone(); proc.pieces()[p as usize].inputs.len()])
                .collect();
            Start {
                txn,
                proc,
                pieces,
                inputs,
            }
        })
}

fn arb_replies() -> impl Strategy<Value = Vec<PieceReply>> {
    proptest::collection::vec(crate::codec_laws::arb_reply(), 0..4)
}

fn arb_vertices() -> impl Strategy<Value = Vec<Vertex>> {
    let status = prop_oneof![
        Just(Status::Started),
        Just(Status::Committing),
        Just(Status::Decided)
    ];
    let edge = prop_oneof![Just(Edge::D), Just(Edge::I)];
    let vertex = (
        arb_txn(),
        status,
        proptest::collection::vec(0..SHARDS, 1..4),
        proptest::collection::vec((arb_txn(), edge), 0..4),
        proptest::option::of(proptest::collection::vec(arb_txn(), 0..4)),
    )
        .prop_map(|(txn, status, shards, parents, scc)| Vertex {
            txn,
            status,
            shards: shards.into_iter().map(ShardId).collect(),
            parents,
            scc: scc.map(Arc::from),
        });
    proptest::collection::vec(vertex, 0..5)
}

/// Merged pieces' request with one output per piece.
fn arb_merged() -> impl Strategy<Value = (Start, Vec<Value>)> {
    (arb_start(), arb_value()).prop_map(|(req, v)| {
        let outputs = vec![v; req.pieces.len()];
        (req, outputs)
    })
}

/// Every kind of [`Msg`].
fn arb_msg() -> impl Strategy<Value = Msg> {
    let t = arb_txn();
    prop_oneof![
        arb_start().prop_map(Msg::Start),
        (
            t.clone(),
            arb_replies(),
            proptest::collection::vec(any::<u16>(), 0..5),
            arb_vertices()
        )
            .prop_map(|(txn, immediate, received, deps)| Msg::StartOk {
                txn,
                immediate,
                received,
                deps
            }),
        (t.clone(), arb_vertices()).prop_map(|(txn, deps)| Msg::Commit {
            txn,
            deps: Arc::new(deps)
        }),
        (t.clone(), arb_replies()).prop_map(|(txn, deferred)| Msg::CommitOk { txn, deferred }),
        t.clone().prop_map(|txn| Msg::Committed { txn }),
        t.clone().prop_map(|txn| Msg::Gone { txn }),
        t.clone().prop_map(|txn| Msg::Inquire { txn }),
        (t.clone(), arb_vertices()).prop_map(|(txn, deps)| Msg::InquireOk { txn, deps }),
        t.clone().prop_map(|txn| Msg::NotHere { txn }),
        (any::<u32>(), arb_start()).prop_map(|(tag, s)| Msg::RoRead {
            txn: s.txn,
            tag,
            proc: s.proc,
            pieces: s.pieces,
            inputs: s.inputs
        }),
        (
            t.clone(),
            any::<u32>(),
            arb_replies(),
            proptest::collection::vec(proptest::collection::vec(any::<u64>(), 0..3), 0..3)
        )
            .prop_map(|(txn, tag, results, seen)| Msg::RoReadOk {
                txn,
                tag,
                results,
                seen: seen
                    .into_iter()
                    .map(|s| s.into_iter().map(Version).collect())
                    .collect()
            }),
        arb_start().prop_map(Msg::OccExecute),
        (t.clone(), arb_replies()).prop_map(|(txn, results)| Msg::OccExecuteOk { txn, results }),
        arb_merged().prop_map(|(req, outputs)| Msg::OccCommit { req, outputs }),
        (any::<u32>(), arb_merged()).prop_map(|(attempt, (req, outputs))| Msg::OccPrepare {
            attempt,
            req,
            outputs
        }),
        (t.clone(), any::<u32>(), any::<bool>()).prop_map(|(txn, attempt, ok)| Msg::OccVote {
            txn,
            attempt,
            ok
        }),
        (any::<u32>(), any::<bool>(), any::<u32>(), arb_start()).prop_map(
            |(attempt, commit, node, req)| Msg::OccDecide {
                attempt,
                commit,
                reply_to: NodeId(node),
                req
            }
        ),
        (t.clone(), any::<u32>()).prop_map(|(txn, attempt)| Msg::OccDecideOk { txn, attempt }),
        t.clone().prop_map(|txn| Msg::OccRetry { txn }),
        (t.clone(), any::<u32>()).prop_map(|(txn, attempt)| Msg::OccAsk { txn, attempt }),
        (t.clone(), any::<u32>()).prop_map(|(txn, attempt)| Msg::OccAbort { txn, attempt }),
        (t.clone(), any::<u64>()).prop_map(|(txn, nonce)| Msg::AskHeld { txn, nonce }),
        (t, any::<u64>()).prop_map(|(txn, nonce)| Msg::Held { txn, nonce }),
    ]
}

crate::codec_laws::law_tests!(Msg, arb_msg(), cx(), tag::HELD);

/// A start request whose every piece is sent with its inputs.
fn full_start() -> Start {
    // Find a procedure with a piece fed by another (TPC-C's NewOrder or
    // Payment by name), so that input counts are exercised.
    let proc = (0..200u64)
        .map(|s| proc(s, 0))
        .find(|p| p.pieces().iter().any(|s| !s.inputs.is_empty()))
        .expect("TPC-C has pieces with inputs");
    let pieces: Vec<u16> = (0..proc.pieces().len() as u16).collect();
    let inputs = proc
        .pieces()
        .iter()
        .map(|s| vec![Value::from_static(b"in"); s.inputs.len()])
        .collect();
    Start {
        txn: TxnId(9),
        proc,
        pieces,
        inputs,
    }
}

fn decode_err(msg: &Msg) -> String {
    Msg::from_bytes(&msg.to_bytes().unwrap(), &cx())
        .unwrap_err()
        .to_string()
}

/// A piece the procedure does not have, or a piece with other inputs than
/// it declares, is refused: the server would index the procedure's pieces
/// and the piece function its inputs with them.
#[test]
fn pieces_and_inputs_that_do_not_fit_the_procedure_are_refused() {
    let ok = full_start();
    assert!(Msg::from_bytes(&Msg::Start(ok.clone()).to_bytes().unwrap(), &cx()).is_ok());

    let mut bad = ok.clone();
    bad.pieces[0] = ok.proc.pieces().len() as u16;
    let err = decode_err(&Msg::Start(bad));
    assert!(err.contains("piece index"), "{err}");

    let i = ok
        .proc
        .pieces()
        .iter()
        .position(|s| !s.inputs.is_empty())
        .unwrap();
    let mut bad = ok.clone();
    bad.inputs[i].pop();
    let err = decode_err(&Msg::OccExecute(bad));
    assert!(err.contains("piece inputs"), "{err}");

    let err = decode_err(&Msg::OccCommit {
        outputs: vec![Value::new(); ok.pieces.len() + 1],
        req: ok,
    });
    assert!(err.contains("merged outputs"), "{err}");
}

/// A vertex on a shard the workload does not have, or on no shard, is
/// refused: a server inquires a leader of its shards, by index.
#[test]
fn vertices_on_unknown_or_no_shards_are_refused() {
    let vertex = |shards: &[u32]| Vertex {
        txn: TxnId(3),
        status: Status::Committing,
        shards: shards.iter().copied().map(ShardId).collect(),
        parents: vec![(TxnId(2), Edge::I)],
        scc: None,
    };
    let ok = Msg::InquireOk {
        txn: TxnId(3),
        deps: vec![vertex(&[0, SHARDS - 1])],
    };
    assert!(Msg::from_bytes(&ok.to_bytes().unwrap(), &cx()).is_ok());
    let err = decode_err(&Msg::Commit {
        txn: TxnId(3),
        deps: Arc::new(vec![vertex(&[1, SHARDS])]),
    });
    assert!(err.contains("vertex shard"), "{err}");
    let err = decode_err(&Msg::StartOk {
        txn: TxnId(3),
        immediate: Vec::new(),
        received: vec![0],
        deps: vec![vertex(&[])],
    });
    assert!(err.contains("vertex shards"), "{err}");
}

#[test]
fn forged_counts_and_unknown_tags_are_refused() {
    // A Commit claiming 2^40 vertices.
    let mut head = vec![tag::COMMIT];
    head.extend_from_slice(&1u64.to_le_bytes());
    crate::codec_laws::refuses_forged_count_and_unknown_tag::<Msg>(&head, &cx());
    // A vertex status and an edge type out of range.
    let msg = Msg::InquireOk {
        txn: TxnId(1),
        deps: vec![Vertex {
            txn: TxnId(2),
            status: Status::Decided,
            shards: Arc::from([ShardId(0)]),
            parents: vec![(TxnId(1), Edge::D)],
            scc: None,
        }],
    };
    let bytes = msg.to_bytes().unwrap().to_vec();
    let status_at = 1 + 8 + 1 + 8;
    assert_eq!(bytes[status_at], 2);
    let mut b = bytes.clone();
    b[status_at] = 3;
    assert!(matches!(
        Msg::from_bytes(&b, &cx()),
        Err(DecodeError::UnknownTag { tag: 3, .. })
    ));
    let edge_at = bytes.len() - 2;
    let mut b = bytes;
    b[edge_at] = 2;
    assert!(matches!(
        Msg::from_bytes(&b, &cx()),
        Err(DecodeError::UnknownTag { tag: 2, .. })
    ));
}

/// A start request needs the workload to rebuild its procedure: without
/// one it is an error, not a panic.
#[test]
fn procedures_need_the_workload() {
    let bytes = Msg::Start(full_start()).to_bytes().unwrap();
    assert!(Msg::from_bytes(&bytes, &DecodeCx::default()).is_err());
    assert!(Msg::from_bytes(&bytes, &cx()).is_ok());
}
