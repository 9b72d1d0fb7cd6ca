//! A lane: one timestamped FIFO of the ready queue, and the side-array entry
//! that lets other processors judge its age without touching it.
//!
//! See `queue.md` beside this file for the protocol the lanes take part in.
//!
//! Invariants:
//! - every element carries the timestamp of its push, and the elements stay
//!   in push order (a rebalance may take one from the middle:
//!   [`Lane::pop_nearest`]);
//! - `LaneInfo::head` equals the timestamp of the lane's first element, or
//!   [`EMPTY`] when the lane is empty. It is written only while the lane's lock
//!   is held, right after the change that made it so, so its modification
//!   order follows the lane's own history;
//! - `LaneInfo::avg_wait` is a moving average (weight 1/8) of the waits of
//!   popped elements. It is a heuristic: stale values cost fairness precision,
//!   never correctness.

use alloc::collections::VecDeque;

use crate::sync::{AtomicU64, Ordering, SpinLock};

/// Head timestamp of an empty lane ("infinitely young").
pub const EMPTY: u64 = u64::MAX;

/// How many elements from a lane's head a rebalance looks at for the one
/// nearest the helper's own work ([`Lane::pop_nearest`]).
const NEAREST_SCAN: usize = 64;

/// A lane whose buffer grew past this many elements (a burst of spawns or
/// wakes) gives the memory back when it empties, down to
/// [`KEEP_WHEN_EMPTY`]: the burst's tasks, parked, then cost their cells
/// and not also the lane's high-water mark. Past it, so that a lane's
/// ordinary traffic never reallocates.
const SHRINK_ABOVE: usize = 1024;

/// What an emptied lane keeps of a large buffer.
const KEEP_WHEN_EMPTY: usize = 64;

/// Where a queued item's data lives, as an address. A rebalance takes the
/// item nearest the helper's own work (`queue.md`, "Which task a rebalance
/// takes"); only distances between addresses matter.
pub trait Locality {
    /// The address of the item's data.
    fn address(&self) -> usize;
}

/// The loom models' and unit tests' items: an integer is its own address.
#[cfg(any(test, loom))]
mod integer_locality {
    macro_rules! locality_of_integers {
        ($($t:ty),*) => {$(
            impl super::Locality for $t {
                fn address(&self) -> usize {
                    *self as usize
                }
            }
        )*};
    }
    locality_of_integers!(i32, u32, usize);
}

/// The elements of one lane, behind a try-lock.
pub struct Lane<T> {
    items: SpinLock<VecDeque<(T, u64)>>,
}

/// What the rest of the cluster may read about a lane without locking it.
/// Kept in its own cache-padded array so that reading it never contends with
/// the lane's lock word.
pub struct LaneInfo {
    head: AtomicU64,
    avg_wait: AtomicU64,
}

impl LaneInfo {
    /// The entry of an empty lane.
    pub fn new() -> Self {
        Self {
            head: AtomicU64::new(EMPTY),
            avg_wait: AtomicU64::new(0),
        }
    }

    /// Whether the lane looked non-empty at the last change visible to this
    /// thread. Relaxed: it is a hint, except after the idle protocol's
    /// `fence(SeqCst)`, which is what makes the final scan's read reliable
    /// (see `idle.md`).
    #[inline]
    pub fn looks_nonempty(&self) -> bool {
        self.head.load(Ordering::Relaxed) != EMPTY
    }

    /// The head's push timestamp, or [`EMPTY`]. Relaxed, like `looks_nonempty`.
    #[inline]
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Relaxed)
    }

    /// The lane's age at `now`: the head's wait blended with the moving
    /// average of recent waits; 0 for an empty lane.
    #[inline]
    pub fn age(&self, now: u64) -> u64 {
        let head = self.head.load(Ordering::Relaxed);
        if head == EMPTY {
            return 0;
        }
        let waited = now.saturating_sub(head);
        let avg = self.avg_wait.load(Ordering::Relaxed);
        waited / 2 + avg / 2
    }
}

impl<T> Lane<T> {
    /// An empty lane.
    pub fn new() -> Self {
        Self {
            items: SpinLock::new(VecDeque::new()),
        }
    }

