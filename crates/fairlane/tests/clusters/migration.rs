//! Clusters and migration: tasks of a cluster run on its processor
//! threads; `migrate_here` moves a task between clusters, back and forth,
//! also while the target cluster is resized, without losing it; moved tasks
//! stay counted and cancellable where they were spawned, and shutdown waits
//! for or drops them.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use fairlane::{Handle, Runtime};

use crate::common::clusters::{
    assert_in_cluster, assert_on, build, sorted, thread_name, whereabouts, Resizer, Trips,
};
use crate::common::{serial, wait_until, with_deadline, DropCounter, Signal, DEADLINE};

#[test]
fn cluster_tasks_run_on_the_clusters_processors() {
    let _serial = serial();
    with_deadline("cluster_spawn", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 2));
        let b = rt.cluster("b").expect("cluster b");
        let b_ids = b.processors();
        let d_ids = rt.handle().cluster().processors();
        assert_eq!(b_ids.len(), 2);
        assert_eq!(d_ids.len(), 1);
        let on_b: Vec<_> = (0..40)
            .map(|_| {
                b.spawn(async {
                    let mut seen = Vec::new();
                    for _ in 0..10 {
                        seen.push(whereabouts());
                        fairlane::yield_now().await;
                    }
                    // Spawns from a task of b land on b.
                    let child = fairlane::spawn(async { whereabouts() }).await.unwrap();
                    seen.push(child);
                    seen
                })
            })
            .collect();
        let on_default: Vec<_> = (0..40)
            .map(|_| {
                rt.spawn(async {
                    let mut seen = Vec::new();
                    for _ in 0..10 {
                        seen.push(whereabouts());
                        fairlane::yield_now().await;
                    }
                    seen
                })
            })
            .collect();
        for t in on_b {
            for w in rt.block_on(t).unwrap() {
                assert_on(&w, "b", &b_ids);
            }
        }
        for t in on_default {
            for w in rt.block_on(t).unwrap() {
                assert_on(&w, "default", &d_ids);
            }
        }
        // block_on through b's handle: spawns go to b.
        let (name, child) = b.handle().block_on(async {
            let child = fairlane::spawn(async { whereabouts() });
            (
                Handle::current().cluster().name().to_owned(),
                child.await.unwrap(),
            )
        });
        assert_eq!(name, "b");
        assert_on(&child, "b", &b_ids);
    });
}

#[test]
fn migrate_here_moves_a_task_between_clusters() {
    let _serial = serial();
    with_deadline("migrate_once", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 2));
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let (b_ids, d_ids) = (b.processors(), default.processors());
        let task = {
            let (b, default) = (b.clone(), default.clone());
            rt.spawn(async move {
                let start = whereabouts();
                b.migrate_here().await.expect("migrate to b");
                let on_b = whereabouts();
                fairlane::yield_now().await;
                let on_b_after_yield = whereabouts();
                let child = fairlane::spawn(async { whereabouts() }).await.unwrap();
                // Already there: completes at once.
                b.migrate_here().await.expect("migrate to where it is");
                let still_b = whereabouts();
                default.migrate_here().await.expect("migrate back");
                let back = whereabouts();
                let child_back = fairlane::spawn(async { whereabouts() }).await.unwrap();
                (
                    start,
                    on_b,
                    on_b_after_yield,
                    child,
                    still_b,
                    back,
                    child_back,
                )
            })
        };
        let (start, on_b, on_b_after_yield, child, still_b, back, child_back) =
            rt.block_on(task).unwrap();
        assert_on(&start, "default", &d_ids);
        assert_on(&on_b, "b", &b_ids);
        assert_on(&on_b_after_yield, "b", &b_ids);
        assert_on(&child, "b", &b_ids);
        assert_on(&still_b, "b", &b_ids);
        assert_on(&back, "default", &d_ids);
        assert_on(&child_back, "default", &d_ids);
    });
}

