//! The io_uring engine: a processor's ring, its submission and completion
//! paths, and [`Op`], the future of one operation with owned resources.
//!
//! Why this is safe (the full argument is in `driver.md`):
//! - every access to the ring's queues happens under the processor's lock,
//!   which is what the crate's `submission_shared`/`completion_shared`
//!   require;
//! - an operation's resources (buffers, addresses, paths) live in its `Op`
//!   until the completion arrives; a dropped `Op` moves them into the slab
//!   (`OpSlot::Abandoned`), where the completion frees them (after handing
//!   what a socket's read received, or what its write did not send, to the
//!   socket's [`Carry`]);
//! - stopping a processor cancels and reaps every operation before its ring
//!   or anything it points to is freed, and leaks (never frees) what it
//!   could not reap;
//! - after an `io_uring_enter` error that is not ridden out the ring is
//!   *broken*: nobody enters it to submit again, so the entries the kernel
//!   had not consumed (the last ones published, as many as the queue's
//!   length) are never read by it, and their operations are done elsewhere
//!   (`Ring::settle`).

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

use super::carry::{Carry, Keep, Received};
use super::driver::{eventfd, eventfd_signal, shut_down_error, Driver, Engine, ProcessorIo, State};
use crate::task::coop;

/// `user_data` of the read on the wake-up eventfd.
const WAKE: u64 = u64::MAX;
/// `user_data` of cancellation requests (their completions are ignored).
const CANCEL: u64 = u64::MAX - 1;
/// Entries of each ring's submission queue.
const ENTRIES: u32 = 256;
/// The result recorded for an operation the kernel cancelled without its
/// future asking (its engine stopped, or the thread that submitted it
/// exited): its `Op` submits it again on a live engine (`complete`).
const RESTART: i32 = i32::MIN;
/// The result recorded for an operation whose entry the kernel never
/// consumed, on a ring that broke (`Ring::settle`): its `Op` submits it
/// again on another engine, even one that must not be repeated after a
/// cancellation ([`Op::once`]), since the kernel never saw it.
const UNSUBMITTED: i32 = i32::MIN + 1;
/// How many times a submission is retried after `EINTR`, `EBUSY` or
/// `EAGAIN` before the error breaks the ring (each retry after `EBUSY` or
/// `EAGAIN` reaps completions first).
const SUBMIT_RETRIES: u32 = 64;
/// How long stopping a processor waits for cancelled operations.
const STOP_PATIENCE: Duration = Duration::from_secs(5);
/// How long a synchronous cancellation of a broken ring's operations may
/// wait for requests the kernel is running (`Ring::evacuate`).
const SYNC_CANCEL_PATIENCE: Duration = Duration::from_millis(50);

/// What the processor's lock guards of a ring's submission side: the
/// `user_data` of the entries published, oldest first, back to at least the
/// oldest the kernel has not consumed, and whether the ring is broken (its
/// unconsumed entries settled). The kernel consumes entries in order, so the
/// last `len()` of the queue are exactly those it has not read.
#[derive(Default)]
pub(crate) struct SqLog {
    published: VecDeque<u64>,
    broken: Option<i32>,
}

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
struct Orphaned<T> {
    data: T,
    fd_result: bool,
    keep: Option<(Arc<Carry>, Keep<T>)>,
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
fn finish_now<T: Send + 'static>(
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

/// A processor's io_uring instance and its wake-up eventfd.
pub(crate) struct Ring {
    ring: IoUring,
    wake_fd: OwnedFd,
    /// Where the eventfd read lands; written by the kernel only. Leaked
    /// instead of freed if the read is still in flight when the ring is
    /// dropped (`leak_wake`).
    wake_buf: ManuallyDrop<Box<UnsafeCell<u64>>>,
    /// Set when stopping gave up waiting for the read (`cancel_all`),
    /// cleared when its completion arrives after all. Written under the
    /// processor's lock and read in `drop` (exclusive access), so `Relaxed`
    /// suffices: the lock and the drop's `&mut` order the accesses.
    leak_wake: AtomicBool,
    /// Held across every `io_uring_enter` that submits; holds the error that
    /// broke the ring (driver.md, "Enter errors"). Set under it, so once it
    /// is set nobody enters to submit again: the kernel reads submission
    /// entries only in such an enter (no SQPOLL), so those it had not
    /// consumed by then are never read.
    gate: Mutex<Option<i32>>,
    /// `gate` holds an error: lets lock holders find a break without taking
    /// `gate` (`settle`). Release after the error is stored, Acquire by the
    /// reader, which then takes `gate` for the error itself.
    broken: AtomicBool,
    /// Waits in a row that failed (`wait`).
    wait_failures: AtomicU32,
    /// Tests: makes `arm_wake` fail, as it does when the submission queue
    /// stays full.
    #[cfg(test)]
    pub(crate) fail_arm: AtomicBool,
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.wake_read_finished() {
            // SAFETY: dropped once, here; the read that used it completed
            // (or was never submitted), so the kernel no longer writes it.
            unsafe { ManuallyDrop::drop(&mut self.wake_buf) };
        }
    }
}

