//! No lost wake-up: long ping-pong chains, where every step waits for the
//! previous one, complete. A single lost wake-up stalls a chain forever; the
//! deadline turns that into a failure that says how far the chain got.
//!
//! The chains run with few tasks per processor, so processors keep going to
//! idle sleep and being woken: the push-versus-sleep race of the idle
//! protocol is exercised on nearly every step.

mod common;

use std::thread;

use common::wake_load::{chains_progress, run_chains, PingPong};
use common::{runtime, serial, with_deadline, DEADLINE};

const ROUND_TRIPS: u64 = 100_000;

fn task_to_task(processors: usize) {
    let _serial = serial();
    let pp = PingPong::new();
    let progress = pp.progress();
    with_deadline("task_to_task", DEADLINE, progress, move || {
        let rt = runtime(processors);
        let b = rt.spawn(pp.clone().side_b(ROUND_TRIPS));
        let a = rt.spawn(pp.clone().side_a(ROUND_TRIPS));
        rt.block_on(async {
            a.await.unwrap();
            b.await.unwrap();
        });
        assert_eq!(pp.ball(), 2 * ROUND_TRIPS);
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
            thread::spawn(move || pp.side_b_blocking(ROUND_TRIPS))
        };
        let a = rt.spawn(pp.clone().side_a(ROUND_TRIPS));
        rt.block_on(a).unwrap();
        thread_side.join().unwrap();
        assert_eq!(pp.ball(), 2 * ROUND_TRIPS);
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
            let a = fairlane::spawn(pp.clone().side_a(ROUND_TRIPS));
            pp.clone().side_b(ROUND_TRIPS).await;
            a.await.unwrap();
        });
        assert_eq!(pp.ball(), 2 * ROUND_TRIPS);
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
    let progress = chains_progress(&pairs, STEPS);
    with_deadline("many_chains", DEADLINE, progress, move || {
        run_chains(&runtime(4), &pairs, PAIRS, STEPS);
    });
}
