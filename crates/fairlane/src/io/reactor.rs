//! The fallback engine: a readiness poller (epoll, through the `polling`
//! crate) per processor, for sockets. Files use the blocking pool instead.
//!
//! A socket registers once, edge-triggered for both directions, with the
//! poller of the processor that created it (or one chosen round-robin). Its
//! [`FdState`] counts readiness events per direction; an operation reads the
//! count, tries the non-blocking system call, and on `WouldBlock` waits only
//! if no event arrived since it read the count (an edge that came in between
//! would otherwise be lost).

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use polling::{Event, Events, PollMode};

use super::driver::{eventfd, shut_down_error, Driver, Engine, ProcessorIo, State};
use crate::task::coop;

/// Poller key of the wake-up eventfd.
const WAKE_KEY: usize = usize::MAX - 1;

/// A processor's poller and its wake-up eventfd.
pub(crate) struct Poller {
    poller: polling::Poller,
    wake_fd: OwnedFd,
    events: Mutex<Events>,
}

/// The direction an operation waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Read = 0,
    Write = 1,
}

/// Readiness of one registered descriptor.
///
/// Lock order: `home`, then the engine's lock, then `inner` (dispatching
/// takes the engine's lock and then `inner`).
pub(crate) struct FdState {
    fd: RawFd,
    /// The directions registered with the poller (read, write): both for
    /// sockets, what its interest names for an `AsyncFd`.
    dirs: [bool; 2],
    /// The engine the descriptor is registered with and its key in that
    /// engine's `fds`; `None` once the registration dropped. Moves when the
    /// engine's processor is removed ([`rehome`]).
    home: Mutex<Option<(Arc<ProcessorIo>, usize)>>,
    inner: Mutex<FdInner>,
}

struct FdInner {
    /// Readiness events seen, per direction.
    ticks: [u64; 2],
    /// Tasks waiting per direction: several tasks may share a socket (two
    /// acceptors on one listener), so every one of them is kept.
    wakers: [Vec<Waker>; 2],
    /// Per direction, operation futures ([`Registration::io`]) waiting now,
    /// and whether a poll-based wait ([`Registration::poll_io`], which has
    /// no future to notice it is dropped) registered since the last event:
    /// what the paused clock counts as I/O in flight (`has_waiters`).
    /// Wakers may outlive their waits (a dropped waiter's stays until the
    /// next event), so `wakers` cannot tell.
    futures_waiting: [u32; 2],
    polled_waiting: [bool; 2],
    /// The processor stopped: nothing will report readiness any more.
    stopped: bool,
}

impl FdState {
    fn lock(&self) -> std::sync::MutexGuard<'_, FdInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn home(&self) -> std::sync::MutexGuard<'_, Option<(Arc<ProcessorIo>, usize)>> {
        self.home.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ready(&self, read: bool, write: bool, fired: &mut Vec<Waker>) {
        let mut inner = self.lock();
        for (dir, hit) in [(0, read), (1, write)] {
            if hit {
                inner.ticks[dir] += 1;
                fired.append(&mut inner.wakers[dir]);
                inner.polled_waiting[dir] = false;
            }
        }
    }

    /// Whether a task waits for this descriptor's readiness now (the
    /// paused clock's idle check; the caller holds the engine's lock, which
    /// comes before this one).
    pub(crate) fn has_waiters(&self) -> bool {
        let inner = self.lock();
        inner.futures_waiting.iter().any(|&n| n != 0) || inner.polled_waiting.iter().any(|&p| p)
    }
}

/// An operation future's count in `futures_waiting` while it waits, taken
/// back when it completes or is dropped.
struct Waiting<'a> {
    state: &'a FdState,
    /// The directions it waits in (read, write), each counted.
    dirs: [bool; 2],
    counted: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.counted {
            let mut inner = self.state.lock();
            for d in (0..2).filter(|&d| self.dirs[d]) {
                inner.futures_waiting[d] -= 1;
            }
        }
    }
}

