//! Task-local storage: [`task_local!`](crate::task_local), [`LocalKey`] and
//! [`TaskLocalFuture`], with tokio's shapes.
//!
//! A key is a thread-local slot. [`LocalKey::scope`] wraps a future that
//! owns the value; around each poll the value is swapped into the slot of
//! the thread that polls and swapped back out after (a guard does it on a
//! panic too), so the value follows its task from processor to processor
//! and no other task sees it. Scopes nest: the outer value is what the
//! inner scope swaps out, and it is back once the inner poll returns.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Declares task-local keys ([`LocalKey`]s), as tokio's `task_local!`:
/// `[pub] static NAME: TYPE;`, any number of them, with attributes.
///
/// # Example
/// ```
/// fairlane::task_local! {
///     /// The request being served.
///     pub static REQUEST_ID: u64;
///     static USER: String;
/// }
///
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(REQUEST_ID.scope(7, async {
///     fairlane::task::yield_now().await;
///     assert_eq!(REQUEST_ID.get(), 7);
///     assert!(USER.try_with(|u| u.clone()).is_err());
/// }));
/// # Ok::<(), std::io::Error>(())
/// ```
#[macro_export]
macro_rules! task_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty; $($rest:tt)*) => {
        $crate::__task_local_inner!($(#[$attr])* $vis $name, $t);
        $crate::task_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty) => {
        $crate::__task_local_inner!($(#[$attr])* $vis $name, $t);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __task_local_inner {
    ($(#[$attr:meta])* $vis:vis $name:ident, $t:ty) => {
        $(#[$attr])*
        $vis static $name: $crate::task::LocalKey<$t> = {
            ::std::thread_local! {
                static __FAIRLANE_KEY: ::std::cell::RefCell<::std::option::Option<$t>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }
            $crate::task::LocalKey::__new(__FAIRLANE_KEY)
        };
    };
}

/// A task-local key, declared with [`task_local!`](crate::task_local). Its
/// value is set for the run of a future ([`scope`](Self::scope)) or a
/// closure ([`sync_scope`](Self::sync_scope)) and read inside with
/// [`with`](Self::with), [`try_with`](Self::try_with) or
/// [`get`](Self::get).
///
/// # Example
/// ```
/// fairlane::task_local! { static DEPTH: u32; }
/// DEPTH.sync_scope(1, || {
///     assert_eq!(DEPTH.get(), 1);
///     DEPTH.sync_scope(2, || assert_eq!(DEPTH.get(), 2));
///     assert_eq!(DEPTH.get(), 1);
/// });
/// assert!(DEPTH.try_with(|_| ()).is_err());
/// ```
pub struct LocalKey<T: 'static> {
    inner: std::thread::LocalKey<RefCell<Option<T>>>,
}

/// Why a scope could not be entered.
enum ScopeError {
    /// The slot is borrowed by a `with` on this thread.
    Borrowed,
    /// The thread's storage is being destroyed.
    Gone,
}

impl ScopeError {
    #[track_caller]
    fn panic(self) -> ! {
        match self {
            ScopeError::Borrowed => panic!(
                "cannot enter a task-local scope while the task-local value is borrowed \
                 (inside `with` or `try_with` of the same key)"
            ),
            ScopeError::Gone => panic!(
                "cannot enter a task-local scope while this thread's thread-local storage \
                 is being destroyed"
            ),
        }
    }
}

impl<T: 'static> LocalKey<T> {
    /// Used by [`task_local!`](crate::task_local).
    #[doc(hidden)]
    pub const fn __new(inner: std::thread::LocalKey<RefCell<Option<T>>>) -> LocalKey<T> {
        LocalKey { inner }
    }

    /// Runs `future` with the key set to `value` whenever it is polled
    /// (and while it is dropped).
    ///
    /// # Panics
    /// The returned future panics if polled inside [`with`](Self::with) of
    /// the same key.
    ///
    /// # Example
    /// ```
    /// fairlane::task_local! { static NAME: &'static str; }
    /// let rt = fairlane::Runtime::builder().processors(2).build()?;
    /// let a = rt.spawn(NAME.scope("a", async {
    ///     fairlane::task::yield_now().await;
    ///     NAME.get()
    /// }));
    /// let b = rt.spawn(NAME.scope("b", async { NAME.get() }));
    /// assert_eq!(rt.block_on(async { (a.await.unwrap(), b.await.unwrap()) }), ("a", "b"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn scope<F: Future>(&'static self, value: T, future: F) -> TaskLocalFuture<T, F> {
        TaskLocalFuture {
            local: self,
            slot: Some(value),
            future: Some(future),
        }
    }

    /// Runs `f` with the key set to `value`.
    ///
    /// # Panics
    /// If called inside [`with`](Self::with) of the same key; and if `f`
    /// panics (the key's previous value is back first).
    ///
    /// # Example
    /// ```
    /// fairlane::task_local! { static N: u8; }
    /// assert_eq!(N.sync_scope(3, || N.get() * 2), 6);
    /// ```
    #[track_caller]
    pub fn sync_scope<F: FnOnce() -> R, R>(&'static self, value: T, f: F) -> R {
        let mut slot = Some(value);
        match self.scope_inner(&mut slot, f) {
            Ok(result) => result,
            Err(e) => e.panic(),
        }
    }

    /// Swaps `slot` into the key, runs `f`, and swaps it back out (also
    /// if `f` panics).
    fn scope_inner<F: FnOnce() -> R, R>(
        &'static self,
        slot: &mut Option<T>,
        f: F,
    ) -> Result<R, ScopeError> {
        /// Swaps the values back when the scope ends, by return or panic.
        struct Restore<'a, T: 'static> {
            key: &'static LocalKey<T>,
            slot: &'a mut Option<T>,
        }
        impl<T: 'static> Drop for Restore<'_, T> {
            fn drop(&mut self) {
                // The swap in succeeded on this thread, and any borrow that
                // `f` took ended before `f` returned or unwound past it.
                let _ = self.key.inner.try_with(|cell| {
                    if let Ok(mut value) = cell.try_borrow_mut() {
                        std::mem::swap(self.slot, &mut *value);
                    }
                });
            }
        }
        self.inner
            .try_with(|cell| {
                cell.try_borrow_mut()
                    .map(|mut value| std::mem::swap(slot, &mut *value))
                    .map_err(|_| ScopeError::Borrowed)
            })
            .map_err(|_| ScopeError::Gone)??;
        let restore = Restore { key: self, slot };
        let result = f();
        drop(restore);
        Ok(result)
    }

    /// Runs `f` on the value.
    ///
    /// # Panics
    /// Outside a scope of this key.
    ///
    /// # Example
    /// ```
    /// fairlane::task_local! { static WORDS: Vec<&'static str>; }
    /// WORDS.sync_scope(vec!["a", "b"], || assert_eq!(WORDS.with(|w| w.len()), 2));
    /// ```
    #[track_caller]
    pub fn with<F: FnOnce(&T) -> R, R>(&'static self, f: F) -> R {
        match self.try_with(f) {
            Ok(result) => result,
            Err(_) => panic!(
                "cannot access a task-local value outside a scope of its key \
                 (LocalKey::scope or sync_scope)"
            ),
        }
    }

    /// Runs `f` on the value, or `Err(AccessError)` outside a scope of
    /// this key.
    ///
    /// # Example
    /// ```
    /// fairlane::task_local! { static ID: u32; }
    /// assert!(ID.try_with(|id| *id).is_err());
    /// assert_eq!(ID.sync_scope(4, || ID.try_with(|id| *id)), Ok(4));
    /// ```
    pub fn try_with<F: FnOnce(&T) -> R, R>(&'static self, f: F) -> Result<R, AccessError> {
        self.inner
            .try_with(|cell| {
                // Mutably borrowed only by a swap, which runs no user code.
                let value = cell.try_borrow().ok()?;
                value.as_ref().map(f)
            })
            .ok()
            .flatten()
            .ok_or(AccessError { _private: () })
    }

    /// A copy of the value.
    ///
    /// # Panics
    /// Outside a scope of this key.
    ///
    /// # Example
    /// ```
    /// fairlane::task_local! { static LIMIT: usize; }
    /// assert_eq!(LIMIT.sync_scope(10, || LIMIT.get()), 10);
    /// ```
    #[track_caller]
    pub fn get(&'static self) -> T
    where
        T: Clone,
    {
        self.with(T::clone)
    }

    /// A copy of the value, or `Err(AccessError)` outside a scope of this
    /// key (or inside one whose value was taken with
    /// [`TaskLocalFuture::take_value`]).
    ///
    /// # Example
    /// ```
    /// fairlane::task_local! { static LIMIT: usize; }
    /// assert!(LIMIT.try_get().is_err());
    /// assert_eq!(LIMIT.sync_scope(10, || LIMIT.try_get()), Ok(10));
    /// ```
    pub fn try_get(&'static self) -> Result<T, AccessError>
    where
        T: Clone,
    {
        self.try_with(T::clone)
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("LocalKey { .. }")
    }
}

/// The error of [`LocalKey::try_with`] outside a scope of the key.
///
/// # Example
/// ```
/// fairlane::task_local! { static K: i32; }
/// let err: fairlane::task::AccessError = K.try_with(|_| ()).unwrap_err();
/// assert_eq!(err.to_string(), "task-local value not set");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AccessError {
    _private: (),
}

impl fmt::Debug for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessError").finish()
    }
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task-local value not set")
    }
}

impl std::error::Error for AccessError {}

/// The future of [`LocalKey::scope`]: `future` with the key set to its
/// value whenever it is polled, and while it is dropped.
///
/// # Example
/// ```
/// fairlane::task_local! { static K: u8; }
/// let fut: fairlane::task::TaskLocalFuture<u8, _> = K.scope(1, async { K.get() });
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// assert_eq!(rt.block_on(fut), 1);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TaskLocalFuture<T: 'static, F> {
    local: &'static LocalKey<T>,
    /// The value while the future is not being polled.
    slot: Option<T>,
    /// Pinned with the struct: only polled through a pin and dropped in
    /// place, never moved. `None` once dropped (in `drop`).
    future: Option<F>,
}

impl<T: 'static, F: Future> Future for TaskLocalFuture<T, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out
        // (only polled through the pin below and dropped in place), and
        // nothing else of the struct is pinned (`slot` and `local` move
        // freely); the struct has no `Unpin` impl of its own.
        let this = unsafe { self.get_unchecked_mut() };
        let local = this.local;
        let future = &mut this.future;
        local
            .scope_inner(&mut this.slot, || {
                let future = future
                    .as_mut()
                    .expect("a TaskLocalFuture's future is there until it is dropped");
                // SAFETY: pinned in place inside the pinned struct (above).
                unsafe { Pin::new_unchecked(future) }.poll(cx)
            })
            .unwrap_or_else(|e| e.panic())
    }
}

