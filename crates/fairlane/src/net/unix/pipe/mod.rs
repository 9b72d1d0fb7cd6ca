//! Unix pipes and FIFOs, as tokio's `net::unix::pipe`: [`pipe`] makes an
//! anonymous pipe, [`OpenOptions`] opens a FIFO file (non-blocking), and
//! the ends, [`Sender`] and [`Receiver`], wait for readiness on the
//! runtime's I/O backend and implement the write and read traits.
//!
//! # Example
//! ```
//! use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
//! use fairlane::net::unix::pipe;
//! # let rt = fairlane::Runtime::builder().processors(1).build()?;
//! # rt.block_on(async {
//! let (mut tx, mut rx) = pipe::pipe()?;
//! tx.write_all(b"through the pipe").await?;
//! drop(tx);
//! let mut got = String::new();
//! rx.read_to_string(&mut got).await?;
//! assert_eq!(got, "through the pipe");
//! # Ok::<(), std::io::Error>(()) })?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod receiver;
mod sender;

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

pub use self::receiver::Receiver;
pub use self::sender::Sender;
use crate::net::socket::{cvt, set_nonblocking};

/// A new anonymous pipe: its write end and its read end, both
/// non-blocking and close-on-exec.
///
/// # Errors
/// The operating system's (e.g. out of descriptors); outside a runtime.
///
/// # Example
/// See the [module](self).
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let (tx, rx) = fairlane::net::unix::pipe::pipe()?;
/// assert_eq!(tx.try_write(b"hi")?, 2);
/// rx.readable().await?;
/// assert_eq!(rx.try_read(&mut [0u8; 4])?, 2);
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn pipe() -> io::Result<(Sender, Receiver)> {
    let mut fds = [0; 2];
    // SAFETY: `pipe2` writes two descriptors into the live array.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) })?;
    // SAFETY: two new descriptors nobody else owns.
    let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((
        Sender::from_owned_fd_unchecked(tx)?,
        Receiver::from_owned_fd_unchecked(rx)?,
    ))
}

/// Options to open a FIFO file as one end of a pipe, as tokio's
/// `pipe::OpenOptions`. The file is opened non-blocking, so opening a
/// sender while no reader has the FIFO open fails with `ENXIO` (unless
/// [`read_write`](Self::read_write)).
///
/// # Example
/// ```
/// use fairlane::net::unix::pipe;
/// let path = std::env::temp_dir().join(format!("fairlane-doc-fifo-{}", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
/// // SAFETY: a valid NUL-terminated path.
/// assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let rx = pipe::OpenOptions::new().open_receiver(&path)?;
///     let tx = pipe::OpenOptions::new().open_sender(&path)?;
///     tx.writable().await?;
///     tx.try_write(b"fifo")?;
///     rx.readable().await?;
///     assert_eq!(rx.try_read(&mut [0u8; 8])?, 4);
///     Ok::<(), std::io::Error>(())
/// })?;
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    read_write: bool,
    unchecked: bool,
}

impl OpenOptions {
    /// Options to open read-only (receivers) or write-only (senders),
    /// checking that the file is a FIFO.
    ///
    /// # Example
    /// ```
    /// let options = fairlane::net::unix::pipe::OpenOptions::new();
    /// ```
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// Opens the file for reading and writing (Linux): a sender then opens
    /// while no reader has the FIFO open, and a receiver never sees the end
    /// of the stream (it holds a write end itself), so it can wait for the
    /// next writer.
    ///
    /// # Example
    /// ```
    /// let mut options = fairlane::net::unix::pipe::OpenOptions::new();
    /// options.read_write(true);
    /// ```
    pub fn read_write(&mut self, value: bool) -> &mut Self {
        self.read_write = value;
        self
    }

    /// Skips the check that the file is a FIFO (for character devices and
    /// the like that behave as one). The file must still be one the I/O
    /// backend can wait on: the fallback backend's poller refuses regular
    /// files (`EPERM`).
    ///
    /// # Example
    /// ```
    /// let mut options = fairlane::net::unix::pipe::OpenOptions::new();
    /// options.unchecked(true);
    /// ```
    pub fn unchecked(&mut self, value: bool) -> &mut Self {
        self.unchecked = value;
        self
    }

    /// Opens the FIFO at `path` as a [`Receiver`].
    ///
    /// # Errors
    /// `InvalidInput` if the file is not a FIFO (unless
    /// [`unchecked`](Self::unchecked)); the operating system's error (e.g.
    /// `NotFound`); outside a runtime.
    ///
    /// # Example
    /// See [`OpenOptions`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-doc-not-fifo-{}", std::process::id()));
    /// std::fs::write(&path, b"")?;
    /// let err = rt.block_on(async { fairlane::net::unix::pipe::OpenOptions::new().open_receiver(&path) }).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn open_receiver<P: AsRef<Path>>(&self, path: P) -> io::Result<Receiver> {
        let file = self.open(path.as_ref(), false)?;
        Receiver::from_file_unchecked(file)
    }

    /// Opens the FIFO at `path` as a [`Sender`].
    ///
    /// # Errors
    /// `ENXIO` if no reader has the FIFO open (unless
    /// [`read_write`](Self::read_write)); otherwise as
    /// [`open_receiver`](Self::open_receiver).
    ///
    /// # Example
    /// See [`OpenOptions`].
    /// ```
    /// fn f(path: &std::path::Path) -> std::io::Result<fairlane::net::unix::pipe::Sender> {
    ///     fairlane::net::unix::pipe::OpenOptions::new().read_write(true).open_sender(path)
    /// }
    /// ```
    pub fn open_sender<P: AsRef<Path>>(&self, path: P) -> io::Result<Sender> {
        let file = self.open(path.as_ref(), true)?;
        Sender::from_file_unchecked(file)
    }

    fn open(&self, path: &Path, write: bool) -> io::Result<File> {
        let file = std::fs::OpenOptions::new()
            .read(!write || self.read_write)
            .write(write || self.read_write)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        if !self.unchecked {
            check_fifo(&file)?;
        }
        Ok(file)
    }
}

/// `InvalidInput` unless `file` is a FIFO (or an anonymous pipe).
fn check_fifo(file: &File) -> io::Result<()> {
    if file.metadata()?.file_type().is_fifo() {
        Ok(())
    } else {
        Err(io::Error::new(io::ErrorKind::InvalidInput, "not a pipe"))
    }
}

/// Checks that `file` is a pipe open for `writing` (or for reading) and
/// makes it non-blocking: the checks of `from_file`.
fn checked(file: &File, writing: bool) -> io::Result<()> {
    check_fifo(file)?;
    // SAFETY: fcntl on the caller's live descriptor, no pointers.
    let flags = cvt(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) })?;
    let mode = flags & libc::O_ACCMODE;
    let ok = mode == libc::O_RDWR
        || (writing && mode == libc::O_WRONLY)
        || (!writing && mode == libc::O_RDONLY);
    if !ok {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            if writing {
                "a pipe sender needs a descriptor open for writing"
            } else {
                "a pipe receiver needs a descriptor open for reading"
            },
        ));
    }
    Ok(())
}

/// Makes `file` non-blocking, as the ends keep their descriptors.
fn nonblocking(file: File) -> io::Result<File> {
    set_nonblocking(file.as_raw_fd(), true)?;
    Ok(file)
}
