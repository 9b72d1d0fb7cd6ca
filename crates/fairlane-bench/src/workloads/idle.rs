//! **idle**: what a runtime costs while nothing happens. [`TASKS`] tasks all
//! wait on one semaphore that is never posted; once they are all parked and a
//! warm-up has passed, the process's CPU time (user + system, all threads,
//! `getrusage(RUSAGE_SELF)`) is read across the measurement window. The
//! driver thread sleeps throughout, so the figure is the runtime's: CPU time
//! per wall-clock time, as a percentage of one core.

use super::{join_all, Emit};
use crate::harness::wait_until;
use crate::runtimes::{BenchRuntime, Spawner};
use crate::spec::{ChildSpec, Metric, Outcome};
use crate::sync::{Padded, Semaphore};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Parked tasks.
pub const TASKS: usize = 10_000;

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let gate = Arc::new(Semaphore::<Padded>::counting_with_capacity(0, TASKS));
    let spawner = rt.spawner();
    let joins: Vec<_> = (0..TASKS)
        .map(|_| {
            let gate = gate.clone();
            spawner.spawn(async move {
                let _ = gate.wait().await;
            })
        })
        .collect();
    let parked = wait_until(Duration::from_secs(20), || gate.waiting() == TASKS);
    std::thread::sleep(spec.warmup());
    let (cpu0, t0) = (cpu_time(), Instant::now());
    std::thread::sleep(spec.duration());
    let (cpu1, wall) = (cpu_time(), t0.elapsed());
    let percent = 100.0 * (cpu1 - cpu0).as_secs_f64() / wall.as_secs_f64();
    emit(Outcome {
        metrics: vec![Metric::new("cpu", percent, "%core")],
        detail: (!parked).then(|| format!("only {} of {TASKS} tasks parked", gate.waiting())),
        ..Outcome::default()
    });
    gate.close();
    join_all(rt, joins);
}

/// User + system CPU time of the whole process.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct we hand it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
