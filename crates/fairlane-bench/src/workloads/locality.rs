//! **locality**: each task owns a data array (`WORDS` words) and writes `C`
//! random words of it, then takes a random single-seat *spot* by CAS, wakes
//! the spot's previous occupant, and blocks until someone displaces it in
//! turn. With `t/2` spots about half of the tasks are runnable at any time.
//!
//! One operation is one write-seat-block round. The suite also reports the
//! percentage of operations a task ran on a different worker thread than its
//! previous one (a *move*: its data array had to follow it between caches).
//! The data stays with its task (it is not handed over to the woken
//! occupant).

use super::{join_all, Emit};
use crate::harness::{measure, seeded_rng, worker_id, Counters};
use crate::runtimes::{BenchRuntime, Spawner};
use crate::spec::{ChildSpec, Metric, Outcome};
use crate::sync::Semaphore;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Words (u64) in each task's data array: 16 KiB.
pub const WORDS: usize = 2048;
/// Random words written per operation.
pub const C: usize = 64;

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let n = spec.tasks.max(2);
    let spots: Arc<[AtomicUsize]> = (0..(n / 2).max(1)).map(|_| AtomicUsize::new(0)).collect();
    let sems: Arc<[Semaphore]> = (0..n).map(|_| Semaphore::binary(false)).collect();
    let counters = Arc::new(Counters::new(n));
    let spawner = rt.spawner();
    let seed = spec.seed;
    let joins: Vec<_> = (0..n)
        .map(|i| {
            let (spots, sems, counters) = (spots.clone(), sems.clone(), counters.clone());
            spawner.spawn(async move {
                let slot = counters.slot(i);
                let mut rng = seeded_rng(seed, i as u64);
                let mut data = vec![0u64; WORDS];
                let (mut ops, mut moves, mut last_worker) = (0, 0, None);
                loop {
                    for _ in 0..C {
                        let w = rng.below(WORDS);
                        data[w] = data[w].wrapping_add(rng.next_u64());
                    }
                    let worker = worker_id();
                    moves += u64::from(last_worker.is_some_and(|l| l != worker));
                    last_worker = Some(worker);
                    let spot = &spots[rng.below(spots.len())];
                    let mut prev = spot.load(Ordering::Relaxed);
                    while let Err(now) =
                        spot.compare_exchange_weak(prev, i + 1, Ordering::AcqRel, Ordering::Relaxed)
                    {
                        prev = now;
                    }
                    // A task is never seated while it runs (it was displaced
                    // to be woken), so `prev` is another task or nobody.
                    if prev != 0 {
                        sems[prev - 1].post();
                    }
                    ops += 1;
                    slot.publish(ops, moves);
                    if sems[i].wait().await.is_err() {
                        break;
                    }
                }
                std::hint::black_box(data);
            })
        })
        .collect();
    let w = measure(&counters, spec.warmup(), spec.duration(), None, 0);
    emit(Outcome {
        metrics: vec![
            Metric::new("ns/op", w.ns_per_op(), "ns"),
            Metric::new("moved", w.aux_percent(), "%"),
        ],
        ..Outcome::default()
    });
    sems.iter().for_each(Semaphore::close);
    join_all(rt, joins);
}
