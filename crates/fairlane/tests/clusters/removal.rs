//! Removing a processor: the tasks queued on it move (none runs on it once
//! the removal has returned); a task may remove its own processor, add and
//! remove others, or remove another task's processor at the same time as
//! that task removes its own; a processor whose task is in
//! `block_in_place` can be removed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use fairlane::task::{current_processor, ProcessorId};
use fairlane::Runtime;

use crate::common::clusters::{assert_runs_on, build, remove_while_spinning, sorted, Steps};
use crate::common::{serial, wait_until, with_deadline, Signal, DEADLINE};

/// A poll of a moved task: (task, processor, whether the removal had
/// returned before the poll).
type PollRecord = (usize, Option<ProcessorId>, bool);

// ---------------------------------------------------------------------------
// 3. Removing a processor moves its queued tasks.
// ---------------------------------------------------------------------------

/// A task restricted to `victim` spins there (never yielding) after spawning
/// `K` tasks onto its lanes; helping is off, so they wait there. The test
/// thread starts removing `victim` (which waits for the spinner's poll),
/// then releases the spinner. Every queued task must complete, and none may
/// be polled on `victim` once `remove_processor` has returned.
#[test]
fn removing_a_processor_moves_its_queued_tasks() {
    const K: usize = 200;
    const STEPS: usize = 3;
    let _serial = serial();
    with_deadline("remove_moves_queued", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(2).help_period(0));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let (keeper, victim) = (ids[0], ids[1]);
        let spawned = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let removed = Arc::new(AtomicBool::new(false));
        // (task, processor, whether the removal had returned before the poll)
        let records: Arc<Mutex<Vec<PollRecord>>> = Arc::default();
        let completions: Arc<Vec<AtomicUsize>> =
            Arc::new((0..K).map(|_| AtomicUsize::new(0)).collect());

        let spinner = {
            let (spawned, release, removed) = (spawned.clone(), release.clone(), removed.clone());
            let (records, completions) = (records.clone(), completions.clone());
            fairlane::task::Builder::new()
                .affinity([victim])
                .spawn_on(
                    async move {
                        assert_eq!(current_processor(), Some(victim), "the spinner's processor");
                        let handles: Vec<_> = (0..K)
                            .map(|i| {
                                let (removed, records, completions) =
                                    (removed.clone(), records.clone(), completions.clone());
                                fairlane::spawn(async move {
                                    for _ in 0..STEPS {
                                        let after_removal = removed.load(Ordering::SeqCst);
                                        let p = current_processor();
                                        records.lock().unwrap().push((i, p, after_removal));
                                        fairlane::yield_now().await;
                                    }
                                    completions[i].fetch_add(1, Ordering::SeqCst);
                                })
                            })
                            .collect();
                        spawned.store(true, Ordering::SeqCst);
                        while !release.load(Ordering::SeqCst) {
                            std::hint::spin_loop();
                        }
                        handles
                    },
                    rt.handle(),
                )
                .expect("spawn the spinner")
        };
        wait_until("the spinner to spawn its tasks", || {
            spawned.load(Ordering::SeqCst)
        });
        remove_while_spinning(&cluster, victim, &release, &removed)
            .expect("remove_processor(victim) while it runs a task");
        assert_eq!(cluster.processors(), [keeper]);

        let handles = rt.block_on(spinner).expect("spinner");
        rt.block_on(async {
            for h in handles {
                h.await.expect("moved task");
            }
        });
        for (i, c) in completions.iter().enumerate() {
            assert_eq!(c.load(Ordering::SeqCst), 1, "task {i} completions");
        }
        let records = records.lock().unwrap();
        assert_eq!(records.len(), K * STEPS);
        let mut on_victim = 0;
        for &(i, p, after_removal) in records.iter() {
            let p = p.expect("a task runs on a processor");
            assert!(p == keeper || p == victim, "task {i} polled on {p}");
            if p == victim {
                on_victim += 1;
                assert!(
                    !after_removal,
                    "task {i} was polled on removed {victim} after remove_processor returned"
                );
            }
        }
        // Tasks spawned now run on the keeper only.
        assert_runs_on(&rt, &[keeper]);
        eprintln!(
            "removing_a_processor_moves_its_queued_tasks: {on_victim} of {} polls ran on the \
             victim before its removal",
            records.len()
        );
    });
}

