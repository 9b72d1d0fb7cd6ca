//! Tasks: spawning, joining, aborting and yielding.
//!
//! The common items are re-exported at the crate root, as in tokio.
//!
//! # Example
//! ```
//! let rt = fairlane::Runtime::builder().processors(2).build()?;
//! rt.block_on(async {
//!     let answer = fairlane::task::spawn(async { 6 * 7 });
//!     let stuck = fairlane::task::spawn(std::future::pending::<()>());
//!     stuck.abort();
//!     assert_eq!(answer.await.unwrap(), 42);
//!     assert!(stuck.await.unwrap_err().is_cancelled());
//! });
//! # Ok::<(), std::io::Error>(())
//! ```

mod abort_handle;
mod affinity;
mod blocking;
mod builder;
pub mod coop;
mod error;
pub(crate) mod id;
mod join_handle;
mod join_set;
mod local;
mod local_set;
mod shutdown;
mod spawn;
mod unwind;
mod yield_now;

pub use abort_handle::AbortHandle;
pub use affinity::{current_processor, set_affinity};
pub use blocking::{block_in_place, spawn_blocking};
pub use builder::{Builder, Priority};
pub use coop::{consume_budget, unconstrained, Unconstrained};
pub use error::JoinError;
pub use id::{id, try_id, Id};
pub use join_handle::JoinHandle;
pub use join_set::JoinSet;
pub use local::{AccessError, LocalKey, TaskLocalFuture};
pub use local_set::{spawn_local, LocalEnterGuard, LocalSet};
pub use shutdown::{shutdown_requested, ShutdownRequested};
pub use spawn::spawn;
pub(crate) use spawn::spawn_on;
pub use yield_now::{yield_now, YieldNow};

/// The identity of one processor of a fairlane runtime, as
/// [`current_processor`] and
/// [`Cluster::processors`](crate::Cluster::processors) give it.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// let ids: Vec<fairlane::ProcessorId> = rt.handle().cluster().processors();
/// assert_eq!(ids.iter().map(|id| id.index()).collect::<Vec<_>>(), [0, 1]);
/// let on = rt.block_on(rt.spawn(async { fairlane::task::current_processor() })).unwrap();
/// assert!(ids.contains(&on.unwrap()));
/// # Ok::<(), std::io::Error>(())
/// ```
pub use fairlane_core::ProcessorId;

/// A panic's payload.
type Panic = Box<dyn std::any::Any + Send + 'static>;
