//! The runtime: processors as OS threads around `fairlane-core` clusters.
//!
//! One concept a file: the [`Runtime`] itself (`runtime.rs`), its
//! [`Builder`] (`builder.rs`), [`Handle`]s to it (`handle.rs`), clusters and
//! their processor threads (`cluster.rs`), running a future on the calling
//! thread (`block_on.rs`), the blocking pool (`blocking.rs`), the
//! thread-local context (`context.rs`), shutting down (`shutdown.rs`) and
//! the counters (`metrics.rs`). What every part shares is here.

mod block_on;
mod blocking;
mod builder;
mod cluster;
pub(crate) mod context;
mod handle;
mod metrics;
#[allow(clippy::module_inception)]
mod runtime;
mod shutdown;

use std::sync::{Arc, Condvar, MutexGuard};
use std::time::Instant;

use fairlane_core::Executor;

pub(crate) use self::blocking::block_in_place;
use self::blocking::BlockingPool;
pub use self::builder::Builder;
pub use self::cluster::{Cluster, MigrateHere};
use self::cluster::{NamedExecutor, ProcessorThreads};
pub use self::handle::{EnterGuard, Handle, TryCurrentError};
pub use self::metrics::{ProcessorMetrics, RuntimeMetrics};
pub use self::runtime::Runtime;
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
    pub(crate) thread_name: String,
}
