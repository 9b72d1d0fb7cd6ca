//! Wake during poll, as a stress test at scale (`fairlane-core`'s
//! `tests/loom_task.rs` model-checks the task cell's transitions in small
//! cases). A task woken while it is being polled, by itself
//! or by another thread, however many times, must be re-queued exactly once,
//! after the poll: never polled twice at the same time (an `in_poll` flag
//! must never be found set when a poll begins), never lost, and never polled
//! again after it completed.

// Waking through a clone (`wake`, which consumes the waker) is a different
// path in the task cell than `wake_by_ref`; the tests use both on purpose.
#![allow(clippy::waker_clone_wake)]

mod common;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::thread;

use common::{runtime, serial, with_deadline, Rng, DEADLINE};

/// A wake request to the outside waker threads; `done` is set once the wake
/// has been delivered.
struct Request {
    waker: Waker,
    by_value: bool,
    done: Arc<AtomicBool>,
}

/// Threads outside the runtime that wake tasks on request.
#[derive(Default)]
struct WakerService {
    queue: Mutex<VecDeque<Request>>,
    ready: Condvar,
    stop: AtomicBool,
    served: AtomicU64,
}

impl WakerService {
    fn start(threads: usize) -> (Arc<Self>, Vec<thread::JoinHandle<()>>) {
        let service = Arc::new(Self::default());
        let handles = (0..threads)
            .map(|_| {
                let service = service.clone();
                thread::spawn(move || service.serve())
            })
            .collect();
        (service, handles)
    }

    fn serve(&self) {
        loop {
            let request = {
                let mut queue = self.queue.lock().unwrap();
                loop {
                    if let Some(r) = queue.pop_front() {
                        break r;
                    }
                    if self.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    queue = self.ready.wait(queue).unwrap();
                }
            };
            if request.by_value {
                request.waker.wake();
            } else {
                request.waker.wake_by_ref();
            }
            self.served.fetch_add(1, Ordering::Relaxed);
            request.done.store(true, Ordering::Release);
        }
    }

    /// Has a waker thread wake `waker`, and returns once it has.
    fn wake_and_wait(&self, waker: &Waker, by_value: bool) {
        let done = Arc::new(AtomicBool::new(false));
        self.queue.lock().unwrap().push_back(Request {
            waker: waker.clone(),
            by_value,
            done: done.clone(),
        });
        self.ready.notify_one();
        while !done.load(Ordering::Acquire) {
            thread::yield_now();
        }
    }

    fn shut_down(&self, handles: Vec<thread::JoinHandle<()>>) {
        self.stop.store(true, Ordering::SeqCst);
        {
            let _queue = self.queue.lock().unwrap();
            self.ready.notify_all();
        }
        for h in handles {
            h.join().unwrap();
        }
    }
}

#[derive(Default)]
struct Stats {
    polls: AtomicU64,
    concurrent: AtomicU64,
    in_poll: AtomicBool,
}

impl Stats {
    fn enter(&self) -> u64 {
        if self.in_poll.swap(true, Ordering::AcqRel) {
            self.concurrent.fetch_add(1, Ordering::Relaxed);
        }
        self.polls.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn leave(&self) {
        self.in_poll.store(false, Ordering::Release);
    }
}

/// Every poll but the last is woken during the poll, in one of several
/// ways; so the task must be polled exactly `rounds + 1` times.
struct WokenDuringPoll {
    stats: Arc<Stats>,
    service: Arc<WakerService>,
    rng: Rng,
    rounds: u64,
}

impl Future for WokenDuringPoll {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let n = self.stats.enter();
        if n > self.rounds {
            self.stats.leave();
            return Poll::Ready(());
        }
        let waker = cx.waker();
        match self.rng.below(6) {
            0 => waker.wake_by_ref(),
            1 => waker.clone().wake(),
            2 => {
                // Many wakes in one poll: still one re-queue.
                for _ in 0..3 {
                    waker.wake_by_ref();
                }
                waker.clone().wake();
            }
            3 => self.service.wake_and_wait(waker, false),
            4 => self.service.wake_and_wait(waker, true),
            _ => {
                // Both: ourselves and another thread.
                waker.wake_by_ref();
                self.service.wake_and_wait(waker, false);
                waker.wake_by_ref();
            }
        }
        self.stats.leave();
        Poll::Pending
    }
}

