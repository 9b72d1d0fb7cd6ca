//! Loom models of a processor's sleep (driver.md, "Sleeping (`park`) and
//! waking (`unpark`)" and "Who takes a parked processor's events"): the
//! owner's `park` choosing its wait (on the futex word with nothing in its
//! engine, in the io_uring ring with operations in flight), against a waker
//! that `unpark`s it, a thread that puts an operation in its engine, and a
//! rescuer that drains other processors' rings. A wake-up that ends in a
//! wait the owner is not in, or that someone else takes out of its ring,
//! leaves it asleep with nobody left to wake it, which loom reports as a
//! deadlock.
//!
//! The sleep state and the decisions made from it (`commit`, `awake`,
//! `own_mode`, `may_drain`, `parked_hint`, `mode`) and the engine's work
//! count (`Work`) are the production module `src/io/sleep.rs`, compiled
//! here with loom's atomics. The steps around them are transcribed from
//! `Driver::park`, `Driver::drain_other`, `ProcessorIo::notify`,
//! `ProcessorIo::wake_if_on_futex`, `ProcessorIo::futex_wait` and
//! `futex_wake` (`src/io/driver/park.rs`) and `push_entry` (`io/uring/op.rs`);
//! the core's idle sleep around `Host::park` (`sem`: `commit`, `sleep`,
//! `wake`, `wake_self`) from fairlane-core's `idle.rs`, with its orderings. The kernel side (the completion queue, the eventfd and its
//! armed read, operations in flight, a wait in `io_uring_enter`, the futex
//! queue) is a small model of its own.
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

use loom::sync::atomic::{AtomicU32, AtomicU8};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use sleep::{SleepState, Unwatched, Work, IN_ENGINE, NO_TIMER, ON_FUTEX};
use std::sync::atomic::Ordering;

/// The kernel side of one ring: posted completions (of the wake-up read,
/// of operations), the eventfd counter, whether its read is in flight, and
/// the operations submitted and not yet complete.
#[derive(Default)]
struct Kernel {
    wake_completions: usize,
    op_completions: usize,
    counter: u64,
    read_armed: bool,
    in_flight: usize,
}

/// One processor: the state its lock guards, its sleep state and engine
/// work, the kernel side of its ring (with the wait queue of
/// `io_uring_enter` and the kernel's own wait for submitted operations),
/// its futex word and the kernel's futex queue, and the core's `sem`.
struct ProcessorIo {
    state: Mutex<State>,
    sleep: SleepState,
    work: Work,
    kernel: Mutex<Kernel>,
    cq_wait: Condvar,
    submitted: Condvar,
    futex: AtomicU32,
    futex_queue: Mutex<()>,
    futex_waiters: Condvar,
    sem: AtomicU8,
}

/// `driver::State`, the part the sleep uses: the wake-up token, whether
/// the wake-up read is armed, and the one operation slot (`None`, or
/// `Some(abandoned)`: its future was dropped, so its completion wakes
/// nobody).
struct State {
    woken: bool,
    wake_armed: bool,
    op: Option<bool>,
}

/// fairlane-core's `sem` states (`idle.rs`).
const AWAKE: u8 = 0;
const WAKE: u8 = 1;
const ASLEEP: u8 = 2;

impl ProcessorIo {
    fn new() -> Self {
        Self {
            state: Mutex::new(State {
                woken: false,
                wake_armed: true,
                op: None,
            }),
            sleep: SleepState::new(),
            work: Work::new(),
            kernel: Mutex::new(Kernel {
                read_armed: true,
                ..Kernel::default()
            }),
            cq_wait: Condvar::new(),
            submitted: Condvar::new(),
            futex: AtomicU32::new(0),
            futex_queue: Mutex::new(()),
            futex_waiters: Condvar::new(),
            sem: AtomicU8::new(AWAKE),
        }
    }

    /// A processor with one operation in flight before the model starts,
    /// `abandoned` or not (a read of an empty pipe, say).
    fn with_op_in_flight(abandoned: bool) -> Self {
        let proc = Self::new();
        {
            let mut st = proc.state.lock().unwrap();
            st.op = Some(abandoned);
            proc.work.add(&*st);
        }
        proc.kernel.lock().unwrap().in_flight = 1;
        proc
    }

