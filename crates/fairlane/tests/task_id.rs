//! Task ids (`task::Id`, `task::id`, `task::try_id`, the handles' and
//! `JoinError`'s `id`, `JoinSet::join_next_with_id`), as tokio's: the id
//! inside a task is the one its handles report, also while its future or
//! its output is dropped and in a `spawn_blocking` closure; the future of
//! a `block_on` is no task.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};

use fairlane::runtime::{Builder, Runtime};
use fairlane::task::{self, Id, JoinSet};

fn runtimes() -> [Runtime; 2] {
    [
        Builder::new_current_thread().build().unwrap(),
        Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap(),
    ]
}

#[test]
fn the_id_inside_a_task_is_its_handles_id() {
    for rt in runtimes() {
        let handle = rt.spawn(async { task::id() });
        let id = handle.id();
        assert_eq!(handle.abort_handle().id(), id);
        assert_eq!(rt.block_on(handle).unwrap(), id);
        let blocking = rt.spawn_blocking(task::id);
        let id = blocking.id();
        assert_eq!(rt.block_on(blocking).unwrap(), id);
    }
}

#[test]
fn tasks_have_distinct_ids() {
    for rt in runtimes() {
        let ids: Vec<Id> = rt.block_on(async {
            let handles: Vec<_> = (0..100)
                .map(|_| fairlane::spawn(async { task::id() }))
                .collect();
            let mut ids = Vec::new();
            for h in handles {
                ids.push(h.await.unwrap());
            }
            ids
        });
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
    }
}

#[test]
fn outside_a_task_there_is_no_id() {
    assert_eq!(task::try_id(), None);
    assert!(std::panic::catch_unwind(task::id).is_err());
    for rt in runtimes() {
        assert_eq!(rt.block_on(async { task::try_id() }), None);
        // Nor in a block_on inside a task's block_in_place, and the task's
        // own id is back afterwards.
        if rt.handle().runtime_flavor() == fairlane::runtime::RuntimeFlavor::MultiThread {
            let (outer, inner, after) = rt
                .block_on(rt.spawn(async {
                    let outer = task::id();
                    let inner = task::block_in_place(|| {
                        let nested = Builder::new_current_thread().build().unwrap();
                        let in_block_on = nested.block_on(async { task::try_id() });
                        assert_eq!(in_block_on, None);
                        nested.block_on(nested.spawn(async { task::id() })).unwrap()
                    });
                    (outer, inner, task::id())
                }))
                .unwrap();
            assert_ne!(outer, inner);
            assert_eq!(outer, after);
        }
    }
}

/// Sends the current task's id when dropped.
struct SendIdOnDrop(Option<mpsc::Sender<Option<Id>>>);

impl Drop for SendIdOnDrop {
    fn drop(&mut self) {
        let _ = self.0.take().unwrap().send(task::try_id());
    }
}

/// A future that owns a `SendIdOnDrop`, finishing or not.
struct Holder {
    _on_drop: SendIdOnDrop,
    ready: bool,
}

impl Future for Holder {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.ready {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn a_future_is_dropped_with_its_tasks_id_when_it_completes_or_is_aborted() {
    for rt in runtimes() {
        for ready in [true, false] {
            let (tx, rx) = mpsc::channel();
            let handle = rt.spawn(Holder {
                _on_drop: SendIdOnDrop(Some(tx)),
                ready,
            });
            let id = handle.id();
            if !ready {
                handle.abort();
            }
            let result = rt.block_on(handle);
            assert_eq!(result.is_ok(), ready);
            assert_eq!(rx.recv().unwrap(), Some(id));
        }
    }
}

#[test]
fn an_output_nobody_takes_is_dropped_with_its_tasks_id() {
    for rt in runtimes() {
        let (tx, rx) = mpsc::channel();
        let handle = rt.spawn(async move { SendIdOnDrop(Some(tx)) });
        let id = handle.id();
        drop(handle);
        // Runs the task (on the current-thread runtime, the ready tasks
        // run before a yielding block_on returns); its output is dropped
        // where it finished.
        rt.block_on(fairlane::yield_now());
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the output was dropped");
        assert_eq!(got, Some(id));
    }
}

#[test]
fn a_join_error_carries_the_tasks_id() {
    for rt in runtimes() {
        let panics = rt.spawn(async { panic!("boom") });
        let id = panics.id();
        assert_eq!(rt.block_on(panics).unwrap_err().id(), id);
        let aborted = rt.spawn(std::future::pending::<()>());
        let id = aborted.id();
        aborted.abort();
        let err = rt.block_on(aborted).unwrap_err();
        assert!(err.is_cancelled());
        assert_eq!(err.id(), id);
    }
}

#[test]
fn join_set_reports_which_task_finished() {
    for rt in runtimes() {
        let mut set = JoinSet::new();
        let ok = set.spawn_on(async { 1 }, rt.handle()).id();
        let cancelled = set.spawn_on(std::future::pending(), rt.handle());
        cancelled.abort();
        let blocking = set.spawn_blocking_on(|| 2, rt.handle()).id();
        let mut seen = rt.block_on(async {
            let mut seen = Vec::new();
            while let Some(out) = set.join_next_with_id().await {
                seen.push(match out {
                    Ok((id, value)) => (id, Some(value)),
                    Err(e) => (e.id(), None),
                });
            }
            seen
        });
        seen.sort();
        let mut expected = vec![(ok, Some(1)), (cancelled.id(), None), (blocking, Some(2))];
        expected.sort();
        assert_eq!(seen, expected);
    }
}
