//! Unix-specific I/O: [`AsyncFd`], readiness for a descriptor fairlane does
//! not wrap itself (a pipe, an eventfd, a device, another library's socket).
//!
//! # Example
//! ```
//! use fairlane::io::unix::AsyncFd;
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! rt.block_on(async {
//!     let (a, _b) = std::os::unix::net::UnixStream::pair()?;
//!     a.set_nonblocking(true)?;
//!     let fd = AsyncFd::new(a)?;
//!     fd.writable().await?.retain_ready();
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::io::current_driver;
use crate::io::driver::Driver;
use crate::io::reactor::{Direction, Registration};
use crate::io::{Interest, IoBackend, Ready};
use crate::net::socket::cvt;

/// Waiting for readiness, shared by [`AsyncFd`], the `net` sockets and the
/// `process` pipes and pidfds.
pub(crate) mod readiness {
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
    pub(crate) async fn poll_add(
        driver: &Driver,
        fd: RawFd,
        events: libc::c_short,
    ) -> io::Result<u32> {
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
    /// ready already, in the fallback
    /// backend through `fd`'s poller registration `reg`. Either way the
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
    async fn poll_add_priority(
        driver: &Driver,
        fd: RawFd,
        events: libc::c_short,
    ) -> io::Result<u32> {
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
}

/// The readiness methods both guards have: `clear_ready`, `retain_ready`,
/// `clear_ready_matching`, `ready`, `is_ready` (examples on `$guard` from
/// `AsyncFd::$wait` and `AsyncFd::$ready`).
macro_rules! readiness_methods {
    ($guard:ident, $wait:ident, $ready:ident) => {
        /// Records that the descriptor is no longer ready (the I/O returned
        /// `WouldBlock`): the next wait waits for new readiness. fairlane
        /// caches no readiness (each wait asks the descriptor), so clearing
        /// is never needed for correctness; it keeps tokio's loop shape
        /// working.
        ///
        /// # Example
        /// ```
        #[doc = concat!(
            "async fn f(fd: &mut fairlane::io::unix::AsyncFd<std::fs::File>) -> std::io::Result<()> {\n",
            "    let mut guard = fd.", stringify!($wait), "().await?;\n",
            "    guard.clear_ready();\n",
            "    assert!(!guard.is_ready());\n",
            "    Ok(())\n",
            "}"
        )]
        /// ```
        pub fn clear_ready(&mut self) {
            self.ready = Ready::EMPTY;
        }

        /// Records that the kinds of readiness in `ready` are gone, keeping
        /// the others (after a read that drained the input of a descriptor
        /// also waited for writability, say).
        ///
        /// # Example
        /// ```
        #[doc = concat!(
            "use fairlane::io::{Interest, Ready};\n",
            "async fn f(fd: &mut fairlane::io::unix::AsyncFd<std::fs::File>) -> std::io::Result<()> {\n",
            "    let mut guard = fd.", stringify!($ready), "(Interest::READABLE | Interest::WRITABLE).await?;\n",
            "    guard.clear_ready_matching(Ready::READABLE);\n",
            "    assert!(!guard.ready().is_readable());\n",
            "    Ok(())\n",
            "}"
        )]
        /// ```
        pub fn clear_ready_matching(&mut self, ready: Ready) {
            self.ready = self.ready - ready;
        }

        /// The readiness the descriptor reported when the wait ended (see
        /// [`Ready`]), less what was cleared since.
        ///
        /// # Example
        /// ```
        #[doc = concat!(
            "use fairlane::io::Interest;\n",
            "async fn f(fd: &mut fairlane::io::unix::AsyncFd<std::fs::File>) -> std::io::Result<bool> {\n",
            "    let guard = fd.", stringify!($ready), "(Interest::READABLE).await?;\n",
            "    Ok(guard.ready().is_read_closed())\n",
            "}"
        )]
        /// ```
        pub fn ready(&self) -> Ready {
            self.ready
        }

        /// Keeps the readiness (dropping the guard does the same).
        ///
        /// # Example
        /// ```
        #[doc = concat!(
            "fn f(guard: fairlane::io::unix::", stringify!($guard), "<'_, std::fs::File>) {\n",
            "    guard.retain_ready();\n",
            "}"
        )]
        /// ```
        pub fn retain_ready(self) {}

        /// Whether the guard still holds readiness: true until
        /// [`clear_ready`](Self::clear_ready) or a `try_io` that would block.
        ///
        /// # Example
        /// See [`clear_ready`](Self::clear_ready).
        /// ```
        #[doc = concat!(
            "fn f(guard: &fairlane::io::unix::", stringify!($guard), "<'_, std::fs::File>) -> bool {\n",
            "    guard.is_ready()\n",
            "}"
        )]
        /// ```
        pub fn is_ready(&self) -> bool {
            !self.ready.is_empty()
        }
    };
}

