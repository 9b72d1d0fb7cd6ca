//! tokio-util's `TaskTracker`: `spawn` (a tokio task, so the bridge is
//! needed), `close` and `wait`, from fairlane tasks; and `track_future`,
//! which keeps fairlane tasks in the same tracker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio_util::task::TaskTracker;

use crate::common::assert_on_fairlane_task;

async fn tracker_from_fairlane_tasks() {
    const SPAWNERS: usize = 4;
    const EACH: usize = 16;
    let tracker = TaskTracker::new();
    let finished = Arc::new(AtomicUsize::new(0));
    let spawners: Vec<_> = (0..SPAWNERS)
        .map(|_| {
            let tracker = tracker.clone();
            let finished = finished.clone();
            fairlane::spawn(async move {
                assert_on_fairlane_task();
                for i in 0..EACH {
                    // A tokio task, run by the bridge.
                    let counter = finished.clone();
                    let tokio_task = tracker.spawn(async move {
                        tokio::task::yield_now().await;
                        counter.fetch_add(1, Ordering::SeqCst);
                        i
                    });
                    if i == 0 {
                        assert_eq!(tokio_task.await.unwrap(), 0);
                    }
                    // A fairlane task kept in the same tracker.
                    let counter = finished.clone();
                    fairlane::spawn(tracker.track_future(async move {
                        fairlane::yield_now().await;
                        counter.fetch_add(1, Ordering::SeqCst);
                    }));
                }
            })
        })
        .collect();
    for spawner in spawners {
        spawner.await.unwrap();
    }
    let waiter = fairlane::spawn({
        let tracker = tracker.clone();
        let finished = finished.clone();
        async move {
            assert_on_fairlane_task();
            tracker.close();
            tracker.wait().await;
            finished.load(Ordering::SeqCst)
        }
    });
    assert_eq!(waiter.await.unwrap(), SPAWNERS * EACH * 2);
    assert!(tracker.is_closed() && tracker.is_empty());
}

#[fairlane::test(processors = 2)]
async fn task_tracker_multi_thread() {
    tracker_from_fairlane_tasks().await;
}

#[fairlane::test(flavor = "current_thread")]
async fn task_tracker_current_thread() {
    tracker_from_fairlane_tasks().await;
}