// SAFETY: the ring's queues are touched only under the owning processor's
// lock (see the module comment), `wake_buf` only by the kernel, and the
// submitter side (`io_uring_enter`) is thread-safe in the kernel.
unsafe impl Sync for Ring {}
// SAFETY: as above; nothing in `Ring` is tied to a thread.
unsafe impl Send for Ring {}

impl Ring {
    pub(crate) fn new() -> io::Result<Ring> {
        // Neither SINGLE_ISSUER nor DEFER_TASKRUN: threads that are not the
        // owner submit (foreign threads) and reap (rescuers), see driver.md.
        // COOP_TASKRUN (Linux 5.19): the kernel does not interrupt a running
        // processor with an inter-processor interrupt to run completion work;
        // it runs at the thread's next kernel entry or return to user mode
        // (a system call, the scheduler tick), or at once if the thread
        // sleeps. TASKRUN_FLAG shows pending work in the ring's flags, so the
        // owner enters for it at its next iteration (`Driver::poll_own`).
        // Older kernels get the default mode. See driver.md, "Ring flags".
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(ENTRIES)
            .or_else(|_| IoUring::builder().build(ENTRIES))?;
        Ok(Ring {
            ring,
            wake_fd: eventfd()?,
            wake_buf: ManuallyDrop::new(Box::new(UnsafeCell::new(0))),
            leak_wake: AtomicBool::new(false),
            gate: Mutex::new(None),
            broken: AtomicBool::new(false),
            wait_failures: AtomicU32::new(0),
            #[cfg(test)]
            fail_arm: AtomicBool::new(false),
        })
    }

