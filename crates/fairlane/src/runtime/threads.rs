//! How fairlane starts its threads: processors, blocking-pool threads and
//! `block_in_place` replacements all get their names, stack size and the
//! user's start and stop hooks from one [`ThreadSpec`] (the builder's
//! `thread_name`, `thread_name_fn`, `thread_stack_size`, `on_thread_start`
//! and `on_thread_stop`).

use std::fmt;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use super::{context, Handle};

/// A hook run on each thread fairlane starts.
pub(crate) type Hook = Arc<dyn Fn() + Send + Sync>;

/// How threads are named.
#[derive(Clone)]
pub(crate) enum ThreadName {
    /// A prefix, which each kind of thread completes (`{prefix}-{index}`
    /// for a processor, `{prefix}-blocking-{n}` for a blocking thread).
    Prefix(String),
    /// The user's function, called for every thread.
    Fn(Arc<dyn Fn() -> String + Send + Sync>),
}

/// Names, stack size and hooks of the threads a runtime starts.
#[derive(Clone)]
pub(crate) struct ThreadSpec {
    pub(crate) name: ThreadName,
    pub(crate) stack_size: Option<usize>,
    pub(crate) on_start: Option<Hook>,
    pub(crate) on_stop: Option<Hook>,
}

impl Default for ThreadSpec {
    fn default() -> Self {
        Self {
            name: ThreadName::Prefix("fairlane-processor".into()),
            stack_size: None,
            on_start: None,
            on_stop: None,
        }
    }
}

impl ThreadSpec {
    /// Starts a thread running `body`, named by the user's function or, with
    /// a prefix, by `named(prefix)`. The start hook runs on it before
    /// `body` and the stop hook after, both with `handle`'s runtime current
    /// (as tokio runs them), so that `Handle::current` works in them. What
    /// `body` returns is dropped after the stop hook: a guard there marks
    /// the thread done only once the hook has run.
    pub(crate) fn spawn<T: 'static>(
        &self,
        handle: &Handle,
        named: impl FnOnce(&str) -> String,
        body: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<thread::JoinHandle<()>> {
        let name = match &self.name {
            ThreadName::Prefix(prefix) => named(prefix),
            ThreadName::Fn(f) => f(),
        };
        let mut builder = thread::Builder::new().name(name);
        if let Some(size) = self.stack_size {
            builder = builder.stack_size(size);
        }
        let (on_start, on_stop) = (self.on_start.clone(), self.on_stop.clone());
        let handle = handle.clone();
        builder.spawn(move || {
            run_hook(on_start.as_ref(), &handle, "on_thread_start");
            let done = body();
            run_hook(on_stop.as_ref(), &handle, "on_thread_stop");
            drop(done);
        })
    }
}

/// Runs a user's hook with `handle`'s runtime current. A hook that panics
/// is reported and the thread goes on: a processor or pool thread lost to
/// it would take the runtime's tasks with it.
fn run_hook(hook: Option<&Hook>, handle: &Handle, which: &'static str) {
    let Some(hook) = hook else { return };
    let _context = context::enter_plain(handle.clone());
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook())) {
        let message = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("<not a string>");
        tracing::error!(
            hook = which,
            panic = message,
            "a fairlane thread hook panicked"
        );
    }
}

impl fmt::Debug for ThreadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name: &dyn fmt::Debug = match &self.name {
            ThreadName::Prefix(prefix) => prefix,
            ThreadName::Fn(_) => &"<thread_name_fn>",
        };
        f.debug_struct("ThreadSpec")
            .field("name", name)
            .field("stack_size", &self.stack_size)
            .field("on_start", &self.on_start.is_some())
            .field("on_stop", &self.on_stop.is_some())
            .finish()
    }
}