impl Poller {
    pub(crate) fn new() -> io::Result<Poller> {
        let poller = polling::Poller::new()?;
        let wake_fd = eventfd()?;
        // SAFETY: the eventfd is deleted from the poller (by the poller's
        // drop, which closes the epoll instance) no later than it is closed:
        // both live in this struct, and `poller` is declared first, so it
        // drops first.
        unsafe {
            poller.add_with_mode(
                std::os::fd::AsRawFd::as_raw_fd(&wake_fd),
                Event::readable(WAKE_KEY),
                PollMode::Level,
            )?;
        }
        Ok(Poller {
            poller,
            wake_fd,
            events: Mutex::new(Events::new()),
        })
    }

    pub(crate) fn notify(&self) {
        super::driver::eventfd_signal(std::os::fd::AsRawFd::as_raw_fd(&self.wake_fd));
    }

    /// Polls without waiting and dispatches what is ready. Skipped if another
    /// thread is polling this poller right now.
    pub(crate) fn poll_now(&self, st: &mut State, fired: &mut Vec<Waker>) {
        let Ok(mut events) = self.events.try_lock() else {
            return;
        };
        events.clear();
        if self.poller.wait(&mut events, Some(Duration::ZERO)).is_ok() {
            let list: Vec<(usize, bool, bool)> = events
                .iter()
                .map(|e| (e.key, e.readable, e.writable))
                .collect();
            drop(events);
            self.dispatch(st, &list, fired);
        }
    }

    /// Waits for readiness, a wake-up or `timeout`; collects the events.
    pub(crate) fn wait(&self, timeout: Option<Duration>, out: &mut Vec<(usize, bool, bool)>) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.clear();
        if self.poller.wait(&mut events, timeout).is_ok() {
            out.extend(events.iter().map(|e| (e.key, e.readable, e.writable)));
        }
    }

    /// Hands collected events to their descriptors.
    pub(crate) fn dispatch(
        &self,
        st: &mut State,
        events: &[(usize, bool, bool)],
        fired: &mut Vec<Waker>,
    ) {
        for &(key, read, write) in events {
            if key == WAKE_KEY {
                let mut buf = 0u64;
                // SAFETY: reads 8 bytes into a live local; the eventfd is
                // non-blocking, so an empty counter just fails.
                unsafe {
                    libc::read(
                        std::os::fd::AsRawFd::as_raw_fd(&self.wake_fd),
                        (&mut buf as *mut u64).cast(),
                        8,
                    )
                };
                st.wake_reaped();
            } else if let Some(fd) = st.fds.get(key) {
                fd.ready(read, write, fired);
            }
        }
    }

    /// Stopping: every waiter is woken and sees the processor stopped.
    pub(crate) fn stop(&self, st: &mut State, fired: &mut Vec<Waker>) {
        for (_, fd) in st.fds.iter() {
            let mut inner = fd.lock();
            inner.stopped = true;
            for wakers in &mut inner.wakers {
                fired.append(wakers);
            }
            inner.polled_waiting = [false; 2];
        }
    }
}

/// A descriptor registered with a processor's poller. Must be dropped
/// before the descriptor is closed.
pub(crate) struct Registration {
    state: Arc<FdState>,
}

/// Registers `state`'s descriptor with `proc`'s poller and records it as its
/// home; `home` is `state`'s home lock, held by the caller.
fn register(
    proc: Arc<ProcessorIo>,
    state: &Arc<FdState>,
    home: &mut Option<(Arc<ProcessorIo>, usize)>,
) -> io::Result<()> {
    let Engine::Poll(poller) = &proc.engine else {
        return Err(io::Error::other("not a fallback runtime"));
    };
    let mut st = proc.lock();
    if st.is_stopped() {
        return Err(shut_down_error());
    }
    let key = st.fds.insert(state.clone());
    // SAFETY: the descriptor stays open while its `Registration` lives, and
    // the registration's drop deletes it from whichever poller `home` names
    // before it is closed; the caller holds `home`, so that drop waits.
    let added = unsafe {
        poller.poller.add_with_mode(
            state.fd,
            Event::new(key, state.dirs[0], state.dirs[1]),
            PollMode::Edge,
        )
    };
    if let Err(e) = added {
        st.fds.remove(key);
        return Err(e);
    }
    let appeared = proc.work_added(&st);
    proc.wake_if_on_futex();
    drop(st);
    if appeared {
        if let Some(driver) = proc.driver.upgrade() {
            driver.work_appeared(proc.index);
        }
    }
    *home = Some((proc, key));
    Ok(())
}

