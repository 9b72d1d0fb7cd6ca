//! A counting global allocator, for "bytes of memory per parked task".
//!
//! Counting is off unless a measurement switches it on, so that the
//! throughput workloads pay one relaxed load of a read-shared flag per
//! allocation and nothing else: two global atomic counters bumped on every
//! allocation would put one contended cache line under every runtime.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The system allocator, counting bytes while [`Counting::start`] is in force.
pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

impl Counting {
    /// Starts counting from zero.
    pub fn start() {
        ALLOCATED.store(0, Relaxed);
        FREED.store(0, Relaxed);
        ON.store(true, Relaxed);
    }

    /// Stops counting and returns the bytes allocated and not freed since
    /// [`Counting::start`] (negative if more was freed than allocated).
    pub fn stop() -> i64 {
        ON.store(false, Relaxed);
        ALLOCATED.load(Relaxed) as i64 - FREED.load(Relaxed) as i64
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Relaxed) {
            ALLOCATED.fetch_add(layout.size() as u64, Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ON.load(Relaxed) {
            ALLOCATED.fetch_add(layout.size() as u64, Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ON.load(Relaxed) {
            FREED.fetch_add(layout.size() as u64, Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.load(Relaxed) {
            ALLOCATED.fetch_add(new_size as u64, Relaxed);
            FREED.fetch_add(layout.size() as u64, Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
