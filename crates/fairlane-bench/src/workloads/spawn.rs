//! **spawn**: the cost of a task.
//!
//! * `ns/spawn`: one spawner task per processor, each spawning an empty task
//!   and awaiting it, over and over; wall-clock nanoseconds per
//!   spawn-and-join (all spawners together).
//! * `B/task`: bytes of memory per parked task. [`PARKED`] tasks are spawned
//!   that each wait on one shared semaphore (whose waiter queue is allocated
//!   beforehand, so it allocates nothing); once all of them are parked, the
//!   bytes the counting global allocator saw allocated and not freed since
//!   just before the first spawn, divided by the task count, are the runtime's
//!   cost of a parked task (task cell, join handle, queue slots).
//! * `B/task, 128 B future`: the same with a future that also holds
//!   [`PAD`] bytes across its wait, as a task with some state of its own
//!   does: where each runtime's cell rounds a larger future up to.

use super::{join_all, Emit};
use crate::alloc::Counting;
use crate::harness::{measure, wait_until, Counters, Stop};
use crate::runtimes::{BenchRuntime, Spawner};
use crate::spec::{ChildSpec, Metric, Outcome};
use crate::sync::{Padded, Semaphore};
use std::sync::Arc;
use std::time::Duration;

/// Tasks parked for the memory measurement.
pub const PARKED: usize = 10_000;

/// Bytes of state the larger future keeps across its wait.
pub const PAD: usize = 128;

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let ns_per_spawn = spawn_and_join(rt, spec);
    let bytes = bytes_per_parked_task(rt, |gate| async move {
        let _ = gate.wait().await;
    });
    let padded = bytes_per_parked_task(rt, |gate| async move {
        let state = [1u8; PAD];
        let _ = gate.wait().await;
        std::hint::black_box(&state);
    });
    let mut metrics = vec![Metric::new("ns/spawn", ns_per_spawn, "ns")];
    if let Some(b) = bytes {
        metrics.push(Metric::new("B/task", b, "B"));
    }
    if let Some(b) = padded {
        metrics.push(Metric::new("B/task, 128 B future", b, "B"));
    }
    emit(Outcome {
        metrics,
        detail: (bytes.is_none() || padded.is_none())
            .then(|| format!("the {PARKED} tasks did not all park within 20 s")),
        ..Outcome::default()
    });
}

fn spawn_and_join<R: BenchRuntime>(rt: &R, spec: &ChildSpec) -> f64 {
    let n = spec.processors.max(1);
    let counters = Arc::new(Counters::new(n));
    let stop = Arc::new(Stop::default());
    let spawner = rt.spawner();
    let joins: Vec<_> = (0..n)
        .map(|i| {
            let (counters, stop, inner) = (counters.clone(), stop.clone(), spawner.clone());
            spawner.spawn(async move {
                let slot = counters.slot(i);
                let mut ops = 0;
                while !stop.is_set() {
                    inner.spawn(async {}).await;
                    ops += 1;
                    slot.publish(ops, 0);
                }
            })
        })
        .collect();
    let w = measure(&counters, spec.warmup(), spec.duration(), None, 0);
    stop.set();
    join_all(rt, joins);
    w.ns_per_op()
}

/// Bytes per task of [`PARKED`] tasks `task(gate)`, each parked on `gate`.
fn bytes_per_parked_task<R: BenchRuntime, F>(
    rt: &R,
    task: impl Fn(Arc<Semaphore>) -> F,
) -> Option<f64>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let gate = Arc::new(Semaphore::<Padded>::counting_with_capacity(0, PARKED));
    let spawner = rt.spawner();
    let mut joins = Vec::with_capacity(PARKED);
    Counting::start();
    for _ in 0..PARKED {
        joins.push(spawner.spawn(task(gate.clone())));
    }
    let parked = wait_until(Duration::from_secs(20), || gate.waiting() == PARKED);
    let bytes = Counting::stop();
    gate.close();
    join_all(rt, joins);
    parked.then(|| bytes as f64 / PARKED as f64)
}
