use super::*;
use bytes::Bytes;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use tessera_core::ids::MS;
use tessera_core::runtime::NodeFactory;

#[derive(Debug)]
enum Msg {
    Ping(u64),
    Pong(u64),
    Note(&'static str),
}

impl WireSize for Msg {
    fn wire_size(&self) -> usize {
        match self {
            Msg::Ping(_) => 10,
            Msg::Pong(_) => 20,
            Msg::Note(s) => s.len(),
        }
    }
}

fn deployment(factories: Vec<NodeFactory<Msg>>, duration: Time) -> Deployment<Msg> {
    let n = factories.len() as u32;
    Deployment {
        topology: Arc::new(Topology::new(n, 1, 0)),
        factories,
        seed: 7,
        duration,
    }
}

fn factory<N: Node<Msg> + 'static>(
    mut make: impl FnMut() -> N + Send + 'static,
) -> NodeFactory<Msg> {
    Box::new(move |r: Restart| {
        assert_eq!(r.incarnation, 0);
        assert!(r.recovered.is_empty());
        Box::new(make()) as Box<dyn Node<Msg>>
    })
}

/// Sends `window` pings at start and one more per pong, `target` in all.
struct Pinger {
    peer: NodeId,
    window: u64,
    target: u64,
    sent: u64,
    received: u64,
    out: Arc<AtomicU64>,
}

impl Node<Msg> for Pinger {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        while self.sent < self.window.min(self.target) {
            ctx.send(self.peer, Msg::Ping(self.sent));
            self.sent += 1;
        }
    }
    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        assert_eq!(from, self.peer);
        // Messages between two nodes arrive in the order they were sent.
        assert!(
            matches!(msg, Msg::Pong(i) if i == self.received),
            "pinger got {msg:?} after {} pongs",
            self.received
        );
        self.received += 1;
        if self.sent < self.target {
            ctx.send(self.peer, Msg::Ping(self.sent));
            self.sent += 1;
        }
    }
    fn on_timer(&mut self, _: &mut Ctx<Msg>, _: TimerId) {}
    fn settled(&self) -> bool {
        self.received >= self.target
    }
    fn take_report(&mut self) -> NodeReport {
        self.out.store(self.received, Ordering::SeqCst);
        NodeReport::default()
    }
}

struct Ponger;

impl Node<Msg> for Ponger {
    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Ping(i) => ctx.send(from, Msg::Pong(i)),
            other => panic!("ponger got {other:?}"),
        }
    }
    fn on_timer(&mut self, _: &mut Ctx<Msg>, _: TimerId) {}
}

fn ping_pong(workers: usize, placement: Vec<usize>, window: u64, target: u64) {
    let received = Arc::new(AtomicU64::new(0));
    let out = received.clone();
    let factories = vec![
        factory(move || Pinger {
            peer: NodeId(1),
            window,
            target,
            sent: 0,
            received: 0,
            out: out.clone(),
        }),
        factory(|| Ponger),
    ];
    let run_out = run(
        deployment(factories, 1500 * MS),
        &LocalConfig {
            workers,
            placement,
            settle: 0,
        },
    )
    .expect("run");
    assert_eq!(received.load(Ordering::SeqCst), target, "round trips");
    assert_eq!(run_out.net.messages, 2 * target);
    assert_eq!(run_out.net.bytes, 30 * target);
    assert_eq!(run_out.events, 2 * target);
    assert_eq!(run_out.nodes.len(), 2);
    assert_eq!(run_out.reports.len(), 2);
    assert!(run_out.elapsed >= 1500 * MS, "elapsed {}", run_out.elapsed);
}

#[test]
fn ping_pong_same_worker() {
    ping_pong(1, vec![0, 0], 1, 20_000);
}

#[test]
fn ping_pong_same_worker_of_two() {
    ping_pong(2, vec![1, 1], 4, 20_000);
}

#[test]
fn ping_pong_cross_worker() {
    ping_pong(2, vec![0, 1], 1, 2_000);
}

#[test]
fn ping_pong_cross_worker_batched() {
    // Many in flight: outboxes fill up and flush by size too.
    ping_pong(2, vec![1, 0], 500, 50_000);
}

/// Sets timers at start (and one more from a timer) and logs when each fires.
struct TimerNode {
    log: Arc<Mutex<Vec<(u64, Time, Time)>>>,
    armed: Vec<(u64, Time)>,
}

