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
use std::sync::Arc;

use crate::io::driver::Driver;
use crate::io::reactor::{Direction, Registration};
use crate::io::IoBackend;
use crate::net::socket::{current_driver, cvt};

/// Waiting for readiness, shared by [`AsyncFd`] and the `net` sockets.
pub(crate) mod readiness {
    use std::io;
    use std::os::fd::RawFd;

    use io_uring::{opcode, types};

    use crate::io::driver::Driver;
    use crate::io::reactor::{Direction, Registration};
    use crate::io::uring::Op;
    use crate::net::socket::cvt;

    /// io_uring: waits with a one-shot `POLL_ADD` until one of `events`
    /// (or an error or hang-up) is set on `fd`.
    pub(crate) async fn poll_add(
        driver: &Driver,
        fd: RawFd,
        events: libc::c_short,
    ) -> io::Result<()> {
        let op = Op::submit(driver, (), false, |_| {
            opcode::PollAdd::new(types::Fd(fd), events as u16 as u32).build()
        })
        .map_err(|(e, _)| e)?;
        op.await.0.map(drop)
    }

    /// Waits until `fd` is ready for `dir`, without doing any I/O: with
    /// io_uring (`reg` is `None`) by a one-shot `POLL_ADD`, in the fallback
    /// backend through `fd`'s poller registration `reg`. Either way the
    /// descriptor itself is asked, so readiness that is already there is
    /// seen at once and none is cached between calls.
    pub(crate) async fn wait(
        driver: &Driver,
        reg: Option<&Registration>,
        fd: RawFd,
        dir: Direction,
    ) -> io::Result<()> {
        let events = match dir {
            Direction::Read => libc::POLLIN,
            Direction::Write => libc::POLLOUT,
        };
        match reg {
            None => {
                driver.check_live()?;
                poll_add(driver, fd, events).await
            }
            // Edge-triggered: each attempt asks the descriptor itself (`poll`
            // with no wait), and `io` waits only for an edge after it.
            Some(reg) => reg.io(dir, || ready_now(fd, events)).await,
        }
    }

    /// `Ok` if one of `events` (or an error or hang-up) is set on `fd` now,
    /// else `WouldBlock` (`poll` with no wait).
    fn ready_now(fd: RawFd, events: libc::c_short) -> io::Result<()> {
        let mut p = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one live `pollfd`, no wait.
        let n = cvt(unsafe { libc::poll(&mut p, 1, 0) })?;
        if n > 0 && p.revents != 0 {
            Ok(())
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
}

/// The readiness methods both guards have: `clear_ready`, `retain_ready`,
/// `is_ready` (examples on `$guard` from `AsyncFd::$wait`).
macro_rules! readiness_methods {
    ($guard:ident, $wait:ident) => {
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
            self.ready = false;
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
            self.ready
        }
    };
}

/// A non-blocking descriptor `T` whose readiness the runtime reports, as
/// tokio's `AsyncFd`: wait with [`readable`](Self::readable) or
/// [`writable`](Self::writable), then do the I/O yourself through the
/// guard's [`try_io`](AsyncFdReadyGuard::try_io), in a loop that goes back
/// to waiting on `WouldBlock`.
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
    /// Declared before `inner`: it must be dropped (deleted from the
    /// poller) before the descriptor closes. `None` with io_uring.
    reg: Option<Registration>,
    driver: Arc<Driver>,
    inner: T,
}

impl<T: AsRawFd> AsyncFd<T> {
    /// Takes `inner`, whose descriptor must be non-blocking, and watches it
    /// with the current runtime's I/O backend.
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
            Some(Registration::new(&driver, fd)?)
        } else {
            None
        };
        Ok(AsyncFd { reg, driver, inner })
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
        let AsyncFd { reg, driver, inner } = self;
        // Deleted from the poller before the descriptor can be closed.
        drop(reg);
        drop(driver);
        inner
    }

    async fn ready(&self, dir: Direction) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        readiness::wait(&self.driver, self.reg.as_ref(), self.inner.as_raw_fd(), dir).await?;
        Ok(AsyncFdReadyGuard {
            async_fd: self,
            ready: true,
        })
    }

    /// Waits until the descriptor is readable (data, the end of the input,
    /// an error or a hang-up is there). Dropping the future before it
    /// completes is fine: nothing is consumed.
    ///
    /// # Errors
    /// The runtime shut down, or the backend could not wait.
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
        self.ready(Direction::Read).await
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
        self.ready(Direction::Write).await
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
        self.ready(Direction::Read).await?;
        Ok(AsyncFdReadyMutGuard {
            async_fd: self,
            ready: true,
        })
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
        self.ready(Direction::Write).await?;
        Ok(AsyncFdReadyMutGuard {
            async_fd: self,
            ready: true,
        })
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
    ready: bool,
}

impl<'a, T: AsRawFd> AsyncFdReadyGuard<'a, T> {
    readiness_methods!(AsyncFdReadyGuard, readable);

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
    ready: bool,
}

impl<T: AsRawFd> AsyncFdReadyMutGuard<'_, T> {
    readiness_methods!(AsyncFdReadyMutGuard, readable_mut);

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
fn settle<R>(ready: &mut bool, result: io::Result<R>) -> Result<io::Result<R>, TryIoError> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            *ready = false;
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