    /// Holds the lane's lock until the guard drops: a busy lane, for tests
    /// of what a push does when its first lane is busy.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn hold(&self) -> impl Drop + '_ {
        self.items.lock()
    }

    /// Removes the oldest element. With `wait`, spins for the lock; without,
    /// reports a busy lane as empty.
    #[inline]
    pub fn pop(&self, info: &LaneInfo, now: u64, wait: bool) -> Option<T> {
        let mut guard = if wait {
            self.items.lock()
        } else {
            self.items.try_lock()?
        };
        guard.with(|q| {
            let (item, ts) = q.pop_front()?;
            Self::removed(info, q, ts, now);
            Some(item)
        })
    }

    /// The bookkeeping of a removal, under the lock: the new head's
    /// timestamp, the removed element's wait into the moving average, and
    /// the buffer of an emptied lane shrunk if it is large.
    #[inline]
    fn removed(info: &LaneInfo, q: &mut VecDeque<(T, u64)>, ts: u64, now: u64) {
        match q.front() {
            Some(e) => info.head.store(e.1, Ordering::Relaxed),
            None => {
                info.head.store(EMPTY, Ordering::Relaxed);
                if q.capacity() > SHRINK_ABOVE {
                    Self::shrink(q);
                }
            }
        }
        let waited = now.saturating_sub(ts);
        let avg = info.avg_wait.load(Ordering::Relaxed);
        info.avg_wait
            .store(avg - avg / 8 + waited / 8, Ordering::Relaxed);
    }

    /// Gives back the buffer of an emptied lane but [`KEEP_WHEN_EMPTY`]
    /// elements.
    #[cold]
    #[inline(never)]
    fn shrink(q: &mut VecDeque<(T, u64)>) {
        q.shrink_to(KEEP_WHEN_EMPTY);
    }

    /// Removes, among the first `NEAREST_SCAN` elements, the one whose item's
    /// address is nearest `address` (the one nearer the head on a tie). The
    /// others keep their order, so the head is still the oldest. Reports a
    /// busy lane as empty.
    pub fn pop_nearest(&self, info: &LaneInfo, now: u64, address: usize) -> Option<T>
    where
        T: Locality,
    {
        let mut guard = self.items.try_lock()?;
        guard.with(|q| {
            let nearest = q
                .iter()
                .take(NEAREST_SCAN)
                .enumerate()
                .min_by_key(|(_, (item, _))| item.address().abs_diff(address))?
                .0;
            let (item, ts) = q.remove(nearest)?;
            Self::removed(info, q, ts, now);
            Some(item)
        })
    }

    /// Removes every element (shutdown and draining).
    pub fn take_all(&self, info: &LaneInfo) -> VecDeque<(T, u64)> {
        let mut guard = self.items.lock();
        guard.with(|q| {
            info.head.store(EMPTY, Ordering::Relaxed);
            core::mem::take(q)
        })
    }

    /// Appends `item` stamped `ts` if `open()` holds, checked under the lock
    /// so that a push and the ready queue's closing cannot interleave. With
    /// `wait`, spins for the lock; without, hands the item back if the lane
    /// is busy.
    #[inline]
    pub fn push(
        &self,
        info: &LaneInfo,
        item: T,
        ts: u64,
        wait: bool,
        open: impl FnOnce() -> bool,
    ) -> PushOutcome<T> {
        let guard = if wait {
            Some(self.items.lock())
        } else {
            self.items.try_lock()
        };
        let Some(mut guard) = guard else {
            return PushOutcome::Busy(item);
        };
        if !open() {
            drop(guard);
            return PushOutcome::Closed(item);
        }
        let filled = guard.with(|q| {
            let filled = q.is_empty();
            if filled {
                info.head.store(ts, Ordering::Relaxed);
            }
            q.push_back((item, ts));
            filled
        });
        PushOutcome::Pushed { filled }
    }
}

/// Result of [`Lane::push`].
pub enum PushOutcome<T> {
    /// The item is in the lane.
    Pushed {
        /// The lane was empty before (this push set its head).
        filled: bool,
    },
    /// The lane was locked (only without `wait`): the item back.
    Busy(T),
    /// The queue is closed: the item back.
    Closed(T),
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn lane_of(items: &[(usize, u64)]) -> (Lane<usize>, LaneInfo) {
        let (lane, info) = (Lane::new(), LaneInfo::new());
        for &(item, ts) in items {
            assert!(matches!(
                lane.push(&info, item, ts, false, || true),
                PushOutcome::Pushed { .. }
            ));
        }
        (lane, info)
    }

    fn capacity(lane: &Lane<usize>) -> usize {
        lane.items.lock().with(|q| q.capacity())
    }

    /// A lane that a burst grew gives its buffer back once it empties, by
    /// either kind of pop; one that never grew past its ordinary size keeps
    /// it (no reallocation on ordinary traffic).
    #[test]
    fn an_emptied_lane_gives_back_a_large_buffer() {
        let burst: Vec<_> = (0..SHRINK_ABOVE * 2).map(|i| (i, i as u64)).collect();
        let (lane, info) = lane_of(&burst);
        assert!(capacity(&lane) > SHRINK_ABOVE);
        for &(item, _) in &burst[..burst.len() - 1] {
            assert_eq!(lane.pop(&info, 0, false), Some(item));
        }
        assert!(capacity(&lane) > SHRINK_ABOVE, "shrunk before empty");
        assert_eq!(lane.pop_nearest(&info, 0, 0), Some(burst.len() - 1));
        assert!(capacity(&lane) <= KEEP_WHEN_EMPTY * 2);
        assert_eq!(info.head(), EMPTY);

        let ordinary: Vec<_> = (0..SHRINK_ABOVE / 2).map(|i| (i, i as u64)).collect();
        let (lane, info) = lane_of(&ordinary);
        let grown = capacity(&lane);
        while lane.pop(&info, 0, false).is_some() {}
        assert_eq!(capacity(&lane), grown);
    }

    #[test]
    fn pop_nearest_takes_the_nearest_item_and_keeps_the_others_in_order() {
        let (lane, info) = lane_of(&[(100, 1), (7, 2), (52, 3), (49, 4)]);
        assert_eq!(lane.pop_nearest(&info, 10, 50), Some(49));
        assert_eq!(lane.pop_nearest(&info, 10, 50), Some(52));
        assert_eq!(info.head(), 1, "the head stays while others leave");
        assert_eq!(lane.pop_nearest(&info, 10, 0), Some(7));
        assert_eq!(lane.pop_nearest(&info, 10, 0), Some(100));
        assert_eq!(info.head(), EMPTY);
        assert_eq!(lane.pop_nearest(&info, 10, 0), None);
    }

    #[test]
    fn pop_nearest_prefers_the_head_on_a_tie_and_looks_only_near_the_head() {
        let (lane, info) = lane_of(&[(40, 1), (60, 2)]);
        assert_eq!(lane.pop_nearest(&info, 10, 50), Some(40));
        let far: Vec<(usize, u64)> = (0..NEAREST_SCAN + 1)
            .map(|i| (1000 + i, i as u64))
            .collect();
        let (lane, info) = lane_of(&far);
        let last = 1000 + NEAREST_SCAN;
        assert_eq!(lane.pop_nearest(&info, 10, last), Some(last - 1));
    }
}
