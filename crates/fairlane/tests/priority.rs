//! Priorities shift when a task runs, within a countable bound, never whether:
//! high tasks run first when both are ready, low tasks keep the rate the
//! bound promises under a saturating high load, and alone a low task runs
//! like any other. Everything is counted in polls.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{serial, with_deadline, DEADLINE};
use fairlane::task::{Builder, Priority};

/// Spawns `count` tasks of `priority` that yield in a loop, counting their
/// polls in `polls`, until `stop`.
fn yielders(
    rt: &fairlane::Runtime,
    count: usize,
    priority: Priority,
    polls: &Arc<AtomicU64>,
    stop: &Arc<AtomicBool>,
) -> Vec<fairlane::JoinHandle<()>> {
    (0..count)
        .map(|_| {
            let (polls, stop) = (polls.clone(), stop.clone());
            Builder::new()
                .priority(priority)
                .spawn_on(
                    async move {
                        while !stop.load(Ordering::Relaxed) {
                            polls.fetch_add(1, Ordering::Relaxed);
                            fairlane::yield_now().await;
                        }
                    },
                    rt.handle(),
                )
                .unwrap()
        })
        .collect()
}

/// Runs `high` high-priority and `others` tasks of `other` priority on one
/// processor until `total` polls; returns (high polls, other polls).
fn contest(high: usize, others: usize, other: Priority, bound: u32, total: u64) -> (u64, u64) {
    let rt = fairlane::Runtime::builder()
        .processors(1)
        .priority_bound(bound)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let high_polls = Arc::new(AtomicU64::new(0));
    let other_polls = Arc::new(AtomicU64::new(0));
    // Spawned while the processor is busy with a blocker, so that every task
    // is queued before any runs.
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let blocker = rt.spawn(async move { gate.recv().unwrap() });
    let mut handles = yielders(&rt, others, other, &other_polls, &stop);
    handles.extend(yielders(&rt, high, Priority::High, &high_polls, &stop));
    release.send(()).unwrap();
    rt.block_on(blocker).unwrap();
    while high_polls.load(Ordering::Relaxed) + other_polls.load(Ordering::Relaxed) < total {
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        rt.block_on(h).unwrap();
    }
    (
        high_polls.load(Ordering::SeqCst),
        other_polls.load(Ordering::SeqCst),
    )
}

#[test]
fn high_priority_tasks_run_first_when_both_are_ready() {
    let _serial = serial();
    // One high task against ten normal ones. Ignoring priorities, the high
    // task would get one poll in eleven; with bound 8 it gets about eight in
    // nine.
    let (high, normal) = with_deadline("priority_first", DEADLINE, String::new, || {
        contest(1, 10, Priority::Normal, 8, 50_000)
    });
    assert!(
        high > 4 * normal,
        "high {high} polls, normal {normal}: priorities ignored"
    );
}

#[test]
fn low_priority_tasks_progress_at_the_rate_the_bound_promises() {
    let _serial = serial();
    // Ten high tasks saturate the processor; one low task must still get at
    // least one poll in every `bound + 1`.
    for bound in [2u32, 8] {
        let (high, low) = with_deadline("priority_bound", DEADLINE, String::new, move || {
            contest(10, 1, Priority::Low, bound, 50_000)
        });
        let total = high + low;
        let promised = total / (u64::from(bound) + 1);
        assert!(
            low + 2 >= promised,
            "bound {bound}: low got {low} of {total} polls, promised at least {promised}"
        );
        // And no more than about that: the high tasks did run first.
        assert!(
            low <= 2 * promised + 2,
            "bound {bound}: low got {low} of {total}: not lower"
        );
    }
}

#[test]
fn with_all_three_classes_ready_neither_lower_class_starves() {
    let _serial = serial();
    const BOUND: u64 = 4;
    let (high, normal, low) = with_deadline("priority_three", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder()
            .processors(1)
            .priority_bound(BOUND as u32)
            .build()
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Vec<Arc<AtomicU64>> = (0..3).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let mut handles = yielders(&rt, 5, Priority::High, &counts[0], &stop);
        handles.extend(yielders(&rt, 1, Priority::Normal, &counts[1], &stop));
        handles.extend(yielders(&rt, 1, Priority::Low, &counts[2], &stop));
        while counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<u64>()
            < 50_000
        {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            rt.block_on(h).unwrap();
        }
        let c: Vec<u64> = counts.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        (c[0], c[1], c[2])
    });
    let total = high + normal + low;
    // Each lower class waits at most BOUND polls of the others, and the two
    // can come due together: at least one poll in 2 * (BOUND + 1) each.
    let floor = total / (2 * (BOUND + 1));
    assert!(
        normal + 2 >= floor,
        "normal got {normal} of {total}, floor {floor}"
    );
    assert!(low + 2 >= floor, "low got {low} of {total}, floor {floor}");
    assert!(
        high > normal && high > low,
        "high {high}, normal {normal}, low {low}"
    );
}

#[test]
fn alone_a_low_priority_task_runs_like_any_other() {
    let _serial = serial();
    with_deadline("priority_alone", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder().processors(2).build().unwrap();
        let low = Builder::new()
            .priority(Priority::Low)
            .spawn_on(
                async {
                    let mut n = 0u64;
                    for _ in 0..10_000 {
                        fairlane::yield_now().await;
                        n += 1;
                    }
                    n
                },
                rt.handle(),
            )
            .unwrap();
        assert_eq!(rt.block_on(low).unwrap(), 10_000);
    });
}

#[test]
fn a_zero_priority_bound_is_invalid_input() {
    let err = fairlane::Runtime::builder()
        .priority_bound(0)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("priority_bound"));
}

#[test]
fn a_low_task_behind_a_spinning_task_is_helped_like_any_other() {
    let _serial = serial();
    with_deadline("priority_helped", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder().processors(2).build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let polls = Arc::new(AtomicU64::new(0));
        // Keep both processors busy, so that only helping (not idle
        // stealing) can move the low task.
        let busy = yielders(&rt, 10, Priority::Normal, &polls, &stop);
        let rounds = Arc::new(AtomicU64::new(0));
        let r = rounds.clone();
        let spinner = rt.spawn(async move {
            for _ in 0..20 {
                let done = Arc::new(AtomicBool::new(false));
                let d = done.clone();
                // Queued on this processor's low lane, behind us.
                Builder::new()
                    .priority(Priority::Low)
                    .spawn(async move { d.store(true, Ordering::Release) })
                    .unwrap();
                // Spin without yielding until another processor ran it.
                while !done.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                r.fetch_add(1, Ordering::Relaxed);
                fairlane::yield_now().await;
            }
        });
        rt.block_on(spinner).unwrap();
        stop.store(true, Ordering::Relaxed);
        for b in busy {
            rt.block_on(b).unwrap();
        }
        assert_eq!(rounds.load(Ordering::Relaxed), 20);
    });
}
