//! Affinity: a task restricted to a set of processors is only ever polled
//! on them, also while other processors come and go, and when woken from
//! its own processor's sleep; `set_affinity` moves the calling task; one
//! whose processors are all removed is re-homed and completes.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use fairlane::task::{current_processor, ProcessorId};
use fairlane::{JoinHandle, Runtime};

use crate::common::clusters::{build, remove_while_spinning, Resizer};
use crate::common::{serial, wait_until, with_deadline, Signal, DEADLINE};

/// A task restricted to `set` that, `steps` times, yields, then wakes its
/// partner (`to_partner`) and waits for it (`to_task`), recording its
/// processor at every poll step (`2 * steps + 1` records). Returns the task
/// and the two signals, `(task, to_task, to_partner)`.
fn spawn_pinger(
    rt: &Runtime,
    set: &[ProcessorId],
    steps: usize,
) -> (
    JoinHandle<Vec<Option<ProcessorId>>>,
    Arc<Signal>,
    Arc<Signal>,
) {
    let (to_task, to_partner) = (Signal::new(), Signal::new());
    let task = {
        let (to_task, to_partner) = (to_task.clone(), to_partner.clone());
        fairlane::task::Builder::new()
            .affinity(set.to_vec())
            .spawn_on(
                async move {
                    let mut seen = Vec::with_capacity(2 * steps + 1);
                    for _ in 0..steps {
                        seen.push(current_processor());
                        fairlane::yield_now().await;
                        seen.push(current_processor());
                        to_partner.notify();
                        to_task.wait().await;
                    }
                    seen.push(current_processor());
                    seen
                },
                rt.handle(),
            )
            .expect("spawn restricted")
    };
    (task, to_task, to_partner)
}

/// A pinger's partner on a plain thread: `steps` times, waits for the
/// pinger and wakes it.
fn partner_thread(
    to_task: Arc<Signal>,
    to_partner: Arc<Signal>,
    steps: usize,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for _ in 0..steps {
            to_partner.wait_blocking();
            to_task.notify();
        }
    })
}

/// Restricted tasks, each woken alternately by itself (yield) and by a
/// partner (an unrestricted task or a plain thread), under a load of
/// unrestricted yielders, record their processor at every poll step: every
/// record must be in the task's set.
#[test]
fn affinity_keeps_tasks_on_their_processors() {
    const STEPS: usize = 200;
    const PER_SET: usize = 6;
    let _serial = serial();
    with_deadline("affinity", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(3));
        let ids = rt.handle().cluster().processors();
        let sets = [vec![ids[1]], vec![ids[0], ids[2]], vec![ids[2]]];
        let stop_load = Arc::new(AtomicBool::new(false));
        let load: Vec<_> = (0..6)
            .map(|_| {
                let stop = stop_load.clone();
                rt.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..200 {
                            std::hint::spin_loop();
                        }
                        fairlane::yield_now().await;
                    }
                })
            })
            .collect();
        let mut restricted = Vec::new();
        let mut partner_tasks = Vec::new();
        let mut partner_threads = Vec::new();
        for (k, set) in sets.iter().enumerate() {
            for j in 0..PER_SET {
                let (task, to_task, to_partner) = spawn_pinger(&rt, set, STEPS);
                restricted.push((k, task));
                if j % 2 == 0 {
                    partner_tasks.push(rt.spawn(async move {
                        for _ in 0..STEPS {
                            to_partner.wait().await;
                            to_task.notify();
                        }
                    }));
                } else {
                    partner_threads.push(partner_thread(to_task, to_partner, STEPS));
                }
            }
        }
        let mut per_processor = std::collections::BTreeMap::<ProcessorId, usize>::new();
        for (k, task) in restricted {
            let seen = rt.block_on(task).expect("restricted task");
            assert_eq!(seen.len(), 2 * STEPS + 1);
            for p in seen {
                let p = p.expect("a task runs on a processor");
                assert!(
                    sets[k].contains(&p),
                    "a task restricted to {:?} was polled on {p}",
                    sets[k]
                );
                *per_processor.entry(p).or_default() += 1;
            }
        }
        rt.block_on(async {
            for t in partner_tasks {
                t.await.unwrap();
            }
        });
        for t in partner_threads {
            t.join().unwrap();
        }
        stop_load.store(true, Ordering::Relaxed);
        rt.block_on(async {
            for t in load {
                t.await.unwrap();
            }
        });
        eprintln!("affinity: polls per processor {per_processor:?}");
    });
}

