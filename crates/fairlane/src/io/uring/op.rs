//! [`Op`], the future of one io_uring operation with owned resources, and
//! the cancellations it and a socket's carry ask for.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use io_uring::{opcode, squeue};

use super::ring::Ring;
use super::slot::{finish_now, OpSlot, Orphaned};
use super::{CANCEL, RESTART, UNSUBMITTED};
use crate::io::carry::{Carry, Keep};
use crate::io::driver::{shut_down_error, Driver, Engine, ProcessorIo, State};
use crate::task::coop;

/// The future of one io_uring operation. `T` owns everything the
/// submission entry points to; those pointers must be into heap memory
/// owned by `T` (moving `T` must not move it).
pub(crate) struct Op<T: Send + 'static> {
    proc: Arc<ProcessorIo>,
    key: usize,
    data: Option<T>,
    fd_result: bool,
    /// The entry as submitted (without its `user_data`), to submit again if
    /// the kernel cancels it ([`RESTART`], unless the operation must not be
    /// repeated: `repeatable`, see [`Op::once`]) or never consumed it
    /// ([`UNSUBMITTED`]).
    entry: squeue::Entry,
    repeatable: bool,
    /// Where a socket keeps what this operation's dropped future did not
    /// take (see [`Op::keep_in`]).
    keep: Option<(Arc<Carry>, Keep<T>)>,
}

impl<T: Send + 'static> Op<T> {
    /// Submits the entry `build` makes from `data` (its `user_data` is
    /// set here). `fd_result`: a successful result is a new descriptor.
    /// On failure `data` comes back with the error.
    pub(crate) fn submit(
        driver: &Driver,
        mut data: T,
        fd_result: bool,
        build: impl FnOnce(&mut T) -> squeue::Entry,
    ) -> Result<Op<T>, (io::Error, T)> {
        let entry = build(&mut data);
        match push_entry(driver, &entry) {
            Ok((proc, key)) => Ok(Op {
                proc,
                key,
                data: Some(data),
                fd_result,
                entry,
                repeatable: true,
                keep: None,
            }),
            Err(e) => Err((e, data)),
        }
    }

    /// This operation must not be repeated if its processor is removed
    /// while it is in flight (a `connect`, whose handshake the cancellation
    /// does not undo): its future then sees `ECANCELED`. (One whose entry
    /// the kernel never consumed is still done elsewhere.)
    pub(crate) fn once(mut self) -> Self {
        self.repeatable = false;
        self
    }

    /// A socket's read or write: if its future is dropped before it hands
    /// the result back, what it received (read) or did not send (write)
    /// goes to `carry`, and a dropped write is not cancelled (see
    /// [`Carry`]).
    pub(crate) fn keep_in(mut self, carry: &Arc<Carry>, keep: Keep<T>) -> Self {
        self.keep = Some((carry.clone(), keep));
        self
    }
}

/// Pushes `entry` (its `user_data` set here) on the calling thread's engine
/// (another live one if that one stopped or its ring broke) as a new
/// `Waiting` operation. With every ring broken, the error that broke this
/// one.
fn push_entry(driver: &Driver, entry: &squeue::Entry) -> io::Result<(Arc<ProcessorIo>, usize)> {
    let (mut proc, mut local) = driver.target()?;
    let mut fired = Vec::new();
    let mut st = proc.lock();
    let Engine::Uring(ring) = &proc.engine else {
        return Err(io::Error::other("not an io_uring runtime"));
    };
    let broken = ring.broken_error(&proc, &mut st, &mut fired);
    if st.is_stopped() || broken.is_some() {
        // The calling processor's engine stopped (the processor is being
        // removed while this thread still runs a task) or its ring broke:
        // use another.
        drop(st);
        fired.drain(..).for_each(Waker::wake);
        proc = match (driver.live_proc(proc.index), broken) {
            (Ok(other), _) => other,
            (Err(_), Some(e)) if driver.check_live().is_ok() => return Err(e),
            (Err(e), _) => return Err(e),
        };
        local = false;
        st = proc.lock();
        if st.is_stopped() {
            return Err(shut_down_error());
        }
    }
    let Engine::Uring(ring) = &proc.engine else {
        return Err(io::Error::other("not an io_uring runtime"));
    };
    let key = st.ops.insert(OpSlot::Waiting(None));
    let entry = entry.clone().user_data(key as u64);
    if let Err(e) = ring.push(&proc, &mut st, &entry, &mut fired) {
        st.ops.remove(key);
        drop(st);
        fired.into_iter().for_each(Waker::wake);
        return Err(e);
    }
    let appeared = proc.work_added(&st);
    // A thread that is not this ring's processor has no loop that would
    // flush its batch later: submit now. On the processor, flush when the
    // batch is large (the other flush points are in the driver).
    if !local || proc.unflushed() > crate::io::driver::FLUSH_THRESHOLD {
        proc.flush(&mut st);
        st.take_pending_wakers(&mut fired);
    }
    if !local {
        proc.wake_if_on_futex();
    }
    drop(st);
    fired.into_iter().for_each(Waker::wake);
    if appeared {
        driver.work_appeared(proc.index);
    }
    Ok((proc, key))
}

