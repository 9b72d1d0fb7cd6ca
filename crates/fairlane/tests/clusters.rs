//! Clusters, resizing, affinity and migration.
//!
//! - Processors are added and removed (from a plain thread, every one or two
//!   milliseconds) while tasks run: every wake still leads to exactly one
//!   poll, every task completes exactly once, no ping-pong chain loses a
//!   wake-up, and `Cluster::processors` always matches the adds and removes.
//! - Removing a processor moves the tasks queued on it; none runs on it once
//!   the removal has returned.
//! - The error cases of resizing and of building clusters.
//! - A task restricted to a set of processors is only ever polled on them;
//!   one whose processors are all removed is re-homed and completes.
//! - Tasks of a cluster run on its processor threads; `migrate_here` moves a
//!   task between clusters, back and forth, without losing it.
//! - A named task's name appears in its `JoinError`.
//!
//! Every scenario that would hang if the runtime lost a task runs under a
//! deadline (a hang guard only: nothing here measures time).

// Waking through a clone (`wake`, which consumes the waker) is a different
// path in the task cell than `wake_by_ref`; the tests use both on purpose.
#![allow(clippy::waker_clone_wake)]

mod common;

use std::collections::HashSet;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::wake_load::{chains_progress, run_chains, PingPong, WakeLoad};
use common::{serial, with_deadline, DropCounter, Rng, Signal};
use fairlane::task::{current_processor, ProcessorId};
use fairlane::{Cluster, Handle, Runtime};

/// A hang guard: only a lost task or wake-up trips it.
const HANG: Duration = Duration::from_secs(60);

fn build(builder: &mut fairlane::Builder) -> Runtime {
    builder.build().expect("build runtime")
}

fn sorted(mut ids: Vec<ProcessorId>) -> Vec<ProcessorId> {
    ids.sort();
    ids
}

/// The name of the calling thread (processor threads are named
/// `fairlane-processor-{p}` in the default cluster and
/// `fairlane-processor-{cluster}-{p}` in the others).
fn thread_name() -> String {
    thread::current().name().unwrap_or("<unnamed>").to_owned()
}

/// Waits (spinning politely) until `done` holds, failing the test after
/// [`HANG`].
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "still waiting for {what} after {HANG:?}"
        );
        thread::sleep(Duration::from_micros(200));
    }
}

// ---------------------------------------------------------------------------
// The resizer: a plain thread adding and removing processors.
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct ResizeLog {
    adds: u64,
    removes: u64,
    /// `add_processor` refused with fewer than `max` processors: a removed
    /// processor's thread had not left yet (documented).
    slot_busy: u64,
    /// Removals of an already-removed id, rejected as they must be.
    stale_rejected: u64,
    /// The processors the resizer believes the cluster has at the end.
    live: Vec<ProcessorId>,
}

struct Resizer {
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
    thread: thread::JoinHandle<ResizeLog>,
}

impl Resizer {
    /// Starts adding and removing processors of `cluster` (never removing
    /// the last, never more than `max`), a random choice every 0.5-2 ms,
    /// checking `cluster.processors()` against its own bookkeeping after each
    /// change.
    fn start(cluster: Cluster, max: usize, seed: u64) -> Resizer {
        Self::start_protecting(cluster, max, seed, Vec::new())
    }

    /// [`start`](Self::start), never removing the processors `protected`.
    fn start_protecting(
        cluster: Cluster,
        max: usize,
        seed: u64,
        protected: Vec<ProcessorId>,
    ) -> Resizer {
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, ops) = (stop.clone(), ops.clone());
            thread::Builder::new()
                .name("resizer".into())
                .spawn(move || resize_loop(cluster, max, seed, &protected, &stop, &ops))
                .expect("spawn the resizer")
        };
        Resizer { stop, ops, thread }
    }

    fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    /// Stops the resizer and returns its log (re-raising its panic).
    fn finish(self) -> ResizeLog {
        self.stop.store(true, Ordering::Release);
        match self.thread.join() {
            Ok(log) => log,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }
}

fn resize_loop(
    cluster: Cluster,
    max: usize,
    seed: u64,
    protected: &[ProcessorId],
    stop: &AtomicBool,
    ops: &AtomicU64,
) -> ResizeLog {
    let mut rng = Rng::new(seed);
    let mut live = cluster.processors();
    let mut seen: HashSet<ProcessorId> = live.iter().copied().collect();
    let mut removed: Vec<ProcessorId> = Vec::new();
    let mut log = ResizeLog::default();
    while !stop.load(Ordering::Acquire) {
        let removable: Vec<usize> = (0..live.len())
            .filter(|&k| !protected.contains(&live[k]))
            .collect();
        let add =
            live.len() == 1 || removable.is_empty() || (live.len() < max && rng.below(2) == 0);
        if add {
            match cluster.add_processor() {
                Ok(id) => {
                    assert!(
                        seen.insert(id),
                        "add_processor returned {id}, an identity handed out before"
                    );
                    live.push(id);
                    log.adds += 1;
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::InvalidInput, "add_processor: {e}");
                    log.slot_busy += 1;
                }
            }
        } else {
            let id = live.swap_remove(removable[rng.below(removable.len())]);
            if let Err(e) = cluster.remove_processor(id) {
                panic!("remove_processor({id}) of a live processor failed: {e}");
            }
            removed.push(id);
            log.removes += 1;
        }
        if !removed.is_empty() && rng.below(8) == 0 {
            let old = removed[rng.below(removed.len())];
            let err = cluster
                .remove_processor(old)
                .expect_err("removing an already-removed processor must fail");
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
            log.stale_rejected += 1;
        }
        assert_eq!(
            sorted(cluster.processors()),
            sorted(live.clone()),
            "cluster.processors() must match the adds and removes made (log so far: {log:?})"
        );
        ops.fetch_add(1, Ordering::Relaxed);
        thread::sleep(Duration::from_micros(500 + rng.below(1500) as u64));
    }
    log.live = live;
    log
}

/// After resizing: every removed processor's slot comes free again (its
/// thread left), so the cluster grows back to `max`; then it shrinks to one
/// processor, and tasks keep running on exactly the processors it has.
fn grow_and_shrink(rt: &Runtime, cluster: &Cluster, max: usize) {
    let deadline = Instant::now() + HANG;
    while cluster.processors().len() < max {
        if let Err(e) = cluster.add_processor() {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            assert!(
                Instant::now() < deadline,
                "a removed processor's slot never came free ({} processors of {max}): {e}",
                cluster.processors().len()
            );
            thread::sleep(Duration::from_millis(1));
        }
    }
    assert_eq!(
        cluster.add_processor().map_err(|e| e.kind()).unwrap_err(),
        ErrorKind::InvalidInput,
        "a full cluster refuses another processor"
    );
    assert_runs_on(rt, &cluster.processors());
    let ids = cluster.processors();
    for id in &ids[1..] {
        cluster.remove_processor(*id).expect("remove");
    }
    assert_eq!(cluster.processors(), [ids[0]]);
    assert_runs_on(rt, &[ids[0]]);
}