/// A non-blocking descriptor `T` whose readiness the runtime reports, as
/// tokio's `AsyncFd`: wait with [`readable`](Self::readable),
/// [`writable`](Self::writable) or [`ready`](Self::ready) (any
/// [`Interest`]), then do the I/O yourself through the guard's
/// [`try_io`](AsyncFdReadyGuard::try_io), in a loop that goes back to
/// waiting on `WouldBlock`. The guard's [`ready`](AsyncFdReadyGuard::ready)
/// tells what the descriptor reported ([`Ready`]).
///
/// The descriptor must be in non-blocking mode (`O_NONBLOCK`):
/// [`new`](Self::new) checks and refuses a blocking one, which would stall
/// a processor inside `try_io`. It must also be one that `poll`/`epoll`
/// can watch (pipes, sockets, eventfds, timerfds, terminals; not regular
/// files). Dropping the `AsyncFd` drops `T` (closing the descriptor if `T`
/// owns it); [`into_inner`](Self::into_inner) gives `T` back.
///
/// Readiness is not cached: each wait asks the descriptor itself, so a
/// wait after [`clear_ready`](AsyncFdReadyGuard::clear_ready) returns at
/// once if the descriptor is still ready (for example, when `try_io` read
/// only part of what is there), and otherwise waits for the descriptor to
/// become ready.
///
/// For implementations of `AsyncRead`/`AsyncWrite`, the poll-based waits
/// [`poll_read_ready`](Self::poll_read_ready) and
/// [`poll_write_ready`](Self::poll_write_ready) (and their `_mut` forms)
/// have tokio's shapes. Not provided (tokio has it): `async_io`; write the
/// loop above instead.
///
/// # Example
/// ```
/// use std::io::{Read, Write};
/// use std::os::unix::net::UnixStream;
/// use fairlane::io::unix::AsyncFd;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let (a, mut b) = UnixStream::pair()?;
///     a.set_nonblocking(true)?;
///     let fd = AsyncFd::new(a)?;
///     b.write_all(b"hi")?;
///     let mut buf = [0u8; 8];
///     let n = loop {
///         let mut guard = fd.readable().await?;
///         match guard.try_io(|inner| inner.get_ref().read(&mut buf)) {
///             Ok(result) => break result?,
///             Err(_would_block) => continue,
///         }
///     };
///     assert_eq!(&buf[..n], b"hi");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct AsyncFd<T: AsRawFd> {
    /// io_uring: the `POLL_ADD` a poll-based wait
    /// ([`poll_read_ready`](Self::poll_read_ready) and the others) keeps
    /// between polls, per direction (read, write). Declared before `inner`:
    /// dropping one cancels it before the descriptor closes.
    kept: Mutex<[readiness::KeptPoll; 2]>,
    /// Declared before `inner`: it must be dropped (deleted from the
    /// poller) before the descriptor closes. `None` with io_uring.
    reg: Option<Registration>,
    driver: Arc<Driver>,
    /// What this `AsyncFd` may wait for (errors always).
    interest: Interest,
    inner: T,
}

