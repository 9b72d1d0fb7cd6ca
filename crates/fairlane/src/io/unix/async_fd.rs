//! [`AsyncFd`]: a descriptor whose readiness the runtime reports.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::io::current_driver;
use crate::io::driver::Driver;
use crate::io::reactor::{Direction, Registration};
use crate::io::{Interest, IoBackend, Ready};
use crate::net::socket::cvt;

use super::guard::{AsyncFdReadyGuard, AsyncFdReadyMutGuard};
use super::readiness;
use super::AsyncFdRegisterError;

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
/// Readiness is kept, as tokio keeps it: what a wait reported stays until
/// it is cleared ([`clear_ready`](AsyncFdReadyGuard::clear_ready), or a
/// `try_io` that returned `WouldBlock`), so a second wait returns at once
/// with it, even if the I/O in between drained the descriptor; the I/O
/// then finds `WouldBlock`, which clears it, and the next wait asks the
/// descriptor again.
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
    /// The readiness waits reported and nothing has cleared yet (`Ready`'s
    /// bits). `Relaxed`: it is a hint for the next wait, never the only
    /// record of an event: a wait that finds nothing here asks the
    /// descriptor, so a bit cleared or set a little late costs at most
    /// one `WouldBlock` or one system call, never a missed readiness.
    cached: AtomicU8,
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
        AsyncFd::try_with_interest(inner, interest).map_err(io::Error::from)
    }

    /// As [`new`](Self::new), but a refused `inner` comes back in the
    /// error ([`AsyncFdRegisterError::into_parts`]) instead of being
    /// dropped, as tokio's `try_new`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// # Example
    /// See [`AsyncFdRegisterError`].
    /// ```
    /// # let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let fd = rt.block_on(async { fairlane::io::unix::AsyncFd::try_new(a) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_new(inner: T) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        AsyncFd::try_with_interest(inner, Interest::READABLE | Interest::WRITABLE)
    }

    /// As [`with_interest`](Self::with_interest), but a refused `inner`
    /// comes back in the error, as tokio's `try_with_interest`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::{unix::AsyncFd, Interest};
    /// # let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// let fd = rt.block_on(async { AsyncFd::try_with_interest(a, Interest::READABLE) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_with_interest(
        inner: T,
        interest: Interest,
    ) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        match AsyncFd::watch(&inner, interest) {
            Ok((driver, reg)) => Ok(AsyncFd {
                kept: Mutex::new([None, None]),
                cached: AtomicU8::new(0),
                reg,
                driver,
                interest,
                inner,
            }),
            Err(cause) => Err(AsyncFdRegisterError::new(inner, cause)),
        }
    }

    /// As [`try_new`](Self::try_new), under tokio's name for it.
    ///
    /// # Safety
    /// The descriptor `inner.as_raw_fd()` returns must stay open, and the
    /// same descriptor, for as long as the `AsyncFd` holds `inner` (until
    /// it is dropped, [`into_inner`](Self::into_inner) is called, or it is
    /// forgotten); every call of `as_raw_fd` on `inner` while it is held
    /// must return that descriptor. This is tokio's contract:
    /// the runtime waits on the number, and a number that is closed and
    /// reused would make it report another file's readiness.
    ///
    /// # Errors
    /// As [`new`](Self::new); the error hands `inner` back.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::unix::AsyncFd;
    /// # let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// // SAFETY: `a` owns its descriptor and keeps it until it is dropped.
    /// let fd = unsafe { AsyncFd::register(a) }?;
    /// fd.writable().await?.retain_ready();
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub unsafe fn register(inner: T) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        AsyncFd::try_new(inner)
    }

    /// As [`try_with_interest`](Self::try_with_interest), under tokio's
    /// name for it.
    ///
    /// # Safety
    /// As [`register`](Self::register).
    ///
    /// # Errors
    /// As [`new`](Self::new); the error hands `inner` back.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::{unix::AsyncFd, Interest};
    /// # let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// a.set_nonblocking(true)?;
    /// // SAFETY: `a` owns its descriptor and keeps it until it is dropped.
    /// let fd = unsafe { AsyncFd::register_with_interest(a, Interest::WRITABLE) }?;
    /// assert!(fd.writable().await?.ready().is_writable());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub unsafe fn register_with_interest(
        inner: T,
        interest: Interest,
    ) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        AsyncFd::try_with_interest(inner, interest)
    }

    /// Checks `inner`'s descriptor and registers it with the current
    /// runtime's driver (the fallback backend's poller, for the directions
    /// `interest` needs).
    fn watch(inner: &T, interest: Interest) -> io::Result<(Arc<Driver>, Option<Registration>)> {
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
        Ok((driver, reg))
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

    /// Runs the I/O `f` on the wrapped value without waiting, if the
    /// descriptor is ready for `interest`, as tokio's: the kept readiness
    /// says so, or, where none is kept, the descriptor itself (a `poll`
    /// that does not wait). Not ready: `WouldBlock` without running `f`.
    /// An `f` that returns `WouldBlock` clears the kept readiness for
    /// `interest`.
    ///
    /// # Errors
    /// `InvalidInput` if `interest` names something this `AsyncFd` was not
    /// made for; `WouldBlock` if it is not ready; else `f`'s.
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
        self.ready_now(interest)?;
        let result = f(&self.inner);
        self.clear_on_would_block(interest, &result);
        result
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
        self.ready_now(interest)?;
        let result = f(&mut self.inner);
        self.clear_on_would_block(interest, &result);
        result
    }

    /// The kept readiness for `interest`, refreshed from the descriptor
    /// (a `poll` that does not wait) where none is kept; `WouldBlock` if
    /// it is not ready.
    fn ready_now(&self, interest: Interest) -> io::Result<Ready> {
        let kept = self.kept_for(interest);
        if !kept.is_empty() {
            return Ok(kept);
        }
        let mut pfd = libc::pollfd {
            fd: self.inner.as_raw_fd(),
            events: interest.poll_events(),
            revents: 0,
        };
        // SAFETY: one live `pollfd` for one descriptor; a zero timeout.
        cvt(unsafe { libc::poll(&mut pfd, 1, 0) })?;
        self.keep(Ready::from_revents(pfd.revents as u16 as u32));
        let now = self.kept_for(interest);
        if now.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(now)
    }

    fn clear_on_would_block<R>(&self, interest: Interest, result: &io::Result<R>) {
        if matches!(result, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.clear_kept(Ready::for_interest(interest));
        }
    }

    /// The kept readiness a wait for `interest` would report.
    fn kept_for(&self, interest: Interest) -> Ready {
        Ready::from_bits(self.cached.load(Ordering::Relaxed) & Ready::for_interest(interest).bits())
    }

    /// Keeps `ready` (what a wait or a `poll` reported).
    fn keep(&self, ready: Ready) {
        self.cached.fetch_or(ready.bits(), Ordering::Relaxed);
    }

    /// Forgets the kept readiness of the kinds in `ready` (a guard
    /// cleared it, or the I/O would block).
    pub(super) fn clear_kept(&self, ready: Ready) {
        self.cached.fetch_and(!ready.bits(), Ordering::Relaxed);
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
    /// Fails once the runtime has shut down, as every wait then does.
    async fn wait(&self, interest: Interest) -> io::Result<Ready> {
        self.check_interest(interest)?;
        self.driver.check_live()?;
        let kept = self.kept_for(interest);
        if !kept.is_empty() {
            return Ok(kept);
        }
        let ready = readiness::wait(
            &self.driver,
            self.reg.as_ref(),
            self.inner.as_raw_fd(),
            interest,
        )
        .await?;
        self.keep(ready);
        Ok(ready.narrowed_to(interest))
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
        self.driver.check_live()?;
        let held = self.kept_for(interest);
        if !held.is_empty() {
            return Poll::Ready(Ok(held));
        }
        let ready = std::task::ready!(readiness::poll_wait(
            &self.driver,
            self.reg.as_ref(),
            kept,
            self.inner.as_raw_fd(),
            interest,
            cx,
        ))?;
        self.keep(ready);
        Poll::Ready(Ok(ready.narrowed_to(interest)))
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
    /// readiness is kept until cleared (see [`AsyncFd`]): it is what the
    /// descriptor reported, and may be gone by the time the I/O runs
    /// (`try_io` then clears it).
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
