//! The runtime's clock: real time, or a virtual clock for tests
//! ([`pause`], [`resume`], [`advance`], `Builder::start_paused`), shared by
//! every processor's timer wheel in every cluster of the runtime.
//!
//! The clock counts from one epoch for all the runtime's drivers, so a
//! tick (a millisecond since the epoch) means the same on every wheel. While
//! the clock has never left real time, reading it costs one relaxed load of
//! a flag (`shifted`) before the monotonic clock. Paused, it stands still;
//! [`advance`] moves it, and so does *auto-advance*: when the whole runtime
//! is idle, it jumps to the earliest timer. How the idle check decides, and
//! why it cannot advance while work is runnable or I/O is in flight, is in
//! `clock.md` beside this file.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use super::idle_check::{idle_check, Activity, IdleScan, IdleView};
use crate::io::driver::Driver;
use crate::runtime::ExecutorRef;

/// Clocks (runtimes) that have left real time, in the whole process: while
/// none has, [`crate::time::Instant::now`] reads the monotonic clock after
/// one relaxed load of this word.
static SHIFTED_CLOCKS: AtomicUsize = AtomicUsize::new(0);

/// `Clock::holds`: one hold taken (the high half) and the mask of holds
/// held now (the low half).
const HOLD_TAKEN: u64 = 1 << 32;
const HELD: u64 = HOLD_TAKEN - 1;

/// Where the clock stands.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// The monotonic clock.
    Real,
    /// Standing still at this instant.
    Paused(std::time::Instant),
    /// Flowing again since real instant `since`, from virtual instant `at`.
    Resumed {
        at: std::time::Instant,
        since: std::time::Instant,
    },
}

/// One runtime's clock (see the module documentation).
pub(crate) struct Clock {
    /// Whether the clock has ever left real time. Only ever set, under
    /// `mode`'s lock; read Relaxed on the timer path as a hint (`now_tick`):
    /// a thread that has not seen it yet reads real time, a moment's
    /// difference documented at [`pause`].
    shifted: AtomicBool,
    /// Whether the clock is paused now (a hint for `park`, which asks
    /// `auto_advance` only then; `auto_advance` looks again under the lock).
    paused: AtomicBool,
    /// Tick 0 of every wheel of the runtime.
    epoch: std::time::Instant,
    mode: Mutex<Mode>,
    /// One auto-advance decision at a time (clock.md, "Auto-advance").
    deciding: Mutex<()>,
    /// Holds: threads outside the processors that may make work now
    /// (`block_on` threads while they poll or have been woken,
    /// blocking-pool jobs, `block_in_place` closures), in the low 32 bits;
    /// auto-advance waits for zero. The high 32 bits count holds taken
    /// (wrapping), the idle check's witness that none was taken while it
    /// looked. One word, so that a hold costs one read-modify-write to
    /// take and one to give back.
    holds: AtomicU64,
    /// The runtime's clusters, set once they are built (weak: the clusters
    /// own their drivers, which hold this clock).
    clusters: OnceLock<Vec<Weak<fairlane_core::Executor<crate::host::StdHost>>>>,
}

impl Clock {
    /// A clock counting from now, paused at once if `start_paused`.
    pub(crate) fn new(start_paused: bool) -> Arc<Clock> {
        let epoch = std::time::Instant::now();
        let clock = Arc::new(Clock {
            shifted: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            epoch,
            mode: Mutex::new(Mode::Real),
            deciding: Mutex::new(()),
            holds: AtomicU64::new(0),
            clusters: OnceLock::new(),
        });
        if start_paused {
            let mut mode = clock.lock();
            clock.pause_locked(&mut mode, epoch);
        }
        clock
    }

    /// The runtime's clusters, for auto-advance. Called once, before any
    /// processor starts.
    pub(crate) fn attach(&self, clusters: &[ExecutorRef]) {
        let _ = self
            .clusters
            .set(clusters.iter().map(Arc::downgrade).collect());
    }

    fn lock(&self) -> MutexGuard<'_, Mode> {
        // Poisoning: `Mode` is a plain value, consistent whatever panicked.
        self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tick 0 of the runtime's wheels.
    pub(crate) fn epoch(&self) -> std::time::Instant {
        self.epoch
    }

    /// The current time.
    pub(crate) fn now(&self) -> std::time::Instant {
        if !self.shifted.load(Ordering::Relaxed) {
            return std::time::Instant::now();
        }
        Self::now_in(*self.lock())
    }

    fn now_in(mode: Mode) -> std::time::Instant {
        match mode {
            Mode::Real => std::time::Instant::now(),
            Mode::Paused(at) => at,
            Mode::Resumed { at, since } => at + since.elapsed(),
        }
    }