/// Spawns 64 yielding tasks and checks each poll ran on one of `ids`.
fn assert_runs_on(rt: &Runtime, ids: &[ProcessorId]) {
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            rt.spawn(async {
                let mut seen = Vec::new();
                for _ in 0..4 {
                    seen.push(current_processor());
                    fairlane::yield_now().await;
                }
                seen.push(current_processor());
                seen
            })
        })
        .collect();
    for task in tasks {
        for p in rt.block_on(task).expect("task") {
            let p = p.expect("a task runs on a processor");
            assert!(ids.contains(&p), "polled on {p}, not one of {ids:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// 1. Resize under load: exactly once (the protocol of exactly_once.rs).
// ---------------------------------------------------------------------------

const TARGETS: usize = 200;
const YIELDERS: usize = 200;
const YIELDS: u64 = 200;
const MAX: usize = 6;

/// Yielding tasks beside the wake load: iterations and completions, one
/// counter each.
struct Yielders {
    yields: Vec<AtomicU64>,
    done: Vec<AtomicU64>,
}

fn resize_under_load(task_wakes: i64, thread_wakes: i64, seed: u64) {
    let _serial = serial();
    let load = WakeLoad::new(TARGETS, task_wakes, thread_wakes);
    let yielders = Arc::new(Yielders {
        yields: (0..YIELDERS).map(|_| AtomicU64::new(0)).collect(),
        done: (0..YIELDERS).map(|_| AtomicU64::new(0)).collect(),
    });
    let l = load.clone();
    let (log, ops_during_load) = with_deadline("resize_under_load", HANG, move || l.totals(), {
        let (load, yielders) = (load.clone(), yielders.clone());
        move || run_resize_under_load(load, yielders, seed)
    });

    load.assert_exactly_once();
    for i in 0..YIELDERS {
        assert_eq!(
            yielders.yields[i].load(Ordering::Relaxed),
            YIELDS,
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
        ops_during_load >= 10 && log.adds > 0 && log.removes > 0,
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
                for _ in 0..YIELDS {
                    yielders.yields[i].fetch_add(1, Ordering::Relaxed);
                    fairlane::yield_now().await;
                }
                yielders.done[i].fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
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

// ---------------------------------------------------------------------------
// 2. Resize under ping-pong chains: no lost wake-up.
// ---------------------------------------------------------------------------

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
    let (ops, log) = with_deadline("ping_pong_resizing", HANG, progress, move || {
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

/// A poll of a moved task: (task, processor, whether the removal had
/// returned before the poll).
type PollRecord = (usize, Option<ProcessorId>, bool);

// ---------------------------------------------------------------------------
// 3. Removing a processor moves its queued tasks.
// ---------------------------------------------------------------------------

/// A task restricted to `victim` spins there (never yielding) after spawning
/// `K` tasks onto its lanes; helping is off, so they wait there. The test
/// thread starts removing `victim` (which waits for the spinner's poll),
/// then releases the spinner. Every queued task must complete, and none may
/// be polled on `victim` once `remove_processor` has returned.
#[test]
fn removing_a_processor_moves_its_queued_tasks() {
    const K: usize = 200;
    const STEPS: usize = 3;
    let _serial = serial();
    with_deadline("remove_moves_queued", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(2).help_period(0));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let (keeper, victim) = (ids[0], ids[1]);
        let spawned = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let removed = Arc::new(AtomicBool::new(false));
        // (task, processor, whether the removal had returned before the poll)
        let records: Arc<Mutex<Vec<PollRecord>>> = Arc::default();
        let completions: Arc<Vec<AtomicUsize>> =
            Arc::new((0..K).map(|_| AtomicUsize::new(0)).collect());

        let spinner = {
            let (spawned, release, removed) = (spawned.clone(), release.clone(), removed.clone());
            let (records, completions) = (records.clone(), completions.clone());
            fairlane::task::Builder::new()
                .affinity([victim])
                .spawn_on(
                    async move {
                        assert_eq!(current_processor(), Some(victim), "the spinner's processor");
                        let handles: Vec<_> = (0..K)
                            .map(|i| {
                                let (removed, records, completions) =
                                    (removed.clone(), records.clone(), completions.clone());
                                fairlane::spawn(async move {
                                    for _ in 0..STEPS {
                                        let after_removal = removed.load(Ordering::SeqCst);
                                        let p = current_processor();
                                        records.lock().unwrap().push((i, p, after_removal));
                                        fairlane::yield_now().await;
                                    }
                                    completions[i].fetch_add(1, Ordering::SeqCst);
                                })
                            })
                            .collect();
                        spawned.store(true, Ordering::SeqCst);
                        while !release.load(Ordering::SeqCst) {
                            std::hint::spin_loop();
                        }
                        handles
                    },
                    rt.handle(),
                )
                .expect("spawn the spinner")
        };
        wait_for("the spinner to spawn its tasks", || {
            spawned.load(Ordering::SeqCst)
        });
        let remover = {
            let (cluster, removed) = (cluster.clone(), removed.clone());
            thread::spawn(move || {
                let result = cluster.remove_processor(victim);
                removed.store(true, Ordering::SeqCst);
                result
            })
        };
        // Not an assertion: gives the remover time to announce itself before
        // the spinner's poll ends, so that the tasks are still queued on
        // `victim` when it goes. Either way the checks below must hold.
        thread::sleep(Duration::from_millis(50));
        release.store(true, Ordering::SeqCst);
        remover
            .join()
            .unwrap()
            .expect("remove_processor(victim) while it runs a task");
        assert_eq!(cluster.processors(), [keeper]);

        let handles = rt.block_on(spinner).expect("spinner");
        rt.block_on(async {
            for h in handles {
                h.await.expect("moved task");
            }
        });
        for (i, c) in completions.iter().enumerate() {
            assert_eq!(c.load(Ordering::SeqCst), 1, "task {i} completions");
        }
        let records = records.lock().unwrap();
        assert_eq!(records.len(), K * STEPS);
        let mut on_victim = 0;
        for &(i, p, after_removal) in records.iter() {
            let p = p.expect("a task runs on a processor");
            assert!(p == keeper || p == victim, "task {i} polled on {p}");
            if p == victim {
                on_victim += 1;
                assert!(
                    !after_removal,
                    "task {i} was polled on removed {victim} after remove_processor returned"
                );
            }
        }
        // Tasks spawned now run on the keeper only.
        assert_runs_on(&rt, &[keeper]);
        eprintln!(
            "removing_a_processor_moves_its_queued_tasks: {on_victim} of {} polls ran on the \
             victim before its removal",
            records.len()
        );
    });
}

// ---------------------------------------------------------------------------
// 4. Errors.
// ---------------------------------------------------------------------------

#[test]
fn resize_errors() {
    let rt = build(Runtime::builder().processors(2).max_processors(3));
    let cluster = rt.handle().cluster();
    let ids = cluster.processors();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);

    let added = cluster.add_processor().expect("a free slot");
    assert!(!ids.contains(&added));
    assert_eq!(
        sorted(cluster.processors()),
        sorted(vec![ids[0], ids[1], added])
    );
    let err = cluster.add_processor().expect_err("beyond max_processors");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(cluster.processors().len(), 3);

    cluster.remove_processor(ids[0]).expect("remove");
    cluster.remove_processor(added).expect("remove");
    assert_eq!(cluster.processors(), [ids[1]]);
    for gone in [ids[0], added] {
        let err = cluster
            .remove_processor(gone)
            .expect_err("an already-removed processor");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    }
    let err = cluster
        .remove_processor(ids[1])
        .expect_err("the last processor");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(cluster.processors(), [ids[1]]);
    // The runtime keeps working on its last processor.
    assert_runs_on(&rt, &[ids[1]]);
    let sum = rt.block_on(async {
        let tasks: Vec<_> = (0..100u64)
            .map(|i| fairlane::spawn(async move { i }))
            .collect();
        let mut sum = 0;
        for t in tasks {
            sum += t.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, 4950);
}

#[test]
fn a_removed_processors_id_is_never_reused() {
    let _serial = serial();
    let rt = build(Runtime::builder().processors(2).max_processors(2));
    let cluster = rt.handle().cluster();
    let ids = cluster.processors();
    let old = ids[1];
    cluster.remove_processor(old).expect("remove");
    // The only free slot is `old`'s, free once its thread has left.
    let deadline = Instant::now() + HANG;
    let new = loop {
        match cluster.add_processor() {
            Ok(id) => break id,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
                assert!(Instant::now() < deadline, "the slot never came free: {e}");
                thread::sleep(Duration::from_millis(1));
            }
        }
    };
    assert_eq!(new.index(), old.index(), "the same slot");
    assert_ne!(new, old, "a new processor in an old slot is a new identity");
    assert_ne!(new.generation(), old.generation());
    assert_eq!(sorted(cluster.processors()), sorted(vec![ids[0], new]));
    // The stale id names nothing: not for removal, not for affinity.
    let err = cluster.remove_processor(old).expect_err("a stale id");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(sorted(cluster.processors()), sorted(vec![ids[0], new]));
    let err = fairlane::task::Builder::new()
        .affinity([old])
        .spawn_on(async {}, rt.handle())
        .expect_err("affinity naming a removed processor");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let err = rt
        .block_on(rt.spawn(async move { fairlane::task::set_affinity(Some([old])) }))
        .unwrap()
        .expect_err("set_affinity naming a removed processor");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // The new one works.
    let on = fairlane::task::Builder::new()
        .affinity([new])
        .spawn_on(async { current_processor() }, rt.handle())
        .expect("affinity to the new processor");
    assert_eq!(rt.block_on(on).unwrap(), Some(new));
    cluster.remove_processor(new).expect("remove the new one");
    assert_eq!(cluster.processors(), [ids[0]]);
}

#[test]
fn builder_rejects_bad_clusters() {
    let check = |builder: &mut fairlane::Builder, what: &str| {
        let err = builder.build().map(|_| ()).expect_err(what);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
        err.to_string()
    };
    let msg = check(
        Runtime::builder()
            .processors(1)
            .cluster("b", 1)
            .cluster("b", 1),
        "a duplicate cluster name",
    );
    assert!(msg.contains("\"b\""), "{msg}");
    let msg = check(
        Runtime::builder().processors(1).cluster("default", 1),
        "a cluster named like the default one",
    );
    assert!(msg.contains("default"), "{msg}");
    check(
        Runtime::builder().processors(1).cluster("z", 0),
        "a cluster of 0 processors",
    );
    check(
        Runtime::builder().processors(2).max_processors(1),
        "max_processors below the starting processors",
    );
    check(
        Runtime::builder()
            .processors(1)
            .cluster("b", 3)
            .max_processors(2),
        "max_processors below another cluster's starting processors",
    );
    // A good one still builds, with its clusters in order.
    let rt = build(
        Runtime::builder()
            .processors(1)
            .cluster("b", 2)
            .cluster("c", 1),
    );
    let names: Vec<String> = rt.clusters().iter().map(|c| c.name().to_owned()).collect();
    assert_eq!(names, ["default", "b", "c"]);
    assert!(rt.cluster("nope").is_none());
    assert_eq!(rt.cluster("b").unwrap().processors().len(), 2);
    assert_eq!(rt.cluster("c").unwrap().processors().len(), 1);
    assert_eq!(rt.handle().cluster().name(), "default");
}

// ---------------------------------------------------------------------------
// 5. Affinity.
// ---------------------------------------------------------------------------

/// Restricted tasks, each woken alternately by itself (yield) and by a
/// partner (an unrestricted task or a plain thread), under a load of
/// unrestricted yielders, record their processor at every poll step: every
/// record must be in the task's set.
#[test]
fn affinity_keeps_tasks_on_their_processors() {
    const STEPS: usize = 200;
    const PER_SET: usize = 6;
    let _serial = serial();
    with_deadline("affinity", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(3));
        let ids = rt.handle().cluster().processors();
        let sets = [vec![ids[1]], vec![ids[0], ids[2]], vec![ids[2]]];
        let stop_load = Arc::new(AtomicBool::new(false));
        let load: Vec<_> = (0..6)
            .map(|_| {
                let stop = stop_load.clone();
                rt.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..200 {
                            std::hint::spin_loop();
                        }
                        fairlane::yield_now().await;
                    }
                })
            })
            .collect();
        let mut restricted = Vec::new();
        let mut partner_tasks = Vec::new();
        let mut partner_threads = Vec::new();
        for (k, set) in sets.iter().enumerate() {
            for j in 0..PER_SET {
                let to_task = Signal::new();
                let to_partner = Signal::new();
                let task = {
                    let (to_task, to_partner) = (to_task.clone(), to_partner.clone());
                    fairlane::task::Builder::new()
                        .affinity(set.clone())
                        .spawn_on(
                            async move {
                                let mut seen = Vec::with_capacity(2 * STEPS + 1);
                                for _ in 0..STEPS {
                                    seen.push(current_processor());
                                    fairlane::yield_now().await;
                                    seen.push(current_processor());
                                    to_partner.notify();
                                    to_task.wait().await;
                                }
                                seen.push(current_processor());
                                seen
                            },
                            rt.handle(),
                        )
                        .expect("spawn restricted")
                };
                restricted.push((k, task));
                if j % 2 == 0 {
                    partner_tasks.push(rt.spawn(async move {
                        for _ in 0..STEPS {
                            to_partner.wait().await;
                            to_task.notify();
                        }
                    }));
                } else {
                    partner_threads.push(thread::spawn(move || {
                        for _ in 0..STEPS {
                            to_partner.wait_blocking();
                            to_task.notify();
                        }
                    }));
                }
            }
        }
        let mut per_processor = std::collections::BTreeMap::<ProcessorId, usize>::new();
        for (k, task) in restricted {
            let seen = rt.block_on(task).expect("restricted task");
            assert_eq!(seen.len(), 2 * STEPS + 1);
            for p in seen {
                let p = p.expect("a task runs on a processor");
                assert!(
                    sets[k].contains(&p),
                    "a task restricted to {:?} was polled on {p}",
                    sets[k]
                );
                *per_processor.entry(p).or_default() += 1;
            }
        }
        rt.block_on(async {
            for t in partner_tasks {
                t.await.unwrap();
            }
        });
        for t in partner_threads {
            t.join().unwrap();
        }
        stop_load.store(true, Ordering::Relaxed);
        rt.block_on(async {
            for t in load {
                t.await.unwrap();
            }
        });
        eprintln!("affinity: polls per processor {per_processor:?}");
    });
}

#[test]
fn set_affinity_moves_the_calling_task() {
    let _serial = serial();
    with_deadline("set_affinity", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(3));
        let ids = rt.handle().cluster().processors();
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let target = ids[i % 3];
                rt.spawn(async move {
                    fairlane::task::set_affinity(Some([target]))?;
                    fairlane::yield_now().await;
                    let mut seen = Vec::new();
                    for _ in 0..50 {
                        seen.push(current_processor());
                        fairlane::yield_now().await;
                    }
                    seen.push(current_processor());
                    fairlane::task::set_affinity(None::<Vec<ProcessorId>>)?;
                    fairlane::yield_now().await;
                    Ok::<_, std::io::Error>((target, seen))
                })
            })
            .collect();
        for task in tasks {
            let (target, seen) = rt.block_on(task).unwrap().expect("set_affinity");
            for p in seen {
                assert_eq!(
                    p,
                    Some(target),
                    "after set_affinity(Some([{target}])) and a yield"
                );
            }
        }
        // Not in a task: Unsupported, in block_on and on a plain thread.
        let err = fairlane::task::set_affinity(Some([ids[0]])).expect_err("outside a runtime");
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        let err = rt
            .block_on(async { fairlane::task::set_affinity(Some([ids[0]])) })
            .expect_err("in block_on");
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        // Affinity with a priority other than normal: InvalidInput.
        let err = fairlane::task::Builder::new()
            .priority(fairlane::task::Priority::High)
            .affinity([ids[0]])
            .spawn_on(async {}, rt.handle())
            .expect_err("affinity with high priority");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    });
}

