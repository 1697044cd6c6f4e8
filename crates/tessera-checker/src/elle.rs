//! Export to Jepsen/Elle's rw-register history format (JSON lines).
//!
//! A second opinion from an independent checker (Elle, or the `adya` crate)
//! is the best test of this one. Each attempt becomes an `invoke` line at its
//! start and a completion line at its end: `ok` (committed), `fail`
//! (aborted) or `info` (outcome unknown). Keys are strings `"table:row"`;
//! values are version numbers, and a read of the initial version is `null`
//! (Elle's nil). Within a transaction, reads come before writes, which is
//! the order tessera's pieces observe them in. Invocations carry `null` for
//! every read, as Jepsen's do.
//!
//! Lines are in time order. Elle derives real-time order from line order (a
//! completion before an invocation), so at equal times invocations go first,
//! matching the checker's strict `end < start` rule; the one exception is a
//! process's own next invocation, which must follow its previous completion
//! for Elle to pair them. `info` lines go at the end of the file, stamped
//! with the last time seen: an unknown outcome stays open forever. Since
//! Elle pairs each invocation with the next completion of its process, an
//! in-doubt attempt that is not the last of its process moves to a fresh
//! process number (Jepsen retires a process after an `info` the same way).
//!
//! Elle reads numbers as 64-bit signed integers: version numbers are attempt
//! ids, which stay below 2^63 while node numbers stay below 2^23.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, BufWriter, Write};
use tessera_core::history::{History, HistoryTxn, Outcome};
use tessera_core::{fast_map, FastMap, Time, Version};

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("writing the Elle history: {0}")]
    Io(#[from] io::Error),
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    // Invocations sort before completions at equal times.
    Invoke = 0,
    Complete = 1,
}

/// The events of one Elle process, in order.
struct Lane {
    process: u64,
    events: Vec<(Time, Step, u32)>,
    next: usize,
}

impl Lane {
    fn head(&self, lane: usize) -> Option<Reverse<(Time, Step, usize)>> {
        self.events
            .get(self.next)
            .map(|&(time, step, _)| Reverse((time, step, lane)))
    }
}

/// Writes `history` as an Elle rw-register history, one JSON object per
/// line.
pub fn write_elle<W: Write>(history: &History, out: W) -> Result<(), ExportError> {
    // In-doubt attempts write what committed readers saw them write.
    let history = crate::with_observed_writes(history);
    let txns = &history.txns;
    let mut out = BufWriter::new(out);

    let mut per_process: FastMap<u64, Vec<u32>> = fast_map();
    for (i, t) in txns.iter().enumerate() {
        per_process.entry(t.process).or_default().push(i as u32);
    }
    let mut processes: Vec<(u64, Vec<u32>)> = per_process.into_iter().collect();
    processes.sort_unstable_by_key(|(p, _)| *p);
    let mut fresh = processes.last().map_or(0, |(p, _)| p + 1);

    let mut lanes: Vec<Lane> = Vec::new();
    let mut in_doubt: Vec<(u64, u32)> = Vec::new();
    for (process, mut list) in processes {
        list.sort_unstable_by_key(|&i| (txns[i as usize].start, txns[i as usize].id));
        let mut lane = Lane {
            process,
            events: Vec::with_capacity(2 * list.len()),
            next: 0,
        };
        let last = list.len() - 1;
        for (pos, &i) in list.iter().enumerate() {
            let t = &txns[i as usize];
            if t.outcome != Outcome::Unknown {
                lane.events.push((t.start, Step::Invoke, i));
                lane.events.push((t.end, Step::Complete, i));
            } else if pos == last {
                lane.events.push((t.start, Step::Invoke, i));
                in_doubt.push((process, i));
            } else {
                lanes.push(Lane {
                    process: fresh,
                    events: vec![(t.start, Step::Invoke, i)],
                    next: 0,
                });
                in_doubt.push((fresh, i));
                fresh += 1;
            }
        }
        lanes.push(lane);
    }

    // Merge the lanes by time, keeping each lane's own order.
    let mut heap: BinaryHeap<Reverse<(Time, Step, usize)>> = lanes
        .iter()
        .enumerate()
        .filter_map(|(l, lane)| lane.head(l))
        .collect();
    let mut index = 0u64;
    let mut now = 0;
    while let Some(Reverse((time, _, l))) = heap.pop() {
        let lane = &mut lanes[l];
        let (_, step, i) = lane.events[lane.next];
        lane.next += 1;
        if let Some(h) = lane.head(l) {
            heap.push(h);
        }
        let t = &txns[i as usize];
        let (kind, results) = match (step, t.outcome) {
            (Step::Invoke, _) => ("invoke", false),
            (Step::Complete, Outcome::Committed) => ("ok", true),
            (Step::Complete, _) => ("fail", true),
        };
        now = time;
        line(&mut out, kind, lanes[l].process, t, results, time, index)?;
        index += 1;
    }
    in_doubt.sort_unstable_by_key(|&(_, i)| (txns[i as usize].start, txns[i as usize].id));
    for (process, i) in in_doubt {
        line(
            &mut out,
            "info",
            process,
            &txns[i as usize],
            false,
            now,
            index,
        )?;
        index += 1;
    }
    out.flush()?;
    Ok(())
}

/// One operation. Keys and numbers need no JSON escaping, so the line is
/// formatted directly (much faster than building `serde_json` values).
fn line(
    out: &mut impl Write,
    kind: &str,
    process: u64,
    t: &HistoryTxn,
    results: bool,
    time: Time,
    index: u64,
) -> io::Result<()> {
    write!(
        out,
        r#"{{"type":"{kind}","f":"txn","process":{process},"value":["#
    )?;
    let mut sep = "";
    for r in &t.reads {
        if results && r.version != Version::INITIAL {
            write!(out, r#"{sep}["r","{}",{}]"#, r.key, r.version.0)?;
        } else {
            write!(out, r#"{sep}["r","{}",null]"#, r.key)?;
        }
        sep = ",";
    }
    for k in &t.writes {
        write!(out, r#"{sep}["w","{k}",{}]"#, t.id.version().0)?;
        sep = ",";
    }
    writeln!(out, r#"],"time":{time},"index":{index}}}"#)
}
