//! The processor loop's search for work: the fast path, the slow path, a
//! short bounded spin, and idle sleep, in that order.
//!
//! [`Scheduler`] is generic over the queued item so that the loom models run
//! this very code with plain integers; [`Cluster`](crate::Cluster) puts tasks
//! in it.

use alloc::vec::Vec;

use crate::idle::Idle;
use crate::queue::{bump, ReadyQueue, Source};
use crate::sync::{fence, Ordering};
use crate::{Config, ConfigError, Host, Priority, ProcessorCounters};

/// A ready queue, its processors' idle-sleep state, and the host they run on.
///
/// # Example
/// ```
/// # use core::sync::atomic::{AtomicU64, Ordering};
/// # struct H(AtomicU64);
/// # unsafe impl fairlane_core::Host for H {
/// #     fn now(&self) -> u64 { self.0.fetch_add(1, Ordering::Relaxed) }
/// #     fn current_processor(&self) -> Option<usize> { None }
/// #     fn park(&self, _: usize) {}
/// #     fn unpark(&self, _: usize) {}
/// # }
/// use fairlane_core::{Config, Scheduler};
/// let sched = Scheduler::new(Config::new(1), H(AtomicU64::new(0))).unwrap();
/// sched.push("work", None).unwrap();
/// assert_eq!(sched.next(0), Some("work"));
/// sched.close();
/// assert_eq!(sched.next(0), None);
/// ```
pub struct Scheduler<T, H> {
    queue: ReadyQueue<T>,
    idle: Idle,
    host: H,
    spin_rounds: u32,
    clock_period: u64,
}