    /// Milliseconds since the epoch, rounded down: the wheels' "now".
    #[inline]
    pub(crate) fn now_tick(&self) -> u64 {
        // The one load real time costs on the timer path.
        if !self.shifted.load(Ordering::Relaxed) {
            return self.epoch.elapsed().as_millis() as u64;
        }
        self.tick_of(self.now())
    }

    fn tick_of(&self, instant: std::time::Instant) -> u64 {
        instant.saturating_duration_since(self.epoch).as_millis() as u64
    }

    fn instant_of(&self, tick: u64) -> std::time::Instant {
        self.epoch
            .checked_add(Duration::from_millis(tick))
            .unwrap_or_else(|| std::time::Instant::now() + Duration::from_secs(86_400 * 365))
    }

    /// How long a sleeping processor waits, in real time, for tick `tick`
    /// to come: `None` while paused (only `advance` and auto-advance move
    /// a paused clock).
    pub(crate) fn real_wait_until(&self, tick: u64) -> Option<Duration> {
        let deadline = self.instant_of(tick);
        if !self.shifted.load(Ordering::Relaxed) {
            return Some(deadline.saturating_duration_since(std::time::Instant::now()));
        }
        match *self.lock() {
            Mode::Paused(_) => None,
            mode => Some(deadline.saturating_duration_since(Self::now_in(mode))),
        }
    }

    /// Whether the clock is paused (a hint, see `paused`).
    pub(crate) fn is_paused_hint(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    fn pause_locked(&self, mode: &mut Mode, at: std::time::Instant) {
        *mode = Mode::Paused(at);
        self.paused.store(true, Ordering::Relaxed);
        if !self.shifted.swap(true, Ordering::Relaxed) {
            SHIFTED_CLOCKS.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `pause`: stands still at the next whole millisecond of the runtime's
    /// clock (less than 1 ms ahead, so it never goes back), where timers
    /// and the clock agree to the tick.
    fn pause(&self) -> Result<(), &'static str> {
        let mut mode = self.lock();
        if let Mode::Paused(_) = *mode {
            return Err("fairlane::time::pause: the clock is already paused");
        }
        let now = Self::now_in(*mode);
        let since = now.saturating_duration_since(self.epoch);
        let mut tick = since.as_millis() as u64;
        if since > Duration::from_millis(tick) {
            tick += 1;
        }
        let at = self.instant_of(tick).max(now);
        self.pause_locked(&mut mode, at);
        Ok(())
    }

    fn resume(&self) -> Result<(), &'static str> {
        {
            let mut mode = self.lock();
            let Mode::Paused(at) = *mode else {
                return Err("fairlane::time::resume: the clock is not paused");
            };
            *mode = Mode::Resumed {
                at,
                since: std::time::Instant::now(),
            };
            self.paused.store(false, Ordering::Relaxed);
        }
        // Sleeping processors wait without a timeout while paused: wake
        // them to wait until their timers again.
        self.for_each_driver(|driver| driver.notify_all());
        Ok(())
    }

    fn advance(&self, duration: Duration) -> Result<(), &'static str> {
        let tick = {
            let mut mode = self.lock();
            let Mode::Paused(at) = *mode else {
                return Err("fairlane::time::advance: the clock is not paused");
            };
            let to = at
                .checked_add(duration)
                .ok_or("fairlane::time::advance: the instant cannot be represented")?;
            *mode = Mode::Paused(to);
            self.tick_of(to)
        };
        self.for_each_driver(|driver| driver.notify_due(tick));
        Ok(())
    }

    /// Auto-advance: moves a paused clock to tick `tick` if it stands
    /// before it; false if it is no longer paused.
    fn advance_to(&self, tick: u64) -> bool {
        let mut mode = self.lock();
        let Mode::Paused(at) = *mode else {
            return false;
        };
        let to = self.instant_of(tick);
        if to > at {
            *mode = Mode::Paused(to);
        }
        true
    }

    fn for_each_driver(&self, mut f: impl FnMut(&Driver)) {
        for cluster in self.clusters.get().into_iter().flatten() {
            if let Some(cluster) = cluster.upgrade() {
                f(cluster.host().io());
            }
        }
    }

    /// A hold: while it lives, the clock does not auto-advance.
    pub(crate) fn hold(self: &Arc<Self>) -> Hold {
        self.take_hold();
        Hold {
            clock: self.clone(),
        }
    }

