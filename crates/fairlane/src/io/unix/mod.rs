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

mod async_fd;
mod guard;
pub(crate) mod readiness;
mod register_error;

pub use self::async_fd::AsyncFd;
pub use self::guard::{AsyncFdReadyGuard, AsyncFdReadyMutGuard, TryIoError};
pub use self::register_error::AsyncFdRegisterError;