/// A task restricted to one processor, parked when that processor is
/// removed, is re-homed when woken and completes on the other one.
#[test]
fn a_parked_task_whose_processor_is_removed_is_rehomed() {
    let _serial = serial();
    with_deadline("rehome_parked", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(2));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let signal = Signal::new();
        let parked = Arc::new(AtomicBool::new(false));
        let task = {
            let (signal, parked) = (signal.clone(), parked.clone());
            fairlane::task::Builder::new()
                .affinity([ids[1]])
                .spawn_on(
                    async move {
                        let before = current_processor();
                        parked.store(true, Ordering::SeqCst);
                        signal.wait().await;
                        let after = current_processor();
                        fairlane::yield_now().await;
                        (before, after, current_processor())
                    },
                    rt.handle(),
                )
                .expect("spawn restricted")
        };
        wait_for("the task to park", || parked.load(Ordering::SeqCst));
        cluster.remove_processor(ids[1]).expect("remove");
        signal.notify();
        let (before, after, last) = rt.block_on(task).expect("re-homed task");
        assert_eq!(before, Some(ids[1]));
        assert_eq!(after, Some(ids[0]), "re-homed onto the remaining processor");
        assert_eq!(last, Some(ids[0]));
    });
}

/// A restricted task queued behind a spinner on its only processor when
/// that processor is removed completes; once the removal has returned it
/// never runs on the removed processor.
#[test]
fn a_queued_task_whose_processor_is_removed_is_rehomed() {
    let _serial = serial();
    with_deadline("rehome_queued", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(2).help_period(0));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let (keeper, victim) = (ids[0], ids[1]);
        let spinning = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let removed = Arc::new(AtomicBool::new(false));
        let spinner = {
            let (spinning, release) = (spinning.clone(), release.clone());
            fairlane::task::Builder::new()
                .affinity([victim])
                .spawn_on(
                    async move {
                        let on = current_processor();
                        spinning.store(true, Ordering::SeqCst);
                        while !release.load(Ordering::SeqCst) {
                            std::hint::spin_loop();
                        }
                        on
                    },
                    rt.handle(),
                )
                .expect("spawn spinner")
        };
        wait_for("the spinner to start", || spinning.load(Ordering::SeqCst));
        let queued: Vec<_> = (0..20)
            .map(|_| {
                let removed = removed.clone();
                fairlane::task::Builder::new()
                    .affinity([victim])
                    .spawn_on(
                        async move {
                            let mut seen = Vec::new();
                            for _ in 0..3 {
                                seen.push((current_processor(), removed.load(Ordering::SeqCst)));
                                fairlane::yield_now().await;
                            }
                            seen
                        },
                        rt.handle(),
                    )
                    .expect("spawn restricted")
            })
            .collect();
        let remover = {
            let (cluster, removed) = (cluster.clone(), removed.clone());
            thread::spawn(move || {
                let result = cluster.remove_processor(victim);
                removed.store(true, Ordering::SeqCst);
                result
            })
        };
        thread::sleep(Duration::from_millis(50)); // not an assertion, see above
        release.store(true, Ordering::SeqCst);
        remover.join().unwrap().expect("remove the victim");
        assert_eq!(rt.block_on(spinner).unwrap(), Some(victim));
        assert_eq!(cluster.processors(), [keeper]);
        for task in queued {
            for (p, after_removal) in rt.block_on(task).expect("re-homed task") {
                let p = p.expect("on a processor");
                if after_removal {
                    assert_eq!(
                        p, keeper,
                        "polled on the removed processor after its removal"
                    );
                } else {
                    assert!(p == keeper || p == victim, "{p}");
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------
// 6. Clusters and migration.
// ---------------------------------------------------------------------------

/// Where the calling task runs: its cluster's name, its processor and its
/// thread's name.
fn whereabouts() -> (String, Option<ProcessorId>, String) {
    (
        Handle::current().cluster().name().to_owned(),
        current_processor(),
        thread_name(),
    )
}

fn assert_on(
    (name, p, thread): &(String, Option<ProcessorId>, String),
    cluster: &str,
    ids: &[ProcessorId],
) {
    assert_eq!(name, cluster, "cluster name (thread {thread})");
    let p = p.expect("a task runs on a processor");
    assert!(ids.contains(&p), "{p} is not one of {cluster}'s {ids:?}");
    let prefix = if cluster == "default" {
        "fairlane-processor-".to_owned()
    } else {
        format!("fairlane-processor-{cluster}-")
    };
    assert!(
        thread.starts_with(&prefix)
            && (cluster != "default" || thread[prefix.len()..].parse::<usize>().is_ok()),
        "task of cluster {cluster} ran on thread {thread}"
    );
}

#[test]
fn cluster_tasks_run_on_the_clusters_processors() {
    let _serial = serial();
    with_deadline("cluster_spawn", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 2));
        let b = rt.cluster("b").expect("cluster b");
        let b_ids = b.processors();
        let d_ids = rt.handle().cluster().processors();
        assert_eq!(b_ids.len(), 2);
        assert_eq!(d_ids.len(), 1);
        let on_b: Vec<_> = (0..40)
            .map(|_| {
                b.spawn(async {
                    let mut seen = Vec::new();
                    for _ in 0..10 {
                        seen.push(whereabouts());
                        fairlane::yield_now().await;
                    }
                    // Spawns from a task of b land on b.
                    let child = fairlane::spawn(async { whereabouts() }).await.unwrap();
                    seen.push(child);
                    seen
                })
            })
            .collect();
        let on_default: Vec<_> = (0..40)
            .map(|_| {
                rt.spawn(async {
                    let mut seen = Vec::new();
                    for _ in 0..10 {
                        seen.push(whereabouts());
                        fairlane::yield_now().await;
                    }
                    seen
                })
            })
            .collect();
        for t in on_b {
            for w in rt.block_on(t).unwrap() {
                assert_on(&w, "b", &b_ids);
            }
        }
        for t in on_default {
            for w in rt.block_on(t).unwrap() {
                assert_on(&w, "default", &d_ids);
            }
        }
        // block_on through b's handle: spawns go to b.
        let (name, child) = b.handle().block_on(async {
            let child = fairlane::spawn(async { whereabouts() });
            (
                Handle::current().cluster().name().to_owned(),
                child.await.unwrap(),
            )
        });
        assert_eq!(name, "b");
        assert_on(&child, "b", &b_ids);
    });
}

#[test]
fn migrate_here_moves_a_task_between_clusters() {
    let _serial = serial();
    with_deadline("migrate_once", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 2));
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let (b_ids, d_ids) = (b.processors(), default.processors());
        let task = {
            let (b, default) = (b.clone(), default.clone());
            rt.spawn(async move {
                let start = whereabouts();
                b.migrate_here().await.expect("migrate to b");
                let on_b = whereabouts();
                fairlane::yield_now().await;
                let on_b_after_yield = whereabouts();
                let child = fairlane::spawn(async { whereabouts() }).await.unwrap();
                // Already there: completes at once.
                b.migrate_here().await.expect("migrate to where it is");
                let still_b = whereabouts();
                default.migrate_here().await.expect("migrate back");
                let back = whereabouts();
                let child_back = fairlane::spawn(async { whereabouts() }).await.unwrap();
                (
                    start,
                    on_b,
                    on_b_after_yield,
                    child,
                    still_b,
                    back,
                    child_back,
                )
            })
        };
        let (start, on_b, on_b_after_yield, child, still_b, back, child_back) =
            rt.block_on(task).unwrap();
        assert_on(&start, "default", &d_ids);
        assert_on(&on_b, "b", &b_ids);
        assert_on(&on_b_after_yield, "b", &b_ids);
        assert_on(&child, "b", &b_ids);
        assert_on(&still_b, "b", &b_ids);
        assert_on(&back, "default", &d_ids);
        assert_on(&child_back, "default", &d_ids);
    });
}

