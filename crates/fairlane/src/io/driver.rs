//! The I/O driver: one engine per processor (an io_uring instance, or a
//! readiness poller in the fallback backend) and one timer wheel per
//! processor, all behind the processor's lock, plus the hooks the host calls
//! (`poll_events`, `park`, `unpark`).
//!
//! The protocols (who reaps, who may submit, how a sleeping processor is
//! woken, how a dropped operation keeps its memory) are explained in
//! `driver.md` beside this file.
//!
//! The parts, one file each in `driver/`: `submit` (the submission thread
//! and flushing), `park` (the futex-or-engine sleep and its wake-up),
//! `rescue` (draining a stuck processor's engine, and the watch handshake),
//! `timers` (the per-processor wheels, and what the runtime's clock asks of
//! the drivers) and `stop` (a processor stopping, its work moving to
//! another engine).

mod park;
mod rescue;
mod stop;
mod submit;
mod timers;

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::task::Waker;
use std::time::Instant;

use slab::Slab;

use self::rescue::{resumed, RESCUE_PERIOD};
use self::submit::{is_stable_thread, SubmitThread};
pub(crate) use self::submit::{mark_stable_thread, FLUSH_THRESHOLD};
use super::reactor::FdState;
use super::sleep::{SleepState, Unwatched, Work, NO_TIMER};
use super::uring::{self, OpSlot};
use super::IoBackend;
use crate::task::coop;
use crate::time::clock::Clock;
use crate::time::idle_check::EngineMarks;
use fairlane_core::wheel::Wheel;

/// In the fallback backend, a busy processor polls its poller without
/// waiting every this many iterations (a system call each time).
const POLL_PERIOD: u32 = 16;

static NEXT_DRIVER_ID: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// The processor this thread runs, as the driver sees it.
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
    /// `CURRENT`'s driver id and engine as plain values for the per-iteration
    /// hook (no borrow flag, no destructor check); the engine is kept alive
    /// by `CURRENT`, and both are set and cleared together.
    static CURRENT_RAW: Cell<(usize, *const ProcessorIo)> = const { Cell::new((0, std::ptr::null())) };
}

struct Current {
    driver: usize,
    proc: Arc<ProcessorIo>,
}

/// The runtime's I/O driver. Held by the host; every I/O object keeps an
/// `Arc` to it.
pub(crate) struct Driver {
    id: usize,
    backend: IoBackend,
    /// The runtime's clock (shared by its clusters' drivers); tick 0 of
    /// the wheels is its epoch.
    clock: Arc<Clock>,
    epoch: Instant,
    /// Per-processor engines, indexed by processor; grows when a processor
    /// registers with an index not seen before.
    procs: RwLock<Vec<Arc<ProcessorIo>>>,
    /// Round-robin choice of a ring for threads that are not processors.
    foreign: AtomicUsize,
    /// Bumped (under the write lock) whenever `procs` changes: see
    /// `RESCUE_SNAPSHOT`.
    procs_version: AtomicU64,
    shut_down: AtomicBool,
    submit_thread: Arc<SubmitThread>,
    /// The processors that sleep watching nobody (the watch handshake,
    /// driver.md "The watch handshake").
    unwatched: Unwatched,
    /// This driver, for its engines (`ProcessorIo::driver`).
    me: Weak<Driver>,
}

/// One processor's engine, timers and outstanding operations.
pub(crate) struct ProcessorIo {
    pub(super) index: usize,
    pub(super) engine: Engine,
    /// The driver: operations and registrations of a removed processor move
    /// to another of its engines (not a strong reference: the driver owns
    /// its engines).
    pub(super) driver: Weak<Driver>,
    state: Mutex<State>,
    /// Whether the owner is parked, until when, on which wait: written by
    /// the owner under the lock, read by wakers, timer adders and rescuers
    /// (driver.md, "Sleeping").
    sleep: SleepState,
    /// The wake-up token of a wait `ON_FUTEX`: 1 when a wake is pending.
    futex: AtomicU32,
    /// Operations in the slab plus registered descriptors, and the earliest
    /// timer: written under the lock, read without it to keep `poll_events`
    /// cheap, and by the watch handshake.
    work: Work,
    /// What the paused clock's idle check reads (time/clock.md).
    marks: EngineMarks,
    /// Submissions pushed but not yet handed to the kernel.
    unflushed: AtomicU32,
    /// I/O wakers of a look that also fired timers wait in
    /// `State::deferred_wakers` for the owner's next look (time/clock.md,
    /// "Due timers before ready I/O"): set under the lock, read without it
    /// by `poll_events` as a hint (the next look takes them under the lock).
    deferred: AtomicBool,
    /// The owner's scheduling iterations, published every RESCUE_PERIOD of
    /// them (rescuers compare; see `poll_own`).
    iterations: AtomicU64,
    submit_thread: Arc<SubmitThread>,
}

