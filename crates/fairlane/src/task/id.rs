//! Task identities: [`Id`], and the one of the task running on this thread.
//!
//! Ids come from one process-wide counter, taken in blocks of
//! [`BLOCK`] per thread, so that spawning from many processors at once
//! does not make them all write one shared word per spawn. While a task's
//! future is polled or dropped (and while its output is dropped, and a
//! `spawn_blocking` closure runs), a thread-local names it.

use std::cell::Cell;
use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids a thread takes from the counter at once.
const BLOCK: u64 = 1024;

/// The first id of the next block any thread takes.
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The next id this thread hands out, and the end of its block.
    static BLOCK_LEFT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// The task whose code runs on this thread now.
    static CURRENT: Cell<Option<Id>> = const { Cell::new(None) };
}

/// A task's identity, as tokio's `task::Id`: unique among the tasks of the
/// process for its whole life, not sequential and not telling the order
/// of spawns or the runtime. Inside a task, [`id`] and [`try_id`] give
/// it; outside, [`JoinHandle::id`](crate::JoinHandle::id),
/// [`AbortHandle::id`](crate::AbortHandle::id) and
/// [`JoinError::id`](crate::JoinError::id) do.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.spawn(async { fairlane::task::id() });
/// let id: fairlane::task::Id = handle.id();
/// assert_eq!(rt.block_on(handle).unwrap(), id);
/// println!("task {id} ran");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Hash, Eq, PartialEq, PartialOrd, Ord)]
pub struct Id(NonZeroU64);

impl Id {
    /// A new id, never handed out before.
    pub(crate) fn next() -> Id {
        BLOCK_LEFT.with(|left| {
            let (mut next, mut end) = left.get();
            if next == end {
                // Relaxed: ids need only be distinct, which the atomic
                // add guarantees whatever the ordering.
                next = NEXT_BLOCK.fetch_add(BLOCK, Ordering::Relaxed);
                end = next + BLOCK;
            }
            left.set((next + 1, end));
            // Blocks start at 1 and 2^64 ids are never handed out.
            Id(NonZeroU64::new(next).expect("task ids start at 1"))
        })
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The [`Id`] of the task running this code.
///
/// # Panics
/// Outside a task: in the future given to `block_on` (which is no task),
/// or on a thread of no runtime. [`try_id`] does not panic.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.spawn(async { fairlane::task::id() });
/// let expected = handle.id();
/// assert_eq!(rt.block_on(handle).unwrap(), expected);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn id() -> Id {
    match try_id() {
        Some(id) => id,
        None => panic!(
            "fairlane::task::id called outside a task (the future given to block_on is not a \
             task); use task::try_id to check"
        ),
    }
}

/// The [`Id`] of the task running this code, or `None` outside a task
/// (in the future given to `block_on`, or on a thread of no runtime).
///
/// # Example
/// ```
/// assert_eq!(fairlane::task::try_id(), None);
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// assert_eq!(rt.block_on(async { fairlane::task::try_id() }), None);
/// assert!(rt.block_on(rt.spawn(async { fairlane::task::try_id() })).unwrap().is_some());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn try_id() -> Option<Id> {
    CURRENT.with(Cell::get)
}

/// Makes `id` the current task's until the guard drops, which restores
/// the one before (tasks nest: a `block_on` inside a task's
/// `block_in_place` runs other tasks).
pub(crate) fn enter(id: Option<Id>) -> IdGuard {
    IdGuard {
        previous: CURRENT.with(|c| c.replace(id)),
    }
}

/// Restores the current task's id when dropped; see [`enter`].
pub(crate) struct IdGuard {
    previous: Option<Id>,
}

impl Drop for IdGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_across_threads_and_blocks() {
        let mut ids: Vec<Id> = (0..3)
            .map(|_| std::thread::spawn(|| (0..2 * BLOCK).map(|_| Id::next()).collect::<Vec<_>>()))
            .flat_map(|t| t.join().unwrap())
            .collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n);
    }

    #[test]
    fn the_guard_restores_the_id_before_it() {
        let outer = Id::next();
        let inner = Id::next();
        let _outer = enter(Some(outer));
        {
            let _inner = enter(Some(inner));
            assert_eq!(try_id(), Some(inner));
            let _none = enter(None);
            assert_eq!(try_id(), None);
        }
        assert_eq!(try_id(), Some(outer));
    }
}
