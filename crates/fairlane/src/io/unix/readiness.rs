//! Waiting for readiness, shared by [`AsyncFd`], the `net` sockets and the
//! `process` pipes and pidfds.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use crate::io::driver::Driver;
use crate::io::reactor::{Direction, Registration};
use crate::io::uring::Op;
use crate::io::{Interest, IoBackend, Ready};
use crate::net::socket::{cvt, set_nonblocking};
use crate::task::coop;

/// io_uring: a one-shot `POLL_ADD` on `fd` for `events` (errors and
/// hang-ups are always reported), not yet awaited.
fn submit_poll_add(driver: &Driver, fd: RawFd, events: libc::c_short) -> io::Result<Op<()>> {
    Op::submit(driver, (), false, |_| {
        opcode::PollAdd::new(types::Fd(fd), events as u16 as u32).build()
    })
    .map_err(|(e, _)| e)
}

/// The reported event mask of a completed `POLL_ADD` or `poll`:
/// `EBADF` for `POLLNVAL` (the descriptor is not open).
fn checked_revents(revents: u32) -> io::Result<u32> {
    if revents & (libc::POLLNVAL as u16 as u32) != 0 {
        Err(io::Error::from_raw_os_error(libc::EBADF))
    } else {
        Ok(revents)
    }
}

/// io_uring: waits with a one-shot `POLL_ADD` until one of `events`
/// (or an error or hang-up) is set on `fd`; the reported event mask.
pub(crate) async fn poll_add(driver: &Driver, fd: RawFd, events: libc::c_short) -> io::Result<u32> {
    let op = submit_poll_add(driver, fd, events)?;
    checked_revents(op.await.0?)
}

/// The poller directions a fallback wait for `interest` uses, given
/// the directions `registered`: read for readable and priority (the
/// poller reports `EPOLLPRI` as a read event), write for writable; an
/// error alone is reported in both, so it waits in one registered.
fn directions(interest: Interest, registered: [bool; 2]) -> [bool; 2] {
    let read = interest.is_readable() || interest.is_priority();
    let write = interest.is_writable();
    if read || write {
        [read, write]
    } else if registered[0] {
        [true, false]
    } else {
        [false, true]
    }
}

/// Waits until `fd` is ready for `interest`, without doing any I/O: with
/// io_uring (`reg` is `None`) by a one-shot `POLL_ADD` unless it is
/// ready already, in the fallback backend through `fd`'s poller
/// registration `reg`. Either way the
/// descriptor itself is asked, so readiness that is already there is
/// seen at once and none is cached between calls; the result is what it
/// reported.
pub(crate) async fn wait(
    driver: &Driver,
    reg: Option<&Registration>,
    fd: RawFd,
    interest: Interest,
) -> io::Result<Ready> {
    let events = interest.poll_events();
    let revents = match reg {
        None => {
            driver.check_live()?;
            // Readiness already there is seen at once, without a round
            // trip through the ring (as a fallback wait's first attempt
            // sees it).
            coop::proceed().await;
            match ready_now(fd, events) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                now => return Ok(Ready::from_revents(now?)),
            }
            if interest.is_priority() {
                poll_add_priority(driver, fd, events).await?
            } else {
                poll_add(driver, fd, events).await?
            }
        }
        // Edge-triggered: each attempt asks the descriptor itself (`poll`
        // with no wait), and `io_dirs` waits only for an edge after it.
        Some(reg) => {
            let dirs = directions(interest, reg.directions());
            reg.io_dirs(dirs, || ready_now(fd, events)).await?
        }
    };
    Ok(Ready::from_revents(revents))
}

