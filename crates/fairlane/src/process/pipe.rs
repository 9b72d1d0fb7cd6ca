//! The parent's ends of a child's standard streams: non-blocking pipes
//! whose reads and writes wait for readiness the way the sockets' do
//! ([`PollFd`]).

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::io::driver::Driver;
use crate::io::reactor::Direction;
use crate::io::unix::readiness::PollFd;
use crate::net::socket::set_nonblocking;

/// Converts a `-1`-on-error `read`/`write` result.
fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// One end of a pipe, non-blocking, watched by the runtime.
pub(crate) struct Pipe {
    fd: PollFd,
}

impl Pipe {
    pub(crate) fn new(driver: Arc<Driver>, fd: OwnedFd) -> io::Result<Pipe> {
        Ok(Pipe {
            fd: PollFd::with_driver(driver, fd)?,
        })
    }

    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if out.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.fd.poll_io(cx, Direction::Read, |fd| {
            // SAFETY: `out` is a live, writable slice of `out.len()` bytes.
            cvt_size(unsafe { libc::read(fd, out.as_mut_ptr().cast(), out.len()) })
        })
    }

    /// Reads into `buf`'s spare capacity until the end of the input.
    pub(crate) fn poll_read_to_end(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<()>> {
        loop {
            buf.reserve(16 * 1024);
            let spare = buf.spare_capacity_mut();
            let (ptr, len) = (spare.as_mut_ptr(), spare.len());
            let n = std::task::ready!(self.fd.poll_io(cx, Direction::Read, |fd| {
                // SAFETY: `ptr` points to `len` writable (uninitialised)
                // bytes of `buf`'s spare capacity, alive across the call.
                cvt_size(unsafe { libc::read(fd, ptr.cast(), len) })
            }))?;
            if n == 0 {
                return Poll::Ready(Ok(()));
            }
            // SAFETY: the kernel wrote `n <= len` bytes into the spare
            // capacity right after the initialised ones.
            unsafe { buf.set_len(buf.len() + n) };
        }
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.fd.poll_io(cx, Direction::Write, |fd| {
            // SAFETY: `data` is a live slice of `data.len()` bytes.
            cvt_size(unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) })
        })
    }

    /// The descriptor, back in blocking mode (as a child's standard stream
    /// expects it).
    fn into_owned_fd(self) -> io::Result<OwnedFd> {
        let fd = self.fd.into_fd();
        set_nonblocking(fd.as_raw_fd(), false)?;
        Ok(fd)
    }
}

/// The adopted end of one of a `std::process` child's pipes.
fn from_std(fd: OwnedFd) -> io::Result<Pipe> {
    Pipe::new(crate::io::current_driver()?, fd)
}

/// The common parts of the three pipe types.
macro_rules! pipe_type {
    ($t:ident, $std:ty, $what:literal, $example:literal) => {
        impl $t {
            pub(crate) fn from_pipe(pipe: Pipe) -> $t {
                $t { pipe }
            }

            #[doc = concat!("Adopts std's ", $what, " handle (a pipe from a child spawned by")]
            /// `std::process::Command`) for the current runtime, as tokio's
            /// `from_std`: it is made non-blocking.
            ///
            /// # Errors
            /// Outside a runtime, or the descriptor cannot be watched.
            ///
            /// # Example
            /// ```
            /// # use std::process::Stdio;
            /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
            /// # rt.block_on(async {
            /// let mut child = std::process::Command::new("true")
            #[doc = $example]
            ///     .spawn()?;
            #[doc = concat!("let pipe = child.", $what, ".take().expect(\"piped\");")]
            #[doc = concat!("let pipe = fairlane::process::", stringify!($t), "::from_std(pipe)?;")]
            /// # drop(pipe); child.wait()?;
            /// # Ok::<(), std::io::Error>(()) })?;
            /// # Ok::<(), std::io::Error>(())
            /// ```
            pub fn from_std(inner: $std) -> io::Result<$t> {
                Ok($t {
                    pipe: from_std(OwnedFd::from(inner))?,
                })
            }

            /// Gives up the descriptor, set back to blocking mode, as
            /// tokio's `into_owned_fd` (to hand it to another process, see
            /// also `TryFrom<Self> for Stdio`).
            ///
            /// # Errors
            /// Setting blocking mode failed (the descriptor is closed).
            ///
            /// # Example
            /// ```
            /// use fairlane::process::Command;
            /// use std::process::Stdio;
            /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
            /// # rt.block_on(async {
            /// let mut child = Command::new("true")
            #[doc = $example]
            ///     .spawn()?;
            #[doc = concat!("let fd: std::os::fd::OwnedFd = child.", $what, ".take().expect(\"piped\").into_owned_fd()?;")]
            /// # drop(fd); child.wait().await?;
            /// # Ok::<(), std::io::Error>(()) })?;
            /// # Ok::<(), std::io::Error>(())
            /// ```
            pub fn into_owned_fd(self) -> io::Result<OwnedFd> {
                self.pipe.into_owned_fd()
            }
        }

        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.pipe.fd.raw()
            }
        }

        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                // SAFETY: the descriptor is open while `self` lives, and
                // the borrow cannot outlive `self`.
                unsafe { BorrowedFd::borrow_raw(self.pipe.fd.raw()) }
            }
        }

        /// The descriptor as another child's standard stream (blocking
        /// again), as tokio's `TryInto<Stdio>`: pipes one process into the
        /// next.
        impl TryFrom<$t> for Stdio {
            type Error = io::Error;

            fn try_from(pipe: $t) -> io::Result<Stdio> {
                Ok(Stdio::from(pipe.into_owned_fd()?))
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("fd", &self.pipe.fd.raw())
                    .finish()
            }
        }
    };
}