/// A task removes the processor it runs on, then yields: the removal
/// returns, the poll finishes there, and the task continues on another
/// processor.
#[test]
fn a_task_removes_its_own_processor_then_yields() {
    let _serial = serial();
    let at = Steps::new();
    let progress = at.progress();
    with_deadline("remove_own_processor", DEADLINE, progress, move || {
        let rt = build(Runtime::builder().processors(3).max_processors(4));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let task = {
            let (cluster, at) = (cluster.clone(), at.clone());
            fairlane::task::Builder::new()
                .affinity([ids[2]])
                .spawn_on(
                    async move {
                        let me = current_processor().expect("on a processor");
                        at.reached("task: removing its own processor");
                        cluster.remove_processor(me)?;
                        at.reached("task: removed its own processor; yielding");
                        let still = current_processor();
                        fairlane::yield_now().await;
                        at.reached("task: polled again after the yield");
                        Ok::<_, std::io::Error>((me, still, current_processor()))
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        let (me, still, after) = rt.block_on(task).unwrap().expect("remove own processor");
        at.reached("joined");
        assert_eq!(me, ids[2]);
        // The poll that removed it finishes on that thread, for which
        // `current_processor()` answers `None` or the removed id.
        assert!(still.is_none() || still == Some(ids[2]), "{still:?}");
        let after = after.expect("on a processor");
        assert_ne!(
            after, ids[2],
            "polled on its removed processor after the removal"
        );
        assert_eq!(sorted(cluster.processors()), sorted(vec![ids[0], ids[1]]));
    });
}

/// `add_processor` and `remove_processor` (of another processor) called by
/// a task.
#[test]
fn a_task_adds_and_removes_processors() {
    let _serial = serial();
    with_deadline("resize_from_task", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(2).max_processors(3));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let task = {
            let (cluster, other) = (cluster.clone(), ids[1]);
            fairlane::task::Builder::new()
                .affinity([ids[0]])
                .spawn_on(
                    async move {
                        let added = cluster.add_processor()?;
                        fairlane::yield_now().await;
                        cluster.remove_processor(other)?;
                        fairlane::yield_now().await;
                        Ok::<_, std::io::Error>((added, current_processor()))
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        let (added, on) = rt.block_on(task).unwrap().expect("resize from a task");
        assert_eq!(on, Some(ids[0]));
        assert_eq!(sorted(cluster.processors()), sorted(vec![ids[0], added]));
        assert_runs_on(&rt, &[ids[0], added]);
    });
}

/// Two tasks on two processors remove each other's processors at the same
/// time: no deadlock (each gives up its own read side while it waits), both
/// removals succeed, and both tasks are re-homed to the last processor.
#[test]
fn two_tasks_remove_each_others_processors_at_once() {
    let _serial = serial();
    let at = Steps::new();
    let progress = at.progress();
    with_deadline("cross_remove", DEADLINE, progress, move || {
        let rt = build(Runtime::builder().processors(3));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let arrived = Arc::new(AtomicUsize::new(0));
        let removed = Arc::new(AtomicUsize::new(0));
        let cross = |mine: ProcessorId, theirs: ProcessorId| {
            let (cluster, arrived, removed) = (cluster.clone(), arrived.clone(), removed.clone());
            fairlane::task::Builder::new()
                .affinity([mine])
                .spawn_on(
                    async move {
                        arrived.fetch_add(1, Ordering::SeqCst);
                        // Both in a poll on their processors at once.
                        while arrived.load(Ordering::SeqCst) < 2 {
                            std::hint::spin_loop();
                        }
                        let result = cluster.remove_processor(theirs);
                        removed.fetch_add(1, Ordering::SeqCst);
                        // No yield here: a task whose processor was removed
                        // during this poll, woken in it, is another test.
                        (result.map_err(|e| e.to_string()), current_processor())
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        let t1 = cross(ids[1], ids[2]);
        let t2 = cross(ids[2], ids[1]);
        at.reached("spawned; waiting for both");
        let (r1, p1) = rt.block_on(t1).unwrap();
        at.reached("first joined");
        let (r2, p2) = rt.block_on(t2).unwrap();
        r1.expect("remove ids[2]");
        r2.expect("remove ids[1]");
        assert_eq!(removed.load(Ordering::SeqCst), 2);
        // The rest of the poll runs on the removed processor's thread, for
        // which `current_processor()` answers `None` (the id names nothing
        // any more) or, at most, the removed id: never another processor.
        assert!(p1.is_none() || p1 == Some(ids[1]), "{p1:?}");
        assert!(p2.is_none() || p2 == Some(ids[2]), "{p2:?}");
        assert_eq!(cluster.processors(), [ids[0]]);
        assert_runs_on(&rt, &[ids[0]]);
    });
}

/// A processor whose task is inside `block_in_place` (its replacement thread
/// running the queue) can be removed; the blocked task then completes.
#[test]
fn removing_a_processor_during_block_in_place() {
    let _serial = serial();
    let at = Steps::new();
    let progress = at.progress();
    with_deadline("remove_block_in_place", DEADLINE, progress, move || {
        let rt = build(Runtime::builder().processors(2));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let entered = Arc::new(AtomicBool::new(false));
        let go = Signal::new();
        let task = {
            let (entered, go) = (entered.clone(), go.clone());
            fairlane::task::Builder::new()
                .affinity([ids[1]])
                .spawn_on(
                    async move {
                        let before = current_processor();
                        fairlane::task::block_in_place(|| {
                            entered.store(true, Ordering::SeqCst);
                            go.wait_blocking();
                        });
                        fairlane::yield_now().await;
                        (before, current_processor())
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        wait_until("block_in_place to start", || entered.load(Ordering::SeqCst));
        // Other tasks keep running meanwhile.
        assert_eq!(rt.block_on(rt.spawn(async { 5 })).unwrap(), 5);
        at.reached("removing the processor of the task in block_in_place");
        cluster
            .remove_processor(ids[1])
            .expect("remove a processor whose task is in block_in_place");
        assert_eq!(cluster.processors(), [ids[0]]);
        at.reached("removed; block_in_place released; waiting for the task");
        go.notify();
        let (before, after) = rt.block_on(task).expect("task");
        at.reached("joined");
        assert_eq!(before, Some(ids[1]));
        assert_eq!(
            after,
            Some(ids[0]),
            "re-homed after its processor was removed"
        );
        assert_runs_on(&rt, &[ids[0]]);
    });
}
