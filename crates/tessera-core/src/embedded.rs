//! A client host driven by an application instead of closed-loop clients.
//!
//! [`crate::client::ClientHost`] generates its own transactions from a
//! workload; an [`EmbeddedHost`] wraps the same protocol coordinator but
//! takes its transactions from an inbox that an application fills (the
//! `tessera-client` library, `tessera txn`), and answers each request once,
//! through the request's own callback.
//!
//! Each request is retried as the closed-loop clients retry (randomized
//! exponential backoff, at most [`RetryPolicy::max_attempts`] attempts,
//! Janus §6.1; user aborts and in-doubt outcomes are final) until it ends
//! or its timeout passes. Time comes from the [`Ctx`], as for every node:
//! the deadline is a timer, so a request against an unreachable cluster
//! ends with [`Reply::TimedOut`] instead of waiting for ever.
//!
//! The inbox is a channel the host drains when it is stepped with the
//! [`INBOX`] timer id: the runtime that embeds the node delivers that
//! "timer" when the application wakes it (see `tessera_tcp::Wakeups`).

use crate::client::{backoff, Report, WrapsCoordinator, HOST_TIMER_BIT};
use crate::ids::{NodeId, Time, TimerId, TxnId};
use crate::node::{Ctx, Node, NodeReport};
use crate::protocol::Coordinator;
use crate::txn::{AbortReason, Attempt, Txn, TxnOutcome, Value};
use crate::FastMap;
use std::marker::PhantomData;
use std::sync::mpsc::Receiver;

/// Host timer ids: `HOST_TIMER_BIT | kind << KIND_SHIFT | request number`.
const KIND_SHIFT: u32 = 56;
const REQ_MASK: u64 = (1 << KIND_SHIFT) - 1;
const KIND_INBOX: u64 = 1;
const KIND_RETRY: u64 = 2;
const KIND_DEADLINE: u64 = 3;

/// The timer id that makes an [`EmbeddedHost`] drain its inbox.
pub const INBOX: TimerId = TimerId(HOST_TIMER_BIT | KIND_INBOX << KIND_SHIFT);

fn host_timer(kind: u64, req: u64) -> TimerId {
    TimerId(HOST_TIMER_BIT | kind << KIND_SHIFT | (req & REQ_MASK))
}

/// How requests are retried.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// Attempts before giving up on a retryable abort (20 in Janus §6.1).
    pub max_attempts: u32,
    /// The first retry waits up to this long; each retry doubles it.
    pub backoff_base: Time,
    pub backoff_cap: Time,
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Committed: the outputs of the procedure's pieces, in piece order.
    Committed { outputs: Vec<Value>, attempts: u32 },
    /// Did not commit: the procedure rolled back ([`AbortReason::User`], not
    /// retried) or the last of `attempts` attempts aborted for `reason`.
    Aborted { reason: AbortReason, attempts: u32 },
    /// May have committed; what it read is lost (see [`TxnOutcome::InDoubt`]).
    InDoubt { attempts: u32 },
    /// The timeout passed first. An attempt may still be in flight and
    /// commit later; `last_abort` says why the previous attempt failed,
    /// if one did.
    TimedOut {
        attempts: u32,
        last_abort: Option<AbortReason>,
    },
}

/// What the application hands the host.
pub struct Request {
    pub txn: Txn,
    /// How long the request may take, from when the host takes it.
    pub timeout: Time,
    /// Called exactly once with the request's end (never, if the host is
    /// dropped first: a channel's sender in it then reports a closed
    /// channel).
    pub reply: Box<dyn FnOnce(Reply) + Send>,
}

struct Pending {
    txn: Txn,
    reply: Box<dyn FnOnce(Reply) + Send>,
    first_start: Time,
    attempts: u32,
    current: Option<TxnId>,
    last_abort: Option<AbortReason>,
}

/// A node that runs an application's transactions on coordinator `C`.
pub struct EmbeddedHost<M, C> {
    coord: C,
    me: NodeId,
    incarnation: u8,
    policy: RetryPolicy,
    inbox: Receiver<Request>,
    /// Called once the node has started (the embedder waits for it).
    ready: Option<Box<dyn FnOnce() + Send>>,
    pending: FastMap<u64, Pending>,
    in_flight: FastMap<TxnId, u64>,
    next_req: u64,
    next_seq: u32,
    reports: Vec<(TxnId, Report)>,
    _msg: PhantomData<fn() -> M>,
}

impl<M, C: Coordinator<M>> EmbeddedHost<M, C> {
    pub fn new(
        coord: C,
        me: NodeId,
        incarnation: u8,
        policy: RetryPolicy,
        inbox: Receiver<Request>,
        ready: Box<dyn FnOnce() + Send>,
    ) -> Self {
        EmbeddedHost {
            coord,
            me,
            incarnation,
            policy,
            inbox,
            ready: Some(ready),
            pending: crate::fast_map(),
            in_flight: crate::fast_map(),
            next_req: 0,
            next_seq: 0,
            reports: Vec::new(),
            _msg: PhantomData,
        }
    }

