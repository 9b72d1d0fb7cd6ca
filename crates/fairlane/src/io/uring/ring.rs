//! A processor's ring: submitting, reaping, waiting, and what happens when
//! an enter fails (the ring breaks) or the processor stops.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

use super::slot::OpSlot;
use super::{
    CANCEL, ENTRIES, RESTART, STOP_PATIENCE, SUBMIT_RETRIES, SYNC_CANCEL_PATIENCE, UNSUBMITTED,
    WAKE,
};
use crate::io::driver::{eventfd, eventfd_signal, ProcessorIo, State};

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

#[cfg(test)]
mod tests;
