//! The current-thread flavor (`Builder::new_current_thread`), as tokio's
//! current-thread runtime behaves: its one processor is the thread in
//! `Runtime::block_on`, tasks run there and only while some `block_on`
//! runs, several threads may be in `block_on` at once, and timers, I/O,
//! the blocking pool and shutdown work as on the multi-thread flavor.

mod common;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use common::{panic_message, with_deadline, DEADLINE};
use fairlane::runtime::{Builder, Handle, Runtime, RuntimeFlavor};
use tokio::sync::oneshot;

fn rt() -> Runtime {
    Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a current-thread runtime")
}

/// Runs `f` under the suite's deadline, so that a lost wake-up fails the
/// test instead of hanging it.
fn bounded<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    with_deadline(name, DEADLINE, String::new, f)
}

#[test]
fn a_spawned_task_runs_only_once_block_on_is_called() {
    bounded("spawned_task_waits_for_block_on", || {
        let rt = rt();
        let (tx, mut rx) = oneshot::channel();
        rt.spawn(async move { tx.send("hello").unwrap() });
        // A runtime with processor threads would run it meanwhile.
        thread::sleep(Duration::from_millis(50));
        assert!(rx.try_recv().is_err(), "the task ran outside block_on");
        assert_eq!(rt.block_on(async { rx.await.unwrap() }), "hello");
    });
}

#[test]
fn tasks_run_on_the_thread_in_block_on() {
    bounded("tasks_on_block_on_thread", || {
        let rt = rt();
        let here = thread::current().id();
        let on = rt.block_on(async {
            let inner = fairlane::spawn(async { thread::current().id() });
            fairlane::spawn(async move { inner.await.unwrap() })
                .await
                .unwrap()
        });
        assert_eq!(on, here);
        assert_eq!(rt.metrics().processors.len(), 1);
        assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
    });
}

#[test]
fn a_task_spawned_from_another_thread_runs_when_block_on_runs() {
    bounded("spawn_from_other_thread", || {
        let rt = rt();
        let handle = rt.handle().clone();
        let (tx, rx) = oneshot::channel();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            handle.spawn(async move { tx.send(thread::current().id()).unwrap() });
        });
        let ran_on = rt.block_on(async { rx.await.unwrap() });
        assert_eq!(ran_on, thread::current().id());
    });
}

/// A stream that counts its polls: tokio's `no_extra_poll`.
struct CountPolls {
    polls: Arc<AtomicUsize>,
    rx: tokio::sync::mpsc::UnboundedReceiver<()>,
}

impl Future for CountPolls {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            self.polls.fetch_add(1, Ordering::SeqCst);
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(())) => continue,
                Poll::Ready(None) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[test]
fn a_yielding_block_on_lets_the_ready_tasks_run_first_and_polls_nothing_twice() {
    bounded("no_extra_poll", || {
        let rt = rt();
        let polls = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let task = rt.spawn(CountPolls {
            polls: polls.clone(),
            rx,
        });
        rt.block_on(fairlane::yield_now());
        assert_eq!(polls.load(Ordering::SeqCst), 1, "the first poll");
        tx.send(()).unwrap();
        rt.block_on(fairlane::yield_now());
        assert_eq!(polls.load(Ordering::SeqCst), 3, "one message, then pending");
        drop(tx);
        rt.block_on(fairlane::yield_now());
        assert_eq!(polls.load(Ordering::SeqCst), 4, "the end");
        assert!(task.is_finished());
    });
}

#[test]
fn many_tasks_fed_from_another_thread_complete() {
    bounded("spawn_many_from_block_on", || {
        const TASKS: usize = 200;
        let rt = rt();
        let out = rt.block_on(async {
            let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
            let txs: Vec<_> = (0..TASKS)
                .map(|i| {
                    let (tx, rx) = oneshot::channel();
                    let done = done_tx.clone();
                    fairlane::spawn(async move {
                        assert_eq!(rx.await.unwrap(), i);
                        done.send(i).unwrap();
                    });
                    tx
                })
                .collect();
            drop(done_tx);
            thread::spawn(move || {
                for (i, tx) in txs.into_iter().enumerate() {
                    tx.send(i).unwrap();
                }
            });
            let mut out = Vec::new();
            while let Some(i) = done_rx.recv().await {
                out.push(i);
            }
            out.sort_unstable();
            out
        });
        assert_eq!(out, (0..TASKS).collect::<Vec<_>>());
    });
}

