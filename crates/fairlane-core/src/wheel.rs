//! A hierarchical timer wheel: O(1) insert and cancel, amortised O(levels)
//! per expiry, and the earliest deadline in O(levels).
//!
//! Time is counted in ticks of one millisecond since the driver's epoch.
//! Level `l` has 64 slots, each `64^l` ticks wide; a timer lives at the
//! lowest level whose slot width separates its deadline from the wheel's
//! current time (`elapsed`). When time reaches a slot of a higher level, its
//! timers cascade down (each at most once per level), so timers expire in
//! deadline order, to the tick. Entries are kept in a slab with intrusive,
//! index-linked lists per slot, so cancelling is an unlink.
//!
//! The wheel is a plain data structure: its owner keeps it behind whatever
//! lock it needs and turns wall time into ticks; fairlane's I/O driver keeps
//! one per processor.
//!
//! # Example
//! ```
//! use core::task::Waker;
//! use fairlane_core::wheel::Wheel;
//!
//! let mut wheel = Wheel::new();
//! let soon = wheel.insert(10, Waker::noop().clone()).unwrap();
//! let later = wheel.insert(500, Waker::noop().clone()).unwrap();
//! assert_eq!(wheel.len(), 2);
//! assert!(wheel.next_expiration().unwrap() <= 10);
//!
//! let mut fired = Vec::new();
//! wheel.advance(10, &mut fired);
//! assert_eq!(fired.len(), 1);
//! assert!(!wheel.is_pending(soon) && wheel.is_pending(later));
//! drop(wheel.cancel(later));
//! assert_eq!(wheel.len(), 0);
//! ```
//!
//! Invariant: every entry sits in the slot `slot_of(position)` at level
//! `level_of(elapsed, position)`, where `position` is its deadline clamped
//! to the wheel's span; an occupied bit is set exactly for non-empty slots.

use alloc::vec::Vec;
use core::task::Waker;

const LEVELS: usize = 6;
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
/// Ticks the wheel spans from `elapsed`: about 2.2 years of milliseconds.
const SPAN: u64 = 1 << (SLOT_BITS as u64 * LEVELS as u64);
const NIL: u32 = u32::MAX;

/// What a timer holds: its deadline and the waker of the task waiting.
struct Timer {
    deadline: u64,
    position: u64,
    waker: Option<Waker>,
    prev: u32,
    next: u32,
    /// Counts reuses of this slab slot, so that a stale handle is refused.
    generation: u32,
    /// Whether the entry is linked into the wheel, and where.
    linked: bool,
    level: u8,
    slot: u8,
}

/// A handle to a timer in a [`Wheel`]: its slab index and generation. A
/// handle of a timer that fired or was cancelled stays refused even after
/// its slot is reused.
///
/// # Example
/// ```
/// # use fairlane_core::wheel::Wheel;
/// # let w = core::task::Waker::noop();
/// let mut wheel = Wheel::new();
/// let old = wheel.insert(5, w.clone()).unwrap();
/// drop(wheel.cancel(old));
/// let new = wheel.insert(5, w.clone()).unwrap();
/// assert!(old != new && !wheel.is_pending(old) && wheel.is_pending(new));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerKey {
    index: u32,
    generation: u32,
}

/// A hierarchical timer wheel of wakers, keyed by [`TimerKey`]; see the
/// [module](self) for how it works.
///
/// # Example
/// ```
/// # use fairlane_core::wheel::Wheel;
/// let mut wheel = Wheel::new();
/// assert!(wheel.insert(0, core::task::Waker::noop().clone()).is_none()); // not in the future
/// ```
pub struct Wheel {
    elapsed: u64,
    heads: [[u32; SLOTS]; LEVELS],
    occupied: [u64; LEVELS],
    entries: Vec<Timer>,
    free: Vec<u32>,
    len: usize,
}

fn level_of(elapsed: u64, position: u64) -> usize {
    // The highest bit in which the two differ decides the level; bits below
    // 6 all land on level 0.
    let differing = (elapsed ^ position) | (SLOTS as u64 - 1);
    let bit = 63 - differing.leading_zeros();
    ((bit / SLOT_BITS) as usize).min(LEVELS - 1)
}