impl<T: AsRawFd> AsyncFd<T> {
    /// Takes `inner`, whose descriptor must be non-blocking, and watches it
    /// with the current runtime's I/O backend, for reading and writing
    /// (`with_interest(inner, Interest::READABLE | Interest::WRITABLE)`).
    ///
    /// # Errors
    /// Outside a runtime; `InvalidInput` if the descriptor is in blocking
    /// mode; the operating system's error if it cannot be watched (the
    /// fallback backend's `epoll` refuses regular files with `EPERM`). On
    /// error `inner` is dropped.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let fd = rt.block_on(async { fairlane::io::unix::AsyncFd::new(a) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(inner: T) -> io::Result<AsyncFd<T>> {
        AsyncFd::with_interest(inner, Interest::READABLE | Interest::WRITABLE)
    }

    /// As [`new`](Self::new), watching only for `interest`: waits for
    /// anything else ([`writable`](Self::writable) on a
    /// `with_interest(fd, Interest::READABLE)`) fail with `InvalidInput`,
    /// except for [`Interest::ERROR`], which every `AsyncFd` may wait for.
    /// In the fallback backend only the directions `interest` needs are
    /// registered with the poller, so the other direction's readiness
    /// wakes nothing; with io_uring each wait asks for its own interest.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::{unix::AsyncFd, Interest};
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let fd = AsyncFd::with_interest(a, Interest::WRITABLE)?;
    /// assert!(fd.writable().await?.ready().is_writable());
    /// assert_eq!(fd.readable().await.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_interest(inner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
        let driver = current_driver()?;
        let fd = inner.as_raw_fd();
        // SAFETY: fcntl on the caller's live descriptor, no pointers.
        let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
        if flags & libc::O_NONBLOCK == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "AsyncFd needs a non-blocking descriptor: set O_NONBLOCK \
                 (for example with set_nonblocking(true) or fcntl) before AsyncFd::new",
            ));
        }
        let reg = if driver.backend() == IoBackend::Fallback {
            let read = interest.is_readable() || interest.is_priority();
            let write = interest.is_writable();
            // An interest in errors alone registers for reading: errors
            // and hang-ups are reported in either direction.
            let dirs = [read || !write, write];
            Some(Registration::with_directions(&driver, fd, dirs)?)
        } else {
            None
        };
        Ok(AsyncFd {
            kept: Mutex::new([None, None]),
            reg,
            driver,
            interest,
            inner,
        })
    }

    /// The wrapped value.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// # a.set_nonblocking(true)?;
    /// let fd = rt.block_on(async { fairlane::io::unix::AsyncFd::new(a) })?;
    /// assert!(fd.get_ref().peer_addr().is_ok());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped value, mutably.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// # a.set_nonblocking(true)?;
    /// let mut fd = rt.block_on(async { fairlane::io::unix::AsyncFd::new(a) })?;
    /// let _: &mut std::os::unix::net::UnixStream = fd.get_mut();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Stops watching the descriptor and gives the wrapped value back
    /// (still open, still non-blocking).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// # a.set_nonblocking(true)?;
    /// let fd = rt.block_on(async { fairlane::io::unix::AsyncFd::new(a) })?;
    /// let a: std::os::unix::net::UnixStream = fd.into_inner();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_inner(self) -> T {
        let AsyncFd {
            kept,
            reg,
            driver,
            inner,
            ..
        } = self;
        // Waits cancelled and the descriptor deleted from the poller before
        // it can be closed.
        drop(kept);
        drop(reg);
        drop(driver);
        inner
    }

    /// Runs the I/O `f` on the wrapped value without waiting; its result,
    /// `WouldBlock` included. tokio clears its cached readiness for
    /// `interest` on `WouldBlock`; fairlane keeps none (each wait asks the
    /// descriptor itself), so the next [`ready`](Self::ready) waits as it
    /// should.
    ///
    /// # Errors
    /// `InvalidInput` if `interest` names something this `AsyncFd` was not
    /// made for; else `f`'s.
    ///
    /// # Example
    /// ```
    /// use std::io::Read;
    /// use fairlane::io::{unix::AsyncFd, Interest};
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let fd = AsyncFd::new(a)?;
    /// let err = fd.try_io(Interest::READABLE, |s| (&*s).read(&mut [0u8; 4])).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        self.check_interest(interest)?;
        f(&self.inner)
    }

    /// As [`try_io`](Self::try_io), with the wrapped value borrowed
    /// mutably.
    ///
    /// # Example
    /// ```
    /// use std::io::Write;
    /// use fairlane::io::{unix::AsyncFd, Interest};
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let mut fd = AsyncFd::new(a)?;
    /// assert_eq!(fd.try_io_mut(Interest::WRITABLE, |s| s.write(b"hi"))?, 2);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_io_mut<R>(
        &mut self,
        interest: Interest,
        f: impl FnOnce(&mut T) -> io::Result<R>,
    ) -> io::Result<R> {
        self.check_interest(interest)?;
        f(&mut self.inner)
    }

    /// `InvalidInput` if this `AsyncFd` was not made for `interest`.
    fn check_interest(&self, interest: Interest) -> io::Result<()> {
        let needed = interest.remove(Interest::ERROR);
        if let Some(needed) = needed.filter(|&n| !self.interest.contains(n)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "this AsyncFd watches for {:?} only (see AsyncFd::with_interest); \
                     it cannot wait for {needed:?}",
                    self.interest
                ),
            ));
        }
        Ok(())
    }

    /// Waits for `interest` (refused with `InvalidInput` if this
    /// `AsyncFd` was not made for it).
    async fn wait(&self, interest: Interest) -> io::Result<Ready> {
        self.check_interest(interest)?;
        readiness::wait(
            &self.driver,
            self.reg.as_ref(),
            self.inner.as_raw_fd(),
            interest,
        )
        .await
    }

    /// Waits until the descriptor is ready for any of `interest` (or has
    /// an error or a hang-up, which the kernel reports to every waiter);
    /// the guard's [`ready`](AsyncFdReadyGuard::ready) says what it
    /// reported. Dropping the future before it completes is fine: nothing
    /// is consumed.
    ///
    /// # Errors
    /// `InvalidInput` if `interest` names something this `AsyncFd` was not
    /// made for (see [`with_interest`](Self::with_interest)); the runtime
    /// shut down, or the backend could not wait.
    ///
    /// # Example
    /// ```
    /// use std::io::Write;
    /// use fairlane::io::{unix::AsyncFd, Interest};
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, mut b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let fd = AsyncFd::new(a)?;
    /// b.write_all(b"x")?;
    /// let guard = fd.ready(Interest::READABLE | Interest::WRITABLE).await?;
    /// assert!(guard.ready().is_readable() && guard.ready().is_writable());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        let ready = self.wait(interest).await?;
        Ok(AsyncFdReadyGuard {
            async_fd: self,
            ready,
        })
    }

    /// As [`ready`](Self::ready), with a guard whose
    /// [`try_io`](AsyncFdReadyMutGuard::try_io) gets `&mut AsyncFd` (as
    /// tokio's `ready_mut`).
    ///
    /// # Errors
    /// As [`ready`](Self::ready).
    ///
    /// # Example
    /// ```
    /// use std::io::Write;
    /// use fairlane::io::{unix::AsyncFd, Interest};
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let mut fd = AsyncFd::new(a)?;
    /// let mut guard = fd.ready_mut(Interest::WRITABLE).await?;
    /// assert!(guard.ready().is_writable());
    /// assert_eq!(guard.try_io(|inner| inner.get_mut().write(b"x")).expect("writable")?, 1);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn ready_mut(
        &mut self,
        interest: Interest,
    ) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        let ready = self.wait(interest).await?;
        Ok(AsyncFdReadyMutGuard {
            async_fd: self,
            ready,
        })
    }

    /// Waits until the descriptor is readable (data, the end of the input,
    /// an error or a hang-up is there): `ready(Interest::READABLE)`.
    /// Dropping the future before it completes is fine: nothing is
    /// consumed.
    ///
    /// # Errors
    /// As [`ready`](Self::ready): `InvalidInput` for an `AsyncFd` made
    /// without [`Interest::READABLE`]; the runtime shut down, or the backend
    /// could not wait.
    ///
    /// # Example
    /// See [`AsyncFd`].
    /// ```
    /// async fn f(fd: &fairlane::io::unix::AsyncFd<std::fs::File>) -> std::io::Result<()> {
    ///     let mut guard = fd.readable().await?;
    ///     guard.clear_ready();
    ///     Ok(())
    /// }
    /// ```
    pub async fn readable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.ready(Interest::READABLE).await
    }

    /// Waits until the descriptor is writable (or has an error or a
    /// hang-up). Dropping the future before it completes is fine.
    ///
    /// # Errors
    /// As [`readable`](Self::readable).
    ///
    /// # Example
    /// ```
    /// use std::io::Write;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let fd = fairlane::io::unix::AsyncFd::new(a)?;
    /// let mut guard = fd.writable().await?;
    /// let n = guard.try_io(|inner| inner.get_ref().write(b"x")).expect("writable")?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn writable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.ready(Interest::WRITABLE).await
    }

    /// As [`readable`](Self::readable), with a guard whose
    /// [`try_io`](AsyncFdReadyMutGuard::try_io) gets `&mut AsyncFd`, for
    /// types whose I/O needs `&mut` (as tokio's `readable_mut`).
    ///
    /// # Example
    /// ```
    /// use std::io::{Read, Write};
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, mut b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let mut fd = fairlane::io::unix::AsyncFd::new(a)?;
    /// b.write_all(b"x")?;
    /// let mut buf = [0u8; 4];
    /// let n = loop {
    ///     let mut guard = fd.readable_mut().await?;
    ///     if let Ok(r) = guard.try_io(|inner| inner.get_mut().read(&mut buf)) {
    ///         break r?;
    ///     }
    /// };
    /// assert_eq!(n, 1);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn readable_mut(&mut self) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        self.ready_mut(Interest::READABLE).await
    }

    /// As [`writable`](Self::writable), with a guard that gets
    /// `&mut AsyncFd` (as tokio's `writable_mut`).
    ///
    /// # Example
    /// ```
    /// use std::io::Write;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let mut fd = fairlane::io::unix::AsyncFd::new(a)?;
    /// let mut guard = fd.writable_mut().await?;
    /// assert_eq!(guard.try_io(|inner| inner.get_mut().write(b"x")).expect("writable")?, 1);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn writable_mut(&mut self) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        self.ready_mut(Interest::WRITABLE).await
    }
}

