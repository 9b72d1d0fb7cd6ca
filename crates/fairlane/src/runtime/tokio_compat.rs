//! The tokio bridge (feature `tokio-compat`): a tokio runtime that every
//! fairlane runtime starts beside itself, whose context is entered on each
//! of fairlane's threads, so that crates which call tokio's runtime items
//! themselves (`tokio::spawn`, `tokio::net`, `tokio::time`,
//! `tokio::task::spawn_blocking`) work from fairlane tasks without a
//! wrapper per future.
//!
//! Where the work then runs: whatever those crates hand to tokio (the tasks
//! they spawn, the sockets they open with `tokio::net`, their timers) runs
//! on the bridge's one tokio worker thread (`fairlane-tokio-compat`) and
//! its blocking pool, not on fairlane's processors; the futures the crates
//! return to the caller run in the fairlane task that awaits them, and are
//! woken from tokio's thread. tokio's timers follow tokio's clock, not
//! fairlane's paused test clock.
//!
//! The context is entered wherever fairlane makes its own context current:
//! processors, blocking-pool threads and `block_in_place` replacements (for
//! their whole life), `block_on` (while it runs) and `Handle::enter` (while
//! the guard lives). The tokio runtime stops after fairlane's has shut down
//! its tasks.

use std::io;
use std::sync::Mutex;

/// The tokio runtime of one fairlane runtime, and its handle.
pub(crate) struct TokioBridge {
    handle: tokio::runtime::Handle,
    /// Taken, and shut down without waiting, when fairlane's runtime shuts
    /// down.
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

impl TokioBridge {
    /// Starts the tokio runtime: one worker thread, I/O and timers on.
    pub(crate) fn start() -> io::Result<TokioBridge> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fairlane-tokio-compat")
            .enable_all()
            .build()?;
        Ok(TokioBridge {
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
        })
    }

    /// Makes the tokio runtime current on this thread until the guard
    /// drops.
    pub(crate) fn enter(&self) -> TokioContext {
        let guard = self.handle.enter();
        // SAFETY: `EnterGuard`'s lifetime parameter is a marker only: the
        // guard owns a clone of the handle it entered (it restores the
        // previous context, which it also owns, when dropped), and reads
        // nothing through the borrow after `enter` returned. Extending it
        // lets the guard live in fairlane's own thread-local context beside
        // the handle that keeps this bridge alive.
        let guard: tokio::runtime::EnterGuard<'static> = unsafe { std::mem::transmute(guard) };
        TokioContext { _guard: guard }
    }

    /// Stops the tokio runtime without waiting for its tasks: fairlane's
    /// shutdown has already ended every fairlane task that could await
    /// them.
    pub(crate) fn shutdown(&self) {
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
    }
}

/// tokio's context on this thread while it lives. Not `Send`, as tokio's
/// guard: it must be dropped on the thread that entered.
pub(crate) struct TokioContext {
    _guard: tokio::runtime::EnterGuard<'static>,
}
