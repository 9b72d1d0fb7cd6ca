//! Helpers for the tests that resize clusters and move tasks between them
//! (`tests/clusters/`):
//!
//! - [`Resizer`]: a plain thread adding and removing a cluster's processors
//!   at random, checking `Cluster::processors` against its own bookkeeping
//!   after every change.
//! - [`grow_and_shrink`] and [`assert_runs_on`]: after resizing, the cluster
//!   still grows to its maximum and shrinks to one processor, and tasks run
//!   on exactly the processors it has.
//! - [`whereabouts`], [`assert_on`], [`assert_in_cluster`]: where a task
//!   runs (cluster, processor, thread) and the checks on it.
//! - [`Trips`]: per-task round-trip counters for migrating tasks, with the
//!   hang guard's progress message.
//! - [`Steps`]: the last step a scenario reached, for the hang guard's
//!   message.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fairlane::task::{current_processor, ProcessorId};
use fairlane::{Cluster, Handle, Runtime};

use super::{with_deadline, Rng, DEADLINE};

/// Builds a runtime from `builder`.
pub fn build(builder: &mut fairlane::Builder) -> Runtime {
    builder.build().expect("build runtime")
}

/// `ids`, sorted.
pub fn sorted(mut ids: Vec<ProcessorId>) -> Vec<ProcessorId> {
    ids.sort();
    ids
}

/// The name of the calling thread (processor threads are named
/// `fairlane-processor-{p}` in the default cluster and
/// `fairlane-processor-{cluster}-{p}` in the others).
pub fn thread_name() -> String {
    thread::current().name().unwrap_or("<unnamed>").to_owned()
}

/// What a [`Resizer`] did.
#[derive(Debug, Default)]
pub struct ResizeLog {
    pub adds: u64,
    pub removes: u64,
    /// `add_processor` refused with fewer than `max` processors: a removed
    /// processor's thread had not left yet (documented).
    pub slot_busy: u64,
    /// Removals of an already-removed id, rejected as they must be.
    pub stale_rejected: u64,
    /// The processors the resizer believes the cluster has at the end.
    pub live: Vec<ProcessorId>,
}

/// A plain thread adding and removing processors of a cluster.
pub struct Resizer {
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
    thread: thread::JoinHandle<ResizeLog>,
}

impl Resizer {
    /// Starts adding and removing processors of `cluster` (never removing
    /// the last, never more than `max`), a random choice every 0.5-2 ms,
    /// checking `cluster.processors()` against its own bookkeeping after each
    /// change.
    pub fn start(cluster: Cluster, max: usize, seed: u64) -> Resizer {
        Self::start_protecting(cluster, max, seed, Vec::new())
    }

