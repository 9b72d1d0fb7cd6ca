//! Loom model of a processor's sleep in its io_uring ring against a rescuer
//! that drains other processors' rings and a waker that `unpark`s it
//! (driver.md, "Who takes a parked processor's events"). If the rescuer could
//! take the wake-up's completion out of the ring while the owner waits
//! there, the owner would sleep on with nobody left to wake it, which loom
//! reports as a deadlock.
//!
//! The sleep state and the decisions made from it (`commit`, `awake`,
//! `may_drain`, `parked_hint`, `mode`) are the production module
//! `src/io/sleep.rs`, compiled here with loom's atomics. The steps around
//! them are transcribed from `Driver::park`, `Driver::drain_other` and
//! `ProcessorIo::notify`; the kernel side (the completion queue, the eventfd and
//! its armed read, a wait in `io_uring_enter`) is a small model of its own.
//!
//! The other models check the watch handshake (driver.md, "Sleeping
//! rescuers"): a processor going to sleep watches nobody only if no awake
//! processor has work in its engine, and one whose work appears (or that
//! resumes with work) later wakes it; a sleeper woken so that resumes
//! running tasks instead hands the duty on. Each is a liveness check: the
//! sleeper's wait has no timeout, so a missed announcement leaves it
//! blocked, which loom reports as a deadlock.
//!
//! Run: `RUSTFLAGS="--cfg fairlane_loom" cargo test -p fairlane --release --test loom_driver_sleep`
#![cfg(fairlane_loom)]

/// What `sleep.rs` takes from `super::atomics`: loom's atomics here.
mod atomics {
    pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize};
    pub(crate) use std::sync::atomic::Ordering;
}

#[allow(dead_code)]
#[path = "../src/io/sleep.rs"]
mod sleep;

use loom::sync::atomic::AtomicBool;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use sleep::{SleepState, Unwatched, Work, IN_ENGINE, NO_TIMER, ON_FUTEX};
use std::sync::atomic::Ordering;

/// The kernel side of one ring: posted wake-up completions, the eventfd
/// counter, and whether its read is in flight.
#[derive(Default)]
struct Kernel {
    completions: usize,
    counter: u64,
    read_armed: bool,
}

/// One processor: the state its lock guards, its sleep state, the kernel
/// side of its ring (with the wait queue of `io_uring_enter`) and its futex.
struct ProcessorIo {
    state: Mutex<State>,
    sleep: SleepState,
    kernel: Mutex<Kernel>,
    cq_wait: Condvar,
    futex: AtomicBool,
}

/// `driver::State`, the part the handshake uses.
struct State {
    woken: bool,
}

impl ProcessorIo {
    fn new() -> Self {
        Self {
            state: Mutex::new(State { woken: false }),
            sleep: SleepState::new(),
            kernel: Mutex::new(Kernel {
                read_armed: true,
                ..Kernel::default()
            }),
            cq_wait: Condvar::new(),
            futex: AtomicBool::new(false),
        }
    }

    /// `eventfd_signal`: completes the armed read, or counts.
    fn eventfd_write(&self) {
        let mut k = self.kernel.lock().unwrap();
        if std::mem::take(&mut k.read_armed) {
            k.completions += 1;
            self.cq_wait.notify_all();
        } else {
            k.counter += 1;
        }
    }

    /// `ProcessorIo::notify`: wakes the wait the owner chose, or leaves both tokens.
    fn notify(&self) {
        match self.sleep.mode() {
            ON_FUTEX => self.futex.store(true, Ordering::SeqCst),
            IN_ENGINE => self.eventfd_write(),
            _ => {
                self.futex.store(true, Ordering::SeqCst);
                self.eventfd_write();
            }
        }
    }

    /// `Ring::reap` then the flush of the re-armed read, under the lock.
    fn reap(&self, st: &mut State) {
        let mut k = self.kernel.lock().unwrap();
        if std::mem::take(&mut k.completions) > 0 {
            st.woken = true;
            // The re-armed read, submitted: completes at once on a count.
            if k.counter > 0 {
                k.counter = 0;
                k.completions += 1;
                self.cq_wait.notify_all();
            } else {
                k.read_armed = true;
            }
        }
    }

