//! Loom model of the wake slot (`src/wake_slot.rs`, `src/queue.md`, "The
//! wake slot"): its owner puts and takes while a helper takes only a task
//! whose timestamp it accepts and a sleeper's final scan takes whatever is
//! there. Every task put is taken exactly once, and a taker that accepts a
//! timestamp reads one that a put stored, never the slot's initial one.
//!
//! The second model's tasks carry data the owner wrote before the put, read
//! by whoever takes them through the pointer.
//!
//! Mutations seen to fail: the put's pointer store made Relaxed (a helper
//! reads the initial timestamp), `take` as a load and a store instead of a
//! swap (a task taken twice), and `take`'s swap made Relaxed (a taker reads
//! the task's data without the owner's write having happened before: loom's
//! causality check).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p fairlane-core --release --test loom_wake_slot`
#![cfg(loom)]

use std::ptr::NonNull;

use fairlane_core::loom_wake_slot::{IntoRaw, WakeSlot};
use loom::cell::UnsafeCell;
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

/// A task that carries data, as a real task's cell does: a heap cell the
/// owner writes before the put and a taker reads after the take.
struct Carried(Box<UnsafeCell<u32>>);

// SAFETY: the box travels as its own pointer and comes back as the same box.
unsafe impl IntoRaw for Carried {
    fn into_raw(self) -> NonNull<()> {
        NonNull::from(Box::leak(self.0)).cast()
    }

    unsafe fn from_raw(ptr: NonNull<()>) -> Self {
        // SAFETY: `ptr` came from `into_raw`, once.
        Carried(unsafe { Box::from_raw(ptr.as_ptr().cast()) })
    }
}

impl Carried {
    fn read(self) -> u32 {
        // SAFETY: the taker owns the task; loom checks that the owner's
        // write happened before this read.
        self.0.with(|v| unsafe { *v })
    }
}

#[test]
fn a_taker_reads_the_data_the_owner_wrote_before_the_put() {
    loom::model(|| {
        let slot = Arc::new(WakeSlot::<Carried>::new());
        let scan = {
            let slot = slot.clone();
            thread::spawn(move || slot.take().map(Carried::read))
        };
        let helper = {
            let slot = slot.clone();
            thread::spawn(move || slot.take_if(|_| true).map(Carried::read))
        };
        let item = Carried(Box::new(UnsafeCell::new(0)));
        // SAFETY: the owner's alone until the put.
        item.0.with_mut(|v| unsafe { *v = 42 });
        assert!(slot.put(item, 5).is_ok(), "the owner's slot was full");
        let mut got: Vec<u32> = scan.join().unwrap().into_iter().collect();
        got.extend(helper.join().unwrap());
        got.extend(slot.take().map(Carried::read));
        assert_eq!(got, [42], "the task was lost or taken twice");
    });
}