/// Processor `from` is removed and its engine stopped; `state` was
/// registered there (its key already taken out of `from`'s `fds`). Deletes
/// the descriptor from `from`'s poller, registers it with another live
/// engine, and wakes every waiter to try again: the new registration reports the
/// descriptor's current readiness, and a waiter that looks before that sees
/// its tick moved. With no live engine left (shutdown), waiters see the
/// runtime shut down.
pub(crate) fn rehome(
    driver: &Driver,
    from: &ProcessorIo,
    state: &Arc<FdState>,
    fired: &mut Vec<Waker>,
) {
    let mut home = state.home();
    match home.as_ref() {
        Some((proc, _)) if std::ptr::eq(Arc::as_ptr(proc), from) => {}
        // Dropped meanwhile (deleted from `from`'s poller by the drop).
        _ => return,
    }
    if let Engine::Poll(poller) = &from.engine {
        // SAFETY: the descriptor is open: its registration has not dropped
        // (its home is still `from`, and we hold the home lock).
        let fd = unsafe { BorrowedFd::borrow_raw(state.fd) };
        let _ = poller.poller.delete(fd);
    }
    // Another engine may stop too before the registration lands there
    // (`register` refuses a stopped one): take the next, until none is left.
    // Any other failure (`epoll_ctl` out of memory) ends the move: the
    // descriptor is then registered nowhere and its waiters get an error.
    let moved = loop {
        match driver.live_proc(from.index) {
            Ok(to) => match register(to.clone(), state, &mut home) {
                Ok(()) => break Ok(()),
                Err(_) if to.lock().is_stopped() => {}
                Err(e) => break Err(e),
            },
            Err(e) => break Err(e),
        }
    };
    let mut inner = state.lock();
    if moved.is_err() {
        *home = None;
        inner.stopped = true;
    }
    for dir in 0..2 {
        inner.ticks[dir] += 1;
        fired.append(&mut inner.wakers[dir]);
    }
    inner.polled_waiting = [false; 2];
}

impl Registration {
    /// Registers the non-blocking descriptor `fd`, which must stay open
    /// until the registration is dropped.
    pub(crate) fn new(driver: &Driver, fd: RawFd) -> io::Result<Registration> {
        Registration::with_directions(driver, fd, [true, true])
    }

    /// As [`new`](Self::new), registering only the directions set in
    /// `dirs` (read, write; at least one): readiness in the other is never
    /// reported, so only `dirs` may be waited for.
    pub(crate) fn with_directions(
        driver: &Driver,
        fd: RawFd,
        dirs: [bool; 2],
    ) -> io::Result<Registration> {
        let (mut proc, _) = driver.target()?;
        let state = Arc::new(FdState {
            fd,
            dirs,
            home: Mutex::new(None),
            inner: Mutex::new(FdInner {
                ticks: [0; 2],
                wakers: [Vec::new(), Vec::new()],
                futures_waiting: [0; 2],
                polled_waiting: [false; 2],
                stopped: false,
            }),
        });
        let mut home = state.home();
        while let Err(e) = register(proc.clone(), &state, &mut home) {
            if !proc.lock().is_stopped() || driver.check_live().is_err() {
                return Err(e);
            }
            // This processor's engine stopped (it is being removed while
            // this thread finishes a task): register elsewhere.
            proc = driver.live_proc(proc.index)?;
        }
        drop(home);
        Ok(Registration { state })
    }

    /// The directions registered with the poller (read, write).
    pub(crate) fn directions(&self) -> [bool; 2] {
        self.state.dirs
    }

