//! The synchronisation primitives the core is built from, behind one shim.
//!
//! Under `--cfg loom` every atomic, cell and spin hint comes from `loom`, so
//! the loom models in `tests/` exercise the production modules themselves,
//! never a copy. Otherwise they are `core`'s own, at zero cost.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};

pub(crate) use core::sync::atomic::Ordering;

/// One step of a bounded spin: a CPU hint normally, a scheduling point under
/// loom (loom must be told when a thread waits on another one).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// An `UnsafeCell` with loom's closure-based access API, so the same code
/// compiles against both.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A test-and-test-and-set spin lock for critical sections of a few
/// instructions that never run user code (lane push/pop, the idle list, the
/// task registry). `try_lock` is what the fast paths use: a busy lane is
/// skipped rather than waited for.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `value` to one thread at a time
// (`locked` is taken with Acquire and released with Release), so sharing a
// `SpinLock<T>` is as safe as sending a `T` between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock if it is free right now.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // Acquire pairs with the Release in `SpinGuard::drop`: the previous
        // holder's writes to `value` are visible to us.
        if !self.locked.load(Ordering::Relaxed)
            && self
                .locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            Some(SpinGuard { lock: self })
        } else {
            None
        }
    }

    /// Takes the lock, spinning while another thread holds it. Holders never
    /// run user code, so the wait is a handful of instructions long.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            while self.locked.load(Ordering::Relaxed) {
                spin_hint();
            }
        }
    }
}

pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinGuard<'_, T> {
    /// Runs `f` on the protected value.
    #[inline]
    pub(crate) fn with<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: holding the guard means holding the lock, so no other
        // reference to `value` exists for the duration of `f`.
        self.lock.value.with_mut(|ptr| f(unsafe { &mut *ptr }))
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release publishes every write made under the lock to the next
        // holder's Acquire.
        self.lock.locked.store(false, Ordering::Release);
    }
}