    /// `eventfd_signal`: completes the armed read, or counts.
    fn eventfd_write(&self) {
        let mut k = self.kernel.lock().unwrap();
        if std::mem::take(&mut k.read_armed) {
            k.wake_completions += 1;
            self.cq_wait.notify_all();
        } else {
            k.counter += 1;
        }
    }

    /// The kernel completes the operation in flight (once it is submitted).
    fn complete_op(&self) {
        let mut k = self.kernel.lock().unwrap();
        while k.in_flight == 0 {
            k = self.submitted.wait(k).unwrap();
        }
        k.in_flight -= 1;
        k.op_completions += 1;
        self.cq_wait.notify_all();
    }

    /// `ProcessorIo::notify`: wakes the wait the owner chose, or leaves both
    /// tokens.
    fn notify(&self) {
        match self.sleep.mode_for_wake() {
            ON_FUTEX => self.futex_wake(),
            IN_ENGINE => self.eventfd_write(),
            _ => {
                self.futex_wake();
                self.eventfd_write();
            }
        }
    }

    /// `ProcessorIo::wake_if_on_futex`.
    fn wake_if_on_futex(&self) {
        if self.sleep.mode() == ON_FUTEX {
            self.futex_wake();
        }
    }

    /// `ProcessorIo::futex_wake`: the word set to 1 (Release), then
    /// `FUTEX_WAKE` (the kernel wakes a waiter queued on the word, under
    /// its queue's lock). The store is a swap here: loom orders a plain
    /// store only after the stores its thread has seen, so it could place
    /// this one before the waiter's swap to 0 that it did not see and let
    /// the kernel's check read that 0 after this wake (C++ orders all
    /// writes to the word in one order, an RMW's right after what it read;
    /// the swap gives loom that order, and readers see the same values).
    fn futex_wake(&self) {
        self.futex.swap(1, Ordering::Release);
        let _queue = self.futex_queue.lock().unwrap();
        self.futex_waiters.notify_one();
    }

    /// `ProcessorIo::futex_wait` without a timeout: a pending token returns
    /// at once; else `FUTEX_WAIT` expecting 0 (the kernel reads the word
    /// under its queue's lock and sleeps only if it is still 0, until one
    /// wake); the token consumed either way.
    fn futex_wait(&self) {
        // `if self.futex.swap(0, Ordering::Acquire) == 1 { return; }`
        if self.futex.swap(0, Ordering::Acquire) == 1 {
            return;
        }
        // `libc::syscall(SYS_futex, .., FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 0, ..)`
        {
            let queue = self.futex_queue.lock().unwrap();
            if self.futex.load(Ordering::Relaxed) == 0 {
                drop(self.futex_waiters.wait(queue).unwrap());
            }
        }
        // `self.futex.swap(0, Ordering::Acquire);`
        self.futex.swap(0, Ordering::Acquire);
    }

    /// `Ring::reap` then the flush of the re-armed read, under the lock:
    /// returns how many wakers it collected (completed operations whose
    /// future still waits).
    fn reap(&self, st: &mut State) -> usize {
        let mut fired = 0;
        let mut k = self.kernel.lock().unwrap();
        if std::mem::take(&mut k.wake_completions) > 0 {
            st.woken = true;
            st.wake_armed = false;
            // The re-armed read, submitted: completes at once on a count.
            if k.counter > 0 {
                k.counter = 0;
                k.wake_completions += 1;
                self.cq_wait.notify_all();
            } else {
                k.read_armed = true;
            }
            st.wake_armed = true;
        }
        if std::mem::take(&mut k.op_completions) > 0 {
            let abandoned = st.op.take().expect("a completion names its slot");
            self.work.remove(&*st, 1);
            fired += usize::from(!abandoned);
        }
        fired
    }

    /// `Ring::wait`: `io_uring_enter` waiting for one completion.
    fn wait_in_ring(&self) {
        let mut k = self.kernel.lock().unwrap();
        while k.wake_completions + k.op_completions == 0 {
            k = self.cq_wait.wait(k).unwrap();
        }
    }