/// io_uring: [`poll_add`] for `events` that include `POLLPRI`.
///
/// A TCP socket wakes its waiters for urgent data with the same wake-up
/// as for any data, and the kernel does not deliver that wake-up to a
/// `POLL_ADD` that asks for `POLLPRI` alone: such a poll stays pending
/// after the urgent byte arrived. Asking for `POLLRDBAND` as well lets
/// every data wake-up through, but the event mask of a wake-up is the
/// wake-up's own, which names `POLLPRI` for plain data too. So each
/// completion only says "look again": the descriptor itself is asked
/// (`poll` with no wait), and the poll is armed again while none of
/// `events` is set. Plain data that is already queued does not set
/// `POLLRDBAND`, so the new poll waits for the next arrival.
async fn poll_add_priority(driver: &Driver, fd: RawFd, events: libc::c_short) -> io::Result<u32> {
    loop {
        poll_add(driver, fd, events | libc::POLLRDBAND).await?;
        match ready_now(fd, events) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            now => return now,
        }
    }
}

/// The event mask if one of `events` (or an error or hang-up) is set on
/// `fd` now, else `WouldBlock` (`poll` with no wait).
fn ready_now(fd: RawFd, events: libc::c_short) -> io::Result<u32> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one live `pollfd`, no wait.
    let n = cvt(unsafe { libc::poll(&mut p, 1, 0) })?;
    if n > 0 && p.revents != 0 {
        checked_revents(p.revents as u16 as u32)
    } else {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

/// io_uring: a `POLL_ADD` kept between polls (boxed: the objects that
/// keep one stay small while they wait for nothing).
pub(crate) type KeptPoll = Option<Box<Op<()>>>;

/// io_uring: polls the `POLL_ADD` for `events` on `fd` kept in `slot`
/// between polls, submitting one first if none is kept (the poll
/// registers the waker, replacing the one an earlier poll left); its
/// reported event mask once it completes, the slot then empty.
/// Dropping the `Op` left in `slot` cancels it.
fn poll_kept(
    slot: &mut KeptPoll,
    driver: &Driver,
    fd: RawFd,
    events: libc::c_short,
    cx: &mut Context<'_>,
) -> Poll<io::Result<u32>> {
    let op = match slot {
        Some(op) => op,
        None => {
            driver.check_live()?;
            slot.insert(Box::new(submit_poll_add(driver, fd, events)?))
        }
    };
    let (r, ()) = std::task::ready!(Pin::new(op).poll(cx));
    *slot = None;
    Poll::Ready(checked_revents(r?))
}

/// The poll-based form of [`wait`], for one direction's interest
/// (`READABLE` or `WRITABLE`, plus errors): with io_uring (`reg` is
/// `None`) through the `POLL_ADD` kept in `kept` between polls, in the
/// fallback backend through `reg` (a poll-based wait, whose waker stays
/// until the next event). The result is what the descriptor reported,
/// as with [`wait`]; only the task that polled last is woken.
pub(crate) fn poll_wait(
    driver: &Driver,
    reg: Option<&Registration>,
    kept: &mut KeptPoll,
    fd: RawFd,
    interest: Interest,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Ready>> {
    let events = interest.poll_events();
    let revents = match reg {
        // Readiness already there is seen at once (a `POLL_ADD` would
        // complete only when the ring is next reaped): callers poll
        // before each attempt, ready or not.
        None if kept.is_none() => {
            std::task::ready!(coop::poll_proceed(cx));
            match ready_now(fd, events) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::task::ready!(poll_kept(kept, driver, fd, events, cx))?
                }
                now => {
                    coop::spend();
                    now?
                }
            }
        }
        None => std::task::ready!(poll_kept(kept, driver, fd, events, cx))?,
        Some(reg) => {
            let dirs = directions(interest, reg.directions());
            std::task::ready!(reg.poll_io_dirs(cx, dirs, || ready_now(fd, events)))?
        }
    };
    Poll::Ready(Ok(Ready::from_revents(revents)))
}

