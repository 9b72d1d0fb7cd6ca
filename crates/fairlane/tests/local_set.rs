//! `task::LocalSet` and `task::spawn_local`: tasks that are not `Send` run
//! on the thread that drives their set, woken from anywhere, aborted,
//! panicking, dropped with the set, and never starving the set's owner.

mod common;

use std::cell::{Cell, RefCell};
use std::panic::catch_unwind;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use common::{panic_message, with_deadline, DEADLINE};
use fairlane::task::{self, LocalSet};

fn current_thread() -> fairlane::Runtime {
    fairlane::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a current-thread runtime")
}

/// Records the thread it is dropped on.
struct DropOn(Arc<Mutex<Vec<ThreadId>>>);

impl Drop for DropOn {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(thread::current().id());
    }
}

#[fairlane::test(processors = 2)]
async fn run_until_runs_tasks_holding_rc() {
    let local = LocalSet::new();
    let out = local
        .run_until(async {
            let shared = Rc::new(RefCell::new(Vec::new()));
            let handles: Vec<_> = (0..10)
                .map(|i| {
                    let shared = Rc::clone(&shared);
                    task::spawn_local(async move {
                        task::yield_now().await;
                        shared.borrow_mut().push(i);
                        i * 2
                    })
                })
                .collect();
            let mut sum = 0;
            for h in handles {
                sum += h.await.unwrap();
            }
            let mut seen = shared.borrow().clone();
            seen.sort();
            (sum, seen)
        })
        .await;
    assert_eq!(out.0, 90);
    assert_eq!(out.1, (0..10).collect::<Vec<_>>());
}

#[fairlane::test(flavor = "current_thread")]
async fn a_local_task_spawns_local_tasks() {
    let local = LocalSet::new();
    let depth = local
        .run_until(async {
            fn nest(n: u32, count: Rc<Cell<u32>>) -> task::JoinHandle<u32> {
                task::spawn_local(async move {
                    count.set(count.get() + 1);
                    if n == 0 {
                        0
                    } else {
                        nest(n - 1, count).await.unwrap() + 1
                    }
                })
            }
            let count = Rc::new(Cell::new(0));
            let depth = nest(20, Rc::clone(&count)).await.unwrap();
            assert_eq!(count.get(), 21);
            depth
        })
        .await;
    assert_eq!(depth, 20);
}

#[test]
fn a_local_task_is_woken_from_another_thread() {
    with_deadline("remote-wake", DEADLINE, String::new, || {
        let rt = common::runtime(2);
        let local = LocalSet::new();
        local.block_on(&rt, async move {
            let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
            let (tx2, rx2) = tokio::sync::oneshot::channel::<u32>();
            let here = Rc::new(Cell::new(0));
            let waiter = task::spawn_local({
                let here = Rc::clone(&here);
                async move {
                    here.set(rx.await.unwrap());
                    let from_thread = rx2.await.unwrap();
                    (thread::current().id(), here.get() + from_thread)
                }
            });
            // A runtime task, on any processor, wakes the local task...
            fairlane::spawn(async move {
                fairlane::time::sleep(Duration::from_millis(5)).await;
                tx.send(40).unwrap();
            });
            // ... and so does a plain thread.
            let sender = thread::spawn(move || {
                thread::sleep(Duration::from_millis(10));
                tx2.send(2).unwrap();
            });
            let (ran_on, total) = waiter.await.unwrap();
            sender.join().unwrap();
            assert_eq!(total, 42);
            // The set's tasks run inside whatever drives it: here.
            assert_eq!(ran_on, thread::current().id());
            assert_eq!(here.get(), 40);
        });
    });
}

