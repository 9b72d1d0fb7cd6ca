//! Timers: each processor's wheel, behind its lock, and its firing; and
//! what the runtime's clock asks of the drivers (time/clock.md). The
//! futures are in `crate::time`.

use std::io;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use super::{shut_down_error, Driver, Engine, ProcessorIo, State};
use crate::io::sleep::NO_TIMER;
use crate::time::idle_check::{Activity, IdleScan};
use fairlane_core::wheel::TimerKey;

impl Driver {
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

    pub(super) fn fire_timers(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
        if !st.wheel.is_empty() {
            st.wheel.advance(self.now_tick(), fired);
        }
        // Firing only removes timers: no work appears here.
        proc.work
            .set_next_timer(&*st, st.wheel.next_expiration().unwrap_or(NO_TIMER));
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
            if in_flight
                || st.woken
                || !st.pending_wakers.is_empty()
                || !st.deferred_wakers.is_empty()
            {
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

impl ProcessorIo {
    /// Removes timer `key` (no effect if it fired).
    pub(crate) fn cancel_timer(&self, key: TimerKey) {
        let mut st = self.lock();
        let waker = st.wheel.cancel(key);
        self.work
            .set_next_timer(&*st, st.wheel.next_expiration().unwrap_or(NO_TIMER));
        drop(st);
        // Dropped unlocked: its drop may drop another timer's future, which
        // cancels that timer under this lock.
        drop(waker);
    }

    /// Whether timer `key` is still pending; updates its waker if so.
    pub(crate) fn timer_pending(&self, key: TimerKey, waker: &Waker) -> bool {
        let replaced = self.lock().wheel.set_waker(key, waker);
        // The replaced waker is dropped here, unlocked (as in `cancel_timer`).
        replaced.is_some()
    }
}
