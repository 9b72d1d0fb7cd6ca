//! The runtime: processors as OS threads around `fairlane-core` clusters.
//!
//! The paths are tokio's: `fairlane::runtime::{Runtime, Builder, Handle}`
//! (also at the crate root), with a multi-thread flavor (processors on
//! threads of their own) and a current-thread one (one processor, driven
//! by the thread in `block_on`).
//!
//! # Example
//! ```
//! use fairlane::runtime::{Builder, Handle, Runtime, RuntimeFlavor};
//!
//! let rt: Runtime = Builder::new_current_thread().enable_all().build()?;
//! let flavor = rt.block_on(async { Handle::current().runtime_flavor() });
//! assert_eq!(flavor, RuntimeFlavor::CurrentThread);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! One concept a file: the [`Runtime`] itself (`runtime.rs`), its
//! [`Builder`] (`builder.rs`), [`Handle`]s to it (`handle.rs`), clusters and
//! their processor threads (`cluster.rs`), the threads it starts
//! (`threads.rs`), running a future on the calling thread (`block_on.rs`)
//! and, on a current-thread runtime, driving the processor meanwhile
//! (`current_thread.rs`), the blocking pool (`blocking.rs`), the
//! thread-local context (`context.rs`), shutting down (`shutdown.rs`) and
//! the counters (`metrics.rs`), its [`Id`] (`id.rs`). What every part
//! shares is here.

mod block_on;
mod blocking;
mod builder;
mod cluster;
pub(crate) mod context;
mod current_thread;
mod handle;
mod id;
mod metrics;
#[allow(clippy::module_inception)]
mod runtime;
pub(crate) mod shutdown;
mod threads;
#[cfg(feature = "tokio-compat")]
mod tokio_compat;

use std::sync::{Arc, Condvar, MutexGuard};
use std::time::Instant;

use fairlane_core::Executor;

pub(crate) use self::blocking::block_in_place;
use self::blocking::BlockingPool;
pub use self::builder::Builder;
pub use self::cluster::{Cluster, MigrateHere};
use self::cluster::{NamedExecutor, ProcessorThreads};
pub use self::handle::{EnterGuard, Handle, TryCurrentError};
pub use self::id::Id;
pub use self::metrics::{ProcessorMetrics, RuntimeMetrics};
pub use self::runtime::{Runtime, RuntimeFlavor};
pub use self::shutdown::is_rt_shutdown_err;
pub(crate) use self::shutdown::ShutdownSignal;
use crate::host::StdHost;
use crate::time::clock::Clock;

/// A shared reference to a cluster's executor.
pub(crate) type ExecutorRef = Arc<Executor<StdHost>>;

/// Waits on `cvar` until `done` holds for the guarded state or `deadline`
/// passes; returns the guard and whether `done` holds.
pub(crate) fn wait_until<'a, T>(
    cvar: &Condvar,
    mut guard: MutexGuard<'a, T>,
    deadline: Option<Instant>,
    done: impl Fn(&T) -> bool,
) -> (MutexGuard<'a, T>, bool) {
    // Poisoning: the guarded counters stay consistent whatever panicked.
    while !done(&guard) {
        guard = match deadline {
            None => cvar.wait(guard).unwrap_or_else(|e| e.into_inner()),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return (guard, false);
                }
                cvar.wait_timeout(guard, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
    }
    (guard, true)
}

/// What all clusters of a runtime share.
pub(crate) struct RuntimeShared {
    /// The clock of every cluster's timers.
    pub(crate) clock: Arc<Clock>,
    /// The default cluster first.
    pub(crate) clusters: Vec<NamedExecutor>,
    pub(crate) blocking: Arc<BlockingPool>,
    pub(crate) signal: Arc<ShutdownSignal>,
    pub(crate) threads: ProcessorThreads,
    /// How the runtime's threads are started.
    pub(crate) thread_spec: threads::ThreadSpec,
    pub(crate) flavor: RuntimeFlavor,
    /// Who drives the processor of a current-thread runtime.
    pub(crate) seat: current_thread::Seat,
    pub(crate) id: Id,
    /// `Builder::name`'s name, if one was given.
    pub(crate) name: Option<String>,
    /// The tokio runtime beside this one (feature `tokio-compat`, unless
    /// `Builder::tokio_compat(false)`).
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio: Option<tokio_compat::TokioBridge>,
}