fn woken_during_poll(processors: usize) {
    const TASKS: usize = 64;
    const ROUNDS: u64 = 10_000;
    let _serial = serial();
    let stats: Arc<Vec<Arc<Stats>>> = Arc::new((0..TASKS).map(|_| Arc::default()).collect());
    let watched = stats.clone();
    let progress = move || {
        let polls: u64 = watched
            .iter()
            .map(|s| s.polls.load(Ordering::Relaxed))
            .sum();
        format!("{polls} of {} polls", TASKS as u64 * (ROUNDS + 1))
    };
    let s = stats.clone();
    with_deadline("woken_during_poll", DEADLINE, progress, move || {
        let rt = runtime(processors);
        let (service, threads) = WakerService::start(2);
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                rt.spawn(WokenDuringPoll {
                    stats: s[i].clone(),
                    service: service.clone(),
                    rng: Rng::new(i as u64 + 1),
                    rounds: ROUNDS,
                })
            })
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.unwrap();
            }
        });
        assert!(service.served.load(Ordering::Relaxed) > 0);
        service.shut_down(threads);
    });
    for (i, s) in stats.iter().enumerate() {
        assert_eq!(
            s.concurrent.load(Ordering::SeqCst),
            0,
            "task {i} was polled concurrently with itself"
        );
        assert_eq!(
            s.polls.load(Ordering::SeqCst),
            ROUNDS + 1,
            "task {i}: a wake during a poll must re-queue the task exactly once"
        );
    }
}

#[test]
fn woken_during_poll_1_processor() {
    woken_during_poll(1);
}

#[test]
fn woken_during_poll_2_processors() {
    woken_during_poll(2);
}

#[test]
fn woken_during_poll_4_processors() {
    woken_during_poll(4);
}

/// A task that wakes itself on every poll while other tasks and outside
/// threads wake it at random moments: it must never be polled concurrently,
/// must complete, must not be polled once complete, and every poll needs a
/// wake behind it.
struct SelfWaking {
    stats: Arc<Stats>,
    waker: Arc<OnceLock<Waker>>,
    self_wakes: Arc<AtomicU64>,
    polls_to_complete: u64,
}

impl Future for SelfWaking {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let n = self.stats.enter();
        let _ = self.waker.set(cx.waker().clone());
        if n >= self.polls_to_complete {
            self.stats.leave();
            return Poll::Ready(());
        }
        self.self_wakes.fetch_add(1, Ordering::Relaxed);
        cx.waker().wake_by_ref();
        self.stats.leave();
        Poll::Pending
    }
}