// `data` is never pinned: the kernel sees only heap memory it owns.
impl<T: Send + 'static> Unpin for Op<T> {}

impl<T: Send + 'static> Future for Op<T> {
    /// The kernel's result (a count, a descriptor) or its error, and the
    /// resources back.
    type Output = (io::Result<u32>, T);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.data.is_none() {
            panic!("a fairlane I/O operation was polled after it completed");
        }
        std::task::ready!(coop::poll_proceed(cx));
        let result = loop {
            let mut st = this.proc.lock();
            let result = match st.ops.get_mut(this.key) {
                Some(OpSlot::Done(result)) => *result,
                Some(OpSlot::Waiting(waker)) => {
                    if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        *waker = Some(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
                _ => unreachable!("an Op's slot is Waiting or Done while the Op lives"),
            };
            st.ops.remove(this.key);
            drop(st);
            let again = match result {
                UNSUBMITTED => true,
                RESTART => this.repeatable,
                _ => false,
            };
            if !again {
                break match result {
                    RESTART => Err(io::Error::from_raw_os_error(libc::ECANCELED)),
                    r if r < 0 => Err(io::Error::from_raw_os_error(-r)),
                    r => Ok(r as u32),
                };
            }
            // Its processor was removed before the kernel did anything with
            // it, or its ring broke before the kernel read its entry: do it
            // on another engine. The kernel is done with the resources (the
            // cancelled entry's completion was reaped; the unconsumed entry
            // is never read), and they are still where the entry points
            // (`data`).
            let Some(driver) = this.proc.driver.upgrade() else {
                break Err(io::Error::from_raw_os_error(libc::ECANCELED));
            };
            match push_entry(&driver, &this.entry) {
                // Poll the new slot (registers the waker).
                Ok((proc, key)) => (this.proc, this.key) = (proc, key),
                Err(e) => break Err(e),
            }
        };
        coop::spend();
        let data = this.data.take().expect("checked above");
        Poll::Ready((result, data))
    }
}

impl<T: Send + 'static> Drop for Op<T> {
    fn drop(&mut self) {
        let Some(data) = self.data.take() else { return };
        let Engine::Uring(ring) = &self.proc.engine else {
            return;
        };
        let mut fired = Vec::new();
        let mut st = self.proc.lock();
        let stopped = st.is_stopped();
        let Some(slot) = st.ops.get_mut(self.key) else {
            return;
        };
        let keep = self.keep.take();
        match slot {
            OpSlot::Done(result) => {
                let result = *result;
                st.ops.remove(self.key);
                finish_now(data, self.fd_result, keep, result);
            }
            OpSlot::Waiting(_) if stopped => {
                // The processor stopped without reaping this operation (it
                // gave up waiting): the kernel may still write, so leak.
                std::mem::forget(data);
            }
            OpSlot::Waiting(_) => {
                let write = matches!(keep, Some((_, Keep::Write(_))));
                match &keep {
                    Some((carry, Keep::Read(_))) => carry.read_dropped(),
                    Some((carry, Keep::Write(_))) => carry.write_dropped(&self.proc, self.key),
                    None => {}
                }
                *slot = OpSlot::Abandoned(Box::new(Orphaned {
                    data,
                    fd_result: self.fd_result,
                    keep,
                }));
                if !write {
                    cancel_now(ring, &self.proc, &mut st, self.key, &mut fired);
                }
            }
            OpSlot::Abandoned(..) => {}
        }
        drop(st);
        fired.into_iter().for_each(Waker::wake);
    }
}

/// Asks the kernel to cancel operation `key` of `proc` (lock held, `st`
/// from its guard), submitted at once: the entry being cancelled may still
/// sit unsubmitted in the queue, naming a descriptor its owner is about to
/// close (and the number could be reused).
fn cancel_now(ring: &Ring, proc: &ProcessorIo, st: &mut State, key: usize, fired: &mut Vec<Waker>) {
    let cancel = opcode::AsyncCancel::new(key as u64)
        .build()
        .user_data(CANCEL);
    let _ = ring.push(proc, st, &cancel, fired);
    proc.flush_now(st);
    st.take_pending_wakers(fired);
}

/// A socket with carried writes in flight is dropped: cancels each that is
/// still in flight (a peer that never reads would otherwise keep them, and
/// the connection, alive until the runtime shuts down).
pub(crate) fn cancel_kept(carry: &Carry) {
    for (proc, key) in carry.close() {
        let Some(proc) = proc.upgrade() else { continue };
        let Engine::Uring(ring) = &proc.engine else {
            continue;
        };
        let mut fired = Vec::new();
        let mut st = proc.lock();
        // Under the engine lock, a key still listed is still that write's
        // slot: its completion removes it from the list under this lock.
        if !st.is_stopped() && carry.write_in_flight(&proc, key) {
            cancel_now(ring, &proc, &mut st, key, &mut fired);
        }
        drop(st);
        fired.into_iter().for_each(Waker::wake);
    }
}
