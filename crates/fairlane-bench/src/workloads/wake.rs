//! **wake**: wake-from-idle latency. One task waits on a binary semaphore on
//! an otherwise idle runtime; an outside thread (the driver) sleeps 1-2 ms
//! (random, so that no periodic timer lines up with it), reads the clock,
//! posts the semaphore, and the task reads the clock when it runs. The
//! difference goes into an HDR histogram; the suite reports p50, p99 and max.
//!
//! [`floor`] measures the same thing with no runtime at all: a std thread
//! parked in `std::thread::park` (a futex wait on Linux) and unparked by the
//! driver. It is the physical floor the runtimes are compared against.

use super::{join_all, Emit};
use crate::harness::seeded_rng;
use crate::runtimes::{BenchRuntime, Spawner};
use crate::spec::{ChildSpec, Metric, Outcome};
use crate::sync::{Padded, Semaphore};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Percentiles kept for the distribution plot.
pub const PERCENTILES: [f64; 16] = [
    0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.99, 100.0,
];

pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    let sem = Arc::new(Semaphore::<Padded>::binary(false));
    let (tx, rx) = mpsc::channel::<Instant>();
    let waiter = {
        let sem = sem.clone();
        rt.spawner().spawn(async move {
            while sem.wait().await.is_ok() {
                let woke = Instant::now();
                if tx.send(woke).is_err() {
                    break;
                }
            }
        })
    };
    let outcome = sample(spec, |posted| {
        *posted = Instant::now();
        sem.post();
        rx.recv_timeout(Duration::from_secs(5)).ok()
    });
    emit(outcome);
    sem.close();
    join_all(rt, vec![waiter]);
}

/// The physical floor: a std thread woken by `Thread::unpark`.
pub fn floor(spec: &ChildSpec, emit: Emit<'_>) {
    let flag = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Instant>();
    let waiter = {
        let (flag, stop) = (flag.clone(), stop.clone());
        std::thread::spawn(move || loop {
            while !flag.swap(false, Ordering::Acquire) {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::park();
            }
            if tx.send(Instant::now()).is_err() {
                return;
            }
        })
    };
    let thread = waiter.thread().clone();
    let outcome = sample(spec, |posted| {
        *posted = Instant::now();
        flag.store(true, Ordering::Release);
        thread.unpark();
        rx.recv_timeout(Duration::from_secs(5)).ok()
    });
    emit(outcome);
    stop.store(true, Ordering::Relaxed);
    thread.unpark();
    let _ = waiter.join();
}

/// Drives `wake` (which records when it posted and returns when the woken
/// side ran) with idle gaps through warm-up and window, and summarises.
fn sample(spec: &ChildSpec, mut wake: impl FnMut(&mut Instant) -> Option<Instant>) -> Outcome {
    // 1 ns to 100 s at 3 significant digits; longer waits saturate.
    let mut hist = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds");
    let mut rng = seeded_rng(spec.seed, 0);
    let start = Instant::now();
    let end = start + spec.warmup() + spec.duration();
    let mut lost = 0;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_micros(1000 + rng.below(1000) as u64));
        let mut posted = Instant::now();
        match wake(&mut posted) {
            Some(woke) if start.elapsed() >= spec.warmup() => {
                let ns = woke.saturating_duration_since(posted).as_nanos() as u64;
                hist.saturating_record(ns.max(1));
            }
            Some(_) => {}
            None => lost += 1,
        }
    }
    let q = |p: f64| hist.value_at_quantile(p / 100.0) as f64;
    Outcome {
        metrics: vec![
            Metric::new("wake p50", q(50.0), "ns"),
            Metric::new("wake p99", q(99.0), "ns"),
            Metric::new("wake max", hist.max() as f64, "ns"),
        ],
        latency_percentiles: PERCENTILES
            .iter()
            .map(|&p| (p, hist.value_at_quantile(p / 100.0)))
            .collect(),
        detail: Some(format!("{} samples, {lost} lost wake-ups", hist.len())),
        ..Outcome::default()
    }
}