/// The writing end of a child's standard input, as tokio's `ChildStdin`:
/// implements `futures_io::AsyncWrite` (and tokio's `AsyncWrite` with the
/// `tokio-io` feature). Dropping it closes the pipe, and the child reads
/// the end of its input; `close`/`shutdown` only flush (there is nothing
/// buffered), as tokio's, so drop it (or let [`Child::wait`] drop it) to
/// close. Writing after the child closed its input fails with
/// `BrokenPipe` (Rust programs ignore `SIGPIPE`; a program that restored
/// it is killed by it instead, as with any pipe).
///
/// [`Child::wait`]: super::Child::wait
///
/// # Example
/// ```
/// use futures_lite::io::AsyncWriteExt;
/// use std::process::Stdio;
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let mut child = fairlane::process::Command::new("cat")
///     .stdin(Stdio::piped())
///     .stdout(Stdio::null())
///     .spawn()?;
/// let mut stdin = child.stdin.take().expect("piped");
/// stdin.write_all(b"to cat").await?;
/// drop(stdin);
/// assert!(child.wait().await?.success());
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ChildStdin {
    pipe: Pipe,
}

/// The reading end of a child's standard output, as tokio's
/// `ChildStdout`: implements `futures_io::AsyncRead` (and tokio's
/// `AsyncRead` with the `tokio-io` feature).
///
/// # Example
/// ```
/// use futures_lite::io::AsyncReadExt;
/// use std::process::Stdio;
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let mut child = fairlane::process::Command::new("echo")
///     .arg("hi")
///     .stdout(Stdio::piped())
///     .spawn()?;
/// let mut out = String::new();
/// child.stdout.take().expect("piped").read_to_string(&mut out).await?;
/// assert_eq!(out, "hi\n");
/// child.wait().await?;
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ChildStdout {
    pipe: Pipe,
}

/// The reading end of a child's standard error, as tokio's
/// `ChildStderr`; as [`ChildStdout`].
///
/// # Example
/// ```
/// use futures_lite::io::AsyncReadExt;
/// use std::process::Stdio;
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let mut child = fairlane::process::Command::new("sh")
///     .args(["-c", "echo oops >&2"])
///     .stderr(Stdio::piped())
///     .spawn()?;
/// let mut err = String::new();
/// child.stderr.take().expect("piped").read_to_string(&mut err).await?;
/// assert_eq!(err, "oops\n");
/// child.wait().await?;
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ChildStderr {
    pipe: Pipe,
}

pipe_type!(
    ChildStdin,
    std::process::ChildStdin,
    "stdin",
    "    .stdin(Stdio::piped())"
);
pipe_type!(
    ChildStdout,
    std::process::ChildStdout,
    "stdout",
    "    .stdout(Stdio::piped())"
);
pipe_type!(
    ChildStderr,
    std::process::ChildStderr,
    "stderr",
    "    .stderr(Stdio::piped())"
);

impl ChildStdout {
    pub(crate) fn into_pipe(self) -> Pipe {
        self.pipe
    }
}

impl ChildStderr {
    pub(crate) fn into_pipe(self) -> Pipe {
        self.pipe
    }
}

/// `futures_io::AsyncRead` and (`tokio-io`) tokio's `AsyncRead` for a type
/// with a `pipe: Pipe` field.
macro_rules! impl_read {
    ($t:ty) => {
        impl futures_io::AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut [u8],
            ) -> Poll<io::Result<usize>> {
                self.get_mut().pipe.poll_read(cx, buf)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let out = buf.initialize_unfilled();
                let n = std::task::ready!(self.get_mut().pipe.poll_read(cx, out))?;
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
        }
    };
}

impl_read!(ChildStdout);
impl_read!(ChildStderr);

/// One write trait for [`ChildStdin`] (futures' and tokio's share their
/// shape; `$close` is the name of their shutdown method).
macro_rules! impl_write {
    ($(#[$attr:meta])* $trait:path, $close:ident) => {
        $(#[$attr])*
        impl $trait for ChildStdin {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.get_mut().pipe.poll_write(cx, buf)
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn $close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
        }
    };
}

impl_write!(futures_io::AsyncWrite, poll_close);
impl_write!(
    #[cfg(feature = "tokio-io")]
    tokio::io::AsyncWrite,
    poll_shutdown
);
