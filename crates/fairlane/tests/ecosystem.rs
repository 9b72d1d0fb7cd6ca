//! Runtime-agnostic crates a tokio program keeps using on fairlane:
//! `tokio::sync` (channels, locks, `Notify`, `Semaphore`, `watch`,
//! `broadcast`) and tokio's `select!`/`join!` macros, with tasks spread over
//! several processors and woken from each other and from plain threads.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch, Mutex, Notify, Semaphore};

#[test]
fn tokio_sync_primitives_work_across_processors() {
    common::with_deadline("tokio_sync", common::DEADLINE, String::new, || {
        let rt = common::runtime(2);
        rt.block_on(async {
            // mpsc: many producers on other tasks, one consumer.
            let (tx, mut rx) = mpsc::channel::<u32>(4);
            for p in 0..8u32 {
                let tx = tx.clone();
                fairlane::spawn(async move {
                    for i in 0..100 {
                        tx.send(p * 1000 + i).await.unwrap();
                    }
                });
            }
            drop(tx);
            let mut got = Vec::new();
            while let Some(v) = rx.recv().await {
                got.push(v);
            }
            got.sort_unstable();
            let want: Vec<u32> = (0..8)
                .flat_map(|p| (0..100).map(move |i| p * 1000 + i))
                .collect();
            assert_eq!(got, want);

            // oneshot, answered from a plain thread.
            let (tx, rx) = oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                tx.send("from a thread").unwrap();
            });
            assert_eq!(rx.await.unwrap(), "from a thread");

            // Mutex held across an await by many tasks: no update lost.
            let counter = Arc::new(Mutex::new(0u32));
            let tasks: Vec<_> = (0..16)
                .map(|_| {
                    let counter = counter.clone();
                    fairlane::spawn(async move {
                        for _ in 0..50 {
                            let mut g = counter.lock().await;
                            let v = *g;
                            fairlane::yield_now().await;
                            *g = v + 1;
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            assert_eq!(*counter.lock().await, 16 * 50);

            // Semaphore bounds concurrency.
            let sem = Arc::new(Semaphore::new(3));
            let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let tasks: Vec<_> = (0..12)
                .map(|_| {
                    let (sem, inside) = (sem.clone(), inside.clone());
                    fairlane::spawn(async move {
                        let _permit = sem.acquire().await.unwrap();
                        let now = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                        assert!(now <= 3, "{now} tasks hold 3 permits");
                        fairlane::yield_now().await;
                        inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }

            // Notify, watch and broadcast.
            let notify = Arc::new(Notify::new());
            let waiter = {
                let notify = notify.clone();
                fairlane::spawn(async move { notify.notified().await })
            };
            fairlane::time::sleep(Duration::from_millis(5)).await;
            notify.notify_one();
            waiter.await.unwrap();

            let (wtx, mut wrx) = watch::channel(0u32);
            let watcher = fairlane::spawn(async move {
                while *wrx.borrow_and_update() < 10 {
                    wrx.changed().await.unwrap();
                }
            });
            for i in 1..=10 {
                wtx.send(i).unwrap();
                fairlane::yield_now().await;
            }
            watcher.await.unwrap();

            let (btx, _) = broadcast::channel::<u32>(16);
            let listeners: Vec<_> = (0..4)
                .map(|_| {
                    let mut brx = btx.subscribe();
                    fairlane::spawn(async move {
                        let mut sum = 0;
                        while let Ok(v) = brx.recv().await {
                            sum += v;
                        }
                        sum
                    })
                })
                .collect();
            for i in 1..=10 {
                btx.send(i).unwrap();
            }
            drop(btx);
            for l in listeners {
                assert_eq!(l.await.unwrap(), 55);
            }
        });
    });
}

#[test]
fn tokio_select_and_join_work_on_fairlane_futures() {
    common::with_deadline("tokio_select", common::DEADLINE, String::new, || {
        let rt = common::runtime(2);
        rt.block_on(async {
            let (a, b) = tokio::join!(
                fairlane::spawn(async { 1 }),
                fairlane::spawn(async {
                    fairlane::time::sleep(Duration::from_millis(5)).await;
                    2
                })
            );
            assert_eq!((a.unwrap(), b.unwrap()), (1, 2));
            let (tx, rx) = oneshot::channel::<()>();
            let picked = tokio::select! {
                _ = fairlane::time::sleep(Duration::from_secs(3600)) => "sleep",
                _ = rx => "channel",
                _ = async { drop(tx) } => "drop",
            };
            // The dropping branch is ready at once; the channel then reports
            // the drop; the hour-long sleep is never chosen.
            assert_ne!(picked, "sleep");
        });
    });
}