/// A non-blocking descriptor that fairlane owns and whose I/O is
/// polled through `&mut self` (the pipes and the pidfd of
/// [`process`](crate::process)): `poll_io` tries the I/O and, while it
/// would block, waits for readiness in the fallback backend through the
/// poller registration (as a socket does), with io_uring through a
/// one-shot `POLL_ADD` kept here between polls. No readiness is cached:
/// a completed `POLL_ADD` only makes the next poll try the I/O again.
pub(crate) struct PollFd {
    /// io_uring: the `POLL_ADD` in flight per direction, submitted when
    /// an attempt would block. Declared before `fd`: dropping one
    /// cancels it before the descriptor closes (the kernel holds the
    /// file of a submitted request in any case).
    waits: [KeptPoll; 2],
    /// Fallback: the poller registration, dropped (deleted from the
    /// poller) before `fd` closes.
    reg: Option<Registration>,
    driver: Arc<Driver>,
    fd: OwnedFd,
}

impl PollFd {
    /// Takes `fd`, sets it non-blocking, and watches it with `driver`'s
    /// backend (in both directions).
    pub(crate) fn with_driver(driver: Arc<Driver>, fd: OwnedFd) -> io::Result<PollFd> {
        set_nonblocking(fd.as_raw_fd(), true)?;
        let reg = if driver.backend() == IoBackend::Fallback {
            Some(Registration::new(&driver, fd.as_raw_fd())?)
        } else {
            None
        };
        Ok(PollFd {
            waits: [None, None],
            reg,
            driver,
            fd,
        })
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Stops watching and gives the descriptor back (still
    /// non-blocking): waits in flight are cancelled, the registration
    /// is deleted from its poller.
    pub(crate) fn into_fd(self) -> OwnedFd {
        let PollFd {
            waits,
            reg,
            driver,
            fd,
        } = self;
        drop((waits, reg, driver));
        fd
    }

    /// Runs the non-blocking `attempt` until it does not return
    /// `WouldBlock` (or `Interrupted`); in between, waits for readiness
    /// in `dir`. Dropping the caller's future in between is fine: a
    /// `POLL_ADD` left here is polled (or cancelled by the drop of
    /// `self`) later.
    pub(crate) fn poll_io<R>(
        &mut self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut attempt: impl FnMut(RawFd) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let fd = self.fd.as_raw_fd();
        if let Some(reg) = &self.reg {
            return reg.poll_io(cx, dir, || attempt(fd));
        }
        poll_io_kept(
            &mut self.waits[dir as usize],
            &self.driver,
            fd,
            dir,
            cx,
            || attempt(fd),
        )
    }
}

/// io_uring: runs the non-blocking `attempt` on `fd` until it does not
/// return `WouldBlock` (or `Interrupted`); in between, waits for
/// readiness in `dir` through the one-shot `POLL_ADD` kept in `wait`
/// between polls. No readiness is cached: a completed `POLL_ADD` only
/// makes the next poll try again. A caller's future dropped in between
/// leaves the `POLL_ADD` in `wait`, for the next poll (or cancelled
/// when `wait` is dropped); it holds no data.
pub(crate) fn poll_io_kept<R>(
    wait: &mut KeptPoll,
    driver: &Driver,
    fd: RawFd,
    dir: Direction,
    cx: &mut Context<'_>,
    mut attempt: impl FnMut() -> io::Result<R>,
) -> Poll<io::Result<R>> {
    let events = match dir {
        Direction::Read => libc::POLLIN,
        Direction::Write => libc::POLLOUT,
    };
    // The budget is spent once per ready result: by the `POLL_ADD` if
    // one completed, else here.
    let mut spent = false;
    loop {
        if wait.is_some() {
            std::task::ready!(poll_kept(wait, driver, fd, events, cx))?;
            spent = true;
        } else if !spent {
            std::task::ready!(coop::poll_proceed(cx));
        }
        match attempt() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Submitted and polled: that registers the waker, or
                // finds it completed already (try again).
                std::task::ready!(poll_kept(wait, driver, fd, events, cx))?;
                spent = true;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            result => {
                if !spent {
                    coop::spend();
                }
                return Poll::Ready(result);
            }
        }
    }
}

impl std::fmt::Debug for PollFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollFd").field("fd", &self.raw()).finish()
    }
}
