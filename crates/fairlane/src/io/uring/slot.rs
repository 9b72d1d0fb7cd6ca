//! An operation's slot in the slab, and a dropped operation's resources
//! waiting there for its completion (`Orphan`).

use std::sync::Arc;
use std::task::Waker;

use super::{RESTART, UNSUBMITTED};
use crate::io::carry::{Carry, Keep, Received};
use crate::io::driver::ProcessorIo;

/// One operation as the slab sees it.
pub(crate) enum OpSlot {
    /// In flight; the waker of the task awaiting it.
    Waiting(Option<Waker>),
    /// Completed with this result; its `Op` has not looked yet.
    Done(i32),
    /// In flight, its future dropped: the resources the kernel may still
    /// use, finished when the completion arrives.
    Abandoned(Box<dyn Orphan>),
}

/// A dropped operation's resources, waiting in the slab for its completion.
pub(crate) trait Orphan: Send {
    /// The completion arrived: closes a descriptor it produced, hands what a
    /// socket must keep to its carry (wakers of tasks waiting there go to
    /// `fired`), and frees the rest. Runs under the engine's lock.
    fn finish(self: Box<Self>, proc: &ProcessorIo, key: usize, result: i32, fired: &mut Vec<Waker>);
    /// The completion will never be reaped (the engine stopped): the
    /// resources are leaked, never freed, since the kernel may still use
    /// them; a carry learns that nothing will come.
    fn leak(self: Box<Self>, proc: &ProcessorIo, key: usize, fired: &mut Vec<Waker>);
}

/// The resources of a dropped [`Op`] and what becomes of them.
pub(super) struct Orphaned<T> {
    pub(super) data: T,
    pub(super) fd_result: bool,
    pub(super) keep: Option<(Arc<Carry>, Keep<T>)>,
}

impl<T: Send + 'static> Orphan for Orphaned<T> {
    fn finish(
        self: Box<Self>,
        proc: &ProcessorIo,
        key: usize,
        result: i32,
        fired: &mut Vec<Waker>,
    ) {
        let Orphaned {
            data,
            fd_result,
            keep,
        } = *self;
        if fd_result && result >= 0 {
            // SAFETY: the operation produced this descriptor and its future
            // is gone: nobody else owns it.
            unsafe { libc::close(result) };
        }
        match keep {
            None => {}
            Some((carry, Keep::Read(received))) => {
                carry.read_done(read_outcome(data, received, result), fired);
            }
            Some((carry, Keep::Write(unsent))) => {
                let rest = if result >= 0 {
                    unsent(data, result as usize)
                } else if result == -libc::ECANCELED && !carry.is_closed() {
                    // Cancelled by the kernel, not by the socket's drop: its
                    // engine stopped before sending (a partial send reports
                    // its count instead), so all of it is still to be sent.
                    unsent(data, 0)
                } else {
                    None // the connection failed: later writes see it too
                };
                carry.write_done(proc, key, rest, fired);
            }
        }
    }

    fn leak(self: Box<Self>, proc: &ProcessorIo, key: usize, fired: &mut Vec<Waker>) {
        let Orphaned { data, keep, .. } = *self;
        std::mem::forget(data);
        match keep {
            None => {}
            Some((carry, Keep::Read(_))) => carry.read_done(None, fired),
            Some((carry, Keep::Write(_))) => carry.write_done(proc, key, None, fired),
        }
    }
}

/// What a dropped read's completion (`result`) leaves for the next read: the
/// bytes or datagram it received (none: the end of a stream, or an empty
/// datagram), or the error it reported; nothing if it was cancelled (or is
/// due to be submitted again, [`RESTART`], [`UNSUBMITTED`]) before the
/// kernel did anything.
fn read_outcome<T>(data: T, received: fn(T, usize) -> Received, result: i32) -> Option<Received> {
    match result {
        n if n >= 0 => Some(received(data, n as usize)),
        RESTART | UNSUBMITTED => None,
        e if e == -libc::ECANCELED => None,
        e => Some(Received::error(-e)),
    }
}

/// What a dropped operation's future leaves behind, finished now that its
/// completion is here (`result` as recorded in its `Done` slot).
pub(super) fn finish_now<T: Send + 'static>(
    data: T,
    fd_result: bool,
    keep: Option<(Arc<Carry>, Keep<T>)>,
    result: i32,
) {
    if fd_result && result >= 0 {
        // SAFETY: a descriptor produced for this dropped operation; nobody
        // else owns it.
        unsafe { libc::close(result) };
    }
    match keep {
        None => {}
        Some((carry, Keep::Read(received))) => {
            if let Some(got) = read_outcome(data, received, result) {
                carry.received_now(got);
            }
        }
        Some((carry, Keep::Write(unsent))) => {
            // A restart is due: the kernel did nothing with it.
            let sent = if result == RESTART || result == UNSUBMITTED {
                Some(0)
            } else {
                usize::try_from(result).ok()
            };
            if let Some(rest) = sent.and_then(|n| unsent(data, n)) {
                carry.unsent_now(rest);
            }
        }
    }
}
