//! Loom model of a processor's sleep in its io_uring ring against a helper
//! that drains other processors' rings and a waker that `unpark`s it
//! (driver.md, "Who takes a parked processor's events"). If the helper could
//! take the wake-up's completion out of the ring while the owner waits
//! there, the owner would sleep on with nobody left to wake it, which loom
//! reports as a deadlock.
//!
//! The sleep state and the decisions made from it (`commit`, `awake`,
//! `may_drain`, `parked_hint`, `mode`) are the production module
//! `src/io/sleep.rs`, compiled here with loom's atomics. The steps around
//! them are transcribed from `Driver::park`, `Driver::drain_other` and
//! `Proc::notify`; the kernel side (the completion queue, the eventfd and
//! its armed read, a wait in `io_uring_enter`) is a small model of its own.
//!
//! Run: `RUSTFLAGS="--cfg fairlane_loom" cargo test -p fairlane --release --test loom_driver_sleep`
#![cfg(fairlane_loom)]

/// What `sleep.rs` takes from `super::atomics`: loom's atomics here.
mod atomics {
    pub(crate) use loom::sync::atomic::{AtomicU64, AtomicU8};
    pub(crate) use std::sync::atomic::Ordering;
}

#[allow(dead_code)]
#[path = "../src/io/sleep.rs"]
mod sleep;

use loom::sync::atomic::AtomicBool;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use sleep::{SleepState, IN_ENGINE, ON_FUTEX};
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
struct Proc {
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

impl Proc {
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

    /// `Proc::notify`: wakes the wait the owner chose, or leaves both tokens.
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

    /// `Driver::help` (the look without the lock) and `Driver::drain_other`.
    fn help(&self) {
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
/// race needs two: helper after its look, owner after its commit).
const PREEMPTIONS: usize = 3;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    builder.check(f);
}

/// The owner parks once (the core committed it to sleep), a waker unparks
/// it once, a helper drains its ring once: the park must return.
#[test]
fn helper_does_not_swallow_a_parked_owners_wake_up() {
    model(|| {
        let proc = Arc::new(Proc::new());
        let waker = {
            let proc = proc.clone();
            thread::spawn(move || proc.notify())
        };
        let helper = {
            let proc = proc.clone();
            thread::spawn(move || proc.help())
        };
        proc.park();
        waker.join().unwrap();
        helper.join().unwrap();
    });
}