    /// Runs the non-blocking `attempt` until it does not return
    /// `WouldBlock`; in between, waits for readiness in `dir`.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        attempt: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let mut dirs = [false; 2];
        dirs[dir as usize] = true;
        self.poll_io_dirs(cx, dirs, attempt)
    }

    /// As [`poll_io`](Self::poll_io), waiting for readiness in either of
    /// the directions set in `dirs` (at least one): the ticks of each are
    /// read before the attempt, and the waker joins each one's list, so an
    /// edge in any of them after the read is seen or wakes the task.
    pub(crate) fn poll_io_dirs<R>(
        &self,
        cx: &mut Context<'_>,
        dirs: [bool; 2],
        attempt: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_wait(cx, dirs, attempt, None)
    }

    /// `poll_io_dirs`; `counted` is the calling future's `Waiting::counted`
    /// (`None`: a poll-based wait).
    fn poll_wait<R>(
        &self,
        cx: &mut Context<'_>,
        dirs: [bool; 2],
        mut attempt: impl FnMut() -> io::Result<R>,
        counted: Option<&mut bool>,
    ) -> Poll<io::Result<R>> {
        std::task::ready!(coop::poll_proceed(cx));
        loop {
            let ticks = {
                let inner = self.state.lock();
                if inner.stopped {
                    return Poll::Ready(Err(shut_down_error()));
                }
                inner.ticks
            };
            match attempt() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut inner = self.state.lock();
                    if (0..2).any(|d| dirs[d] && inner.ticks[d] != ticks[d]) {
                        continue; // readiness arrived meanwhile: try again
                    }
                    // A dropped waiter's waker stays until the next event,
                    // which wakes it for nothing: harmless.
                    for d in (0..2).filter(|&d| dirs[d]) {
                        if !inner.wakers[d].iter().any(|w| w.will_wake(cx.waker())) {
                            inner.wakers[d].push(cx.waker().clone());
                        }
                    }
                    match counted {
                        Some(counted) if !*counted => {
                            for d in (0..2).filter(|&d| dirs[d]) {
                                inner.futures_waiting[d] += 1;
                            }
                            *counted = true;
                        }
                        Some(_) => {}
                        None => {
                            for d in (0..2).filter(|&d| dirs[d]) {
                                inner.polled_waiting[d] = true;
                            }
                        }
                    }
                    return Poll::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                result => {
                    coop::spend();
                    return Poll::Ready(result);
                }
            }
        }
    }

    /// [`poll_io`](Self::poll_io) as a future.
    pub(crate) async fn io<R>(
        &self,
        dir: Direction,
        attempt: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        let mut dirs = [false; 2];
        dirs[dir as usize] = true;
        self.io_dirs(dirs, attempt).await
    }

    /// [`poll_io_dirs`](Self::poll_io_dirs) as a future.
    pub(crate) async fn io_dirs<R>(
        &self,
        dirs: [bool; 2],
        mut attempt: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        let mut waiting = Waiting {
            state: &self.state,
            dirs,
            counted: false,
        };
        std::future::poll_fn(|cx| {
            self.poll_wait(cx, dirs, &mut attempt, Some(&mut waiting.counted))
        })
        .await
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut home = self.state.home();
        let Some((proc, key)) = home.take() else {
            return; // its engine stopped with no other to move to
        };
        let Engine::Poll(poller) = &proc.engine else {
            return;
        };
        let mut st = proc.lock();
        // Still in the engine's table unless the engine is stopping and
        // took it out (then `rehome`, waiting for `home`, skips it).
        if st.fds.get(key).is_some_and(|s| Arc::ptr_eq(s, &self.state)) {
            st.fds.remove(key);
            proc.work_removed(&st, 1);
        }
        // SAFETY: the owner of the descriptor drops this registration before
        // closing it, so it is open here.
        let fd = unsafe { BorrowedFd::borrow_raw(self.state.fd) };
        let _ = poller.poller.delete(fd);
    }
}