#[test]
fn many_local_tasks_woken_by_a_runtime_task_all_run() {
    const TASKS: usize = 500;
    with_deadline("many-wakes", DEADLINE, String::new, || {
        let rt = current_thread();
        let local = LocalSet::new();
        let woken = Rc::new(Cell::new(0));
        local.block_on(&rt, async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let sender = fairlane::spawn(async move {
                let mut senders = Vec::new();
                for _ in 0..TASKS {
                    let (one_tx, one_rx) = tokio::sync::oneshot::channel::<()>();
                    senders.push(one_tx);
                    tx.send(one_rx).unwrap();
                }
                fairlane::time::sleep(Duration::from_millis(5)).await;
                for one in senders {
                    one.send(()).unwrap();
                }
            });
            let mut handles = Vec::new();
            while let Some(one_rx) = rx.recv().await {
                let woken = Rc::clone(&woken);
                handles.push(task::spawn_local(async move {
                    one_rx.await.unwrap();
                    woken.set(woken.get() + 1);
                }));
            }
            sender.await.unwrap();
            for h in handles {
                h.await.unwrap();
            }
        });
        assert_eq!(woken.get(), TASKS);
    });
}

#[test]
fn a_set_kept_in_a_thread_local_is_dropped_with_its_thread() {
    thread_local! {
        static LOCAL: LocalSet = LocalSet::new();
    }
    let drops = Arc::new(Mutex::new(Vec::new()));
    let drops2 = Arc::clone(&drops);
    let thread = thread::spawn(move || {
        let rt = current_thread();
        LOCAL.with(|local| {
            let guard = DropOn(drops2);
            local.spawn_local(async move {
                let _guard = guard;
                std::future::pending::<()>().await
            });
            local.block_on(&rt, async {
                task::spawn_local(async {}).await.unwrap();
            });
        });
        thread::current().id()
    });
    let id = thread.join().unwrap();
    assert_eq!(*drops.lock().unwrap(), [id]);
}

#[fairlane::test(processors = 2)]
async fn a_local_task_may_wait_on_spawn_blocking() {
    let local = LocalSet::new();
    let here = thread::current().id();
    let (elsewhere, back) = local
        .run_until(local.spawn_local(async move {
            let rc = Rc::new(1);
            let elsewhere = task::spawn_blocking(|| thread::current().id())
                .await
                .unwrap();
            (elsewhere, thread::current().id() == here && *rc == 1)
        }))
        .await
        .unwrap();
    assert_ne!(elsewhere, here);
    assert!(back);
}

#[fairlane::test(flavor = "current_thread")]
async fn a_spawn_wakes_a_set_polled_beside_it() {
    let local = LocalSet::new();
    let out = tokio::select! {
        _ = local.run_until(std::future::pending::<()>()) => unreachable!(),
        out = async { local.spawn_local(async { Rc::new(3) }).await.unwrap() } => out,
    };
    assert_eq!(*out, 3);
}

#[fairlane::test(processors = 2)]
async fn a_local_task_can_be_aborted_and_its_future_is_dropped_on_the_set_thread() {
    let drops = Arc::new(Mutex::new(Vec::new()));
    let local = LocalSet::new();
    let drops2 = Arc::clone(&drops);
    local
        .run_until(async move {
            let guard = DropOn(drops2);
            let not_send = Rc::new(());
            let handle = task::spawn_local(async move {
                let _guard = guard;
                let _rc = not_send;
                std::future::pending::<()>().await
            });
            task::yield_now().await;
            assert!(!handle.is_finished());
            // Aborted from another thread, through an abort handle.
            let abort = handle.abort_handle();
            thread::spawn(move || abort.abort()).join().unwrap();
            let err = handle.await.unwrap_err();
            assert!(err.is_cancelled());
            assert_eq!(*drops.lock().unwrap(), [thread::current().id()]);
        })
        .await;
}

#[fairlane::test(processors = 1)]
async fn a_panic_in_a_local_task_is_reported_and_the_set_goes_on() {
    let local = LocalSet::new();
    local
        .run_until(async {
            let boom = task::spawn_local(async {
                let _rc = Rc::new(1);
                panic!("local boom");
            });
            let err = boom.await.unwrap_err();
            assert!(err.is_panic());
            assert_eq!(panic_message(&*err.into_panic()), "local boom");
            let after = task::spawn_local(async { Rc::new(5) });
            assert_eq!(*after.await.unwrap(), 5);
        })
        .await;
}