/// A task that yields in a loop until stopped.
struct Spinner {
    stop: Arc<AtomicBool>,
    task: fairlane::JoinHandle<()>,
}

impl Spinner {
    fn spawn() -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let spin = stop.clone();
        let task = fairlane::spawn(async move {
            while !spin.load(Ordering::Relaxed) {
                fairlane::yield_now().await;
            }
        });
        Spinner { stop, task }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
    }
}

#[test]
fn block_on_completes_while_a_task_spins_on_yield() {
    bounded("complete_block_on_under_load", || {
        let rt = rt();
        rt.block_on(async {
            let spinner = Spinner::spawn();
            let (tx, rx) = oneshot::channel();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                tx.send(()).unwrap();
            });
            rx.await.unwrap();
            spinner.stop().await;
        });
    });
}

#[test]
fn two_threads_in_block_on_take_turns_running_the_tasks() {
    bounded("concurrent_block_on", || {
        let rt = Arc::new(rt());
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let (rt, barrier) = (rt.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    rt.block_on(async move {
                        // Each thread's tasks run whichever thread drives.
                        let mut sum = 0;
                        for j in 0..50u64 {
                            sum += fairlane::spawn(async move { i * 1000 + j }).await.unwrap();
                            fairlane::time::sleep(Duration::from_micros(100)).await;
                        }
                        sum
                    })
                })
            })
            .collect();
        let sums: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(sums, [1225, 50 * 1000 + 1225]);
    });
}

#[test]
fn a_waiting_block_on_takes_over_when_the_driving_one_returns() {
    bounded("block_on_takes_over", || {
        let rt = Arc::new(rt());
        let (first_in, wait_first) = mpsc::channel();
        let (release_first, first_waits) = oneshot::channel::<()>();
        let first = {
            let rt = rt.clone();
            thread::spawn(move || {
                rt.block_on(async move {
                    first_in.send(()).unwrap();
                    first_waits.await.unwrap();
                })
            })
        };
        wait_first.recv().unwrap();
        // This thread waits for a task, which the first thread runs until
        // it returns; then this thread runs the rest.
        let (tx, rx) = oneshot::channel();
        rt.block_on(async move {
            let task = fairlane::spawn(async move {
                let _ = release_first.send(());
                rx.await.unwrap()
            });
            tx.send(thread::current().id()).unwrap();
            task.await.unwrap()
        });
        first.join().unwrap();
    });
}

#[test]
fn handle_block_on_does_not_run_tasks_but_runtime_block_on_does() {
    bounded("handle_block_on", || {
        let rt = rt();
        let (tx, rx) = oneshot::channel();
        #[allow(clippy::async_yields_async)]
        let task = rt
            .handle()
            .block_on(async { fairlane::spawn(async move { tx.send("ZOMG").unwrap() }) });
        let out = rt.block_on(async move {
            let msg = rx.await.unwrap();
            task.await.unwrap();
            msg
        });
        assert_eq!(out, "ZOMG");
    });
}

#[test]
fn timers_fire_in_block_on_and_in_tasks() {
    bounded("timers", || {
        let rt = rt();
        rt.block_on(async {
            fairlane::time::sleep(Duration::from_millis(5)).await;
            fairlane::spawn(fairlane::time::sleep(Duration::from_millis(5)))
                .await
                .unwrap();
            let late =
                fairlane::time::timeout(Duration::from_millis(5), std::future::pending::<()>());
            assert!(late.await.is_err());
        });
    });
}

#[test]
fn a_paused_clock_auto_advances_when_the_block_on_thread_is_idle() {
    bounded("start_paused", || {
        let rt = Builder::new_current_thread()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let start = fairlane::time::Instant::now();
            let task = fairlane::spawn(fairlane::time::sleep(Duration::from_secs(3600)));
            fairlane::time::sleep(Duration::from_secs(24 * 3600)).await;
            task.await.unwrap();
            assert_eq!(start.elapsed(), Duration::from_secs(24 * 3600));
        });
    });
}