impl Node<Msg> for TimerNode {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        for (id, delay) in [
            (1, 30 * MS),
            (2, 10 * MS),
            (3, 20 * MS),
            (4, 10 * MS),
            (5, 0),
        ] {
            ctx.set_timer(delay, TimerId(id));
            self.armed.push((id, ctx.now() + delay));
        }
    }
    fn on_message(&mut self, _: &mut Ctx<Msg>, _: NodeId, _: Msg) {}
    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, id: TimerId) {
        let at = self
            .armed
            .iter()
            .find(|(i, _)| *i == id.0)
            .expect("armed")
            .1;
        self.log.lock().unwrap().push((id.0, at, ctx.now()));
        if id.0 == 1 {
            ctx.set_timer(5 * MS, TimerId(6));
            self.armed.push((6, ctx.now() + 5 * MS));
        }
    }
}

#[test]
fn timers_fire_in_order_and_not_early() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let factories = vec![factory(move || TimerNode {
        log: l.clone(),
        armed: Vec::new(),
    })];
    let out = run(
        deployment(factories, 200 * MS),
        &LocalConfig {
            workers: 1,
            placement: vec![0],
            settle: 0,
        },
    )
    .expect("run");
    let log = log.lock().unwrap().clone();
    let order: Vec<u64> = log.iter().map(|e| e.0).collect();
    assert_eq!(order, vec![5, 2, 4, 3, 1, 6]);
    for (id, at, fired) in &log {
        assert!(fired >= at, "timer {id} fired at {fired}, due at {at}");
    }
    assert_eq!(out.events, 6);
}

/// Persists at start and tells its peer from `on_persisted`.
struct Persister {
    peer: NodeId,
    log: Arc<Mutex<Vec<String>>>,
}

impl Node<Msg> for Persister {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        self.log.lock().unwrap().push("persist".into());
        ctx.persist(42, Bytes::from_static(b"record"));
        // Sent right away: not covered by the record.
        ctx.send(ctx.me(), Msg::Note("self"));
    }
    fn on_message(&mut self, _: &mut Ctx<Msg>, _: NodeId, msg: Msg) {
        self.log.lock().unwrap().push(format!("self got {msg:?}"));
    }
    fn on_timer(&mut self, _: &mut Ctx<Msg>, _: TimerId) {}
    fn on_persisted(&mut self, ctx: &mut Ctx<Msg>, token: u64) {
        self.log.lock().unwrap().push(format!("persisted {token}"));
        ctx.send(self.peer, Msg::Note("durable"));
    }
}

struct Listener {
    log: Arc<Mutex<Vec<String>>>,
}

impl Node<Msg> for Listener {
    fn on_message(&mut self, _: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        self.log
            .lock()
            .unwrap()
            .push(format!("peer got {msg:?} from {}", from.0));
    }
    fn on_timer(&mut self, _: &mut Ctx<Msg>, _: TimerId) {}
}

#[test]
fn persist_completes_before_sends_from_on_persisted() {
    for (workers, placement) in [(1, vec![0, 0]), (2, vec![0, 1])] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (l1, l2) = (log.clone(), log.clone());
        let factories = vec![
            factory(move || Persister {
                peer: NodeId(1),
                log: l1.clone(),
            }),
            factory(move || Listener { log: l2.clone() }),
        ];
        let out = run(
            deployment(factories, 50 * MS),
            &LocalConfig {
                workers,
                placement,
                settle: 0,
            },
        )
        .expect("run");
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log,
            vec![
                "persist".to_string(),
                // Effects are carried out in order: the completion was
                // queued before the self-send.
                "persisted 42".into(),
                "self got Note(\"self\")".into(),
                "peer got Note(\"durable\") from 0".into(),
            ],
            "workers {workers}"
        );
        assert_eq!(out.net.messages, 2);
        assert_eq!(out.events, 3);
    }
}

struct Blaster(NodeId);

impl Node<Msg> for Blaster {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.send(self.0, Msg::Note("lost"));
        ctx.send(self.0, Msg::Note("lost"));
    }
    fn on_message(&mut self, _: &mut Ctx<Msg>, _: NodeId, _: Msg) {}
    fn on_timer(&mut self, _: &mut Ctx<Msg>, _: TimerId) {}
}

