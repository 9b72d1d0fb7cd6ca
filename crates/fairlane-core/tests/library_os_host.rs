//! The core on a host of its own, as a library OS would run it: its own
//! threads call `Executor::run_processor`, its own park/unpark (a Mutex and
//! Condvar per processor, not `std::thread::park`) and its own clock (a
//! counter). Tasks wake each other across processors and from outside
//! threads; every wake leads to exactly one poll, and shutdown drops every
//! task. Nothing of the `fairlane` std crate is used.
#![cfg(not(loom))]

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use fairlane_core::{Config, Executor, Host};

thread_local! {
    static PROCESSOR: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// A host with an event object per processor.
struct EventHost {
    id: usize,
    clock: AtomicU64,
    events: Vec<(Mutex<bool>, Condvar)>,
}

// SAFETY: a thread names itself processor `p` of this host only between its
// `enter` and `leave` around `run_processor(p)`.
unsafe impl Host for EventHost {
    fn now(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    fn current_processor(&self) -> Option<usize> {
        match PROCESSOR.with(Cell::get) {
            Some((id, p)) if id == self.id => Some(p),
            _ => None,
        }
    }

    fn park(&self, p: usize) {
        let (lock, cvar) = &self.events[p];
        let mut signalled = lock.lock().unwrap();
        while !*signalled {
            signalled = cvar.wait(signalled).unwrap();
        }
        *signalled = false;
    }

    fn unpark(&self, p: usize) {
        let (lock, cvar) = &self.events[p];
        *lock.lock().unwrap() = true;
        cvar.notify_one();
    }

    fn cache_domain(&self, p: usize) -> usize {
        p / 2
    }
}

/// A task that counts its polls and the wakes sent to it: it parks until
/// woken, `rounds` times.
struct Counted {
    shared: Arc<Slot>,
    rounds: u64,
}

#[derive(Default)]
struct Slot {
    waker: Mutex<Option<Waker>>,
    woken: AtomicBool,
    polls: AtomicU64,
    wakes: AtomicU64,
    dropped: AtomicBool,
}

impl Slot {
    /// Wakes the task if it is parked; true if a wake was sent.
    fn wake(&self) -> bool {
        let waker = self.waker.lock().unwrap().take();
        match waker {
            Some(w) => {
                self.wakes.fetch_add(1, Ordering::SeqCst);
                self.woken.store(true, Ordering::SeqCst);
                w.wake();
                true
            }
            None => false,
        }
    }
}

impl Future for Counted {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let polls = self.shared.polls.fetch_add(1, Ordering::SeqCst) + 1;
        if polls > 1 {
            assert!(
                self.shared.woken.swap(false, Ordering::SeqCst),
                "polled without a wake"
            );
        }
        if polls > self.rounds {
            return Poll::Ready(());
        }
        *self.shared.waker.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.shared.dropped.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_cluster_on_a_library_os_host_polls_once_per_wake_and_drops_everything() {
    const PROCESSORS: usize = 4;
    const TASKS: usize = 200;
    const ROUNDS: u64 = 500;
    let host = EventHost {
        id: 7,
        clock: AtomicU64::new(1),
        events: (0..PROCESSORS)
            .map(|_| (Mutex::new(false), Condvar::new()))
            .collect(),
    };
    let cluster = Executor::new(Config::new(PROCESSORS), host).unwrap();
    let processors: Vec<_> = (0..PROCESSORS)
        .map(|p| {
            let cluster = cluster.clone();
            std::thread::spawn(move || {
                PROCESSOR.with(|c| c.set(Some((7, p))));
                cluster.run_processor(p);
                PROCESSOR.with(|c| c.set(None));
            })
        })
        .collect();

    let slots: Vec<Arc<Slot>> = (0..TASKS).map(|_| Arc::new(Slot::default())).collect();
    let handles: Vec<_> = slots
        .iter()
        .map(|s| {
            cluster.spawn(Counted {
                shared: s.clone(),
                rounds: ROUNDS,
            })
        })
        .collect();
    // A parked-forever task, to be dropped by shutdown.
    let forever = Arc::new(Slot::default());
    let _parked = cluster.spawn(Counted {
        shared: forever.clone(),
        rounds: u64::MAX,
    });

    // Outside threads wake the tasks until each has had all its rounds.
    let done = Arc::new(AtomicUsize::new(0));
    let wakers: Vec<_> = (0..3)
        .map(|w| {
            let (slots, done) = (slots.clone(), done.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(120);
                let mut i = w;
                while done.load(Ordering::SeqCst) < TASKS {
                    assert!(
                        Instant::now() < deadline,
                        "the tasks stopped making progress"
                    );
                    let slot = &slots[i % TASKS];
                    slot.wake();
                    i += 3;
                }
            })
        })
        .collect();
    for h in &handles {
        while !h.is_finished() {
            std::thread::yield_now();
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
    for w in wakers {
        w.join().unwrap();
    }
    for s in &slots {
        assert_eq!(s.wakes.load(Ordering::SeqCst), ROUNDS, "wakes sent");
        assert_eq!(
            s.polls.load(Ordering::SeqCst),
            ROUNDS + 1,
            "one poll per wake plus the first"
        );
        assert!(s.dropped.load(Ordering::SeqCst));
    }

    cluster.shutdown();
    for p in processors {
        p.join().unwrap();
    }
    cluster.cancel_all();
    assert!(
        forever.dropped.load(Ordering::SeqCst),
        "shutdown left a parked task alive"
    );
    assert_eq!(cluster.live_tasks(), 0);
    let polls: u64 = (0..PROCESSORS).map(|p| cluster.counters(p).polls).sum();
    assert_eq!(polls, TASKS as u64 * (ROUNDS + 1) + 1);
}
