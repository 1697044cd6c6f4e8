//! Rococo's offline checker (§3.1): can the runtime always reorder the
//! conflicts of a workload's transactions into a serializable order?
//!
//! From the transaction profiles (tables and columns each piece reads and
//! writes, immediate or deferrable — never rows) it builds the SC-graph of
//! transaction chopping: two instances of each transaction, a vertex per
//! piece, S(ibling)-edges between the pieces of one instance, C(onflict)-
//! edges between pieces of different instances that touch a common column
//! of a common table, one of them writing. It then spreads immediacy along
//! C-edges until no C-edge joins an immediate and a deferrable piece (the
//! runtime could not order such a pair), and looks for SC-cycles — cycles
//! with both S- and C-edges — whose C-edges are all I–I: those interleavings
//! can be fixed by nothing at runtime, and the pieces of one transaction on
//! such a cycle must be merged into one atomic piece (§4.2).
//!
//! A cycle with both kinds of edge exists iff some biconnected component
//! (block) of the graph holds both kinds: in a block, any two edges lie on
//! a common simple cycle. So the check is a block decomposition of the graph
//! of S-edges and I–I C-edges.
//!
//! Read-only transactions are left out (§4.1): Rococo runs them with its
//! read-only protocol, outside the dependency graph.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use tessera_core::ids::TableId;
use tessera_core::txn::{Columns, PieceKind, Procedure};
use tessera_core::workload::{PieceProfile, TxnProfile};
use thiserror::Error;

/// Why a workload cannot be checked.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum OfflineError {
    #[error("the workload lists no transaction profiles to check")]
    NoProfiles,
    #[error(
        "{txn}: piece {piece} is deferrable but feeds piece {consumer}; a piece whose output \
         is another's input must be immediate (§3.1)"
    )]
    DeferrableInput {
        txn: String,
        piece: usize,
        consumer: usize,
    },
    #[error("{txn}: piece {consumer} takes input from piece {piece}, which does not exist")]
    MissingInput {
        txn: String,
        piece: usize,
        consumer: usize,
    },
}

/// A vertex of the SC-graph: piece `piece` of instance `instance` (0 or 1)
/// of transaction `txn` (an index into the checked profiles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScVertex {
    pub txn: usize,
    pub instance: u8,
    pub piece: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScEdgeKind {
    Sibling,
    Conflict,
}

/// The SC-graph of the read-write transactions.
#[derive(Clone, Debug)]
pub struct ScGraph {
    /// The transactions checked (read-only ones excluded).
    pub txns: Vec<TxnProfile>,
    pub vertices: Vec<ScVertex>,
    /// Undirected edges between vertex indices.
    pub edges: Vec<(usize, usize, ScEdgeKind)>,
    /// Per transaction, per piece: immediate after propagation?
    pub immediate: Vec<Vec<bool>>,
}

/// Pieces of one transaction that must run as one merged piece.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    pub txn: String,
    /// The profile's index in [`ScGraph::txns`] (a workload may list
    /// several shapes under one name).
    pub profile: usize,
    pub pieces: Vec<usize>,
}

/// The pieces a deployment runs merged (§4.2), from the checker's verdict:
/// a runtime piece is merged when its transaction's name and its own
/// profile (tables, columns, kind, inputs) match a merged piece of the
/// verdict. Matching by profile rather than index covers every shape of a
/// transaction type (NewOrder has one stock piece per supplying shard, all
/// alike). Only pieces declared immediate are merged: §4.2 notes a merged
/// piece holds immediate pieces only; one made immediate by the checker's
/// propagation alone would still conflict I–D at runtime, which Rococo's
/// tracker already reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeSet {
    by_txn: Vec<(String, Vec<PieceProfile>)>,
}

impl MergeSet {
    /// The merged pieces of a verdict.
    pub fn of(v: &Verdict) -> Self {
        let mut by_txn: Vec<(String, Vec<PieceProfile>)> = Vec::new();
        for m in &v.merges {
            let t = &v.graph.txns[m.profile];
            let slot = match by_txn.iter().position(|(n, _)| *n == t.name) {
                Some(i) => i,
                None => {
                    by_txn.push((t.name.clone(), Vec::new()));
                    by_txn.len() - 1
                }
            };
            for &p in &m.pieces {
                let piece = &t.pieces[p];
                if piece.kind == PieceKind::Immediate && !by_txn[slot].1.contains(piece) {
                    by_txn[slot].1.push(piece.clone());
                }
            }
        }
        MergeSet { by_txn }
    }

    pub fn is_empty(&self) -> bool {
        self.by_txn.is_empty()
    }

