//! The cooperative budget: a task whose I/O and timer futures keep being
//! ready would otherwise never return to its processor's loop, and every
//! other task queued there (and the processor's completions) would wait.
//!
//! Each processor resets its thread's budget at the top of every scheduling
//! iteration, i.e. before each task poll ([`reset`]). Every ready result of
//! fairlane's own I/O and timer futures spends one unit; once it is spent, the
//! next such future wakes its task and returns `Pending` once, so the task
//! goes back to its lane. Threads that are not processors (a `block_on`
//! thread) have no budget: nothing else waits for them.

use std::cell::Cell;
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