/// Many tasks migrate back and forth between two clusters, also woken by
/// each other through signals on the way; none is lost and every step runs
/// where it should.
#[test]
fn migrating_back_and_forth_loses_nothing() {
    const TASKS: usize = 16;
    const TRIPS: usize = 100;
    let _serial = serial();
    let trips: Arc<Vec<AtomicUsize>> = Arc::new((0..TASKS).map(|_| AtomicUsize::new(0)).collect());
    let t = trips.clone();
    let progress = move || {
        let v: Vec<usize> = t.iter().map(|x| x.load(Ordering::Relaxed)).collect();
        format!("round trips {v:?}")
    };
    let trips2 = trips.clone();
    with_deadline("migrate_many", HANG, progress, move || {
        let trips = trips2;
        let rt = build(Runtime::builder().processors(1).cluster("b", 2));
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let (b_ids, d_ids) = (b.processors(), default.processors());
        // Pairs of tasks ping-pong a token between migrations.
        let signals: Vec<_> = (0..TASKS).map(|_| Signal::new()).collect();
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (b, default, trips) = (b.clone(), default.clone(), trips.clone());
                let (b_ids, d_ids) = (b_ids.clone(), d_ids.clone());
                let mine = signals[i].clone();
                let partner = signals[i ^ 1].clone();
                let leader = i % 2 == 0;
                rt.spawn(async move {
                    for _ in 0..TRIPS {
                        b.migrate_here().await.expect("to b");
                        assert_on(&whereabouts(), "b", &b_ids);
                        if leader {
                            partner.notify();
                            mine.wait().await;
                        } else {
                            mine.wait().await;
                            partner.notify();
                        }
                        assert_on(&whereabouts(), "b", &b_ids);
                        default.migrate_here().await.expect("to default");
                        assert_on(&whereabouts(), "default", &d_ids);
                        fairlane::yield_now().await;
                        assert_on(&whereabouts(), "default", &d_ids);
                        trips[i].fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.expect("migrating task");
            }
        });
    });
    for (i, t) in trips.iter().enumerate() {
        assert_eq!(t.load(Ordering::Relaxed), TRIPS, "task {i} round trips");
    }
}