impl Default for Wheel {
    fn default() -> Self {
        Self::new()
    }
}

fn slot_of(position: u64, level: usize) -> usize {
    ((position >> (SLOT_BITS as usize * level)) as usize) & (SLOTS - 1)
}

impl Wheel {
    /// An empty wheel at tick 0.
    ///
    /// # Example
    /// ```
    /// # use fairlane_core::wheel::Wheel;
    /// # let w = core::task::Waker::noop();
    /// let wheel = Wheel::new();
    /// assert!(wheel.is_empty() && wheel.next_expiration().is_none());
    /// ```
    pub fn new() -> Self {
        Self {
            elapsed: 0,
            heads: [[NIL; SLOTS]; LEVELS],
            occupied: [0; LEVELS],
            entries: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Number of pending timers.
    ///
    /// # Example
    /// ```
    /// # use fairlane_core::wheel::Wheel;
    /// # let w = core::task::Waker::noop();
    /// let mut wheel = Wheel::new();
    /// wheel.insert(5, w.clone());
    /// assert_eq!(wheel.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no timer is pending.
    ///
    /// # Example
    /// ```
    /// # use fairlane_core::wheel::Wheel;
    /// # let w = core::task::Waker::noop();
    /// let mut wheel = Wheel::new();
    /// let key = wheel.insert(5, w.clone()).unwrap();
    /// drop(wheel.cancel(key));
    /// assert!(wheel.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a timer for tick `deadline`. A deadline not after the wheel's
    /// current time is refused (`None`): the caller treats it as expired.
    pub fn insert(&mut self, deadline: u64, waker: Waker) -> Option<TimerKey> {
        if deadline <= self.elapsed {
            return None;
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.entries.len()).expect("fewer than 2^32 timers");
                assert!(i != NIL, "fewer than 2^32 - 1 timers");
                self.entries.push(Timer {
                    deadline: 0,
                    position: 0,
                    waker: None,
                    prev: NIL,
                    next: NIL,
                    generation: 0,
                    linked: false,
                    level: 0,
                    slot: 0,
                });
                i
            }
        };
        let entry = &mut self.entries[index as usize];
        entry.deadline = deadline;
        entry.waker = Some(waker);
        let generation = entry.generation;
        self.link(index);
        self.len += 1;
        Some(TimerKey { index, generation })
    }

    /// Whether `key` is still pending (neither fired nor cancelled).
    ///
    /// # Example
    /// ```
    /// # use fairlane_core::wheel::Wheel;
    /// # let w = core::task::Waker::noop();
    /// let mut wheel = Wheel::new();
    /// let key = wheel.insert(5, w.clone()).unwrap();
    /// assert!(wheel.is_pending(key));
    /// wheel.advance(5, &mut Vec::new());
    /// assert!(!wheel.is_pending(key));
    /// ```
    pub fn is_pending(&self, key: TimerKey) -> bool {
        self.entries
            .get(key.index as usize)
            .is_some_and(|e| e.generation == key.generation && e.linked)
    }