#[test]
fn messages_to_unknown_nodes_are_dropped() {
    let factories = vec![factory(|| Blaster(NodeId(99)))];
    let out = run(
        deployment(factories, 20 * MS),
        &LocalConfig {
            workers: 1,
            placement: vec![0],
            settle: 0,
        },
    )
    .expect("run");
    assert_eq!(out.net.messages, 2);
    assert_eq!(out.events, 0);
}

fn two_idle() -> Vec<NodeFactory<Msg>> {
    vec![factory(|| Ponger), factory(|| Ponger)]
}

#[test]
fn configuration_errors_are_reported() {
    let cfg = |workers, placement| LocalConfig {
        workers,
        placement,
        settle: 0,
    };
    let err = |dep, cfg: LocalConfig| run(dep, &cfg).err().expect("must fail");
    assert!(matches!(
        err(deployment(two_idle(), MS), cfg(0, vec![])),
        LocalError::NoWorkers
    ));
    assert!(matches!(
        err(deployment(two_idle(), MS), cfg(2, vec![0])),
        LocalError::PlacementLength {
            expected: 2,
            got: 1
        }
    ));
    let e = err(deployment(two_idle(), MS), cfg(2, vec![0, 2]));
    assert!(matches!(
        e,
        LocalError::PlacementWorker {
            node: NodeId(1),
            worker: 2,
            workers: 2
        }
    ));
    assert!(e.to_string().contains("worker 2"), "{e}");
    let mut dep = deployment(two_idle(), MS);
    dep.factories.pop();
    assert!(matches!(
        err(dep, cfg(1, vec![0])),
        LocalError::FactoryCount {
            factories: 1,
            nodes: 2
        }
    ));
}

struct Bomb;

impl Node<Msg> for Bomb {
    fn on_message(&mut self, _: &mut Ctx<Msg>, _: NodeId, _: Msg) {
        panic!("boom");
    }
    fn on_timer(&mut self, _: &mut Ctx<Msg>, _: TimerId) {}
}

#[test]
fn a_panicking_node_gives_worker_panicked() {
    let factories = vec![factory(|| Blaster(NodeId(1))), factory(|| Bomb)];
    let start = Instant::now();
    let res = run(
        deployment(factories, 60_000 * MS),
        &LocalConfig {
            workers: 2,
            placement: vec![0, 1],
            settle: 0,
        },
    );
    match res {
        Err(LocalError::WorkerPanicked { worker, message }) => {
            assert_eq!(worker, 1);
            assert!(message.contains("boom"), "{message}");
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("run should fail"),
    }
    // The other worker stops early instead of running the full minute.
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn default_placement_spreads_shards_and_hosts() {
    let topo = Topology::new(3, 2, 3);
    assert_eq!(default_placement(&topo, 2), vec![0, 0, 1, 1, 0, 0, 0, 1, 0]);
    assert_eq!(LocalConfig::new(&topo, 1).placement, vec![0; 9]);
}

/// Emits `Done`, which only client hosts may see.
struct Stray;

impl Node<Msg> for Stray {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.done(
            tessera_core::TxnId::new(ctx.me(), 0, 1),
            tessera_core::txn::TxnOutcome::Aborted(tessera_core::txn::AbortReason::Validation),
        );
    }
    fn on_message(&mut self, _: &mut Ctx<Msg>, _: NodeId, _: Msg) {}
    fn on_timer(&mut self, _: &mut Ctx<Msg>, _: TimerId) {}
}

#[test]
fn done_reaching_the_runtime_is_a_bug() {
    let res = run(
        deployment(vec![factory(|| Stray)], 20 * MS),
        &LocalConfig {
            workers: 1,
            placement: vec![0],
            settle: 0,
        },
    );
    if cfg!(debug_assertions) {
        assert!(matches!(
            res,
            Err(LocalError::WorkerPanicked { worker: 0, .. })
        ));
    } else {
        assert!(res.is_ok());
    }
}

/// Past the run's duration (a timer at `after`), asks its peer once and is
/// settled when the answer came.
struct Latecomer {
    peer: NodeId,
    after: Time,
    answered: bool,
    out: Arc<AtomicBool>,
}

impl Node<Msg> for Latecomer {
    fn on_start(&mut self, ctx: &mut Ctx<Msg>) {
        ctx.set_timer(self.after, TimerId(0));
    }
    fn on_message(&mut self, _: &mut Ctx<Msg>, _: NodeId, msg: Msg) {
        assert!(matches!(msg, Msg::Pong(0)), "latecomer got {msg:?}");
        self.answered = true;
    }
    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, _: TimerId) {
        ctx.send(self.peer, Msg::Ping(0));
    }
    fn settled(&self) -> bool {
        self.answered
    }
    fn take_report(&mut self) -> NodeReport {
        self.out.store(self.answered, Ordering::SeqCst);
        NodeReport::default()
    }
}

