//! No lost wake-up: long ping-pong chains, where every step waits for the
//! previous one, complete. A single lost wake-up stalls a chain forever; the
//! deadline turns that into a failure that says how far the chain got.
//!
//! The chains run with few tasks per processor, so processors keep going to
//! idle sleep and being woken: the push-versus-sleep race of the idle
//! protocol is exercised on nearly every step.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use common::{runtime, serial, with_deadline, Signal, DEADLINE};

const ROUND_TRIPS: u64 = 100_000;

/// Two signals and a ball: side A may move the ball only when it is even,
/// side B only when it is odd, so a skipped or repeated step is caught too.
struct PingPong {
    to_a: Arc<Signal>,
    to_b: Arc<Signal>,
    ball: AtomicU64,
}

impl PingPong {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            to_a: Signal::new(),
            to_b: Signal::new(),
            ball: AtomicU64::new(0),
        })
    }

    /// A's step `i`: expects `2i`, passes `2i + 1` to B.
    fn a_hits(&self, i: u64) {
        assert_eq!(self.ball.load(Ordering::Acquire), 2 * i, "A's turn {i}");
        self.ball.store(2 * i + 1, Ordering::Release);
        self.to_b.notify();
    }

    /// B's step `i`: expects `2i + 1`, passes `2i + 2` to A.
    fn b_hits(&self, i: u64) {
        assert_eq!(self.ball.load(Ordering::Acquire), 2 * i + 1, "B's turn {i}");
        self.ball.store(2 * i + 2, Ordering::Release);
        self.to_a.notify();
    }

    fn progress(self: &Arc<Self>) -> impl Fn() -> String {
        let me = self.clone();
        move || format!("ball at {}", me.ball.load(Ordering::Relaxed))
    }
}

async fn side_a(pp: Arc<PingPong>, n: u64) {
    for i in 0..n {
        pp.a_hits(i);
        pp.to_a.wait().await;
    }
}

async fn side_b(pp: Arc<PingPong>, n: u64) {
    for i in 0..n {
        pp.to_b.wait().await;
        pp.b_hits(i);
    }
}

fn task_to_task(processors: usize) {
    let _serial = serial();
    let pp = PingPong::new();
    let progress = pp.progress();
    with_deadline("task_to_task", DEADLINE, progress, move || {
        let rt = runtime(processors);
        let b = rt.spawn(side_b(pp.clone(), ROUND_TRIPS));
        let a = rt.spawn(side_a(pp.clone(), ROUND_TRIPS));
        rt.block_on(async {
            a.await.unwrap();
            b.await.unwrap();
        });
        assert_eq!(pp.ball.load(Ordering::SeqCst), 2 * ROUND_TRIPS);
    });
}

#[test]
fn ping_pong_task_to_task_1_processor() {
    task_to_task(1);
}

#[test]
fn ping_pong_task_to_task_2_processors() {
    task_to_task(2);
}

#[test]
fn ping_pong_task_to_task_4_processors() {
    task_to_task(4);
}

/// Side A is a task; side B a thread outside the runtime, so every wake of
/// the task comes from outside and every wake of the thread from a processor.
fn task_to_thread(processors: usize) {
    let _serial = serial();
    let pp = PingPong::new();
    let progress = pp.progress();
    with_deadline("task_to_thread", DEADLINE, progress, move || {
        let rt = runtime(processors);
        let thread_side = {
            let pp = pp.clone();
            thread::spawn(move || {
                for i in 0..ROUND_TRIPS {
                    pp.to_b.wait_blocking();
                    pp.b_hits(i);
                }
            })
        };
        let a = rt.spawn(side_a(pp.clone(), ROUND_TRIPS));
        rt.block_on(a).unwrap();
        thread_side.join().unwrap();
        assert_eq!(pp.ball.load(Ordering::SeqCst), 2 * ROUND_TRIPS);
    });
}

#[test]
fn ping_pong_task_to_thread_1_processor() {
    task_to_thread(1);
}

#[test]
fn ping_pong_task_to_thread_2_processors() {
    task_to_thread(2);
}

/// Side B is the future given to `block_on`, which runs on the calling
/// thread rather than on a processor.
#[test]
fn ping_pong_task_to_block_on() {
    let _serial = serial();
    let pp = PingPong::new();
    let progress = pp.progress();
    with_deadline("task_to_block_on", DEADLINE, progress, move || {
        let rt = runtime(2);
        rt.block_on(async {
            let a = fairlane::spawn(side_a(pp.clone(), ROUND_TRIPS));
            side_b(pp.clone(), ROUND_TRIPS).await;
            a.await.unwrap();
        });
        assert_eq!(pp.ball.load(Ordering::SeqCst), 2 * ROUND_TRIPS);
    });
}

/// Many chains at once, one pair per processor more or less: processors
/// fall asleep and are woken all the time, from processors and from outside.
#[test]
fn many_chains_with_idle_processors() {
    const PAIRS: usize = 6;
    const THREAD_PAIRS: usize = 2;
    const STEPS: u64 = 50_000;
    let _serial = serial();
    let pairs: Vec<_> = (0..PAIRS + THREAD_PAIRS).map(|_| PingPong::new()).collect();
    let watched = pairs.clone();
    let progress = move || {
        let balls: Vec<u64> = watched
            .iter()
            .map(|p| p.ball.load(Ordering::Relaxed))
            .collect();
        format!("balls at {balls:?} of {}", 2 * STEPS)
    };
    with_deadline("many_chains", DEADLINE, progress, move || {
        let rt = runtime(4);
        let mut tasks = Vec::new();
        let mut threads = Vec::new();
        for (k, pp) in pairs.iter().enumerate() {
            tasks.push(rt.spawn(side_a(pp.clone(), STEPS)));
            if k < PAIRS {
                tasks.push(rt.spawn(side_b(pp.clone(), STEPS)));
            } else {
                let pp = pp.clone();
                threads.push(thread::spawn(move || {
                    for i in 0..STEPS {
                        pp.to_b.wait_blocking();
                        pp.b_hits(i);
                    }
                }));
            }
        }
        rt.block_on(async {
            for t in tasks {
                t.await.unwrap();
            }
        });
        for t in threads {
            t.join().unwrap();
        }
        for pp in &pairs {
            assert_eq!(pp.ball.load(Ordering::SeqCst), 2 * STEPS);
        }
    });
}
