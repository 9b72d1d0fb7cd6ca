//! `time::Interval` as tokio's: its schedule, what each
//! `MissedTickBehavior` does with ticks that come late, and the `reset`
//! family; and `time::advance` firing the timers it made due before it
//! returns. All on a paused clock of a current-thread runtime, polling by
//! hand where tokio's tests do, so that every instant is exact.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use fairlane::runtime::Builder;
use fairlane::time::{self, Duration, Instant, Interval, MissedTickBehavior};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Runs `test` in the `block_on` of a paused current-thread runtime.
fn paused<F: Future>(test: impl FnOnce() -> F) -> F::Output {
    let rt = Builder::new_current_thread()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async { test().await })
}

/// A waker that counts its wake-ups, for polling by hand.
#[derive(Default)]
struct CountWakes(AtomicUsize);

impl Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls futures and intervals by hand with a [`CountWakes`] waker.
struct Probe {
    wakes: Arc<CountWakes>,
    waker: Waker,
}

impl Probe {
    fn new() -> Probe {
        let wakes = Arc::new(CountWakes::default());
        Probe {
            waker: Waker::from(wakes.clone()),
            wakes,
        }
    }

    fn poll<F: Future + Unpin>(&self, future: &mut F) -> Poll<F::Output> {
        Pin::new(future).poll(&mut Context::from_waker(&self.waker))
    }

    fn tick(&self, interval: &mut Interval) -> Poll<Instant> {
        interval.poll_tick(&mut Context::from_waker(&self.waker))
    }

    fn woken(&self) -> usize {
        self.wakes.0.load(Ordering::SeqCst)
    }
}

/// Asserts that `interval` is ready with `start + d` for each `d` in
/// `deltas` (milliseconds), then pending.
fn expect_ticks(probe: &Probe, interval: &mut Interval, start: Instant, deltas: &[u64]) {
    for &d in deltas {
        assert_eq!(
            probe.tick(interval),
            Poll::Ready(start + ms(d)),
            "tick at {d} ms"
        );
    }
    assert_eq!(probe.tick(interval), Poll::Pending, "after {deltas:?}");
}

/// tokio's schedule test: period 300 ms; the 600 and 900 ms ticks are
/// missed (the interval is next polled at 950 ms + 1); returns the ticks
/// delivered in each look, `expected` being checked.
async fn missed_ticks(behavior: MissedTickBehavior, later: &[(u64, &[u64])]) {
    let probe = Probe::new();
    let start = Instant::now();
    // Timers fire at whole milliseconds: look 1 ms after each instant.
    time::advance(ms(1)).await;
    let mut interval = time::interval_at(start, ms(300));
    interval.set_missed_tick_behavior(behavior);
    assert_eq!(interval.missed_tick_behavior(), behavior);
    expect_ticks(&probe, &mut interval, start, &[0]);
    time::advance(ms(100)).await;
    expect_ticks(&probe, &mut interval, start, &[]);
    time::advance(ms(200)).await;
    expect_ticks(&probe, &mut interval, start, &[300]);
    time::advance(ms(650)).await;
    for (advance, ticks) in later {
        time::advance(ms(*advance)).await;
        expect_ticks(&probe, &mut interval, start, ticks);
    }
}

#[test]
fn burst_catches_up_and_keeps_the_schedule() {
    paused(|| {
        missed_ticks(
            MissedTickBehavior::Burst,
            &[
                (0, &[600, 900]),
                (200, &[]),
                (100, &[1200]),
                (250, &[1500]),
                (300, &[1800]),
            ],
        )
    });
    assert_eq!(MissedTickBehavior::default(), MissedTickBehavior::Burst);
}

#[test]
fn delay_moves_the_schedule_to_the_late_tick() {
    paused(|| {
        missed_ticks(
            MissedTickBehavior::Delay,
            // Looked at 951 ms: the next tick is 300 ms later.
            &[
                (0, &[600]),
                (100, &[]),
                (201, &[1251]),
                (300, &[1551]),
                (300, &[1851]),
            ],
        )
    });
}

