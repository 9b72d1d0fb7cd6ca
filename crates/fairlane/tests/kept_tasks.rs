//! Tasks that a processor's own timers or I/O made ready, and that it keeps
//! on its lanes without waking a sleeping processor (`fairlane-core`'s
//! `idle.md`, "Kept tasks"), still run when that processor stops
//! scheduling: the sleeper watching it looks for work and takes them.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::time::{sleep, sleep_until, Instant};

/// Timer tasks made ready together on one processor.
const TASKS: usize = 6;
/// How long the first of them keeps its processor, at most, waiting for the
/// others (they never run if nobody takes them from its lanes).
const SPIN_LIMIT: Duration = Duration::from_secs(20);

/// `TASKS` tasks sleep until one deadline on processor `a`, whose engine
/// also holds a far timer (so the core may keep them). The first to run
/// spins without yielding until every other one has run, which only another
/// processor can do.
fn tasks_kept_by_a_processor_that_stops_scheduling_run_elsewhere(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 2);
    let a = rt.handle().cluster().processors()[0];
    // Keeps processor `a` with a timer in its engine for the whole test:
    // timers are registered on the processor that polls the sleep first.
    rt.spawn(async move {
        fairlane::task::set_affinity(Some([a])).unwrap();
        fairlane::yield_now().await;
        fairlane::task::set_affinity(None::<[fairlane::ProcessorId; 0]>).unwrap();
        sleep(Duration::from_secs(3600)).await;
    });
    let deadline = Instant::now() + Duration::from_millis(300);
    let ran = Arc::new(AtomicUsize::new(0));
    let claimed = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (ran, claimed) = (ran.clone(), claimed.clone());
            rt.spawn(async move {
                // Onto `a`, then free to run anywhere again, with the timer
                // registered on `a`'s engine.
                fairlane::task::set_affinity(Some([a])).unwrap();
                fairlane::yield_now().await;
                fairlane::task::set_affinity(None::<[fairlane::ProcessorId; 0]>).unwrap();
                sleep_until(deadline).await;
                if claimed.swap(true, Ordering::Relaxed) {
                    ran.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                // The first to run keeps its processor from scheduling.
                let give_up = std::time::Instant::now() + SPIN_LIMIT;
                while ran.load(Ordering::Relaxed) < TASKS - 1 && std::time::Instant::now() < give_up
                {
                    std::hint::spin_loop();
                }
                Some(ran.load(Ordering::Relaxed))
            })
        })
        .collect();
    let seen: Vec<_> = rt.block_on(async {
        let mut seen = Vec::new();
        for task in tasks {
            seen.push(task.await.unwrap());
        }
        seen
    });
    let spinner: Vec<usize> = seen.into_iter().flatten().collect();
    assert_eq!(
        spinner,
        [TASKS - 1],
        "the tasks queued behind a task that never yields were not all run elsewhere"
    );
}

common::on_both_backends!(tasks_kept_by_a_processor_that_stops_scheduling_run_elsewhere);