    /// Checks that the kernel supports every opcode fairlane uses; the
    /// error names the first missing one.
    pub(crate) fn probe() -> io::Result<()> {
        let mut ring = IoUring::new(4)?;
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        let needed = [
            (opcode::Read::CODE, "READ"),
            (opcode::Write::CODE, "WRITE"),
            (opcode::Recv::CODE, "RECV"),
            (opcode::Send::CODE, "SEND"),
            (opcode::RecvMsg::CODE, "RECVMSG"),
            (opcode::SendMsg::CODE, "SENDMSG"),
            (opcode::Accept::CODE, "ACCEPT"),
            (opcode::Connect::CODE, "CONNECT"),
            (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
            (opcode::OpenAt::CODE, "OPENAT"),
            (opcode::Fsync::CODE, "FSYNC"),
            (opcode::Statx::CODE, "STATX"),
            (opcode::UnlinkAt::CODE, "UNLINKAT"),
            (opcode::Shutdown::CODE, "SHUTDOWN"),
        ];
        for (code, name) in needed {
            if !probe.is_supported(code) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("io_uring opcode {name} is not supported by this kernel"),
                ));
            }
        }
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring lacks IORING_FEAT_EXT_ARG (waiting with a timeout)",
            ));
        }
        // Setting up and registering is not enough: some sandboxes (seccomp
        // profiles) deny `io_uring_enter` alone, and a runtime that chose
        // io_uring there would hang at its first wait. Submit one no-op and
        // wait for its completion.
        let nop = opcode::Nop::new().build().user_data(0x6661_6972);
        // SAFETY: a no-op points to no memory.
        unsafe { ring.submission().push(&nop) }
            .map_err(|_| io::Error::other("io_uring probe: submission queue full"))?;
        let enter = |e: io::Error| io::Error::new(e.kind(), format!("io_uring_enter fails: {e}"));
        loop {
            match ring.submitter().submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(enter(e)),
            }
        }
        let done = ring
            .completion()
            .next()
            .is_some_and(|cqe| cqe.user_data() == 0x6661_6972 && cqe.result() == 0);
        if !done {
            return Err(io::Error::other(
                "io_uring probe: the no-op's completion did not arrive",
            ));
        }
        Ok(())
    }

    /// Dropping: whether the kernel is done with `wake_buf`. It is unless
    /// stopping gave up on the read while it was in flight; even then the
    /// read may have completed since (the thread that submitted it ran its
    /// completion work, or exited, which makes the kernel finish its
    /// requests) without anyone reaping it: its completion in the queue
    /// proves the kernel is done.
    fn wake_read_finished(&mut self) -> bool {
        if !self.leak_wake.load(Ordering::Relaxed) {
            return true;
        }
        // Completions that overflowed the queue are moved in first.
        self.enter_for_events();
        let finished = self.ring.completion().any(|cqe| cqe.user_data() == WAKE);
        if finished {
            self.leak_wake.store(false, Ordering::Relaxed);
        }
        finished
    }

    /// Puts the read of the wake-up eventfd in flight (not yet flushed).
    pub(crate) fn arm_wake(&self, proc: &ProcessorIo, st: &mut State) -> io::Result<()> {
        #[cfg(test)]
        if self.fail_arm.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "io_uring submission queue stays full",
            ));
        }
        let entry = opcode::Read::new(
            types::Fd(self.wake_fd.as_raw_fd()),
            self.wake_buf.get().cast(),
            8,
        )
        .build()
        .user_data(WAKE);
        let mut fired = Vec::new();
        self.push(proc, st, &entry, &mut fired)?;
        // Wakers reaped while making room wait in the state for the next
        // reap, which hands them to its caller.
        st.wake_read_armed();
        st.defer_wakers(fired);
        Ok(())
    }

    /// Makes the owner's wait return: the armed eventfd read completes.
    pub(crate) fn notify(&self) {
        eventfd_signal(self.wake_fd.as_raw_fd());
    }

    /// Whether entries wait in the submission queue for the kernel. The
    /// caller holds the processor's lock (`_st` borrows from its guard).
    /// The entries of a broken ring never go to the kernel: they do not
    /// count.
    pub(crate) fn has_unsubmitted(&self, st: &State) -> bool {
        // SAFETY: the lock is held, so no other SubmissionQueue of this ring
        // exists; the submission thread, which submits without the lock,
        // only moves the kernel's head, which makes the answer stale in the
        // safe direction (entries it submitted still count).
        st.sq_log.broken.is_none() && !unsafe { self.ring.submission_shared() }.is_empty()
    }

    /// Without the lock, a hint (decided again under it): whether the ring
    /// broke and takes no more submissions.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    /// Under the lock: the error that broke the ring, if it broke (settled
    /// first, so that what it leaves is done elsewhere).
    pub(crate) fn broken_error(
        &self,
        proc: &ProcessorIo,
        st: &mut State,
        fired: &mut Vec<Waker>,
    ) -> Option<io::Error> {
        self.settle(proc, st, fired);
        st.sq_log.broken.map(io::Error::from_raw_os_error)
    }

    fn gate(&self) -> MutexGuard<'_, Option<i32>> {
        // Poisoning: the guarded value is a plain error code.
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Under the lock, once the ring broke (anyone may have broken it, with
    /// or without the lock): the operations of the entries the kernel never
    /// consumed are done elsewhere — a live future's is submitted again on
    /// another engine ([`UNSUBMITTED`]), a dropped one's resources are
    /// finished as if cancelled before the kernel did anything (a kept write
    /// stays to be sent) — and what the kernel did take is cancelled
    /// (`evacuate`). The wakers go to `fired`. Their entries stay in the
    /// queue, dead: nobody enters to submit any more (`gate`), so the kernel
    /// never reads them, nor the memory they point to.
    pub(crate) fn settle(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
        if st.sq_log.broken.is_some() || !self.broken.load(Ordering::Acquire) {
            return;
        }
        let errno = (*self.gate()).unwrap_or(libc::EIO);
        // Stable: the kernel's head moves only in an enter that submits, and
        // there are none after the break. SAFETY: the lock is held, so no
        // other SubmissionQueue of this ring exists.
        let unconsumed = unsafe { self.ring.submission_shared() }.len();
        let published = std::mem::take(&mut st.sq_log.published);
        // `published` reaches back at least to the oldest unconsumed entry
        // (`push` trims it only down to the queue's length).
        let consumed = published.len().saturating_sub(unconsumed);
        for user_data in published.into_iter().skip(consumed) {
            match user_data {
                // Never armed in the kernel: `unpark` cannot end a wait in
                // this ring (`park` waits on the futex).
                WAKE => st.wake_read_unsubmitted(),
                // Its target is unconsumed too (settled here) or in the
                // kernel, which holds its file; `evacuate` cancels it.
                CANCEL => {}
                key => unsubmitted(proc, st, key as usize, fired),
            }
        }
        st.sq_log.broken = Some(errno);
        self.evacuate();
    }

    /// Tests: breaks the ring as an `io_uring_enter` failing with `errno`
    /// does.
    #[cfg(test)]
    pub(crate) fn break_for_test(&self, errno: i32) {
        *self.gate() = Some(errno);
        self.broken.store(true, Ordering::Release);
    }

    /// A broken ring's operations in the kernel, and its wake-up read, are
    /// cancelled (`IORING_REGISTER_SYNC_CANCEL`, Linux 6.0: a registration
    /// call, not an enter, so it reads no submission entry), so that their
    /// completions (`ECANCELED`: done again elsewhere, as after a removal)
    /// leave the ring empty and its owner sleeps without polling it.
    /// Best effort: where it fails (an older kernel, a ring whose descriptor
    /// is gone), they complete when the kernel finishes them; `park` then
    /// polls the ring while they are in flight, and stopping leaks them.
    /// Returns whether the cancellation went through.
    fn evacuate(&self) -> bool {
        let patience = types::Timespec::from(SYNC_CANCEL_PATIENCE);
        match self
            .ring
            .submitter()
            .register_sync_cancel(Some(patience), types::CancelBuilder::any())
        {
            // ENOENT: nothing was in flight.
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
            Err(e) => {
                tracing::debug!(error = %e, "fairlane cannot cancel the operations of a broken io_uring ring");
                false
            }
        }
    }

    /// Hands the published submissions to the kernel; the caller holds the
    /// processor's lock (`st`). Transient failures of `io_uring_enter` are
    /// ridden out: `EINTR` is retried at once; `EBUSY` and `EAGAIN` (the
    /// completion queue is backed up, or the kernel is short of memory)
    /// after reaping completions (`fired` gets their wakers), up to
    /// `SUBMIT_RETRIES` retries. Any other error, or a transient one that
    /// persists, breaks the ring and is returned; what the kernel did not
    /// consume is settled here (done elsewhere, `settle`).
    pub(crate) fn submit(
        &self,
        proc: &ProcessorIo,
        st: &mut State,
        fired: &mut Vec<Waker>,
    ) -> io::Result<()> {
        let result = self.submit_riding_out(proc, || {
            if proc.may_drain(st) {
                self.reap(proc, st, fired);
            } else {
                // The owner waits in this ring: its wait returns for the
                // completions and reaps them.
                std::thread::yield_now();
            }
        });
        if result.is_err() {
            self.settle(proc, st, fired);
        }
        result
    }

    /// `submit` for a thread that does not hold the processor's lock (the
    /// submission thread): it takes the lock only to reap after `EBUSY` or
    /// `EAGAIN`, and only if it is free (its holder may be waiting for this
    /// very submission, `SubmitThread::request_and_wait`). If the ring
    /// breaks, it settles it if the lock is free, and wakes the owner, whose
    /// next reap settles it otherwise.
    pub(crate) fn submit_unlocked(&self, proc: &ProcessorIo) -> io::Result<()> {
        let mut fired = Vec::new();
        let result = self.submit_riding_out(proc, || match proc.try_lock() {
            Some(mut st) if proc.may_drain(&st) => {
                self.reap(proc, &mut st, &mut fired);
            }
            _ => std::thread::yield_now(),
        });
        if result.is_err() {
            if let Some(mut st) = proc.try_lock() {
                self.settle(proc, &mut st, &mut fired);
            }
            proc.notify();
        }
        fired.into_iter().for_each(Waker::wake);
        result
    }

    /// `io_uring_enter` for the published submissions, under `gate`:
    /// `EINTR` retried at once, `EBUSY`/`EAGAIN` after `make_room` (at most
    /// `SUBMIT_RETRIES` retries in all, `gate` released for `make_room`);
    /// any other error
    /// breaks the ring, under the same hold of `gate`, and is returned, as
    /// is the error of an earlier break.
    fn submit_riding_out(&self, proc: &ProcessorIo, mut make_room: impl FnMut()) -> io::Result<()> {
        let mut busy = 0;
        loop {
            let mut gate = self.gate();
            if let Some(errno) = *gate {
                return Err(io::Error::from_raw_os_error(errno));
            }
            let Err(e) = self.ring.submit() else {
                return Ok(());
            };
            match e.raw_os_error() {
                Some(libc::EINTR) if busy < SUBMIT_RETRIES => busy += 1,
                Some(libc::EBUSY | libc::EAGAIN) if busy < SUBMIT_RETRIES => {
                    busy += 1;
                    // Reaping may push (the wake-up read's re-arm) and
                    // submit to make room: not under `gate`.
                    drop(gate);
                    make_room();
                }
                errno => {
                    *gate = Some(errno.unwrap_or(libc::EIO));
                    self.broken.store(true, Ordering::Release);
                    drop(gate);
                    tracing::error!(
                        processor = proc.index,
                        error = %e,
                        "fairlane's io_uring ring broke (io_uring_enter failed): it takes no \
                         more submissions, and its operations are done on other rings"
                    );
                    return Err(e);
                }
            }
        }
    }

    /// Pushes one entry, making room by flushing (and, when the completion
    /// queue is backed up, reaping) if the queue is full. Caller holds the
    /// lock `st` came from.
    pub(crate) fn push(
        &self,
        proc: &ProcessorIo,
        st: &mut State,
        entry: &squeue::Entry,
        fired: &mut Vec<Waker>,
    ) -> io::Result<()> {
        for attempt in 0..4 {
            // A broken ring takes nothing more (its entries would never be
            // submitted): the caller goes elsewhere or fails.
            if let Some(e) = self.broken_error(proc, st, fired) {
                return Err(e);
            }
            {
                // SAFETY: the processor's lock is held (`st` borrows from
                // its guard), so no other SubmissionQueue of this ring
                // exists.
                let mut sq = unsafe { self.ring.submission_shared() };
                if !sq.is_full() {
                    // The log keeps at least the unconsumed entries: the
                    // queue's length only shrinks meanwhile (the kernel
                    // consumes; only lock holders publish).
                    let log = &mut st.sq_log.published;
                    while log.len() > sq.len() {
                        log.pop_front();
                    }
                    // SAFETY: every pointer in `entry` points into memory
                    // that its `Op` (or the slab, or this `Ring`) keeps alive
                    // until the completion is reaped.
                    unsafe { sq.push(entry) }.map_err(|_| io::Error::other("sq full"))?;
                    log.push_back(entry.get_user_data());
                    drop(sq);
                    proc.note_unflushed(1);
                    return Ok(());
                }
            }
            // Not out of a parked owner's ring: its wait ends for what is
            // there, and it reaps (`ProcessorIo::may_drain`).
            if attempt > 0 && proc.may_drain(st) {
                self.reap(proc, st, fired);
            }
            if proc.may_submit_here() {
                // An error leaves the queue full: the next attempt reaps and
                // tries again, the last one reports it.
                let _ = self.submit(proc, st, fired);
            } else {
                // The submission thread submits without our lock: wait a
                // little for room.
                proc.request_submit();
                for _ in 0..200 {
                    // SAFETY: as above, the lock is held.
                    if !unsafe { self.ring.submission_shared() }.is_full() {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "io_uring submission queue stays full",
        ))
    }

    /// Moves every completion out of the queue: results into their slots,
    /// wakers onto `fired`, abandoned resources freed.
    pub(crate) fn reap(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
        self.settle(proc, st, fired);
        // Completions the kernel could not fit in the queue wait in its
        // overflow list until an enter with GETEVENTS moves them in: a busy
        // processor may not enter for a while, so do it here (it submits
        // nothing, so any thread may).
        for _ in 0..4 {
            {
                // SAFETY: the processor's lock is held, so no other
                // CompletionQueue of this ring exists.
                let mut cq = unsafe { self.ring.completion_shared() };
                for cqe in &mut cq {
                    match cqe.user_data() {
                        WAKE => {
                            st.wake_read_completed();
                            // The read is over: the buffer may be freed,
                            // even if stopping gave up waiting for it. (Read
                            // first: no write on every wake-up's path.)
                            if self.leak_wake.load(Ordering::Relaxed) {
                                self.leak_wake.store(false, Ordering::Relaxed);
                            }
                        }
                        CANCEL => {}
                        key => complete(proc, st, key as usize, cqe.result(), fired),
                    }
                }
            }
            // SAFETY: the lock is held; only the flags word is read.
            if !unsafe { self.ring.submission_shared() }.cq_overflow() {
                break;
            }
            self.enter_for_events();
        }
        if !st.wake_armed() && !st.is_stopped() && st.sq_log.broken.is_none() {
            // Re-armed after its completion, and tried again by every reap
            // after a failed arm (a submission queue that stays full): while
            // it is not armed, `unpark` cannot end a wait in the ring, so
            // `park` sleeps on the futex instead (bounded while operations
            // are in flight, whose completions only the ring shows).
            // Logged once per run of failures (arming ends the run).
            if let Err(e) = self.arm_wake(proc, st) {
                if st.note_wake_arm_failure() {
                    tracing::warn!(
                        processor = proc.index,
                        error = %e,
                        "fairlane cannot re-arm the wake-up read of an io_uring ring; \
                         its processor sleeps on the futex until it can"
                    );
                }
            }
        }
        st.take_pending_wakers(fired);
    }

    /// `io_uring_enter` with nothing to submit and nothing to wait for: it
    /// moves overflowed completions into the queue and runs the calling
    /// thread's pending completion work.
    fn enter_for_events(&self) {
        // SAFETY: no submissions, no wait, no argument.
        let _ = unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(
                0,
                0,
                io_uring::EnterFlags::GETEVENTS.bits(),
                None,
            )
        };
    }

    /// Owner's thread, lock held: if completion work of this ring waits for
    /// a thread to enter the kernel (COOP_TASKRUN), runs this thread's and
    /// reaps what it posted. Work that belongs to another thread (the
    /// submission thread's) runs there; the flag then stays set until it
    /// does, costing this thread one system call per iteration meanwhile.
    pub(crate) fn run_task_work(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
        // SAFETY: the lock is held; only the flags word is read.
        if unsafe { self.ring.submission_shared() }.taskrun() {
            self.enter_for_events();
            self.reap(proc, st, fired);
        }
    }

    /// Waits (without the lock) for a completion, for at most `timeout`.
    /// It submits nothing: whoever publishes an entry flushes it (`park`
    /// flushes the owner's before it waits), and an enter that submits
    /// holds `gate`, which a wait cannot hold for its length.
    pub(crate) fn wait(&self, timeout: Option<Duration>) {
        let ts = timeout.map(types::Timespec::from);
        let args = match &ts {
            Some(ts) => types::SubmitArgs::new().timespec(ts),
            None => types::SubmitArgs::new(),
        };
        let flags = io_uring::EnterFlags::GETEVENTS | io_uring::EnterFlags::EXT_ARG;
        // SAFETY: `io_uring_enter` with nothing to submit, waiting for one
        // completion; `args` is the extended argument the crate's own
        // `submit_with_args` passes, alive for the call.
        let result = unsafe { self.ring.submitter().enter(0, 1, flags.bits(), Some(&args)) };
        // A transient failure returns at once (the caller waits again),
        // unless the previous wait failed too: an error that persists
        // (unexpected, or transient ones in a row) must not make the caller
        // spin. Relaxed: a count only the waiting thread acts on.
        let failed_before = match &result {
            Ok(_) => {
                self.wait_failures.store(0, Ordering::Relaxed);
                return;
            }
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                self.wait_failures.store(0, Ordering::Relaxed);
                return;
            }
            Err(_) => self.wait_failures.fetch_add(1, Ordering::Relaxed),
        };
        let transient = matches!(
            result.as_ref().map_err(io::Error::raw_os_error),
            Err(Some(libc::EINTR | libc::EBUSY | libc::EAGAIN))
        );
        if !transient || failed_before > 0 {
            std::thread::sleep(
                timeout
                    .unwrap_or(Duration::from_millis(10))
                    .min(Duration::from_millis(10)),
            );
        }
    }

    /// Stopping: cancels everything in flight and reaps until nothing is
    /// (bounded by `STOP_PATIENCE`); leaks what stays in flight after that.
    pub(crate) fn cancel_all(&self, proc: &ProcessorIo, st: &mut State, fired: &mut Vec<Waker>) {
        self.settle(proc, st, fired);
        if st.sq_log.broken.is_some() {
            // Nothing can be submitted: cancel what the kernel holds
            // without an enter (done once when it broke; again for what
            // was still running then).
            self.evacuate();
        }
        let keys: Vec<u64> = st
            .ops
            .iter()
            .filter(|(_, s)| !matches!(s, OpSlot::Done(_)))
            .map(|(k, _)| k as u64)
            .chain(st.wake_armed().then_some(WAKE))
            .collect();
        for key in keys {
            let cancel = opcode::AsyncCancel::new(key).build().user_data(CANCEL);
            let _ = self.push(proc, st, &cancel, fired);
        }
        // Hand the cancellations (and anything pushed but never submitted,
        // such as the wake read of a processor that never ran) to the
        // kernel now, rather than waiting for them to be flushed.
        proc.flush(st);
        let deadline = Instant::now() + STOP_PATIENCE;
        loop {
            let in_flight =
                st.wake_armed() || st.ops.iter().any(|(_, s)| !matches!(s, OpSlot::Done(_)));
            if !in_flight {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                // Never free what the kernel may still write: leak it.
                for (key, slot) in st.ops.iter_mut() {
                    if let OpSlot::Abandoned(..) = slot {
                        let OpSlot::Abandoned(orphan) =
                            std::mem::replace(slot, OpSlot::Done(-libc::ECANCELED))
                        else {
                            unreachable!()
                        };
                        orphan.leak(proc, key, fired);
                    }
                }
                self.leak_wake.store(st.wake_armed(), Ordering::Relaxed);
                break;
            }
            self.wait(Some((deadline - now).min(Duration::from_millis(100))));
            self.reap(proc, st, fired);
        }
        proc.flush(st);
    }
}