    /// Take every request waiting in the inbox and start it.
    fn take_requests(&mut self, ctx: &mut Ctx<M>) {
        while let Ok(r) = self.inbox.try_recv() {
            self.next_req = (self.next_req + 1) & REQ_MASK;
            let req = self.next_req;
            self.pending.insert(
                req,
                Pending {
                    txn: r.txn,
                    reply: r.reply,
                    first_start: ctx.observed_now(),
                    attempts: 0,
                    current: None,
                    last_abort: None,
                },
            );
            ctx.set_timer(r.timeout, host_timer(KIND_DEADLINE, req));
            self.issue(ctx, req);
        }
    }

    /// Start (or retry) request `req` now.
    fn issue(&mut self, ctx: &mut Ctx<M>, req: u64) {
        let Some(p) = self.pending.get_mut(&req) else {
            return;
        };
        p.attempts += 1;
        self.next_seq = self.next_seq.wrapping_add(1);
        let id = TxnId::new(self.me, self.incarnation, self.next_seq);
        p.current = Some(id);
        self.in_flight.insert(id, req);
        let attempt = Attempt {
            id,
            txn: p.txn.clone(),
            since: p.first_start,
            client: 0,
        };
        self.coord.submit(ctx, attempt);
    }

    /// End request `req` with `reply`.
    fn answer(&mut self, req: u64, reply: impl FnOnce(&Pending) -> Reply) {
        if let Some(p) = self.pending.remove(&req) {
            if let Some(t) = p.current {
                self.in_flight.remove(&t);
            }
            let r = reply(&p);
            (p.reply)(r);
        }
    }

    fn attempt_ended(&mut self, ctx: &mut Ctx<M>, id: TxnId, outcome: TxnOutcome) {
        let Some(req) = self.in_flight.remove(&id) else {
            return;
        };
        let Some(p) = self.pending.get_mut(&req) else {
            return;
        };
        p.current = None;
        let attempts = p.attempts;
        match outcome {
            TxnOutcome::Committed { outputs, .. } => {
                self.answer(req, |_| Reply::Committed { outputs, attempts })
            }
            TxnOutcome::InDoubt => self.answer(req, |_| Reply::InDoubt { attempts }),
            TxnOutcome::Aborted(reason)
                if !reason.retryable() || attempts >= self.policy.max_attempts =>
            {
                self.answer(req, |_| Reply::Aborted { reason, attempts })
            }
            TxnOutcome::Aborted(AbortReason::Stale) => self.issue(ctx, req),
            TxnOutcome::Aborted(reason) => {
                p.last_abort = Some(reason);
                let delay = backoff(
                    ctx.rng(),
                    attempts,
                    self.policy.backoff_base,
                    self.policy.backoff_cap,
                );
                ctx.set_timer(delay, host_timer(KIND_RETRY, req));
            }
        }
    }

    fn on_host_timer(&mut self, ctx: &mut Ctx<M>, id: TimerId) {
        let req = id.0 & REQ_MASK;
        match (id.0 & !HOST_TIMER_BIT) >> KIND_SHIFT {
            KIND_INBOX => self.take_requests(ctx),
            KIND_RETRY if self.pending.get(&req).is_some_and(|p| p.current.is_none()) => {
                self.issue(ctx, req)
            }
            KIND_DEADLINE => self.answer(req, |p| Reply::TimedOut {
                attempts: p.attempts,
                last_abort: p.last_abort,
            }),
            _ => {}
        }
    }
}

impl<M, C: Coordinator<M>> WrapsCoordinator<M> for EmbeddedHost<M, C> {
    fn reports(&mut self) -> &mut Vec<(TxnId, Report)> {
        &mut self.reports
    }

    fn finish(&mut self, ctx: &mut Ctx<M>, id: TxnId, outcome: TxnOutcome) {
        self.attempt_ended(ctx, id, outcome)
    }
}

impl<M, C: Coordinator<M>> Node<M> for EmbeddedHost<M, C> {
    fn on_start(&mut self, ctx: &mut Ctx<M>) {
        self.stepped(ctx, |h, ctx| h.coord.on_start(ctx));
        if let Some(ready) = self.ready.take() {
            ready();
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<M>, from: NodeId, msg: M) {
        self.stepped(ctx, |h, ctx| h.coord.on_message(ctx, from, msg));
    }

    fn on_timer(&mut self, ctx: &mut Ctx<M>, id: TimerId) {
        self.stepped(ctx, |h, ctx| {
            if id.0 & HOST_TIMER_BIT != 0 {
                h.on_host_timer(ctx, id)
            } else {
                h.coord.on_timer(ctx, id)
            }
        });
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<M>, token: u64) {
        self.stepped(ctx, |h, ctx| h.coord.on_persisted(ctx, token));
    }

    fn take_report(&mut self) -> NodeReport {
        NodeReport {
            client: None,
            ..self.coord.take_report()
        }
    }
}

#[cfg(test)]
mod tests;
