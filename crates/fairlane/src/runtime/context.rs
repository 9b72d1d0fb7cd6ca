//! The thread-local runtime context: which runtime `fairlane::spawn` and
//! `Handle::current` refer to, and whether this thread is driving one
//! (a processor, or a `block_on`), where a nested `block_on` is refused.

use std::cell::{Cell, RefCell};

use super::Handle;

struct Context {
    handle: Handle,
    role: Role,
    /// The runtime's tokio bridge entered too (feature `tokio-compat`).
    #[cfg(feature = "tokio-compat")]
    _tokio: Option<super::tokio_compat::TokioContext>,
}

impl Context {
    fn new(handle: Handle, role: Role) -> Context {
        Context {
            #[cfg(feature = "tokio-compat")]
            _tokio: handle.shared.tokio.as_ref().map(|bridge| bridge.enter()),
            handle,
            role,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// A processor or a `block_on`: blocking this thread would stall tasks.
    Driving,
    /// One of the runtime's blocking-pool threads, where `block_on` is
    /// allowed.
    Blocking,
    /// A thread of the user's that entered the runtime (`Handle::enter`).
    Entered,
}

thread_local! {
    static CURRENT: RefCell<Option<Context>> = const { RefCell::new(None) };
    /// How many guards are live on this thread: each guard knows its own
    /// depth, so one dropped out of order is noticed.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f` with the current runtime's handle, if there is one.
///
/// While the thread's locals are being destroyed (a runtime kept in a
/// thread-local is dropped with its thread) there is none.
pub(crate) fn with_current<R>(f: impl FnOnce(&Handle) -> R) -> Option<R> {
    CURRENT
        .try_with(|c| c.borrow().as_ref().map(|c| f(&c.handle)))
        .ok()
        .flatten()
}

/// Whether this thread's context satisfies `test` (false while the
/// thread's locals are being destroyed).
fn current_is(test: impl FnOnce(&Context) -> bool) -> bool {
    CURRENT
        .try_with(|c| c.borrow().as_ref().is_some_and(test))
        .unwrap_or(false)
}

/// Whether this thread is one of the blocking-pool threads of `handle`'s
/// runtime.
pub(crate) fn is_blocking_thread_of(handle: &Handle) -> bool {
    current_is(|c| c.role == Role::Blocking && c.handle.same_runtime(handle))
}

/// Whether this thread drives a current-thread runtime: it is in that
/// runtime's `block_on` (polling the future, or running a task there).
pub(crate) fn drives_current_thread() -> bool {
    current_is(|c| {
        c.role == Role::Driving && c.handle.shared.flavor == super::RuntimeFlavor::CurrentThread
    })
}

/// Marks this thread as driving `handle`'s runtime until the guard drops.
///
/// # Panics
/// If the thread already drives a runtime: blocking it would stall every task
/// queued behind the blocked one.
#[track_caller]
pub(crate) fn enter(handle: Handle) -> EnterGuard {
    if current_is(|c| c.role == Role::Driving) {
        panic!(
            "Cannot start a fairlane runtime from within a runtime: `block_on` was called from a \
             task or from inside another `block_on`, which would block a thread that is driving \
             asynchronous tasks. Use `.await` instead, or call `block_on` from a thread that is \
             not part of a runtime (`spawn_blocking` threads are fine)."
        );
    }
    set(Context::new(handle, Role::Driving))
}

/// Makes `handle` the current runtime of a blocking-pool thread, where
/// `Handle::current` works and `block_on` is allowed.
pub(crate) fn enter_blocking(handle: Handle) -> EnterGuard {
    set(Context::new(handle, Role::Blocking))
}

/// Makes `handle` the current runtime of a thread that is none of the
/// runtime's (`Handle::enter`).
pub(crate) fn enter_plain(handle: Handle) -> EnterGuard {
    set(Context::new(handle, Role::Entered))
}

fn set(context: Context) -> EnterGuard {
    let previous = CURRENT.with(|c| c.borrow_mut().replace(context));
    let depth = DEPTH.with(|d| d.get() + 1);
    DEPTH.with(|d| d.set(depth));
    EnterGuard {
        previous,
        depth,
        _not_send: std::marker::PhantomData,
    }
}

/// Restores the previous context when dropped.
///
/// Guards are dropped in the reverse order of their making (each is a
/// local of the code that made it; `Handle::enter`'s are the user's). One
/// dropped while a later one is live restores the context before it,
/// leaves the later ones nothing to restore, and panics (unless the thread
/// is already panicking), as tokio's guards do: the context the user
/// meant to be current cannot be known.
pub(crate) struct EnterGuard {
    previous: Option<Context>,
    /// The number of live guards on this thread once this one was made.
    depth: usize,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        // While the thread's locals are being destroyed there is nothing
        // left to restore.
        let Ok(live) = DEPTH.try_with(Cell::get) else {
            return;
        };
        if self.depth > live {
            // An earlier guard was dropped out of order and restored the
            // context before this one; there is nothing left to restore.
            drop(self.previous.take());
            return;
        }
        // Swap outside the borrow, so that dropping the handle we replace
        // cannot observe the thread-local mid-borrow.
        let previous = self.previous.take();
        let ours = CURRENT
            .try_with(|c| std::mem::replace(&mut *c.borrow_mut(), previous))
            .ok()
            .flatten();
        DEPTH.with(|d| d.set(self.depth - 1));
        drop(ours);
        if self.depth < live && !std::thread::panicking() {
            panic!(
                "`EnterGuard` values dropped out of order: the guards `Handle::enter` and \
                 `Runtime::enter` return must be dropped in the reverse order of their making"
            );
        }
    }
}
