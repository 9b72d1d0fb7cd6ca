//! Runtime identities.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// A runtime's identity, as tokio's `runtime::Id`: distinct for every
/// runtime built in the process; every [`Handle`](super::Handle) to a
/// runtime, of any of its clusters, reports the same one.
///
/// # Example
/// ```
/// use fairlane::runtime::{Builder, Handle};
/// let (a, b) = (Builder::new_current_thread().build()?, Builder::new_current_thread().build()?);
/// assert_ne!(a.handle().id(), b.handle().id());
/// assert_eq!(a.block_on(async { Handle::current().id() }), a.handle().id());
/// println!("runtime {}", a.handle().id());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Hash, Eq, PartialEq)]
pub struct Id(NonZeroU64);

impl Id {
    /// A new id, never handed out before.
    pub(crate) fn next() -> Id {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // Relaxed: ids need only be distinct, which the atomic add
        // guarantees whatever the ordering.
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        Id(NonZeroU64::new(id).expect("runtime ids start at 1"))
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