// One per processor, never moved: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Engine {
    Uring(uring::Ring),
    Poll(super::reactor::Poller),
}

/// What the processor's lock guards. The backends' own tables are theirs
/// (`ops` and `sq_log`: `uring/`; `fds`: `reactor.rs`); the rest is the
/// driver's, which the backends read and change through `State`'s methods,
/// each one step that keeps those words consistent.
pub(crate) struct State {
    pub(super) ops: Slab<OpSlot>,
    pub(super) fds: Slab<Arc<FdState>>,
    wheel: Wheel,
    /// `unflushed` as the previous `poll_events` saw it (the batching rule).
    unflushed_seen: u32,
    /// The eventfd read that lets `unpark` wake a ring is in flight.
    wake_armed: bool,
    /// The last attempt to arm it failed (logged once per failure run).
    wake_arm_failed: bool,
    /// Someone reaped a wake-up (`unpark`) that `park` has not consumed.
    woken: bool,
    /// Wakers collected where they could not be woken yet.
    pending_wakers: Vec<Waker>,
    /// I/O wakers of the owner's last look, which fired timers: woken by
    /// its next look (`Driver::look`), by a rescuer, or when the engine
    /// stops, and by nobody else, so that no other path wakes them ahead
    /// of the timers' tasks.
    deferred_wakers: Vec<Waker>,
    stopped: bool,
    /// The ring's published entries and whether it broke (`uring::SqLog`).
    pub(super) sq_log: uring::SqLog,
}

impl Driver {
    /// A driver for `processors` processors on `backend`, with a clock of
    /// its own.
    #[cfg(test)]
    pub(crate) fn new(backend: IoBackend, processors: usize) -> io::Result<Arc<Driver>> {
        Self::with_clock(backend, processors, Clock::new(false))
    }

    /// A driver for `processors` processors on `backend`, timed by `clock`.
    pub(crate) fn with_clock(
        backend: IoBackend,
        processors: usize,
        clock: Arc<Clock>,
    ) -> io::Result<Arc<Driver>> {
        let id = NEXT_DRIVER_ID.fetch_add(1, Ordering::Relaxed);
        let driver = Arc::new_cyclic(|me| Driver {
            me: me.clone(),
            id,
            backend,
            epoch: clock.epoch(),
            clock,
            procs: RwLock::new(Vec::new()),
            foreign: AtomicUsize::new(0),
            procs_version: AtomicU64::new(1),
            shut_down: AtomicBool::new(false),
            unwatched: Unwatched::new(),
            submit_thread: Arc::new(SubmitThread::new()),
        });
        for p in 0..processors.max(1) {
            driver.ensure(p)?;
        }
        Ok(driver)
    }

    pub(crate) fn backend(&self) -> IoBackend {
        self.backend
    }