/// Many tasks migrate back and forth between two clusters, also woken by
/// each other through signals on the way; none is lost and every step runs
/// where it should.
#[test]
fn migrating_back_and_forth_loses_nothing() {
    const TASKS: usize = 16;
    const TRIPS: usize = 100;
    let _serial = serial();
    let trips = Trips::new(TASKS);
    trips.run("migrate_many", move |trips| {
        let rt = build(Runtime::builder().processors(1).cluster("b", 2));
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let (b_ids, d_ids) = (b.processors(), default.processors());
        // Pairs of tasks ping-pong a token between migrations.
        let signals: Vec<_> = (0..TASKS).map(|_| Signal::new()).collect();
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (b, default, trips) = (b.clone(), default.clone(), trips.clone());
                let (b_ids, d_ids) = (b_ids.clone(), d_ids.clone());
                let mine = signals[i].clone();
                let partner = signals[i ^ 1].clone();
                let leader = i % 2 == 0;
                rt.spawn(async move {
                    for _ in 0..TRIPS {
                        b.migrate_here().await.expect("to b");
                        assert_on(&whereabouts(), "b", &b_ids);
                        if leader {
                            partner.notify();
                            mine.wait().await;
                        } else {
                            mine.wait().await;
                            partner.notify();
                        }
                        assert_on(&whereabouts(), "b", &b_ids);
                        default.migrate_here().await.expect("to default");
                        assert_on(&whereabouts(), "default", &d_ids);
                        fairlane::yield_now().await;
                        assert_on(&whereabouts(), "default", &d_ids);
                        trips.done(i);
                    }
                })
            })
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.expect("migrating task");
            }
        });
    });
    trips.assert_each(TRIPS);
}

/// A task's registry entry (what shutdown and `alive_tasks` count) stays
/// with the cluster that spawned it while the task runs elsewhere: it is
/// removed when the task finishes on the other cluster, aborting a moved
/// task works, and dropping the runtime drops a moved task that is parked.
#[test]
fn moved_tasks_stay_counted_and_cancellable_where_they_were_spawned() {
    let _serial = serial();
    with_deadline("migrate_registry", DEADLINE, String::new, || {
        let dropped = Arc::new(AtomicUsize::new(0));
        let rt = build(Runtime::builder().processors(1).cluster("b", 1));
        let b = rt.cluster("b").unwrap();
        let alive = |c: &Handle| c.metrics().alive_tasks;
        let default = rt.handle().clone();
        let b_handle = b.handle().clone();

        // Finishes on b: leaves the default cluster's registry.
        let (b2, counter) = (b.clone(), DropCounter(dropped.clone()));
        let done = rt.spawn(async move {
            let _counter = counter;
            b2.migrate_here().await.expect("to b");
            whereabouts()
        });
        assert_on(&rt.block_on(done).unwrap(), "b", &b.processors());
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(alive(&default), 0);
        assert_eq!(alive(&b_handle), 0);

        // Parked on b: counted on the default cluster only.
        let parked: Vec<_> = (0..2)
            .map(|_| {
                let (b2, counter) = (b.clone(), DropCounter(dropped.clone()));
                rt.spawn(async move {
                    let _counter = counter;
                    b2.migrate_here().await.expect("to b");
                    std::future::pending::<()>().await
                })
            })
            .collect();
        wait_until("both tasks on b", || {
            let polls: u64 = b_handle.metrics().processors.iter().map(|p| p.polls).sum();
            polls >= 3
        });
        assert_eq!(alive(&default), 2);
        assert_eq!(alive(&b_handle), 0);

        // Aborted while on b.
        let mut parked = parked.into_iter();
        let first = parked.next().unwrap();
        let abort = first.abort_handle();
        abort.abort();
        assert!(rt.block_on(first).unwrap_err().is_cancelled());
        assert!(abort.is_finished());
        assert_eq!(dropped.load(Ordering::SeqCst), 2);
        assert_eq!(alive(&default), 1);

        // Dropped by the runtime's shutdown, from the spawning cluster's
        // registry.
        let second = parked.next().unwrap();
        drop(rt);
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
        assert!(second.is_finished());
    });
}