#[test]
fn dropping_the_set_drops_unfinished_tasks_on_its_thread() {
    let rt = common::runtime(2);
    let drops = Arc::new(Mutex::new(Vec::new()));
    let local = LocalSet::new();
    let (parked, never_run) = {
        let parked = local.spawn_local({
            let guard = DropOn(Arc::clone(&drops));
            async move {
                let _guard = guard;
                let _rc = Rc::new(());
                std::future::pending::<()>().await
            }
        });
        // Polled once, so parked; the second one never runs at all.
        local.block_on(&rt, task::yield_now());
        let never_run = local.spawn_local({
            let guard = DropOn(Arc::clone(&drops));
            async move {
                let _guard = guard;
            }
        });
        (parked, never_run)
    };
    assert!(!parked.is_finished());
    let me = thread::current().id();
    // Both futures are dropped with the set, here.
    drop(local);
    assert_eq!(*drops.lock().unwrap(), [me, me]);
    assert!(parked.is_finished());
    assert!(rt.block_on(parked).unwrap_err().is_cancelled());
    assert!(rt.block_on(never_run).unwrap_err().is_cancelled());
}

#[test]
fn a_future_dropped_with_the_set_may_spawn_local() {
    let rt = current_thread();
    let local = LocalSet::new();
    struct SpawnsOnDrop(Rc<RefCell<Option<task::JoinHandle<()>>>>);
    impl Drop for SpawnsOnDrop {
        fn drop(&mut self) {
            *self.0.borrow_mut() = Some(task::spawn_local(async {}));
        }
    }
    let late = Rc::new(RefCell::new(None));
    let guard = SpawnsOnDrop(Rc::clone(&late));
    local.spawn_local(async move {
        let _guard = guard;
        std::future::pending::<()>().await
    });
    local.block_on(&rt, task::yield_now());
    drop(local);
    let late = late.borrow_mut().take().expect("spawned while dropped");
    assert!(rt.block_on(late).unwrap_err().is_cancelled());
}

#[fairlane::test(processors = 2)]
async fn the_set_awaited_completes_when_all_its_tasks_have() {
    let local = LocalSet::new();
    let done = Rc::new(Cell::new(0));
    for i in 0..5u64 {
        let done = Rc::clone(&done);
        local.spawn_local(async move {
            fairlane::time::sleep(Duration::from_millis(i)).await;
            // Spawned from a task of the set being awaited: awaited too.
            let done2 = Rc::clone(&done);
            task::spawn_local(async move { done2.set(done2.get() + 1) });
            done.set(done.get() + 1);
        });
    }
    local.await;
    assert_eq!(done.get(), 10);
}

#[test]
fn block_on_works_on_both_flavors() {
    for rt in [current_thread(), common::runtime(2)] {
        let local = LocalSet::new();
        let caller = thread::current().id();
        let (ran_on, n) = local.block_on(&rt, async {
            let n = Rc::new(Cell::new(0));
            let n2 = Rc::clone(&n);
            let task = task::spawn_local(async move {
                fairlane::time::sleep(Duration::from_millis(2)).await;
                let runtime_task = fairlane::spawn(async { 3 });
                n2.set(runtime_task.await.unwrap());
                thread::current().id()
            });
            let ran_on = task.await.unwrap();
            (ran_on, n.get())
        });
        assert_eq!(ran_on, caller);
        assert_eq!(n, 3);
    }
}