/// The poll-based waits: [`AsyncFd::poll_read_ready`] and the others.
impl<T: AsRawFd> AsyncFd<T> {
    /// The poll-based wait for `dir`'s interest; `kept` is this
    /// direction's kept `POLL_ADD` (io_uring).
    fn poll_dir(
        &self,
        kept: &mut readiness::KeptPoll,
        dir: Direction,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Ready>> {
        let interest = match dir {
            Direction::Read => Interest::READABLE,
            Direction::Write => Interest::WRITABLE,
        };
        self.check_interest(interest)?;
        readiness::poll_wait(
            &self.driver,
            self.reg.as_ref(),
            kept,
            self.inner.as_raw_fd(),
            interest,
            cx,
        )
    }

    /// Polls for read readiness, as tokio's `poll_read_ready`: `Ready`
    /// with a guard once the descriptor is readable (data, the end of the
    /// input, an error or a hang-up), else `Pending` with `cx`'s waker
    /// kept to be woken when it may be. For `poll_read` in an
    /// implementation of `AsyncRead`: try the I/O through the guard's
    /// [`try_io`](AsyncFdReadyGuard::try_io) and poll again when it would
    /// block.
    ///
    /// Only the task that polled last is woken (as with tokio): several
    /// tasks waiting at once use [`readable`](Self::readable). Between
    /// polls the wait stays armed (with io_uring a `POLL_ADD` kept in the
    /// `AsyncFd`, in the fallback backend the waker at the poller's
    /// registration) until readiness arrives or the `AsyncFd` is dropped,
    /// which cancels it; a caller that stops polling leaks nothing. An
    /// armed wait is I/O in flight for the paused test clock, which then
    /// does not move on its own (see `time::pause`). As with every wait,
    /// readiness is not cached: it is what the descriptor reported, and
    /// may be gone by the time the I/O runs (`try_io` then clears it).
    ///
    /// # Errors
    /// `InvalidInput` for an `AsyncFd` made without
    /// [`Interest::READABLE`]; the runtime shut down, or the backend could
    /// not wait.
    ///
    /// # Example
    /// ```
    /// use std::io::Read;
    /// use std::pin::Pin;
    /// use std::task::{Context, Poll};
    /// use fairlane::io::unix::AsyncFd;
    ///
    /// /// A read end of a pipe as a `futures_io::AsyncRead`.
    /// struct Reader(AsyncFd<std::fs::File>);
    ///
    /// impl futures_io::AsyncRead for Reader {
    ///     fn poll_read(
    ///         self: Pin<&mut Self>,
    ///         cx: &mut Context<'_>,
    ///         buf: &mut [u8],
    ///     ) -> Poll<std::io::Result<usize>> {
    ///         loop {
    ///             let mut guard = std::task::ready!(self.0.poll_read_ready(cx))?;
    ///             match guard.try_io(|fd| fd.get_ref().read(buf)) {
    ///                 Ok(result) => return Poll::Ready(result),
    ///                 Err(_would_block) => continue,
    ///             }
    ///         }
    ///     }
    /// }
    /// ```
    pub fn poll_read_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let ready = std::task::ready!(self.poll_dir(&mut kept[0], Direction::Read, cx))?;
        Poll::Ready(Ok(AsyncFdReadyGuard {
            async_fd: self,
            ready,
        }))
    }

