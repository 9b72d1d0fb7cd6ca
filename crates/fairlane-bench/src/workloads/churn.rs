//! **churn**: `t` tasks and `s = t/2` counting semaphores (initially 0). Each
//! iteration picks a random semaphore, posts it, then waits on it. The first
//! `s` tasks skip their very first post, so `s` tasks are blocked at any
//! moment and a post usually hands off to a waiter, whose place the poster's
//! own wait then takes. Wake-ups come from arbitrary processors. One
//! operation is one post + wait; the suite also reports the percentage of
//! operations whose wait blocked (about 50-70%). The tasks start their
//! loops together, once all are spawned.

use super::{join_all, measure_with_moves, spawn_tasks, Emit};
use crate::harness::{seeded_rng, Counters};
use crate::runtimes::BenchRuntime;
use crate::spec::{ChildSpec, Metric, Outcome};
use crate::sync::{Layout, Padded, Plain, Semaphore};
use std::sync::Arc;

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    if spec.shape.padded {
        run_in::<R, Padded>(rt, spec, emit);
    } else {
        run_in::<R, Plain>(rt, spec, emit);
    }
}

fn run_in<R: BenchRuntime, L: Layout>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let n = spec.tasks.max(2);
    let s = (n / 2).max(1);
    let sems: Arc<[Semaphore<L>]> = (0..s).map(|_| Semaphore::counting(0)).collect();
    let counters = Arc::new(Counters::new(n));
    // Every task waits here until all are spawned: a task that posts
    // while no other waits takes its own permit back at once and never
    // returns `Pending`, so tasks started before the first waiters exist
    // (those of a spawner that ran first, `--spawn spread`) could keep
    // every processor and the remaining spawners from running.
    let gate = Arc::new(Semaphore::<Padded>::counting_with_capacity(0, n));
    let seed = spec.seed;
    let joins = {
        let (sems, counters, gate) = (sems.clone(), counters.clone(), gate.clone());
        spawn_tasks(rt, spec, n, 1, move |i| {
            let (sems, counters, gate) = (sems.clone(), counters.clone(), gate.clone());
            async move {
                if gate.wait().await.is_err() {
                    return;
                }
                let slot = counters.slot(i);
                let mut rng = seeded_rng(seed, i as u64);
                let (mut ops, mut blocked) = (0, 0);
                let mut skip_post = i < s;
                loop {
                    let k = rng.below(s);
                    if !std::mem::take(&mut skip_post) {
                        sems[k].post();
                    }
                    match sems[k].wait().await {
                        Err(_) => break,
                        Ok(a) => {
                            ops += 1;
                            blocked += u64::from(a.blocked);
                            slot.publish(ops, blocked);
                        }
                    }
                }
            }
        })
    };
    (0..n).for_each(|_| gate.post());
    let (w, moves) = measure_with_moves(rt, &counters, spec);
    let mut metrics = vec![
        Metric::new("ns/op", w.ns_per_op(), "ns"),
        Metric::new("blocked", w.aux_percent(), "%"),
    ];
    metrics.extend(moves);
    emit(Outcome {
        metrics,
        ..Outcome::default()
    });
    sems.iter().for_each(Semaphore::close);
    gate.close();
    join_all(rt, joins);
}