#[test]
fn spawn_local_outside_a_set_panics_naming_local_set() {
    let payload = catch_unwind(|| {
        task::spawn_local(async {});
    })
    .unwrap_err();
    let message = panic_message(&*payload);
    assert!(message.contains("LocalSet"), "{message}");
    // Nor inside a plain runtime task or block_on.
    let rt = common::runtime(1);
    let payload = rt
        .block_on(rt.spawn(async {
            catch_unwind(|| drop(task::spawn_local(async {}))).map_err(|p| panic_message(&*p))
        }))
        .unwrap()
        .unwrap_err();
    assert!(payload.contains("LocalSet"), "{payload}");
    let payload = rt
        .block_on(async { catch_unwind(|| drop(task::spawn_local(async {}))) })
        .unwrap_err();
    assert!(panic_message(&*payload).contains("LocalSet"));
}

#[test]
fn enter_lets_spawn_local_work_and_wakes_the_set() {
    let rt = current_thread();
    let local = LocalSet::new();
    let value = Rc::new(Cell::new(0));
    {
        let _guard = local.enter();
        let value = Rc::clone(&value);
        task::spawn_local(async move { value.set(7) });
    }
    // Outside the guard there is no set again.
    assert!(catch_unwind(|| drop(task::spawn_local(async {}))).is_err());
    let mut local = local;
    rt.block_on(&mut local);
    assert_eq!(value.get(), 7);
    // A spawn onto a set that is pending (awaited beside this) wakes it.
    let value2 = Rc::clone(&value);
    rt.block_on(async {
        let parked = local.spawn_local(async {
            fairlane::time::sleep(Duration::from_millis(5)).await;
        });
        let guard = local.enter();
        let spawn_later = async move {
            fairlane::time::sleep(Duration::from_millis(1)).await;
            task::spawn_local(async move { value2.set(8) });
            drop(guard);
        };
        tokio::join!(&mut local, spawn_later);
        assert!(parked.await.is_ok());
    });
    assert_eq!(value.get(), 8);
}

#[fairlane::test(processors = 2)]
async fn run_until_returns_when_its_future_does_though_a_task_never_finishes() {
    let local = LocalSet::new();
    let stuck = Rc::new(Cell::new(false));
    let out = local
        .run_until(async {
            let stuck2 = Rc::clone(&stuck);
            let handle = task::spawn_local(async move {
                stuck2.set(true);
                std::future::pending::<()>().await
            });
            task::yield_now().await;
            (handle, 11)
        })
        .await;
    assert_eq!(out.1, 11);
    assert!(stuck.get());
    assert!(!out.0.is_finished());
    // Still in the set: dropped with it.
    drop(local);
    assert!(out.0.await.unwrap_err().is_cancelled());
}

#[test]
fn the_owner_is_not_starved_by_a_task_that_yields_for_ever() {
    for flavor in ["current_thread", "multi_thread"] {
        let polls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&polls);
        with_deadline(
            "yields-for-ever",
            DEADLINE,
            move || {
                format!(
                    "{} polls of the yielding task",
                    seen.load(Ordering::Relaxed)
                )
            },
            move || {
                let rt = if flavor == "current_thread" {
                    current_thread()
                } else {
                    common::runtime(1)
                };
                let local = LocalSet::new();
                local.block_on(&rt, async {
                    let spinner = task::spawn_local(async move {
                        let _rc = Rc::new(());
                        loop {
                            polls.fetch_add(1, Ordering::Relaxed);
                            task::yield_now().await;
                        }
                    });
                    // A runtime task, a timer and a local task all get to run
                    // meanwhile, and so does this future.
                    let other = fairlane::spawn(async { 1 });
                    fairlane::time::sleep(Duration::from_millis(10)).await;
                    let local_other = task::spawn_local(async { 2 });
                    assert_eq!(other.await.unwrap() + local_other.await.unwrap(), 3);
                    spinner.abort();
                    assert!(spinner.await.unwrap_err().is_cancelled());
                });
            },
        );
    }
}

