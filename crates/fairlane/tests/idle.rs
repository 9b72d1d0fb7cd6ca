//! Idle processors do nothing: once the work is done and the remaining tasks
//! wait on something that never happens, every processor is asleep, and
//! during one idle second none of them runs a scheduling iteration, wakes up
//! or polls. The processors' own counters are the witness (CPU time would be
//! polluted by tests running in parallel).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{runtime, DropCounter};

/// How long to wait for the processors to fall asleep before declaring that
/// they never do. Not a timing assertion: asleep they must get, eventually.
const SETTLE: Duration = Duration::from_secs(30);

/// The counters that must not move while idle.
fn snapshot(rt: &fairlane::Runtime) -> Vec<(u64, u64, u64, u64)> {
    rt.metrics()
        .processors
        .iter()
        .map(|p| (p.iterations, p.wakeups, p.polls, p.parks))
        .collect()
}

fn all_asleep(rt: &fairlane::Runtime) -> bool {
    // A processor bumps `parks` before it sleeps and `wakeups` after.
    rt.metrics()
        .processors
        .iter()
        .all(|p| p.parks == p.wakeups + 1)
}

/// Waits until every processor sleeps and the counters have been still for
/// a moment. "Asleep" by the counters alone is not enough: a processor that
/// was just woken (say, by another one handing work over) still looks
/// asleep until the operating system runs it, then finds nothing and goes
/// back to sleep; that belongs to the work, not to the idle second.
fn settle(rt: &fairlane::Runtime, what: &str) {
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < SETTLE,
            "{what}: processors never all went to sleep: {:?}",
            rt.metrics()
        );
        if all_asleep(rt) {
            let before = snapshot(rt);
            thread::sleep(Duration::from_millis(100));
            if all_asleep(rt) && snapshot(rt) == before {
                return;
            }
        } else {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

fn assert_idle_second(rt: &fairlane::Runtime, what: &str) {
    settle(rt, what);
    let before = rt.metrics();
    thread::sleep(Duration::from_secs(1));
    let after = rt.metrics();
    for (p, (b, a)) in before
        .processors
        .iter()
        .zip(after.processors.iter())
        .enumerate()
    {
        assert_eq!(
            (a.iterations, a.wakeups, a.polls, a.parks),
            (b.iterations, b.wakeups, b.polls, b.parks),
            "{what}: processor {p} was busy during an idle second: before {before:?}, after {after:?}"
        );
    }
}

/// Tasks that have been polled once and wait forever.
fn spawn_pending(rt: &fairlane::Runtime, n: usize) -> Arc<AtomicUsize> {
    let polled = Arc::new(AtomicUsize::new(0));
    for _ in 0..n {
        let polled = polled.clone();
        rt.spawn(async move {
            polled.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        });
    }
    polled
}

fn wait_for(count: &AtomicUsize, n: usize) {
    let start = Instant::now();
    while count.load(Ordering::SeqCst) < n {
        assert!(start.elapsed() < SETTLE, "tasks never got their first poll");
        thread::yield_now();
    }
}

fn idle_after_work(processors: usize) {
    let rt = runtime(processors);
    // Some work first: yielding tasks, tasks waking each other, spawns from
    // tasks; all of it finishes.
    rt.block_on(async {
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                fairlane::spawn(async move {
                    for _ in 0..(i % 20) {
                        fairlane::yield_now().await;
                    }
                    fairlane::spawn(async move { i }).await.unwrap()
                })
            })
            .collect();
        for (i, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap(), i);
        }
    });
    // Then 100 tasks that wait on nothing.
    let polled = spawn_pending(&rt, 100);
    wait_for(&polled, 100);
    assert_idle_second(&rt, &format!("{processors} processors"));
}

#[test]
fn idle_processors_stay_asleep_1_processor() {
    idle_after_work(1);
}

#[test]
fn idle_processors_stay_asleep_2_processors() {
    idle_after_work(2);
}

#[test]
fn idle_processors_stay_asleep_4_processors() {
    idle_after_work(4);
}

/// A runtime that never had any work sleeps too.
#[test]
fn fresh_runtime_is_asleep() {
    let rt = runtime(2);
    assert_idle_second(&rt, "fresh runtime");
}

/// Tasks that wait on a waker nobody calls (as opposed to `pending`, which
/// drops it), and a waker called from outside after the idle second: the
/// processors wake up for it, run the task, and sleep again.
#[test]
fn idle_then_woken_from_outside() {
    let rt = runtime(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let signal = common::Signal::new();
    let done = {
        let (signal, drops) = (signal.clone(), drops.clone());
        rt.spawn(async move {
            let _counter = DropCounter(drops);
            signal.wait().await;
            7
        })
    };
    let polled = spawn_pending(&rt, 100);
    wait_for(&polled, 100);
    assert_idle_second(&rt, "before the wake");
    let before: u64 = rt.metrics().processors.iter().map(|p| p.wakeups).sum();
    signal.notify();
    assert_eq!(rt.block_on(done).unwrap(), 7);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let after: u64 = rt.metrics().processors.iter().map(|p| p.wakeups).sum();
    assert!(after > before, "a processor must wake up to run the task");
    assert_idle_second(&rt, "after the wake");
}

/// Of two processors, one runs a task that never yields, with no I/O in
/// flight and no timer: the other sleeps without waking up, its host's park
/// included (no periodic look at the busy one: it has nothing in its engine
/// that another processor could take out, and it announces work when some
/// appears). The busy processor's own counters stand still too (it is
/// inside one poll).
#[test]
fn a_sleeper_stays_asleep_beside_a_busy_processor() {
    for backend in [
        fairlane::io::IoBackend::IoUring,
        fairlane::io::IoBackend::Fallback,
    ] {
        let rt = common::backend_runtime(backend, 2);
        let started = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicUsize::new(0));
        let busy = {
            let (started, stop) = (started.clone(), stop.clone());
            rt.spawn(async move {
                started.store(1, Ordering::SeqCst);
                while stop.load(Ordering::SeqCst) == 0 {
                    std::hint::spin_loop();
                }
            })
        };
        // Stops the busy task however this test ends (a failed assertion
        // would otherwise leave the runtime's drop waiting for it).
        struct Stop(Arc<AtomicUsize>);
        impl Drop for Stop {
            fn drop(&mut self) {
                self.0.store(1, Ordering::SeqCst);
            }
        }
        let stopper = Stop(stop);
        wait_for(&started, 1);
        let what = format!("{backend}, one processor busy");
        // Still for a moment first: the sleepers fall asleep (counts, not a
        // fixed pause).
        let start = Instant::now();
        loop {
            assert!(
                start.elapsed() < SETTLE,
                "{what}: the other processor never stayed asleep: {:?}",
                rt.metrics()
            );
            let before = common::idle_snapshot(&rt);
            thread::sleep(Duration::from_millis(100));
            if common::idle_snapshot(&rt) == before {
                break;
            }
        }
        let before = common::idle_snapshot(&rt);
        thread::sleep(Duration::from_secs(1));
        common::assert_still_idle(&rt, &before, &what);
        drop(stopper);
        rt.block_on(busy).unwrap();
    }
}
