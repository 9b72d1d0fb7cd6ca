//! The starvation cases users of today's runtimes report,
//! reproduced against fairlane, which must pass each by construction (ages),
//! not by a per-case knob. Assertions count events; the only clock is the
//! generous deadline that turns a hang into a failure.

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use common::{runtime, serial, with_deadline, DEADLINE};

/// A one-slot mailbox: the writer puts a value and wakes the reader.
#[derive(Default)]
struct Mailbox {
    value: AtomicU64,
    reader: Mutex<Option<Waker>>,
}

impl Mailbox {
    fn put(&self, v: u64) {
        self.value.store(v, Ordering::Release);
        if let Some(w) = self.reader.lock().unwrap().take() {
            w.wake();
        }
    }

    /// Resolves once the mailbox holds a value above `seen`.
    fn next_above(&self, seen: u64) -> impl Future<Output = u64> + '_ {
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            let v = self.value.load(Ordering::Acquire);
            if v > seen {
                return Poll::Ready(v);
            }
            *self.reader.lock().unwrap() = Some(cx.waker().clone());
            let v = self.value.load(Ordering::Acquire);
            if v > seen {
                Poll::Ready(v)
            } else {
                Poll::Pending
            }
        })
    }
}

/// What the writer of `writer_reader` saw.
#[derive(Debug)]
struct WriterReport {
    /// Rounds in which the writer gave up waiting for the reader.
    gave_up: u64,
    /// The most polls of the busy tasks the writer waited for an answer.
    longest_wait: u64,
}

/// Runs the writer/reader scenario of tokio #4323 on `rt` (which has 2
/// processors) next to 10 tasks that yield in a loop, so that neither
/// processor is ever idle and only helping (not idle stealing) can move the
/// reader. The writer's wait for each answer is counted in polls of the
/// busy tasks (the other processor runs them meanwhile); it gives up after
/// `patience` of them.
fn writer_reader(
    rt: &fairlane::Runtime,
    rounds: u64,
    patience: u64,
    acked: Arc<AtomicU64>,
) -> WriterReport {
    let stop = Arc::new(AtomicBool::new(false));
    let busy_polls = Arc::new(AtomicU64::new(0));
    let busy: Vec<_> = (0..10)
        .map(|_| {
            let (stop, busy_polls) = (stop.clone(), busy_polls.clone());
            rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    busy_polls.fetch_add(1, Ordering::Relaxed);
                    fairlane::yield_now().await;
                }
            })
        })
        .collect();
    let mailbox = Arc::new(Mailbox::default());
    let reader = {
        let (mailbox, acked) = (mailbox.clone(), acked.clone());
        rt.spawn(async move {
            let mut seen = 0;
            while seen < rounds {
                seen = mailbox.next_above(seen).await;
                acked.store(seen, Ordering::Release);
            }
        })
    };
    let writer = rt.spawn(async move {
        let mut report = WriterReport {
            gave_up: 0,
            longest_wait: 0,
        };
        for round in 1..=rounds {
            mailbox.put(round);
            // Spin without yielding until the reader answers; a reader stuck
            // behind us would never answer while the busy tasks go on being
            // polled, so give up after `patience` of their polls and count
            // it. (If nothing is polled at all, the other processor sleeps
            // with the reader queued: the scenario's deadline catches that.)
            let start = busy_polls.load(Ordering::Relaxed);
            while acked.load(Ordering::Acquire) < round {
                let waited = busy_polls.load(Ordering::Relaxed) - start;
                report.longest_wait = report.longest_wait.max(waited);
                if waited > patience {
                    report.gave_up += 1;
                    break;
                }
                std::hint::spin_loop();
            }
        }
        report
    });
    let report = rt.block_on(writer).unwrap();
    rt.block_on(reader).unwrap();
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        rt.block_on(b).unwrap();
    }
    report
}

