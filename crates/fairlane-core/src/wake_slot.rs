//! A processor's wake slot: one task woken by the task the processor is
//! polling, which it runs next (`queue.md`, "The wake slot"), held as one
//! pointer so that neither side takes a lock.
//!
//! Protocol (`queue.md`, "The wake slot", has the prose):
//! - only the slot's processor fills it (`put`, `restore`), and only when it
//!   is empty, so its put is a plain Release store, no read-modify-write: a
//!   null it reads is the truth, since nobody else ever stores a task;
//! - anyone may empty it, with one read-modify-write that swaps in null
//!   (`take`) or, to take only a task whose timestamp it accepted, a
//!   compare-and-swap from the pointer it read (`take_if`): whoever's
//!   read-modify-write reads the pointer owns the task, so a task put once is
//!   taken once;
//! - the timestamp is stored before the pointer (Release), so a taker that
//!   read the pointer with Acquire reads that put's timestamp or a later
//!   one. A later one belongs to a later put of the same task (the pointer
//!   went out and came back), which the compare-and-swap then takes: a
//!   heuristic's input is newer than expected, no task is affected.

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, AtomicU64, Ordering};

/// An item that travels as one non-null pointer, which is how the wake slot
/// holds it without a lock.
///
/// # Safety
/// An implementation must give back, from `from_raw` of a pointer that
/// `into_raw` returned, the very item given up (the slot hands that pointer
/// to other threads and to `from_raw` exactly once).
pub unsafe trait IntoRaw {
    /// Gives up the item for a pointer.
    fn into_raw(self) -> NonNull<()>;

    /// Takes back the item given up by [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    /// `ptr` came from `into_raw` of this type, and is not used again.
    unsafe fn from_raw(ptr: NonNull<()>) -> Self;
}

/// The loom models' and unit tests' items: an integer travels as an
/// address one past its value (never dereferenced), so that a model in
/// which a task is taken twice sees two equal integers, not a double free.
#[cfg(any(test, loom))]
mod integer_items {
    use core::ptr::{self, NonNull};

    fn encode(value: usize) -> NonNull<()> {
        NonNull::new(ptr::without_provenance_mut(value.wrapping_add(1)))
            .expect("usize::MAX is no test item")
    }

    macro_rules! integer_items {
        ($($t:ty),*) => {$(
            // SAFETY: the integer is recovered from the address alone.
            unsafe impl super::IntoRaw for $t {
                fn into_raw(self) -> NonNull<()> {
                    // An i32 through u32, so that -1 is not usize::MAX.
                    encode(self as u32 as usize)
                }

                unsafe fn from_raw(ptr: NonNull<()>) -> Self {
                    (ptr.addr().get() - 1) as $t
                }
            }
        )*};
    }
    integer_items!(i32, u32);

    // SAFETY: as above.
    unsafe impl super::IntoRaw for usize {
        fn into_raw(self) -> NonNull<()> {
            encode(self)
        }

        unsafe fn from_raw(ptr: NonNull<()>) -> Self {
            ptr.addr().get() - 1
        }
    }
}

/// One processor's wake slot: a task, or null, and the owner's clock
/// reading when the task went in.
pub struct WakeSlot<T> {
    item: AtomicPtr<()>,
    ts: AtomicU64,
    /// Drops a task left in the slot when the slot is dropped: `T`'s
    /// `from_raw`, captured by `new`, since `Drop` cannot ask for `IntoRaw`.
    drop_left: unsafe fn(NonNull<()>),
    _owns: PhantomData<T>,
}

// SAFETY: the slot owns the `T` behind its pointer and hands it to exactly
// one taker (see the module's protocol), as a `Mutex<Option<T>>` would.
unsafe impl<T: Send> Send for WakeSlot<T> {}
// SAFETY: as for `Send`: sharing the slot only moves `T`s between threads.
unsafe impl<T: Send> Sync for WakeSlot<T> {}

impl<T: IntoRaw> WakeSlot<T> {
    /// An empty slot.
    pub fn new() -> Self {
        Self {
            item: AtomicPtr::new(ptr::null_mut()),
            ts: AtomicU64::new(0),
            // SAFETY (of the call in `drop`): the pointer left in the slot
            // came from `T::into_raw` and is reclaimed once, there.
            drop_left: |ptr| drop(unsafe { T::from_raw(ptr) }),
            _owns: PhantomData,
        }
    }

