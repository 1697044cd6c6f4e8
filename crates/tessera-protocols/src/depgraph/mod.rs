//! The dependency graph and deterministic execution order shared by Rococo
//! (OSDI '14, §3.2) and Janus (OSDI '16, §3.1–3.2): one implementation, two
//! protocols.
//!
//! * [`graph`] — a server's graph `S.dep`: vertices with a status and their
//!   incoming edges; finding a committing transaction's strongly connected
//!   component among its ancestors, or the ancestors it must wait for.
//! * [`order`] — the component in deterministic execution order (Tarjan,
//!   shared with the isolation checker; i-edges first, ties by id).
//! * [`run_piece`] — executing a piece at the store once its place in the
//!   order is fixed.
//! * [`Wakeups`] — which transactions wait for which, and the queue of
//!   those to look at again.

mod blockers;
pub(crate) mod codec;
mod columns;
pub mod graph;
pub mod order;
pub(crate) mod taint;
mod wakeups;

pub(crate) use wakeups::Wakeups;

use std::sync::Arc;
use tessera_core::ids::{Key, ShardId, TxnId, Version};
use tessera_core::storage::{Record, Store};
use tessera_core::txn::{Columns, PieceResult, PieceSpec, ReadObs, Txn, Value};

/// A transaction's status in a dependency graph, ordered as the paper orders
/// it: STARTED < COMMITTING < DECIDED (§3.2).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Status {
    /// Some server has its start request; its dependencies may still grow.
    Started,
    /// Its start phase is over: every edge into it is known (the commit
    /// request carries the union of its start replies).
    Committing,
    /// Its strongly connected component, and so its place in the execution
    /// order, is fixed.
    Decided,
}

/// The type of a dependency edge T′ → T (§3.2): `I` when both conflicting
/// pieces are immediate (the order is already fixed by execution), `D` when
/// both are deferrable (the order may still be changed). An i-path is
/// stronger than a d-path (§3.4), so merging keeps the stronger type.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Edge {
    D,
    I,
}

/// What a message says about one transaction of a dependency graph.
#[derive(Clone, Debug)]
pub struct Vertex {
    pub txn: TxnId,
    pub status: Status,
    /// The shards the transaction involves: where to send a status request.
    pub shards: Arc<[ShardId]>,
    /// Known edges into the transaction, T′ → T. Complete once the status is
    /// at least [`Status::Committing`].
    pub parents: Vec<(TxnId, Edge)>,
    /// For a [`Status::Decided`] transaction whose component has two or more
    /// members: the members in their execution order.
    pub scc: Option<Arc<[TxnId]>>,
}

pub use crate::piece::PieceReply;

pub(crate) fn vertices_size(deps: &[Vertex]) -> usize {
    deps.iter()
        .map(|v| {
            8 + 1
                + 2
                + 4 * v.shards.len()
                + 9 * v.parents.len()
                + v.scc.as_ref().map_or(0, |s| 8 * s.len())
        })
        .sum()
}

pub(crate) fn replies_size(r: &[PieceReply]) -> usize {
    r.iter()
        .map(|r| 3 + r.reads.len() * 20 + r.writes.len() * 12 + 4 + r.output.len())
        .sum()
}

/// Run one piece on the store: read (observations only for keys the
/// transaction has not written itself), execute, install the writes as
/// version `txn` at once: neither Rococo nor Janus aborts a transaction
/// that reached execution.
///
/// With [`Granularity::Column`] the store keeps each declared column's last
/// writer ([`Store::install_columns`]) and a read reports one observation
/// per distinct last writer of the columns it reads
/// ([`Store::column_versions`]): the history of a protocol that orders
/// conflicts per column, checked per column.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_piece(
    store: &mut Store,
    txn: TxnId,
    written: &mut Vec<Key>,
    proc: &Txn,
    spec: &PieceSpec,
    piece: u16,
    inputs: &[Value],
    granularity: Granularity,
) -> PieceReply {
    let columns = (granularity == Granularity::Column).then_some(&*store);
    let (res, obs) = read_and_execute(
        |k| store.get(k),
        columns,
        written,
        proc,
        spec,
        piece,
        inputs,
    );
    if res.user_abort && !res.writes.is_empty() {
        tracing::warn!(
            ?txn,
            name = proc.name(),
            "a piece asked to abort after writing: its writes are installed (Rococo §3.1)"
        );
    }
    let mut keys = Vec::with_capacity(res.writes.len());
    for (k, v) in res.writes {
        debug_assert!(
            spec.writes.iter().any(|a| a.key == k),
            "{} piece {piece} wrote undeclared key {k}",
            proc.name()
        );
        let before = store.get(k).map(|r| r.meta);
        match granularity {
            Granularity::Row => store.install(k, v, txn.version()),
            Granularity::Column => {
                store.install_columns(k, v, txn.version(), spec.write_columns(k))
            }
        }
        if let Some(r) = store.get_mut(k) {
            let cols = spec.writes.iter().find(|a| a.key == k).map(|a| a.columns);
            columns::after_write(before, cols.unwrap_or(Columns::ALL), &mut r.meta);
        }
        if !written.contains(&k) {
            written.push(k);
        }
        keys.push(k);
    }
    PieceReply {
        piece,
        reads: obs,
        writes: keys,
        output: res.output,
        user_abort: res.user_abort,
    }
}