impl<T: 'static, F> TaskLocalFuture<T, F> {
    /// Takes the value out of the scope, as tokio's method of that name:
    /// `Some` the first time, `None` after. The future may still be
    /// polled; from then on the key has no value inside it.
    ///
    /// # Example
    /// ```
    /// fairlane::task_local! { static K: u8; }
    /// let mut fut = Box::pin(K.scope(7, async { K.try_get().is_err() }));
    /// assert_eq!(fut.as_mut().take_value(), Some(7));
    /// assert_eq!(fut.as_mut().take_value(), None);
    /// let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// assert!(rt.block_on(fut), "the value is gone from the scope");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn take_value(self: Pin<&mut Self>) -> Option<T> {
        // SAFETY: only `slot` is touched, which is not structurally pinned
        // (see `poll`); the future is neither moved nor dropped.
        unsafe { self.get_unchecked_mut() }.slot.take()
    }
}

impl<T: 'static, F> Drop for TaskLocalFuture<T, F> {
    fn drop(&mut self) {
        // Drop the future inside the scope, so that its drop code sees the
        // value; where the scope cannot be entered, the field's own drop
        // drops it afterwards. Either way it is dropped in place.
        let local = self.local;
        let future = &mut self.future;
        if future.is_some() {
            let _ = local.scope_inner(&mut self.slot, || *future = None);
        }
    }
}

impl<T: 'static + fmt::Debug, F> fmt::Debug for TaskLocalFuture<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLocalFuture")
            .field("value", &self.slot)
            .finish_non_exhaustive()
    }
}