    /// Counts a hold (for `block_on`'s waker, which hands it over).
    pub(crate) fn take_hold(&self) {
        // SeqCst: the idle check reads the count of holds taken before and
        // after it looks (clock.md, "Auto-advance").
        self.holds.fetch_add(HOLD_TAKEN | 1, Ordering::SeqCst);
    }

    /// Gives a hold back; the last one gone lets the clock auto-advance,
    /// decided here (the runtime may have been idle, waiting for it).
    pub(crate) fn release_hold(&self) {
        // Release: what the holder did (a timer set, a task spawned) is
        // seen by the idle check that reads zero here (Acquire).
        let before = self.holds.fetch_sub(1, Ordering::Release);
        if before & HELD == 1 && self.is_paused_hint() {
            self.auto_advance();
        }
    }

    /// Auto-advance (clock.md, "Auto-advance"): if the whole runtime is idle,
    /// moves a paused clock to the earliest timer and wakes its processor.
    /// Called by a processor about to sleep, and by the thread giving back
    /// the last hold.
    pub(crate) fn auto_advance(&self) {
        if !self.is_paused_hint() {
            return;
        }
        let _one = self.deciding.lock().unwrap_or_else(|e| e.into_inner());
        let Some(weak) = self.clusters.get() else {
            return;
        };
        let Some(clusters) = weak.iter().map(Weak::upgrade).collect::<Option<Vec<_>>>() else {
            return; // shutting down
        };
        let Some(earliest) = idle_check(&RuntimeView {
            clock: self,
            clusters: &clusters,
        }) else {
            return;
        };
        if earliest > self.now_tick() && !self.advance_to(earliest) {
            return; // resumed meanwhile
        }
        // Due timers, the ones just reached or any not fired yet: their
        // owners fire them (a parked owner's engine is its own).
        let tick = self.now_tick();
        for cluster in &clusters {
            cluster.host().io().notify_due(tick);
        }
    }
}

/// The runtime as the idle check reads it.
struct RuntimeView<'a> {
    clock: &'a Clock,
    clusters: &'a [ExecutorRef],
}

impl IdleView for RuntimeView<'_> {
    fn activity(&self) -> Activity {
        let mut activity = Activity {
            holds_taken: self.clock.holds.load(Ordering::SeqCst) >> 32,
            ..Activity::default()
        };
        for cluster in self.clusters {
            cluster.host().io().add_marks(&mut activity);
        }
        activity
    }

    fn all_asleep(&self) -> bool {
        self.clusters.iter().all(|cluster| {
            cluster
                .host()
                .io()
                .live_processors()
                .into_iter()
                .all(|p| cluster.is_asleep(p))
        })
    }

    fn holds(&self) -> usize {
        // Acquire: pairs with `release_hold`.
        (self.clock.holds.load(Ordering::Acquire) & HELD) as usize
    }

    fn scan_engines(&self, scan: &mut IdleScan) -> bool {
        self.clusters
            .iter()
            .all(|cluster| cluster.host().io().idle_scan(scan))
    }
}