    /// [`start`](Self::start), never removing the processors `protected`.
    pub fn start_protecting(
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

    /// The changes made so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    /// Stops the resizer and returns its log (re-raising its panic).
    pub fn finish(self) -> ResizeLog {
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

/// Adds a processor to `cluster`, waiting (up to [`DEADLINE`]) while the
/// only free slots belong to removed processors whose threads have not
/// left yet.
pub fn add_when_a_slot_is_free(cluster: &Cluster) -> ProcessorId {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match cluster.add_processor() {
            Ok(id) => return id,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
                assert!(
                    Instant::now() < deadline,
                    "a removed processor's slot never came free ({} processors): {e}",
                    cluster.processors().len()
                );
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// Removes `victim` from a plain thread while a task polled on it spins
/// until `release`: starts the removal (which waits for that poll to end),
/// gives the remover a moment to announce itself, so that the tasks queued
/// on `victim` are still there when it goes (not an assertion: the
/// caller's checks must hold either way), releases the spinner, and
/// returns the removal's result. `removed` is set as soon as the removal
/// has returned.
pub fn remove_while_spinning(
    cluster: &Cluster,
    victim: ProcessorId,
    release: &AtomicBool,
    removed: &Arc<AtomicBool>,
) -> std::io::Result<()> {
    let remover = {
        let (cluster, removed) = (cluster.clone(), removed.clone());
        thread::spawn(move || {
            let result = cluster.remove_processor(victim);
            removed.store(true, Ordering::SeqCst);
            result
        })
    };
    thread::sleep(Duration::from_millis(50));
    release.store(true, Ordering::SeqCst);
    remover.join().expect("the remover thread")
}

/// After resizing: every removed processor's slot comes free again (its
/// thread left), so the cluster grows back to `max`; then it shrinks to one
/// processor, and tasks keep running on exactly the processors it has.
pub fn grow_and_shrink(rt: &Runtime, cluster: &Cluster, max: usize) {
    while cluster.processors().len() < max {
        add_when_a_slot_is_free(cluster);
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
pub fn assert_runs_on(rt: &Runtime, ids: &[ProcessorId]) {
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

/// Where a task runs: its cluster's name, its processor and its thread's
/// name.
pub type Whereabouts = (String, Option<ProcessorId>, String);

/// Where the calling task runs.
pub fn whereabouts() -> Whereabouts {
    (
        Handle::current().cluster().name().to_owned(),
        current_processor(),
        thread_name(),
    )
}

/// The name prefix of `cluster`'s processor threads.
fn thread_prefix(cluster: &str) -> String {
    if cluster == "default" {
        "fairlane-processor-".to_owned()
    } else {
        format!("fairlane-processor-{cluster}-")
    }
}

/// Asserts that `w` is on one of `ids`, processors of `cluster`, on one of
/// its processor threads.
pub fn assert_on((name, p, thread): &Whereabouts, cluster: &str, ids: &[ProcessorId]) {
    assert_eq!(name, cluster, "cluster name (thread {thread})");
    let p = p.expect("a task runs on a processor");
    assert!(ids.contains(&p), "{p} is not one of {cluster}'s {ids:?}");
    let prefix = thread_prefix(cluster);
    assert!(
        thread.starts_with(&prefix)
            && (cluster != "default" || thread[prefix.len()..].parse::<usize>().is_ok()),
        "task of cluster {cluster} ran on thread {thread}"
    );
}

/// Like [`assert_on`] without a fixed set of processors (the cluster is
/// being resized): the cluster's name and its processor threads.
pub fn assert_in_cluster((name, p, thread): &Whereabouts, cluster: &str) {
    assert_eq!(name, cluster, "cluster name (thread {thread})");
    assert!(p.is_some(), "not on a processor (thread {thread})");
    assert!(
        thread.starts_with(&thread_prefix(cluster)),
        "task of cluster {cluster} ran on thread {thread}"
    );
}

/// Round trips per migrating task.
#[derive(Clone)]
pub struct Trips(Arc<Vec<AtomicUsize>>);

impl Trips {
    /// Counters for `tasks` tasks.
    pub fn new(tasks: usize) -> Self {
        Self(Arc::new((0..tasks).map(|_| AtomicUsize::new(0)).collect()))
    }

    /// Counts a round trip of task `i`.
    pub fn done(&self, i: usize) {
        self.0[i].fetch_add(1, Ordering::Relaxed);
    }

    /// The hang guard's message: every task's round trips so far.
    pub fn progress(&self) -> impl Fn() -> String {
        let trips = self.clone();
        move || {
            let v: Vec<usize> = trips.0.iter().map(|x| x.load(Ordering::Relaxed)).collect();
            format!("round trips {v:?}")
        }
    }

    /// Runs `scenario` with these counters under the deadline (see
    /// [`with_deadline`]), their counts in its hang message.
    pub fn run<T: Send + 'static>(
        &self,
        name: &str,
        scenario: impl FnOnce(Trips) -> T + Send + 'static,
    ) -> T {
        let trips = self.clone();
        with_deadline(name, DEADLINE, self.progress(), move || scenario(trips))
    }

    /// Asserts that every task made `trips` round trips.
    pub fn assert_each(&self, trips: usize) {
        for (i, t) in self.0.iter().enumerate() {
            assert_eq!(t.load(Ordering::Relaxed), trips, "task {i} round trips");
        }
    }
}

/// The last step a scenario reached, for the hang guard's message.
#[derive(Clone)]
pub struct Steps(Arc<Mutex<&'static str>>);

impl Steps {
    pub fn new() -> Self {
        Self(Arc::new(Mutex::new("start")))
    }

    /// Marks `what` as the step reached.
    pub fn reached(&self, what: &'static str) {
        *self.0.lock().unwrap() = what;
    }

    /// The hang guard's message: the last step reached.
    pub fn progress(&self) -> impl Fn() -> String {
        let steps = self.clone();
        move || format!("last step: {}", *steps.0.lock().unwrap())
    }
}
