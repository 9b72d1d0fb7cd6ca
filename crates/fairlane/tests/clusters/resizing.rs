//! Resizing under load: processors added and removed every 0.5-2 ms by a
//! plain thread while tasks run. Every wake still leads to exactly one poll
//! (the protocol of exactly_once.rs), every task completes exactly once, no
//! ping-pong chain loses a wake-up, and dropping the runtime meanwhile
//! drops every task once.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use fairlane::Runtime;

use crate::common::clusters::{build, grow_and_shrink, sorted, ResizeLog, Resizer};
use crate::common::wake_load::{chains_progress, run_chains, PingPong, WakeLoad};
use crate::common::{serial, wait_until, with_deadline, DropCounter, Rng, DEADLINE};

const TARGETS: usize = 200;
const YIELDERS: usize = 200;
/// Iterations each yielder makes at least.
const YIELDS: u64 = 200;
/// Resizes the yielders wait for before they finish, so that resizing
/// overlaps the load however fast the build runs it.
const MIN_RESIZES: u64 = 10;
/// The most processors the resizing scenarios grow to.
pub(crate) const MAX: usize = 6;

/// Yielding tasks beside the wake load: iterations and completions, one
/// counter each, and whether the resizer has made `MIN_RESIZES` changes.
struct Yielders {
    yields: Vec<AtomicU64>,
    done: Vec<AtomicU64>,
    resized: AtomicBool,
}

fn resize_under_load(task_wakes: i64, thread_wakes: i64, seed: u64) {
    let _serial = serial();
    let load = WakeLoad::new(TARGETS, task_wakes, thread_wakes);
    let yielders = Arc::new(Yielders {
        yields: (0..YIELDERS).map(|_| AtomicU64::new(0)).collect(),
        done: (0..YIELDERS).map(|_| AtomicU64::new(0)).collect(),
        resized: AtomicBool::new(false),
    });
    let l = load.clone();
    let (log, ops_during_load) =
        with_deadline("resize_under_load", DEADLINE, move || l.totals(), {
            let (load, yielders) = (load.clone(), yielders.clone());
            move || run_resize_under_load(load, yielders, seed)
        });

    load.assert_exactly_once();
    for i in 0..YIELDERS {
        assert!(
            yielders.yields[i].load(Ordering::Relaxed) >= YIELDS,
            "yielder {i} iterations"
        );
        assert_eq!(
            yielders.done[i].load(Ordering::Relaxed),
            1,
            "yielder {i} completions"
        );
    }
    // The resizing must actually have overlapped the workload.
    assert!(
        ops_during_load >= MIN_RESIZES && log.adds > 0 && log.removes > 0,
        "too little resizing during the workload: {ops_during_load} ops, {log:?}"
    );
    eprintln!(
        "resize_under_load: {ops_during_load} resizes during the load; {log:?}; {}",
        load.totals()
    );
}

fn run_resize_under_load(
    load: Arc<WakeLoad>,
    yielders: Arc<Yielders>,
    seed: u64,
) -> (ResizeLog, u64) {
    let rt = build(Runtime::builder().processors(2).max_processors(MAX));
    let cluster = rt.handle().cluster();
    let resizer = Resizer::start(cluster.clone(), MAX, seed);

    let running = load.start(&rt, seed);
    let yielding: Vec<_> = (0..YIELDERS)
        .map(|i| {
            let yielders = yielders.clone();
            rt.spawn(async move {
                let mut n = 0;
                while n < YIELDS || !yielders.resized.load(Ordering::Relaxed) {
                    yielders.yields[i].fetch_add(1, Ordering::Relaxed);
                    n += 1;
                    fairlane::yield_now().await;
                }
                yielders.done[i].fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    wait_until("resizes during the load", || resizer.ops() >= MIN_RESIZES);
    yielders.resized.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for t in yielding {
            t.await.unwrap();
        }
    });
    load.finish(&rt, running);
    let ops_during_load = resizer.ops();
    let log = resizer.finish();
    assert_eq!(
        sorted(cluster.processors()),
        sorted(log.live.clone()),
        "cluster.processors() after resizing"
    );
    grow_and_shrink(&rt, &cluster, MAX);
    (log, ops_during_load)
}

#[test]
fn resize_under_load_wakes_from_tasks_and_threads() {
    resize_under_load(100_000, 50_000, 7);
}

#[test]
fn resize_under_load_wakes_from_outside_threads_only() {
    resize_under_load(0, 100_000, 11);
}

#[test]
fn ping_pong_chains_survive_resizing() {
    const TASK_PAIRS: usize = 4;
    const THREAD_PAIRS: usize = 2;
    const STEPS: u64 = 20_000;
    let _serial = serial();
    let pairs: Vec<_> = (0..TASK_PAIRS + THREAD_PAIRS)
        .map(|_| PingPong::new())
        .collect();
    let progress = chains_progress(&pairs, STEPS);
    let (ops, log) = with_deadline("ping_pong_resizing", DEADLINE, progress, move || {
        let rt = build(Runtime::builder().processors(2).max_processors(MAX));
        let cluster = rt.handle().cluster();
        let resizer = Resizer::start(cluster.clone(), MAX, 23);
        run_chains(&rt, &pairs, TASK_PAIRS, STEPS);
        let ops = resizer.ops();
        let log = resizer.finish();
        assert_eq!(sorted(cluster.processors()), sorted(log.live.clone()));
        grow_and_shrink(&rt, &cluster, MAX);
        (ops, log)
    });
    assert!(
        ops >= 10 && log.adds > 0 && log.removes > 0,
        "too little resizing during the chains: {ops} ops, {log:?}"
    );
    eprintln!("ping_pong_chains_survive_resizing: {ops} resizes; {log:?}");
}

/// Dropping the runtime while a thread adds and removes processors: no hang,
/// every task dropped once, and resizing after the drop fails cleanly.
#[test]
fn dropping_the_runtime_while_resizing() {
    const TASKS: usize = 50;
    let _serial = serial();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let progress = move || format!("dropped {}", d.load(Ordering::SeqCst));
    let d = drops.clone();
    with_deadline("drop_while_resizing", DEADLINE, progress, move || {
        let rt = build(Runtime::builder().processors(2).max_processors(6));
        let cluster = rt.handle().cluster();
        for _ in 0..TASKS {
            let counter = DropCounter(d.clone());
            rt.spawn(async move {
                let _counter = counter;
                loop {
                    fairlane::yield_now().await;
                }
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let resizer = {
            let (cluster, stop, ops) = (cluster.clone(), stop.clone(), ops.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(5);
                while !stop.load(Ordering::SeqCst) {
                    let ids = cluster.processors();
                    if rng.below(2) == 0 {
                        let _ = cluster.add_processor();
                    } else if ids.len() > 1 {
                        let _ = cluster.remove_processor(ids[rng.below(ids.len())]);
                    }
                    ops.fetch_add(1, Ordering::SeqCst);
                    thread::yield_now();
                }
            })
        };
        wait_until("some resizes", || ops.load(Ordering::SeqCst) >= 20);
        drop(rt);
        stop.store(true, Ordering::SeqCst);
        resizer.join().expect("the resizer must not panic");
        assert_eq!(d.load(Ordering::SeqCst), TASKS, "each task dropped once");
        let err = cluster
            .add_processor()
            .expect_err("add_processor after shutdown");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    });
}
