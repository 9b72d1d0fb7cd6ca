//! **yield**: tasks looping on the runtime's own `yield_now`; one operation is
//! one yield (a trip through the scheduler's run queue).

use super::{join_all, Emit};
use crate::harness::{measure, Counters, Stop};
use crate::runtimes::{BenchRuntime, Spawner};
use crate::spec::{ChildSpec, Metric, Outcome};
use std::sync::Arc;

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let n = spec.tasks.max(1);
    let counters = Arc::new(Counters::new(n));
    let stop = Arc::new(Stop::default());
    let spawner = rt.spawner();
    let joins: Vec<_> = (0..n)
        .map(|i| {
            let (counters, stop) = (counters.clone(), stop.clone());
            spawner.spawn(async move {
                let slot = counters.slot(i);
                let mut ops = 0;
                while !stop.is_set() {
                    R::yield_now().await;
                    ops += 1;
                    slot.publish(ops, 0);
                }
            })
        })
        .collect();
    let w = measure(&counters, spec.warmup(), spec.duration(), None, 0);
    emit(Outcome {
        metrics: vec![Metric::new("ns/op", w.ns_per_op(), "ns")],
        ..Outcome::default()
    });
    stop.set();
    join_all(rt, joins);
}