/// Records completion `result` of operation `key`.
fn complete(proc: &ProcessorIo, st: &mut State, key: usize, result: i32, fired: &mut Vec<Waker>) {
    let Some(slot) = st.ops.get_mut(key) else {
        return;
    };
    match slot {
        OpSlot::Waiting(waker) => {
            if let Some(w) = waker.take() {
                fired.push(w);
            }
            // fairlane cancels a live future's operation only when its
            // engine stops (`cancel_all`; a dropped future's slot is
            // `Abandoned`). The kernel cancels the requests of a thread that
            // exits, on every ring it submitted to: a removed processor's
            // thread may have submitted on others (flushing a ring it
            // rescued, a dropped operation's cancellation). Either way the
            // kernel did nothing with it, so the operation is done again,
            // on a live engine.
            *slot = OpSlot::Done(if result == -libc::ECANCELED {
                RESTART
            } else {
                result
            });
            proc.work_removed(st, 1);
        }
        OpSlot::Abandoned(_) => {
            // The kernel is done with the resources.
            let OpSlot::Abandoned(orphan) = st.ops.remove(key) else {
                unreachable!("matched above")
            };
            orphan.finish(proc, key, result, fired);
            proc.work_removed(st, 1);
        }
        OpSlot::Done(_) => {}
    }
}

