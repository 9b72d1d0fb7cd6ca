//! The workloads, each written once against [`BenchRuntime`].
//!
//! A workload builds its tasks on a runtime the child process already built,
//! lets them run through a warm-up, measures a window (see
//! [`crate::harness::measure`]), hands its [`Outcome`] to `emit` *before*
//! tearing down, and then stops and joins every task. Emitting first means a
//! runtime that hangs or crashes at shutdown still gets its measurement
//! recorded; the child's teardown watchdog reports the hang separately.
//!
//! Each module's documentation defines its workload: what a task does, what
//! one operation is, and what is measured.

use crate::harness::{measure, Counters, Window};
use crate::runtimes::{BenchRuntime, Spawner, MOVE_CAUSES};
use crate::spec::{ChildSpec, Metric, Outcome, SpawnFrom, Status, Workload};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub mod churn;
pub mod cycle;
pub mod echo;
pub mod http;
pub mod idle;
pub mod locality;
pub mod memcached;
pub mod serve;
pub mod server_cpu;
pub mod spawn;
pub mod transfer;
pub mod wake;
pub mod yielding;

/// Where a workload hands its result, before teardown.
pub type Emit<'a> = &'a mut dyn FnMut(Outcome);

/// Runs `spec.workload` on `rt`.
pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    match spec.workload {
        Workload::Cycle => cycle::run(rt, spec, emit),
        Workload::Yield => yielding::run(rt, spec, emit),
        Workload::Churn => churn::run(rt, spec, emit),
        Workload::Locality => locality::run(rt, spec, emit),
        Workload::Transfer => transfer::run(rt, spec, false, emit),
        Workload::TransferPark => transfer::run(rt, spec, true, emit),
        Workload::Spawn => spawn::run(rt, spec, emit),
        Workload::Wake => wake::run(rt, spec, emit),
        Workload::Idle => idle::run(rt, spec, emit),
        Workload::Echo => echo::run(rt, spec, emit),
        Workload::Memcached => memcached::run(rt, spec, emit),
        Workload::Http => http::run(rt, spec, emit),
        Workload::HttpAxum => http::run_axum(rt, spec, emit),
        Workload::Hang => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
    }
}

/// The outcome of a measurement that could not run.
pub(crate) fn crashed(detail: String) -> Outcome {
    Outcome {
        status: Status::Crashed,
        detail: Some(detail),
        ..Outcome::default()
    }
}

/// A spawned task's join future, boxed so that every shape gives one type.
pub(crate) type Join = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Spawns tasks `0..n`, task `i` running `make(i)`, as `spec.shape` says:
/// from the future given to `block_on`, or from one spawner task per
/// processor, each spawning a run of consecutive tasks that starts at a
/// multiple of `group` (whole cycle rings stay with one spawner); each
/// future boxed as `Pin<Box<dyn Future + Send>>` first if the shape boxes.
/// Returns the join futures, in task order.
pub(crate) fn spawn_tasks<R, F, Fut>(
    rt: &R,
    spec: &ChildSpec,
    n: usize,
    group: usize,
    make: F,
) -> Vec<Join>
where
    R: BenchRuntime,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let spawner = rt.spawner();
    let boxed = spec.shape.boxed;
    let make = Arc::new(make);
    let one = move |sp: &R::Spawner, i: usize| -> Join {
        let task = make(i);
        if boxed {
            let task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(task);
            Box::pin(sp.spawn(task))
        } else {
            Box::pin(sp.spawn(task))
        }
    };
    match spec.shape.spawn {
        SpawnFrom::Main => rt.block_on(async move { (0..n).map(|i| one(&spawner, i)).collect() }),
        SpawnFrom::Spread => {
            let spawners = rt.processors().max(1);
            let groups = n.div_ceil(group.max(1));
            let bounds: Vec<usize> = (0..=spawners)
                .map(|k| (groups * k / spawners * group).min(n))
                .collect();
            rt.block_on(async move {
                let spawned: Vec<_> = bounds
                    .windows(2)
                    .map(|b| {
                        let (sp, one, range) = (spawner.clone(), one.clone(), b[0]..b[1]);
                        spawner
                            .spawn(async move { range.map(|i| one(&sp, i)).collect::<Vec<Join>>() })
                    })
                    .collect();
                let mut joins = Vec::with_capacity(n);
                for s in spawned {
                    joins.extend(s.await);
                }
                joins
            })
        }
    }
}

/// Sleeps through the warm-up, then measures `counters` over the window
/// (see [`measure`]), reading the runtime's move counters
/// ([`BenchRuntime::moves`]) as the window opens and closes: the window,
/// and each cause's moves per 1000 operations as metrics (none for a
/// runtime that does not count them, nor on one processor, where nothing
/// moves).
pub(crate) fn measure_with_moves<R: BenchRuntime>(
    rt: &R,
    counters: &Counters,
    spec: &ChildSpec,
) -> (Window, Vec<Metric>) {
    let moves = || {
        if rt.processors() > 1 {
            rt.moves()
        } else {
            None
        }
    };
    std::thread::sleep(spec.warmup());
    let before = moves();
    let w = measure(counters, Duration::ZERO, spec.duration(), None, 0);
    let after = moves();
    let metrics = match (before, after) {
        (Some(b), Some(a)) if w.delta.ops > 0 => MOVE_CAUSES
            .iter()
            .zip(a.iter().zip(b))
            .map(|(name, (a, b))| {
                let per_kop = 1000.0 * a.saturating_sub(b) as f64 / w.delta.ops as f64;
                Metric::new(name, per_kop, "/kop")
            })
            .collect(),
        _ => Vec::new(),
    };
    (w, metrics)
}

/// Joins every task of a workload on the driver thread.
pub(crate) fn join_all<R: BenchRuntime, F: std::future::Future>(rt: &R, joins: Vec<F>) {
    rt.block_on(async move {
        for j in joins {
            j.await;
        }
    });
}

impl ChildSpec {
    /// The warm-up before a measurement window.
    pub fn warmup(&self) -> Duration {
        Duration::from_millis(self.warmup_ms)
    }
    /// The measurement window.
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }
    /// The starvation threshold.
    pub fn starve_threshold(&self) -> Duration {
        Duration::from_millis(self.starve_threshold_ms)
    }
}
