//! Shared measurement machinery: per-task counters, the measurement window,
//! a tiny random number generator and worker identities.
//!
//! Tasks count their own operations in private, cache-line-padded slots with
//! plain relaxed stores, so counting adds no shared cache line to the
//! workload. The driver thread (outside the runtime) sums the slots when the
//! measurement window opens and again when it closes; operations done during
//! warm-up, spawning and teardown never count.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One task's counters, alone on its cache lines (128 bytes: the adjacent-line
/// prefetcher pairs 64-byte lines).
#[repr(align(128))]
#[derive(Default)]
pub struct Slot {
    /// Operations done.
    pub ops: AtomicU64,
    /// A second, workload-specific count (operations that blocked, moves).
    pub aux: AtomicU64,
    /// Which worker thread last ran the task, as [`worker_id`] + 1 (0: not
    /// noted): where a workload wants to know where its tasks sit.
    pub worker: AtomicU64,
}

/// Per-task counters.
pub struct Counters {
    slots: Box<[Slot]>,
}

/// Sums of all slots at one instant.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub ops: u64,
    pub aux: u64,
}

impl Counters {
    /// Counters for `tasks` tasks.
    pub fn new(tasks: usize) -> Self {
        Counters {
            slots: (0..tasks).map(|_| Slot::default()).collect(),
        }
    }

    /// Task `i`'s slot. Only task `i` writes it.
    pub fn slot(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    /// Sums every slot.
    pub fn totals(&self) -> Totals {
        self.slots.iter().fold(Totals::default(), |t, s| Totals {
            ops: t.ops + s.ops.load(Relaxed),
            aux: t.aux + s.aux.load(Relaxed),
        })
    }
}

impl Slot {
    /// Publishes the owning task's running totals.
    #[inline]
    pub fn publish(&self, ops: u64, aux: u64) {
        self.ops.store(ops, Relaxed);
        self.aux.store(aux, Relaxed);
    }

    /// Notes the worker thread running the calling task.
    pub fn note_worker(&self) {
        self.worker.store(worker_id() as u64 + 1, Relaxed);
    }
}

/// What a measurement window saw.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Counter increments inside the window.
    pub delta: Totals,
    pub elapsed: Duration,
}

impl Window {
    /// Nanoseconds per operation; infinite when nothing happened.
    pub fn ns_per_op(&self) -> f64 {
        if self.delta.ops == 0 {
            f64::INFINITY
        } else {
            self.elapsed.as_nanos() as f64 / self.delta.ops as f64
        }
    }

    /// `aux` as a percentage of `ops`.
    pub fn aux_percent(&self) -> f64 {
        if self.delta.ops == 0 {
            0.0
        } else {
            100.0 * self.delta.aux as f64 / self.delta.ops as f64
        }
    }
}

/// Sleeps through `warmup`, then measures `counters` over `duration`.
///
/// `abort` is polled every 10 ms where given (the transfer watchdog); when it
/// returns true the window closes early. The window stays open past
/// `duration` until at least `min_ops` operations (and at least one) were
/// seen, so a slow workload (a short window on a loaded machine) reports a
/// real rate instead of a division by zero; one that never completes an
/// operation runs into the child's deadline and is reported as a timeout.
pub fn measure(
    counters: &Counters,
    warmup: Duration,
    duration: Duration,
    mut abort: Option<&mut dyn FnMut() -> bool>,
    min_ops: u64,
) -> Window {
    let min_ops = min_ops.max(1);
    let mut never = || false;
    let abort: &mut dyn FnMut() -> bool = match abort.as_mut() {
        Some(abort) => *abort,
        None => &mut never,
    };
    // Sleeps in 10 ms steps until `done` (the deadline has passed and the
    // condition holds) or abort; returns whether it aborted.
    let mut sleep_until = |end: Instant, done: &dyn Fn() -> bool| -> bool {
        loop {
            if abort() {
                return true;
            }
            let now = Instant::now();
            if now >= end && done() {
                return false;
            }
            let step = end
                .saturating_duration_since(now)
                .max(Duration::from_millis(1));
            std::thread::sleep(step.min(Duration::from_millis(10)));
        }
    };
    if sleep_until(Instant::now() + warmup, &|| true) {
        return window(counters, counters.totals(), Instant::now());
    }
    let (t0, start) = (counters.totals(), Instant::now());
    sleep_until(start + duration, &|| {
        counters.totals().ops - t0.ops >= min_ops
    });
    window(counters, t0, start)
}

fn window(counters: &Counters, t0: Totals, start: Instant) -> Window {
    let (t1, elapsed) = (counters.totals(), start.elapsed());
    Window {
        delta: Totals {
            ops: t1.ops - t0.ops,
            aux: t1.aux - t0.aux,
        },
        elapsed,
    }
}

/// A flag tasks poll to learn that the run is over.
#[derive(Default)]
pub struct Stop(AtomicBool);

impl Stop {
    pub fn set(&self) {
        self.0.store(true, Relaxed);
    }
    #[inline]
    pub fn is_set(&self) -> bool {
        self.0.load(Relaxed)
    }
}

pub use fairlane_core::rand::Rng;

/// The generator of task `stream` in a run seeded with `seed`
/// (deterministic, allocation-free, good enough to pick slots).
pub fn seeded_rng(seed: u64, stream: u64) -> Rng {
    Rng::new(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

static NEXT_WORKER: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static WORKER: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// A small number naming the calling OS thread, the same for every call on
/// it: which worker thread (processor) is running the calling task.
pub fn worker_id() -> usize {
    WORKER.with(|w| {
        if w.get() == usize::MAX {
            w.set(NEXT_WORKER.fetch_add(1, Relaxed));
        }
        w.get()
    })
}

/// Waits (sleeping, outside the runtime) until `cond` holds or `limit` passes;
/// returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while !cond() {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_counts_only_its_own_interval_and_waits_for_an_operation() {
        let c = std::sync::Arc::new(Counters::new(2));
        c.slot(0).publish(10, 1);
        // Nothing happens in the 1 ms window itself: it stays open until
        // the operations published later, and counts only those.
        let later = {
            let c = c.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                c.slot(0).publish(15, 1);
            })
        };
        let w = measure(&c, Duration::ZERO, Duration::from_millis(1), None, 0);
        later.join().unwrap();
        assert_eq!(w.delta.ops, 5);
        assert!(w.ns_per_op().is_finite());
    }
}