impl Drop for Clock {
    fn drop(&mut self) {
        if *self.shifted.get_mut() {
            SHIFTED_CLOCKS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A hold on the clock (see [`Clock::hold`]); given back when dropped.
pub(crate) struct Hold {
    clock: Arc<Clock>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.clock.release_hold();
    }
}

/// The clock of the runtime this thread is in, if any.
fn current_clock() -> Option<Arc<Clock>> {
    crate::runtime::context::with_current(|h| h.clock().clone())
}

/// Whether any runtime's clock has left real time (one relaxed load).
#[inline]
pub(crate) fn any_shifted() -> bool {
    SHIFTED_CLOCKS.load(Ordering::Relaxed) != 0
}

/// The current runtime's time, if this thread is in a runtime.
pub(crate) fn current_now() -> Option<std::time::Instant> {
    crate::runtime::context::with_current(|h| h.clock().now())
}

#[track_caller]
fn current_or_panic(what: &str) -> Arc<Clock> {
    current_clock().unwrap_or_else(|| {
        panic!(
            "fairlane::time::{what} was called outside a fairlane runtime: call it inside a task \
             or Runtime::block_on (or build the runtime with Builder::start_paused(true))"
        )
    })
}

/// Pauses the current runtime's clock: [`Instant::now`](super::Instant::now)
/// stands still from here, and timers fire only when [`advance`] moves it,
/// or by *auto-advance*: when the whole runtime is idle, the clock jumps to
/// the earliest timer at once, so that `sleep(Duration::from_secs(3600))`
/// completes without waiting. For tests, as tokio's `time::pause`.
///
/// The clock is the runtime's: it stands still for every processor of every
/// cluster, and for every thread inside the runtime (tasks, `block_on`,
/// blocking closures); `std::time::Instant` and other runtimes are not
/// affected. It pauses at the next whole millisecond of the runtime's clock
/// (less than 1 ms ahead): timers count in milliseconds, so a paused clock
/// moved by whole milliseconds meets their deadlines exactly.
///
/// The runtime is idle when every processor sleeps with nothing to run, no
/// I/O operation is in flight (a read, accept or readiness wait on a socket
/// counts, even one whose peer is silent), no blocking closure
/// (`spawn_blocking`, `block_in_place`) runs, and no `block_on` thread is
/// polling. A silent socket therefore stops the clock: move it with
/// [`advance`]. (tokio also auto-advances while socket I/O waits; here a
/// completion may still be on its way from the kernel to another
/// processor, and a timeout would fire ahead of it.)
///
/// Called while other tasks run on other processors, the pause reaches
/// their threads a moment later: a read of the clock there in that moment
/// may see real time, up to that moment later than the paused instant. To
/// pause before anything runs, build the runtime with
/// `Builder::start_paused(true)` or use `#[fairlane::test(start_paused =
/// true)]`.
///
/// # Panics
/// Outside a fairlane runtime, or if the clock is already paused (as
/// tokio's; these are test tools, where misuse is a bug in the test).
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::{self, Instant};
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     time::pause();
///     let start = Instant::now();
///     time::sleep(Duration::from_secs(3600)).await; // at once
///     assert_eq!(Instant::now() - start, Duration::from_secs(3600));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn pause() {
    let clock = current_or_panic("pause");
    if let Err(message) = clock.pause() {
        panic!("{message}");
    }
}

/// Lets the current runtime's clock flow again, from the instant where it
/// stands (not from real time: after `advance(1h)` it stays an hour ahead
/// of `std::time::Instant`), as tokio's `time::resume`.
///
/// # Panics
/// Outside a fairlane runtime, or if the clock is not paused.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::{self, Instant};
/// let rt = fairlane::Runtime::builder().processors(1).start_paused(true).build()?;
/// rt.block_on(async {
///     let start = Instant::now();
///     time::advance(Duration::from_secs(60)).await;
///     time::resume();
///     time::sleep(Duration::from_millis(1)).await; // real time again
///     assert!(Instant::now() - start > Duration::from_secs(60));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn resume() {
    let clock = current_or_panic("resume");
    if let Err(message) = clock.resume() {
        panic!("{message}");
    }
}

/// Moves the current runtime's paused clock `duration` ahead in one jump;
/// every timer due by then fires (in any order), on the processor that
/// holds it.
///
/// On a current-thread runtime (tokio's paused clock serves only those),
/// it returns once every timer that became due has fired and the tasks
/// they woke have run, with the tasks queued before them: after
/// `advance(d).await`, a sleep that became due is elapsed, the waker it
/// registered has been woken, and a task waiting on it has gone on. On a
/// multi-thread runtime each processor fires its own timers at the top of
/// its next scheduling iteration: the calling task yields twice, which
/// usually lets its processor's timers fire and their tasks run first, but
/// timers held by other processors fire when those look (tokio's
/// `advance` does not wait for the sleeps it advanced past either); to
/// wait for one of those, await it.
///
/// On each processor, the tasks of the timers the advance made due run
/// before tasks woken by that processor's socket I/O from then on, on both
/// I/O backends: a request sent after `advance` to a server whose expiry
/// timer it passed finds the expiry done (`clock.md`, "Due timers before
/// ready I/O").
///
/// # Panics
/// Outside a fairlane runtime, if the clock is not paused, or if the
/// instant cannot be represented.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::{self, Instant};
/// let rt = fairlane::runtime::Builder::new_current_thread().start_paused(true).build()?;
/// rt.block_on(async {
///     let start = Instant::now();
///     let sleeper = fairlane::spawn(time::sleep(Duration::from_secs(5)));
///     fairlane::yield_now().await; // the sleeper sets its timer
///     time::advance(Duration::from_secs(10)).await;
///     assert!(sleeper.is_finished()); // woken, and run
///     assert_eq!(Instant::now() - start, Duration::from_secs(10));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn advance(duration: Duration) {
    let clock = current_or_panic("advance");
    if let Err(message) = clock.advance(duration) {
        panic!("{message}");
    }
    // A processor looks at its timers at the top of each scheduling
    // iteration. After the first yield it has (with the new time, and the
    // tasks they woke are queued behind this one); after the second, those
    // tasks have run. (In a current-thread `block_on`, each yield lets the
    // tasks queued by then run before the future is polled again.)
    crate::task::yield_now().await;
    crate::task::yield_now().await;
}
