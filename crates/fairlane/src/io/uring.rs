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
//!   could not reap.

use std::cell::UnsafeCell;
use std::future::Future;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

use super::carry::{Carry, Keep, Received};
use super::coop;
use super::driver::{eventfd, eventfd_signal, shut_down_error, Driver, Engine, Proc, State};

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
/// How many times a submission is retried after `EBUSY`/`EAGAIN` before
/// the error is returned (each retry reaps completions first).
const SUBMIT_RETRIES: u32 = 64;
/// How long stopping a processor waits for cancelled operations.
const STOP_PATIENCE: Duration = Duration::from_secs(5);

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
    fn finish(self: Box<Self>, proc: &Proc, key: usize, result: i32, fired: &mut Vec<Waker>);
    /// The completion will never be reaped (the engine stopped): the
    /// resources are leaked, never freed, since the kernel may still use
    /// them; a carry learns that nothing will come.
    fn leak(self: Box<Self>, proc: &Proc, key: usize, fired: &mut Vec<Waker>);
}

/// The resources of a dropped [`Op`] and what becomes of them.
struct Orphaned<T> {
    data: T,
    fd_result: bool,
    keep: Option<(Arc<Carry>, Keep<T>)>,
}

impl<T: Send + 'static> Orphan for Orphaned<T> {
    fn finish(self: Box<Self>, proc: &Proc, key: usize, result: i32, fired: &mut Vec<Waker>) {
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

    fn leak(self: Box<Self>, proc: &Proc, key: usize, fired: &mut Vec<Waker>) {
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
/// due to be submitted again, [`RESTART`]) before the kernel did anything.
fn read_outcome<T>(data: T, received: fn(T, usize) -> Received, result: i32) -> Option<Received> {
    match result {
        n if n >= 0 => Some(received(data, n as usize)),
        RESTART => None,
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
            let sent = if result == RESTART {
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
        // owner submit (foreign threads) and reap (helpers), see driver.md.
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
    pub(crate) fn arm_wake(&self, proc: &Proc, st: &mut State) -> io::Result<()> {
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
        st.wake_armed = true;
        st.pending_wakers.extend(fired);
        Ok(())
    }

    /// Makes the owner's wait return: the armed eventfd read completes.
    pub(crate) fn notify(&self) {
        eventfd_signal(self.wake_fd.as_raw_fd());
    }

    /// Whether entries wait in the submission queue for the kernel. The
    /// caller holds the processor's lock (`_st` borrows from its guard).
    pub(crate) fn has_unsubmitted(&self, _st: &State) -> bool {
        // SAFETY: the lock is held, so no other SubmissionQueue of this ring
        // exists; the submission thread, which submits without the lock,
        // only moves the kernel's head, which makes the answer stale in the
        // safe direction (entries it submitted still count).
        !unsafe { self.ring.submission_shared() }.is_empty()
    }

    /// Hands the published submissions to the kernel; the caller holds the
    /// processor's lock (`st`). Transient failures of `io_uring_enter` are
    /// ridden out: `EINTR` is retried at once; `EBUSY` and `EAGAIN` (the
    /// completion queue is backed up, or the kernel is short of memory)
    /// after reaping completions (`fired` gets their wakers), up to
    /// `SUBMIT_RETRIES` times. Any other error, or a transient one that
    /// persists, is returned: the entries stay published, and the next
    /// flush tries again.
    pub(crate) fn submit(
        &self,
        proc: &Proc,
        st: &mut State,
        fired: &mut Vec<Waker>,
    ) -> io::Result<()> {
        self.submit_riding_out(|| {
            if proc.may_drain(st) {
                self.reap(proc, st, fired);
            } else {
                // The owner waits in this ring: its wait returns for the
                // completions and reaps them.
                std::thread::yield_now();
            }
        })
    }

    /// `submit` for a thread that does not hold the processor's lock (the
    /// submission thread): it takes the lock only to reap after `EBUSY` or
    /// `EAGAIN`, and only if it is free (its holder may be waiting for this
    /// very submission, `SubmitThread::request_and_wait`).
    pub(crate) fn submit_unlocked(&self, proc: &Proc) -> io::Result<()> {
        self.submit_riding_out(|| {
            let mut fired = Vec::new();
            match proc.try_lock() {
                Some(mut st) if proc.may_drain(&st) => {
                    self.reap(proc, &mut st, &mut fired);
                }
                _ => std::thread::yield_now(),
            }
            fired.into_iter().for_each(Waker::wake);
        })
    }

    /// `io_uring_enter` for the published submissions: `EINTR` retried at
    /// once, `EBUSY`/`EAGAIN` after `make_room` (at most `SUBMIT_RETRIES`
    /// times); any other error returned.
    fn submit_riding_out(&self, mut make_room: impl FnMut()) -> io::Result<()> {
        let mut busy = 0;
        loop {
            let Err(e) = self.ring.submit() else {
                return Ok(());
            };
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EBUSY | libc::EAGAIN) if busy < SUBMIT_RETRIES => {
                    busy += 1;
                    make_room();
                }
                _ => return Err(e),
            }
        }
    }

    /// Pushes one entry, making room by flushing (and, when the completion
    /// queue is backed up, reaping) if the queue is full. Caller holds the
    /// lock `st` came from.
    pub(crate) fn push(
        &self,
        proc: &Proc,
        st: &mut State,
        entry: &squeue::Entry,
        fired: &mut Vec<Waker>,
    ) -> io::Result<()> {
        for attempt in 0..4 {
            {
                // SAFETY: the processor's lock is held (`st` borrows from
                // its guard), so no other SubmissionQueue of this ring
                // exists.
                let mut sq = unsafe { self.ring.submission_shared() };
                if !sq.is_full() {
                    // SAFETY: every pointer in `entry` points into memory
                    // that its `Op` (or the slab, or this `Ring`) keeps alive
                    // until the completion is reaped.
                    unsafe { sq.push(entry) }.map_err(|_| io::Error::other("sq full"))?;
                    drop(sq);
                    proc.note_unflushed(1);
                    return Ok(());
                }
            }
            // Not out of a parked owner's ring: its wait ends for what is
            // there, and it reaps (`Proc::may_drain`).
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
    pub(crate) fn reap(&self, proc: &Proc, st: &mut State, fired: &mut Vec<Waker>) {
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
                            st.wake_armed = false;
                            st.woken = true;
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
        if !st.wake_armed && !st.stopped {
            // Re-armed after its completion, and tried again by every reap
            // after a failed arm (a submission queue that stays full): while
            // it is not armed, `unpark` cannot end a wait in the ring, so
            // `park` sleeps on the futex instead (bounded while operations
            // are in flight, whose completions only the ring shows).
            match self.arm_wake(proc, st) {
                Ok(()) => st.wake_arm_failed = false,
                Err(e) => {
                    if !std::mem::replace(&mut st.wake_arm_failed, true) {
                        tracing::warn!(
                            processor = proc.index,
                            error = %e,
                            "fairlane cannot re-arm the wake-up read of an io_uring ring; \
                             its processor sleeps on the futex until it can"
                        );
                    }
                }
            }
        }
        fired.append(&mut st.pending_wakers);
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
    pub(crate) fn run_task_work(&self, proc: &Proc, st: &mut State, fired: &mut Vec<Waker>) {
        // SAFETY: the lock is held; only the flags word is read.
        if unsafe { self.ring.submission_shared() }.taskrun() {
            self.enter_for_events();
            self.reap(proc, st, fired);
        }
    }

    /// Waits (without the lock) for a completion, for at most `timeout`;
    /// on a processor's own thread it submits what is published as well
    /// (elsewhere `flush` asked the submission thread to).
    pub(crate) fn wait(&self, timeout: Option<Duration>, submit: bool) {
        let submitter = self.ring.submitter();
        let ts = timeout.map(types::Timespec::from);
        let result = match (&ts, submit) {
            (None, true) => submitter.submit_and_wait(1),
            (Some(ts), true) => {
                submitter.submit_with_args(1, &types::SubmitArgs::new().timespec(ts))
            }
            (ts, false) => {
                let args = match ts {
                    Some(ts) => types::SubmitArgs::new().timespec(ts),
                    None => types::SubmitArgs::new(),
                };
                let flags = io_uring::EnterFlags::GETEVENTS | io_uring::EnterFlags::EXT_ARG;
                // SAFETY: `io_uring_enter` with nothing to submit, waiting
                // for one completion; `args` is the extended argument the
                // crate's own `submit_with_args` passes, alive for the call.
                unsafe { submitter.enter(0, 1, flags.bits(), Some(&args)) }
            }
        };
        if let Err(e) = result {
            match e.raw_os_error() {
                Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN) => {}
                _ => {
                    // Unexpected: do not spin on a broken ring.
                    std::thread::sleep(
                        timeout
                            .unwrap_or(Duration::from_millis(10))
                            .min(Duration::from_millis(10)),
                    );
                }
            }
        }
    }

    /// Stopping: cancels everything in flight and reaps until nothing is
    /// (bounded by `STOP_PATIENCE`); leaks what stays in flight after that.
    pub(crate) fn cancel_all(&self, proc: &Proc, st: &mut State, fired: &mut Vec<Waker>) {
        let keys: Vec<u64> = st
            .ops
            .iter()
            .filter(|(_, s)| !matches!(s, OpSlot::Done(_)))
            .map(|(k, _)| k as u64)
            .chain(st.wake_armed.then_some(WAKE))
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
                st.wake_armed || st.ops.iter().any(|(_, s)| !matches!(s, OpSlot::Done(_)));
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
                self.leak_wake.store(st.wake_armed, Ordering::Relaxed);
                break;
            }
            self.wait(
                Some((deadline - now).min(Duration::from_millis(100))),
                proc.may_submit_here(),
            );
            self.reap(proc, st, fired);
        }
        proc.flush(st);
    }
}

/// Records completion `result` of operation `key`.
fn complete(proc: &Proc, st: &mut State, key: usize, result: i32, fired: &mut Vec<Waker>) {
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
            // helped, a dropped operation's cancellation). Either way the
            // kernel did nothing with it, so the operation is done again,
            // on a live engine.
            *slot = OpSlot::Done(if result == -libc::ECANCELED {
                RESTART
            } else {
                result
            });
            proc.outstanding.fetch_sub(1, Ordering::Relaxed);
        }
        OpSlot::Abandoned(_) => {
            // The kernel is done with the resources.
            let OpSlot::Abandoned(orphan) = st.ops.remove(key) else {
                unreachable!("matched above")
            };
            orphan.finish(proc, key, result, fired);
            proc.outstanding.fetch_sub(1, Ordering::Relaxed);
        }
        OpSlot::Done(_) => {}
    }
}

