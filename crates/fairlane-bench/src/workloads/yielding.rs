//! **yield**: tasks looping on the runtime's own `yield_now`; one operation is
//! one yield (a trip through the scheduler's run queue).

use super::{join_all, measure_with_moves, spawn_tasks, Emit};
use crate::harness::{Counters, Stop};
use crate::runtimes::BenchRuntime;
use crate::spec::{ChildSpec, Metric, Outcome};
use std::sync::Arc;

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let n = spec.tasks.max(1);
    let counters = Arc::new(Counters::new(n));
    let stop = Arc::new(Stop::default());
    let joins = {
        let (counters, stop) = (counters.clone(), stop.clone());
        spawn_tasks(rt, spec, n, 1, move |i| {
            let (counters, stop) = (counters.clone(), stop.clone());
            async move {
                let slot = counters.slot(i);
                let mut ops = 0;
                while !stop.is_set() {
                    R::yield_now().await;
                    ops += 1;
                    slot.publish(ops, 0);
                }
            }
        })
    };
    let (w, moves) = measure_with_moves(rt, &counters, spec);
    let mut metrics = vec![Metric::new("ns/op", w.ns_per_op(), "ns")];
    metrics.extend(moves);
    emit(Outcome {
        metrics,
        ..Outcome::default()
    });
    stop.set();
    join_all(rt, joins);
}