    /// Whether the slot looked full at the last change visible to this
    /// thread. Relaxed: a hint, except after the idle protocol's
    /// `fence(SeqCst)` (`idle.md`, "The wake slot"), and exact for the owner
    /// when it says empty (only the owner fills the slot).
    #[inline]
    pub fn looks_full(&self) -> bool {
        !self.item.load(Ordering::Relaxed).is_null()
    }

    /// The owner's put, with its clock reading `now`: stores `item` if the
    /// slot is empty, else hands it back. Only the slot's processor calls
    /// this (and [`restore`](Self::restore)).
    #[inline]
    pub fn put(&self, item: T, now: u64) -> Result<(), T> {
        if self.looks_full() {
            return Err(item);
        }
        self.fill(item, now);
        Ok(())
    }

    /// Puts `item` into the slot, which the owner knows to be empty (it has
    /// just taken from it).
    #[inline]
    pub fn restore(&self, item: T, now: u64) {
        debug_assert!(!self.looks_full(), "restore into a full wake slot");
        self.fill(item, now);
    }

    #[inline]
    fn fill(&self, item: T, now: u64) {
        // Relaxed: published by the Release store of the pointer below.
        self.ts.store(now, Ordering::Relaxed);
        // Release: a taker that reads this pointer with Acquire sees the
        // timestamp and the item's own writes. A plain store: the slot is
        // empty (the owner's null is exact) and only the owner fills it.
        let ptr = item.into_raw().as_ptr();
        #[cfg(not(loom))]
        self.item.store(ptr, Ordering::Release);
        // loom 0.7 lets a plain store fall between the read and the write of
        // another thread's read-modify-write, which the memory model forbids
        // (the task put would vanish under a concurrent take's swap); a swap
        // that reads null is the same put, and loom orders it correctly.
        #[cfg(loom)]
        assert!(self.item.swap(ptr, Ordering::Release).is_null());
    }

    /// Takes the task, if any.
    #[inline]
    pub fn take(&self) -> Option<T> {
        if !self.looks_full() {
            return None;
        }
        // Acquire: pairs with the put's Release store.
        let ptr = self.item.swap(ptr::null_mut(), Ordering::Acquire);
        // SAFETY: a non-null pointer in the slot came from `into_raw`, and
        // this swap is the one read-modify-write that read it.
        NonNull::new(ptr).map(|ptr| unsafe { T::from_raw(ptr) })
    }

    /// Takes the task if there is one and `accept` takes its timestamp.
    #[inline]
    pub fn take_if(&self, accept: impl FnOnce(u64) -> bool) -> Option<T> {
        // Acquire: the timestamp read next is this put's or a later one's.
        let ptr = self.item.load(Ordering::Acquire);
        if ptr.is_null() || !accept(self.ts.load(Ordering::Relaxed)) {
            return None;
        }
        // A failed exchange: the task was taken meanwhile (a later one may be
        // there already; the next look will judge it).
        let ptr = self
            .item
            .compare_exchange(ptr, ptr::null_mut(), Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // SAFETY: as in `take`: this exchange read the pointer, and it is
        // not null (it equals the one checked above).
        Some(unsafe { T::from_raw(NonNull::new_unchecked(ptr)) })
    }
}

impl<T: IntoRaw> Default for WakeSlot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for WakeSlot<T> {
    /// Drops a task left in the slot (a queue dropped with tasks in it, as
    /// its lanes drop theirs).
    fn drop(&mut self) {
        if let Some(ptr) = NonNull::new(self.item.swap(ptr::null_mut(), Ordering::Acquire)) {
            // SAFETY: a pointer from `T::into_raw` (see `new`), read by this
            // one swap.
            unsafe { (self.drop_left)(ptr) }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::WakeSlot;

    #[test]
    fn a_slot_holds_one_task_and_gives_it_to_the_taker_that_accepts_it() {
        let slot = WakeSlot::<u32>::new();
        assert_eq!(slot.take(), None);
        slot.put(7, 100).unwrap();
        assert!(slot.looks_full());
        assert_eq!(slot.put(8, 101), Err(8), "a full slot took a second task");
        assert_eq!(
            slot.take_if(|ts| ts > 100),
            None,
            "taken on a refused timestamp"
        );
        assert_eq!(slot.take_if(|ts| ts == 100), Some(7));
        assert_eq!(slot.take(), None);
        slot.restore(0, 5);
        assert_eq!(slot.take(), Some(0));
        assert!(!slot.looks_full());
    }
}
