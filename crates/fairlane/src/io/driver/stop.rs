//! Stopping a processor (shutdown, or its removal): its operations are
//! cancelled and done again on another engine, its registrations move
//! there, and its timers fire (driver.md, "Stopping a processor").

use std::sync::atomic::Ordering;
use std::task::Waker;

use super::{Driver, Engine};
use crate::io::reactor;
use crate::io::sleep::NO_TIMER;

impl Driver {
    /// Processor `p` stops for good (runtime shutdown, or the processor is
    /// removed): cancels every operation in flight on its engine and reaps
    /// every completion before anything they use is freed (their futures
    /// submit them again on another engine), moves fallback registrations
    /// to another engine, and fires its timers; new operations go
    /// elsewhere. After shutdown, all of them fail instead (driver.md,
    /// "Stopping a processor").
    pub(crate) fn processor_stopped(&self, p: usize) {
        let Some(proc) = self.procs().get(p).cloned() else {
            return;
        };
        let mut fired = Vec::new();
        let mut moving = Vec::new();
        {
            let mut st = proc.lock();
            if st.stopped {
                return;
            }
            st.stopped = true;
            // Wakers a look deferred (time/clock.md, "Due timers before
            // ready I/O"): nobody looks at this engine again.
            proc.deferred.store(false, Ordering::Relaxed);
            st.take_deferred_wakers(&mut fired);
            match &proc.engine {
                // Operations whose futures live complete as `RESTART` and
                // are submitted again elsewhere by their futures.
                Engine::Uring(ring) => ring.cancel_all(&proc, &mut st, &mut fired),
                Engine::Poll(poller) if self.shut_down.load(Ordering::Acquire) => {
                    poller.stop(&mut st, &mut fired)
                }
                // Removal: registered sockets move to another engine, after
                // this lock is released (moving takes the other's lock).
                Engine::Poll(_) => {
                    moving.extend(st.fds.drain());
                    proc.work.remove(&*st, moving.len());
                }
            }
            // Timers: wake their tasks; their sleeps then see the processor
            // stopped and re-register elsewhere (or the runtime is gone).
            let mut all = Vec::new();
            st.wheel.advance(u64::MAX, &mut all);
            fired.extend(all);
            proc.work.set_next_timer(&*st, NO_TIMER);
        }
        for state in &moving {
            reactor::rehome(self, &proc, state, &mut fired);
        }
        fired.into_iter().for_each(Waker::wake);
    }

    /// Runtime shutdown: every processor stops (see `processor_stopped`).
    pub(crate) fn shutdown(&self) {
        self.shut_down.store(true, Ordering::Release);
        let n = self.procs().len();
        for p in 0..n {
            self.processor_stopped(p);
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.shutdown();
        self.submit_thread.stop();
    }
}
