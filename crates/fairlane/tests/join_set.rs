//! `task::JoinSet`: outputs in the order tasks finish, nothing lost when a
//! `join_next` is dropped, and tasks aborted with the set.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{DropCounter, Signal};
use fairlane::task::JoinSet;

#[fairlane::test(processors = 2)]
async fn outputs_come_in_the_order_tasks_finish() {
    let signals: Vec<Arc<Signal>> = (0..4).map(|_| Signal::new()).collect();
    let mut set = JoinSet::new();
    for (i, s) in signals.iter().enumerate() {
        let s = s.clone();
        set.spawn(async move {
            s.wait().await;
            i
        });
    }
    for i in [2, 0, 3, 1] {
        signals[i].notify();
        assert_eq!(set.join_next().await.unwrap().unwrap(), i);
    }
    assert!(set.join_next().await.is_none());
    assert!(set.is_empty());
}

#[fairlane::test(processors = 2)]
async fn many_tasks_are_all_joined_once() {
    let mut set: JoinSet<u64> = (0..10_000u64).map(|i| async move { i }).collect();
    assert_eq!(set.len(), 10_000);
    let mut seen = vec![false; 10_000];
    while let Some(out) = set.join_next().await {
        let i = out.unwrap() as usize;
        assert!(!seen[i], "task {i} joined twice");
        seen[i] = true;
    }
    assert!(seen.iter().all(|&s| s));
}

#[fairlane::test(processors = 2)]
async fn a_dropped_join_next_loses_no_output() {
    let mut set = JoinSet::new();
    for i in 0..200u64 {
        set.spawn(async move {
            for _ in 0..(i % 7) {
                fairlane::yield_now().await;
            }
            i
        });
    }
    let mut sum = 0;
    let mut dropped = 0;
    while !set.is_empty() {
        match fairlane::time::timeout(Duration::from_micros(20), set.join_next()).await {
            Ok(out) => sum += out.unwrap().unwrap(),
            Err(_) => dropped += 1,
        }
    }
    assert_eq!(
        sum,
        (0..200).sum::<u64>(),
        "{dropped} join_next calls dropped"
    );
}

#[fairlane::test]
async fn abort_all_cancels_and_keeps_finished_outputs() {
    let mut set = JoinSet::new();
    set.spawn(async { Some(1) });
    // Let the first finish before aborting.
    while set.try_join_next().is_none() && !set.is_empty() {
        fairlane::yield_now().await;
    }
    set.spawn(async { Some(2) });
    set.spawn(std::future::pending::<Option<u32>>());
    set.abort_all();
    let mut cancelled = 0;
    while let Some(out) = set.join_next().await {
        match out {
            Ok(v) => assert_eq!(v, Some(2), "only a task that had finished keeps its output"),
            Err(e) => {
                assert!(e.is_cancelled());
                cancelled += 1;
            }
        }
    }
    assert!(cancelled >= 1);
}

#[fairlane::test]
async fn a_panicking_task_is_a_panic_error() {
    let mut set = JoinSet::new();
    set.spawn(async { panic!("boom") });
    let err = set.join_next().await.unwrap().unwrap_err();
    assert!(err.is_panic());
    assert_eq!(common::panic_message(&*err.into_panic()), "boom");
}

#[test]
fn dropping_the_set_aborts_its_tasks() {
    let rt = common::runtime(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for _ in 0..10 {
            let guard = DropCounter(d.clone());
            set.spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await
            });
        }
        drop(set);
        while d.load(Ordering::SeqCst) < 10 {
            fairlane::yield_now().await;
        }
    });
    assert_eq!(dropped.load(Ordering::SeqCst), 10);
}

#[fairlane::test(processors = 2)]
async fn detached_tasks_run_on() {
    let done = Arc::new(AtomicBool::new(false));
    let go = Signal::new();
    let mut set = JoinSet::new();
    let (d, g) = (done.clone(), go.clone());
    set.spawn(async move {
        g.wait().await;
        d.store(true, Ordering::SeqCst);
    });
    set.detach_all();
    drop(set);
    go.notify();
    while !done.load(Ordering::SeqCst) {
        fairlane::yield_now().await;
    }
}

#[fairlane::test]
async fn shutdown_empties_the_set() {
    let mut set = JoinSet::new();
    for _ in 0..5 {
        set.spawn(std::future::pending::<()>());
    }
    set.shutdown().await;
    assert!(set.is_empty());
    assert!(set.join_next().await.is_none());
}