    /// Per piece of `proc`: does it run merged? `None` when none does (the
    /// common case costs one name comparison per merged transaction type),
    /// or only one piece would: a piece alone is atomic already.
    pub fn pieces(&self, proc: &dyn Procedure) -> Option<Vec<bool>> {
        let (_, merged) = self.by_txn.iter().find(|(n, _)| n == proc.name())?;
        let profile = TxnProfile::of(proc);
        let out: Vec<bool> = profile.pieces.iter().map(|p| merged.contains(p)).collect();
        (out.iter().filter(|m| **m).count() >= 2).then_some(out)
    }
}

/// The checker's verdict.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub graph: ScGraph,
    /// Read-only transactions left out (§4.1).
    pub excluded: Vec<String>,
    /// Empty when the runtime can reorder every conflict.
    pub merges: Vec<Merge>,
}

fn overlaps(a: &[(TableId, Columns)], b: &[(TableId, Columns)]) -> bool {
    a.iter()
        .any(|(t, c)| b.iter().any(|(u, d)| t == u && c.0 & d.0 != 0))
}

/// Two pieces conflict when they touch a common column of a common table
/// and one of them writes it (§3.1).
pub fn conflict(p: &PieceProfile, q: &PieceProfile) -> bool {
    overlaps(&p.writes, &q.writes) || overlaps(&p.writes, &q.reads) || overlaps(&p.reads, &q.writes)
}