#[fairlane::test(processors = 1)]
async fn local_tasks_have_ids_and_their_own_budget() {
    let local = LocalSet::new();
    local
        .run_until(async {
            let handle = task::spawn_local(async { task::id() });
            let id = handle.id();
            assert_eq!(handle.await.unwrap(), id);
            let a = task::spawn_local(async {});
            let b = task::spawn_local(async {});
            assert_ne!(a.id(), b.id());
            assert_eq!(a.abort_handle().id(), a.id());

            // A task whose awaits are always ready spends its budget and
            // yields, though the thread driving the set (a `block_on`) has
            // none: the other task runs before it is done.
            let other_ran = Rc::new(Cell::new(false));
            let spinner = task::spawn_local({
                let other_ran = Rc::clone(&other_ran);
                async move {
                    for _ in 0..10_000 {
                        task::coop::cooperative(async {}).await;
                        if other_ran.get() {
                            return true;
                        }
                    }
                    false
                }
            });
            let other = task::spawn_local(async move { other_ran.set(true) });
            assert!(spinner.await.unwrap(), "the spinning task never yielded");
            other.await.unwrap();
        })
        .await;
}

#[test]
fn a_handle_of_a_send_output_can_be_awaited_on_another_thread() {
    let rt = common::runtime(2);
    let local = LocalSet::new();
    let handle = local.spawn_local(async {
        let _rc = Rc::new(());
        fairlane::time::sleep(Duration::from_millis(2)).await;
        9u32
    });
    let handle2 = rt.handle().clone();
    let waiter = thread::spawn(move || handle2.block_on(handle));
    let mut local = local;
    rt.block_on(&mut local);
    assert_eq!(waiter.join().unwrap().unwrap(), 9);
}

#[fairlane::test(processors = 1)]
async fn join_set_and_builder_spawn_local_tasks() {
    let local = LocalSet::new();
    local
        .run_until(async {
            let mut set = task::JoinSet::new();
            for i in 0..4 {
                set.spawn_local(async move {
                    task::yield_now().await;
                    *Rc::new(i)
                });
            }
            set.spawn_local(std::future::pending::<i32>());
            let mut sum = 0;
            for _ in 0..4 {
                sum += set.join_next().await.unwrap().unwrap();
            }
            assert_eq!(sum, 6);
            set.abort_all();
            assert!(set.join_next().await.unwrap().unwrap_err().is_cancelled());

            let named = task::Builder::new()
                .name("local-worker")
                .spawn_local(async { panic!("oops") })
                .unwrap();
            let err = named.await.unwrap_err();
            assert!(err.is_panic());
            assert!(err.to_string().contains("local-worker"), "{err}");
            let refused = task::Builder::new()
                .priority(task::Priority::High)
                .spawn_local(async {})
                .unwrap_err();
            assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
        })
        .await;
}

#[fairlane::test(flavor = "current_thread")]
async fn a_set_driven_from_inside_its_own_task_runs_its_other_tasks() {
    let local = Rc::new(LocalSet::new());
    let inner = Rc::clone(&local);
    let out = local
        .run_until(async move {
            task::spawn_local(async move {
                // Drives its own set: the other tasks run, and this one,
                // woken meanwhile, runs again once this poll is over.
                let other = inner.spawn_local(async { Rc::new(4) });
                let got = inner
                    .run_until(async {
                        task::yield_now().await;
                        other.await.unwrap()
                    })
                    .await;
                task::yield_now().await;
                *got + 1
            })
            .await
            .unwrap()
        })
        .await;
    assert_eq!(out, 5);
}

#[test]
fn a_set_awaited_ends_when_its_last_task_is_aborted_from_another_thread() {
    with_deadline("remote-abort", DEADLINE, String::new, || {
        let rt = current_thread();
        let mut local = LocalSet::new();
        let drops = Arc::new(Mutex::new(Vec::new()));
        let guard = DropOn(Arc::clone(&drops));
        let handle = local.spawn_local(async move {
            let _guard = guard;
            let _not_send = Rc::new(());
            std::future::pending::<()>().await
        });
        let abort = handle.abort_handle();
        let aborter = thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            abort.abort();
        });
        rt.block_on(&mut local);
        aborter.join().unwrap();
        assert_eq!(*drops.lock().unwrap(), [thread::current().id()]);
        assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    });
}

