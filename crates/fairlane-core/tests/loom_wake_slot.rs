//! Loom model of the wake slot (`src/wake_slot.rs`, `src/queue.md`, "The
//! wake slot"): its owner puts and takes while a helper takes only a task
//! whose timestamp it accepts and a sleeper's final scan takes whatever is
//! there. Every task put is taken exactly once, and a taker that accepts a
//! timestamp reads one that a put stored, never the slot's initial one.
//!
//! Mutations seen to fail: the put's pointer store made Relaxed (a helper
//! reads the initial timestamp), and `take` as a load and a store instead of
//! a swap (a task taken twice).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p fairlane-core --release --test loom_wake_slot`
#![cfg(loom)]

use fairlane_core::loom_wake_slot::WakeSlot;
use loom::sync::Arc;
use loom::thread;

#[test]
fn wake_slot_owner_races_a_helper_and_a_final_scan() {
    loom::model(|| {
        let slot = Arc::new(WakeSlot::<u32>::new());
        let helper = {
            let slot = slot.clone();
            thread::spawn(move || {
                slot.take_if(|ts| {
                    assert!(ts == 5 || ts == 7, "read a timestamp no put stored");
                    true
                })
            })
        };
        let scan = {
            let slot = slot.clone();
            thread::spawn(move || slot.take())
        };
        slot.put(1, 5).unwrap();
        let mut got: Vec<u32> = slot.take().into_iter().collect();
        // Whoever took the first task, the owner's view of an empty slot is
        // exact: nobody else fills it.
        slot.put(2, 7).expect("the owner's slot was still full");
        got.extend(slot.take());
        got.extend(helper.join().unwrap());
        got.extend(scan.join().unwrap());
        got.extend(slot.take());
        got.sort_unstable();
        assert_eq!(got, [1, 2], "a task was lost or taken twice");
    });
}