/// The future of one io_uring operation. `T` owns everything the
/// submission entry points to; those pointers must be into heap memory
/// owned by `T` (moving `T` must not move it).
pub(crate) struct Op<T: Send + 'static> {
    proc: Arc<Proc>,
    key: usize,
    data: Option<T>,
    fd_result: bool,
    /// The entry as submitted (without its `user_data`), to submit again if
    /// the kernel cancels it ([`RESTART`]); `None` for an operation that
    /// must not be repeated (see [`Op::once`]).
    entry: Option<squeue::Entry>,
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
                entry: Some(entry),
                keep: None,
            }),
            Err(e) => Err((e, data)),
        }
    }

    /// This operation must not be repeated if its processor is removed
    /// while it is in flight (a `connect`, whose handshake the cancellation
    /// does not undo): its future then sees `ECANCELED`.
    pub(crate) fn once(mut self) -> Self {
        self.entry = None;
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
/// (another live one if that one stopped) as a new `Waiting` operation.
fn push_entry(driver: &Driver, entry: &squeue::Entry) -> io::Result<(Arc<Proc>, usize)> {
    let (mut proc, mut local) = driver.target()?;
    let mut fired = Vec::new();
    let mut st = proc.lock();
    if st.stopped {
        // The calling processor's engine stopped (the processor is being
        // removed while this thread still runs a task): use another.
        drop(st);
        proc = driver.live_proc(proc.index)?;
        local = false;
        st = proc.lock();
        if st.stopped {
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
    proc.outstanding.fetch_add(1, Ordering::Relaxed);
    // A thread that is not this ring's processor has no loop that would
    // flush its batch later: submit now. On the processor, flush when the
    // batch is large (the other flush points are in the driver).
    if !local || proc.unflushed() > super::driver::FLUSH_THRESHOLD {
        proc.flush(&mut st);
    }
    if !local {
        proc.wake_if_on_futex();
    }
    drop(st);
    fired.into_iter().for_each(Waker::wake);
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
            if result != RESTART {
                break if result < 0 {
                    Err(io::Error::from_raw_os_error(-result))
                } else {
                    Ok(result as u32)
                };
            }
            // Its processor was removed before the kernel did anything with
            // it: do it on another engine. The kernel is done with the
            // resources (the cancelled entry's completion was reaped), and
            // they are still where the entry points (`data`).
            let (Some(entry), Some(driver)) = (&this.entry, this.proc.driver.upgrade()) else {
                break Err(io::Error::from_raw_os_error(libc::ECANCELED));
            };
            match push_entry(&driver, entry) {
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
        let stopped = st.stopped;
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
fn cancel_now(ring: &Ring, proc: &Proc, st: &mut State, key: usize, fired: &mut Vec<Waker>) {
    let cancel = opcode::AsyncCancel::new(key as u64)
        .build()
        .user_data(CANCEL);
    let _ = ring.push(proc, st, &cancel, fired);
    proc.flush_now(st);
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
        if !st.stopped && carry.write_in_flight(&proc, key) {
            cancel_now(ring, &proc, &mut st, key, &mut fired);
        }
        drop(st);
        fired.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
