//! The task cell's state word: its bits, and every transition as one
//! function. `task.md` beside `task.rs` describes the state machine; each
//! function here says which transition it is and who may make it.

use crate::sync::{AtomicUsize, Ordering};

/// In the ready queue, or about to be: a [`Runnable`](super::raw::Runnable)
/// exists. Set by the wake that finds the task idle (or by the poll that
/// ends with `NOTIFIED`), cleared by the poll that takes the runnable.
pub(crate) const SCHEDULED: usize = 1 << 0;
/// A processor is polling the task (or dropping its future).
pub(crate) const RUNNING: usize = 1 << 1;
/// Woken while `RUNNING`: the poll re-queues the task when it ends.
pub(crate) const NOTIFIED: usize = 1 << 2;
/// The future is gone; the output (unless `CLOSED`) is in the cell.
pub(crate) const COMPLETE: usize = 1 << 3;
/// There is no output in the cell: it was never made (the future was
/// dropped unfinished) or it was taken by the join handle.
pub(crate) const CLOSED: usize = 1 << 4;
/// The join handle exists: it, not the runner, owns the output.
pub(crate) const HANDLE: usize = 1 << 5;
/// The join handle's waker is in the cell's awaiter slot, for the runner to
/// wake at completion. While it is set only the runner reads the slot and
/// nobody writes it.
pub(crate) const AWAITER: usize = 1 << 6;

/// One reference (a runnable, a waker, the join handle): the count is the
/// word above the flag bits.
pub(crate) const REF_ONE: usize = 1 << 7;
const REF_MASK: usize = !(REF_ONE - 1);

/// A count this high means references leak; stop before the count wraps.
const REF_LIMIT: usize = usize::MAX >> 2;

/// A task's initial state: queued (the spawner's runnable), with its join
/// handle; two references, the runnable's and the handle's.
pub(crate) const INITIAL: usize = SCHEDULED | HANDLE | (2 * REF_ONE);

/// A value of the state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot(pub(crate) usize);

impl Snapshot {
    #[inline]
    pub(crate) fn has(self, bits: usize) -> bool {
        self.0 & bits != 0
    }

    #[inline]
    pub(crate) fn refs(self) -> usize {
        self.0 >> REF_ONE.trailing_zeros()
    }
}

/// What a wake by reference must do after its transition.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WakeByRef {
    /// Nothing: queued, running (now `NOTIFIED`), or complete.
    Nothing,
    /// The task was idle: it is `SCHEDULED` now, with a new reference for
    /// the runnable the waker must push.
    Schedule,
}

/// What a wake by value must do after its transition.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WakeByVal {
    /// Nothing: the waker's reference was given up.
    Nothing,
    /// The waker's reference was the last one: free the cell.
    Dealloc,
    /// The task was idle: it is `SCHEDULED` now, and the waker's reference
    /// became the runnable's, which the waker must push.
    Schedule,
}

/// What the runner must do after the poll returned `Pending`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Idle {
    /// Idle now; the runnable's reference was given up.
    Ok,
    /// Idle now, and that reference was the last: free the cell.
    Dealloc,
    /// Woken during the poll: `SCHEDULED` again, the runnable's reference
    /// kept for the new runnable, which the runner must push.
    Requeue,
}

/// The state word.
pub(crate) struct State(AtomicUsize);

impl State {
    pub(crate) fn new() -> Self {
        Self(AtomicUsize::new(INITIAL))
    }

    #[inline]
    pub(crate) fn load(&self) -> Snapshot {
        // Acquire: whoever acts on what it sees (the join handle on
        // `COMPLETE`, reading the output) sees the writes made before the
        // transition it observes (the output, made before the Release of
        // `complete`).
        Snapshot(self.0.load(Ordering::Acquire))
    }

