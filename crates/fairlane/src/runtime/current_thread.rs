//! The current-thread flavor: a runtime whose one processor is run by the
//! thread inside `Runtime::block_on`, as tokio's current-thread runtime.
//!
//! # Design
//!
//! The runtime is an ordinary cluster of one processor with one lane, and
//! no thread of its own. The scheduler core already lets a thread run a
//! processor for a while in place of its own thread: `run_stand_in(p)`
//! runs the processor loop until `release_processor(p)`, and
//! `reclaim_processor(p)` makes it runnable again (std's `block_in_place`
//! hands processors over this way). A current-thread runtime's processor
//! has no own thread at all: a `block_on` thread takes it up whenever its
//! future waits, and gives it back whenever the future is woken. So tasks
//! run exactly while some thread is in `block_on`, on that thread.
//!
//! - **The seat.** One thread at a time runs the processor: the first
//!   `block_on` thread takes the seat; others poll their own futures and
//!   park, and are woken to try again when the seat is given back.
//! - **Between polls** the seated thread calls [`SeatGuard::drive`]:
//!   reclaim the processor, mark itself running, register as processor 0
//!   (for the host and the I/O driver), and run the processor loop. Its
//!   future's waker releases the processor when it sees the thread
//!   running; the loop returns after the poll it is in (or at once, from
//!   idle sleep) and the thread polls its future. A released processor is
//!   the resting state: nothing runs it until the next `drive` reclaims it.
//! - **A future that wakes itself** (it yielded, or was woken while
//!   polled) is polled again only after the tasks ready by then have run,
//!   as on tokio: [`SeatGuard::run_ready_tasks`] queues a small task, the
//!   bell, behind them (one lane keeps them in order) that releases the
//!   processor when it runs.
//! - **Shutdown** closes the cluster: the loop returns at once, and the
//!   thread parks between polls as any `block_on` does.
//!
//! The thread is not a processor while it polls its future: what the
//! future spawns or wakes is pushed as from any thread, and its I/O is
//! submitted through the driver's submission thread (a `block_on` thread
//! may exit with operations in flight; see `io/driver.md`, "Who enters the
//! kernel").

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::Instant;

use super::block_on::ThreadWaker;
use super::Handle;

/// Who runs the processor of a current-thread runtime now, and who waits
/// for the turn.
#[derive(Default)]
pub(crate) struct Seat {
    state: Mutex<SeatState>,
}

#[derive(Default)]
struct SeatState {
    taken: bool,
    /// `block_on` threads to wake when the seat is given back.
    waiting: Vec<Arc<ThreadWaker>>,
}

impl Seat {
    fn lock(&self) -> std::sync::MutexGuard<'_, SeatState> {
        // Poisoning: the state is a flag and a list, consistent whatever
        // panicked.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the seat for the thread of `waker`, or, if another thread has
    /// it, has `waker` woken when it is given back.
    pub(super) fn take<'a>(
        &'a self,
        handle: &'a Handle,
        waker: &Arc<ThreadWaker>,
    ) -> Option<SeatGuard<'a>> {
        let mut state = self.lock();
        if !state.taken {
            state.taken = true;
            return Some(SeatGuard { handle });
        }
        if !state.waiting.iter().any(|w| Arc::ptr_eq(w, waker)) {
            state.waiting.push(waker.clone());
        }
        None
    }
}

/// The seat, held by the calling thread; given back (and the waiting
/// threads woken) when dropped.
pub(super) struct SeatGuard<'a> {
    handle: &'a Handle,
}

impl SeatGuard<'_> {
    /// Whether the runtime shut down: the processor runs no more.
    pub(super) fn is_shut_down(&self) -> bool {
        self.handle.cluster.is_shut_down()
    }

    /// Runs the processor on this thread until the future of `waker` is
    /// woken (or the runtime shuts down; or spuriously, after a stale
    /// release).
    pub(super) fn drive(&self, waker: &ThreadWaker) {
        let cluster = &self.handle.cluster;
        let processor = waker
            .processor()
            .expect("a current-thread block_on has a processor");
        // Clears a release left from the last run (or by a late bell), so
        // that the loop runs. The one processor is never removed (the
        // cluster refuses to remove its last one), so this cannot fail.
        let _ = cluster.reclaim_processor(0);
        // SeqCst: the store-buffering pair with the waker (see
        // `ThreadWaker::wake_by_ref`). A wake-up that came before this
        // store is seen by the load; the release makes the loop below
        // return at once, after which the caller sees `NOTIFIED`.
        processor.running.store(true, Ordering::SeqCst);
        if waker.is_notified() {
            cluster.release_processor(0);
        }
        let host = cluster.host();
        host.register_current(0);
        cluster.run_stand_in(0);
        host.unregister_current();
        // Relaxed: a waker that still reads `true` releases the processor
        // needlessly, which only makes the next run return at once.
        processor.running.store(false, Ordering::Relaxed);
    }

    /// Runs the tasks ready now, then returns (or earlier, if the future of
    /// `waker` is woken meanwhile): a bell task, queued behind them on the
    /// processor's one lane, releases the processor when it runs.
    pub(super) fn run_ready_tasks(&self, waker: &ThreadWaker) {
        let cluster = Arc::downgrade(&self.handle.cluster);
        let bell = async move {
            if let Some(cluster) = cluster.upgrade() {
                cluster.release_processor(0);
            }
        };
        let mut options = fairlane_core::SpawnOptions::default();
        // Graceful shutdown does not wait for it.
        options.background = true;
        // Dropped: detached. A bell that runs late (the future was woken
        // by other means first) releases a processor that then returns
        // once more at once, which only costs a look.
        if self.handle.spawn_with(bell, options).is_ok() {
            self.drive(waker);
        }
    }
}

impl Drop for SeatGuard<'_> {
    fn drop(&mut self) {
        let waiting = {
            let mut state = self.handle.shared.seat.lock();
            state.taken = false;
            std::mem::take(&mut state.waiting)
        };
        // Woken outside the lock: each thread tries to take the seat.
        for waker in waiting {
            waker.wake_by_ref();
        }
    }
}

/// Wakes a `block_on` thread at its deadline: one that runs the processor
/// does not park, so a timed park cannot end its wait. Dropping the alarm
/// ends its thread.
pub(super) struct Alarm {
    _cancel: mpsc::Sender<()>,
}

impl Alarm {
    pub(super) fn set(deadline: Instant, waker: Waker) -> Alarm {
        let (cancel, cancelled) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("fairlane-block-on-alarm".into())
            .spawn(move || {
                let wait = deadline.saturating_duration_since(Instant::now());
                if let Err(mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(wait) {
                    waker.wake();
                }
            });
        if let Err(e) = spawned {
            // Without it the wait ends when the future is woken, or never:
            // say so.
            tracing::error!(error = %e, "fairlane could not start a thread for a block_on deadline");
        }
        Alarm { _cancel: cancel }
    }
}