/// `block_in_place` hands the processor to a stand-in thread for a while;
/// back on its own thread, the same poll is still "the current task": moving
/// it, or changing its affinity, works right after.
#[test]
fn the_current_task_survives_block_in_place() {
    let _serial = serial();
    with_deadline(
        "current_after_block_in_place",
        DEADLINE,
        String::new,
        || {
            let rt = build(Runtime::builder().processors(1).cluster("b", 1));
            let b = rt.cluster("b").unwrap();
            let default = rt.handle().cluster();
            let (b_ids, d_ids) = (b.processors(), default.processors());
            let task = {
                let b = b.clone();
                let d_ids = d_ids.clone();
                rt.spawn(async move {
                    // Something for the stand-in to poll meanwhile.
                    let other = fairlane::spawn(async { whereabouts() });
                    fairlane::task::block_in_place(|| thread::sleep(Duration::from_millis(20)));
                    fairlane::task::set_affinity(Some(d_ids))
                        .expect("set_affinity after block_in_place");
                    fairlane::task::block_in_place(|| thread::sleep(Duration::from_millis(20)));
                    b.migrate_here()
                        .await
                        .expect("migrate_here after block_in_place");
                    (other.await.unwrap(), whereabouts())
                })
            };
            let (other, after) = rt.block_on(task).unwrap();
            // (Polled by the stand-in thread, under the processor's identity.)
            assert_eq!(other.0, "default");
            assert!(d_ids.contains(&other.1.expect("on a processor")));
            assert_on(&after, "b", &b_ids);
        },
    );
}

#[test]
fn migrate_here_outside_a_task_is_unsupported() {
    let rt = build(Runtime::builder().processors(1).cluster("b", 1));
    let b = rt.cluster("b").unwrap();
    let err = rt
        .block_on(b.migrate_here())
        .expect_err("migrate_here in block_on");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    let err = b
        .handle()
        .block_on(b.migrate_here())
        .expect_err("migrate_here in b's block_on");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    // From a task of another runtime.
    let other = build(Runtime::builder().processors(1));
    let b2 = b.clone();
    let result = other.block_on(other.spawn(async move {
        let r = b2.migrate_here().await;
        (
            r,
            Handle::current().cluster().name().to_owned(),
            thread_name(),
        )
    }));
    let (r, name, thread) = result.unwrap();
    let err = r.expect_err("migrate_here onto another runtime's cluster");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert_eq!(name, "default");
    assert!(thread.starts_with("fairlane-processor-"), "{thread}");
    // Both runtimes keep working.
    assert_eq!(rt.block_on(b.spawn(async { 1 })).unwrap(), 1);
    assert_eq!(other.block_on(other.spawn(async { 2 })).unwrap(), 2);
}

/// Tasks parked after migrating (to b, and to b and back) are cancelled by
/// the runtime's drop: each future dropped exactly once, and the drop does
/// not hang.
#[test]
fn dropping_the_runtime_drops_migrated_tasks() {
    const TASKS: usize = 40;
    let _serial = serial();
    let drops = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let (d, p) = (drops.clone(), parked.clone());
    let progress = move || {
        format!(
            "parked {}, dropped {}",
            p.load(Ordering::SeqCst),
            d.load(Ordering::SeqCst)
        )
    };
    let (d, p) = (drops.clone(), parked.clone());
    let signals = with_deadline("drop_migrated", DEADLINE, progress, move || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 2));
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let mut signals = Vec::new();
        for i in 0..TASKS {
            let counter = DropCounter(d.clone());
            let (b, default, parked) = (b.clone(), default.clone(), p.clone());
            let signal = Signal::new();
            signals.push(signal.clone());
            rt.spawn(async move {
                let _counter = counter;
                b.migrate_here().await.unwrap();
                if i % 2 == 1 {
                    default.migrate_here().await.unwrap();
                }
                parked.fetch_add(1, Ordering::SeqCst);
                // Parked for good (never notified before the drop).
                signal.wait().await;
                unreachable!("the signal is only notified after the runtime is gone");
            });
        }
        wait_until("every task to park", || p.load(Ordering::SeqCst) == TASKS);
        assert_eq!(d.load(Ordering::SeqCst), 0, "nothing dropped while running");
        drop(rt);
        signals
    });
    assert_eq!(
        drops.load(Ordering::SeqCst),
        TASKS,
        "each future dropped once"
    );
    // Waking the (cancelled) tasks' old wakers after the drop is harmless.
    for s in signals {
        s.notify();
    }
    assert_eq!(drops.load(Ordering::SeqCst), TASKS);
}