    /// A CAS loop over `f`, which returns the new value (`None`: no write)
    /// and what to report. One read-modify-write when uncontended.
    ///
    /// AcqRel on success: Release publishes what this thread did before the
    /// transition (the future's state after a poll, the data a waker
    /// signals) to whoever observes the new value with Acquire (the next
    /// poller's `start`, the last reference's holder before freeing), and
    /// Acquire makes the previous holders' writes visible to this one.
    #[inline]
    fn update<R>(&self, mut f: impl FnMut(Snapshot) -> (Option<usize>, R)) -> (Snapshot, R) {
        let mut cur = self.0.load(Ordering::Acquire);
        loop {
            let (next, result) = f(Snapshot(cur));
            let Some(next) = next else {
                return (Snapshot(cur), result);
            };
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return (Snapshot(cur), result),
                Err(actual) => cur = actual,
            }
        }
    }

    /// `SCHEDULED` → `RUNNING`. Only the holder of the runnable, which
    /// exists only while `SCHEDULED` is set and `RUNNING` is not (so the
    /// xor flips exactly those two bits). One read-modify-write, no loop.
    #[inline]
    pub(crate) fn start(&self) -> Snapshot {
        // Acquire pairs with the Release of the transition that scheduled
        // the task (a wake, or the previous poll's `idle`): this poll sees
        // the future as the last poll left it and what the waker published.
        let prev = Snapshot(self.0.fetch_xor(SCHEDULED | RUNNING, Ordering::Acquire));
        debug_assert!(prev.has(SCHEDULED) && !prev.has(RUNNING | COMPLETE));
        prev
    }

    /// `RUNNING` → idle after a poll that returned `Pending`: one
    /// read-modify-write. If `NOTIFIED` (woken during the poll) or
    /// `requeue` (the task asked the host to run again, `Host::poll_ended`),
    /// `SCHEDULED` again and the runnable's reference is kept for the new
    /// runnable; otherwise that reference is given up in the same write.
    /// Only the runner.
    #[inline]
    pub(crate) fn idle(&self, requeue: bool) -> Idle {
        self.update(|s| {
            debug_assert!(s.has(RUNNING) && !s.has(SCHEDULED | COMPLETE));
            if requeue || s.has(NOTIFIED) {
                (Some(s.0 & !(RUNNING | NOTIFIED) | SCHEDULED), Idle::Requeue)
            } else {
                let next = (s.0 & !RUNNING) - REF_ONE;
                let action = if next & REF_MASK == 0 {
                    Idle::Dealloc
                } else {
                    Idle::Ok
                };
                (Some(next), action)
            }
        })
        .1
    }

    /// `RUNNING` (or `SCHEDULED`, for a runnable dropped unrun) →
    /// `COMPLETE`, plus `CLOSED` when no output was stored. Only the holder
    /// of the runnable, once the future is dropped (and the output written).
    /// `NOTIFIED` is cleared: a complete task is never queued again. The
    /// caller still holds the runnable's reference. Returns the state before.
    #[inline]
    pub(crate) fn complete(&self, closed: bool) -> Snapshot {
        let extra = if closed { COMPLETE | CLOSED } else { COMPLETE };
        self.update(|s| {
            debug_assert!(!s.has(COMPLETE));
            (Some(s.0 & !(SCHEDULED | RUNNING | NOTIFIED) | extra), ())
        })
        .0
    }

    /// A wake by reference (the waker stays). Idle → `SCHEDULED` with a new
    /// reference; `RUNNING` → `NOTIFIED`; queued, notified or complete: no
    /// write at all. Anyone holding a reference.
    ///
    /// A wake that finds the task queued writes nothing, so it publishes
    /// nothing: what the woken future reads must be synchronised by the
    /// primitive that woke it (as with any waker; a channel's own atomics
    /// or lock do that). The poll it waits for has not started (`SCHEDULED`
    /// is still set), so it will see the primitive's state.
    #[inline]
    pub(crate) fn wake_by_ref(&self) -> WakeByRef {
        self.update(|s| {
            if s.has(SCHEDULED | NOTIFIED | COMPLETE) {
                (None, WakeByRef::Nothing)
            } else if s.has(RUNNING) {
                (Some(s.0 | NOTIFIED), WakeByRef::Nothing)
            } else {
                check_refs(s);
                (Some((s.0 | SCHEDULED) + REF_ONE), WakeByRef::Schedule)
            }
        })
        .1
    }

    /// A wake by value (the waker is consumed). Idle → `SCHEDULED`, the
    /// waker's reference becoming the runnable's; otherwise as
    /// [`wake_by_ref`](Self::wake_by_ref), giving up the waker's reference in
    /// the same write. One read-modify-write.
    #[inline]
    pub(crate) fn wake_by_val(&self) -> WakeByVal {
        self.update(|s| {
            if s.has(SCHEDULED | NOTIFIED | COMPLETE) {
                let next = s.0 - REF_ONE;
                let action = if next & REF_MASK == 0 {
                    WakeByVal::Dealloc
                } else {
                    WakeByVal::Nothing
                };
                (Some(next), action)
            } else if s.has(RUNNING) {
                // The runner's reference remains: never the last.
                (Some((s.0 | NOTIFIED) - REF_ONE), WakeByVal::Nothing)
            } else {
                (Some(s.0 | SCHEDULED), WakeByVal::Schedule)
            }
        })
        .1
    }

    /// A new reference (a waker clone). Anyone holding a reference.
    #[inline]
    pub(crate) fn ref_inc(&self) {
        // Relaxed: the caller's own reference keeps the cell alive, and a
        // new reference publishes nothing (as `Arc::clone`).
        let prev = Snapshot(self.0.fetch_add(REF_ONE, Ordering::Relaxed));
        check_refs(prev);
    }

    /// Gives up a reference; true if it was the last (free the cell).
    #[inline]
    pub(crate) fn ref_dec(&self) -> bool {
        // Release publishes this holder's accesses to the cell to the one
        // that frees it. That one's Acquire is the load of the state word at
        // the start of `dealloc`: every write of the word is a
        // read-modify-write, so the load reads the end of a release sequence
        // holding every holder's Release. (The Acquire here adds nothing that
        // load does not give; AcqRel costs the same as Release on x86.)
        let prev = Snapshot(self.0.fetch_sub(REF_ONE, Ordering::AcqRel));
        debug_assert!(prev.refs() > 0);
        prev.refs() == 1
    }

    /// The join handle stores its waker: sets `AWAITER`, unless the task
    /// completed first (`Err`, with the state then). Only the join handle,
    /// after writing the slot while `AWAITER` was clear.
    pub(crate) fn set_awaiter(&self) -> Result<(), Snapshot> {
        let (prev, ok) = self.update(|s| {
            if s.has(COMPLETE) {
                (None, false)
            } else {
                (Some(s.0 | AWAITER), true)
            }
        });
        if ok {
            Ok(())
        } else {
            Err(prev)
        }
    }

    /// The join handle takes its waker back to change it: clears
    /// `AWAITER`, unless the task completed first (`Err`). Only the join
    /// handle.
    pub(crate) fn unset_awaiter(&self) -> Result<(), Snapshot> {
        let (prev, ok) = self.update(|s| {
            debug_assert!(s.has(AWAITER));
            if s.has(COMPLETE) {
                (None, false)
            } else {
                (Some(s.0 & !AWAITER), true)
            }
        });
        if ok {
            Ok(())
        } else {
            Err(prev)
        }
    }

    /// The join handle took the output: `CLOSED`. Only the join handle,
    /// after seeing `COMPLETE`.
    pub(crate) fn close(&self) {
        // Relaxed: only the handle reads `CLOSED` after `COMPLETE`; it is a
        // note to itself (and to its own drop), ordered by program order.
        self.0.fetch_or(CLOSED, Ordering::Relaxed);
    }

    /// The join handle is dropped: if the task is not complete, clears
    /// `HANDLE` and gives up the handle's reference in one write (the
    /// runner will drop the output); `Err` if complete (the handle drops the
    /// output, then its reference). `Ok(true)`: that was the last reference.
    pub(crate) fn drop_handle(&self) -> Result<bool, Snapshot> {
        let (prev, last) = self.update(|s| {
            if s.has(COMPLETE) {
                (None, None)
            } else {
                let next = (s.0 & !HANDLE) - REF_ONE;
                (Some(next), Some(next & REF_MASK == 0))
            }
        });
        last.ok_or(prev)
    }
}

/// Stops a leak of references before the count can wrap.
#[inline]
fn check_refs(s: Snapshot) {
    if s.0 > REF_LIMIT {
        ref_overflow();
    }
}

#[cold]
#[inline(never)]
fn ref_overflow() -> ! {
    panic!("a task's reference count overflowed: wakers are being leaked");
}