/// Operation `key`'s entry will never reach the kernel (its ring broke
/// before consuming it): a live future submits it again elsewhere, a
/// dropped one's resources are finished as after a cancellation that came
/// before the kernel did anything.
fn unsubmitted(proc: &ProcessorIo, st: &mut State, key: usize, fired: &mut Vec<Waker>) {
    match st.ops.get_mut(key) {
        Some(OpSlot::Waiting(waker)) => {
            if let Some(w) = waker.take() {
                fired.push(w);
            }
            st.ops[key] = OpSlot::Done(UNSUBMITTED);
            proc.work_removed(st, 1);
        }
        Some(OpSlot::Abandoned(_)) => complete(proc, st, key, -libc::ECANCELED, fired),
        Some(OpSlot::Done(_)) | None => {}
    }
}

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
    if !local || proc.unflushed() > super::driver::FLUSH_THRESHOLD {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring that breaks with one entry consumed by the kernel and one
    /// not: the unconsumed one's operation is settled (done elsewhere), the
    /// consumed one's stays in flight until its completion (here the
    /// cancellation of the broken ring's operations) arrives, and the ring
    /// takes no more entries. Settling the consumed one too would free
    /// memory the kernel may still write.
    #[test]
    fn a_broken_ring_settles_only_what_the_kernel_did_not_consume() {
        if Ring::probe().is_err() {
            return; // needs io_uring (the library prints nothing)
        }
        let driver = Driver::new(crate::io::IoBackend::IoUring, 1).expect("driver");
        driver.register_current(0);
        let proc = driver.current().expect("registered");
        let Engine::Uring(ring) = &proc.engine else {
            unreachable!("an io_uring driver")
        };
        let (rx, tx) = crate::io::test_pipe();
        let mut bufs = [Box::new([0u8; 8]), Box::new([0u8; 8])];
        let mut fired = Vec::new();
        let mut st = proc.lock();
        let read = |st: &mut State, buf: &mut [u8; 8], fired: &mut Vec<Waker>| {
            let key = st.ops.insert(OpSlot::Waiting(None));
            proc.work_added(st);
            let entry = opcode::Read::new(types::Fd(rx.as_raw_fd()), buf.as_mut_ptr(), 8)
                .build()
                .user_data(key as u64);
            ring.push(&proc, st, &entry, fired).expect("push");
            key
        };
        let [first, second] = &mut bufs;
        let consumed = read(&mut st, first, &mut fired);
        let unconsumed = read(&mut st, second, &mut fired);
        // The kernel consumes the wake-up read and the first read only.
        // SAFETY: no wait, no argument; the entries point into `bufs`,
        // which outlive them (and the ring's wake-up buffer).
        let n =
            unsafe { ring.ring.submitter().enter::<libc::sigset_t>(2, 0, 0, None) }.expect("enter");
        assert_eq!(n, 2);
        assert!(ring.has_unsubmitted(&st));
        ring.break_for_test(libc::EINVAL);
        ring.settle(&proc, &mut st, &mut fired);
        assert!(
            matches!(st.ops[unconsumed], OpSlot::Done(UNSUBMITTED)),
            "the entry the kernel never read is done elsewhere"
        );
        assert!(
            !matches!(st.ops[consumed], OpSlot::Done(UNSUBMITTED)),
            "the entry the kernel read is its until its completion"
        );
        assert!(!ring.has_unsubmitted(&st), "dead entries are not submitted");
        let nop = opcode::Nop::new().build().user_data(CANCEL);
        let refused = ring.push(&proc, &mut st, &nop, &mut fired).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EINVAL));
        // The consumed read was cancelled (`evacuate`): its completion says
        // the kernel did nothing, so its future would do it again.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(st.ops[consumed], OpSlot::Done(_)) {
            assert!(
                Instant::now() < deadline,
                "the consumed read never completed"
            );
            drop(st);
            ring.wait(Some(Duration::from_millis(10)));
            st = proc.lock();
            ring.reap(&proc, &mut st, &mut fired);
        }
        assert!(matches!(st.ops[consumed], OpSlot::Done(RESTART)));
        drop(st);
        driver.unregister_current();
        drop((rx, tx, bufs));
    }

    /// A wake-up read that stopping gave up on (`leak_wake` set while it is
    /// in flight) but that completed before the ring is dropped: its
    /// buffer is freed, not leaked; while it is in flight, it is kept.
    #[test]
    fn a_wake_read_that_completes_late_is_freed() {
        let mut ring = Ring::new().expect("an io_uring instance");
        let entry = opcode::Read::new(
            types::Fd(ring.wake_fd.as_raw_fd()),
            ring.wake_buf.get().cast(),
            8,
        )
        .build()
        .user_data(WAKE);
        // SAFETY: the buffer lives in `ring`, which outlives the read (it
        // is leaked if the read is still in flight when `ring` drops).
        unsafe { ring.ring.submission().push(&entry) }.expect("room in the queue");
        ring.ring.submit().expect("submit");
        // As `cancel_all` leaves it when its patience ran out.
        ring.leak_wake.store(true, Ordering::Relaxed);
        assert!(
            !ring.wake_read_finished(),
            "in flight: the kernel may still write the buffer"
        );
        ring.notify();
        ring.ring.submit_and_wait(1).expect("the read completes");
        assert!(ring.wake_read_finished(), "completed: the buffer is freed");
    }
}
