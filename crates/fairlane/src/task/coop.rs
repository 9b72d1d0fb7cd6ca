//! The cooperative budget: a task whose I/O and timer futures keep being
//! ready would otherwise never return to its processor's loop, and every
//! other task queued there (and the processor's completions) would wait.
//!
//! Each processor resets its thread's budget at the top of every scheduling
//! iteration, i.e. before each task poll (`reset`). Every ready result of
//! fairlane's own I/O and timer futures spends one unit; once it is spent, the
//! next such future wakes its task and returns `Pending` once, so the task
//! goes back to its lane. Threads that are not processors (a `block_on`
//! thread) have no budget: nothing else waits for them.
//!
//! The public items have tokio's `task::coop` shapes: [`consume_budget`]
//! for a loop that would otherwise never yield, [`cooperative`] to make any
//! future take part, [`unconstrained`] to opt a future out, and
//! [`has_budget_remaining`].
//!
//! tokio's own primitives (its channels, `tokio::io::empty()`, …) spend
//! tokio's budget, which only tokio's scheduler sets: on fairlane they never
//! run out, so a loop over an always-ready tokio primitive never yields and
//! a `fairlane::time::timeout` around it cannot fire. Such a loop needs a
//! `consume_budget().await` (or its futures wrapped in [`cooperative`]).
//!
//! # Example
//! ```
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! let spins = rt.block_on(rt.spawn(async {
//!     // Always ready: without the budget, the loop would hold the
//!     // processor until it ends.
//!     let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
//!     let mut spins = 0u32;
//!     while spins < 1_000 {
//!         tx.send(spins).unwrap();
//!         rx.recv().await;
//!         fairlane::task::coop::consume_budget().await;
//!         spins += 1;
//!     }
//!     spins
//! }))
//! .unwrap();
//! assert_eq!(spins, 1_000);
//! # Ok::<(), std::io::Error>(())
//! ```

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Ready results allowed per task poll, as tokio's.
const BUDGET: u32 = 128;

thread_local! {
    static REMAINING: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Gives the calling processor thread a full budget (a new task poll).
#[inline]
pub(crate) fn reset() {
    REMAINING.with(|r| r.set(Some(BUDGET)));
}

/// Runs `f` (a poll of a `block_on` future, which is no task) with a full
/// budget of its own, as a task poll has; the thread's budget before is
/// back afterwards, also if `f` panics.
pub(crate) fn with_budget<R>(f: impl FnOnce() -> R) -> R {
    let _budget = fresh_budget();
    f()
}

/// Gives the thread a full budget until the guard is dropped, then puts the
/// one before it back: for a task polled inside another task's poll (a
/// `LocalSet`'s tasks), which must neither spend nor be stopped by the
/// budget of the task that polls its set.
pub(crate) fn fresh_budget() -> BudgetGuard {
    BudgetGuard(REMAINING.with(|r| r.replace(Some(BUDGET))))
}

/// Puts the budget before [`fresh_budget`] back when dropped (also while
/// unwinding).
pub(crate) struct BudgetGuard(Option<u32>);

impl Drop for BudgetGuard {
    fn drop(&mut self) {
        REMAINING.with(|r| r.set(self.0));
    }
}

/// The thread stops being a processor: no budget any more.
pub(crate) fn clear() {
    REMAINING.with(|r| r.set(None));
}

/// `Ready` if the task may go on; otherwise wakes it and returns `Pending`.
#[inline]
pub(crate) fn poll_proceed(cx: &mut Context<'_>) -> Poll<()> {
    if REMAINING.with(Cell::get) == Some(0) {
        crate::host::run_again(cx.waker());
        Poll::Pending
    } else {
        Poll::Ready(())
    }
}

/// Spends one unit: a future returned `Ready`.
#[inline]
pub(crate) fn spend() {
    REMAINING.with(|r| {
        if let Some(n) = r.get() {
            r.set(Some(n.saturating_sub(1)));
        }
    });
}

/// Waits for budget and spends one unit: for an operation that may complete
/// without ever waiting (a system call tried before anything is submitted).
pub(crate) async fn proceed() {
    std::future::poll_fn(|cx| {
        std::task::ready!(poll_proceed(cx));
        spend();
        Poll::Ready(())
    })
    .await
}

/// Spends one unit of the task's budget, first yielding to the processor
/// if the budget is spent (tokio's `task::consume_budget`). For a loop
/// whose awaits are always ready and spend no budget of fairlane's (a
/// tokio channel, a computation), so that it still yields and timeouts
/// around it can fire. Outside a task and outside a `block_on` future it
/// returns at once.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(rt.spawn(async {
///     for _ in 0..1_000 {
///         fairlane::task::consume_budget().await;
///     }
/// }))
/// .unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn consume_budget() {
    proceed().await
}

/// Whether the task polled on this thread has budget left (tokio's
/// `task::coop::has_budget_remaining`). Always true outside a task and
/// outside a `block_on` future.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// assert!(rt.block_on(rt.spawn(async { fairlane::task::coop::has_budget_remaining() })).unwrap());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn has_budget_remaining() -> bool {
    REMAINING.with(Cell::get) != Some(0)
}

/// Makes `future` take part in the budget: each poll first yields if the
/// budget is spent, and a `Ready` spends one unit (tokio's
/// `task::coop::cooperative`).
///
/// # Example
/// ```
/// use fairlane::task::coop::cooperative;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let n = rt.block_on(rt.spawn(async {
///     let mut n = 0;
///     for _ in 0..500 {
///         n += cooperative(async { 1 }).await;
///     }
///     n
/// }))
/// .unwrap();
/// assert_eq!(n, 500);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn cooperative<F: Future>(future: F) -> Coop<F> {
    Coop { future }
}

/// The future of [`cooperative`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Coop<F> {
    future: F,
}

impl<F: Future> Future for Coop<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        std::task::ready!(poll_proceed(cx));
        // SAFETY: `future` is structurally pinned: never moved out of
        // `self`, which has no `Drop` or `Unpin` impl of its own.
        let future = unsafe { self.map_unchecked_mut(|c| &mut c.future) };
        let output = std::task::ready!(future.poll(cx));
        spend();
        Poll::Ready(output)
    }
}

/// Runs `future` outside the budget: while it is polled, fairlane's I/O and
/// timer futures inside it never make it yield (tokio's
/// `task::unconstrained`). It may then hold its processor as long as its
/// awaits are ready: for work that must not be interrupted, briefly.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(rt.spawn(fairlane::task::unconstrained(async {
///     assert!(fairlane::task::coop::has_budget_remaining());
/// })))
/// .unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn unconstrained<F: Future>(future: F) -> Unconstrained<F> {
    Unconstrained { future }
}

/// The future of [`unconstrained`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Unconstrained<F> {
    future: F,
}

impl<F: Future> Future for Unconstrained<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        /// Puts the task's budget back after the poll, also on a panic.
        struct Restore(Option<u32>);
        impl Drop for Restore {
            fn drop(&mut self) {
                REMAINING.with(|r| r.set(self.0));
            }
        }
        let _restore = Restore(REMAINING.with(|r| r.replace(None)));
        // SAFETY: as in `Coop::poll`.
        let future = unsafe { self.map_unchecked_mut(|u| &mut u.future) };
        future.poll(cx)
    }
}
