//! The bookkeeping of a walk that proves vertices clear: Tarjan's
//! algorithm over the ancestors, where a vertex is clear when its strongly
//! connected component is left without having met anything that taints
//! it. Shared by [`super::graph::DepGraph`]'s shortcut walk (tainted:
//! something STARTED may be behind) and Janus's `blocker` walk (tainted:
//! something unprocessed here may be behind, [`crate::janus`]).

use tessera_core::ids::TxnId;
use tessera_core::FastMap;

/// The index of a vertex met but not walked behind.
pub(crate) const NONE: u32 = u32::MAX;

/// What such a walk knows of a vertex it has met: its Tarjan index
/// ([`NONE`] for vertices passed over) and whether it is tainted. One map
/// rather than a seen set, an index map and a tainted set: a single
/// look-up per vertex met (the sets' inserts were 31% of a janus-micro-wan
/// zipf 0.7 run, `perf`).
#[derive(Clone, Copy)]
pub(crate) struct Mark {
    pub index: u32,
    pub tainted: bool,
}

/// Tarjan's stack, each vertex with its index, and whether each index is
/// still on it.
#[derive(Default)]
pub(crate) struct Tarjan {
    stack: Vec<(TxnId, u32)>,
    on_stack: Vec<bool>,
}

impl Tarjan {
    /// Walk behind `v`: its mark, with a new index.
    pub fn push(&mut self, v: TxnId) -> Mark {
        let index = u32::try_from(self.on_stack.len()).expect("fewer than 2^32 vertices walked");
        self.on_stack.push(true);
        self.stack.push((v, index));
        Mark {
            index,
            tainted: false,
        }
    }

    /// A vertex marked `m` met again from the vertex with low link `low`
    /// and taint `tainted`: on the stack, it is in the same component;
    /// otherwise its component is closed and its taint final.
    pub fn met(&self, m: Mark, low: &mut u32, tainted: &mut bool) {
        if m.index != NONE && self.on_stack[m.index as usize] {
            *low = (*low).min(m.index);
        } else if m.tainted {
            *tainted = true;
        }
    }

    /// The vertex of `index`, its low link equal to its index, closes its
    /// component: everything above it on the stack is in it. Members of a
    /// tainted component are marked so, those of a clear one go to
    /// `clear`.
    pub fn close(
        &mut self,
        index: u32,
        tainted: bool,
        marks: &mut FastMap<TxnId, Mark>,
        clear: &mut Vec<TxnId>,
    ) {
        let at = self.stack.partition_point(|&(_, i)| i < index);
        for (m, i) in self.stack.drain(at..) {
            self.on_stack[i as usize] = false;
            if tainted {
                if let Some(mark) = marks.get_mut(&m) {
                    mark.tainted = true;
                }
            } else {
                clear.push(m);
            }
        }
    }
}