#[test]
fn tcp_client_and_server_in_block_on() {
    bounded("client_server_block_on", || {
        let rt = rt();
        rt.block_on(async {
            let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap();
            let addr = listener.local_addr().unwrap();
            let server = fairlane::spawn(async move {
                let (stream, _) = listener.accept().await.unwrap();
                let (n, buf) = stream.read_owned(Vec::with_capacity(16)).await;
                assert_eq!(n.unwrap(), 5);
                let (r, _) = stream.write_all_owned(buf).await;
                r.unwrap();
            });
            let client = fairlane::net::TcpStream::connect(addr).await.unwrap();
            let (r, _) = client.write_all_owned(b"hello".to_vec()).await;
            r.unwrap();
            let (n, echo) = client.read_owned(Vec::with_capacity(16)).await;
            assert_eq!(n.unwrap(), 5);
            assert_eq!(echo, b"hello");
            server.await.unwrap();
        });
    });
}

#[test]
fn the_blocking_pool_works_and_its_threads_may_use_handle_block_on() {
    bounded("blocking", || {
        let rt = rt();
        let out = rt.block_on(async {
            fairlane::task::spawn_blocking(|| {
                // Runs on a pool thread while the block_on thread drives the
                // task this spawns.
                Handle::current()
                    .block_on(fairlane::spawn(async { 7 }))
                    .unwrap()
            })
            .await
            .unwrap()
        });
        assert_eq!(out, 7);
    });
}

#[test]
fn dropping_the_runtime_drops_the_futures_of_its_tasks() {
    bounded("outstanding_tasks_dropped", || {
        let rt = rt();
        let alive = Arc::new(());
        let held = alive.clone();
        rt.block_on(async move {
            fairlane::spawn(poll_fn(move |_| {
                let _ = &held;
                Poll::<()>::Pending
            }));
        });
        assert_eq!(Arc::strong_count(&alive), 2);
        drop(rt);
        assert_eq!(Arc::strong_count(&alive), 1);
    });
}

#[test]
fn block_in_place_panics_on_a_current_thread_runtime() {
    bounded("block_in_place", || {
        let rt = rt();
        let err = rt
            .block_on(rt.spawn(async { fairlane::task::block_in_place(|| 1) }))
            .unwrap_err();
        assert!(err.is_panic());
        assert!(
            panic_message(&*err.into_panic()).contains("current_thread"),
            "the message names the flavor"
        );
        let in_block_on = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async { fairlane::task::block_in_place(|| 1) })
        }));
        assert!(in_block_on.is_err());
        // The runtime still works.
        assert_eq!(rt.block_on(rt.spawn(async { 2 })).unwrap(), 2);
    });
}

#[test]
fn nested_block_on_panics() {
    bounded("nested", || {
        let (rt1, rt2) = (rt(), rt());
        let nested = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt1.block_on(async { rt2.block_on(async { "hello" }) })
        }));
        assert!(nested.is_err());
    });
}

#[test]
fn clusters_and_resizing_are_refused() {
    let err = Builder::new_current_thread()
        .cluster("batch", 1)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("current_thread"), "{err}");
    let rt = rt();
    let cluster = rt.handle().cluster();
    let add = cluster.add_processor().unwrap_err();
    assert_eq!(add.kind(), std::io::ErrorKind::Unsupported);
    let remove = cluster
        .remove_processor(cluster.processors()[0])
        .unwrap_err();
    assert_eq!(remove.kind(), std::io::ErrorKind::Unsupported);
    // Settings about more processors have no effect.
    let rt = Builder::new_current_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    assert_eq!(rt.metrics().processors.len(), 1);
}

#[test]
fn shutdown_timeout_and_background_do_not_wait_for_blocking_work() {
    bounded("shutdown_timeout", || {
        for background in [false, true] {
            let rt = rt();
            let (tx, rx) = oneshot::channel();
            rt.block_on(async move {
                fairlane::task::spawn_blocking(move || {
                    tx.send(()).unwrap();
                    thread::sleep(Duration::from_secs(3600));
                });
                rx.await.unwrap();
            });
            if background {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_millis(10));
            }
        }
        rt().shutdown_timeout(Duration::MAX);
    });
}

#[test]
fn graceful_shutdown_runs_the_tasks_to_their_end() {
    bounded("graceful", || {
        let rt = rt();
        let (tx, rx) = mpsc::channel();
        rt.spawn(async move {
            fairlane::time::sleep(Duration::from_millis(5)).await;
            tx.send("done").unwrap();
        });
        rt.shutdown_graceful(Duration::from_secs(5));
        assert_eq!(rx.try_recv(), Ok("done"));
    });
}

