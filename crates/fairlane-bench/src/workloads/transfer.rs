//! **transfer** (fairness): a leader bumps an epoch and *busy-waits* (never
//! yields) until every other task acknowledged it; the others loop
//! yield → check epoch → acknowledge. Then the leader hands the lead to a
//! random other task. In the *park* variant (`transfer-park`) the others park
//! on their own binary semaphore and the leader wakes each of them (and then
//! the next leader).
//!
//! A scheduler that only steals when a processor runs dry never moves the
//! tasks queued behind the spinning leader, so they never acknowledge: that
//! is starvation. Two watchdogs catch it. The leader gives up once it has
//! waited longer than the threshold; the driver thread declares starvation
//! when no transfer finished for longer than the threshold (which also covers
//! a next leader that never gets to run). Either way the run stops at once,
//! so that a starving runtime costs the suite about one threshold.
//!
//! Reports µs per transfer and the longest acknowledgement wait (the longest
//! any leader spun, over the whole run, warm-up included).

use super::{join_all, Emit};
use crate::harness::{measure, seeded_rng, Counters, Rng, Stop};
use crate::runtimes::{BenchRuntime, Spawner};
use crate::spec::{ChildSpec, Metric, Outcome, Status};
use crate::sync::Semaphore;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

struct Shared {
    n: usize,
    park: bool,
    threshold_ns: u64,
    base: Instant,
    /// Bumped by each leader; a task acknowledges each value once.
    epoch: AtomicU64,
    /// Acknowledgements of the current epoch.
    acks: AtomicUsize,
    /// The task whose turn it is to lead.
    turn: AtomicUsize,
    /// Nanoseconds since `base` when the last transfer finished.
    progress_ns: AtomicU64,
    /// Longest acknowledgement wait so far.
    max_wait_ns: AtomicU64,
    starved: AtomicBool,
    stop: Stop,
    sems: Box<[Semaphore]>,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, park: bool, emit: Emit<'_>) {
    let n = spec.tasks.max(2);
    let sh = Arc::new(Shared {
        n,
        park,
        threshold_ns: spec.starve_threshold().as_nanos() as u64,
        base: Instant::now(),
        epoch: AtomicU64::new(0),
        acks: AtomicUsize::new(0),
        turn: AtomicUsize::new(0),
        progress_ns: AtomicU64::new(0),
        max_wait_ns: AtomicU64::new(0),
        starved: AtomicBool::new(false),
        stop: Stop::default(),
        sems: (0..n).map(|_| Semaphore::binary(false)).collect(),
    });
    let counters = Arc::new(Counters::new(n));
    let spawner = rt.spawner();
    let joins: Vec<_> = (0..n)
        .map(|i| {
            let (sh, counters) = (sh.clone(), counters.clone());
            let rng = seeded_rng(spec.seed, i as u64);
            spawner.spawn(task::<R>(i, sh, counters, rng))
        })
        .collect();
    sh.progress_ns.store(sh.now_ns(), Ordering::Relaxed);

    let mut watchdog = || {
        if !sh.starved.load(Ordering::Relaxed)
            && sh
                .now_ns()
                .saturating_sub(sh.progress_ns.load(Ordering::Relaxed))
                > sh.threshold_ns
        {
            sh.max_wait_ns.fetch_max(sh.threshold_ns, Ordering::Relaxed);
            sh.starved.store(true, Ordering::Relaxed);
        }
        sh.starved.load(Ordering::Relaxed)
    };
    let w = measure(
        &counters,
        spec.warmup(),
        spec.duration(),
        Some(&mut watchdog),
        1,
    );
    let max_wait_ms = sh.max_wait_ns.load(Ordering::Relaxed) as f64 / 1e6;
    let outcome = if sh.starved.load(Ordering::Relaxed) {
        Outcome {
            status: Status::Starved,
            metrics: vec![Metric::new("max ack wait", max_wait_ms, "ms")],
            detail: Some(format!(
                "an acknowledgement (or the next leader) waited more than {} ms",
                spec.starve_threshold_ms
            )),
            ..Outcome::default()
        }
    } else {
        Outcome {
            metrics: vec![
                Metric::new("us/transfer", w.ns_per_op() / 1e3, "us"),
                Metric::new("max ack wait", max_wait_ms, "ms"),
            ],
            ..Outcome::default()
        }
    };
    emit(outcome);
    sh.stop.set();
    sh.sems.iter().for_each(Semaphore::close);
    join_all(rt, joins);
}

async fn task<R: BenchRuntime>(i: usize, sh: Arc<Shared>, counters: Arc<Counters>, mut rng: Rng) {
    let slot = counters.slot(i);
    let (mut seen, mut transfers) = (0, 0);
    loop {
        if sh.stop.is_set() || sh.starved.load(Ordering::Relaxed) {
            return;
        }
        if sh.turn.load(Ordering::Acquire) == i {
            // Lead. Every other task acknowledged the previous epoch before
            // the lead was handed over, so no late acknowledgement can land
            // after this reset.
            sh.acks.store(0, Ordering::Relaxed);
            seen = sh.epoch.fetch_add(1, Ordering::AcqRel) + 1;
            if sh.park {
                for (j, s) in sh.sems.iter().enumerate() {
                    if j != i {
                        s.post();
                    }
                }
            }
            let start = Instant::now();
            while sh.acks.load(Ordering::Acquire) < sh.n - 1 {
                if sh.stop.is_set() || sh.starved.load(Ordering::Relaxed) {
                    return;
                }
                if start.elapsed().as_nanos() as u64 > sh.threshold_ns {
                    sh.max_wait_ns
                        .fetch_max(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    sh.starved.store(true, Ordering::Relaxed);
                    return;
                }
                std::hint::spin_loop();
            }
            sh.max_wait_ns
                .fetch_max(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
            transfers += 1;
            slot.publish(transfers, 0);
            sh.progress_ns.store(sh.now_ns(), Ordering::Relaxed);
            let next = (i + 1 + rng.below(sh.n - 1)) % sh.n;
            sh.turn.store(next, Ordering::Release);
            if sh.park {
                sh.sems[next].post();
            }
        } else {
            if sh.park {
                if sh.sems[i].wait().await.is_err() {
                    return;
                }
            } else {
                R::yield_now().await;
            }
            let e = sh.epoch.load(Ordering::Acquire);
            if e != seen {
                seen = e;
                sh.acks.fetch_add(1, Ordering::AcqRel);
            }
        }
    }
}