    /// As [`poll_read_ready`](Self::poll_read_ready), with a guard whose
    /// [`try_io`](AsyncFdReadyMutGuard::try_io) gets `&mut AsyncFd` (as
    /// tokio's `poll_read_ready_mut`).
    ///
    /// # Errors
    /// As [`poll_read_ready`](Self::poll_read_ready).
    ///
    /// # Example
    /// ```
    /// use std::io::Read;
    /// use std::task::{Context, Poll};
    /// use fairlane::io::unix::AsyncFd;
    ///
    /// fn poll_read(
    ///     fd: &mut AsyncFd<std::fs::File>,
    ///     cx: &mut Context<'_>,
    ///     buf: &mut [u8],
    /// ) -> Poll<std::io::Result<usize>> {
    ///     loop {
    ///         let mut guard = std::task::ready!(fd.poll_read_ready_mut(cx))?;
    ///         if let Ok(result) = guard.try_io(|fd| fd.get_mut().read(buf)) {
    ///             return Poll::Ready(result);
    ///         }
    ///     }
    /// }
    /// ```
    pub fn poll_read_ready_mut<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyMutGuard<'a, T>>> {
        let mut kept = std::mem::take(self.kept.get_mut().unwrap_or_else(|e| e.into_inner()));
        let polled = self.poll_dir(&mut kept[0], Direction::Read, cx);
        *self.kept.get_mut().unwrap_or_else(|e| e.into_inner()) = kept;
        let ready = std::task::ready!(polled)?;
        Poll::Ready(Ok(AsyncFdReadyMutGuard {
            async_fd: self,
            ready,
        }))
    }

    /// Polls for write readiness, as tokio's `poll_write_ready`: as
    /// [`poll_read_ready`](Self::poll_read_ready), for writing (room to
    /// write, an error or a hang-up).
    ///
    /// # Errors
    /// `InvalidInput` for an `AsyncFd` made without
    /// [`Interest::WRITABLE`]; the runtime shut down, or the backend could
    /// not wait.
    ///
    /// # Example
    /// ```
    /// use std::io::Write;
    /// use std::task::{Context, Poll};
    /// use fairlane::io::unix::AsyncFd;
    ///
    /// fn poll_write(
    ///     fd: &AsyncFd<std::fs::File>,
    ///     cx: &mut Context<'_>,
    ///     buf: &[u8],
    /// ) -> Poll<std::io::Result<usize>> {
    ///     loop {
    ///         let mut guard = std::task::ready!(fd.poll_write_ready(cx))?;
    ///         if let Ok(result) = guard.try_io(|fd| fd.get_ref().write(buf)) {
    ///             return Poll::Ready(result);
    ///         }
    ///     }
    /// }
    /// ```
    pub fn poll_write_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let ready = std::task::ready!(self.poll_dir(&mut kept[1], Direction::Write, cx))?;
        Poll::Ready(Ok(AsyncFdReadyGuard {
            async_fd: self,
            ready,
        }))
    }

    /// As [`poll_write_ready`](Self::poll_write_ready), with a guard whose
    /// [`try_io`](AsyncFdReadyMutGuard::try_io) gets `&mut AsyncFd` (as
    /// tokio's `poll_write_ready_mut`).
    ///
    /// # Errors
    /// As [`poll_write_ready`](Self::poll_write_ready).
    ///
    /// # Example
    /// ```
    /// use std::io::Write;
    /// use std::task::{Context, Poll};
    /// use fairlane::io::unix::AsyncFd;
    ///
    /// fn poll_write(
    ///     fd: &mut AsyncFd<std::fs::File>,
    ///     cx: &mut Context<'_>,
    ///     buf: &[u8],
    /// ) -> Poll<std::io::Result<usize>> {
    ///     loop {
    ///         let mut guard = std::task::ready!(fd.poll_write_ready_mut(cx))?;
    ///         if let Ok(result) = guard.try_io(|fd| fd.get_mut().write(buf)) {
    ///             return Poll::Ready(result);
    ///         }
    ///     }
    /// }
    /// ```
    pub fn poll_write_ready_mut<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyMutGuard<'a, T>>> {
        let mut kept = std::mem::take(self.kept.get_mut().unwrap_or_else(|e| e.into_inner()));
        let polled = self.poll_dir(&mut kept[1], Direction::Write, cx);
        *self.kept.get_mut().unwrap_or_else(|e| e.into_inner()) = kept;
        let ready = std::task::ready!(polled)?;
        Poll::Ready(Ok(AsyncFdReadyMutGuard {
            async_fd: self,
            ready,
        }))
    }
}