#[test]
fn set_affinity_moves_the_calling_task() {
    let _serial = serial();
    with_deadline("set_affinity", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(3));
        let ids = rt.handle().cluster().processors();
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let target = ids[i % 3];
                rt.spawn(async move {
                    fairlane::task::set_affinity(Some([target]))?;
                    fairlane::yield_now().await;
                    let mut seen = Vec::new();
                    for _ in 0..50 {
                        seen.push(current_processor());
                        fairlane::yield_now().await;
                    }
                    seen.push(current_processor());
                    fairlane::task::set_affinity(None::<Vec<ProcessorId>>)?;
                    fairlane::yield_now().await;
                    Ok::<_, std::io::Error>((target, seen))
                })
            })
            .collect();
        for task in tasks {
            let (target, seen) = rt.block_on(task).unwrap().expect("set_affinity");
            for p in seen {
                assert_eq!(
                    p,
                    Some(target),
                    "after set_affinity(Some([{target}])) and a yield"
                );
            }
        }
        // Not in a task: Unsupported, in block_on and on a plain thread.
        let err = fairlane::task::set_affinity(Some([ids[0]])).expect_err("outside a runtime");
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        let err = rt
            .block_on(async { fairlane::task::set_affinity(Some([ids[0]])) })
            .expect_err("in block_on");
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        // Affinity with a priority other than normal: InvalidInput.
        let err = fairlane::task::Builder::new()
            .priority(fairlane::task::Priority::High)
            .affinity([ids[0]])
            .spawn_on(async {}, rt.handle())
            .expect_err("affinity with high priority");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    });
}

/// A task restricted to one processor, parked when that processor is
/// removed, is re-homed when woken and completes on the other one.
#[test]
fn a_parked_task_whose_processor_is_removed_is_rehomed() {
    let _serial = serial();
    with_deadline("rehome_parked", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(2));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let signal = Signal::new();
        let parked = Arc::new(AtomicBool::new(false));
        let task = {
            let (signal, parked) = (signal.clone(), parked.clone());
            fairlane::task::Builder::new()
                .affinity([ids[1]])
                .spawn_on(
                    async move {
                        let before = current_processor();
                        parked.store(true, Ordering::SeqCst);
                        signal.wait().await;
                        let after = current_processor();
                        fairlane::yield_now().await;
                        (before, after, current_processor())
                    },
                    rt.handle(),
                )
                .expect("spawn restricted")
        };
        wait_until("the task to park", || parked.load(Ordering::SeqCst));
        cluster.remove_processor(ids[1]).expect("remove");
        signal.notify();
        let (before, after, last) = rt.block_on(task).expect("re-homed task");
        assert_eq!(before, Some(ids[1]));
        assert_eq!(after, Some(ids[0]), "re-homed onto the remaining processor");
        assert_eq!(last, Some(ids[0]));
    });
}