    /// Replaces the waker of a pending timer: `Some` with the waker it
    /// replaced (if it replaced one), `None` if the timer is no longer
    /// pending. The caller drops the old waker outside any lock it holds:
    /// a waker's drop may run any code, timers' included.
    ///
    /// # Example
    /// ```
    /// # use fairlane_core::wheel::Wheel;
    /// # let w = core::task::Waker::noop();
    /// let mut wheel = Wheel::new();
    /// let key = wheel.insert(5, w.clone()).unwrap();
    /// assert!(wheel.set_waker(key, w).is_some());
    /// drop(wheel.cancel(key));
    /// assert!(wheel.set_waker(key, w).is_none());
    /// ```
    pub fn set_waker(&mut self, key: TimerKey, waker: &Waker) -> Option<Option<Waker>> {
        if !self.is_pending(key) {
            return None;
        }
        let slot = &mut self.entries[key.index as usize].waker;
        if slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            return Some(None);
        }
        Some(slot.replace(waker.clone()))
    }

    /// Removes a pending timer and returns its waker; does nothing (and
    /// returns `None`) for one that fired already. The caller drops the
    /// waker outside any lock it holds: a waker's drop may run any code,
    /// such as dropping a future that cancels another timer.
    ///
    /// # Example
    /// ```
    /// # use fairlane_core::wheel::Wheel;
    /// # let w = core::task::Waker::noop();
    /// let mut wheel = Wheel::new();
    /// let key = wheel.insert(5, w.clone()).unwrap();
    /// assert!(wheel.cancel(key).is_some());
    /// assert!(wheel.cancel(key).is_none());
    /// let mut fired = Vec::new();
    /// wheel.advance(10, &mut fired);
    /// assert!(fired.is_empty());
    /// ```
    #[must_use = "drop the waker outside the lock that guards the wheel"]
    pub fn cancel(&mut self, key: TimerKey) -> Option<Waker> {
        if !self.is_pending(key) {
            return None;
        }
        self.unlink(key.index);
        let waker = self.entries[key.index as usize].waker.take();
        self.release(key.index);
        waker
    }

    /// The tick at which the next timer may be due, if any: a lower bound
    /// (exact for level 0, the start of a slot above).
    ///
    /// # Example
    /// ```
    /// # use fairlane_core::wheel::Wheel;
    /// # let w = core::task::Waker::noop();
    /// let mut wheel = Wheel::new();
    /// wheel.insert(40, w.clone());
    /// assert_eq!(wheel.next_expiration(), Some(40)); // level 0: exact
    /// wheel.insert(10_000, w.clone());
    /// assert_eq!(wheel.next_expiration(), Some(40));
    /// ```
    pub fn next_expiration(&self) -> Option<u64> {
        (0..LEVELS).find_map(|level| self.next_in_level(level))
    }

    fn next_in_level(&self, level: usize) -> Option<u64> {
        let occupied = self.occupied[level];
        if occupied == 0 {
            return None;
        }
        let shift = SLOT_BITS as usize * level;
        let slot_width = 1u64 << shift;
        let level_width = slot_width << SLOT_BITS;
        let now_slot = slot_of(self.elapsed, level);
        let distance = occupied.rotate_right(now_slot as u32).trailing_zeros() as u64;
        let level_start = self.elapsed & !(level_width - 1);
        let slot = now_slot as u64 + distance;
        // `slot` may exceed 63: a slot numbered below the current one is in
        // the next turn of this level (only at the top level, see `link`).
        let start = level_start + slot * slot_width;
        Some(start.max(self.elapsed))
    }

    /// Advances the wheel to tick `now`, pushing the wakers of every timer
    /// due by then onto `fired`, in deadline order.
    ///
    /// # Example
    /// ```
    /// # use fairlane_core::wheel::Wheel;
    /// # let w = core::task::Waker::noop();
    /// let mut wheel = Wheel::new();
    /// wheel.insert(300, w.clone());
    /// wheel.insert(7, w.clone());
    /// let mut fired = Vec::new();
    /// wheel.advance(299, &mut fired);
    /// assert_eq!(fired.len(), 1); // the timer at 7, not the one at 300
    /// wheel.advance(300, &mut fired);
    /// assert_eq!(fired.len(), 2);
    /// ```
    pub fn advance(&mut self, now: u64, fired: &mut Vec<Waker>) {
        while let Some(next) = self.next_expiration() {
            if next > now {
                break;
            }
            self.elapsed = next;
            // Every level's current slot that is due now: take each list and
            // fire or cascade its entries. Level 0 last, so that cascaded
            // entries due at `next` fire in this same round.
            for level in (0..LEVELS).rev() {
                let slot = slot_of(next, level);
                if self.occupied[level] & (1 << slot) == 0 {
                    continue;
                }
                let mut index = self.heads[level][slot];
                self.heads[level][slot] = NIL;
                self.occupied[level] &= !(1 << slot);
                while index != NIL {
                    let next_index = self.entries[index as usize].next;
                    let entry = &mut self.entries[index as usize];
                    entry.linked = false;
                    if entry.deadline <= self.elapsed {
                        if let Some(w) = entry.waker.take() {
                            fired.push(w);
                        }
                        self.release(index);
                    } else {
                        // Cascade: relinked relative to the new `elapsed`,
                        // at a lower level (the slot it was in has begun).
                        self.link(index);
                    }
                    index = next_index;
                }
            }
        }
        if now > self.elapsed {
            self.elapsed = now;
        }
    }

    fn link(&mut self, index: u32) {
        let elapsed = self.elapsed;
        let entry = &mut self.entries[index as usize];
        // Clamped so that a top-level entry is at most 63 top-level slots
        // ahead: its slot number then never equals the current one, and
        // `next_in_level` finds its slot's start exactly (see the module
        // comment). A clamped entry cascades early and is placed again.
        entry.position = entry
            .deadline
            .min(elapsed + SPAN - 2 * (SPAN / SLOTS as u64));
        let level = level_of(elapsed, entry.position);
        let slot = slot_of(entry.position, level);
        entry.level = level as u8;
        entry.slot = slot as u8;
        let head = self.heads[level][slot];
        entry.prev = NIL;
        entry.next = head;
        entry.linked = true;
        if head != NIL {
            self.entries[head as usize].prev = index;
        }
        self.heads[level][slot] = index;
        self.occupied[level] |= 1 << slot;
    }

    fn unlink(&mut self, index: u32) {
        let (prev, next, level, slot) = {
            let e = &mut self.entries[index as usize];
            e.linked = false;
            (e.prev, e.next, usize::from(e.level), usize::from(e.slot))
        };
        if prev == NIL {
            self.heads[level][slot] = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
        if self.heads[level][slot] == NIL {
            self.occupied[level] &= !(1 << slot);
        }
    }

    fn release(&mut self, index: u32) {
        let e = &mut self.entries[index as usize];
        e.waker = None;
        e.generation = e.generation.wrapping_add(1);
        self.free.push(index);
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::sync::Arc;
    use alloc::task::Wake;
    use alloc::{vec, vec::Vec};
    use std::sync::Mutex;

    struct Record(u64, Arc<Mutex<Vec<u64>>>);
    impl Wake for Record {
        fn wake(self: Arc<Self>) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    fn waker(id: u64, log: &Arc<Mutex<Vec<u64>>>) -> Waker {
        Waker::from(Arc::new(Record(id, log.clone())))
    }

    fn fire(wheel: &mut Wheel, now: u64) {
        let mut fired = Vec::new();
        wheel.advance(now, &mut fired);
        fired.into_iter().for_each(Waker::wake);
    }

    #[test]
    fn fires_in_deadline_order_across_levels() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut wheel = Wheel::new();
        let mut deadlines: Vec<u64> = (0..2000u64).map(|i| (i * 7919) % 300_000 + 1).collect();
        for &d in &deadlines {
            wheel.insert(d, waker(d, &log)).unwrap();
        }
        let mut now = 0;
        while !wheel.is_empty() {
            now = wheel.next_expiration().unwrap();
            fire(&mut wheel, now);
        }
        assert!(now >= 299_000);
        deadlines.sort_unstable();
        assert_eq!(*log.lock().unwrap(), deadlines);
    }

    #[test]
    fn nothing_fires_early_and_cancel_removes() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut wheel = Wheel::new();
        let a = wheel.insert(100, waker(100, &log)).unwrap();
        let _b = wheel.insert(5000, waker(5000, &log)).unwrap();
        let c = wheel.insert(70, waker(70, &log)).unwrap();
        drop(wheel.cancel(c));
        assert!(!wheel.is_pending(c));
        fire(&mut wheel, 99);
        assert!(log.lock().unwrap().is_empty());
        assert!(wheel.next_expiration().unwrap() <= 100);
        fire(&mut wheel, 100);
        assert_eq!(*log.lock().unwrap(), vec![100]);
        assert!(!wheel.is_pending(a));
        assert!(wheel.cancel(a).is_none()); // a fired timer: nothing happens
        fire(&mut wheel, 4999);
        assert_eq!(log.lock().unwrap().len(), 1);
        fire(&mut wheel, 1_000_000);
        assert_eq!(*log.lock().unwrap(), vec![100, 5000]);
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.next_expiration(), None);
        // Past deadlines are refused, far ones are clamped and still fire.
        assert!(wheel.insert(10, waker(1, &log)).is_none());
        let far = wheel.insert(u64::MAX / 2, waker(7, &log)).unwrap();
        fire(&mut wheel, 1_000_000 + SPAN);
        assert!(wheel.is_pending(far));
    }
}
