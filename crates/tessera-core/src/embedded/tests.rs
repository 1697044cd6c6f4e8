//! The host stepped by hand around a scripted coordinator: each submitted
//! attempt ends as the script says, or never (a silent cluster).

use super::*;
use crate::node::Effect;
use crate::txn::{PieceResult, PieceSpec, Procedure};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
struct Nop;

impl Procedure for Nop {
    fn name(&self) -> &'static str {
        "nop"
    }
    fn pieces(&self) -> &[PieceSpec] {
        &[]
    }
    fn execute(&self, _: usize, _: &[Option<&Value>], _: &[Value]) -> PieceResult {
        PieceResult::default()
    }
}

/// Ends the n-th attempt with the n-th scripted outcome; `None` (or the
/// end of the script) leaves it unanswered.
struct Script {
    outcomes: VecDeque<Option<TxnOutcome>>,
    submitted: Arc<Mutex<Vec<TxnId>>>,
}

impl Node<()> for Script {
    fn on_message(&mut self, _: &mut Ctx<()>, _: NodeId, _: ()) {}
    fn on_timer(&mut self, _: &mut Ctx<()>, _: TimerId) {}
}

impl Coordinator<()> for Script {
    fn submit(&mut self, ctx: &mut Ctx<()>, attempt: Attempt) {
        self.submitted.lock().unwrap().push(attempt.id);
        if let Some(Some(o)) = self.outcomes.pop_front() {
            ctx.done(attempt.id, o);
        }
    }
}

struct Rig {
    host: EmbeddedHost<(), Script>,
    tx: mpsc::Sender<Request>,
    replies: Arc<Mutex<Vec<Reply>>>,
    submitted: Arc<Mutex<Vec<TxnId>>>,
    timers: Vec<(Time, TimerId)>,
    rng: SmallRng,
    now: Time,
}

const MS: Time = crate::ids::MS;

impl Rig {
    fn new(outcomes: Vec<Option<TxnOutcome>>) -> Self {
        let (tx, rx) = mpsc::channel();
        let submitted = Arc::new(Mutex::new(Vec::new()));
        let coord = Script {
            outcomes: outcomes.into(),
            submitted: submitted.clone(),
        };
        let policy = RetryPolicy {
            max_attempts: 3,
            backoff_base: MS,
            backoff_cap: 10 * MS,
        };
        let mut rig = Rig {
            host: EmbeddedHost::new(coord, NodeId(7), 2, policy, rx, Box::new(|| {})),
            tx,
            replies: Arc::new(Mutex::new(Vec::new())),
            submitted,
            timers: Vec::new(),
            rng: SmallRng::seed_from_u64(1),
            now: 0,
        };
        rig.step(|h, c| h.on_start(c));
        rig
    }

    fn step(&mut self, f: impl FnOnce(&mut EmbeddedHost<(), Script>, &mut Ctx<()>)) {
        let mut effects = Vec::new();
        let mut ctx = Ctx::new(self.now, NodeId(7), &mut self.rng, &mut effects);
        f(&mut self.host, &mut ctx);
        for e in effects {
            match e {
                Effect::Timer { at, id } => self.timers.push((at, id)),
                Effect::Done { .. } => panic!("a Done effect escaped the host"),
                _ => {}
            }
        }
    }

    /// Hand the host a request with `timeout` and wake it.
    fn request(&mut self, timeout: Time) {
        let replies = self.replies.clone();
        self.tx
            .send(Request {
                txn: Arc::new(Nop),
                timeout,
                reply: Box::new(move |r| replies.lock().unwrap().push(r)),
            })
            .unwrap();
        self.step(|h, c| h.on_timer(c, INBOX));
    }

    /// Fire timers in time order until none is left.
    fn run_timers(&mut self) {
        while !self.timers.is_empty() {
            self.timers.sort_by_key(|t| t.0);
            let (at, id) = self.timers.remove(0);
            self.now = self.now.max(at);
            self.step(|h, c| h.on_timer(c, id));
        }
    }

    fn replies(&self) -> Vec<Reply> {
        self.replies.lock().unwrap().clone()
    }
}

fn committed() -> TxnOutcome {
    TxnOutcome::Committed {
        reads: Vec::new(),
        writes: Vec::new(),
        outputs: vec![Value::from_static(b"42")],
    }
}

#[test]
fn a_commit_is_answered_with_the_outputs() {
    let mut rig = Rig::new(vec![Some(committed())]);
    rig.request(100 * MS);
    rig.run_timers();
    assert_eq!(
        rig.replies(),
        vec![Reply::Committed {
            outputs: vec![Value::from_static(b"42")],
            attempts: 1
        }]
    );
    let ids = rig.submitted.lock().unwrap().clone();
    assert_eq!(ids.len(), 1);
    assert_eq!((ids[0].node(), ids[0].incarnation()), (NodeId(7), 2));
}

#[test]
fn conflicts_are_retried_with_new_ids_until_the_commit() {
    let conflict = || Some(TxnOutcome::Aborted(AbortReason::LockConflict));
    let mut rig = Rig::new(vec![conflict(), conflict(), Some(committed())]);
    rig.request(100 * MS);
    rig.run_timers();
    assert!(matches!(
        rig.replies()[..],
        [Reply::Committed { attempts: 3, .. }]
    ));
    let mut ids = rig.submitted.lock().unwrap().clone();
    ids.dedup();
    assert_eq!(ids.len(), 3, "every attempt has its own id");
}

/// The replies to one request (100 ms timeout) whose attempts end as
/// `script` says.
fn replies_to(script: Vec<Option<TxnOutcome>>) -> Vec<Reply> {
    let mut rig = Rig::new(script);
    rig.request(100 * MS);
    rig.run_timers();
    rig.replies()
}

#[test]
fn a_user_abort_is_final() {
    let user = Some(TxnOutcome::Aborted(AbortReason::User));
    let reason = AbortReason::User;
    let want = Reply::Aborted {
        reason,
        attempts: 1,
    };
    assert_eq!(replies_to(vec![user, Some(committed())]), vec![want]);
}

#[test]
fn the_last_allowed_attempt_reports_its_abort() {
    let v = || Some(TxnOutcome::Aborted(AbortReason::Validation));
    let want = Reply::Aborted {
        reason: AbortReason::Validation,
        attempts: 3,
    };
    let script = vec![v(), v(), v(), Some(committed())];
    assert_eq!(replies_to(script), vec![want]);
}

#[test]
fn an_unanswered_attempt_times_out_at_the_deadline_and_a_late_end_is_ignored() {
    let mut rig = Rig::new(vec![Some(TxnOutcome::Aborted(AbortReason::Timeout)), None]);
    rig.request(50 * MS);
    rig.run_timers();
    assert_eq!(rig.now, 50 * MS, "the deadline is a timer of the host");
    assert_eq!(
        rig.replies(),
        vec![Reply::TimedOut {
            attempts: 2,
            last_abort: Some(AbortReason::Timeout)
        }]
    );
    // The second attempt ends after the deadline: nobody is answered twice.
    let late = *rig.submitted.lock().unwrap().last().unwrap();
    rig.step(|h, c| h.stepped(c, |_, c| c.done(late, committed())));
    assert_eq!(rig.replies().len(), 1);
}

#[test]
fn requests_run_side_by_side() {
    let mut rig = Rig::new(vec![None, Some(committed())]);
    rig.request(10 * MS);
    rig.request(10 * MS);
    rig.run_timers();
    let r = rig.replies();
    assert!(matches!(r[0], Reply::Committed { attempts: 1, .. }));
    assert!(matches!(r[1], Reply::TimedOut { attempts: 1, .. }));
}
