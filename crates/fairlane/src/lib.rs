//! fairlane: an async runtime whose scheduler is fair by construction.
//!
//! Work-stealing runtimes only steal when a processor is idle, so a task
//! queued behind a processor busy with a task that never yields waits as long
//! as that task runs. fairlane's ready queue stamps every task with its push
//! time; busy processors compare ages and help the processor whose tasks have
//! waited much longer, so no task starves as long as one processor is free to
//! notice.
//!
//! The API follows tokio's shapes: [`Runtime`], [`Builder`], [`Handle`]
//! (in [`runtime`], as in tokio, and here),
//! [`spawn`], [`JoinHandle`], [`yield_now`]. Asynchronous I/O runs on one
//! io_uring instance per processor, or on an epoll fallback (see [`io`]):
//! [`time`] (sleep, timeout, interval), [`net`] (TCP, UDP, Unix sockets with
//! owned buffers and `futures-io` traits), [`fs`], and [`process`] (child
//! processes whose exits and pipes are waited for without blocking a
//! processor).
//!
//! # Cargo features
//! - `tokio-io` (off by default): the streams (and the child processes'
//!   pipes) implement tokio's `AsyncRead`/`AsyncWrite` (only tokio's traits
//!   are pulled in, not its runtime), so tokio-util codecs and crates written against tokio's
//!   traits take fairlane streams directly.
//! - `hyper` (off by default): the streams implement hyper's I/O traits,
//!   and the module `fairlane::hyper` has hyper's executor and timer.
//! - `tokio-compat` (off by default; implies `tokio-io`): every runtime
//!   starts a tokio runtime beside itself and makes its context current on
//!   fairlane's threads, so crates that call `tokio::spawn`, `tokio::net`
//!   or `tokio::time` themselves work from fairlane tasks
//!   (`runtime::Builder::tokio_compat`; README, "Coming from tokio").
//! - `axum` (off by default, turns on `hyper`): `fairlane::axum::serve`,
//!   axum's `axum::serve` on fairlane's listeners and tasks.
//!
//! # Glossary
//! One word per concept, in the docs, the prose pages beside the code, and
//! the code itself:
//! - **processor**: an OS thread that runs tasks ([`task::ProcessorId`]
//!   names one). It owns lanes of the ready queue and an I/O engine.
//! - **cluster**: processors that share one ready queue. A runtime has a
//!   default cluster and may have named ones ([`Cluster`]); the scheduler
//!   core's `Executor` is what runs one.
//! - **lane**: a FIFO of tasks, each stamped with its push time. A
//!   processor has normal lanes, a high and a low lane, and a restricted lane.
//! - **helping**: the ready queue's age rule. A processor pops the head of
//!   another processor's lane when that task has waited much longer than its
//!   own; **stealing** is the same for an idle processor.
//! - **restricted**: a task with an affinity ([`task::Builder::affinity`],
//!   [`task::set_affinity`]) runs only on the processors of its set. It waits
//!   on the restricted lane of one of them, and helping and stealing pass it
//!   by.
//! - **idle sleep**: a processor with nothing to run sleeps in its engine
//!   until work, a wake-up or its next timer arrives, and no wake-up is lost
//!   between its last look and its sleep.
//! - **engine**: a processor's I/O state: its io_uring ring (or epoll poller
//!   in the fallback backend), its operations and its timer wheel.
//! - **rescuing**: the I/O driver's counterpart of helping. Another processor
//!   reaps the engine of a processor stuck in a long poll, so that its
//!   completions and timers still wake their tasks.
//! - **budget**: the cooperative budget. A task whose I/O and timer futures
//!   keep being ready returns to its processor after a bounded number of
//!   them.
//! - **background task**: a task that a graceful shutdown does not wait for
//!   ([`task::Builder::background`]).
//!
//! # Limits
//! Starvation-freedom needs at least one processor that is not stuck in a task
//! that never yields: with a single processor, nothing can rescue a task queued
//! behind one that spins.
//!
//! # Example
//! ```
//! let rt = fairlane::Runtime::new()?;
//! let total: u64 = rt.block_on(async {
//!     let tasks: Vec<_> = (0..10u64).map(|i| fairlane::spawn(async move { i * i })).collect();
//!     let mut sum = 0;
//!     for t in tasks {
//!         sum += t.await.unwrap();
//!     }
//!     sum
//! });
//! assert_eq!(total, 285);
//! # Ok::<(), std::io::Error>(())
//! ```
#![warn(missing_docs)]

#[cfg(feature = "axum")]
pub mod axum;
pub mod fs;
mod host;
#[cfg(feature = "hyper")]
pub mod hyper;
pub mod io;
pub mod net;
pub mod process;
pub mod runtime;
pub mod signal;
pub mod task;
pub mod time;

pub use runtime::{
    Builder, Cluster, EnterGuard, Handle, MigrateHere, ProcessorMetrics, Runtime, RuntimeMetrics,
    TryCurrentError,
};
pub use task::ProcessorId;

/// Runs an `async fn` (usually `main`) on a fairlane runtime, multi-thread
/// unless `flavor = "current_thread"` says otherwise; see the attribute's
/// options in [`fairlane_macros::main`].
///
/// # Example
/// ```
/// #[fairlane::main]
/// async fn main() {
///     fairlane::spawn(async {}).await.unwrap();
/// }
/// # fn _unused() { main() }
/// ```
pub use fairlane_macros::main;
/// Runs an `async fn` test on a fresh fairlane runtime, current-thread
/// unless the options say otherwise (as tokio's); see
/// [`fairlane_macros::test`].
///
/// # Example
/// ```
/// #[fairlane::test(processors = 2)]
/// async fn spawned_tasks_run() {
///     assert_eq!(fairlane::spawn(async { 7 }).await.unwrap(), 7);
/// }
/// # fn main() {}
/// ```
pub use fairlane_macros::test;
pub use task::{spawn, yield_now, AbortHandle, JoinError, JoinHandle};