fn chaos(processors: usize) {
    const TARGETS: usize = 100;
    const POLLS: u64 = 10_000;
    const HAMMER_TASKS: usize = 2;
    const HAMMER_THREADS: usize = 2;
    let _serial = serial();
    let stats: Vec<Arc<Stats>> = (0..TARGETS).map(|_| Arc::default()).collect();
    let wakers: Arc<Vec<Arc<OnceLock<Waker>>>> =
        Arc::new((0..TARGETS).map(|_| Arc::default()).collect());
    let self_wakes = Arc::new(AtomicU64::new(0));
    let outside_wakes = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let all_stats = stats.clone();
    let watched = stats.clone();
    let (w, sw, ow, d) = (
        wakers.clone(),
        self_wakes.clone(),
        outside_wakes.clone(),
        done.clone(),
    );
    let progress = move || {
        let polls: u64 = watched
            .iter()
            .map(|s| s.polls.load(Ordering::Relaxed))
            .sum();
        format!("{polls} polls")
    };
    with_deadline("chaos", DEADLINE, progress, move || {
        let rt = runtime(processors);
        let targets: Vec<_> = (0..TARGETS)
            .map(|i| {
                let (w, sw, d) = (w.clone(), sw.clone(), d.clone());
                let target = SelfWaking {
                    stats: all_stats[i].clone(),
                    waker: w[i].clone(),
                    self_wakes: sw,
                    polls_to_complete: POLLS,
                };
                rt.spawn(async move {
                    target.await;
                    d.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        let random_wake = |rng: &mut Rng, w: &[Arc<OnceLock<Waker>>]| -> bool {
            match w[rng.below(w.len())].get() {
                Some(waker) => {
                    if rng.next_u64() & 1 == 0 {
                        waker.wake_by_ref();
                    } else {
                        waker.clone().wake();
                    }
                    true
                }
                None => false,
            }
        };
        let hammer_tasks: Vec<_> = (0..HAMMER_TASKS)
            .map(|k| {
                let (w, ow, d) = (w.clone(), ow.clone(), d.clone());
                rt.spawn(async move {
                    let mut rng = Rng::new(k as u64 + 100);
                    while d.load(Ordering::SeqCst) < TARGETS {
                        for _ in 0..16 {
                            if random_wake(&mut rng, &w) {
                                ow.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        fairlane::yield_now().await;
                    }
                })
            })
            .collect();
        let hammer_threads: Vec<_> = (0..HAMMER_THREADS)
            .map(|k| {
                let (w, ow, d) = (w.clone(), ow.clone(), d.clone());
                thread::spawn(move || {
                    let mut rng = Rng::new(k as u64 + 200);
                    while d.load(Ordering::SeqCst) < TARGETS {
                        if random_wake(&mut rng, &w) {
                            ow.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // Wakes after completion are no-ops.
                    for _ in 0..1000 {
                        random_wake(&mut rng, &w);
                    }
                })
            })
            .collect();
        rt.block_on(async {
            for t in targets.into_iter().chain(hammer_tasks) {
                t.await.unwrap();
            }
        });
        for t in hammer_threads {
            t.join().unwrap();
        }
    });
    let wakes = self_wakes.load(Ordering::SeqCst) + outside_wakes.load(Ordering::SeqCst);
    let mut polls = 0;
    for (i, s) in stats.iter().enumerate() {
        assert_eq!(
            s.concurrent.load(Ordering::SeqCst),
            0,
            "task {i} was polled concurrently with itself"
        );
        assert_eq!(
            s.polls.load(Ordering::SeqCst),
            POLLS,
            "task {i} must be polled until it completes and never after"
        );
        polls += s.polls.load(Ordering::SeqCst);
    }
    assert!(
        polls <= TARGETS as u64 + wakes,
        "{polls} polls for {wakes} wakes and {TARGETS} first polls"
    );
}

#[test]
fn woken_at_random_by_others_while_waking_itself_2_processors() {
    chaos(2);
}

#[test]
fn woken_at_random_by_others_while_waking_itself_4_processors() {
    chaos(4);
}

/// A waker that counts its wakes and forwards them to the task's own.
struct Forwarding {
    inner: Waker,
    wakes: AtomicUsize,
}

impl std::task::Wake for Forwarding {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.inner.wake_by_ref();
    }
}

/// Polls `yield_now` with a waker of its own (as a combinator that tracks
/// which of its children woke does), then with the task's.
struct YieldThroughAWrapper {
    inner: Option<Pin<Box<fairlane::task::YieldNow>>>,
    wrapper: Option<Arc<Forwarding>>,
    polls: u32,
}

impl Future for YieldThroughAWrapper {
    type Output = usize;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls += 1;
        let wrapper = self
            .wrapper
            .get_or_insert_with(|| {
                Arc::new(Forwarding {
                    inner: cx.waker().clone(),
                    wakes: AtomicUsize::new(0),
                })
            })
            .clone();
        let waker = Waker::from(wrapper.clone());
        let mut inner_cx = Context::from_waker(&waker);
        let inner = self
            .inner
            .get_or_insert_with(|| Box::pin(fairlane::task::yield_now()));
        match inner.as_mut().poll(&mut inner_cx) {
            Poll::Ready(()) => Poll::Ready(wrapper.wakes.load(Ordering::SeqCst)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A yield whose waker is not the task's own (a combinator's) must wake
/// that waker: the task runs again only because the wrapper forwards the
/// wake, and the combinator learns which child to poll. The runtime may
/// requeue a task without a wake only for the task's own waker.
#[test]
fn a_yield_through_another_waker_wakes_that_waker() {
    let _serial = serial();
    with_deadline("yield_through_a_wrapper", DEADLINE, String::new, || {
        for processors in [1, 2] {
            let rt = runtime(processors);
            let wakes = rt
                .block_on(rt.spawn(YieldThroughAWrapper {
                    inner: None,
                    wrapper: None,
                    polls: 0,
                }))
                .unwrap();
            assert_eq!(wakes, 1, "the yield must wake the waker it was polled with");
        }
    });
}

/// Counts the polls of the future it wraps.
struct CountPolls<F> {
    inner: Pin<Box<F>>,
    polls: Arc<AtomicU64>,
}

impl<F: Future> Future for CountPolls<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        self.inner.as_mut().poll(cx)
    }
}

/// A task yielding with its own waker (the requeue the runtime does without
/// a wake) runs again exactly once per yield, and lets the other ready
/// tasks run in between: 1,000 yields take exactly 1,001 polls, and two
/// such tasks on one processor interleave.
#[test]
fn a_yield_with_the_tasks_own_waker_requeues_it_once_behind_the_others() {
    let _serial = serial();
    with_deadline("yield_own_waker", DEADLINE, String::new, || {
        let rt = runtime(1);
        let log = Arc::new(Mutex::new(Vec::new()));
        let polls: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::default()).collect();
        let tasks: Vec<_> = (0..2u8)
            .map(|id| {
                let log = log.clone();
                rt.spawn(CountPolls {
                    inner: Box::pin(async move {
                        for _ in 0..1_000 {
                            log.lock().unwrap().push(id);
                            fairlane::task::yield_now().await;
                        }
                    }),
                    polls: polls[usize::from(id)].clone(),
                })
            })
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.unwrap();
            }
        });
        for (id, p) in polls.iter().enumerate() {
            assert_eq!(
                p.load(Ordering::SeqCst),
                1_001,
                "task {id}: one poll per yield, plus the last"
            );
        }
        let log = log.lock().unwrap();
        // The ready queue is FIFO up to ties between its lanes: each yield
        // goes behind the other task, give or take a place.
        for window in log[..1_990].windows(10) {
            assert!(
                window.contains(&0) && window.contains(&1),
                "a yielding task kept the processor: {window:?}"
            );
        }
    });
}
