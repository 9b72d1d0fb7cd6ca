//! The count of open connections, and giving memory back to the system
//! once many of them have closed.
//!
//! Each connection's buffers are freed when it closes, but the C library's
//! allocator keeps freed memory in its heaps for reuse, and can hand back
//! to the system only what lies at a heap's end: after a burst of
//! connections whose buffers lie between longer-lived allocations, the
//! process would stay as large as the burst made it. So once the open
//! connections have fallen to a quarter of the most there were since the
//! last time (and that most was many), the heaps' free pages are handed
//! back (`malloc_trim`, glibc), on the blocking pool: rarely, and never in
//! a processor's way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::protocol::Shared;

/// The fewest connections a burst must have reached for its end to give
/// memory back (fewer hold too little to be worth it).
const BURST: u64 = 64;

/// The most connections open at once since memory was last given back.
#[derive(Debug, Default)]
pub(super) struct Peak(AtomicU64);

/// Counts a connection open while it lives.
pub(super) struct Open {
    pub(super) shared: Arc<Shared>,
    peak: Arc<Peak>,
}

impl Open {
    /// Counts one more connection open in `shared`.
    pub(super) fn new(shared: &Arc<Shared>, peak: &Arc<Peak>) -> Open {
        // Relaxed: counters read on their own (the accept loop, the only
        // one to add, reads them before it does); the peak is a hint for
        // when to give memory back, nothing depends on it exactly.
        let open = shared.curr_connections.fetch_add(1, Ordering::Relaxed) + 1;
        shared.total_connections.fetch_add(1, Ordering::Relaxed);
        peak.0.fetch_max(open, Ordering::Relaxed);
        Open {
            shared: shared.clone(),
            peak: peak.clone(),
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let open = self.shared.curr_connections.fetch_sub(1, Ordering::Relaxed) - 1;
        let peak = self.peak.0.load(Ordering::Relaxed);
        if peak >= BURST
            && open <= peak / 4
            && self
                .peak
                .0
                .compare_exchange(peak, open, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            give_memory_back();
        }
    }
}

/// Hands the allocator's free pages back to the system, off the
/// processors.
fn give_memory_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    drop(fairlane::task::spawn_blocking(|| {
        // SAFETY: malloc_trim only releases free memory; it has no
        // preconditions.
        unsafe { libc::malloc_trim(0) };
    }));
}