#[test]
fn a_panic_in_block_on_leaves_the_runtime_usable() {
    bounded("panic_in_block_on", || {
        let rt = rt();
        let queued = rt.spawn(async { 5 });
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async {
                fairlane::yield_now().await;
                panic!("boom")
            })
        }));
        assert!(panicked.is_err());
        assert_eq!(rt.block_on(queued).unwrap(), 5);
    });
}

#[test]
fn a_sleep_awaited_on_a_blocking_thread_ends_while_block_on_drives() {
    bounded("sleep_from_blocking", || {
        let rt = rt();
        rt.block_on(async {
            fairlane::task::spawn_blocking(|| {
                // No fairlane block_on here: the timer is the runtime's,
                // fired by the thread in Runtime::block_on.
                futures_lite::future::block_on(fairlane::time::sleep(Duration::from_millis(1)));
            })
            .await
            .unwrap();
        });
    });
}

#[test]
fn io_completes_while_a_task_spins_on_yield() {
    bounded("io_driver_called_when_under_load", || {
        let rt = rt();
        rt.block_on(async {
            let spinner = Spinner::spawn();
            let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap();
            let addr = listener.local_addr().unwrap();
            let server = fairlane::spawn(async move { listener.accept().await.map(|_| ()) });
            let client = fairlane::spawn(async move {
                fairlane::net::TcpStream::connect(addr).await.map(|_| ())
            });
            server.await.unwrap().unwrap();
            client.await.unwrap().unwrap();
            spinner.stop().await;
        });
    });
}

/// Calls the closure when dropped.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

#[test]
fn tasks_that_wake_each_other_when_dropped_are_all_dropped_at_shutdown() {
    bounded("wake_while_rt_is_dropping", || {
        let (tx1, rx1) = oneshot::channel::<()>();
        let (tx2, rx2) = oneshot::channel::<()>();
        let barrier = Arc::new(tokio::sync::Barrier::new(3));
        let rt = rt();
        for (tx, rx) in [(tx2, rx1), (tx1, rx2)] {
            let barrier = barrier.clone();
            rt.spawn(async move {
                let mut tx = Some(tx);
                let _wake_the_other = OnDrop(move || {
                    let _ = tx.take().unwrap().send(());
                });
                let _ = tokio::join!(rx, barrier.wait());
            });
        }
        rt.block_on(barrier.wait());
        drop(rt);
    });
}

#[test]
fn futures_are_dropped_eagerly_at_shutdown_and_enter_makes_spawn_work() {
    bounded("eagerly_drops_futures_on_shutdown", || {
        let rt = rt();
        let task = {
            let _guard = rt.enter();
            fairlane::spawn(async {})
        };
        rt.block_on(task).unwrap();
        let (dropped_tx, dropped) = mpsc::channel();
        let (ran_tx, ran) = oneshot::channel();
        rt.block_on(async move {
            fairlane::spawn(async move {
                let _dropped = OnDrop(move || dropped_tx.send(()).unwrap());
                ran_tx.send(()).unwrap();
                std::future::pending::<()>().await
            });
            ran.await.unwrap();
        });
        drop(rt);
        dropped.recv().unwrap();
    });
}

#[test]
fn a_runtime_kept_in_a_thread_local_is_dropped_with_the_thread() {
    thread_local! {
        static KEPT: std::cell::RefCell<Vec<Runtime>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    bounded("runtime_in_thread_local", || {
        thread::spawn(|| {
            // Dropped while the thread's locals are destroyed, the
            // runtime's own context among them (either flavor).
            let multi = Builder::new_multi_thread()
                .worker_threads(1)
                .build()
                .unwrap();
            KEPT.with(|kept| kept.borrow_mut().extend([rt(), multi]));
            let _second = rt();
        })
        .join()
        .unwrap();
    });
}

#[test]
fn spawning_from_another_thread_while_the_runtime_drops_is_harmless() {
    bounded("shutdown_concurrent_spawn", || {
        for _ in 0..20 {
            let rt = rt();
            let handle = rt.handle().clone();
            let (tx, rx) = mpsc::channel();
            let spawner = thread::spawn(move || {
                tx.send(()).unwrap();
                for _ in 0..100 {
                    drop(handle.spawn(async {}));
                }
            });
            rx.recv().unwrap();
            drop(rt);
            spawner.join().unwrap();
        }
    });
}
