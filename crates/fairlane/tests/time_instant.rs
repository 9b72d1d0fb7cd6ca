//! `time::Instant`, tokio's newtype over std's: its arithmetic and
//! conversions, and the timers that take and return it, on both backends.

mod common;

use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::time::{interval_at, sleep_until, timeout_at, Instant};

common::on_both_backends!(timers_take_and_return_instants);

#[test]
fn arithmetic_and_conversions() {
    let std_now = std::time::Instant::now();
    let now = Instant::from_std(std_now);
    assert_eq!(now.into_std(), std_now);
    assert_eq!(Instant::from(std_now), now);
    assert_eq!(std::time::Instant::from(now), std_now);

    let later = now + Duration::from_millis(1500);
    assert_eq!(later - now, Duration::from_millis(1500));
    assert_eq!(now - later, Duration::ZERO, "saturates, as tokio's");
    assert_eq!(later.duration_since(now), Duration::from_millis(1500));
    assert_eq!(now.duration_since(later), Duration::ZERO);
    assert_eq!(now.checked_duration_since(later), None);
    assert_eq!(now.saturating_duration_since(later), Duration::ZERO);
    assert_eq!(later - Duration::from_millis(1500), now);
    assert_eq!(
        now.checked_add(Duration::from_secs(2)),
        Some(now + Duration::from_secs(2))
    );
    assert_eq!(now.checked_add(Duration::MAX), None);
    assert_eq!(later.checked_sub(Duration::from_millis(1500)), Some(now));
    assert_eq!(now.checked_sub(Duration::MAX), None);

    let mut t = now;
    t += Duration::from_secs(3);
    assert_eq!(t, now + Duration::from_secs(3));
    t -= Duration::from_secs(3);
    assert_eq!(t, now);
    assert!(later > now);
    assert!(now.max(later) == later);
    assert!(Instant::now() >= now);
    std::thread::sleep(Duration::from_millis(2));
    assert!(now.elapsed() >= Duration::from_millis(2));
    assert_eq!(format!("{now:?}"), format!("{std_now:?}"));
}

fn timers_take_and_return_instants(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let at = Instant::now() + Duration::from_millis(5);
        let sleep = sleep_until(at);
        assert_eq!(sleep.deadline(), at);
        sleep.await;
        assert!(Instant::now() >= at);

        let soon = Instant::now() + Duration::from_millis(2);
        let never = sleep_until(Instant::now() + Duration::from_secs(3600));
        assert!(timeout_at(soon, never).await.is_err());
        assert!(Instant::now() >= soon);
        let far = Instant::now() + Duration::from_secs(3600);
        assert_eq!(timeout_at(far, async { 7 }).await.unwrap(), 7);

        let start = Instant::now() + Duration::from_millis(3);
        let mut iv = interval_at(start, Duration::from_millis(2));
        assert_eq!(iv.tick().await, start);
        assert_eq!(iv.tick().await, start + Duration::from_millis(2));
        assert!(Instant::now() >= start + Duration::from_millis(2));
    });
}
