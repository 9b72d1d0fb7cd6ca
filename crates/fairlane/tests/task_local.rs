//! `task_local!`: a value set by `LocalKey::scope` is seen by its own
//! future only, across awaits, on whichever processor polls it; scopes
//! nest and unwind; the scoped future is dropped inside its scope.

mod common;

use std::sync::{Arc, Mutex};

use fairlane::task::{yield_now, AccessError};

fairlane::task_local! {
    /// Which task this is.
    static TASK: usize;
    pub static NAME: String;
}

fairlane::task_local!(static LAST: u8);

#[test]
fn the_value_is_set_inside_the_scope_only() {
    let rt = common::runtime(1);
    assert!(TASK.try_with(|t| *t).is_err(), "not set outside a scope");
    rt.block_on(TASK.scope(5, async {
        assert_eq!(TASK.get(), 5);
        yield_now().await;
        fairlane::time::sleep(std::time::Duration::from_millis(1)).await;
        assert_eq!(TASK.with(|t| *t + 1), 6);
        assert_eq!(TASK.try_with(|t| *t), Ok(5));
        assert!(NAME.try_with(|_| ()).is_err(), "another key is not set");
    }));
    assert!(TASK.try_with(|_| ()).is_err(), "gone after the scope");
    let panic = std::panic::catch_unwind(|| TASK.with(|_| ())).unwrap_err();
    assert!(common::panic_message(&*panic).contains("outside a scope"));
    assert_eq!(LAST.sync_scope(9, || LAST.get()), 9);
}

/// Many tasks on one processor, each yielding between reads, each see
/// their own value: the value is swapped out after every poll.
#[test]
fn interleaved_tasks_see_their_own_values() {
    for processors in [1, 4] {
        let rt = common::runtime(processors);
        let tasks: Vec<_> = (0..32)
            .map(|i| {
                rt.spawn(TASK.scope(i, async move {
                    for _ in 0..50 {
                        assert_eq!(TASK.get(), i);
                        yield_now().await;
                    }
                    NAME.scope(format!("task-{i}"), async move {
                        yield_now().await;
                        (TASK.get(), NAME.get())
                    })
                    .await
                }))
            })
            .collect();
        rt.block_on(async {
            for (i, t) in tasks.into_iter().enumerate() {
                assert_eq!(t.await.unwrap(), (i, format!("task-{i}")));
            }
        });
    }
}

#[test]
fn scopes_nest_and_unwind() {
    let rt = common::runtime(1);
    rt.block_on(TASK.scope(1, async {
        let inner = TASK.scope(2, async {
            yield_now().await;
            TASK.get()
        });
        assert_eq!(inner.await, 2);
        assert_eq!(TASK.get(), 1, "the outer value is back");
        TASK.sync_scope(3, || assert_eq!(TASK.get(), 3));
        assert_eq!(TASK.get(), 1);
        let unwound = std::panic::catch_unwind(|| TASK.sync_scope(4, || panic!("inside")));
        assert!(unwound.is_err());
        assert_eq!(TASK.get(), 1, "restored after a panic in the scope");
    }));
    // Entering a scope inside `with` of the same key is refused loudly.
    let nested = std::panic::catch_unwind(|| {
        TASK.sync_scope(1, || TASK.with(|_| TASK.sync_scope(2, || ())))
    })
    .unwrap_err();
    assert!(common::panic_message(&*nested).contains("borrowed"));
    assert!(TASK.try_with(|_| ()).is_err());
}

/// Records what the key holds when it is dropped.
struct SeesKeyOnDrop(Arc<Mutex<Option<Result<usize, AccessError>>>>);

impl Drop for SeesKeyOnDrop {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(TASK.try_with(|t| *t));
    }
}

#[test]
fn the_future_is_dropped_inside_its_scope() {
    let seen = Arc::new(Mutex::new(None));
    let guard = SeesKeyOnDrop(seen.clone());
    let fut = TASK.scope(8, async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    });
    let rt = common::runtime(1);
    // Polled once (pending), then dropped by the timeout.
    let r = rt.block_on(fairlane::time::timeout(
        std::time::Duration::from_millis(5),
        fut,
    ));
    assert!(r.is_err());
    assert_eq!(*seen.lock().unwrap(), Some(Ok(8)));
    // Dropped without ever being polled: inside the scope too.
    let seen = Arc::new(Mutex::new(None));
    let guard = SeesKeyOnDrop(seen.clone());
    drop(TASK.scope(9, async move { drop(guard) }));
    assert_eq!(*seen.lock().unwrap(), Some(Ok(9)));
}

#[test]
fn try_get_copies_the_value_inside_a_scope_and_errs_outside() {
    fairlane::task_local! { static KEY: u32; }
    let rt = fairlane::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert!(KEY.try_get().is_err());
    let inside = rt.block_on(KEY.scope(5, async {
        fairlane::task::yield_now().await;
        KEY.try_get()
    }));
    assert_eq!(inside, Ok(5));
}

#[test]
fn take_value_empties_the_scope_once() {
    fairlane::task_local! { static KEY: String; }
    let rt = fairlane::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut fut = Box::pin(KEY.scope("v".to_string(), async {
        fairlane::task::yield_now().await;
        KEY.try_get()
    }));
    assert_eq!(fut.as_mut().take_value().as_deref(), Some("v"));
    assert_eq!(fut.as_mut().take_value(), None);
    // Polled after the value was taken: the key has none inside the scope.
    assert!(rt.block_on(fut).is_err());
}

#[test]
fn take_value_after_a_poll_takes_what_the_scope_holds_between_polls() {
    fairlane::task_local! { static KEY: u32; }
    let rt = fairlane::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut fut = Box::pin(KEY.scope(9, async move {
            assert_eq!(KEY.get(), 9);
            rx.await.unwrap();
            KEY.try_get()
        }));
        // One poll: the future waits on the channel; the value is back in
        // the scope's slot.
        assert!(futures_lite::future::poll_once(fut.as_mut())
            .await
            .is_none());
        assert_eq!(fut.as_mut().take_value(), Some(9));
        tx.send(()).unwrap();
        assert!(fut.await.is_err());
    });
}

/// The panics of `with`, `get` and `sync_scope` point at the caller.
#[test]
fn misuse_panics_at_the_callers_line() {
    fairlane::task_local! { static KEY: u32; }
    // The hook is the process's: only this thread's panics are recorded
    // (other tests panic on purpose meanwhile).
    let me = std::thread::current().id();
    let locations = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = locations.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() == me {
            let file = info.location().map(|l| l.file().to_string());
            seen.lock().unwrap().push(file);
        }
    }));
    let outside = std::panic::catch_unwind(|| KEY.get());
    let nested = std::panic::catch_unwind(|| {
        KEY.sync_scope(1, || KEY.with(|_| KEY.sync_scope(2, || {})));
    });
    std::panic::set_hook(previous);
    assert!(outside.is_err() && nested.is_err());
    let here = Some(file!().to_string());
    assert_eq!(*locations.lock().unwrap(), vec![here.clone(), here]);
}
