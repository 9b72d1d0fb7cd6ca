//! The thread-local runtime context: which runtime `fairlane::spawn` and
//! `Handle::current` refer to, and whether this thread is already driving
//! one (nested `block_on` is refused).

use std::cell::RefCell;

use super::Handle;

thread_local! {
    static CURRENT: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

/// Runs `f` with the current runtime's handle, if there is one.
pub(crate) fn with_current<R>(f: impl FnOnce(&Handle) -> R) -> Option<R> {
    CURRENT.with(|c| c.borrow().as_ref().map(f))
}

/// Whether this thread is inside a runtime context.
pub(crate) fn is_entered() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// Marks this thread as driving `handle`'s runtime until the guard drops.
///
/// # Panics
/// If the thread already drives a runtime: blocking it would stall every task
/// queued behind the blocked one.
#[track_caller]
pub(crate) fn enter(handle: Handle) -> EnterGuard {
    if is_entered() {
        panic!(
            "Cannot start a fairlane runtime from within a runtime: `block_on` was called from a \
             task or from inside another `block_on`, which would block a thread that is driving \
             asynchronous tasks. Use `.await` instead, or call `block_on` from a thread that is \
             not part of a runtime."
        );
    }
    CURRENT.with(|c| *c.borrow_mut() = Some(handle));
    EnterGuard {
        _not_send: std::marker::PhantomData,
    }
}

/// Leaves the runtime context when dropped.
pub(crate) struct EnterGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        // Take the handle out before dropping it, so that its drop cannot
        // observe the thread-local mid-borrow.
        let handle = CURRENT.with(|c| c.borrow_mut().take());
        drop(handle);
    }
}
