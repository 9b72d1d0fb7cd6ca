//! **cycle**: tasks in rings of 5; each waits on its own binary semaphore,
//! then posts the next one's. One token circulates per ring, so every
//! operation (one completed wait) is one park and one unpark. With 5 tasks per
//! processor there is exactly one ring per processor and idle sleep dominates.
//!
//! The suite also reports how many pairs of neighbouring rings ran apart:
//! on different worker threads when the window closed. Rings spawned one
//! after the other have their tasks and semaphores next to each other in
//! memory, and on some machines a line next to one that another CPU writes
//! costs more to use (most likely the hardware prefetchers pull it over), so
//! this share accounts for a part of ns/op that is not the scheduler's own
//! work.

use super::{join_all, measure_with_moves, spawn_tasks, Emit};
use crate::harness::Counters;
use crate::runtimes::BenchRuntime;
use crate::spec::{ChildSpec, Metric, Outcome};
use crate::sync::{Layout, Padded, Plain, Semaphore};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Tasks per ring.
pub const RING: usize = 5;

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    if spec.shape.padded {
        run_in::<R, Padded>(rt, spec, emit);
    } else {
        run_in::<R, Plain>(rt, spec, emit);
    }
}

fn run_in<R: BenchRuntime, L: Layout>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let n = (spec.tasks / RING).max(1) * RING;
    let sems: Arc<[Semaphore<L>]> = (0..n).map(|_| Semaphore::binary(false)).collect();
    let counters = Arc::new(Counters::new(n));
    let joins = {
        let (sems, counters) = (sems.clone(), counters.clone());
        spawn_tasks(rt, spec, n, RING, move |i| {
            let (sems, counters) = (sems.clone(), counters.clone());
            let next = i - i % RING + (i + 1) % RING;
            async move {
                let slot = counters.slot(i);
                let mut ops = 0;
                while sems[i].wait().await.is_ok() {
                    ops += 1;
                    // Noted every 64 operations: the thread-local read would
                    // add to every operation's cost.
                    if ops % 64 == 1 {
                        slot.note_worker();
                    }
                    slot.publish(ops, 0);
                    sems[next].post();
                }
            }
        })
    };
    for ring in 0..n / RING {
        sems[ring * RING].post();
    }
    let (w, moves) = measure_with_moves(rt, &counters, spec);
    let apart = apart_percent(&counters, n / RING);
    let mut metrics = vec![
        Metric::new("ns/op", w.ns_per_op(), "ns"),
        Metric::new("apart", apart, "%"),
    ];
    metrics.extend(moves);
    emit(Outcome {
        metrics,
        ..Outcome::default()
    });
    sems.iter().for_each(Semaphore::close);
    join_all(rt, joins);
}

/// The percentage of pairs of neighbouring rings whose first tasks last
/// noted different worker threads (pairs with a ring that noted none yet
/// are left out; 0 when there is no pair).
fn apart_percent(counters: &Counters, rings: usize) -> f64 {
    let workers: Vec<u64> = (0..rings)
        .map(|r| counters.slot(r * RING).worker.load(Ordering::Relaxed))
        .collect();
    let pairs = workers.windows(2).filter(|w| w[0] != 0 && w[1] != 0);
    let (apart, all) = pairs.fold((0, 0), |(a, n), w| (a + usize::from(w[0] != w[1]), n + 1));
    if all == 0 {
        0.0
    } else {
        100.0 * apart as f64 / all as f64
    }
}
