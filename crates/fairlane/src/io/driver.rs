//! The I/O driver: one engine per processor (an io_uring instance, or a
//! readiness poller in the fallback backend) and one timer wheel per
//! processor, all behind the processor's lock, plus the hooks the host calls
//! (`poll_events`, `park`, `unpark`).
//!
//! The protocols (who reaps, who may submit, how a sleeping processor is
//! woken, how a dropped operation keeps its memory) are explained in
//! `driver.md` beside this file.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};

use slab::Slab;

use super::reactor::FdState;
use super::sleep::{SleepState, Unwatched, Work, IN_ENGINE, NO_TIMER, ON_FUTEX};
use super::uring::{self, OpSlot};
use super::IoBackend;
use crate::task::coop;
use crate::time::clock::Clock;
use crate::time::idle_check::{Activity, EngineMarks, IdleScan};
use fairlane_core::wheel::{TimerKey, Wheel};

/// Submissions a processor batches before it flushes regardless.
pub(crate) const FLUSH_THRESHOLD: u32 = 30;
/// A processor looks at one other processor's ring every this many
/// scheduling iterations, to rescue if that one's owner is busy.
const RESCUE_PERIOD: u32 = 256;
/// In the fallback backend, a busy processor polls its poller without
/// waiting every this many iterations (a system call each time).
const POLL_PERIOD: u32 = 16;
/// A rescuer's record of a processor it did not sample (it had no work).
const UNSAMPLED: u64 = u64::MAX;
/// How long a sleeping processor that watches awake processors with work
/// in their engine waits before it looks at them again, to rescue one stuck
/// in a long poll (and how long a wait on the futex with operations in
/// flight but no armed wake-up read lasts).
const WATCH_PERIOD: Duration = Duration::from_millis(2);
/// `RESUMED` values.
const RESUMED_NO: u8 = 0;
const RESUMED_PARKED: u8 = 1;
const RESUMED_WATCHING: u8 = 2;

static NEXT_DRIVER_ID: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// Whether this thread lives as long as its runtime (a processor's own
    /// thread): only such threads hand submissions to the kernel themselves
    /// (see `SubmitThread`).
    static STABLE: Cell<bool> = const { Cell::new(false) };
    /// The processor this thread runs, as the driver sees it.
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
    /// `CURRENT`'s driver id and engine as plain values for the per-iteration
    /// hook (no borrow flag, no destructor check); the engine is kept alive
    /// by `CURRENT`, and both are set and cleared together.
    static CURRENT_RAW: Cell<(usize, *const ProcessorIo)> = const { Cell::new((0, std::ptr::null())) };
    /// This processor thread's scheduling iterations (see `poll_own`).
    static ITERATION: Cell<u64> = const { Cell::new(0) };
    /// Whether this processor thread parked since its last `poll_events`
    /// (`RESUMED_PARKED`), watching others or claimed to watch in one of
    /// those parks (`RESUMED_WATCHING`), or not (`RESUMED_NO`): the core calls
    /// `poll_events` only once it runs its loop again, so the next one
    /// knows that the processor resumes running tasks.
    static RESUMED: Cell<u8> = const { Cell::new(RESUMED_NO) };
    /// Rescuing state of this processor thread: the processor it watches,
    /// that one's iteration count when sampled, and a random state.
    static WATCH: Cell<(usize, u64, u64)> = const { Cell::new((0, u64::MAX, 0x9e37_79b9_7f4a_7c15)) };
    /// This thread's copy of a driver's engine table for rescuing: driver
    /// id, the table's version, the engines. Refreshed when the version
    /// changes, so that rescuing never takes the table's lock (a shared
    /// read lock taken every few iterations by every processor costs a
    /// contended atomic read-modify-write each time).
    static RESCUE_SNAPSHOT: RefCell<(usize, u64, Vec<Arc<ProcessorIo>>)> = const { RefCell::new((0, 0, Vec::new())) };
}

struct Current {
    driver: usize,
    proc: Arc<ProcessorIo>,
}

/// Marks the calling thread as one that lives until its runtime shuts down
/// (the body of a processor's own thread calls this first).
pub(crate) fn mark_stable_thread() {
    STABLE.with(|s| s.set(true));
}

fn is_stable_thread() -> bool {
    STABLE.with(Cell::get)
}

/// The kernel ties an io_uring request to the thread that submitted it and
/// cancels it when that thread exits. Threads that may exit while their
/// submissions are in flight (a `block_in_place` replacement, which runs a
/// processor for a while and then exits; `block_on` threads; the thread
/// dropping the runtime) therefore never submit themselves: they publish
/// their entries and ask this thread, which lives as long as the driver, to
/// hand them to the kernel. (It also runs the completion work of what it
/// submitted, woken by the kernel for it.)
pub(crate) struct SubmitThread {
    state: Mutex<SubmitState>,
    wake: Condvar,
    /// Signalled after each round of submissions (`request_and_wait`).
    round_done: Condvar,
}