impl<T: AsRawFd> AsRawFd for AsyncFd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFd")
            .field("inner", &self.inner)
            .finish()
    }
}

/// The readiness that [`AsyncFd::readable`] or [`AsyncFd::writable`]
/// reported, as tokio's guard: do the I/O with [`try_io`](Self::try_io),
/// which clears it when the I/O would block.
///
/// # Example
/// See [`AsyncFd`].
/// ```
/// fn done(guard: &mut fairlane::io::unix::AsyncFdReadyGuard<'_, std::fs::File>) {
///     guard.clear_ready();
/// }
/// ```
pub struct AsyncFdReadyGuard<'a, T: AsRawFd> {
    async_fd: &'a AsyncFd<T>,
    ready: Ready,
}

impl<'a, T: AsRawFd> AsyncFdReadyGuard<'a, T> {
    readiness_methods!(AsyncFdReadyGuard, readable, ready);

    /// Runs the I/O `f`: its result, or, if it returned `WouldBlock`,
    /// [`TryIoError`] with the readiness cleared (wait again).
    ///
    /// # Example
    /// See [`AsyncFd`].
    /// ```
    /// use std::io::Read;
    /// async fn read(
    ///     fd: &fairlane::io::unix::AsyncFd<std::os::unix::net::UnixStream>,
    ///     buf: &mut [u8],
    /// ) -> std::io::Result<usize> {
    ///     loop {
    ///         let mut guard = fd.readable().await?;
    ///         if let Ok(result) = guard.try_io(|inner| inner.get_ref().read(buf)) {
    ///             return result;
    ///         }
    ///     }
    /// }
    /// ```
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&'a AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        settle(&mut self.ready, f(self.async_fd))
    }

    /// The [`AsyncFd`] this guard is for.
    ///
    /// # Example
    /// ```
    /// use std::os::fd::AsRawFd;
    /// fn fd(guard: &fairlane::io::unix::AsyncFdReadyGuard<'_, std::fs::File>) -> i32 {
    ///     guard.get_ref().as_raw_fd()
    /// }
    /// ```
    pub fn get_ref(&self) -> &'a AsyncFd<T> {
        self.async_fd
    }

    /// The wrapped value of the [`AsyncFd`].
    ///
    /// # Example
    /// ```
    /// fn file<'a>(guard: &fairlane::io::unix::AsyncFdReadyGuard<'a, std::fs::File>) -> &'a std::fs::File {
    ///     guard.get_inner()
    /// }
    /// ```
    pub fn get_inner(&self) -> &'a T {
        self.async_fd.get_ref()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyGuard")
            .field("async_fd", self.async_fd)
            .field("ready", &self.ready)
            .finish()
    }
}