    /// `Ring::wait`: `io_uring_enter` waiting for one completion.
    fn wait_in_ring(&self) {
        let mut k = self.kernel.lock().unwrap();
        while k.completions == 0 {
            k = self.cq_wait.wait(k).unwrap();
        }
    }

    /// `Driver::park` with an operation in flight (so the wait is the
    /// ring's) and no timer.
    fn park(&self) {
        let mut st = self.state.lock().unwrap();
        self.reap(&mut st);
        if std::mem::take(&mut st.woken) {
            return;
        }
        self.sleep.commit(&*st, u64::MAX, IN_ENGINE);
        drop(st);
        self.wait_in_ring();
        let mut st = self.state.lock().unwrap();
        self.sleep.awake(&*st);
        st.woken = false;
        self.reap(&mut st);
    }

    /// `Driver::rescue` (the look without the lock) and `Driver::drain_other`.
    fn rescue(&self) {
        if self.sleep.parked_hint() {
            return;
        }
        let Ok(mut st) = self.state.try_lock() else {
            return;
        };
        if !self.sleep.may_drain(&*st) {
            return;
        }
        self.reap(&mut st);
    }
}

/// Every interleaving with up to this many preemptions (loom's bound; the
/// race needs two: rescuer after its look, owner after its commit).
const PREEMPTIONS: usize = 3;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    builder.check(f);
}

/// The owner parks once (the core committed it to sleep), a waker unparks
/// it once, a rescuer drains its ring once: the park must return.
#[test]
fn helper_does_not_swallow_a_parked_owners_wake_up() {
    model(|| {
        let proc = Arc::new(ProcessorIo::new());
        let waker = {
            let proc = proc.clone();
            thread::spawn(move || proc.notify())
        };
        let rescuer = {
            let proc = proc.clone();
            thread::spawn(move || proc.rescue())
        };
        proc.park();
        waker.join().unwrap();
        rescuer.join().unwrap();
    });
}

/// One processor of the watch models: the sleep state and engine work of
/// `sleep.rs`, the lock they are written under, and a futex token (a wait
/// `ON_FUTEX`, the wait of a sleeper with nothing in its own engine).
struct Watched {
    lock: Mutex<()>,
    sleep: SleepState,
    work: Work,
    token: Mutex<bool>,
    token_cv: Condvar,
}

impl Watched {
    fn new() -> Self {
        Self {
            lock: Mutex::new(()),
            sleep: SleepState::new(),
            work: Work::new(),
            token: Mutex::new(false),
            token_cv: Condvar::new(),
        }
    }

    /// `ProcessorIo::notify` for a futex sleeper: leaves the token, wakes the wait.
    fn notify(&self) {
        *self.token.lock().unwrap() = true;
        self.token_cv.notify_all();
    }

    /// `ProcessorIo::futex_wait` without a timeout: until the token, consumed.
    fn futex_wait(&self) {
        let mut token = self.token.lock().unwrap();
        while !*token {
            token = self.token_cv.wait(token).unwrap();
        }
        *token = false;
    }
}

/// `Driver::announce`: the fence and the count, `needed` (read after the
/// fence), then the claim of one of `sleepers` and its wake-up.
fn announce(unwatched: &Unwatched, sleepers: &[&Arc<Watched>], needed: impl FnOnce() -> bool) {
    if unwatched.anyone_unwatched() && needed() {
        if let Some(sleeper) = unwatched.claim(sleepers.iter().copied(), |w| &w.sleep) {
            sleeper.notify();
        }
    }
}

/// `Driver::work_appeared` with one other processor, `sleeper`.
fn work_appeared(unwatched: &Unwatched, sleeper: &Arc<Watched>) {
    announce(unwatched, &[sleeper], || true);
}