/// Read `spec`'s keys through `get` and run the piece's function on them;
/// the observations skip the keys in `written` (the transaction's own
/// writes), and are per column when `columns` is the store
/// ([`Granularity::Column`]).
fn read_and_execute<'a>(
    get: impl Fn(Key) -> Option<&'a Record>,
    columns: Option<&Store>,
    written: &[Key],
    proc: &Txn,
    spec: &PieceSpec,
    piece: u16,
    inputs: &[Value],
) -> (PieceResult, Vec<ReadObs>) {
    let mut obs = Vec::with_capacity(spec.reads.len());
    let mut values: Vec<Option<&Value>> = Vec::with_capacity(spec.reads.len());
    for a in &spec.reads {
        let (value, version) = match get(a.key) {
            Some(r) => (Some(&r.value), r.meta.version),
            None => (None, Version::INITIAL),
        };
        values.push(value);
        if written.contains(&a.key) {
            continue;
        }
        match columns {
            None => obs.push(ReadObs::row(a.key, version)),
            Some(store) => obs.extend(store.column_versions(a.key, a.columns).into_iter().map(
                |(columns, version)| ReadObs {
                    columns,
                    ..ReadObs::row(a.key, version)
                },
            )),
        }
    }
    (proc.execute(piece as usize, &values, inputs), obs)
}

/// What a version is of, at a store run by [`run_piece`]: a row (Rococo,
/// whose conflicts are per row, §3.4), or each column a piece declares
/// (Janus, whose conflicts are on the data a piece accesses, §3: the
/// authors' code tracks them per column; see `janus::tracker`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Granularity {
    Row,
    Column,
}

/// Run a piece of a read-only transaction on the records `get` shows
/// (Rococo §4.1: the server's finished view): its reads and output, and
/// per read the version of the columns read ([`columns`]), which is what
/// rounds are compared by; a write the piece asks for is dropped (and
/// logged: a read-only transaction must not write).
pub(crate) fn read_piece<'a>(
    get: impl Fn(Key) -> Option<&'a Record>,
    txn: TxnId,
    proc: &Txn,
    spec: &PieceSpec,
    piece: u16,
    inputs: &[Value],
) -> (PieceReply, Vec<Version>) {
    let seen = spec
        .reads
        .iter()
        .map(|a| columns::column_version(get(a.key), a.columns))
        .collect();
    let (res, reads) = read_and_execute(get, None, &[], proc, spec, piece, inputs);
    if !res.writes.is_empty() {
        tracing::error!(?txn, name = proc.name(), "a read-only transaction wrote");
    }
    let reply = PieceReply {
        piece,
        reads,
        writes: Vec::new(),
        output: res.output,
        user_abort: res.user_abort,
    };
    (reply, seen)
}

/// Run one piece on the current data without installing its writes: the
/// execute and validate steps of Rococo's merged pieces (§4.2), which run
/// optimistically and install only at the commit of their OCC+2PC.
pub(crate) fn dry_run(
    store: &Store,
    proc: &Txn,
    spec: &PieceSpec,
    piece: u16,
    inputs: &[Value],
) -> PieceResult {
    let values: Vec<Option<&Value>> = spec
        .reads
        .iter()
        .map(|a| store.get(a.key).map(|r| &r.value))
        .collect();
    proc.execute(piece as usize, &values, inputs)
}