/// Answers a ping only after a timer of `delay`.
struct SlowPonger {
    delay: Time,
    asked: Option<(NodeId, u64)>,
}

impl Node<Msg> for SlowPonger {
    fn on_message(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, msg: Msg) {
        let Msg::Ping(i) = msg else {
            panic!("slow ponger got {msg:?}");
        };
        self.asked = Some((from, i));
        ctx.set_timer(self.delay, TimerId(1));
    }
    fn on_timer(&mut self, ctx: &mut Ctx<Msg>, _: TimerId) {
        let (to, i) = self.asked.take().expect("asked");
        ctx.send(to, Msg::Pong(i));
    }
}

/// A latecomer on worker 0 asking a slow ponger on worker 1 after the
/// duration; returns whether it was answered and the run's end.
fn latecomer_run(settle: Time) -> (bool, Time) {
    let answered = Arc::new(AtomicBool::new(false));
    let out = answered.clone();
    let factories = vec![
        factory(move || Latecomer {
            peer: NodeId(1),
            after: 25 * MS,
            answered: false,
            out: out.clone(),
        }),
        factory(|| SlowPonger {
            delay: 3 * MS,
            asked: None,
        }),
    ];
    let run_out = run(
        deployment(factories, 20 * MS),
        &LocalConfig {
            workers: 2,
            placement: vec![0, 1],
            settle,
        },
    )
    .expect("run");
    (answered.load(Ordering::SeqCst), run_out.elapsed)
}

#[test]
fn a_settling_run_goes_on_until_every_node_is_settled() {
    // Timers fire and messages cross workers past the duration; the run
    // ends once the latecomer is answered, long before the bound.
    let (answered, elapsed) = latecomer_run(60_000 * MS);
    assert!(answered, "the run stopped before the latecomer settled");
    assert!(elapsed >= 28 * MS, "elapsed {elapsed}");
    assert!(elapsed < 60_000 * MS, "the run waited for the bound");
    // Without settling it stops at the duration, before the question.
    let (answered, _) = latecomer_run(0);
    assert!(!answered);
}

#[test]
fn a_settling_run_waits_for_messages_between_workers() {
    // 200k cross-worker round trips outlast a 1 ms run by far: the settle
    // rounds must see the pings and pongs in the channels and queues and
    // never stop with one moving.
    // A third worker with no node must take part in the rounds too.
    for workers in [2, 3] {
        settle_through_traffic(workers);
    }
}

fn settle_through_traffic(workers: usize) {
    let received = Arc::new(AtomicU64::new(0));
    let out = received.clone();
    let target = 200_000;
    let factories = vec![
        factory(move || Pinger {
            peer: NodeId(1),
            window: 8,
            target,
            sent: 0,
            received: 0,
            out: out.clone(),
        }),
        factory(|| Ponger),
    ];
    run(
        deployment(factories, MS),
        &LocalConfig {
            workers,
            placement: vec![0, 1],
            settle: 600_000 * MS,
        },
    )
    .expect("run");
    assert_eq!(received.load(Ordering::SeqCst), target);
}

/// Never settled.
struct Restless;

impl Node<Msg> for Restless {
    fn on_message(&mut self, _: &mut Ctx<Msg>, _: NodeId, _: Msg) {}
    fn on_timer(&mut self, _: &mut Ctx<Msg>, _: TimerId) {}
    fn settled(&self) -> bool {
        false
    }
}

#[test]
fn a_run_that_never_settles_stops_at_the_bound() {
    let run_out = run(
        deployment(vec![factory(|| Restless), factory(|| Ponger)], 10 * MS),
        &LocalConfig {
            workers: 2,
            placement: vec![0, 1],
            settle: 30 * MS,
        },
    )
    .expect("run");
    assert!(run_out.elapsed >= 40 * MS, "elapsed {}", run_out.elapsed);
}
