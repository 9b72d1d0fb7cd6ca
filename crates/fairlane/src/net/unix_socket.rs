//! [`UnixSocket`]: a Unix-domain socket to bind before it connects,
//! listens or becomes a datagram socket.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::Path;

use super::socket::{cvt, option, SockAddrBuf, Socket};
use super::{UnixDatagram, UnixListener, UnixStream};

/// A Unix-domain socket that has not yet connected, listened or become a
/// datagram socket, as tokio's `UnixSocket`: made with
/// [`new_stream`](Self::new_stream) or [`new_datagram`](Self::new_datagram),
/// optionally [`bind`](Self::bind)-ed, then turned into a
/// [`UnixListener`] ([`listen`](Self::listen)), a [`UnixStream`]
/// ([`connect`](Self::connect)) or a [`UnixDatagram`]
/// ([`datagram`](Self::datagram)).
///
/// Creating and binding one works anywhere; the conversions must run
/// inside a runtime.
///
/// # Example
/// ```
/// use fairlane::net::UnixSocket;
/// let path = std::env::temp_dir().join(format!("fairlane-doc-unix-socket-{}", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let socket = UnixSocket::new_stream()?;
///     socket.bind(&path)?;
///     let listener = socket.listen(16)?;
///     let client = UnixSocket::new_stream()?.connect(&path).await?;
///     let (server, _) = listener.accept().await?;
///     client.write_all_owned("hi").await.0?;
///     let (n, buf) = server.read_owned(Vec::with_capacity(4)).await;
///     assert_eq!(&buf[..n?], b"hi");
///     Ok::<(), std::io::Error>(())
/// })?;
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UnixSocket {
    fd: OwnedFd,
}

impl UnixSocket {
    fn new(ty: libc::c_int) -> io::Result<UnixSocket> {
        // SAFETY: plain system call without pointers.
        let fd = cvt(unsafe { libc::socket(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0) })?;
        Ok(UnixSocket {
            // SAFETY: a new descriptor nobody else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// A new Unix-domain stream socket (`SOCK_STREAM`).
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::UnixSocket::new_stream()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new_stream() -> io::Result<UnixSocket> {
        UnixSocket::new(libc::SOCK_STREAM)
    }

    /// A new Unix-domain datagram socket (`SOCK_DGRAM`).
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::UnixSocket::new_datagram()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new_datagram() -> io::Result<UnixSocket> {
        UnixSocket::new(libc::SOCK_DGRAM)
    }

    /// Whether this is a datagram socket (`SO_TYPE`).
    fn is_datagram(&self) -> io::Result<bool> {
        let ty: libc::c_int = option(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TYPE)?;
        Ok(ty == libc::SOCK_DGRAM)
    }

    /// Binds to `path` (which must not exist).
    ///
    /// # Errors
    /// `InvalidInput` for a path a Unix-domain address cannot hold (empty,
    /// too long, or with a NUL byte); the operating system's error
    /// otherwise, e.g. `AddrInUse` if `path` exists.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::UnixSocket::new_datagram()?;
    /// let err = socket.bind("").unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let sa = SockAddrBuf::from_path(path.as_ref())?;
        // SAFETY: `sa` holds a valid address of `sa.len` bytes.
        cvt(unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&sa.storage as *const libc::sockaddr_storage).cast(),
                sa.len,
            )
        })
        .map(drop)
    }

    /// Listens for connections with a queue of `backlog` (capped by the
    /// system) and becomes a [`UnixListener`].
    ///
    /// # Errors
    /// An error saying so for a datagram socket; the operating system's
    /// error otherwise; outside a runtime.
    ///
    /// # Example
    /// See [`UnixSocket`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let socket = fairlane::net::UnixSocket::new_datagram()?;
    /// assert!(rt.block_on(async { socket.listen(16) }).is_err());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn listen(self, backlog: u32) -> io::Result<UnixListener> {
        if self.is_datagram()? {
            return Err(io::Error::other(
                "listen cannot be called on a datagram socket",
            ));
        }
        let backlog = backlog.min(libc::c_int::MAX as u32) as libc::c_int;
        // SAFETY: plain system call on our descriptor.
        cvt(unsafe { libc::listen(self.fd.as_raw_fd(), backlog) })?;
        UnixListener::from_std(std::os::unix::net::UnixListener::from(self.fd))
    }

    /// Connects to the socket listening at `path` and becomes a
    /// [`UnixStream`], waiting without blocking the thread.
    ///
    /// # Errors
    /// An error saying so for a datagram socket; `InvalidInput` for a path
    /// a Unix-domain address cannot hold; the operating system's error
    /// otherwise (e.g. `NotFound`, `ConnectionRefused`); outside a runtime.
    ///
    /// # Example
    /// See [`UnixSocket`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let socket = fairlane::net::UnixSocket::new_stream()?;
    /// let err = rt.block_on(socket.connect("/nonexistent-dir/x.sock")).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect(self, path: impl AsRef<Path>) -> io::Result<UnixStream> {
        if self.is_datagram()? {
            return Err(io::Error::other(
                "connect cannot be called on a datagram socket",
            ));
        }
        let addr = SockAddrBuf::from_path(path.as_ref())?;
        let sock = Socket::from_fd(self.fd)?;
        sock.connect(addr).await?;
        Ok(UnixStream::from_socket(sock))
    }

    /// Becomes a [`UnixDatagram`].
    ///
    /// # Errors
    /// An error saying so for a stream socket; outside a runtime.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let dgram = fairlane::net::UnixSocket::new_datagram()?.datagram()?;
    /// assert!(fairlane::net::UnixSocket::new_stream()?.datagram().is_err());
    /// # drop(dgram);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn datagram(self) -> io::Result<UnixDatagram> {
        if !self.is_datagram()? {
            return Err(io::Error::other(
                "datagram cannot be called on a stream socket",
            ));
        }
        UnixDatagram::from_std(std::os::unix::net::UnixDatagram::from(self.fd))
    }
}

impl AsRawFd for UnixSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for UnixSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl FromRawFd for UnixSocket {
    /// Takes ownership of `fd`, a Unix-domain socket.
    ///
    /// # Safety
    /// `fd` must be an open socket descriptor that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> UnixSocket {
        UnixSocket {
            // SAFETY: the caller's promise.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        }
    }
}

impl IntoRawFd for UnixSocket {
    fn into_raw_fd(self) -> RawFd {
        self.fd.into_raw_fd()
    }
}

impl fmt::Debug for UnixSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixSocket")
            .field("fd", &self.fd.as_raw_fd())
            .finish()
    }
}