/// A task's registry entry (what shutdown and `alive_tasks` count) stays
/// with the cluster that spawned it while the task runs elsewhere: it is
/// removed when the task finishes on the other cluster, aborting a moved
/// task works, and dropping the runtime drops a moved task that is parked.
#[test]
fn moved_tasks_stay_counted_and_cancellable_where_they_were_spawned() {
    let _serial = serial();
    with_deadline("migrate_registry", HANG, String::new, || {
        let dropped = Arc::new(AtomicUsize::new(0));
        let rt = build(Runtime::builder().processors(1).cluster("b", 1));
        let b = rt.cluster("b").unwrap();
        let alive = |c: &Handle| c.metrics().alive_tasks;
        let default = rt.handle().clone();
        let b_handle = b.handle().clone();

        // Finishes on b: leaves the default cluster's registry.
        let (b2, counter) = (b.clone(), DropCounter(dropped.clone()));
        let done = rt.spawn(async move {
            let _counter = counter;
            b2.migrate_here().await.expect("to b");
            whereabouts()
        });
        assert_on(&rt.block_on(done).unwrap(), "b", &b.processors());
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(alive(&default), 0);
        assert_eq!(alive(&b_handle), 0);

        // Parked on b: counted on the default cluster only.
        let parked: Vec<_> = (0..2)
            .map(|_| {
                let (b2, counter) = (b.clone(), DropCounter(dropped.clone()));
                rt.spawn(async move {
                    let _counter = counter;
                    b2.migrate_here().await.expect("to b");
                    std::future::pending::<()>().await
                })
            })
            .collect();
        wait_for("both tasks on b", || {
            let polls: u64 = b_handle.metrics().processors.iter().map(|p| p.polls).sum();
            polls >= 3
        });
        assert_eq!(alive(&default), 2);
        assert_eq!(alive(&b_handle), 0);

        // Aborted while on b.
        let mut parked = parked.into_iter();
        let first = parked.next().unwrap();
        let abort = first.abort_handle();
        abort.abort();
        assert!(rt.block_on(first).unwrap_err().is_cancelled());
        assert!(abort.is_finished());
        assert_eq!(dropped.load(Ordering::SeqCst), 2);
        assert_eq!(alive(&default), 1);

        // Dropped by the runtime's shutdown, from the spawning cluster's
        // registry.
        let second = parked.next().unwrap();
        drop(rt);
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
        assert!(second.is_finished());
    });
}

/// `block_in_place` hands the processor to a stand-in thread for a while;
/// back on its own thread, the same poll is still "the current task": moving
/// it, or changing its affinity, works right after.
#[test]
fn the_current_task_survives_block_in_place() {
    let _serial = serial();
    with_deadline("current_after_block_in_place", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 1));
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let (b_ids, d_ids) = (b.processors(), default.processors());
        let task = {
            let b = b.clone();
            let d_ids = d_ids.clone();
            rt.spawn(async move {
                // Something for the stand-in to poll meanwhile.
                let other = fairlane::spawn(async { whereabouts() });
                fairlane::task::block_in_place(|| thread::sleep(Duration::from_millis(20)));
                fairlane::task::set_affinity(Some(d_ids))
                    .expect("set_affinity after block_in_place");
                fairlane::task::block_in_place(|| thread::sleep(Duration::from_millis(20)));
                b.migrate_here()
                    .await
                    .expect("migrate_here after block_in_place");
                (other.await.unwrap(), whereabouts())
            })
        };
        let (other, after) = rt.block_on(task).unwrap();
        // (Polled by the stand-in thread, under the processor's identity.)
        assert_eq!(other.0, "default");
        assert!(d_ids.contains(&other.1.expect("on a processor")));
        assert_on(&after, "b", &b_ids);
    });
}

#[test]
fn migrate_here_outside_a_task_is_unsupported() {
    let rt = build(Runtime::builder().processors(1).cluster("b", 1));
    let b = rt.cluster("b").unwrap();
    let err = rt
        .block_on(b.migrate_here())
        .expect_err("migrate_here in block_on");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    let err = b
        .handle()
        .block_on(b.migrate_here())
        .expect_err("migrate_here in b's block_on");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    // From a task of another runtime.
    let other = build(Runtime::builder().processors(1));
    let b2 = b.clone();
    let result = other.block_on(other.spawn(async move {
        let r = b2.migrate_here().await;
        (
            r,
            Handle::current().cluster().name().to_owned(),
            thread_name(),
        )
    }));
    let (r, name, thread) = result.unwrap();
    let err = r.expect_err("migrate_here onto another runtime's cluster");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert_eq!(name, "default");
    assert!(thread.starts_with("fairlane-processor-"), "{thread}");
    // Both runtimes keep working.
    assert_eq!(rt.block_on(b.spawn(async { 1 })).unwrap(), 1);
    assert_eq!(other.block_on(other.spawn(async { 2 })).unwrap(), 2);
}

/// Tasks parked after migrating (to b, and to b and back) are cancelled by
/// the runtime's drop: each future dropped exactly once, and the drop does
/// not hang.
#[test]
fn dropping_the_runtime_drops_migrated_tasks() {
    const TASKS: usize = 40;
    let _serial = serial();
    let drops = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let (d, p) = (drops.clone(), parked.clone());
    let progress = move || {
        format!(
            "parked {}, dropped {}",
            p.load(Ordering::SeqCst),
            d.load(Ordering::SeqCst)
        )
    };
    let (d, p) = (drops.clone(), parked.clone());
    let signals = with_deadline("drop_migrated", HANG, progress, move || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 2));
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let mut signals = Vec::new();
        for i in 0..TASKS {
            let counter = DropCounter(d.clone());
            let (b, default, parked) = (b.clone(), default.clone(), p.clone());
            let signal = Signal::new();
            signals.push(signal.clone());
            rt.spawn(async move {
                let _counter = counter;
                b.migrate_here().await.unwrap();
                if i % 2 == 1 {
                    default.migrate_here().await.unwrap();
                }
                parked.fetch_add(1, Ordering::SeqCst);
                // Parked for good (never notified before the drop).
                signal.wait().await;
                unreachable!("the signal is only notified after the runtime is gone");
            });
        }
        wait_for("every task to park", || p.load(Ordering::SeqCst) == TASKS);
        assert_eq!(d.load(Ordering::SeqCst), 0, "nothing dropped while running");
        drop(rt);
        signals
    });
    assert_eq!(
        drops.load(Ordering::SeqCst),
        TASKS,
        "each future dropped once"
    );
    // Waking the (cancelled) tasks' old wakers after the drop is harmless.
    for s in signals {
        s.notify();
    }
    assert_eq!(drops.load(Ordering::SeqCst), TASKS);
}

// ---------------------------------------------------------------------------
// 7. Task names.
// ---------------------------------------------------------------------------

