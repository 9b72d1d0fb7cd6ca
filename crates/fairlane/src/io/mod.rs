//! The I/O engine behind [`net`](crate::net), [`fs`](crate::fs) and
//! [`time`](crate::time): owned buffers, the backend choice, and the driver
//! that hooks per-processor rings (or pollers) into the scheduler; and the
//! process's standard streams, [`stdin`], [`stdout`] and [`stderr`], as
//! tokio's (blocking reads and writes on the blocking pool).
//!
//! # Backends
//! [`IoBackend::IoUring`] gives each processor its own io_uring instance;
//! [`IoBackend::Fallback`] gives each processor an epoll poller for sockets
//! and runs file operations on the blocking pool. The backend is chosen when
//! the runtime is built: [`Builder::io_backend`](crate::Builder::io_backend)
//! if set, else the environment variable `FAIRLANE_IO_BACKEND`
//! (`io_uring` or `fallback`), else io_uring if the kernel allows it and
//! supports every opcode fairlane uses. The choice is a `tracing` event at
//! debug level, and [`Runtime::io_backend`](crate::Runtime::io_backend)
//! tells.
//!
//! # Example
//! Operations take owned buffers ([`IoBuf`], [`IoBufMut`]) and hand them back
//! with the result:
//! ```
//! let path = std::env::temp_dir().join(format!("fairlane-io-doc-{}", std::process::id()));
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! let buf = rt.block_on(async {
//!     let file = fairlane::fs::File::create(&path).await?;
//!     let (written, buf) = file.write_all_at(b"owned".to_vec(), 0).await;
//!     written.map(|()| buf)
//! })?;
//! assert_eq!(buf, b"owned");
//! assert_eq!(std::fs::read(&path)?, b"owned");
//! std::fs::remove_file(&path)?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod buf;
pub(crate) mod carry;
pub(crate) mod driver;
mod interest;
pub(crate) mod reactor;
mod sleep;
mod stdio;
pub mod unix;
pub(crate) mod uring;

/// The atomics of `sleep`, which its loom model replaces with loom's.
mod atomics {
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

use std::fmt;
use std::io;

pub(crate) use self::buf::init_slice;
pub use self::buf::{IoBuf, IoBufMut};
pub use self::interest::{Interest, Ready};
pub use self::stdio::{stderr, stdin, stdout, Stderr, Stdin, Stdout};

/// Which engine performs a runtime's I/O.
///
/// # Example
/// ```
/// use fairlane::io::IoBackend;
/// let rt = fairlane::Runtime::builder().processors(1).io_backend(IoBackend::Fallback).build()?;
/// assert_eq!(rt.io_backend(), IoBackend::Fallback);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoBackend {
    /// One io_uring instance per processor: completion-based I/O for sockets
    /// and files.
    IoUring,
    /// A readiness reactor (epoll) per processor for sockets, the blocking
    /// pool for files: works where io_uring is unavailable or blocked.
    Fallback,
}

impl fmt::Display for IoBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoBackend::IoUring => "io_uring",
            IoBackend::Fallback => "fallback",
        })
    }
}

/// The environment variable that forces a backend.
pub(crate) const ENV_VAR: &str = "FAIRLANE_IO_BACKEND";

/// Picks the backend: `forced` (the builder), else the environment
/// variable, else io_uring where it works.
pub(crate) fn select(forced: Option<IoBackend>) -> io::Result<IoBackend> {
    let requested = match forced {
        Some(b) => Some(b),
        None => match std::env::var(ENV_VAR) {
            Ok(v) => match v.trim() {
                "io_uring" | "io-uring" | "iouring" => Some(IoBackend::IoUring),
                "fallback" => Some(IoBackend::Fallback),
                "" => None,
                other => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("invalid {ENV_VAR}={other:?}: use \"io_uring\" or \"fallback\""),
                    ))
                }
            },
            Err(_) => None,
        },
    };
    let (backend, why) = match requested {
        Some(IoBackend::IoUring) => {
            uring::Ring::probe().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("the io_uring I/O backend was requested but is unavailable: {e}"),
                )
            })?;
            (IoBackend::IoUring, "requested".to_string())
        }
        Some(IoBackend::Fallback) => (IoBackend::Fallback, "requested".to_string()),
        None => match uring::Ring::probe() {
            Ok(()) => (IoBackend::IoUring, "probed".to_string()),
            Err(e) => (IoBackend::Fallback, format!("io_uring unavailable: {e}")),
        },
    };
    tracing::debug!(%backend, reason = %why, "fairlane I/O backend chosen");
    Ok(backend)
}

/// Writes every initialised byte of `buf` with `write(buf, done)`, which
/// writes some of the bytes from offset `done` and hands the buffer back:
/// again until all are written, retrying `Interrupted`; a write of zero
/// bytes is `WriteZero`.
pub(crate) async fn write_all_with<B, F, Fut>(mut buf: B, mut write: F) -> (io::Result<()>, B)
where
    B: IoBuf,
    F: FnMut(B, usize) -> Fut,
    Fut: std::future::Future<Output = (io::Result<usize>, B)>,
{
    let mut done = 0;
    while done < buf.bytes_init() {
        let (r, b) = write(buf, done).await;
        buf = b;
        match r {
            Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (Err(e), buf),
        }
    }
    (Ok(()), buf)
}

/// The driver of the runtime this thread is in: every I/O object and timer
/// finds its engine through it.
pub(crate) fn current_driver() -> io::Result<std::sync::Arc<driver::Driver>> {
    crate::runtime::context::with_current(|h| h.io_driver().clone()).ok_or_else(|| {
        io::Error::other(
            "fairlane I/O must be started inside a fairlane runtime (a task or Runtime::block_on)",
        )
    })
}

/// Submits the ring operation `build` makes from `data` (the buffers and
/// addresses it points into, owned by the operation until the kernel is done
/// with them) on the calling thread's engine and waits for its completion:
/// the kernel's count, or its error, and `data` back, also when the
/// submission itself failed. For operations whose future keeps nothing
/// when dropped (no carry) and that are done again if the kernel cancels
/// them.
pub(crate) async fn submit_and_wait<T: Send + 'static>(
    driver: &driver::Driver,
    data: T,
    build: impl FnOnce(&mut T) -> io_uring::squeue::Entry,
) -> (io::Result<usize>, T) {
    match uring::Op::submit(driver, data, false, build) {
        Ok(op) => {
            let (r, data) = op.await;
            (r.map(|n| n as usize), data)
        }
        Err((e, data)) => (Err(e), data),
    }
}

/// A pipe for the unit tests that need an operation which stays in flight
/// (a read of its empty end): (read end, write end), both close-on-exec.
#[cfg(test)]
pub(crate) fn test_pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `pipe2` writes two descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are new and owned by nobody else.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    }
}