    fn procs(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<ProcessorIo>>> {
        self.procs.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Processor `p`'s engine, created if `p` is new — or if the processor
    /// that held slot `p` before was removed (its engine stopped): a new
    /// processor in a reused slot gets an engine of its own.
    fn ensure(&self, p: usize) -> io::Result<Arc<ProcessorIo>> {
        if let Some(proc) = self.procs().get(p) {
            if !proc.lock().stopped || self.shut_down.load(Ordering::Acquire) {
                return Ok(proc.clone());
            }
        }
        let mut procs = self.procs.write().unwrap_or_else(|e| e.into_inner());
        while procs.len() <= p {
            let proc = self.new_proc(procs.len())?;
            procs.push(proc);
        }
        if procs[p].lock().stopped && !self.shut_down.load(Ordering::Acquire) {
            procs[p] = self.new_proc(p)?;
        }
        self.procs_version.fetch_add(1, Ordering::Release);
        Ok(procs[p].clone())
    }

    /// A fresh engine for slot `index`.
    fn new_proc(&self, index: usize) -> io::Result<Arc<ProcessorIo>> {
        let engine = match self.backend {
            IoBackend::IoUring => Engine::Uring(uring::Ring::new().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot set up the io_uring ring of processor {index}: {e}"),
                )
            })?),
            IoBackend::Fallback => Engine::Poll(super::reactor::Poller::new()?),
        };
        let proc = Arc::new(ProcessorIo {
            index,
            engine,
            driver: self.me.clone(),
            state: Mutex::new(State {
                ops: Slab::new(),
                fds: Slab::new(),
                wheel: Wheel::new(),
                unflushed_seen: 0,
                wake_armed: false,
                wake_arm_failed: false,
                woken: false,
                pending_wakers: Vec::new(),
                deferred_wakers: Vec::new(),
                stopped: false,
                sq_log: uring::SqLog::default(),
            }),
            sleep: SleepState::new(),
            futex: AtomicU32::new(0),
            work: Work::new(),
            marks: EngineMarks::default(),
            unflushed: AtomicU32::new(0),
            deferred: AtomicBool::new(false),
            iterations: AtomicU64::new(0),
            submit_thread: self.submit_thread.clone(),
        });
        if let Engine::Uring(ring) = &proc.engine {
            // Published only: the processor's first flush (or the
            // submission thread, for a foreign submission before that)
            // hands it to the kernel.
            let mut st = proc.lock();
            ring.arm_wake(&proc, &mut st)?;
        }
        // By index: a slot reused after a removal gets a new engine, which
        // replaces the stopped one here too.
        self.submit_thread.set_engine(index, &proc);
        Ok(proc)
    }

    /// Sets up the engine of processor `p`, just added to the cluster,
    /// before its thread starts (which then finds it): from then on work
    /// moving off a processor that stops can go to `p`'s engine
    /// (`live_proc`), even if `p`'s thread has not run yet. Without it, a
    /// processor removed right after another was added could find no live
    /// engine but its own. Creating it submits nothing (its wake-up read is
    /// only published), so no completion belongs to the calling thread.
    /// Failing here is not final: `p`'s thread tries again.
    pub(crate) fn prepare(&self, p: usize) {
        if let Err(e) = self.ensure(p) {
            tracing::debug!(processor = p, error = %e, "engine not set up before the processor's thread");
        }
    }

    /// The calling thread runs processor `p` from now on.
    pub(crate) fn register_current(&self, p: usize) {
        match self.ensure(p) {
            Ok(proc) => {
                CURRENT_RAW.with(|r| r.set((self.id, Arc::as_ptr(&proc))));
                CURRENT.with(|c| {
                    *c.borrow_mut() = Some(Current {
                        driver: self.id,
                        proc,
                    })
                });
                coop::reset();
            }
            Err(e) => {
                // Without an engine the processor still runs tasks; its I/O
                // goes through another processor's ring, and its park
                // falls back to a timed thread park (see `park`).
                tracing::error!(processor = p, error = %e, "fairlane processor has no I/O engine");
            }
        }
    }

    /// The calling thread no longer runs a processor.
    pub(crate) fn unregister_current(&self) {
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            if c.as_ref().is_some_and(|c| c.driver == self.id) {
                CURRENT_RAW.with(|r| r.set((0, std::ptr::null())));
                *c = None;
            }
        });
        coop::clear();
    }

    /// The processor engine of the calling thread, if it is one of ours
    /// (none while the thread's locals are being destroyed: a runtime kept
    /// in a thread-local is dropped then).
    pub(crate) fn current(&self) -> Option<Arc<ProcessorIo>> {
        CURRENT
            .try_with(|c| {
                c.borrow()
                    .as_ref()
                    .filter(|c| c.driver == self.id)
                    .map(|c| c.proc.clone())
            })
            .ok()
            .flatten()
    }

    /// An error once the runtime that owns this driver has shut down.
    pub(crate) fn check_live(&self) -> io::Result<()> {
        if self.shut_down.load(Ordering::Acquire) {
            Err(shut_down_error())
        } else {
            Ok(())
        }
    }

    /// Where an operation started on this thread goes: the calling
    /// processor's own engine (`true`), or for other threads one chosen
    /// round-robin (`false`), used under its lock.
    pub(crate) fn target(&self) -> io::Result<(Arc<ProcessorIo>, bool)> {
        self.check_live()?;
        if let Some(proc) = self.current() {
            return Ok((proc, true));
        }
        // One whose ring broke only if every other did too (its operations
        // then fail with the error that broke it).
        let procs = self.procs();
        let n = procs.len();
        let start = self.foreign.fetch_add(1, Ordering::Relaxed);
        let live = |p: &&Arc<ProcessorIo>| !p.lock().stopped;
        let order = || (0..n).map(|i| &procs[(start + i) % n]);
        order()
            .filter(|p| !p.ring_broken())
            .find(live)
            .or_else(|| order().find(live))
            .map(|p| (p.clone(), false))
            .ok_or_else(shut_down_error)
    }

    /// An engine that has not stopped and whose ring did not break, other
    /// than `except`, for what moves off a stopping processor (or a broken
    /// ring): round-robin from the last one chosen.
    pub(crate) fn live_proc(&self, except: usize) -> io::Result<Arc<ProcessorIo>> {
        self.check_live()?;
        let procs = self.procs();
        let n = procs.len();
        let start = self.foreign.fetch_add(1, Ordering::Relaxed);
        (0..n)
            .map(|i| &procs[(start + i) % n])
            .find(|p| p.index != except && !p.ring_broken() && !p.lock().stopped)
            .cloned()
            .ok_or_else(shut_down_error)
    }

    /// Host hook: top of processor `p`'s scheduling iteration.
    #[inline]
    pub(crate) fn poll_events(&self, p: usize) {
        coop::reset();
        let (driver, proc) = CURRENT_RAW.with(Cell::get);
        if driver == self.id && !proc.is_null() {
            // SAFETY: `CURRENT` holds an `Arc` of this engine for as long as
            // `CURRENT_RAW` names it (set and cleared together, on this
            // thread), and nothing below registers or unregisters.
            let proc = unsafe { &*proc };
            debug_assert_eq!(proc.index, p);
            let iteration = proc.count_iteration();
            // Most iterations of a busy processor find nothing to do here:
            // those cost these few loads, without a call.
            let engine_due = proc.engine_due(iteration);
            if engine_due
                || proc.work.next_timer() != NO_TIMER
                || proc.deferred.load(Ordering::Relaxed)
                || iteration % u64::from(RESCUE_PERIOD) == 0
                || resumed()
            {
                self.poll_own(proc, iteration, engine_due);
            }
        }
    }

    /// `poll_events` of this thread's own engine, at its `iteration`, when
    /// its engine is due (`engine_due`), it has a timer, it resumes from a
    /// park, or a rescue look is due.
    #[inline(never)]
    fn poll_own(&self, proc: &ProcessorIo, iteration: u64, engine_due: bool) {
        self.announce_if_resumed(proc);
        let timers_due = {
            let next = proc.work.next_timer();
            next != NO_TIMER && next <= self.now_tick()
        };
        if engine_due || timers_due || proc.deferred.load(Ordering::Relaxed) {
            let mut fired = Vec::new();
            let mut st = proc.lock();
            self.look(proc, &mut st, &mut fired, |st, fired| match &proc.engine {
                Engine::Uring(ring) => {
                    ring.reap(proc, st, fired);
                    if is_stable_thread() {
                        ring.run_task_work(proc, st, fired);
                    }
                    proc.flush_batch(st, fired);
                }
                Engine::Poll(poller) => {
                    if engine_due {
                        poller.poll_now(st, fired);
                    }
                }
            });
            drop(st);
            fired.into_iter().for_each(Waker::wake);
        }
        if iteration % u64::from(RESCUE_PERIOD) == 0 {
            self.rescue(proc);
        }
    }
}