#[test]
fn a_named_tasks_join_error_names_it() {
    let rt = build(Runtime::builder().processors(1));
    let task = fairlane::task::Builder::new()
        .name("x")
        .spawn_on(async { panic!("boom") }, rt.handle())
        .expect("spawn");
    let err = rt.block_on(task).expect_err("it panicked");
    assert!(err.is_panic());
    let shown = err.to_string();
    assert!(shown.contains("\"x\""), "{shown}");
    assert!(shown.contains("boom"), "{shown}");

    let task = fairlane::task::Builder::new()
        .name("sleeper")
        .spawn_on(std::future::pending::<()>(), rt.handle())
        .expect("spawn");
    assert!(format!("{task:?}").contains("sleeper"), "{task:?}");
    task.abort();
    let err = rt.block_on(task).expect_err("aborted");
    assert!(err.is_cancelled());
    assert!(err.to_string().contains("\"sleeper\""), "{err}");

    // Unnamed: no name in the message.
    let err = rt
        .block_on(rt.spawn(async { panic!("plain") }))
        .expect_err("it panicked");
    assert_eq!(err.to_string(), r#"task panicked with message "plain""#);
}

// ---------------------------------------------------------------------------
// More: resizing combined with migration, affinity, in-task resizes,
// block_in_place and shutdown.
// ---------------------------------------------------------------------------

/// Like `assert_on` without a fixed set of processors (the cluster is being
/// resized): the cluster's name and its processor threads.
fn assert_in_cluster((name, p, thread): &(String, Option<ProcessorId>, String), cluster: &str) {
    assert_eq!(name, cluster, "cluster name (thread {thread})");
    assert!(p.is_some(), "not on a processor (thread {thread})");
    let prefix = if cluster == "default" {
        "fairlane-processor-".to_owned()
    } else {
        format!("fairlane-processor-{cluster}-")
    };
    assert!(
        thread.starts_with(&prefix),
        "task of cluster {cluster} ran on thread {thread}"
    );
}

/// Tasks migrate back and forth while processors of the target cluster are
/// added and removed.
#[test]
fn migrating_while_the_target_cluster_is_resized() {
    const TASKS: usize = 16;
    const TRIPS: usize = 100;
    let _serial = serial();
    let trips: Arc<Vec<AtomicUsize>> = Arc::new((0..TASKS).map(|_| AtomicUsize::new(0)).collect());
    let t = trips.clone();
    let progress = move || {
        let v: Vec<usize> = t.iter().map(|x| x.load(Ordering::Relaxed)).collect();
        format!("round trips {v:?}")
    };
    let trips2 = trips.clone();
    let (ops, log) = with_deadline("migrate_resizing", HANG, progress, move || {
        let trips = trips2;
        let rt = build(
            Runtime::builder()
                .processors(1)
                .cluster("b", 1)
                .max_processors(4),
        );
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let resizer = Resizer::start(b.clone(), 4, 31);
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (b, default, trips) = (b.clone(), default.clone(), trips.clone());
                rt.spawn(async move {
                    for _ in 0..TRIPS {
                        b.migrate_here().await.expect("to b");
                        assert_in_cluster(&whereabouts(), "b");
                        fairlane::yield_now().await;
                        assert_in_cluster(&whereabouts(), "b");
                        let child = fairlane::spawn(async { whereabouts() }).await.unwrap();
                        assert_in_cluster(&child, "b");
                        default.migrate_here().await.expect("to default");
                        assert_in_cluster(&whereabouts(), "default");
                        trips[i].fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.expect("migrating task");
            }
        });
        let ops = resizer.ops();
        let log = resizer.finish();
        assert_eq!(sorted(b.processors()), sorted(log.live.clone()));
        (ops, log)
    });
    for (i, t) in trips.iter().enumerate() {
        assert_eq!(t.load(Ordering::Relaxed), TRIPS, "task {i} round trips");
    }
    eprintln!("migrating_while_the_target_cluster_is_resized: {ops} resizes; {log:?}");
}

/// Restricted tasks keep to their set while other processors come and go;
/// tasks restricted to a processor that may be removed complete anyway.
#[test]
fn affinity_holds_while_other_processors_are_resized() {
    const STEPS: usize = 300;
    let _serial = serial();
    with_deadline("affinity_resizing", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(3).max_processors(6));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let protected = vec![ids[0], ids[1]];
        let sets = [vec![ids[0], ids[1]], vec![ids[1]], vec![ids[2]]];
        let mut tasks = Vec::new();
        let mut partners = Vec::new();
        for (k, set) in sets.iter().enumerate() {
            for _ in 0..4 {
                let to_task = Signal::new();
                let to_partner = Signal::new();
                let task = {
                    let (to_task, to_partner) = (to_task.clone(), to_partner.clone());
                    fairlane::task::Builder::new()
                        .affinity(set.clone())
                        .spawn_on(
                            async move {
                                let mut seen = Vec::new();
                                for _ in 0..STEPS {
                                    seen.push(current_processor());
                                    fairlane::yield_now().await;
                                    seen.push(current_processor());
                                    to_partner.notify();
                                    to_task.wait().await;
                                }
                                seen
                            },
                            rt.handle(),
                        )
                        .expect("spawn restricted")
                };
                tasks.push((k, task));
                partners.push(thread::spawn(move || {
                    for _ in 0..STEPS {
                        to_partner.wait_blocking();
                        to_task.notify();
                    }
                }));
            }
        }
        // Started once the tasks are spawned: a set naming only a removed
        // processor is (rightly) refused at spawn.
        let resizer = Resizer::start_protecting(cluster.clone(), 6, 41, protected.clone());
        for (k, task) in tasks {
            let seen = rt.block_on(task).expect("restricted task");
            if k < 2 {
                for p in seen {
                    let p = p.expect("on a processor");
                    assert!(
                        sets[k].contains(&p),
                        "restricted to {:?}, polled on {p}",
                        sets[k]
                    );
                }
            }
        }
        for p in partners {
            p.join().unwrap();
        }
        // With at most 3 adds before the cluster is full, 10 changes include
        // a removal.
        wait_for("10 resizes", || resizer.ops() >= 10);
        let ops = resizer.ops();
        let log = resizer.finish();
        assert!(log.removes > 0, "{ops} ops: {log:?}");
        assert!(cluster.processors().contains(&ids[0]) && cluster.processors().contains(&ids[1]));
    });
}

/// A step marker for the hang guard's message.
fn step(at: &Arc<Mutex<&'static str>>, what: &'static str) {
    *at.lock().unwrap() = what;
}

fn progress_of(at: &Arc<Mutex<&'static str>>) -> impl Fn() -> String {
    let at = at.clone();
    move || format!("last step: {}", *at.lock().unwrap())
}