#[test]
fn skip_drops_the_missed_ticks_and_keeps_the_schedule() {
    paused(|| {
        missed_ticks(
            MissedTickBehavior::Skip,
            &[(0, &[600]), (250, &[1200]), (300, &[1500]), (300, &[1800])],
        )
    });
}

#[test]
fn a_tick_a_few_milliseconds_late_keeps_the_schedule_whatever_the_behavior() {
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        paused(|| async move {
            let probe = Probe::new();
            let start = Instant::now();
            time::advance(ms(1)).await;
            let mut interval = time::interval_at(start, ms(300));
            interval.set_missed_tick_behavior(behavior);
            expect_ticks(&probe, &mut interval, start, &[0]);
            time::advance(ms(304)).await;
            expect_ticks(&probe, &mut interval, start, &[300]);
            time::advance(ms(300)).await;
            expect_ticks(&probe, &mut interval, start, &[600]);
        });
    }
}

#[test]
fn the_reset_family_restarts_the_schedule() {
    paused(|| async {
        let probe = Probe::new();
        let start = Instant::now();
        time::advance(ms(1)).await;
        let mut interval = time::interval_at(start, ms(300));
        expect_ticks(&probe, &mut interval, start, &[0]);
        time::advance(ms(100)).await;
        interval.reset();
        // One period from the reset, at 401 ms.
        time::advance(ms(299)).await;
        expect_ticks(&probe, &mut interval, start, &[]);
        time::advance(ms(1)).await;
        expect_ticks(&probe, &mut interval, start, &[401]);

        interval.reset_immediately();
        expect_ticks(&probe, &mut interval, start, &[401]);
        time::advance(ms(300)).await;
        expect_ticks(&probe, &mut interval, start, &[701]);

        interval.reset_after(ms(50));
        time::advance(ms(50)).await;
        expect_ticks(&probe, &mut interval, start, &[751]);

        interval.reset_at(start + ms(1000));
        time::advance(ms(249)).await;
        expect_ticks(&probe, &mut interval, start, &[1000]);
        time::advance(ms(300)).await;
        expect_ticks(&probe, &mut interval, start, &[1300]);
    });
}

#[test]
fn resets_and_periods_too_long_to_add_do_not_panic() {
    paused(|| async {
        let mut interval = time::interval(Duration::MAX);
        interval.reset();
        interval.tick().await;
        let mut interval = time::interval(ms(1));
        interval.reset_after(Duration::MAX);
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
        interval.reset_immediately();
        interval.tick().await;
    });
}

#[test]
fn advance_wakes_what_it_made_due_before_returning() {
    paused(|| async {
        let probe = Probe::new();
        // A timeout polled by hand, as tokio's `deadline_future_elapses`.
        let mut timeout = Box::pin(time::timeout_at(
            Instant::now() + ms(300),
            std::future::pending::<()>(),
        ));
        assert!(probe.poll(&mut timeout).is_pending());
        time::advance(ms(299)).await;
        assert_eq!(probe.woken(), 0, "not due yet");
        assert!(probe.poll(&mut timeout).is_pending());
        time::advance(ms(2)).await;
        assert_eq!(probe.woken(), 1, "woken before advance returned");
        assert!(matches!(probe.poll(&mut timeout), Poll::Ready(Err(_))));
    });
}

#[test]
fn advance_lets_the_tasks_it_woke_run_before_it_returns() {
    paused(|| async {
        let sleepers: Vec<_> = (1..=3)
            .map(|i| fairlane::spawn(time::sleep(ms(100 * i))))
            .collect();
        fairlane::yield_now().await; // every task sets its timer
        time::advance(ms(200)).await;
        let done: Vec<bool> = sleepers.iter().map(|s| s.is_finished()).collect();
        assert_eq!(done, [true, true, false]);
        for sleeper in sleepers {
            sleeper.await.unwrap();
        }
    });
}

#[test]
fn advance_in_a_task_lets_the_tasks_it_woke_run_before_it_returns() {
    paused(|| async {
        let outer = fairlane::spawn(async {
            let sleeper = fairlane::spawn(time::sleep(ms(1000)));
            fairlane::yield_now().await; // the sleeper sets its timer
            time::advance(ms(1000)).await;
            sleeper.is_finished()
        });
        assert!(outer.await.unwrap());
    });
}