/// The readiness that [`AsyncFd::readable_mut`] or
/// [`AsyncFd::writable_mut`] reported; as [`AsyncFdReadyGuard`], with
/// `&mut` access.
///
/// # Example
/// See [`AsyncFd::readable_mut`].
/// ```
/// fn done(guard: &mut fairlane::io::unix::AsyncFdReadyMutGuard<'_, std::fs::File>) {
///     guard.clear_ready();
/// }
/// ```
pub struct AsyncFdReadyMutGuard<'a, T: AsRawFd> {
    async_fd: &'a mut AsyncFd<T>,
    ready: Ready,
}

impl<T: AsRawFd> AsyncFdReadyMutGuard<'_, T> {
    readiness_methods!(AsyncFdReadyMutGuard, readable_mut, ready_mut);

    /// Runs the I/O `f` on `&mut AsyncFd`: its result, or, if it returned
    /// `WouldBlock`, [`TryIoError`] with the readiness cleared.
    ///
    /// # Example
    /// See [`AsyncFd::readable_mut`].
    /// ```
    /// use std::io::Write;
    /// fn f(guard: &mut fairlane::io::unix::AsyncFdReadyMutGuard<'_, std::fs::File>) -> bool {
    ///     guard.try_io(|inner| inner.get_mut().write(b"x")).is_ok()
    /// }
    /// ```
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&mut AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        settle(&mut self.ready, f(self.async_fd))
    }

    /// The [`AsyncFd`] this guard is for.
    ///
    /// # Example
    /// ```
    /// use std::os::fd::AsRawFd;
    /// fn fd(guard: &fairlane::io::unix::AsyncFdReadyMutGuard<'_, std::fs::File>) -> i32 {
    ///     guard.get_ref().as_raw_fd()
    /// }
    /// ```
    pub fn get_ref(&self) -> &AsyncFd<T> {
        self.async_fd
    }

    /// The [`AsyncFd`] this guard is for, mutably.
    ///
    /// # Example
    /// ```
    /// fn file<'g>(
    ///     guard: &'g mut fairlane::io::unix::AsyncFdReadyMutGuard<'_, std::fs::File>,
    /// ) -> &'g mut std::fs::File {
    ///     guard.get_mut().get_mut()
    /// }
    /// ```
    pub fn get_mut(&mut self) -> &mut AsyncFd<T> {
        self.async_fd
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyMutGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyMutGuard")
            .field("async_fd", &*self.async_fd)
            .field("ready", &self.ready)
            .finish()
    }
}

/// A guard's `try_io` outcome: `WouldBlock` clears the readiness and
/// becomes [`TryIoError`].
fn settle<R>(ready: &mut Ready, result: io::Result<R>) -> Result<io::Result<R>, TryIoError> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            *ready = Ready::EMPTY;
            Err(TryIoError(()))
        }
        result => Ok(result),
    }
}

/// What [`AsyncFdReadyGuard::try_io`] returns when the I/O would block.
///
/// # Example
/// ```
/// fn would_block(r: &Result<std::io::Result<usize>, fairlane::io::unix::TryIoError>) -> bool {
///     r.is_err()
/// }
/// ```
#[derive(Debug)]
pub struct TryIoError(());