impl Driver {
    /// One look at `proc`'s engine by its owner, under the lock (`st`):
    /// the wakers a previous look deferred, then what the engine reports
    /// (`io`, which collects its wakers), then the timers due by a reading
    /// of the clock taken after that. Due timers come first: if any fired,
    /// `io`'s wakers are deferred to the owner's next look, a scheduling
    /// iteration later, so that the timers' tasks are queued ahead of them
    /// on every lane (time/clock.md, "Due timers before ready I/O").
    pub(super) fn look(
        &self,
        proc: &ProcessorIo,
        st: &mut State,
        fired: &mut Vec<Waker>,
        io: impl FnOnce(&mut State, &mut Vec<Waker>),
    ) {
        if proc.deferred.swap(false, Ordering::Relaxed) {
            st.take_deferred_wakers(fired);
        }
        let mut ready = Vec::new();
        io(st, &mut ready);
        // The clock is read after the engine: an event reported here that
        // a task caused after moving the clock finds its timers due.
        let before = fired.len();
        let next = proc.work.next_timer();
        if next != NO_TIMER && next <= self.now_tick() {
            self.fire_timers(proc, st, fired);
        }
        if fired.len() > before && !ready.is_empty() {
            st.deferred_wakers.append(&mut ready);
            proc.deferred.store(true, Ordering::Relaxed);
        } else {
            fired.append(&mut ready);
        }
    }
}