#[derive(Default)]
struct SubmitState {
    /// Every engine, by processor index (weak: engines hold this thread's
    /// handle).
    procs: Vec<Weak<ProcessorIo>>,
    /// Processor indices whose rings have entries to submit.
    pending: Vec<usize>,
    /// Rounds of submissions started and finished by the thread; a round
    /// starts by taking all of `pending`.
    rounds_started: u64,
    rounds_done: u64,
    started: bool,
    stop: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SubmitThread {
    fn lock(&self) -> MutexGuard<'_, SubmitState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the thread to submit processor `index`'s published entries and
    /// waits until it has: the kernel then holds the files the entries name,
    /// so closing a descriptor (and its number being reused) cannot redirect
    /// them.
    fn request_and_wait(self: &Arc<Self>, index: usize) {
        let Some(ticket) = self.request(index) else {
            return; // submitted by this thread (no submission thread)
        };
        let mut st = self.lock();
        while st.rounds_done < ticket && !(st.stop && st.thread.is_none()) {
            st = self.round_done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Asks the thread to submit processor `index`'s published entries.
    /// Returns the round that will take them (they are submitted once
    /// `rounds_done` reaches it), or `None` if this thread submitted them
    /// itself (after shutdown, or when the thread cannot be started).
    fn request(self: &Arc<Self>, index: usize) -> Option<u64> {
        let mut st = self.lock();
        if st.stop {
            // After shutdown: no thread left to ask; the caller's own enter
            // is the only way (its requests may end with it).
            drop(st);
            self.submit_here(index);
            return None;
        }
        if !st.pending.contains(&index) {
            st.pending.push(index);
        }
        // Under the lock that put `index` in `pending`: a round starts by
        // taking all of `pending` and counting itself in `rounds_started`
        // under this lock, so the next round to start takes this request. A
        // ticket read under an earlier acquisition could name a round that
        // started in between, for other rings only.
        let ticket = st.rounds_started + 1;
        if !st.started {
            st.started = true;
            let this = self.clone();
            match std::thread::Builder::new()
                .name("fairlane-io-submit".into())
                .spawn(move || this.run())
            {
                Ok(handle) => st.thread = Some(handle),
                Err(e) => {
                    st.started = false;
                    st.pending.retain(|&i| i != index);
                    drop(st);
                    tracing::error!(error = %e, "fairlane cannot start the I/O submission thread");
                    self.submit_here(index);
                    return None;
                }
            }
        }
        drop(st);
        self.wake.notify_one();
        Some(ticket)
    }

    /// The calling thread enters processor `index`'s ring itself: the last
    /// resort, its requests may end with it.
    fn submit_here(&self, index: usize) {
        let proc = self.lock().procs.get(index).and_then(Weak::upgrade);
        if let Some(proc) = proc {
            if let Engine::Uring(ring) = &proc.engine {
                // An error broke the ring (logged there): what it did not
                // submit is done elsewhere.
                let _ = ring.submit_unlocked(&proc);
            }
        }
    }

    fn run(&self) {
        let mut st = self.lock();
        loop {
            while st.pending.is_empty() && !st.stop {
                st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.pending.is_empty() && st.stop {
                return;
            }
            let batch = std::mem::take(&mut st.pending);
            st.rounds_started += 1;
            let procs: Vec<Option<Arc<ProcessorIo>>> = batch
                .iter()
                .map(|&i| st.procs.get(i).and_then(Weak::upgrade))
                .collect();
            drop(st);
            for proc in procs.into_iter().flatten() {
                if let Engine::Uring(ring) = &proc.engine {
                    // Without the processor's lock: the kernel serialises
                    // enters, and entries are only ever published whole.
                    // An error breaks the ring (logged there), and what it
                    // did not submit is done elsewhere.
                    let _ = ring.submit_unlocked(&proc);
                }
            }
            st = self.lock();
            st.rounds_done += 1;
            self.round_done.notify_all();
        }
    }

    /// Stops the thread after what is pending; joins it.
    fn stop(&self) {
        let handle = {
            let mut st = self.lock();
            st.stop = true;
            st.thread.take()
        };
        self.wake.notify_one();
        if let Some(handle) = handle {
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
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
    pub(crate) index: usize,
    pub(crate) engine: Engine,
    /// The driver: operations and registrations of a removed processor move
    /// to another of its engines (not a strong reference: the driver owns
    /// its engines).
    pub(crate) driver: Weak<Driver>,
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
    pub(crate) work: Work,
    /// What the paused clock's idle check reads (time/clock.md).
    marks: EngineMarks,
    /// Submissions pushed but not yet handed to the kernel.
    unflushed: AtomicU32,
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

/// What the processor's lock guards.
pub(crate) struct State {
    pub(crate) ops: Slab<OpSlot>,
    pub(crate) fds: Slab<Arc<FdState>>,
    pub(crate) wheel: Wheel,
    /// `unflushed` as the previous `poll_events` saw it (the batching rule).
    unflushed_seen: u32,
    /// The eventfd read that lets `unpark` wake a ring is in flight.
    pub(crate) wake_armed: bool,
    /// The last attempt to arm it failed (logged once per failure run).
    pub(crate) wake_arm_failed: bool,
    /// Someone reaped a wake-up (`unpark`) that `park` has not consumed.
    pub(crate) woken: bool,
    /// Wakers collected where they could not be woken yet.
    pub(crate) pending_wakers: Vec<Waker>,
    pub(crate) stopped: bool,
    /// The ring's published entries and whether it broke (`uring::SqLog`).
    pub(crate) sq_log: uring::SqLog,
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
            submit_thread: Arc::new(SubmitThread {
                state: Mutex::new(SubmitState::default()),
                wake: Condvar::new(),
                round_done: Condvar::new(),
            }),
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
                stopped: false,
                sq_log: uring::SqLog::default(),
            }),
            sleep: SleepState::new(),
            futex: AtomicU32::new(0),
            work: Work::new(),
            marks: EngineMarks::default(),
            unflushed: AtomicU32::new(0),
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
        let mut submit = self.submit_thread.lock();
        if submit.procs.len() <= index {
            submit.procs.resize_with(index + 1, Weak::new);
        }
        submit.procs[index] = Arc::downgrade(&proc);
        drop(submit);
        Ok(proc)
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

    /// The processor engine of the calling thread, if it is one of ours.
    pub(crate) fn current(&self) -> Option<Arc<ProcessorIo>> {
        CURRENT.with(|c| {
            c.borrow()
                .as_ref()
                .filter(|c| c.driver == self.id)
                .map(|c| c.proc.clone())
        })
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

    /// Milliseconds since the driver's epoch, rounded down, on the
    /// runtime's clock (virtual while paused).
    #[inline]
    pub(crate) fn now_tick(&self) -> u64 {
        self.clock.now_tick()
    }

    /// The first tick at or after `instant`.
    pub(crate) fn tick_at(&self, instant: Instant) -> u64 {
        let since = instant.saturating_duration_since(self.epoch);
        let ms = since.as_millis() as u64;
        if since > Duration::from_millis(ms) {
            ms + 1
        } else {
            ms
        }
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
            self.poll_own(proc);
        }
    }

    fn poll_own(&self, proc: &ProcessorIo) {
        // Counted in a thread-local; the shared `iterations`, which rescuers
        // read, is written only every RESCUE_PERIOD iterations: a line that
        // other processors read and the owner wrote on every iteration would
        // cost the owner a cache miss after each of their reads. A rescuer
        // therefore sees progress in steps of RESCUE_PERIOD; an owner that
        // made fewer iterations between two looks may be drained needlessly
        // (harmless: draining takes the owner's lock only if it is free).
        let iteration = ITERATION.with(|c| {
            let v = c.get().wrapping_add(1);
            c.set(v);
            v
        });
        if iteration % u64::from(RESCUE_PERIOD) == 0 {
            proc.iterations.store(iteration, Ordering::Relaxed);
        }
        let resumed = RESUMED.with(|r| r.replace(RESUMED_NO));
        if resumed != RESUMED_NO {
            // Back from sleep to run tasks: the handshake's announcing side
            // (`SleepState::awake` was stored in `park`, before the fence).
            if proc.work.pending() {
                // With work in this engine, which a sleeper that saw this
                // processor parked does not watch.
                self.work_appeared(proc.index);
            } else if resumed == RESUMED_WATCHING {
                // After watching others: a sleeper must watch them now.
                self.hand_over_watch(proc.index);
            }
        }
        let timers_due = {
            let next = proc.work.next_timer();
            next != NO_TIMER && next <= self.now_tick()
        };
        let engine_due = match &proc.engine {
            Engine::Uring(_) => {
                proc.work.outstanding() != 0 || proc.unflushed.load(Ordering::Relaxed) != 0
            }
            // A system call: only every POLL_PERIOD iterations.
            Engine::Poll(_) => {
                iteration % u64::from(POLL_PERIOD) == 0 && proc.work.outstanding() != 0
            }
        };
        if engine_due || timers_due {
            let mut fired = Vec::new();
            let mut st = proc.lock();
            match &proc.engine {
                Engine::Uring(ring) => {
                    ring.reap(proc, &mut st, &mut fired);
                    if is_stable_thread() {
                        ring.run_task_work(proc, &mut st, &mut fired);
                    }
                    // Batching: flush past the threshold, or when the task
                    // just run added nothing to what the one before it left.
                    let unflushed = proc.unflushed.load(Ordering::Relaxed);
                    if unflushed > FLUSH_THRESHOLD
                        || (unflushed != 0 && unflushed == st.unflushed_seen)
                    {
                        proc.flush(&mut st);
                        fired.append(&mut st.pending_wakers);
                    }
                    st.unflushed_seen = proc.unflushed.load(Ordering::Relaxed);
                }
                Engine::Poll(poller) => {
                    if engine_due {
                        poller.poll_now(&mut st, &mut fired);
                    }
                }
            }
            if timers_due {
                self.fire_timers(proc, &mut st, &mut fired);
            }
            drop(st);
            fired.into_iter().for_each(Waker::wake);
        }
        if iteration % u64::from(RESCUE_PERIOD) == 0 {
            self.rescue(proc);
        }
    }

    /// Looks at one other processor; if its owner has not been through its
    /// loop since the last look (it is stuck in a long poll) and it has
    /// operations or due timers, drains it here: the tasks woken land on the
    /// rescuer's lanes. The age rule of the ready queue, counted in the
    /// rescuer's own scheduling iterations instead of clock ticks.
    fn rescue(&self, own: &ProcessorIo) {
        let version = self.procs_version.load(Ordering::Acquire);
        let watched = RESCUE_SNAPSHOT.with(|snapshot| {
            let mut snapshot = snapshot.borrow_mut();
            if snapshot.0 != self.id || snapshot.1 != version {
                *snapshot = (self.id, version, self.procs().clone());
            }
            let procs = &snapshot.2;
            let n = procs.len();
            if n < 2 {
                return None;
            }
            // Each look checks the processor sampled at the previous look
            // (RESCUE_PERIOD iterations ago) and samples the next one, at
            // random.
            let (watched, seen, mut rng) = WATCH.with(Cell::get);
            let mut next = fairlane_core::rand::below(fairlane_core::rand::step(&mut rng) >> 32, n);
            if next == own.index {
                next = (next + 1) % n;
            }
            // Its iteration count (a line its owner writes: a cache miss
            // here) is read only if it has work in its engine; one without
            // cannot need rescue at the next look.
            let sampled = &procs[next];
            let seen_next =
                if sampled.work.outstanding() != 0 || sampled.work.next_timer() != NO_TIMER {
                    sampled.iterations.load(Ordering::Relaxed)
                } else {
                    UNSAMPLED
                };
            WATCH.with(|w| w.set((next, seen_next, rng)));
            if seen == UNSAMPLED {
                return None;
            }
            // Only a processor that is stuck (not through its loop since the
            // last look, and not asleep) with work in its engine is cloned
            // out to be drained: no reference-count traffic otherwise.
            let other = procs.get(watched).filter(|q| q.index != own.index)?;
            // A hint: `drain_other` decides again under the lock.
            let stuck =
                other.iterations.load(Ordering::Relaxed) == seen && !other.sleep.parked_hint();
            if !stuck {
                return None;
            }
            let timers_due = {
                let t = other.work.next_timer();
                t != NO_TIMER && t <= self.now_tick()
            };
            if other.work.outstanding() == 0 && !timers_due {
                return None;
            }
            Some(other.clone())
        });
        let Some(other) = watched else {
            return;
        };
        self.drain_other(&other);
    }

    /// Drains another processor's engine (reap, flush, due timers) if its
    /// lock is free; the tasks woken land on the calling processor's lanes.
    fn drain_other(&self, other: &ProcessorIo) {
        let Some(mut st) = other.try_lock() else {
            return;
        };
        // Decided again under the lock: the caller's look at `parked_hint`
        // may be stale, and the owner may have committed to sleep since.
        // A parked owner's engine is its own (`SleepState::may_drain`).
        if st.stopped || !other.may_drain(&st) {
            return;
        }
        let mut fired = Vec::new();
        match &other.engine {
            Engine::Uring(ring) => {
                ring.reap(other, &mut st, &mut fired);
                if other.unflushed.load(Ordering::Relaxed) != 0 {
                    other.flush(&mut st);
                    fired.append(&mut st.pending_wakers);
                }
            }
            Engine::Poll(poller) => poller.poll_now(&mut st, &mut fired),
        }
        self.fire_timers(other, &mut st, &mut fired);
        other.marks.wake_after_unlock(st, fired);
    }

    /// The recheck of the watch handshake (driver.md, "The watch handshake"):
    /// the processors among `procs`, other than `own`, that a processor
    /// going to sleep must watch (awake, with work in their engine), and
    /// their iteration counts now. It looks at them again after
    /// `WATCH_PERIOD` and rescues those that have not moved (stuck in a long
    /// poll) and still have work (`drain_other` checks). Called after
    /// `SleepState::choose_watched`, whose fence orders these reads after
    /// the sleeper's flag: a processor whose work appears later sees the
    /// flag and wakes a sleeper (`work_appeared`). Nobody is watched when no awake
    /// processor has work, so a runtime whose awake processors do no I/O
    /// and set no timers leaves its sleepers asleep.
    fn watch_list(
        &self,
        own: &ProcessorIo,
        procs: &[Arc<ProcessorIo>],
    ) -> Vec<(Arc<ProcessorIo>, u64)> {
        let others = procs.iter().filter(|q| q.index != own.index);
        own.sleep
            .choose_watched(&self.unwatched, others, |q| (&q.sleep, &q.work))
            .into_iter()
            .map(|q| (q.clone(), q.iterations.load(Ordering::Relaxed)))
            .collect()
    }

    /// The announcing half of the watch handshake (driver.md, "Sleeping
    /// rescuers"): work appeared in the engine of processor `from` while it
    /// is awake, or it resumes running tasks with work in its engine. After
    /// its work words were stored, and without any engine's lock: if some
    /// processor may sleep watching nobody, one that does is woken, and
    /// rechecks before it sleeps again.
    pub(crate) fn work_appeared(&self, from: usize) {
        self.announce(from, |_| true);
    }

    /// Processor `from` resumes running tasks after a park in which it
    /// watched others, or was woken to watch: a sleeper that watches nobody
    /// is woken if an awake processor other than `from` has work in its
    /// engine (read after the fence), to watch in its place.
    fn hand_over_watch(&self, from: usize) {
        self.announce(from, |procs| {
            procs
                .iter()
                .any(|q| q.index != from && !q.sleep.parked_hint() && q.work.pending())
        });
    }

    /// `Unwatched::anyone_unwatched`, `needed` (after the fence), then
    /// `Unwatched::claim` over the processors other than `from` and the
    /// wake-up of the one claimed.
    fn announce(&self, from: usize, needed: impl FnOnce(&[Arc<ProcessorIo>]) -> bool) {
        // The fence and one load, before the table's lock: all it costs
        // while every sleeper watches someone, or nobody sleeps.
        if !self.unwatched.anyone_unwatched() {
            return;
        }
        let procs = self.procs();
        if !needed(&procs) {
            return;
        }
        let others = procs.iter().filter(|q| q.index != from);
        if let Some(sleeper) = self.unwatched.claim(others, |q| &q.sleep) {
            sleeper.notify();
        }
    }

    /// Host hook: processor `p` committed to sleep. Drains completions and
    /// timers; if that woke nothing, waits on the engine until a completion,
    /// an `unpark` or the earliest timer.
    pub(crate) fn park(&self, p: usize) {
        let Some(proc) = self.current().filter(|proc| proc.index == p) else {
            // No engine for this processor (it could not be created):
            // sleep without I/O, bounded, so that missed wake-ups of a
            // thread park cannot happen (unpark writes nowhere).
            std::thread::park_timeout(Duration::from_millis(10));
            return;
        };
        let mut fired = Vec::new();
        // Taken before this engine's lock (lock order: the table, then an
        // engine). A processor added after this look starts awake without
        // work: its first work announces itself (`work_appeared`).
        let procs = self.procs().clone();
        let watched;
        let timeout = {
            let mut st = proc.lock();
            self.drain_all(&proc, &mut st, &mut fired);
            // A wake-up reaped by anyone since the last park is this park's
            // token (the `Host::park` contract): return at once.
            let woken = std::mem::take(&mut st.woken);
            if woken || !fired.is_empty() {
                proc.marks.wake_after_unlock(st, fired);
                return;
            }
            let until = proc.work.next_timer();
            // With nothing in the engine, no completion or readiness can
            // arrive there: wait on the futex, the cheaper wake-up. Anyone
            // who puts work in this engine later does so under this lock
            // and then wakes a futex sleeper (`ProcessorIo::wake_if_on_futex`).
            // A ring whose wake-up read is not armed (arming failed; the
            // reap above tried again) cannot be woken by `unpark`: wait on
            // the futex too, bounded while operations are in flight, since
            // only the ring shows their completions.
            // A wait in the ring also needs its wake-up read in the kernel,
            // not only published: the wait submits nothing, and a ring that
            // breaks never submits it (its entries are settled instead).
            // Entries left published here are a thread's that may not
            // enter (a `block_in_place` stand-in): wait for their round.
            let in_flight = proc.work.outstanding() != 0;
            let wake_armed = match &proc.engine {
                Engine::Uring(ring) => {
                    if ring.has_unsubmitted(&st) {
                        proc.flush_now(&mut st);
                        fired.append(&mut st.pending_wakers);
                    }
                    st.wake_armed && !ring.has_unsubmitted(&st)
                }
                Engine::Poll(_) => true,
            };
            if !fired.is_empty() {
                drop(st);
                fired.into_iter().for_each(Waker::wake);
                return;
            }
            let mode = if in_flight && wake_armed {
                IN_ENGINE
            } else {
                ON_FUTEX
            };
            let bounded = in_flight && !wake_armed;
            proc.sleep.commit(&*st, until, mode);
            // The watch handshake, sleeper side: flag, fence, recheck.
            watched = self.watch_list(&proc, &procs);
            // None while the clock is paused: only `advance` and
            // auto-advance move it.
            let timer = if until == NO_TIMER {
                None
            } else {
                self.clock.real_wait_until(until)
            };
            if watched.is_empty() && !bounded {
                timer
            } else {
                Some(timer.map_or(WATCH_PERIOD, |t| t.min(WATCH_PERIOD)))
            }
        };
        if self.clock.is_paused_hint() {
            // Committed: if the whole runtime is idle now, the clock jumps
            // to the earliest timer and its processor (this one too) is
            // woken (time/clock.md).
            self.clock.auto_advance();
        }
        let mut events = Vec::new();
        match &proc.engine {
            _ if proc.sleep.own_mode() == ON_FUTEX => proc.futex_wait(timeout),
            Engine::Uring(ring) => ring.wait(timeout),
            Engine::Poll(poller) => poller.wait(timeout, &mut events),
        }
        let mut st = proc.lock();
        if let Engine::Poll(poller) = &proc.engine {
            // Under the lock that the wakers are woken after, so that the
            // paused clock's idle check never finds them out of the engine
            // and not yet counted (time/clock.md).
            poller.dispatch(&mut st, &events, &mut fired);
        }
        proc.sleep.awake(&*st);
        // Slept unwatched, and an announcer took the flag down: it woke
        // this processor to watch.
        let told = watched.is_empty() && !proc.sleep.end_unwatched(&self.unwatched);
        st.woken = false;
        self.drain_all(&proc, &mut st, &mut fired);
        proc.marks.wake_after_unlock(st, fired);
        for (other, seen) in &watched {
            if other.work.pending()
                && other.iterations.load(Ordering::Relaxed) == *seen
                && !other.sleep.parked_hint()
            {
                self.drain_other(other);
            }
        }
        // If the core now resumes running tasks here (rather than parking
        // again, which rechecks), its next `poll_events` announces this
        // processor (`poll_own`). The strongest of the parks since the last
        // `poll_events` counts: the core may park several times in a row.
        let now = if watched.is_empty() && !told {
            RESUMED_PARKED
        } else {
            RESUMED_WATCHING
        };
        RESUMED.with(|r| r.set(r.get().max(now)));
    }

    /// Reaps completions, flushes submissions and fires due timers.
    fn drain_all(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
        match &proc.engine {
            Engine::Uring(ring) => {
                ring.reap(proc, st, fired);
                proc.flush(st);
                // Wakers the flush collected (reaping to make room, or
                // settling a ring that broke).
                fired.append(&mut st.pending_wakers);
                st.unflushed_seen = 0;
            }
            Engine::Poll(poller) => poller.poll_now(st, fired),
        }
        self.fire_timers(proc, st, fired);
    }

    fn fire_timers(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
        if !st.wheel.is_empty() {
            st.wheel.advance(self.now_tick(), fired);
        }
        // Firing only removes timers: no work appears here.
        proc.work
            .set_next_timer(&*st, st.wheel.next_expiration().unwrap_or(NO_TIMER));
    }

    /// Host hook: wakes processor `p` from `park` (or makes its next `park`
    /// return at once).
    pub(crate) fn unpark(&self, p: usize) {
        // On processor p's own thread the core only unparks p from inside
        // `park` (a task woken there is pushed, and p is the sleeper the
        // push wakes), and `park` returns right after waking its tasks: the
        // eventfd write (and the read it completes) would be wasted.
        let own = CURRENT.with(|c| {
            c.borrow()
                .as_ref()
                .is_some_and(|c| c.driver == self.id && c.proc.index == p)
        });
        if own {
            return;
        }
        if let Some(proc) = self.procs().get(p) {
            // Its `sem` just left ASLEEP: the paused clock's idle check
            // counts this (time/clock.md).
            proc.marks.roused();
            proc.notify();
        }
    }

    /// Processor `p` stops for good (runtime shutdown, or the processor is
    /// removed): cancels every operation in flight on its engine and reaps
    /// every completion before anything they use is freed (their futures
    /// submit them again on another engine), moves fallback registrations
    /// to another engine, and fires its timers; new operations go
    /// elsewhere. After shutdown, all of them fail instead (driver.md,
    /// "Stopping a processor").
    pub(crate) fn processor_stopped(&self, p: usize) {
        let Some(proc) = self.procs().get(p).cloned() else {
            return;
        };
        let mut fired = Vec::new();
        let mut moving = Vec::new();
        {
            let mut st = proc.lock();
            if st.stopped {
                return;
            }
            st.stopped = true;
            match &proc.engine {
                // Operations whose futures live complete as `RESTART` and
                // are submitted again elsewhere by their futures.
                Engine::Uring(ring) => ring.cancel_all(&proc, &mut st, &mut fired),
                Engine::Poll(poller) if self.shut_down.load(Ordering::Acquire) => {
                    poller.stop(&mut st, &mut fired)
                }
                // Removal: registered sockets move to another engine, after
                // this lock is released (moving takes the other's lock).
                Engine::Poll(_) => {
                    moving.extend(st.fds.drain());
                    proc.work.remove(&*st, moving.len());
                }
            }
            // Timers: wake their tasks; their sleeps then see the processor
            // stopped and re-register elsewhere (or the runtime is gone).
            let mut all = Vec::new();
            st.wheel.advance(u64::MAX, &mut all);
            fired.extend(all);
            proc.work.set_next_timer(&*st, NO_TIMER);
        }
        for state in &moving {
            super::reactor::rehome(self, &proc, state, &mut fired);
        }
        fired.into_iter().for_each(Waker::wake);
    }

    /// Runtime shutdown: every processor stops (see `processor_stopped`).
    pub(crate) fn shutdown(&self) {
        self.shut_down.store(true, Ordering::Release);
        let n = self.procs().len();
        for p in 0..n {
            self.processor_stopped(p);
        }
    }

    /// Adds a timer for `tick` on the calling processor's wheel, or on one
    /// chosen round-robin for other threads. `None`: the tick has passed.
    pub(crate) fn add_timer(
        &self,
        tick: u64,
        waker: &Waker,
    ) -> io::Result<Option<(Arc<ProcessorIo>, TimerKey)>> {
        let (proc, local) = self.target()?;
        let mut st = proc.lock();
        if st.stopped {
            return Err(shut_down_error());
        }
        // Bring the wheel up to date first, so that it refuses only ticks
        // that really passed.
        let mut fired = Vec::new();
        let now = self.now_tick();
        st.wheel.advance(now, &mut fired);
        let key = st.wheel.insert(tick, waker.clone());
        let next = st.wheel.next_expiration().unwrap_or(NO_TIMER);
        let appeared = proc.work.set_next_timer(&*st, next);
        let parked_until = proc.sleep.parked_until(&*st);
        drop(st);
        if !local && key.is_some() && parked_until.is_some_and(|until| tick < until) {
            // The owner sleeps past this deadline: wake it to re-arm.
            proc.notify();
        }
        if appeared && parked_until.is_none() {
            // The owner is awake and may be stuck in a long poll: some
            // sleeper must watch this timer.
            self.work_appeared(proc.index);
        }
        fired.into_iter().for_each(Waker::wake);
        Ok(key.map(|k| (proc, k)))
    }
}

/// What the runtime's clock asks of its drivers (time/clock.md).
impl Driver {
    /// The processors whose engines have not stopped.
    pub(crate) fn live_processors(&self) -> Vec<usize> {
        self.procs()
            .iter()
            .filter(|proc| !proc.lock().stopped)
            .map(|proc| proc.index)
            .collect()
    }

    /// The idle check's look at every live engine, under its lock: false
    /// if one has I/O in flight (an operation in the ring; on the fallback
    /// backend, a task waiting for a socket's readiness) or wakers not yet
    /// handed out. Adds the drains begun and the earliest timer to `scan`.
    pub(crate) fn idle_scan(&self, scan: &mut IdleScan) -> bool {
        for proc in self.procs().iter() {
            let st = proc.lock();
            if st.stopped {
                continue;
            }
            scan.drains_begun += proc.marks.drains_begun(&st);
            let in_flight = match &proc.engine {
                Engine::Uring(_) => proc.work.outstanding() != 0,
                Engine::Poll(_) => st.fds.iter().any(|(_, fd)| fd.has_waiters()),
            };
            if in_flight || st.woken || !st.pending_wakers.is_empty() {
                return false;
            }
            scan.earliest = scan.earliest.min(proc.work.next_timer());
        }
        true
    }

    /// Every engine's wake-ups and finished drains, added to `activity`.
    pub(crate) fn add_marks(&self, activity: &mut Activity) {
        for proc in self.procs().iter() {
            proc.marks.add_to(activity);
        }
    }

    /// Wakes the owner of every engine with a timer due by `tick` (a
    /// parked owner's timers are its own to fire).
    pub(crate) fn notify_due(&self, tick: u64) {
        for proc in self.procs().iter() {
            if proc.work.next_timer() <= tick {
                proc.notify();
            }
        }
    }

    /// Wakes every owner, to wait again for its timers (the clock resumed).
    pub(crate) fn notify_all(&self) {
        for proc in self.procs().iter() {
            proc.notify();
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.shutdown();
        self.submit_thread.stop();
    }
}

impl ProcessorIo {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Poisoning: the state's invariants hold between calls (no user code
        // runs under the lock).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lock, if it is free right now.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(st) => Some(st),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Under the lock (`_st`): whether a thread other than the owner may take
    /// completions, readiness events or timers out of this engine now. Not
    /// while the owner is parked: whatever is there ends its wait and is
    /// its to take (driver.md, "Who takes a parked processor's events").
    pub(crate) fn may_drain(&self, st: &State) -> bool {
        self.sleep.may_drain(st)
    }

    /// Makes the owner's `park` return (or its next one): wakes the wait
    /// it is in, or leaves both tokens when it has not chosen one yet.
    pub(crate) fn notify(&self) {
        match self.sleep.mode() {
            ON_FUTEX => self.futex_wake(),
            IN_ENGINE => self.engine_notify(),
            _ => {
                self.futex_wake();
                self.engine_notify();
            }
        }
    }

    fn engine_notify(&self) {
        match &self.engine {
            Engine::Uring(ring) => ring.notify(),
            Engine::Poll(poller) => poller.notify(),
        }
    }

    /// Called under the lock by a thread that just put work in this engine
    /// (an operation, a registration): an owner waiting `ON_FUTEX` would not
    /// see its completion, so it is woken to wait again in the engine.
    pub(crate) fn wake_if_on_futex(&self) {
        if self.sleep.mode() == ON_FUTEX {
            self.futex_wake();
        }
    }

    fn futex_wake(&self) {
        self.futex.store(1, Ordering::Release);
        // SAFETY: FUTEX_WAKE on a live word of this process; no other
        // pointers.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.futex.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            )
        };
    }

    /// Waits until `futex_wake` (or `timeout`); a pending token makes it
    /// return at once. Consumes the token.
    fn futex_wait(&self, timeout: Option<Duration>) {
        if self.futex.swap(0, Ordering::Acquire) == 1 {
            return;
        }
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: FUTEX_WAIT on a live word of this process, expecting 0
        // (a wake since the swap makes it return at once), with a relative
        // timeout that lives across the call (or none).
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.futex.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                0,
                ts_ptr,
            )
        };
        self.futex.swap(0, Ordering::Acquire);
    }

    /// Hands the pushed submissions to the kernel (uring engine): itself
    /// on a processor's own thread, through the submission thread on any
    /// other (see `SubmitThread`).
    pub(crate) fn flush(&self, st: &mut State) {
        if let Engine::Uring(ring) = &self.engine {
            if !ring.has_unsubmitted(st) {
                // An `io_uring_enter` with nothing to submit would cost a
                // system call (twice per park, once on the wake-up's path).
                self.unflushed.store(0, Ordering::Relaxed);
                st.unflushed_seen = 0;
            } else if !is_stable_thread() {
                self.request_submit();
                self.unflushed.store(0, Ordering::Relaxed);
                st.unflushed_seen = 0;
            } else {
                // Wakers of completions reaped to make room wait in the
                // state for the next reap, which hands them to its caller.
                // An error broke the ring (logged there) and settled what
                // it did not submit: nothing stays published either way.
                let mut fired = Vec::new();
                let _ = ring.submit(self, st, &mut fired);
                st.pending_wakers.extend(fired);
                self.unflushed.store(0, Ordering::Relaxed);
                st.unflushed_seen = 0;
            }
        }
    }

    /// Asks the submission thread to submit this ring's entries.
    pub(crate) fn request_submit(&self) {
        self.submit_thread.request(self.index);
    }

    /// `flush`, but on a thread that may not submit itself it also waits
    /// until the submission thread has: for a dropped operation's
    /// cancellation, whose entry may still sit unsubmitted naming a
    /// descriptor that its owner closes next.
    pub(crate) fn flush_now(&self, st: &mut State) {
        match &self.engine {
            Engine::Uring(ring) if !is_stable_thread() => {
                if ring.has_unsubmitted(st) {
                    self.submit_thread.request_and_wait(self.index);
                    // The round may have broken the ring: settle it here,
                    // under the lock, before anyone relies on the entries
                    // being in the kernel.
                    let mut fired = Vec::new();
                    ring.settle(self, st, &mut fired);
                    st.pending_wakers.extend(fired);
                }
                self.unflushed.store(0, Ordering::Relaxed);
                st.unflushed_seen = 0;
            }
            _ => self.flush(st),
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

    /// Without the lock, a hint: whether this engine's ring broke (it takes
    /// no new operations).
    fn ring_broken(&self) -> bool {
        matches!(&self.engine, Engine::Uring(ring) if ring.is_broken())
    }

    /// Whether the calling thread may enter the ring to submit.
    pub(crate) fn may_submit_here(&self) -> bool {
        is_stable_thread()
    }

    pub(crate) fn note_unflushed(&self, n: u32) {
        self.unflushed.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn unflushed(&self) -> u32 {
        self.unflushed.load(Ordering::Relaxed)
    }

    /// Removes timer `key` (no effect if it fired).
    pub(crate) fn cancel_timer(&self, key: TimerKey) {
        let mut st = self.lock();
        st.wheel.cancel(key);
        self.work
            .set_next_timer(&*st, st.wheel.next_expiration().unwrap_or(NO_TIMER));
    }

    /// Whether timer `key` is still pending; updates its waker if so.
    pub(crate) fn timer_pending(&self, key: TimerKey, waker: &Waker) -> bool {
        self.lock().wheel.set_waker(key, waker)
    }
}

pub(crate) fn shut_down_error() -> io::Error {
    io::Error::other("the fairlane runtime was shut down")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `request_and_wait` returns only once the round that took its request
    /// has entered the ring. The submission thread is kept busy with rounds
    /// for another ring, so that rounds start at any moment; a ticket that
    /// could name a round started before the request was queued would let
    /// the wait end while this ring's entries are still unsubmitted.
    #[test]
    fn request_and_wait_returns_after_its_ring_was_submitted() {
        if uring::Ring::probe().is_err() {
            return; // needs io_uring (the library prints nothing)
        }
        let driver = Driver::new(IoBackend::IoUring, 2).expect("driver");
        let procs = driver.procs().clone();
        let submit = driver.submit_thread.clone();
        let stop = Arc::new(AtomicBool::new(false));
        // Two requesters keep the submission thread's lock contended, so that
        // it is often taken between any two acquisitions by another thread.
        let busy: Vec<_> = (0..2)
            .map(|_| {
                let (submit, stop) = (submit.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = submit.request(1);
                    }
                })
            })
            .collect();
        let Engine::Uring(ring) = &procs[0].engine else {
            unreachable!("an io_uring driver")
        };
        let mut early = 0;
        for _ in 0..30_000 {
            {
                let mut st = procs[0].lock();
                let nop = io_uring::opcode::Nop::new().build().user_data(u64::MAX - 1);
                let mut fired = Vec::new();
                ring.push(&procs[0], &mut st, &nop, &mut fired)
                    .expect("push");
            }
            submit.request_and_wait(0);
            let mut st = procs[0].lock();
            if ring.has_unsubmitted(&st) {
                early += 1;
            }
            let mut fired = Vec::new();
            ring.reap(&procs[0], &mut st, &mut fired);
        }
        stop.store(true, Ordering::Relaxed);
        busy.into_iter().for_each(|b| b.join().unwrap());
        assert_eq!(
            early, 0,
            "request_and_wait returned before its ring was submitted"
        );
    }

    /// A processor whose ring lost its wake-up read (arming it failed) and
    /// that has an operation in flight is still woken by `unpark`: it must
    /// not sleep in the ring, where the eventfd write of `unpark` posts
    /// nothing. Deadline generous: it only tells a hang from slowness.
    #[test]
    fn park_without_an_armed_wake_read_is_still_woken() {
        if uring::Ring::probe().is_err() {
            return; // needs io_uring (the library prints nothing)
        }
        let driver = Driver::new(IoBackend::IoUring, 1).expect("driver");
        let (to_main, from_scenario) = std::sync::mpsc::channel();
        let scenario = {
            let driver = driver.clone();
            std::thread::spawn(move || {
                mark_stable_thread();
                driver.register_current(0);
                let proc = driver.current().expect("registered");
                let Engine::Uring(ring) = &proc.engine else {
                    unreachable!("an io_uring driver")
                };
                // An operation that stays in flight: a read of an empty pipe.
                let mut fds = [0; 2];
                // SAFETY: `pipe2` writes two descriptors into `fds`.
                assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
                // SAFETY: both descriptors are new and owned here.
                let (rx, tx) =
                    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
                let read = uring::Op::submit(&driver, vec![0u8; 8], false, |buf| {
                    io_uring::opcode::Read::new(
                        io_uring::types::Fd(std::os::fd::AsRawFd::as_raw_fd(&rx)),
                        buf.as_mut_ptr(),
                        8,
                    )
                    .build()
                })
                .map_err(|(e, _)| e)
                .expect("submit the read");
                // The armed wake-up read completes; re-arming it fails.
                ring.fail_arm.store(true, Ordering::Relaxed);
                ring.notify();
                driver.park(0); // consumes the wake-up's completion
                driver.park(0); // returns at once: that wake-up's token
                assert!(!proc.lock().wake_armed);
                to_main.send(()).unwrap();
                driver.park(0); // until the unpark below
                drop(read);
                driver.unregister_current();
                drop((rx, tx));
            })
        };
        from_scenario.recv().unwrap();
        driver.unpark(0);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !scenario.is_finished() {
            assert!(
                Instant::now() < deadline,
                "park slept in a ring whose wake-up read was not armed: the unpark was lost"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        scenario.join().unwrap();
    }
}
