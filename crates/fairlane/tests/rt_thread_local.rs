//! A runtime kept in a thread-local is dropped with its thread, after
//! the runtime's own thread-locals may already be gone: the drop must not
//! touch them (a panic there aborts the process).

use std::cell::RefCell;
use std::thread;

use fairlane::runtime::Builder;

thread_local! {
    static KEPT: RefCell<Option<fairlane::Runtime>> = const { RefCell::new(None) };
}

fn runtime(current_thread: bool) -> fairlane::Runtime {
    let mut builder = if current_thread {
        Builder::new_current_thread()
    } else {
        Builder::new_multi_thread()
    };
    builder.worker_threads(1).build().unwrap()
}

/// The runtime goes into the thread-local before anything of fairlane's
/// is touched on the thread, and a second runtime is made and dropped
/// after: the thread-local holding the first is destroyed after fairlane's.
#[test]
fn a_runtime_in_a_thread_local_is_dropped_after_fairlanes_own() {
    for workers in [1, 4] {
        thread::spawn(move || {
            KEPT.with(|cell| {
                let rt = Builder::new_multi_thread()
                    .worker_threads(workers)
                    .build()
                    .unwrap();
                *cell.borrow_mut() = Some(rt);
            });
            let _other = Builder::new_multi_thread()
                .worker_threads(workers)
                .build()
                .unwrap();
        })
        .join()
        .unwrap();
    }
}

#[test]
fn a_runtime_in_a_thread_local_is_dropped_with_its_thread() {
    for current_thread in [true, false] {
        thread::spawn(move || {
            KEPT.with(|cell| {
                let rt = runtime(current_thread);
                assert_eq!(rt.block_on(async { 1 + 1 }), 2);
                *cell.borrow_mut() = Some(rt);
            });
            // A second runtime, dropped normally before the thread ends.
            let other = runtime(current_thread);
            other.block_on(async {});
        })
        .join()
        .unwrap();
    }
}

#[test]
fn a_runtime_used_then_kept_in_a_thread_local_with_tasks_left() {
    for current_thread in [true, false] {
        thread::spawn(move || {
            let rt = runtime(current_thread);
            let _entered = rt.enter();
            drop(_entered);
            rt.spawn(std::future::pending::<()>());
            rt.block_on(fairlane::task::yield_now());
            KEPT.with(|cell| *cell.borrow_mut() = Some(rt));
        })
        .join()
        .unwrap();
    }
}