/// `Driver::park` of processor `me` (nothing in its own engine, no timer:
/// a wait on the futex without a timeout), repeated as the core repeats it
/// while nothing wakes it, until its recheck finds `other` to watch (its
/// bounded wait then looks at `other` within `WATCH_PERIOD`: not modelled).
/// A sleeper that is never told of `other`'s work waits forever, which
/// loom reports as a deadlock.
fn park_until_watching(unwatched: &Unwatched, me: &Watched, other: &Watched) {
    loop {
        let st = me.lock.lock().unwrap();
        me.sleep.commit(&*st, u64::MAX, ON_FUTEX);
        let watched = me
            .sleep
            .choose_watched(unwatched, [other], |w| (&w.sleep, &w.work));
        drop(st);
        if !watched.is_empty() {
            return;
        }
        me.futex_wait();
        let st = me.lock.lock().unwrap();
        me.sleep.awake(&*st);
        me.sleep.end_unwatched(unwatched);
        drop(st);
    }
}

/// The watch handshake, first transition: an awake processor submits an
/// operation (`push_entry`: `ProcessorIo::work_added` under its lock, then
/// `Driver::work_appeared`) and is then stuck in a task that never yields,
/// while the other processor goes to sleep with nothing of its own to wait
/// for. The sleeper must end up watching the stuck processor: either its
/// recheck sees the work, or the submitter sees its flag and wakes it.
///
/// Mutations that make this model fail (each checked once by hand, each
/// reported by loom as a deadlock: the sleeper waits forever while the work
/// is stranded): removing the fence of `SleepState::choose_watched`;
/// removing the fence of `Unwatched::anyone_unwatched`; skipping the
/// recheck (no processor found to watch).
#[test]
fn a_processor_whose_work_appears_is_watched() {
    model(|| {
        let unwatched = Arc::new(Unwatched::new());
        let sleeper = Arc::new(Watched::new());
        let busy = Arc::new(Watched::new());
        let submitter = {
            let (unwatched, sleeper, busy) = (unwatched.clone(), sleeper.clone(), busy.clone());
            thread::spawn(move || {
                let st = busy.lock.lock().unwrap();
                let appeared = busy.work.add(&*st) && busy.sleep.parked_until(&*st).is_none();
                drop(st);
                if appeared {
                    work_appeared(&unwatched, &sleeper);
                }
                // Stuck from here on: it never looks at its engine again.
            })
        };
        park_until_watching(&unwatched, &sleeper, &busy);
        submitter.join().unwrap();
    });
}

/// The watch handshake, second transition: a processor parked with work in
/// its engine (which a sleeper's recheck skips: it waits for its own
/// engine) resumes running tasks (`SleepState::awake` in `park`, then the
/// announcement in `poll_own`) and is stuck there; its timer is the work.
/// The sleeper must end up watching it.
///
/// Mutations that make this model fail (each checked once by hand, each a
/// deadlock): the resuming processor not announcing; removing either
/// fence; skipping the recheck.
#[test]
fn a_processor_that_resumes_with_work_is_watched() {
    model(|| {
        let unwatched = Arc::new(Unwatched::new());
        let sleeper = Arc::new(Watched::new());
        let resuming = Arc::new(Watched::new());
        {
            let st = resuming.lock.lock().unwrap();
            assert!(resuming.work.set_next_timer(&*st, 7), "work appeared");
            resuming.sleep.commit(&*st, 7, IN_ENGINE);
        }
        let owner = {
            let (unwatched, sleeper, resuming) =
                (unwatched.clone(), sleeper.clone(), resuming.clone());
            thread::spawn(move || {
                let st = resuming.lock.lock().unwrap();
                resuming.sleep.awake(&*st);
                drop(st);
                if resuming.work.pending() {
                    work_appeared(&unwatched, &sleeper);
                }
                // Stuck from here on.
            })
        };
        park_until_watching(&unwatched, &sleeper, &resuming);
        owner.join().unwrap();
        assert_ne!(resuming.work.next_timer(), NO_TIMER);
    });
}

