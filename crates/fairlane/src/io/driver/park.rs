//! Sleeping: `park`, which sleeps on the processor's futex word or in its
//! engine, and `unpark` and `notify`, which wake it from either
//! (driver.md, "Sleeping (`park`) and waking (`unpark`)"). The sleep words
//! themselves are `io/sleep.rs`.

use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::Duration;

use super::rescue::{LOOK, RESUMED, RESUMED_PARKED, RESUMED_WATCHING, WATCH_PERIOD};
use super::{Driver, Engine, ProcessorIo, State, CURRENT};
use crate::io::sleep::{IN_ENGINE, NO_TIMER, ON_FUTEX};

impl Driver {
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
            // Its lanes are empty (the core's final scan found nothing), and
            // a parked processor is not watched: nothing is kept.
            proc.work.unkeep(&st);
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
        let mut ready = Vec::new();
        if let Engine::Poll(poller) = &proc.engine {
            // Under the lock that the wakers are woken after (or deferred
            // under), so that the paused clock's idle check never finds
            // them out of the engine and not yet counted (time/clock.md).
            poller.dispatch(&mut st, &events, &mut ready);
        }
        proc.sleep.awake(&*st);
        // Slept unwatched, and an announcer took the flag down: it woke
        // this processor to watch.
        let told = watched.is_empty() && !proc.sleep.end_unwatched(&self.unwatched);
        st.woken = false;
        // Due timers before the events the wait returned and the rest of
        // the engine's (time/clock.md, "Due timers before ready I/O"): the
        // clock may have moved while this processor slept.
        self.look(&proc, &mut st, &mut fired, |st, fired| {
            fired.append(&mut ready);
            self.drain_io(&proc, st, fired);
        });
        proc.marks.wake_after_unlock(st, fired);
        for (other, seen) in &watched {
            if other.work.pending()
                && other.iterations.load(Ordering::Relaxed) == *seen
                && !other.sleep.parked_hint()
            {
                self.drain_other(other);
                if other.work.is_kept() {
                    // Stuck with tasks its core kept on its lanes: the core
                    // here looks for work (help, steal) instead of parking
                    // again (idle.md, "Kept tasks").
                    LOOK.with(|look| look.set(true));
                }
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

    /// One look by the owner (`Driver::look`): the engine's completions or
    /// readiness events (`drain_io`), and due timers, queued first.
    fn drain_all(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
        self.look(proc, st, fired, |st, fired| self.drain_io(proc, st, fired));
    }

    /// Reaps completions (or readiness events) and flushes submissions.
    fn drain_io(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
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
    }

    /// Host hook: wakes processor `p` from `park` (or makes its next `park`
    /// return at once).
    pub(crate) fn unpark(&self, p: usize) {
        // On processor p's own thread the core only unparks p from inside
        // `park` (a task woken there is pushed, and p is the sleeper the
        // push wakes), and `park` returns right after waking its tasks: the
        // eventfd write (and the read it completes) would be wasted.
        // Not ours while the thread's locals are being destroyed (a runtime
        // kept in a thread-local is dropped then, from no processor).
        let own = CURRENT
            .try_with(|c| {
                c.borrow()
                    .as_ref()
                    .is_some_and(|c| c.driver == self.id && c.proc.index == p)
            })
            .unwrap_or(false);
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
}

impl ProcessorIo {
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
        match self.sleep.mode_for_wake() {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::driver::mark_stable_thread;
    use crate::io::{uring, IoBackend};
    use std::time::Instant;

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
                let (rx, tx) = crate::io::test_pipe();
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
