//! Loom model of the lane protocol (`src/queue.md`): an owner pushing and
//! popping while a helper try-pops the same lane. Every pushed element is
//! popped exactly once, and the head timestamp the side array publishes
//! always matches the lane's contents once the threads are done.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p fairlane-core --release --test loom_lane`
#![cfg(loom)]

use fairlane_core::loom_lane::{Lane, LaneInfo, PushOutcome, ReplaceOutcome};
use loom::sync::Arc;
use loom::thread;

fn push(lane: &Lane<u32>, info: &LaneInfo, v: u32, ts: u64) {
    assert!(matches!(
        lane.push(info, v, ts, true, || true),
        PushOutcome::Pushed { .. }
    ));
}

#[test]
fn lane_push_pop_with_concurrent_helper() {
    loom::model(|| {
        let lane = Arc::new((Lane::new(), LaneInfo::new()));
        let helper = {
            let lane = lane.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..2 {
                    // A helper only looks at lanes that look non-empty, and
                    // only try-locks them.
                    if lane.1.looks_nonempty() {
                        got.extend(lane.0.pop(&lane.1, 10, false));
                    }
                }
                got
            })
        };
        push(&lane.0, &lane.1, 1, 1);
        push(&lane.0, &lane.1, 2, 2);
        let mut got: Vec<u32> = lane.0.pop(&lane.1, 5, true).into_iter().collect();
        got.extend(helper.join().unwrap());
        // Whatever is left is still in the lane, in FIFO order.
        got.extend(lane.0.take_all(&lane.1).into_iter().map(|(v, _)| v));
        got.sort_unstable();
        assert_eq!(got, vec![1, 2], "an element was lost or popped twice");
        assert!(!lane.1.looks_nonempty(), "an empty lane must publish EMPTY");
    });
}

#[test]
fn lane_head_timestamp_follows_contents() {
    loom::model(|| {
        let lane = Arc::new((Lane::new(), LaneInfo::new()));
        let pusher = {
            let lane = lane.clone();
            thread::spawn(move || push(&lane.0, &lane.1, 7, 100))
        };
        let popped = lane.0.pop(&lane.1, 200, true);
        pusher.join().unwrap();
        match popped {
            // Popped before or after the push: the lane must agree.
            Some(7) => assert!(!lane.1.looks_nonempty()),
            None => {
                assert!(lane.1.looks_nonempty());
                assert!(lane.1.age(200) > 0, "a waiting element has an age");
            }
            Some(other) => panic!("popped {other}, which was never pushed"),
        }
    });
}

/// The wake slot's put (`Lane::replace`) racing a helper's try-pop: each
/// element is either displaced (handed back to the putter), popped by the
/// helper, or still in the slot — exactly one of the three — and the head
/// timestamp matches what is left. Fails if `replace` forgets to publish the
/// new head, or hands back an element it did not take out.
#[test]
fn wake_slot_put_racing_a_helper() {
    loom::model(|| {
        let slot = Arc::new((Lane::new(), LaneInfo::new()));
        push(&slot.0, &slot.1, 1, 1);
        let helper = {
            let slot = slot.clone();
            thread::spawn(move || {
                if slot.1.looks_nonempty() {
                    slot.0.pop(&slot.1, 10, false)
                } else {
                    None
                }
            })
        };
        let mut got = Vec::new();
        let mut put = 2;
        loop {
            match slot.0.replace(&slot.1, put, 2, || true) {
                ReplaceOutcome::Put { displaced } => {
                    got.extend(displaced);
                    break;
                }
                // The helper holds the lock: the owner pushes elsewhere in
                // the runtime; here it tries again.
                ReplaceOutcome::Busy(back) => {
                    put = back;
                    thread::yield_now();
                }
                ReplaceOutcome::Closed(_) => unreachable!("never closed"),
            }
        }
        got.extend(helper.join().unwrap());
        // What is left is at most the put element, and the head says so.
        assert_eq!(slot.1.looks_nonempty(), slot.1.head() == 2);
        let left: Vec<(u32, u64)> = slot.0.take_all(&slot.1).into_iter().collect();
        assert!(left.is_empty() || left == vec![(2, 2)], "{left:?}");
        got.extend(left.into_iter().map(|(v, _)| v));
        got.sort_unstable();
        assert_eq!(got, vec![1, 2], "an element was lost or taken twice");
        assert!(!slot.1.looks_nonempty());
    });
}