/// A task removes the processor it runs on, then yields: the removal
/// returns, the poll finishes there, and the task continues on another
/// processor.
#[test]
fn a_task_removes_its_own_processor_then_yields() {
    let _serial = serial();
    let at = Arc::new(Mutex::new("start"));
    let progress = progress_of(&at);
    with_deadline("remove_own_processor", HANG, progress, move || {
        let rt = build(Runtime::builder().processors(3).max_processors(4));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let task = {
            let (cluster, at) = (cluster.clone(), at.clone());
            fairlane::task::Builder::new()
                .affinity([ids[2]])
                .spawn_on(
                    async move {
                        let me = current_processor().expect("on a processor");
                        step(&at, "task: removing its own processor");
                        cluster.remove_processor(me)?;
                        step(&at, "task: removed its own processor; yielding");
                        let still = current_processor();
                        fairlane::yield_now().await;
                        step(&at, "task: polled again after the yield");
                        Ok::<_, std::io::Error>((me, still, current_processor()))
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        let (me, still, after) = rt.block_on(task).unwrap().expect("remove own processor");
        step(&at, "joined");
        assert_eq!(me, ids[2]);
        // The poll that removed it finishes on that thread, for which
        // `current_processor()` answers `None` or the removed id.
        assert!(still.is_none() || still == Some(ids[2]), "{still:?}");
        let after = after.expect("on a processor");
        assert_ne!(
            after, ids[2],
            "polled on its removed processor after the removal"
        );
        assert_eq!(sorted(cluster.processors()), sorted(vec![ids[0], ids[1]]));
    });
}

/// `add_processor` and `remove_processor` (of another processor) called by
/// a task.
#[test]
fn a_task_adds_and_removes_processors() {
    let _serial = serial();
    with_deadline("resize_from_task", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(2).max_processors(3));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let task = {
            let (cluster, other) = (cluster.clone(), ids[1]);
            fairlane::task::Builder::new()
                .affinity([ids[0]])
                .spawn_on(
                    async move {
                        let added = cluster.add_processor()?;
                        fairlane::yield_now().await;
                        cluster.remove_processor(other)?;
                        fairlane::yield_now().await;
                        Ok::<_, std::io::Error>((added, current_processor()))
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        let (added, on) = rt.block_on(task).unwrap().expect("resize from a task");
        assert_eq!(on, Some(ids[0]));
        assert_eq!(sorted(cluster.processors()), sorted(vec![ids[0], added]));
        assert_runs_on(&rt, &[ids[0], added]);
    });
}

/// Two tasks on two processors remove each other's processors at the same
/// time: no deadlock (each gives up its own read side while it waits), both
/// removals succeed, and both tasks are re-homed to the last processor.
#[test]
fn two_tasks_remove_each_others_processors_at_once() {
    let _serial = serial();
    let at = Arc::new(Mutex::new("start"));
    let progress = progress_of(&at);
    with_deadline("cross_remove", HANG, progress, move || {
        let rt = build(Runtime::builder().processors(3));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let arrived = Arc::new(AtomicUsize::new(0));
        let removed = Arc::new(AtomicUsize::new(0));
        let cross = |mine: ProcessorId, theirs: ProcessorId| {
            let (cluster, arrived, removed) = (cluster.clone(), arrived.clone(), removed.clone());
            fairlane::task::Builder::new()
                .affinity([mine])
                .spawn_on(
                    async move {
                        arrived.fetch_add(1, Ordering::SeqCst);
                        // Both in a poll on their processors at once.
                        while arrived.load(Ordering::SeqCst) < 2 {
                            std::hint::spin_loop();
                        }
                        let result = cluster.remove_processor(theirs);
                        removed.fetch_add(1, Ordering::SeqCst);
                        // No yield here: a task whose processor was removed
                        // during this poll, woken in it, is another test.
                        (result.map_err(|e| e.to_string()), current_processor())
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        let t1 = cross(ids[1], ids[2]);
        let t2 = cross(ids[2], ids[1]);
        step(&at, "spawned; waiting for both");
        let (r1, p1) = rt.block_on(t1).unwrap();
        step(&at, "first joined");
        let (r2, p2) = rt.block_on(t2).unwrap();
        r1.expect("remove ids[2]");
        r2.expect("remove ids[1]");
        assert_eq!(removed.load(Ordering::SeqCst), 2);
        // The rest of the poll runs on the removed processor's thread, for
        // which `current_processor()` answers `None` (the id names nothing
        // any more) or, at most, the removed id: never another processor.
        assert!(p1.is_none() || p1 == Some(ids[1]), "{p1:?}");
        assert!(p2.is_none() || p2 == Some(ids[2]), "{p2:?}");
        assert_eq!(cluster.processors(), [ids[0]]);
        assert_runs_on(&rt, &[ids[0]]);
    });
}

/// A processor whose task is inside `block_in_place` (its replacement thread
/// running the queue) can be removed; the blocked task then completes.
#[test]
fn removing_a_processor_during_block_in_place() {
    let _serial = serial();
    let at = Arc::new(Mutex::new("start"));
    let progress = progress_of(&at);
    with_deadline("remove_block_in_place", HANG, progress, move || {
        let rt = build(Runtime::builder().processors(2));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let entered = Arc::new(AtomicBool::new(false));
        let go = Signal::new();
        let task = {
            let (entered, go) = (entered.clone(), go.clone());
            fairlane::task::Builder::new()
                .affinity([ids[1]])
                .spawn_on(
                    async move {
                        let before = current_processor();
                        fairlane::task::block_in_place(|| {
                            entered.store(true, Ordering::SeqCst);
                            go.wait_blocking();
                        });
                        fairlane::yield_now().await;
                        (before, current_processor())
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        wait_for("block_in_place to start", || entered.load(Ordering::SeqCst));
        // Other tasks keep running meanwhile.
        assert_eq!(rt.block_on(rt.spawn(async { 5 })).unwrap(), 5);
        step(&at, "removing the processor of the task in block_in_place");
        cluster
            .remove_processor(ids[1])
            .expect("remove a processor whose task is in block_in_place");
        assert_eq!(cluster.processors(), [ids[0]]);
        step(
            &at,
            "removed; block_in_place released; waiting for the task",
        );
        go.notify();
        let (before, after) = rt.block_on(task).expect("task");
        step(&at, "joined");
        assert_eq!(before, Some(ids[1]));
        assert_eq!(
            after,
            Some(ids[0]),
            "re-homed after its processor was removed"
        );
        assert_runs_on(&rt, &[ids[0]]);
    });
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
    with_deadline("drop_while_resizing", HANG, progress, move || {
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
        wait_for("some resizes", || ops.load(Ordering::SeqCst) >= 20);
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

/// `shutdown_graceful` waits for a foreground task that migrated to another
/// cluster.
#[test]
fn graceful_shutdown_waits_for_migrated_tasks() {
    let _serial = serial();
    with_deadline("graceful_migrated", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 1));
        let b = rt.cluster("b").unwrap();
        let finished = Arc::new(AtomicBool::new(false));
        let migrated = Arc::new(AtomicBool::new(false));
        let go = Signal::new();
        {
            let (finished, migrated, go) = (finished.clone(), migrated.clone(), go.clone());
            rt.spawn(async move {
                b.migrate_here().await.unwrap();
                migrated.store(true, Ordering::SeqCst);
                go.wait().await;
                fairlane::yield_now().await;
                finished.store(true, Ordering::SeqCst);
            });
        }
        wait_for("the task to migrate", || migrated.load(Ordering::SeqCst));
        let notifier = {
            let go = go.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                go.notify();
            })
        };
        rt.shutdown_graceful(Duration::from_secs(1));
        assert!(
            finished.load(Ordering::SeqCst),
            "shutdown_graceful returned before a foreground task (migrated to b) finished"
        );
        notifier.join().unwrap();
    });
}

/// Migrating clears a task's affinity (it named the old cluster's
/// processors): the task runs on the target cluster.
#[test]
fn migrating_a_restricted_task_clears_its_affinity() {
    let _serial = serial();
    with_deadline("migrate_restricted", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(2).cluster("b", 1));
        let b = rt.cluster("b").unwrap();
        let d_ids = rt.handle().cluster().processors();
        let b_ids = b.processors();
        let task = {
            let b = b.clone();
            fairlane::task::Builder::new()
                .affinity([d_ids[1]])
                .spawn_on(
                    async move {
                        let start = whereabouts();
                        b.migrate_here().await.unwrap();
                        let mut seen = vec![start];
                        for _ in 0..10 {
                            seen.push(whereabouts());
                            fairlane::yield_now().await;
                        }
                        seen
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        let seen = rt.block_on(task).unwrap();
        assert_on(&seen[0], "default", &[d_ids[1]]);
        for w in &seen[1..] {
            assert_on(w, "b", &b_ids);
        }
    });
}

/// I/O under continuous resizing, on both backends: TCP round trips (an
/// echo server task per connection, clients that check every echo), short
/// sleeps, `block_in_place` and file reads, while processors are added and
/// removed every 0.5-2 ms.
/// Every operation waiting on a removed processor's engine must carry on
/// elsewhere: no round trip may fail, hang or return the wrong bytes.
#[test]
fn io_round_trips_under_continuous_resizing() {
    io_under_resizing(fairlane::io::IoBackend::IoUring, 41);
}

#[test]
fn io_round_trips_under_continuous_resizing_fallback() {
    io_under_resizing(fairlane::io::IoBackend::Fallback, 43);
}

fn io_under_resizing(backend: fairlane::io::IoBackend, seed: u64) {
    const CONNECTIONS: u32 = 16;
    const ROUNDS: u32 = 200;
    let done = Arc::new(AtomicU64::new(0));
    let progress = done.clone();
    let (log, ops) = with_deadline(
        "io_under_resizing",
        HANG,
        move || format!("{} round trips done", progress.load(Ordering::Relaxed)),
        move || {
            let rt = build(
                Runtime::builder()
                    .processors(2)
                    .max_processors(MAX)
                    .io_backend(backend),
            );
            let cluster = rt.handle().cluster();
            let resizer = Resizer::start(cluster.clone(), MAX, seed);
            rt.block_on(async {
                let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .unwrap();
                let addr = listener.local_addr().unwrap();
                let server = fairlane::spawn(async move {
                    loop {
                        let (stream, _) = listener.accept().await.unwrap();
                        fairlane::spawn(async move {
                            let mut buf = Vec::with_capacity(64);
                            loop {
                                let (n, b) = stream.read_owned(buf).await;
                                if n.unwrap() == 0 {
                                    return;
                                }
                                let (r, b) = stream.write_all_owned(b).await;
                                r.unwrap();
                                buf = b;
                            }
                        });
                    }
                });
                let clients: Vec<_> = (0..CONNECTIONS)
                    .map(|c| {
                        let done = done.clone();
                        fairlane::spawn(async move {
                            let stream = fairlane::net::TcpStream::connect(addr).await.unwrap();
                            for round in 0..ROUNDS {
                                let msg = format!("{c}:{round}").into_bytes();
                                let (r, msg) = stream.write_all_owned(msg).await;
                                r.unwrap();
                                let mut got = Vec::new();
                                while got.len() < msg.len() {
                                    let (n, buf) = stream.read_owned(Vec::with_capacity(64)).await;
                                    assert!(n.unwrap() > 0, "the echo closed early");
                                    got.extend_from_slice(&buf);
                                }
                                assert_eq!(got, msg, "connection {c} round {round}");
                                match round % 16 {
                                    0 => fairlane::time::sleep(Duration::from_micros(200)).await,
                                    // The processor goes to a stand-in thread
                                    // and back (it may be removed meanwhile).
                                    5 => fairlane::task::block_in_place(|| {
                                        thread::sleep(Duration::from_micros(100))
                                    }),
                                    // A file read from a task: its operation
                                    // may land on a ring that goes next.
                                    9 => {
                                        let got = fairlane::fs::read(concat!(
                                            env!("CARGO_MANIFEST_DIR"),
                                            "/Cargo.toml"
                                        ))
                                        .await
                                        .unwrap();
                                        assert!(!got.is_empty());
                                    }
                                    _ => {}
                                }
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                        })
                    })
                    .collect();
                for c in clients {
                    c.await.unwrap();
                }
                server.abort();
            });
            let ops = resizer.ops();
            (resizer.finish(), ops)
        },
    );
    assert!(
        log.removes > 0 && ops > 0,
        "the cluster was resized while the I/O ran: {log:?}"
    );
}

/// A runtime of two processors (at most two) on io_uring.
fn two_processors_on_io_uring() -> Runtime {
    build(
        Runtime::builder()
            .processors(2)
            .max_processors(2)
            .io_backend(fairlane::io::IoBackend::IoUring),
    )
}

/// A slot reused after a removal has an engine of its own, and threads that
/// are not processors (here `block_on` threads reading a file) submit to it
/// through the driver's submission thread. (Its table was indexed by
/// arrival, not by slot: after a reuse it submitted the stopped engine's
/// ring and the read never reached the kernel.)
#[test]
fn io_from_outside_threads_after_a_slot_is_reused() {
    with_deadline("outside_io_after_reuse", HANG, String::new, || {
        let rt = two_processors_on_io_uring();
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        cluster.remove_processor(ids[1]).unwrap();
        let added = loop {
            match cluster.add_processor() {
                Ok(added) => break added,
                // The removed processor's thread has not left yet.
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        };
        assert_eq!(added.index(), ids[1].index());
        let path =
            std::env::temp_dir().join(format!("fairlane-clusters-reuse-{}", std::process::id()));
        std::fs::write(&path, b"hello").unwrap();
        // Round-robin choice of engine for outside threads: several reads
        // reach both, the new one included.
        for _ in 0..8 {
            let got = rt.block_on(fairlane::fs::read(&path)).unwrap();
            assert_eq!(got, b"hello");
        }
        let _ = std::fs::remove_file(&path);
    });
}

/// Processor B, sleeping, helps processor A (busy in a long poll) by
/// submitting A's batched receive; then B is removed and its thread exits,
/// which makes the kernel cancel the requests that thread submitted, on
/// A's ring too. The receive is done again and gets its data.
#[test]
fn io_submitted_by_a_removed_helper_is_done_again() {
    use std::future::Future;
    use std::io::Write;
    use std::task::Context;
    with_deadline("helper_removed", HANG, String::new, || {
        let rt = two_processors_on_io_uring();
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let (a, b) = (ids[0], ids[1]);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let task = fairlane::task::Builder::new()
            .affinity([a])
            .spawn_on(
                async move {
                    let conn = fairlane::net::TcpStream::connect(addr).await?;
                    let mut read = Box::pin(conn.read_owned(Vec::with_capacity(16)));
                    // Batched on A's ring, not yet submitted.
                    assert!(read
                        .as_mut()
                        .poll(&mut Context::from_waker(std::task::Waker::noop()))
                        .is_pending());
                    // B goes through park again, now watching A.
                    let _ = fairlane::task::Builder::new().affinity([b]).spawn(async {});
                    let until = Instant::now() + Duration::from_millis(100);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    ready_tx.send(()).unwrap();
                    let (n, buf) = read.await;
                    n?;
                    Ok::<_, std::io::Error>(buf)
                },
                rt.handle(),
            )
            .unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        ready_rx.recv().unwrap();
        thread::sleep(Duration::from_millis(20));
        cluster.remove_processor(b).unwrap();
        thread::sleep(Duration::from_millis(100));
        peer.write_all(b"data").unwrap();
        assert_eq!(rt.block_on(task).unwrap().unwrap(), b"data");
    });
}

/// A restricted task whose event is reaped by its own processor while that
/// processor sleeps (a timer fired, a completion reaped inside the host's
/// park): the push comes from the sleeper itself, and only it may run the
/// task, so the sleep must end. (It did not: the task waited until something
/// else woke the processor, here forever.)
#[test]
fn restricted_task_woken_from_its_own_processors_sleep() {
    with_deadline("restricted_self_wake", HANG, String::new, || {
        let rt = build(Runtime::builder().processors(2));
        let ids = rt.handle().cluster().processors();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let task = fairlane::task::Builder::new()
            .affinity([ids[1]])
            .spawn_on(
                async move {
                    for _ in 0..5 {
                        fairlane::time::sleep(Duration::from_millis(2)).await;
                    }
                    let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
                    addr_tx.send(listener.local_addr()?).unwrap();
                    listener.accept().await.map(drop)
                },
                rt.handle(),
            )
            .unwrap();
        let addr = addr_rx.recv().expect("the task bound its listener");
        // The task waits in accept; its processor goes to sleep meanwhile.
        thread::sleep(Duration::from_millis(20));
        let _client = std::net::TcpStream::connect(addr).unwrap();
        rt.block_on(task).unwrap().unwrap();
    });
}

/// Timers and sockets on processors that are added and removed, on both I/O
/// backends: sleeps registered on a removed processor's wheel still fire
/// (they move to the remaining processors); an accept and a read waiting on
/// the removed processor's engine (its ring, or its poller) carry on
/// elsewhere and complete when their peer acts, with the data intact; a
/// processor added into a reused slot does I/O on an engine of its own.
#[test]
fn timers_and_io_survive_resizing() {
    io_survives_resizing(fairlane::io::IoBackend::IoUring);
}

#[test]
fn timers_and_io_survive_resizing_fallback() {
    io_survives_resizing(fairlane::io::IoBackend::Fallback);
}

fn io_survives_resizing(backend: fairlane::io::IoBackend) {
    use std::io::Write;
    let rt = fairlane::Runtime::builder()
        .processors(3)
        .max_processors(3)
        .io_backend(backend)
        .build()
        .unwrap();
    assert_eq!(rt.io_backend(), backend);
    let cluster = rt.handle().cluster();
    let ids = cluster.processors();
    // Sleepers restricted to the processor about to go: their timers are on
    // its wheel.
    let sleepers: Vec<_> = (0..20)
        .map(|i| {
            fairlane::task::Builder::new()
                .affinity([ids[2]])
                .spawn_on(
                    async move {
                        fairlane::time::sleep(std::time::Duration::from_millis(20 + i)).await;
                        i
                    },
                    rt.handle(),
                )
                .unwrap()
        })
        .collect();
    // On that processor: a listener with an accept waiting, and a connected
    // stream with a read waiting (a std client on the other side).
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (waiting_tx, waiting_rx) = std::sync::mpsc::channel();
    let server = fairlane::task::Builder::new()
        .affinity([ids[2]])
        .spawn_on(
            async move {
                let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
                addr_tx.send(listener.local_addr()?).unwrap();
                let (conn, _) = listener.accept().await?;
                waiting_tx.send(()).unwrap();
                let read = conn.read_owned(Vec::with_capacity(16));
                let second = listener.accept();
                // Both wait on this processor's engine when it goes.
                let ((n, buf), accepted) = futures_lite::future::zip(read, second).await;
                let mut got = buf;
                got.truncate(n?);
                accepted?;
                Ok::<_, std::io::Error>(got)
            },
            rt.handle(),
        )
        .unwrap();
    let addr = addr_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the listener never bound");
    let mut first = std::net::TcpStream::connect(addr).unwrap();
    waiting_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the first connection was never accepted");
    // Let the read and the second accept reach the engine.
    std::thread::sleep(std::time::Duration::from_millis(20));
    cluster.remove_processor(ids[2]).unwrap();
    first.write_all(b"after removal").unwrap();
    let _second = std::net::TcpStream::connect(addr).unwrap();
    let got = rt
        .block_on(server)
        .unwrap()
        .expect("the read and the accept carry on after their processor is removed");
    assert_eq!(got, b"after removal");
    drop(first);
    let total: u64 = rt.block_on(async {
        let mut total = 0;
        for s in sleepers {
            total += s.await.unwrap();
        }
        total
    });
    assert_eq!(total, (0..20).sum::<u64>());
    // The slot comes back with a fresh engine: a round trip through a task
    // restricted to the new processor.
    let added = cluster.add_processor().unwrap();
    assert_eq!(added.index(), ids[2].index());
    let echo = fairlane::task::Builder::new()
        .affinity([added])
        .spawn_on(
            async move {
                let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let client = fairlane::spawn(async move {
                    let s = fairlane::net::TcpStream::connect(addr).await?;
                    let (r, _) = s.write_all_owned(b"ping".to_vec()).await;
                    r
                });
                let (conn, _) = listener.accept().await?;
                let (n, buf) = conn.read_owned(vec![0u8; 4]).await;
                client.await.unwrap()?;
                Ok::<_, std::io::Error>(buf[..n?].to_vec())
            },
            rt.handle(),
        )
        .unwrap();
    assert_eq!(rt.block_on(echo).unwrap().unwrap(), b"ping");
}
