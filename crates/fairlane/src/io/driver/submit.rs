//! Submission: who hands a ring's entries to the kernel (a processor's own
//! thread, or the submission thread for any other), flushing and the
//! owner's batching (driver.md, "Submitting" and "Who enters the kernel").

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::Waker;

use super::{Engine, ProcessorIo, State};

/// Submissions a processor batches before it flushes regardless.
pub(crate) const FLUSH_THRESHOLD: u32 = 30;

thread_local! {
    /// Whether this thread lives as long as its runtime (a processor's own
    /// thread): only such threads hand submissions to the kernel themselves
    /// (see `SubmitThread`).
    static STABLE: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as one that lives until its runtime shuts down
/// (the body of a processor's own thread calls this first).
pub(crate) fn mark_stable_thread() {
    STABLE.with(|s| s.set(true));
}

pub(super) fn is_stable_thread() -> bool {
    STABLE.with(Cell::get)
}

/// The kernel ties an io_uring request to the thread that submitted it and
/// cancels it when that thread exits. Threads that may exit while their
/// submissions are in flight (a `block_in_place` replacement, which runs a
/// processor for a while and then exits; `block_on` threads; the thread
/// dropping the runtime) therefore never submit themselves: they publish
/// their entries and ask this thread, which lives as long as the driver, to
/// hand them to the kernel. (It also runs the completion work of what it
/// submitted, woken by the kernel for it.)
pub(crate) struct SubmitThread {
    state: Mutex<SubmitState>,
    wake: Condvar,
    /// Signalled after each round of submissions (`request_and_wait`).
    round_done: Condvar,
}

#[derive(Default)]
struct SubmitState {
    /// Every engine, by processor index (weak: engines hold this thread's
    /// handle).
    procs: Vec<Weak<ProcessorIo>>,
    /// Processor indices whose rings have entries to submit.
    pending: Vec<usize>,
    /// Rounds of submissions started and finished by the thread; a round
    /// starts by taking all of `pending`.
    rounds_started: u64,
    rounds_done: u64,
    started: bool,
    stop: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SubmitThread {
    /// A thread not started yet, for engines not registered yet.
    pub(super) fn new() -> Self {
        SubmitThread {
            state: Mutex::new(SubmitState::default()),
            wake: Condvar::new(),
            round_done: Condvar::new(),
        }
    }

    /// Processor `index`'s engine is `proc` from now on.
    pub(super) fn set_engine(&self, index: usize, proc: &Arc<ProcessorIo>) {
        let mut submit = self.lock();
        if submit.procs.len() <= index {
            submit.procs.resize_with(index + 1, Weak::new);
        }
        submit.procs[index] = Arc::downgrade(proc);
    }

    fn lock(&self) -> MutexGuard<'_, SubmitState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the thread to submit processor `index`'s published entries and
    /// waits until it has: the kernel then holds the files the entries name,
    /// so closing a descriptor (and its number being reused) cannot redirect
    /// them.
    fn request_and_wait(self: &Arc<Self>, index: usize) {
        let Some(ticket) = self.request(index) else {
            return; // submitted by this thread (no submission thread)
        };
        let mut st = self.lock();
        while st.rounds_done < ticket && !(st.stop && st.thread.is_none()) {
            st = self.round_done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Asks the thread to submit processor `index`'s published entries.
    /// Returns the round that will take them (they are submitted once
    /// `rounds_done` reaches it), or `None` if this thread submitted them
    /// itself (after shutdown, or when the thread cannot be started).
    fn request(self: &Arc<Self>, index: usize) -> Option<u64> {
        let mut st = self.lock();
        if st.stop {
            // After shutdown: no thread left to ask; the caller's own enter
            // is the only way (its requests may end with it).
            drop(st);
            self.submit_here(index);
            return None;
        }
        if !st.pending.contains(&index) {
            st.pending.push(index);
        }
        // Under the lock that put `index` in `pending`: a round starts by
        // taking all of `pending` and counting itself in `rounds_started`
        // under this lock, so the next round to start takes this request. A
        // ticket read under an earlier acquisition could name a round that
        // started in between, for other rings only.
        let ticket = st.rounds_started + 1;
        if !st.started {
            st.started = true;
            let this = self.clone();
            match std::thread::Builder::new()
                .name("fairlane-io-submit".into())
                .spawn(move || this.run())
            {
                Ok(handle) => st.thread = Some(handle),
                Err(e) => {
                    st.started = false;
                    st.pending.retain(|&i| i != index);
                    drop(st);
                    tracing::error!(error = %e, "fairlane cannot start the I/O submission thread");
                    self.submit_here(index);
                    return None;
                }
            }
        }
        drop(st);
        self.wake.notify_one();
        Some(ticket)
    }

    /// The calling thread enters processor `index`'s ring itself: the last
    /// resort, its requests may end with it.
    fn submit_here(&self, index: usize) {
        let proc = self.lock().procs.get(index).and_then(Weak::upgrade);
        if let Some(proc) = proc {
            if let Engine::Uring(ring) = &proc.engine {
                // An error broke the ring (logged there): what it did not
                // submit is done elsewhere.
                let _ = ring.submit_unlocked(&proc);
            }
        }
    }

    fn run(&self) {
        let mut st = self.lock();
        loop {
            while st.pending.is_empty() && !st.stop {
                st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.pending.is_empty() && st.stop {
                return;
            }
            let batch = std::mem::take(&mut st.pending);
            st.rounds_started += 1;
            let procs: Vec<Option<Arc<ProcessorIo>>> = batch
                .iter()
                .map(|&i| st.procs.get(i).and_then(Weak::upgrade))
                .collect();
            drop(st);
            for proc in procs.into_iter().flatten() {
                if let Engine::Uring(ring) = &proc.engine {
                    // Without the processor's lock: the kernel serialises
                    // enters, and entries are only ever published whole.
                    // An error breaks the ring (logged there), and what it
                    // did not submit is done elsewhere.
                    let _ = ring.submit_unlocked(&proc);
                }
            }
            st = self.lock();
            st.rounds_done += 1;
            self.round_done.notify_all();
        }
    }

    /// Stops the thread after what is pending; joins it.
    pub(super) fn stop(&self) {
        let handle = {
            let mut st = self.lock();
            st.stop = true;
            st.thread.take()
        };
        self.wake.notify_one();
        if let Some(handle) = handle {
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

impl ProcessorIo {
    /// Hands the pushed submissions to the kernel (uring engine): itself
    /// on a processor's own thread, through the submission thread on any
    /// other (see `SubmitThread`).
    pub(crate) fn flush(&self, st: &mut State) {
        if let Engine::Uring(ring) = &self.engine {
            if !ring.has_unsubmitted(st) {
                // An `io_uring_enter` with nothing to submit would cost a
                // system call (twice per park, once on the wake-up's path).
                self.unflushed.store(0, Ordering::Relaxed);
                st.unflushed_seen = 0;
            } else if !is_stable_thread() {
                self.request_submit();
                self.unflushed.store(0, Ordering::Relaxed);
                st.unflushed_seen = 0;
            } else {
                // Wakers of completions reaped to make room wait in the
                // state for the next reap, which hands them to its caller.
                // An error broke the ring (logged there) and settled what
                // it did not submit: nothing stays published either way.
                let mut fired = Vec::new();
                let _ = ring.submit(self, st, &mut fired);
                st.pending_wakers.extend(fired);
                self.unflushed.store(0, Ordering::Relaxed);
                st.unflushed_seen = 0;
            }
        }
    }

    /// Asks the submission thread to submit this ring's entries.
    pub(crate) fn request_submit(&self) {
        self.submit_thread.request(self.index);
    }

    /// `flush`, but on a thread that may not submit itself it also waits
    /// until the submission thread has: for a dropped operation's
    /// cancellation, whose entry may still sit unsubmitted naming a
    /// descriptor that its owner closes next.
    pub(crate) fn flush_now(&self, st: &mut State) {
        match &self.engine {
            Engine::Uring(ring) if !is_stable_thread() => {
                if ring.has_unsubmitted(st) {
                    self.submit_thread.request_and_wait(self.index);
                    // The round may have broken the ring: settle it here,
                    // under the lock, before anyone relies on the entries
                    // being in the kernel.
                    let mut fired = Vec::new();
                    ring.settle(self, st, &mut fired);
                    st.pending_wakers.extend(fired);
                }
                self.unflushed.store(0, Ordering::Relaxed);
                st.unflushed_seen = 0;
            }
            _ => self.flush(st),
        }
    }

    /// The owner's batching rule, at the top of an iteration (lock held,
    /// `st`): flushes past `FLUSH_THRESHOLD`, or when the task just run
    /// added nothing; wakers the flush collected go to `fired`.
    #[inline]
    pub(super) fn flush_batch(&self, st: &mut State, fired: &mut Vec<Waker>) {
        // Batching: flush past the threshold, or when the task
        // just run added nothing to what the one before it left.
        let unflushed = self.unflushed.load(Ordering::Relaxed);
        if unflushed > FLUSH_THRESHOLD || (unflushed != 0 && unflushed == st.unflushed_seen) {
            self.flush(st);
            fired.append(&mut st.pending_wakers);
        }
        st.unflushed_seen = self.unflushed.load(Ordering::Relaxed);
    }

    /// Whether the calling thread may enter the ring to submit.
    pub(crate) fn may_submit_here(&self) -> bool {
        is_stable_thread()
    }

    pub(crate) fn note_unflushed(&self, n: u32) {
        self.unflushed.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn unflushed(&self) -> u32 {
        self.unflushed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::driver::Driver;
    use crate::io::{uring, IoBackend};
    use std::sync::atomic::AtomicBool;

    /// `request_and_wait` returns only once the round that took its request
    /// has entered the ring. The submission thread is kept busy with rounds
    /// for another ring, so that rounds start at any moment; a ticket that
    /// could name a round started before the request was queued would let
    /// the wait end while this ring's entries are still unsubmitted.
    #[test]
    fn request_and_wait_returns_after_its_ring_was_submitted() {
        if uring::Ring::probe().is_err() {
            return; // needs io_uring (the library prints nothing)
        }
        let driver = Driver::new(IoBackend::IoUring, 2).expect("driver");
        let procs = driver.procs().clone();
        let submit = driver.submit_thread.clone();
        let stop = Arc::new(AtomicBool::new(false));
        // Two requesters keep the submission thread's lock contended, so that
        // it is often taken between any two acquisitions by another thread.
        let busy: Vec<_> = (0..2)
            .map(|_| {
                let (submit, stop) = (submit.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = submit.request(1);
                    }
                })
            })
            .collect();
        let Engine::Uring(ring) = &procs[0].engine else {
            unreachable!("an io_uring driver")
        };
        let mut early = 0;
        for _ in 0..30_000 {
            {
                let mut st = procs[0].lock();
                let nop = io_uring::opcode::Nop::new().build().user_data(u64::MAX - 1);
                let mut fired = Vec::new();
                ring.push(&procs[0], &mut st, &nop, &mut fired)
                    .expect("push");
            }
            submit.request_and_wait(0);
            let mut st = procs[0].lock();
            if ring.has_unsubmitted(&st) {
                early += 1;
            }
            let mut fired = Vec::new();
            ring.reap(&procs[0], &mut st, &mut fired);
        }
        stop.store(true, Ordering::Relaxed);
        busy.into_iter().for_each(|b| b.join().unwrap());
        assert_eq!(
            early, 0,
            "request_and_wait returned before its ring was submitted"
        );
    }
}
