//! The resize lock: a reader-writer lock whose read side costs a processor
//! nothing shared, taken by whoever changes a cluster's set of processors.
//!
//! The protocol, its states and why neither side can miss the other are in
//! `resize.md` beside this file. In short: each processor has a reader flag
//! of its own, which it sets once when it starts running and keeps while it
//! runs; at the top of every scheduling iteration it reads the writer bit
//! (a read-mostly shared line, next to the `closed` flag it reads anyway) and
//! steps aside only when a writer is waiting. Threads that are not
//! processors (outside wakers, `block_on`, I/O completions) count themselves
//! in a shared counter for the length of one push. The writer sets its bit,
//! then waits for every flag and for the counter to drop.

use crossbeam_utils::CachePadded;

use crate::sync::{fence, spin_hint, AtomicBool, AtomicUsize, Ordering};

/// The shared words of the lock. The per-processor reader flags live with
/// each processor's other state (`local::Local::reading`), so that taking
/// the read side touches only the processor's own cache line.
pub struct ResizeLock {
    /// Set while a writer holds, or waits for, the lock.
    writer: AtomicBool,
    /// Threads that are not processors and hold the read side right now.
    /// On a line of its own: every outside push writes it twice, and the
    /// writer bit beside `closed` is read by every processor every iteration.
    remote: CachePadded<AtomicUsize>,
}

impl ResizeLock {
    /// An unlocked lock with no reader.
    pub fn new() -> Self {
        Self {
            writer: AtomicBool::new(false),
            remote: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// Whether a writer waits: a processor holding its flag checks this once
    /// per scheduling iteration and, if set, steps aside
    /// ([`exit`](Self::exit) then [`enter`](Self::enter)). Relaxed: missing a
    /// writer that just arrived only delays it to the next iteration, as the
    /// writer waits for the flag itself, not for this check.
    #[inline]
    pub fn writer_waiting(&self) -> bool {
        self.writer.load(Ordering::Relaxed)
    }

    /// Takes the read side for a processor, whose flag is `flag`, waiting
    /// (spinning with `relax`) while a writer holds the lock.
    pub fn enter(&self, flag: &AtomicBool, mut relax: impl FnMut()) {
        loop {
            flag.store(true, Ordering::Relaxed);
            // Store-buffering pair with the writer's fence in `write`: either
            // the writer's load of our flag sees `true` (and it waits for
            // us), or our load below sees its bit (and we step aside).
            fence(Ordering::SeqCst);
            // Acquire: reading the `false` a writer stored when it finished
            // makes everything it changed visible to us.
            if !self.writer.load(Ordering::Acquire) {
                return;
            }
            flag.store(false, Ordering::Release);
            while self.writer.load(Ordering::Relaxed) {
                relax();
            }
        }
    }

    /// Gives the read side of a processor back. Release: a writer that then
    /// reads the flag as `false` sees every lane change we made under it.
    pub fn exit(&self, flag: &AtomicBool) {
        flag.store(false, Ordering::Release);
    }

    /// Takes the read side for a thread that is not a processor; it is held
    /// until the guard is dropped, which must be soon (one push).
    #[inline]
    pub fn read_remote(&self) -> RemoteGuard<'_> {
        loop {
            self.remote.fetch_add(1, Ordering::Relaxed);
            // The same store-buffering pair as in `enter`, with the counter
            // in the flag's place.
            fence(Ordering::SeqCst);
            if !self.writer.load(Ordering::Acquire) {
                return RemoteGuard { lock: self };
            }
            self.remote.fetch_sub(1, Ordering::Release);
            while self.writer.load(Ordering::Relaxed) {
                spin_hint();
            }
        }
    }

    /// Takes the write side: sets the writer bit (waiting for an earlier
    /// writer to finish), calls `announce` (which must make sleeping
    /// processors come round to their check, see `resize.md`), then waits
    /// until every flag in `flags` and the remote counter are clear. The
    /// caller's own processor, if it is one, must not be in `flags`.
    pub fn write<'a>(
        &self,
        flags: impl Iterator<Item = &'a AtomicBool> + Clone,
        announce: impl FnOnce(),
        mut relax: impl FnMut(),
    ) -> WriteGuard<'_> {
        while self
            .writer
            // Acquire: the previous writer's changes are visible to us.
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            relax();
        }
        // The writer's half of the store-buffering pairs (see `enter`).
        fence(Ordering::SeqCst);
        announce();
        for flag in flags {
            // Acquire pairs with the Release of `exit`.
            while flag.load(Ordering::Acquire) {
                relax();
            }
        }
        while self.remote.load(Ordering::Acquire) != 0 {
            relax();
        }
        WriteGuard { lock: self }
    }
}

/// The read side of a thread that is not a processor.
pub struct RemoteGuard<'a> {
    lock: &'a ResizeLock,
}

impl Drop for RemoteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: the writer's Acquire load of the counter sees our push.
        self.lock.remote.fetch_sub(1, Ordering::Release);
    }
}

/// The write side; dropping it lets readers in again.
pub struct WriteGuard<'a> {
    lock: &'a ResizeLock,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        // Release pairs with the readers' Acquire loads in `enter` and
        // `read_remote`: what the writer changed is visible to them.
        self.lock.writer.store(false, Ordering::Release);
    }
}