fn validate(t: &TxnProfile) -> Result<(), OfflineError> {
    for (i, p) in t.pieces.iter().enumerate() {
        for &j in &p.inputs {
            let j = j as usize;
            match t.pieces.get(j) {
                None => {
                    return Err(OfflineError::MissingInput {
                        txn: t.name.clone(),
                        piece: j,
                        consumer: i,
                    })
                }
                Some(q) if q.kind == PieceKind::Deferrable => {
                    return Err(OfflineError::DeferrableInput {
                        txn: t.name.clone(),
                        piece: j,
                        consumer: i,
                    })
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Check a workload's transaction profiles.
pub fn check(profiles: &[TxnProfile]) -> Result<Verdict, OfflineError> {
    if profiles.is_empty() {
        return Err(OfflineError::NoProfiles);
    }
    for t in profiles {
        validate(t)?;
    }
    let (txns, ro): (Vec<TxnProfile>, Vec<TxnProfile>) =
        profiles.iter().cloned().partition(|t| !t.read_only());
    let excluded = ro.into_iter().map(|t| t.name).collect();

    // Immediacy spreads along C-edges: between any two pieces of different
    // instances that conflict (two instances of one transaction included).
    let mut immediate: Vec<Vec<bool>> = txns
        .iter()
        .map(|t| {
            t.pieces
                .iter()
                .map(|p| p.kind == PieceKind::Immediate)
                .collect()
        })
        .collect();
    let all: Vec<(usize, usize)> = txns
        .iter()
        .enumerate()
        .flat_map(|(t, p)| (0..p.pieces.len()).map(move |i| (t, i)))
        .collect();
    loop {
        let mut changed = false;
        for &(a, i) in &all {
            for &(b, j) in &all {
                if immediate[a][i] != immediate[b][j]
                    && conflict(&txns[a].pieces[i], &txns[b].pieces[j])
                {
                    immediate[a][i] = true;
                    immediate[b][j] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }

    let mut vertices = Vec::new();
    for (t, p) in txns.iter().enumerate() {
        for instance in 0..2u8 {
            for piece in 0..p.pieces.len() {
                vertices.push(ScVertex {
                    txn: t,
                    instance,
                    piece,
                });
            }
        }
    }
    let mut edges = Vec::new();
    for (x, u) in vertices.iter().enumerate() {
        for (y, v) in vertices.iter().enumerate().skip(x + 1) {
            let same_instance = u.txn == v.txn && u.instance == v.instance;
            if same_instance {
                edges.push((x, y, ScEdgeKind::Sibling));
            } else if conflict(&txns[u.txn].pieces[u.piece], &txns[v.txn].pieces[v.piece]) {
                edges.push((x, y, ScEdgeKind::Conflict));
            }
        }
    }
    let graph = ScGraph {
        txns,
        vertices,
        edges,
        immediate,
    };
    let merges = unreorderable(&graph);
    Ok(Verdict {
        graph,
        excluded,
        merges,
    })
}

/// The pieces to merge: per block of the graph of S-edges and I–I C-edges
/// holding both kinds of edge, the pieces of each instance in it that end
/// one of its C-edges.
fn unreorderable(g: &ScGraph) -> Vec<Merge> {
    let imm = |v: usize| {
        let x = g.vertices[v];
        g.immediate[x.txn][x.piece]
    };
    let kept: Vec<(usize, usize, ScEdgeKind)> = g
        .edges
        .iter()
        .copied()
        .filter(|&(a, b, k)| k == ScEdgeKind::Sibling || (imm(a) && imm(b)))
        .collect();
    // Per transaction, a union-find over its pieces: merged sets.
    let mut sets: Vec<Vec<usize>> = g
        .txns
        .iter()
        .map(|t| (0..t.pieces.len()).collect())
        .collect();
    fn find(s: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while s[r] != r {
            r = s[r];
        }
        s[x] = r;
        r
    }
    for block in blocks(g.vertices.len(), &kept) {
        let kinds: BTreeSet<bool> = block
            .iter()
            .map(|&e| kept[e].2 == ScEdgeKind::Sibling)
            .collect();
        if kinds.len() < 2 {
            continue;
        }
        // The pieces where the cycles leave or enter an instance through a
        // conflict; siblings the cycles merely pass through need not join.
        let mut members: BTreeSet<usize> = BTreeSet::new();
        for &e in &block {
            if kept[e].2 == ScEdgeKind::Conflict {
                members.insert(kept[e].0);
                members.insert(kept[e].1);
            }
        }
        for &a in &members {
            for &b in &members {
                let (u, v) = (g.vertices[a], g.vertices[b]);
                if u.txn == v.txn && u.instance == v.instance {
                    let s = &mut sets[u.txn];
                    let (ra, rb) = (find(s, u.piece), find(s, v.piece));
                    s[ra] = rb;
                }
            }
        }
    }
    let mut out = Vec::new();
    for (t, s) in sets.iter_mut().enumerate() {
        let n = s.len();
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); n];
        for i in 0..n {
            let r = find(s, i);
            groups[r].push(i);
        }
        for grp in groups.into_iter().filter(|g| g.len() > 1) {
            out.push(Merge {
                txn: g.txns[t].name.clone(),
                profile: t,
                pieces: grp,
            });
        }
    }
    out
}

/// Biconnected components (Hopcroft–Tarjan) of an undirected multigraph, as
/// lists of edge indices. Graphs here have tens of vertices: recursion is
/// fine.
fn blocks(n: usize, edges: &[(usize, usize, ScEdgeKind)]) -> Vec<Vec<usize>> {
    let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (i, &(a, b, _)) in edges.iter().enumerate() {
        adj[a].push((b, i));
        adj[b].push((a, i));
    }
    struct St<'a> {
        adj: &'a [Vec<(usize, usize)>],
        disc: Vec<usize>,
        low: Vec<usize>,
        time: usize,
        stack: Vec<usize>,
        out: Vec<Vec<usize>>,
    }
    fn dfs(s: &mut St, u: usize, via: Option<usize>) {
        s.time += 1;
        s.disc[u] = s.time;
        s.low[u] = s.time;
        for k in 0..s.adj[u].len() {
            let (v, e) = s.adj[u][k];
            if Some(e) == via {
                continue;
            }
            if s.disc[v] == 0 {
                s.stack.push(e);
                dfs(s, v, Some(e));
                s.low[u] = s.low[u].min(s.low[v]);
                if s.low[v] >= s.disc[u] {
                    let mut block = Vec::new();
                    while let Some(x) = s.stack.pop() {
                        block.push(x);
                        if x == e {
                            break;
                        }
                    }
                    s.out.push(block);
                }
            } else if s.disc[v] < s.disc[u] {
                s.stack.push(e);
                s.low[u] = s.low[u].min(s.disc[v]);
            }
        }
    }
    let mut s = St {
        adj: &adj,
        disc: vec![0; n],
        low: vec![0; n],
        time: 0,
        stack: Vec::new(),
        out: Vec::new(),
    };
    for u in 0..n {
        if s.disc[u] == 0 {
            dfs(&mut s, u, None);
        }
    }
    s.out
}

impl ScGraph {
    /// The SC-graph in Graphviz DOT: one cluster per transaction instance;
    /// immediate pieces filled grey, deferrable white (as Fig. 4); S-edges
    /// solid, C-edges dotted, I–I C-edges red.
    pub fn to_dot(&self) -> String {
        let mut s = String::from("graph sc {\n  node [shape=circle, style=filled];\n");
        let name =
            |v: &ScVertex| format!("\"{}#{}.p{}\"", self.txns[v.txn].name, v.instance, v.piece);
        for (t, p) in self.txns.iter().enumerate() {
            for instance in 0..2u8 {
                let _ = writeln!(
                    s,
                    "  subgraph \"cluster_{t}_{instance}\" {{\n    label=\"{} #{instance}\";",
                    p.name
                );
                for v in self
                    .vertices
                    .iter()
                    .filter(|v| v.txn == t && v.instance == instance)
                {
                    let fill = if self.immediate[t][v.piece] {
                        "grey"
                    } else {
                        "white"
                    };
                    let _ = writeln!(
                        s,
                        "    {} [label=\"p{}\", fillcolor={fill}];",
                        name(v),
                        v.piece
                    );
                }
                s.push_str("  }\n");
            }
        }
        for &(a, b, k) in &self.edges {
            let (u, v) = (&self.vertices[a], &self.vertices[b]);
            let style = match k {
                ScEdgeKind::Sibling => "solid".to_string(),
                ScEdgeKind::Conflict
                    if self.immediate[u.txn][u.piece] && self.immediate[v.txn][v.piece] =>
                {
                    "dotted, color=red".to_string()
                }
                ScEdgeKind::Conflict => "dotted".to_string(),
            };
            let _ = writeln!(s, "  {} -- {} [style={style}];", name(u), name(v));
        }
        s.push_str("}\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISTRICT: TableId = TableId(1);
    const STOCK: TableId = TableId(2);
    const ORDER_LINE: TableId = TableId(3);
    const NEXT_OID: Columns = Columns::one(0);

    fn piece(
        reads: &[(TableId, Columns)],
        writes: &[(TableId, Columns)],
        kind: PieceKind,
        inputs: &[u16],
    ) -> PieceProfile {
        PieceProfile {
            reads: reads.to_vec(),
            writes: writes.to_vec(),
            kind,
            inputs: inputs.to_vec(),
        }
    }

    /// Fig. 3: p1 takes the next order id (immediate: p3 reads its output),
    /// p2 and p2' reduce stocks, p3 and p3' write order lines.
    fn new_order(stock: PieceKind) -> TxnProfile {
        use PieceKind::*;
        let all = Columns::ALL;
        TxnProfile {
            name: "new-order".into(),
            pieces: vec![
                piece(
                    &[(DISTRICT, NEXT_OID)],
                    &[(DISTRICT, NEXT_OID)],
                    Immediate,
                    &[],
                ),
                piece(&[(STOCK, all)], &[(STOCK, all)], stock, &[]),
                piece(&[(STOCK, all)], &[(STOCK, all)], stock, &[]),
                piece(&[], &[(ORDER_LINE, all)], Deferrable, &[0]),
                piece(&[], &[(ORDER_LINE, all)], Deferrable, &[0]),
            ],
        }
    }

    /// Fig. 4: every SC-cycle has a D–D edge; no merge.
    #[test]
    fn figure_4_new_order_needs_no_merge() {
        let v = check(&[new_order(PieceKind::Deferrable)]).unwrap();
        assert!(v.merges.is_empty(), "{:?}", v.merges);
        assert_eq!(v.graph.vertices.len(), 10);
        assert!(v.graph.immediate[0][0]);
        assert!(!v.graph.immediate[0][1]);
        assert!(v.graph.to_dot().contains("fillcolor=grey"));
    }

    /// §4.2: with the stock piece immediate, p1 and p2 of the two instances
    /// form a cycle of I–I conflicts: p1 and the stock pieces must merge.
    #[test]
    fn immediate_stock_pieces_must_merge_with_the_district_piece() {
        let v = check(&[new_order(PieceKind::Immediate)]).unwrap();
        assert_eq!(
            v.merges,
            [Merge {
                txn: "new-order".into(),
                profile: 0,
                pieces: vec![0, 1, 2]
            }]
        );
        assert!(v.graph.to_dot().contains("color=red"));
    }

    /// Immediacy spreads along C-edges: a deferrable piece that conflicts
    /// with an immediate one becomes immediate, and may then close an
    /// unreorderable cycle.
    #[test]
    fn immediacy_spreads_across_conflicts() {
        use PieceKind::*;
        let a = TableId(5);
        let b = TableId(6);
        let all = Columns::ALL;
        // T: x on a (immediate), y on b (deferrable). U: y' on b immediate.
        let t = TxnProfile {
            name: "t".into(),
            pieces: vec![
                piece(&[(a, all)], &[(a, all)], Immediate, &[]),
                piece(&[(b, all)], &[(b, all)], Deferrable, &[]),
            ],
        };
        let u = TxnProfile {
            name: "u".into(),
            pieces: vec![piece(&[(b, all)], &[(b, all)], Immediate, &[])],
        };
        let v = check(&[t, u]).unwrap();
        assert!(v.graph.immediate[0][1], "t's b piece became immediate");
        assert_eq!(
            v.merges,
            [Merge {
                txn: "t".into(),
                profile: 0,
                pieces: vec![0, 1]
            }]
        );
    }

    /// Columns matter: two pieces on different columns of a table do not
    /// conflict; read-only transactions are left out.
    #[test]
    fn disjoint_columns_and_read_only_transactions_do_not_conflict() {
        use PieceKind::*;
        let t = TableId(7);
        let w = |c: u32| TxnProfile {
            name: format!("w{c}"),
            pieces: vec![
                piece(&[], &[(t, Columns::one(c))], Immediate, &[]),
                piece(&[], &[(TableId(8 + c), Columns::ALL)], Immediate, &[]),
            ],
        };
        let ro = TxnProfile {
            name: "ro".into(),
            pieces: vec![piece(&[(t, Columns::ALL)], &[], Immediate, &[])],
        };
        // Two instances of one w conflict with each other (a cycle through
        // both pieces): w0's pieces must merge; w0 and w1 do not conflict.
        let v = check(&[w(0), w(1), ro]).unwrap();
        assert_eq!(v.excluded, ["ro"]);
        let names: Vec<&str> = v.merges.iter().map(|m| m.txn.as_str()).collect();
        assert_eq!(names, ["w0", "w1"]);
        assert_eq!(v.graph.txns.len(), 2);
    }

    /// A runtime transaction of the profile's shape, to match against a
    /// verdict.
    #[derive(Debug)]
    struct Shaped(Vec<tessera_core::txn::PieceSpec>);

    impl Procedure for Shaped {
        fn name(&self) -> &'static str {
            "new-order"
        }
        fn pieces(&self) -> &[tessera_core::txn::PieceSpec] {
            &self.0
        }
        fn execute(
            &self,
            _: usize,
            _: &[Option<&tessera_core::txn::Value>],
            _: &[tessera_core::txn::Value],
        ) -> tessera_core::txn::PieceResult {
            tessera_core::txn::PieceResult::default()
        }
    }

    fn shaped(stock: PieceKind, stock_pieces: u32) -> Shaped {
        use tessera_core::ids::{Key, ShardId};
        use tessera_core::txn::{Access, PieceSpec};
        let p = |table: TableId, kind, inputs: Vec<u16>, shard| PieceSpec {
            shard: ShardId(shard),
            reads: if table == ORDER_LINE {
                Vec::new()
            } else {
                vec![Access::all(Key::new(table.0, shard.into()))]
            },
            writes: vec![Access::all(Key::new(table.0, shard.into()))],
            kind,
            inputs,
            dynamic: false,
        };
        let mut pieces = vec![p(DISTRICT, PieceKind::Immediate, vec![], 0)];
        pieces.extend((0..stock_pieces).map(|s| p(STOCK, stock, vec![], s)));
        pieces.push(p(ORDER_LINE, PieceKind::Deferrable, vec![0], 0));
        Shaped(pieces)
    }

    /// The merge set matches runtime pieces by profile: every shape of the
    /// transaction (one to three stock pieces here) has its home and stock
    /// pieces merged, never its deferrable insert; a workload that needs no
    /// merge merges nothing.
    #[test]
    fn merge_set_matches_pieces_by_profile() {
        let sample = shaped(PieceKind::Immediate, 2);
        let v = check(&[TxnProfile::of(&sample)]).unwrap();
        assert_eq!(v.merges.len(), 1);
        let set = MergeSet::of(&v);
        for n in 1..=3 {
            assert_eq!(
                set.pieces(&shaped(PieceKind::Immediate, n)),
                Some((0..n + 2).map(|i| i <= n).collect())
            );
        }
        let other = shaped(PieceKind::Deferrable, 2);
        assert_eq!(set.pieces(&other), None, "deferrable stock pieces differ");
        let none = MergeSet::of(&check(&[TxnProfile::of(&other)]).unwrap());
        assert!(none.is_empty());
        assert_eq!(none.pieces(&sample), None);
    }

    #[test]
    fn bad_profiles_are_refused_with_a_reason() {
        assert_eq!(check(&[]).unwrap_err(), OfflineError::NoProfiles);
        let mut t = new_order(PieceKind::Deferrable);
        t.pieces[3].inputs = vec![1];
        let e = check(&[t]).unwrap_err();
        assert!(
            e.to_string()
                .contains("piece 1 is deferrable but feeds piece 3"),
            "{e}"
        );
    }
}