#[fairlane::test(flavor = "current_thread")]
async fn nested_sets_keep_their_tasks_apart() {
    LocalSet::new()
        .run_until(async {
            task::spawn_local(async {
                let parent = task::id();
                let child = LocalSet::new()
                    .run_until(async { task::spawn_local(async { task::id() }).await.unwrap() })
                    .await;
                assert_ne!(child, parent);
                assert_eq!(task::id(), parent);
            })
            .await
            .unwrap();
        })
        .await;
}

/// One local task of the stress test below: waits until `count` reaches
/// `goal`, registering its waker in `slot`; counts its polls.
struct Waiter {
    count: Arc<AtomicUsize>,
    slot: Arc<Mutex<Option<std::task::Waker>>>,
    goal: usize,
    polls: Rc<Cell<usize>>,
}

impl std::future::Future for Waiter {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        self.polls.set(self.polls.get() + 1);
        if self.count.load(Ordering::SeqCst) >= self.goal {
            return std::task::Poll::Ready(());
        }
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        // Checked again after publishing the waker: a bump in between wakes it.
        if self.count.load(Ordering::SeqCst) >= self.goal {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }
}

#[test]
fn wakes_from_many_threads_are_neither_lost_nor_doubled() {
    const TASKS: usize = 8;
    const BUMPS: usize = 2_000;
    with_deadline("many-threads", DEADLINE, String::new, || {
        let rt = common::runtime(2);
        let local = LocalSet::new();
        let wakes = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let count = Arc::new(AtomicUsize::new(0));
            let slot = Arc::new(Mutex::new(None::<std::task::Waker>));
            let polls = Rc::new(Cell::new(0));
            let handle = local.spawn_local(Waiter {
                count: Arc::clone(&count),
                slot: Arc::clone(&slot),
                goal: BUMPS,
                polls: Rc::clone(&polls),
            });
            tasks.push((count, slot, polls, handle));
        }
        // Two threads take turns with the tasks: each takes a parked
        // task's waker, bumps its count and wakes it, so that every wake
        // must lead to exactly one poll.
        let bumpers: Vec<_> = (0..2)
            .map(|_| {
                let targets: Vec<_> = tasks
                    .iter()
                    .map(|(c, s, _, _)| (Arc::clone(c), Arc::clone(s)))
                    .collect();
                let wakes = Arc::clone(&wakes);
                thread::spawn(move || {
                    let mut done = 0;
                    while done < BUMPS / 2 * TASKS {
                        for (count, slot) in &targets {
                            if done == BUMPS / 2 * TASKS {
                                break;
                            }
                            let Some(waker) = slot.lock().unwrap().take() else {
                                thread::yield_now();
                                continue;
                            };
                            count.fetch_add(1, Ordering::SeqCst);
                            wakes.fetch_add(1, Ordering::SeqCst);
                            waker.wake();
                            done += 1;
                        }
                    }
                })
            })
            .collect();
        let handles: Vec<_> = tasks.iter_mut().map(|t| t.3.abort_handle()).collect();
        local.block_on(&rt, async {
            while !handles.iter().all(|h| h.is_finished()) {
                task::yield_now().await;
            }
        });
        for b in bumpers {
            b.join().unwrap();
        }
        let polls: usize = tasks.iter().map(|t| t.2.get()).sum();
        // Each poll but a task's first answers exactly one wake: a task
        // queued twice for one wake would be polled more often, and a lost
        // wake would have left a task parked for ever.
        assert_eq!(wakes.load(Ordering::SeqCst), TASKS * BUMPS);
        assert_eq!(polls, TASKS + TASKS * BUMPS);
        for (_, _, _, handle) in tasks {
            assert!(rt.block_on(handle).is_ok());
        }
    });
}