impl ProcessorIo {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Poisoning: the state's invariants hold between calls (no user code
        // runs under the lock).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Without the lock: whether the owner's iteration `iteration` should
    /// reap or submit (a hint; the owner checks again under the lock). An
    /// io_uring engine is due whenever it has operations in flight or
    /// unsubmitted; a poll engine, a system call, only every `POLL_PERIOD`
    /// iterations.
    #[inline(always)]
    fn engine_due(&self, iteration: u64) -> bool {
        match &self.engine {
            Engine::Uring(_) => {
                self.work.outstanding() != 0 || self.unflushed.load(Ordering::Relaxed) != 0
            }
            Engine::Poll(_) => {
                iteration % u64::from(POLL_PERIOD) == 0 && self.work.outstanding() != 0
            }
        }
    }

    /// The lock, if it is free right now.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(st) => Some(st),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Under the lock (`st`): one more operation or registration in this
    /// engine. Returns whether that made work appear while the owner is
    /// awake: the caller then calls `Driver::work_appeared` after unlocking
    /// (the watch handshake; an owner that is parked waits for its own
    /// engine, and announces its work when it resumes).
    pub(crate) fn work_added(&self, st: &State) -> bool {
        self.work.add(st) && self.sleep.parked_until(st).is_none()
    }

    /// Under the lock (`st`): `n` operations or registrations fewer in this
    /// engine (completed, settled, or deregistered).
    pub(crate) fn work_removed(&self, st: &State, n: usize) {
        self.work.remove(st, n);
    }

    /// Without the lock, a hint: whether this engine's ring broke (it takes
    /// no new operations).
    fn ring_broken(&self) -> bool {
        matches!(&self.engine, Engine::Uring(ring) if ring.is_broken())
    }
}

impl State {
    /// Whether the engine stopped for good (`Driver::processor_stopped`,
    /// the only one to set it): new work goes to another engine.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Whether the read of the wake-up eventfd is in flight, so that
    /// `unpark` can end a wait in the ring.
    pub(crate) fn wake_armed(&self) -> bool {
        self.wake_armed
    }

    /// The wake-up read was pushed (`Ring::arm_wake`): armed, and a run of
    /// failed attempts to arm it is over.
    pub(crate) fn wake_read_armed(&mut self) {
        self.wake_armed = true;
        self.wake_arm_failed = false;
    }

    /// An attempt to arm the wake-up read failed. Returns whether the one
    /// before it did not (a run of failures begins: logged once).
    pub(crate) fn note_wake_arm_failure(&mut self) -> bool {
        !std::mem::replace(&mut self.wake_arm_failed, true)
    }

    /// The wake-up read's completion was reaped: no longer armed, and the
    /// wake-up is left for `park` (`woken`).
    pub(crate) fn wake_read_completed(&mut self) {
        self.wake_armed = false;
        self.woken = true;
    }

    /// The wake-up read's entry never reaches the kernel (its ring broke
    /// before consuming it): not armed.
    pub(crate) fn wake_read_unsubmitted(&mut self) {
        self.wake_armed = false;
    }

    /// A wake-up was taken out of the engine (the poller's eventfd): left
    /// for `park` (`woken`).
    pub(crate) fn wake_reaped(&mut self) {
        self.woken = true;
    }

    /// Wakers collected where they cannot be woken yet: the next reap or
    /// flush hands them to its caller (`take_pending_wakers`).
    pub(crate) fn defer_wakers(&mut self, wakers: Vec<Waker>) {
        self.pending_wakers.extend(wakers);
    }

    /// Moves the wakers collected so far (`defer_wakers`) to `fired`, to be
    /// woken after unlocking.
    pub(crate) fn take_pending_wakers(&mut self, fired: &mut Vec<Waker>) {
        fired.append(&mut self.pending_wakers);
    }

    /// Moves the wakers a look deferred (`deferred_wakers`) to `fired`.
    pub(crate) fn take_deferred_wakers(&mut self, fired: &mut Vec<Waker>) {
        fired.append(&mut self.deferred_wakers);
    }
}

/// The error of an operation whose runtime was shut down
/// (`runtime::is_rt_shutdown_err` recognises it).
pub(crate) fn shut_down_error() -> io::Error {
    io::Error::other(crate::runtime::shutdown::ShutDown)
}

/// An eventfd, non-blocking, close-on-exec.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with no pointer arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd's counter.
pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live local; a full counter (EAGAIN)
    // means a wake-up is pending anyway.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}