/// Tasks migrate back and forth while processors of the target cluster are
/// added and removed.
#[test]
fn migrating_while_the_target_cluster_is_resized() {
    const TASKS: usize = 16;
    const TRIPS: usize = 100;
    let _serial = serial();
    let trips = Trips::new(TASKS);
    let (ops, log) = trips.run("migrate_resizing", move |trips| {
        let rt = build(
            Runtime::builder()
                .processors(1)
                .cluster("b", 1)
                .max_processors(4),
        );
        let b = rt.cluster("b").unwrap();
        let default = rt.handle().cluster();
        let resizer = Resizer::start(b.clone(), 4, 31);
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (b, default, trips) = (b.clone(), default.clone(), trips.clone());
                rt.spawn(async move {
                    for _ in 0..TRIPS {
                        b.migrate_here().await.expect("to b");
                        assert_in_cluster(&whereabouts(), "b");
                        fairlane::yield_now().await;
                        assert_in_cluster(&whereabouts(), "b");
                        let child = fairlane::spawn(async { whereabouts() }).await.unwrap();
                        assert_in_cluster(&child, "b");
                        default.migrate_here().await.expect("to default");
                        assert_in_cluster(&whereabouts(), "default");
                        trips.done(i);
                    }
                })
            })
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.expect("migrating task");
            }
        });
        let ops = resizer.ops();
        let log = resizer.finish();
        assert_eq!(sorted(b.processors()), sorted(log.live.clone()));
        (ops, log)
    });
    trips.assert_each(TRIPS);
    eprintln!("migrating_while_the_target_cluster_is_resized: {ops} resizes; {log:?}");
}

/// `shutdown_graceful` waits for a foreground task that migrated to another
/// cluster.
#[test]
fn graceful_shutdown_waits_for_migrated_tasks() {
    let _serial = serial();
    with_deadline("graceful_migrated", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(1).cluster("b", 1));
        let b = rt.cluster("b").unwrap();
        let finished = Arc::new(AtomicBool::new(false));
        let migrated = Arc::new(AtomicBool::new(false));
        let go = Signal::new();
        {
            let (finished, migrated, go) = (finished.clone(), migrated.clone(), go.clone());
            rt.spawn(async move {
                b.migrate_here().await.unwrap();
                migrated.store(true, Ordering::SeqCst);
                go.wait().await;
                fairlane::yield_now().await;
                finished.store(true, Ordering::SeqCst);
            });
        }
        wait_until("the task to migrate", || migrated.load(Ordering::SeqCst));
        let notifier = {
            let go = go.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                go.notify();
            })
        };
        rt.shutdown_graceful(Duration::from_secs(1));
        assert!(
            finished.load(Ordering::SeqCst),
            "shutdown_graceful returned before a foreground task (migrated to b) finished"
        );
        notifier.join().unwrap();
    });
}

/// Migrating clears a task's affinity (it named the old cluster's
/// processors): the task runs on the target cluster.
#[test]
fn migrating_a_restricted_task_clears_its_affinity() {
    let _serial = serial();
    with_deadline("migrate_restricted", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(2).cluster("b", 1));
        let b = rt.cluster("b").unwrap();
        let d_ids = rt.handle().cluster().processors();
        let b_ids = b.processors();
        let task = {
            let b = b.clone();
            fairlane::task::Builder::new()
                .affinity([d_ids[1]])
                .spawn_on(
                    async move {
                        let start = whereabouts();
                        b.migrate_here().await.unwrap();
                        let mut seen = vec![start];
                        for _ in 0..10 {
                            seen.push(whereabouts());
                            fairlane::yield_now().await;
                        }
                        seen
                    },
                    rt.handle(),
                )
                .expect("spawn")
        };
        let seen = rt.block_on(task).unwrap();
        assert_on(&seen[0], "default", &[d_ids[1]]);
        for w in &seen[1..] {
            assert_on(w, "b", &b_ids);
        }
    });
}
