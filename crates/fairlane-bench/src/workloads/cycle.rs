//! **cycle**: tasks in rings of 5; each waits on its own binary semaphore,
//! then posts the next one's. One token circulates per ring, so every
//! operation (one completed wait) is one park and one unpark. With 5 tasks per
//! processor there is exactly one ring per processor and idle sleep dominates.

use super::{join_all, Emit};
use crate::harness::{measure, Counters};
use crate::runtimes::{BenchRuntime, Spawner};
use crate::spec::{ChildSpec, Metric, Outcome};
use crate::sync::Semaphore;
use std::sync::Arc;

/// Tasks per ring.
pub const RING: usize = 5;

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let n = (spec.tasks / RING).max(1) * RING;
    let sems: Arc<[Semaphore]> = (0..n).map(|_| Semaphore::binary(false)).collect();
    let counters = Arc::new(Counters::new(n));
    let spawner = rt.spawner();
    let joins: Vec<_> = (0..n)
        .map(|i| {
            let (sems, counters) = (sems.clone(), counters.clone());
            let next = i - i % RING + (i + 1) % RING;
            spawner.spawn(async move {
                let slot = counters.slot(i);
                let mut ops = 0;
                while sems[i].wait().await.is_ok() {
                    ops += 1;
                    slot.publish(ops, 0);
                    sems[next].post();
                }
            })
        })
        .collect();
    for ring in 0..n / RING {
        sems[ring * RING].post();
    }
    let w = measure(&counters, spec.warmup(), spec.duration(), None, 0);
    emit(Outcome {
        metrics: vec![Metric::new("ns/op", w.ns_per_op(), "ns")],
        ..Outcome::default()
    });
    sems.iter().for_each(Semaphore::close);
    join_all(rt, joins);
}
