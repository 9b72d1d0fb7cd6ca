//! The cooperative budget's public items, with tokio's shapes: a loop
//! over always-ready awaits that consumes budget yields (so a timeout
//! around it fires), `cooperative` futures spend it, `unconstrained` ones
//! never yield for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use fairlane::task::coop::{consume_budget, cooperative, has_budget_remaining, unconstrained};

/// Counts the polls of the future it wraps.
struct CountPolls<F> {
    future: Pin<Box<F>>,
    polls: Arc<AtomicUsize>,
}

impl<F: Future> Future for CountPolls<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.future.as_mut().poll(cx)
    }
}

fn runtime() -> fairlane::Runtime {
    fairlane::Runtime::builder().processors(1).build().unwrap()
}

/// A thousand always-ready cooperative awaits in one task: it yields
/// every 128, so the task is polled several times; unconstrained, once.
#[test]
fn cooperative_awaits_yield_and_unconstrained_ones_do_not() {
    let rt = runtime();
    let spin = || async {
        for _ in 0..1_000 {
            cooperative(async {}).await;
        }
    };
    let polls = Arc::new(AtomicUsize::new(0));
    rt.block_on(rt.spawn(CountPolls {
        future: Box::pin(spin()),
        polls: polls.clone(),
    }))
    .unwrap();
    assert!(polls.load(Ordering::Relaxed) >= 1_000 / 128, "{polls:?}");
    let polls = Arc::new(AtomicUsize::new(0));
    rt.block_on(rt.spawn(CountPolls {
        future: Box::pin(unconstrained(spin())),
        polls: polls.clone(),
    }))
    .unwrap();
    assert_eq!(polls.load(Ordering::Relaxed), 1);
}

/// A loop over an always-ready tokio channel (tokio's budget never runs out
/// on fairlane) that consumes fairlane's budget yields, so a timeout around
/// it fires.
#[test]
fn a_timeout_interrupts_a_loop_that_consumes_budget() {
    let rt = runtime();
    let elapsed = rt
        .block_on(
            rt.spawn(fairlane::time::timeout(Duration::from_millis(20), async {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
                loop {
                    tx.send(()).unwrap();
                    rx.recv().await;
                    consume_budget().await;
                }
            })),
        )
        .unwrap();
    assert!(elapsed.is_err());
}

/// Outside a processor there is no budget to run out.
#[test]
fn outside_a_processor_the_budget_never_runs_out() {
    assert!(has_budget_remaining());
    futures_lite::future::block_on(async {
        for _ in 0..1_000 {
            consume_budget().await;
        }
    });
    assert!(has_budget_remaining());
}

/// A `block_on` future has a budget per poll, as a task has: spending it
/// all makes `has_budget_remaining` false, and the next cooperative await
/// yields (the future is polled again with a new budget) on both flavors.
#[test]
fn a_block_on_future_has_a_budget_of_its_own() {
    for mut builder in [
        fairlane::runtime::Builder::new_current_thread(),
        fairlane::runtime::Builder::new_multi_thread(),
    ] {
        let rt = builder.worker_threads(1).build().unwrap();
        let polls = Arc::new(AtomicUsize::new(0));
        let body = async {
            assert!(has_budget_remaining());
            for _ in 0..128 {
                consume_budget().await;
            }
            assert!(!has_budget_remaining());
            consume_budget().await;
            assert!(has_budget_remaining(), "a new poll has a new budget");
        };
        rt.block_on(CountPolls {
            future: Box::pin(body),
            polls: polls.clone(),
        });
        assert_eq!(polls.load(Ordering::Relaxed), 2);
    }
    // Outside any block_on, no budget again.
    assert!(has_budget_remaining());
}