/// tokio #4323 / #4941: a writer wakes its reader, then keeps running without
/// yielding until the reader has answered. In tokio the woken reader sits in
/// the writer's LIFO slot, which other workers cannot steal, so it waits as
/// long as the writer runs. In fairlane the reader is in a lane of the
/// writer's processor, where the other, busy, processor sees it age and
/// helps. (With helping disabled the reader is still rescued whenever the
/// other processor happens to run out of work and steals, so a negative
/// version of this test cannot be made deterministic; the transfer tests in
/// `fairness.rs` cover the age rule under a permanently busy processor.)
#[test]
fn woken_reader_is_not_stuck_behind_a_writer_that_never_yields() {
    const ROUNDS: u64 = 300;
    /// Polls of the busy tasks the writer waits before it gives up on a
    /// round. The other processor helps the writer's lanes once their head
    /// is twice as old as its own, drawing a help target every 8 pops; ages
    /// come from each processor's own clock (the TSC), which can be skewed
    /// between cores, so a help may come a fraction of a millisecond late:
    /// thousands of fast polls (seen: up to about 6,000). Without helping the
    /// wait never ends, so the bound is set far above that; unlike a clock,
    /// it does not run while the other processor's thread is descheduled.
    const PATIENCE: u64 = 100_000;
    let _serial = serial();
    let acked = Arc::new(AtomicU64::new(0));
    let progress = acked.clone();
    let report = with_deadline(
        "writer_reader",
        DEADLINE,
        move || {
            format!(
                "{} of {ROUNDS} rounds answered",
                progress.load(Ordering::SeqCst)
            )
        },
        move || writer_reader(&runtime(2), ROUNDS, PATIENCE, acked),
    );
    eprintln!("writer/reader: {report:?}");
    assert_eq!(
        report.gave_up, 0,
        "the reader was left behind the spinning writer: {report:?}"
    );
}

/// A future that spins for a while in every poll, then yields: a "slow poll".
async fn slow_polls(stop: Arc<AtomicBool>, polls: Arc<AtomicU64>) {
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_micros(20) {
            std::hint::spin_loop();
        }
        polls.fetch_add(1, Ordering::Relaxed);
        fairlane::yield_now().await;
    }
}

/// tokio #4651 / #5720: tasks spawned from outside wait in a global queue that
/// is only checked every so many polls, so slow polls delay them. fairlane
/// stamps an outside push like any other and serves lanes oldest first: a
/// task spawned from outside runs after at most the tasks already ahead of it.
/// One processor, so that the operating system descheduling one processor
/// thread while another keeps polling cannot blur the count.
#[test]
fn outside_spawns_wait_for_the_tasks_ahead_of_them_only() {
    const BUSY: usize = 20;
    const PROBES: usize = 50;
    let _serial = serial();
    let max_wait = with_deadline("outside_spawns", DEADLINE, String::new, || {
        let rt = runtime(1);
        let stop = Arc::new(AtomicBool::new(false));
        let polls = Arc::new(AtomicU64::new(0));
        let busy: Vec<_> = (0..BUSY)
            .map(|_| rt.spawn(slow_polls(stop.clone(), polls.clone())))
            .collect();
        while polls.load(Ordering::Relaxed) < 10 * BUSY as u64 {
            std::thread::yield_now();
        }
        let mut max_wait = 0;
        for _ in 0..PROBES {
            let polls_probe = polls.clone();
            let probe = rt.spawn(async move { polls_probe.load(Ordering::Relaxed) });
            // Read after the push: this thread being descheduled between a
            // read and the push must not count polls the probe did not wait
            // for (the count can only come out low, never high).
            let at_spawn = polls.load(Ordering::Relaxed);
            let at_run = rt.block_on(probe).unwrap();
            max_wait = max_wait.max(at_run.saturating_sub(at_spawn));
        }
        stop.store(true, Ordering::Relaxed);
        for b in busy {
            rt.block_on(b).unwrap();
        }
        max_wait
    });
    // Oldest first: the probe waits for at most the BUSY tasks queued before
    // it, plus the one being polled when it arrived. A push from outside is
    // stamped from the processor's own iteration clock (one below it), so
    // every task the processor re-queues after the push, even while it
    // reuses a clock reading, goes behind the probe.
    assert!(
        max_wait <= BUSY as u64 + 1,
        "a task spawned from outside waited {max_wait} busy polls behind {BUSY} busy tasks"
    );
}

/// tokio #1388: a task that spawns many tasks in a tight loop; every spawned
/// task must run, while the spawner itself keeps going.
#[test]
fn every_task_spawned_in_a_tight_loop_runs() {
    const TASKS: usize = 100_000;
    let _serial = serial();
    let ran = Arc::new(AtomicUsize::new(0));
    let progress = ran.clone();
    with_deadline(
        "spawn_loop",
        DEADLINE,
        move || format!("{} of {TASKS} ran", progress.load(Ordering::SeqCst)),
        move || {
            let rt = runtime(2);
            let r = ran.clone();
            rt.block_on(rt.spawn(async move {
                for _ in 0..TASKS {
                    let r = r.clone();
                    fairlane::spawn(async move {
                        r.fetch_add(1, Ordering::Relaxed);
                    });
                }
            }))
            .unwrap();
            rt.block_on(async {
                while ran.load(Ordering::Relaxed) < TASKS {
                    fairlane::yield_now().await;
                }
            });
        },
    );
}
