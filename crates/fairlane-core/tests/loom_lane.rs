//! Loom model of the lane protocol (`src/queue.md`): an owner pushing and
//! popping while a helper try-pops the same lane, from its head (a rescue)
//! or nearest an address (a rebalance). Every pushed element is popped
//! exactly once, and the head timestamp the side array publishes always
//! matches the lane's contents once the threads are done.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p fairlane-core --release --test loom_lane`
#![cfg(loom)]

use fairlane_core::loom_lane::{Lane, LaneInfo, PushOutcome, EMPTY};
use loom::sync::Arc;
use loom::thread;

fn push(lane: &Lane<u32>, info: &LaneInfo, v: u32, ts: u64) {
    assert!(matches!(
        lane.push(info, v, ts, true, || true),
        PushOutcome::Pushed { .. }
    ));
}

/// A helper taking from the lane twice with `take`. A helper only looks at
/// lanes that look non-empty, and only try-locks them.
fn helper(
    lane: &Arc<(Lane<u32>, LaneInfo)>,
    take: fn(&Lane<u32>, &LaneInfo) -> Option<u32>,
) -> thread::JoinHandle<Vec<u32>> {
    let lane = lane.clone();
    thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..2 {
            if lane.1.looks_nonempty() {
                got.extend(take(&lane.0, &lane.1));
            }
        }
        got
    })
}

#[test]
fn lane_push_pop_with_concurrent_helper() {
    loom::model(|| {
        let lane = Arc::new((Lane::new(), LaneInfo::new()));
        let helper = helper(&lane, |lane, info| lane.pop(info, 10, false));
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
fn lane_push_pop_with_concurrent_rebalance() {
    loom::model(|| {
        let lane = Arc::new((Lane::new(), LaneInfo::new()));
        let helper = helper(&lane, |lane, info| lane.pop_nearest(info, 10, 2));
        push(&lane.0, &lane.1, 1, 1);
        push(&lane.0, &lane.1, 2, 2);
        push(&lane.0, &lane.1, 3, 3);
        let mut got: Vec<u32> = lane.0.pop(&lane.1, 5, true).into_iter().collect();
        got.extend(helper.join().unwrap());
        let head = lane.1.head();
        let rest = lane.0.take_all(&lane.1);
        assert_eq!(
            head,
            rest.front().map_or(EMPTY, |e| e.1),
            "the published head is not the first element's"
        );
        assert!(
            rest.iter().zip(rest.iter().skip(1)).all(|(a, b)| a.1 < b.1),
            "the rest left push order"
        );
        got.extend(rest.into_iter().map(|(v, _)| v));
        got.sort_unstable();
        assert_eq!(got, vec![1, 2, 3], "an element was lost or popped twice");
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
