//! Misuse that the runtime turns into a clear outcome: a runtime dropped
//! inside its own task (panics, and is still shut down), and affinity with
//! another cluster's processor identities (an error).

mod common;

use std::future::pending;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{panic_message, wait_until, DropCounter};
use fairlane::task::JoinHandle;
use fairlane::Runtime;

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// Awaits join handles of a runtime that is gone, on a fresh runtime.
fn join<T: Send + 'static>(handle: JoinHandle<T>) -> Result<T, fairlane::task::JoinError> {
    let fresh = common::runtime(1);
    fresh.block_on(handle)
}

/// Dropped from one of its own tasks, a runtime panics there (it cannot
/// wait for its own thread) and is still shut down: its other tasks are
/// cancelled and its processor threads exit.
#[test]
fn a_runtime_dropped_inside_its_own_task_is_shut_down() {
    let rt = Runtime::builder()
        .processors(2)
        .thread_name("owndrop")
        .build()
        .unwrap();
    // A new thread names itself once it runs: wait for that.
    wait_until("the processor threads are named", || {
        threads_named("owndrop") == 2
    });
    let drops = Arc::new(AtomicUsize::new(0));
    let counter = DropCounter(drops.clone());
    let waiting = rt.spawn(async move {
        let _counter = counter;
        pending::<()>().await
    });
    let handle = rt.handle().clone();
    let dropper = handle.spawn(async move { drop(rt) });
    let err = join(dropper).unwrap_err();
    assert!(err.is_panic());
    let msg = panic_message(&*err.into_panic());
    assert!(
        msg.contains("cannot be dropped or shut down from one of its own tasks"),
        "{msg}"
    );
    wait_until("the other task is cancelled", || {
        drops.load(Ordering::SeqCst) == 1
    });
    wait_until("the processor threads exit", || {
        threads_named("owndrop") == 0
    });
    assert!(join(waiting).unwrap_err().is_cancelled());
}

/// The same from a blocking closure of the runtime.
#[test]
fn a_runtime_dropped_inside_its_own_blocking_closure_is_shut_down() {
    let rt = Runtime::builder()
        .processors(1)
        .thread_name("blkdrop")
        .build()
        .unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let counter = DropCounter(drops.clone());
    let waiting = rt.spawn(async move {
        let _counter = counter;
        pending::<()>().await
    });
    let handle = rt.handle().clone();
    let dropper = handle.spawn_blocking(move || drop(rt));
    // The closure panics; the shutdown that starts meanwhile may cancel the
    // task waiting for its result before the panic is handed over.
    let err = join(dropper).unwrap_err();
    assert!(err.is_panic() || err.is_cancelled(), "{err:?}");
    wait_until("the other task is cancelled", || {
        drops.load(Ordering::SeqCst) == 1
    });
    wait_until("the processor thread exits", || {
        threads_named("blkdrop-0") == 0
    });
    assert!(join(waiting).unwrap_err().is_cancelled());
}

/// A processor identity of another runtime (or of another cluster of the
/// same runtime) has slot numbers that exist here too; affinity with it is
/// refused with an error that says why, and so is removing it.
#[test]
fn affinity_with_another_clusters_processor_is_an_error() {
    let rt = Runtime::builder()
        .processors(2)
        .cluster("other", 2)
        .build()
        .unwrap();
    let foreign_rt = common::runtime(2);
    let foreign = foreign_rt.handle().cluster().processors();
    let sibling = rt.cluster("other").unwrap().processors();
    let own = rt.handle().cluster().processors();
    assert_eq!(
        foreign.iter().map(|id| id.index()).collect::<Vec<_>>(),
        own.iter().map(|id| id.index()).collect::<Vec<_>>(),
        "the same slot numbers"
    );
    for (what, ids) in [("another runtime", &foreign), ("another cluster", &sibling)] {
        for id in ids {
            assert!(!own.contains(id), "{what}: {id} equals one of ours");
        }
        let set = ids.clone();
        let err = rt
            .block_on(rt.spawn(async move { fairlane::task::set_affinity(Some(set)) }))
            .unwrap()
            .expect_err(what);
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{what}");
        assert!(err.to_string().contains("another cluster"), "{what}: {err}");

        let err = fairlane::task::Builder::new()
            .affinity(ids.iter().copied())
            .spawn_on(async {}, rt.handle())
            .map(drop)
            .expect_err(what);
        assert!(err.to_string().contains("another cluster"), "{what}: {err}");

        let err = rt
            .handle()
            .cluster()
            .remove_processor(ids[1])
            .expect_err(what);
        assert_eq!(rt.handle().cluster().processors(), own, "{what}: {err}");
    }
    // Our own identities still work.
    let last = own[1];
    let on = rt
        .block_on(rt.spawn(async move {
            fairlane::task::set_affinity(Some([last]))?;
            fairlane::yield_now().await;
            Ok::<_, std::io::Error>(fairlane::task::current_processor())
        }))
        .unwrap()
        .unwrap();
    assert_eq!(on, Some(last));
}
