//! Rescue: a processor stuck in a long poll reaps nothing, so others drain
//! its engine for it — busy processors every `RESCUE_PERIOD` iterations,
//! sleeping ones every `WATCH_PERIOD` through the watch handshake, which
//! makes some sleeper watch every awake processor with work (driver.md,
//! "Rescuing" and "The watch handshake"). (The scheduler's helping is a
//! different thing.)

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{Driver, Engine, ProcessorIo};
use crate::io::sleep::NO_TIMER;

/// A processor looks at one other processor's ring every this many
/// scheduling iterations, to rescue if that one's owner is busy.
pub(super) const RESCUE_PERIOD: u32 = 256;
/// A rescuer's record of a processor it did not sample (it had no work).
const UNSAMPLED: u64 = u64::MAX;
/// How long a sleeping processor that watches awake processors with work
/// in their engine waits before it looks at them again, to rescue one stuck
/// in a long poll (and how long a wait on the futex with operations in
/// flight but no armed wake-up read lasts).
pub(super) const WATCH_PERIOD: Duration = Duration::from_millis(2);
/// `RESUMED` values.
const RESUMED_NO: u8 = 0;
pub(super) const RESUMED_PARKED: u8 = 1;
pub(super) const RESUMED_WATCHING: u8 = 2;

thread_local! {
    /// This processor thread's scheduling iterations (see `poll_own`).
    static ITERATION: Cell<u64> = const { Cell::new(0) };
    /// Whether this processor thread parked since its last `poll_events`
    /// (`RESUMED_PARKED`), watching others or claimed to watch in one of
    /// those parks (`RESUMED_WATCHING`), or not (`RESUMED_NO`): the core calls
    /// `poll_events` only once it runs its loop again, so the next one
    /// knows that the processor resumes running tasks.
    pub(super) static RESUMED: Cell<u8> = const { Cell::new(RESUMED_NO) };
    /// Set in `park` when a processor this one watched had stopped
    /// scheduling while the core kept tasks on its lanes: the core is to
    /// look for work (`Driver::look_after_park`).
    pub(super) static LOOK: Cell<bool> = const { Cell::new(false) };
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

impl ProcessorIo {
    /// Owner: counts one more scheduling iteration of this processor and
    /// returns the count; every `RESCUE_PERIOD` of them, publishes it for
    /// rescuers.
    #[inline]
    pub(super) fn count_iteration(&self) -> u64 {
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
            self.iterations.store(iteration, Ordering::Relaxed);
        }
        iteration
    }
}

/// Whether this processor thread parked since its last `poll_events`
/// (`announce_if_resumed` then announces).
#[inline(always)]
pub(super) fn resumed() -> bool {
    RESUMED.with(Cell::get) != RESUMED_NO
}

impl Driver {
    /// Owner, at the top of an iteration: if it parked since the last one,
    /// it now resumes running tasks, and announces (the watch handshake).
    #[inline]
    pub(super) fn announce_if_resumed(&self, proc: &ProcessorIo) {
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
    }

    /// Host hook (`Host::keep_watch`): the core of processor `p` (on its
    /// own thread, or on a sleeping processor's, about to hand it tasks)
    /// leaves tasks on `p`'s lanes unannounced if `p` is watched. Yes if its
    /// engine holds work already: the watch handshake then keeps a sleeper
    /// watching it, and `Work::keep` keeps it held until `p` parks or its
    /// core ends the watch (`end_watch`). Called holding no engine's
    /// lock.
    pub(crate) fn keep_watch(&self, p: usize) -> bool {
        let own = self.current().filter(|proc| proc.index == p);
        let handed = own.is_none();
        let Some(proc) = own.or_else(|| self.procs().get(p).cloned()) else {
            return false;
        };
        proc.work.pending() && proc.work.keep(&proc.lock(), handed)
    }

    /// Host hook (`Host::end_watch`), on processor `p`'s thread: the tasks
    /// its core kept are gone or announced (`Work::end_keep`).
    pub(crate) fn end_watch(&self, p: usize) {
        if let Some(proc) = self.current().filter(|proc| proc.index == p) {
            if proc.work.is_kept() {
                proc.work.end_keep(&proc.lock());
            }
        }
    }

    /// Host hook (`Host::look_after_park`), on processor `p`'s thread after
    /// a park: whether that park found a processor it watched stuck while
    /// the core kept tasks on its lanes.
    pub(crate) fn look_after_park(&self, _p: usize) -> bool {
        LOOK.with(|look| look.replace(false))
    }

    /// Looks at one other processor; if its owner has not been through its
    /// loop since the last look (it is stuck in a long poll) and it has
    /// operations or due timers, drains it here: the tasks woken land on the
    /// rescuer's lanes. The age rule of the ready queue, counted in the
    /// rescuer's own scheduling iterations instead of clock ticks.
    pub(super) fn rescue(&self, own: &ProcessorIo) {
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
    pub(super) fn drain_other(&self, other: &ProcessorIo) {
        let Some(mut st) = other.try_lock() else {
            return;
        };
        // Decided again under the lock: the caller's look at `parked_hint`
        // may be stale, and the owner may have committed to sleep since.
        // A parked owner's engine is its own (`SleepState::may_drain`).
        if st.stopped || !other.may_drain(&st) {
            return;
        }
        // What the owner's last look deferred, then the engine's events,
        // then the timers due by a reading of the clock taken after them,
        // whose wakers go first, as in the owner's own looks though
        // without deferring: the owner is stuck (`Driver::look`;
        // time/clock.md, "Due timers before ready I/O").
        let mut ready = Vec::new();
        if other.deferred.swap(false, Ordering::Relaxed) {
            st.take_deferred_wakers(&mut ready);
        }
        match &other.engine {
            Engine::Uring(ring) => {
                ring.reap(other, &mut st, &mut ready);
                if other.unflushed.load(Ordering::Relaxed) != 0 {
                    other.flush(&mut st);
                    ready.append(&mut st.pending_wakers);
                }
            }
            Engine::Poll(poller) => poller.poll_now(&mut st, &mut ready),
        }
        let mut fired = Vec::new();
        self.fire_timers(other, &mut st, &mut fired);
        fired.append(&mut ready);
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
    pub(super) fn watch_list(
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
}