impl<T, H: Host> Scheduler<T, H> {
    /// Builds the queue and idle state for `config.processors` processors.
    pub fn new(config: Config, host: H) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            queue: ReadyQueue::new(&config, |p| host.cache_domain(p)),
            idle: Idle::new(config.processors),
            host,
            spin_rounds: config.spin_rounds,
            clock_period: u64::from(config.clock_period),
        })
    }

    /// The host this scheduler runs on.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// Number of processors.
    pub fn processors(&self) -> usize {
        self.queue.processors()
    }

    /// Makes `item` ready. On a processor of this scheduler it goes to that
    /// processor's own lanes; from any other thread to a lane of `preferred`,
    /// else of a processor chosen round-robin. Then at most one sleeping
    /// processor is woken. Hands the item back if the scheduler is closed.
    #[inline]
    pub fn push(&self, item: T, preferred: Option<usize>) -> Result<(), T> {
        match self.host.current_processor() {
            Some(p) => self.push_local(p, item, Priority::Normal),
            None => self.push_remote(item, preferred, Priority::Normal),
        }
    }

    /// [`push`](Self::push) from processor `p`'s own thread, into the lanes
    /// of `priority`.
    #[inline]
    pub fn push_local(&self, p: usize, item: T, priority: Priority) -> Result<(), T> {
        self.queue.push_local(p, item, priority)?;
        self.notify_after_push();
        Ok(())
    }

    /// [`push`](Self::push) from a thread that is not a processor, into the
    /// lanes of `priority`.
    pub fn push_remote(
        &self,
        item: T,
        preferred: Option<usize>,
        priority: Priority,
    ) -> Result<(), T> {
        self.queue
            .push_remote(preferred, item, self.host.now(), priority)?;
        self.notify_after_push();
        Ok(())
    }

    /// Waker side of the idle handshake (idle.md): the push is complete (its
    /// lane lock released) before this fence; the published sleeper is read
    /// after it.
    #[inline]
    fn notify_after_push(&self) {
        fence(Ordering::SeqCst);
        self.idle.notify_one(&self.host);
    }

    /// The next item for processor `p`, sleeping while there is none.
    /// Returns `None` once the scheduler is closed.
    pub fn next(&self, p: usize) -> Option<T> {
        let local = &self.queue.local[p];
        let mut spins = 0;
        // Set after leaving the idle list: the next item found obliges us to
        // wake another sleeper if still more work is visible (idle.md, the
        // hand-over rule).
        let mut handing_over = false;
        // The first round of a call may reuse the clock read of an earlier
        // iteration (see `Config::clock_period`); a round after one that found
        // nothing always reads it afresh.
        let mut may_reuse_clock = true;
        loop {
            let iteration = bump(&local.counters.iterations);
            let now = if may_reuse_clock && iteration % self.clock_period != 0 {
                local.now.load(Ordering::Relaxed)
            } else {
                let now = self.host.now();
                local.now.store(now, Ordering::Relaxed);
                now
            };
            may_reuse_clock = false;
            if self.queue.is_closed() || local.released.load(Ordering::Acquire) {
                return None;
            }
            self.host.poll_events(p);
            if let Some(found) = self.queue.pop(p, now).or_else(|| self.queue.steal(p, now)) {
                return Some(self.found(p, found, handing_over));
            }
            if spins < self.spin_rounds {
                spins += 1;
                for _ in 0..64 {
                    crate::sync::spin_hint();
                }
                continue;
            }

            // Idle sleep, sleeper side (idle.md, steps 1-4).
            self.idle.publish(p);
            fence(Ordering::SeqCst);
            let found = if self.queue.is_closed() {
                None
            } else {
                self.queue.final_scan(p, now)
            };
            if found.is_none()
                && !self.queue.is_closed()
                && !local.released.load(Ordering::Acquire)
                && self.idle.commit(p)
            {
                bump(&local.counters.parks);
                self.idle.sleep(p, &self.host);
                bump(&local.counters.wakeups);
            }
            self.idle.reset(p);
            self.idle.retract(p);
            fence(Ordering::SeqCst);
            if let Some(found) = found {
                return Some(self.found(p, found, true));
            }
            handing_over = true;
            spins = 0;
        }
    }

    #[inline]
    fn found(&self, p: usize, (item, source): (T, Source), handing_over: bool) -> T {
        let counters = &self.queue.local[p].counters;
        match source {
            Source::Own => {}
            Source::Help => {
                bump(&counters.helps);
            }
            Source::Steal => {
                bump(&counters.steals);
            }
        }
        if handing_over && self.queue.any_visible() {
            self.idle.notify_one(&self.host);
        }
        item
    }

    /// Records that processor `p` polled a task.
    #[inline]
    pub fn count_poll(&self, p: usize) {
        bump(&self.queue.local[p].counters.polls);
    }

    /// Closes the scheduler: later pushes hand their item back, and every
    /// processor returns `None` from [`next`](Self::next) (sleepers are woken).
    pub fn close(&self) {
        self.queue.close();
        for p in 0..self.processors() {
            self.idle.wake(p, &self.host);
        }
    }

    /// Makes the thread running processor `p` return `None` from
    /// [`next`](Self::next) (after the poll it is in), waking it if it
    /// sleeps; another thread can then run `p`. Same handshake as `close`:
    /// the flag is set before the `sem` swap that wakes, and the sleeper
    /// checks it after the `sem` read-modify-write that woke it (idle.md).
    pub fn release(&self, p: usize) {
        self.queue.local[p].released.store(true, Ordering::Release);
        self.idle.wake(p, &self.host);
    }

    /// Clears [`release`](Self::release) once the released thread has
    /// returned, so that `p` can run again.
    pub fn reclaim(&self, p: usize) {
        self.queue.local[p].released.store(false, Ordering::Release);
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// Removes every queued item. After `close`, nothing is queued later.
    pub fn drain(&self) -> Vec<T> {
        self.queue.drain()
    }

    /// A snapshot of processor `p`'s counters.
    pub fn counters(&self, p: usize) -> ProcessorCounters {
        let c = &self.queue.local[p].counters;
        let get = |a: &crate::sync::AtomicU64| a.load(Ordering::Relaxed);
        ProcessorCounters {
            iterations: get(&c.iterations),
            polls: get(&c.polls),
            parks: get(&c.parks),
            wakeups: get(&c.wakeups),
            helps: get(&c.helps),
            steals: get(&c.steals),
        }
    }
}