    /// `Driver::park` without timers, on a ring whose wake-up read arms
    /// (the flush submits it at once) and that holds no unsubmitted entry.
    /// Returns the wakers it fired.
    fn park(&self) -> usize {
        // `let mut st = proc.lock(); self.drain_all(..)`.
        let mut st = self.state.lock().unwrap();
        let fired = self.reap(&mut st);
        // `let woken = take(&mut st.woken); if woken || !fired.is_empty()`.
        if std::mem::take(&mut st.woken) || fired > 0 {
            return fired;
        }
        // `let until = proc.work.next_timer()`, `in_flight`, `wake_armed`
        // (`Engine::Uring`, nothing left unsubmitted), `mode`, `commit`.
        let until = self.work.next_timer();
        let in_flight = self.work.outstanding() != 0;
        let wake_armed = st.wake_armed;
        let mode = if in_flight && wake_armed {
            IN_ENGINE
        } else {
            ON_FUTEX
        };
        self.sleep.commit(&*st, until, mode);
        drop(st);
        // `match &proc.engine { _ if own_mode() == ON_FUTEX => futex_wait, ..
        // => ring.wait }`.
        if self.sleep.own_mode() == ON_FUTEX {
            self.futex_wait();
        } else {
            self.wait_in_ring();
        }
        // `proc.sleep.awake(..); st.woken = false; self.drain_all(..)`.
        let mut st = self.state.lock().unwrap();
        self.sleep.awake(&*st);
        st.woken = false;
        self.reap(&mut st)
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

    /// `push_entry` on a thread that is not this processor's (an operation
    /// submitted from a foreign thread), under the lock: the slot and the
    /// entry (`st.ops.insert`, `ring.push`), `proc.work_added`, the flush
    /// (`if !local { proc.flush(..) }`: submitted at once, as by a stable
    /// thread), then `proc.wake_if_on_futex()`.
    fn submit_from_another_thread(&self) {
        let mut st = self.state.lock().unwrap();
        st.op = Some(false);
        // Whether work appeared is the watch handshake's (the models below).
        let _appeared = self.work.add(&*st) && self.sleep.parked_until(&*st).is_none();
        {
            let mut k = self.kernel.lock().unwrap();
            k.in_flight += 1;
            self.submitted.notify_all();
        }
        self.wake_if_on_futex();
        drop(st);
    }

    /// The core's idle sleep for this processor (`Scheduler`'s idle step:
    /// `idle.commit(p)`, refused if a waker came first, then
    /// `idle.sleep(p, ..)`): parks until a waker sets `WAKE`. A task woken
    /// inside `park` is pushed by this thread, which ends its own sleep
    /// (`Idle::wake_self`).
    fn idle_sleep(&self) {
        if self
            .sem
            .compare_exchange(AWAKE, ASLEEP, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        while self.sem.load(Ordering::Acquire) != WAKE {
            if self.park() > 0 && self.sem.load(Ordering::Relaxed) == ASLEEP {
                self.sem.swap(WAKE, Ordering::AcqRel);
            }
        }
    }

    /// `Idle::wake` for this processor: `sem` to `WAKE` (AcqRel), and
    /// `Host::unpark` (`Driver::unpark`: `notify`) if it had committed to
    /// sleep.
    fn idle_wake(&self) {
        if self.sem.swap(WAKE, Ordering::AcqRel) == ASLEEP {
            self.notify();
        }
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

/// Runs `step` on `proc` in a new thread.
fn spawn_on(proc: &Arc<ProcessorIo>, step: fn(&ProcessorIo)) -> thread::JoinHandle<()> {
    let proc = proc.clone();
    thread::spawn(move || step(&proc))
}

/// The owner parks once with an operation in flight (so its wait is the
/// ring's; the operation never completes), a waker unparks it once, a
/// rescuer drains its ring once: the park must return.
///
/// Fails (a deadlock) with `may_drain` answering true.
#[test]
fn helper_does_not_swallow_a_parked_owners_wake_up() {
    model(|| {
        let proc = Arc::new(ProcessorIo::with_op_in_flight(false));
        let waker = spawn_on(&proc, ProcessorIo::notify);
        let rescuer = spawn_on(&proc, ProcessorIo::rescue);
        proc.park();
        waker.join().unwrap();
        rescuer.join().unwrap();
    });
}

/// The owner, with nothing in its engine, parks once (its wait is the
/// futex's) while a waker unparks it once, before, during or after its
/// choice: the park must return.
///
/// Fails (a deadlock) with `notify` not waking the futex when it reads
/// `ON_FUTEX`, or when it reads `AWAKE`; with `futex_wake` not setting the
/// word before it wakes (a wake before the wait is lost).
#[test]
fn a_wake_ends_a_futex_wait_whenever_it_comes() {
    model(|| {
        let proc = Arc::new(ProcessorIo::new());
        let waker = spawn_on(&proc, ProcessorIo::notify);
        proc.park();
        waker.join().unwrap();
    });
}

/// The owner, with nothing in its engine, goes to sleep (the core's idle
/// sleep: it parks until a task of its own is woken) while another thread
/// submits an operation into its engine, which the kernel then completes.
/// Either the owner's choice under the lock sees the operation (it waits
/// in the ring, which its completion ends), or the submitter sees
/// `ON_FUTEX` and wakes it to choose again: the owner must take the
/// completion and wake its task.
///
/// Fails (a deadlock) with the submitter not calling `wake_if_on_futex`,
/// or reading the mode before it takes the lock; with the owner counting
/// the operations in flight before it takes its lock; with `park` always
/// choosing the futex.
#[test]
fn work_put_in_a_futex_sleepers_engine_wakes_it() {
    model(|| {
        let proc = Arc::new(ProcessorIo::new());
        let submitter = spawn_on(&proc, ProcessorIo::submit_from_another_thread);
        let kernel = spawn_on(&proc, ProcessorIo::complete_op);
        proc.idle_sleep();
        submitter.join().unwrap();
        kernel.join().unwrap();
    });
}

/// Two parks in a row under one idle commit, the first in the ring, the
/// second on the futex: the owner goes to sleep with an operation in flight
/// whose future was dropped, so it waits in the ring; the kernel completes
/// the operation, the park returns having woken nobody, the core's loop
/// reads `sem` still `ASLEEP` and parks again, now with nothing in the
/// engine: on the futex. A waker (`Idle::wake`) races both. Its `notify`
/// may read the first park's `IN_ENGINE`, and its eventfd write must then
/// still end the second park, or the core's reread of `sem` must see its
/// `WAKE`.
///
/// The race: the waker swaps `sem` to `WAKE` and reads `IN_ENGINE`; the
/// first park ends on the completion and stores `AWAKE`; the core's Acquire
/// load of `sem` reads `ASLEEP`; the second park waits on the futex; the
/// eventfd write lands in the ring. Each side stores one word and then loads
/// the other's, and only the fence of `SleepState::awake` on the owner's
/// side and that of `SleepState::mode_for_wake` on the waker's rule the
/// reorder out. Fails (a deadlock) with either fence removed, and with
/// `notify` skipping the futex wake for `ON_FUTEX`.
#[test]
fn a_wake_racing_a_park_from_the_ring_to_the_futex_is_not_lost() {
    model(|| {
        let proc = Arc::new(ProcessorIo::with_op_in_flight(true));
        let waker = spawn_on(&proc, ProcessorIo::idle_wake);
        let kernel = spawn_on(&proc, ProcessorIo::complete_op);
        proc.idle_sleep();
        waker.join().unwrap();
        kernel.join().unwrap();
    });
}

/// The other way round: the owner goes to sleep with nothing in its engine
/// (on the futex); another thread submits an operation that stays in
/// flight, sees `ON_FUTEX` and wakes the futex; the park returns having
/// woken nobody, and the core parks again, now in the ring. A waker races
/// both; its `notify` may read the first park's `ON_FUTEX`, and its futex
/// wake must then still end the second park, or the core's reread of `sem`
/// must see its `WAKE`.
///
/// The race, the same reorder: the waker swaps `sem` and reads `ON_FUTEX`;
/// the submitter's futex wake ends the first park; the core reads `sem`
/// still `ASLEEP`; the second park waits in the ring; the waker's futex
/// wake comes after. Fails with either fence removed, and with `notify`
/// skipping the eventfd write for `IN_ENGINE`.
#[test]
fn a_wake_racing_a_park_from_the_futex_to_the_ring_is_not_lost() {
    model(|| {
        let proc = Arc::new(ProcessorIo::new());
        let waker = spawn_on(&proc, ProcessorIo::idle_wake);
        let submitter = spawn_on(&proc, ProcessorIo::submit_from_another_thread);
        proc.idle_sleep();
        waker.join().unwrap();
        submitter.join().unwrap();
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