/// The watch handshake's hand-over: an awake processor submits an
/// operation and is stuck from then on, as in
/// `a_processor_whose_work_appears_is_watched`, while two others go to
/// sleep watching nobody. The submitter claims one of them, but that one
/// (`resumer`) resumes running tasks instead of sleeping again (the core
/// woke it for a task at the same time: its wait is over before it
/// rechecks) and is stuck too. It must hand the duty on: `park` saw its
/// flag taken by an announcer (`SleepState::end_unwatched` returns false)
/// and its `poll_events` announces again (`Driver::hand_over_watch`),
/// waking the other sleeper if the stuck processor has work. The other
/// sleeper must end up watching the stuck processor.
///
/// Mutations that make this model fail (each checked once by hand, each a
/// deadlock): the resumer not handing over when it was claimed; a claim
/// that leaves the flag up (`Unwatched::claim` without its swap, so the
/// resumer never learns it was told); removing either fence; skipping the
/// recheck.
#[test]
fn a_claimed_sleeper_that_resumes_hands_the_watch_on() {
    model(|| {
        let unwatched = Arc::new(Unwatched::new());
        let sleeper = Arc::new(Watched::new());
        let resumer = Arc::new(Watched::new());
        let busy = Arc::new(Watched::new());
        let submitter = {
            let (unwatched, sleeper, resumer, busy) = (
                unwatched.clone(),
                sleeper.clone(),
                resumer.clone(),
                busy.clone(),
            );
            thread::spawn(move || {
                let st = busy.lock.lock().unwrap();
                let appeared = busy.work.add(&*st) && busy.sleep.parked_until(&*st).is_none();
                drop(st);
                if appeared {
                    announce(&unwatched, &[&resumer, &sleeper], || true);
                }
            })
        };
        let resuming = {
            let (unwatched, sleeper, resumer, busy) = (
                unwatched.clone(),
                sleeper.clone(),
                resumer.clone(),
                busy.clone(),
            );
            thread::spawn(move || {
                // `Driver::park`: commit and recheck; the wait returns at
                // once (the core's wake-up), then `awake`.
                let st = resumer.lock.lock().unwrap();
                resumer.sleep.commit(&*st, u64::MAX, ON_FUTEX);
                let watched = resumer
                    .sleep
                    .choose_watched(&unwatched, [&busy], |w| (&w.sleep, &w.work));
                drop(st);
                let st = resumer.lock.lock().unwrap();
                resumer.sleep.awake(&*st);
                let told = watched.is_empty() && !resumer.sleep.end_unwatched(&unwatched);
                drop(st);
                // `poll_own`: resumed after watching, or told to watch.
                if told || !watched.is_empty() {
                    announce(&unwatched, &[&sleeper], || {
                        !busy.sleep.parked_hint() && busy.work.pending()
                    });
                }
                // Stuck from here on.
            })
        };
        park_until_watching(&unwatched, &sleeper, &busy);
        submitter.join().unwrap();
        resuming.join().unwrap();
    });
}

/// The watch handshake reads one word per engine: an awake processor sets
/// a timer (work appears: it announces), then submits an operation (no
/// announcement: its engine held work already), then its timer fires
/// (`Driver::fire_timers`), and it is stuck from then on with the
/// operation in flight. Its engine never went empty, so a sleeper must
/// see the work: a recheck that read the operations and the timer as two
/// words could pair the count from before the submission with the timer
/// gone, see an empty engine, and sleep unwatched with nobody left to
/// announce (`Work::held`).
///
/// Mutations that make this model fail (each checked once by hand, each a
/// deadlock): `Work::pending` reading the two words instead of `held`;
/// removing either fence; skipping the recheck.
#[test]
fn work_that_changes_kind_without_going_empty_is_watched() {
    model(|| {
        let unwatched = Arc::new(Unwatched::new());
        let sleeper = Arc::new(Watched::new());
        let busy = Arc::new(Watched::new());
        let worker = {
            let (unwatched, sleeper, busy) = (unwatched.clone(), sleeper.clone(), busy.clone());
            thread::spawn(move || {
                let st = busy.lock.lock().unwrap();
                let appeared = busy.work.set_next_timer(&*st, 7);
                drop(st);
                if appeared {
                    work_appeared(&unwatched, &sleeper);
                }
                let st = busy.lock.lock().unwrap();
                assert!(!busy.work.add(&*st), "the engine held a timer");
                drop(st);
                let st = busy.lock.lock().unwrap();
                assert!(!busy.work.set_next_timer(&*st, NO_TIMER));
                drop(st);
                // Stuck from here on, the operation in flight.
            })
        };
        park_until_watching(&unwatched, &sleeper, &busy);
        worker.join().unwrap();
    });
}
