//! What the core needs from its host: time, identity, and a way to block.

use core::task::Waker;

/// The services a host (the std runtime, or a library OS) plugs into the
/// scheduler core. The core knows nothing of threads, clocks or system calls;
/// everything it needs from them goes through these four methods.
///
/// # Safety
/// Implementations must keep the contract below; the core's memory safety
/// relies on [`current_processor`](Host::current_processor) in particular
/// (a thread it names as processor `p` is inside `run_processor(p)` of this
/// cluster, which keeps the cluster alive).
///
/// # Contract
/// - [`now`](Host::now) is monotonic per thread and cheap; its unit is the
///   host's own (TSC ticks, nanoseconds). Ages are compared as ratios, so the
///   unit does not matter, but a clock that stands still disables helping.
/// - [`current_processor`](Host::current_processor) returns `Some(p)` exactly
///   on the thread that is running
///   [`Executor::run_processor(p)`](crate::Executor::run_processor) for *this*
///   cluster.
/// - [`park`](Host::park) / [`unpark`](Host::unpark) have token semantics, as
///   `std::thread::park` does: an `unpark` that comes before the `park` makes
///   that `park` return at once. `park` may return spuriously; the core
///   re-checks its own state. Only the processor's own thread calls `park(p)`.
///
/// # Example
/// A host for a single-threaded test, with a counter for a clock:
/// ```
/// use core::sync::atomic::{AtomicU64, Ordering};
/// struct CountingHost(AtomicU64);
/// // SAFETY: no thread ever claims to be a processor.
/// unsafe impl fairlane_core::Host for CountingHost {
///     fn now(&self) -> u64 { self.0.fetch_add(1, Ordering::Relaxed) }
///     fn current_processor(&self) -> Option<usize> { None }
///     fn park(&self, _processor: usize) {}
///     fn unpark(&self, _processor: usize) {}
/// }
/// let host = CountingHost(AtomicU64::new(0));
/// assert!(fairlane_core::Host::now(&host) < fairlane_core::Host::now(&host));
/// ```
pub unsafe trait Host: Send + Sync + 'static {
    /// A monotonic timestamp.
    fn now(&self) -> u64;
    /// The processor of this cluster the calling thread runs, if any.
    fn current_processor(&self) -> Option<usize>;
    /// Blocks processor `processor`'s thread until [`unpark`](Host::unpark)
    /// (or spuriously).
    fn park(&self, processor: usize);
    /// Wakes processor `processor`'s thread, or makes its next `park` return.
    fn unpark(&self, processor: usize);

    /// Called by processor `processor`'s own thread at the top of every
    /// scheduling iteration, before it looks for work: the place for a host
    /// to drain I/O completions and expire timers, waking their tasks (which
    /// then land on this processor's lanes). It must return promptly: the
    /// processor tells sleeping processors about those tasks only after it
    /// returns, and only if it leaves some behind when it takes the next
    /// (`idle.md`, "Pushes between polls"). A host whose `park` waits on
    /// events too should drain them there as well: a wake it causes while
    /// the processor is committed to sleep reaches `unpark` through the idle
    /// protocol, so `park` returns. The default does nothing.
    #[inline]
    fn poll_events(&self, processor: usize) {
        let _ = processor;
    }

    /// Called on processor `processor`'s own thread when it stops for good
    /// (it was removed, or the cluster shut down), after its last poll and
    /// before its slot can be given to a new processor: the place to cancel
    /// and reap the processor's own I/O. The default does nothing.
    fn processor_stopping(&self, processor: usize) {
        let _ = processor;
    }

    /// Asks the host to *watch* processor `processor` from now on (`idle.md`,
    /// "Kept tasks"): to make sure that, should its thread stop scheduling
    /// (a task that never yields, or the OS not running the thread), some
    /// sleeping processor's [`park`](Host::park) returns within a bounded
    /// time and [`look_after_park`](Host::look_after_park) answers true
    /// there, so that it looks for work and takes the tasks left on
    /// `processor`'s lanes. Returns whether the host took on the watch; the
    /// core then leaves those tasks unannounced (it wakes no sleeper for
    /// them) while `processor` keeps up with them. Called on `processor`'s
    /// own thread, for tasks on its lanes, and on a sleeping processor's
    /// thread (inside its `park`), before it hands `processor` the tasks its
    /// own events made ready. The watch lasts until `processor` calls
    /// [`end_watch`](Host::end_watch) (unless tasks were handed to it
    /// since) or parks. The default answers false: every announcement is
    /// made at once.
    ///
    /// # Example
    /// ```
    /// # use core::sync::atomic::{AtomicU64, Ordering};
    /// # struct H(AtomicU64);
    /// unsafe impl fairlane_core::Host for H {
    /// #   fn now(&self) -> u64 { self.0.fetch_add(1, Ordering::Relaxed) }
    /// #   fn current_processor(&self) -> Option<usize> { None }
    /// #   fn park(&self, _: usize) {}
    /// #   fn unpark(&self, _: usize) {}
    ///     // A host with no way to notice a stuck processor: the core wakes
    ///     // a sleeper for every task left on a busy processor's lanes.
    ///     fn keep_watch(&self, _processor: usize) -> bool { false }
    /// }
    /// ```
    #[inline]
    fn keep_watch(&self, processor: usize) -> bool {
        let _ = processor;
        false
    }

    /// Called on processor `processor`'s own thread once the tasks it kept
    /// under the watch are gone from its lanes or announced: the host may
    /// stop watching it for them, unless another processor handed it tasks
    /// (through [`keep_watch`](Host::keep_watch)) since its last call. The
    /// default does nothing.
    #[inline]
    fn end_watch(&self, processor: usize) {
        let _ = processor;
    }

    /// Called on processor `processor`'s own thread after each return of
    /// [`park`](Host::park) that did not end its sleep: true ends the sleep
    /// anyway, so that the processor looks for work. A host that watches
    /// processors ([`keep_watch`](Host::keep_watch)) answers true after a
    /// park in which it found a watched one that stopped scheduling. A
    /// needless true costs one search for work. The default answers false.
    #[inline]
    fn look_after_park(&self, processor: usize) -> bool {
        let _ = processor;
        false
    }

    /// One step of a wait for another thread that holds the processor set
    /// (a resize of the cluster): the default spins; a host with threads
    /// should let others run (`std::thread::yield_now`).
    #[inline]
    fn relax(&self) {
        crate::sync::spin_hint();
    }

    /// The last-level cache processor `processor` runs under, as a small
    /// number; processors with equal numbers share it. Help targets are drawn
    /// among those 15 times in 16. Asked once, when the cluster is built. The
    /// default, one domain for all, suits hosts that do not pin processors to
    /// cores (the std runtime today).
    fn cache_domain(&self, processor: usize) -> usize {
        let _ = processor;
        0
    }

    /// Called on a processor's thread right before it polls a task, with the
    /// waker that poll gets. A host that keeps the waker's address (in a
    /// thread-local) can let a future of that task ask to run again after
    /// this poll without waking the waker, whose wake costs a
    /// read-modify-write of the task's state word: the host recognises the
    /// task's own waker by its address, which no other live waker has while
    /// the poll lasts, and answers true from
    /// [`poll_ended`](Host::poll_ended). The default does nothing.
    ///
    /// # Example
    /// ```
    /// # use core::sync::atomic::{AtomicU64, Ordering};
    /// # struct H(AtomicU64);
    /// unsafe impl fairlane_core::Host for H {
    /// #   fn now(&self) -> u64 { self.0.fetch_add(1, Ordering::Relaxed) }
    /// #   fn current_processor(&self) -> Option<usize> { None }
    /// #   fn park(&self, _: usize) {}
    /// #   fn unpark(&self, _: usize) {}
    ///     // A host that does not keep the waker: every yield wakes it.
    ///     fn poll_started(_waker: &core::task::Waker) {}
    ///     fn poll_ended() -> bool { false }
    /// }
    /// ```
    #[inline]
    fn poll_started(waker: &Waker)
    where
        Self: Sized,
    {
        let _ = waker;
    }

    /// Called on the same thread when that poll has returned (or unwound):
    /// whether a future of the task asked, through the host, to be queued
    /// again, as if its waker had been woken during the poll. The host
    /// forgets the waker here. Answering true for a poll that asked nothing
    /// is harmless (a spurious wake-up); the default answers false.
    #[inline]
    fn poll_ended() -> bool
    where
        Self: Sized,
    {
        false
    }
}