/// A restricted task queued behind a spinner on its only processor when
/// that processor is removed completes; once the removal has returned it
/// never runs on the removed processor.
#[test]
fn a_queued_task_whose_processor_is_removed_is_rehomed() {
    let _serial = serial();
    with_deadline("rehome_queued", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(2).help_period(0));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let (keeper, victim) = (ids[0], ids[1]);
        let spinning = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let removed = Arc::new(AtomicBool::new(false));
        let spinner = {
            let (spinning, release) = (spinning.clone(), release.clone());
            fairlane::task::Builder::new()
                .affinity([victim])
                .spawn_on(
                    async move {
                        let on = current_processor();
                        spinning.store(true, Ordering::SeqCst);
                        while !release.load(Ordering::SeqCst) {
                            std::hint::spin_loop();
                        }
                        on
                    },
                    rt.handle(),
                )
                .expect("spawn spinner")
        };
        wait_until("the spinner to start", || spinning.load(Ordering::SeqCst));
        let queued: Vec<_> = (0..20)
            .map(|_| {
                let removed = removed.clone();
                fairlane::task::Builder::new()
                    .affinity([victim])
                    .spawn_on(
                        async move {
                            let mut seen = Vec::new();
                            for _ in 0..3 {
                                seen.push((current_processor(), removed.load(Ordering::SeqCst)));
                                fairlane::yield_now().await;
                            }
                            seen
                        },
                        rt.handle(),
                    )
                    .expect("spawn restricted")
            })
            .collect();
        remove_while_spinning(&cluster, victim, &release, &removed).expect("remove the victim");
        assert_eq!(rt.block_on(spinner).unwrap(), Some(victim));
        assert_eq!(cluster.processors(), [keeper]);
        for task in queued {
            for (p, after_removal) in rt.block_on(task).expect("re-homed task") {
                let p = p.expect("on a processor");
                if after_removal {
                    assert_eq!(
                        p, keeper,
                        "polled on the removed processor after its removal"
                    );
                } else {
                    assert!(p == keeper || p == victim, "{p}");
                }
            }
        }
    });
}

/// Restricted tasks keep to their set while other processors come and go;
/// tasks restricted to a processor that may be removed complete anyway.
#[test]
fn affinity_holds_while_other_processors_are_resized() {
    const STEPS: usize = 300;
    let _serial = serial();
    with_deadline("affinity_resizing", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(3).max_processors(6));
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let protected = vec![ids[0], ids[1]];
        let sets = [vec![ids[0], ids[1]], vec![ids[1]], vec![ids[2]]];
        let mut tasks = Vec::new();
        let mut partners = Vec::new();
        for (k, set) in sets.iter().enumerate() {
            for _ in 0..4 {
                let (task, to_task, to_partner) = spawn_pinger(&rt, set, STEPS);
                tasks.push((k, task));
                partners.push(partner_thread(to_task, to_partner, STEPS));
            }
        }
        // Started once the tasks are spawned: a set naming only a removed
        // processor is (rightly) refused at spawn.
        let resizer = Resizer::start_protecting(cluster.clone(), 6, 41, protected.clone());
        for (k, task) in tasks {
            let seen = rt.block_on(task).expect("restricted task");
            if k < 2 {
                for p in seen {
                    let p = p.expect("on a processor");
                    assert!(
                        sets[k].contains(&p),
                        "restricted to {:?}, polled on {p}",
                        sets[k]
                    );
                }
            }
        }
        for p in partners {
            p.join().unwrap();
        }
        // With at most 3 adds before the cluster is full, 10 changes include
        // a removal.
        wait_until("10 resizes", || resizer.ops() >= 10);
        let ops = resizer.ops();
        let log = resizer.finish();
        assert!(log.removes > 0, "{ops} ops: {log:?}");
        assert!(cluster.processors().contains(&ids[0]) && cluster.processors().contains(&ids[1]));
    });
}

/// A restricted task whose event is reaped by its own processor while that
/// processor sleeps (a timer fired, a completion reaped inside the host's
/// park): the push comes from the sleeper itself, and only it may run the
/// task, so the sleep must end (else the task waits until something else
/// wakes the processor: here, forever).
#[test]
fn restricted_task_woken_from_its_own_processors_sleep() {
    with_deadline("restricted_self_wake", DEADLINE, String::new, || {
        let rt = build(Runtime::builder().processors(2));
        let ids = rt.handle().cluster().processors();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let task = fairlane::task::Builder::new()
            .affinity([ids[1]])
            .spawn_on(
                async move {
                    for _ in 0..5 {
                        fairlane::time::sleep(Duration::from_millis(2)).await;
                    }
                    let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
                    addr_tx.send(listener.local_addr()?).unwrap();
                    listener.accept().await.map(drop)
                },
                rt.handle(),
            )
            .unwrap();
        let addr = addr_rx.recv().expect("the task bound its listener");
        // The task waits in accept; its processor goes to sleep meanwhile.
        thread::sleep(Duration::from_millis(20));
        let _client = std::net::TcpStream::connect(addr).unwrap();
        rt.block_on(task).unwrap().unwrap();
    });
}
