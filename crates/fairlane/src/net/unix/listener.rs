//! [`UnixListener`], and Unix-domain addresses as std's type.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::task::{Context, Poll};

use super::UnixStream;
use crate::net::into_std::refused;
use crate::net::socket::{cvt, with_std, SockAddrBuf, Socket};

/// A Unix-domain socket listening for connections.
///
/// # Example
/// ```
/// use fairlane::net::{UnixListener, UnixStream};
/// let dir = std::env::temp_dir().join(format!("fairlane-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("listener.sock");
/// let _ = std::fs::remove_file(&path);
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let listener = UnixListener::bind(&path)?;
///     let client = UnixStream::connect(&path).await?;
///     let (server, _) = listener.accept().await?;
///     client.write_all_owned("hi").await.0?;
///     let (n, buf) = server.read_owned(Vec::with_capacity(8)).await;
///     assert_eq!(&buf[..n?], b"hi");
///     Ok::<(), std::io::Error>(())
/// })?;
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UnixListener {
    sock: Socket,
}

impl UnixListener {
    /// Binds to `path` (which must not exist) and listens.
    ///
    /// # Example
    /// See [`UnixListener`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt.block_on(async { fairlane::net::UnixListener::bind("/nonexistent-dir/x.sock") }).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        UnixListener::bind_sockaddr(&*SockAddrBuf::from_path(path.as_ref())?)
    }

    /// Binds to `addr` (a path or, on Linux, an abstract name) and
    /// listens, as tokio's `bind_addr`.
    ///
    /// # Errors
    /// `InvalidInput` for an unnamed address; the operating system's error
    /// otherwise (e.g. `AddrInUse`); outside a runtime.
    ///
    /// # Example
    /// ```
    /// use std::os::linux::net::SocketAddrExt;
    /// use std::os::unix::net::SocketAddr;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let name = format!("fairlane-doc-bind-addr-{}", std::process::id());
    /// let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    /// let listener = fairlane::net::UnixListener::bind_addr(&addr)?;
    /// let _client = fairlane::net::UnixStream::connect_addr(&addr).await?;
    /// let (_server, _) = listener.accept().await?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        UnixListener::bind_sockaddr(&*SockAddrBuf::from_unix_addr(addr)?)
    }

    /// A new listener bound to `sa`, listening with the system's largest
    /// backlog.
    fn bind_sockaddr(sa: &SockAddrBuf) -> io::Result<UnixListener> {
        // SAFETY: plain system call without pointers.
        let fd =
            cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `sa` holds a valid address of `sa.len` bytes.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa.storage as *const libc::sockaddr_storage).cast(),
                sa.len,
            )
        })?;
        // SAFETY: plain system call on the new socket.
        cvt(unsafe { libc::listen(fd.as_raw_fd(), libc::SOMAXCONN) })?;
        Ok(UnixListener {
            sock: Socket::listener_from_fd(fd)?,
        })
    }

    /// Adopts a std listener (which must be bound and listening).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-doc-ul-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let std_listener = std::os::unix::net::UnixListener::bind(&path)?;
    /// let listener = rt.block_on(async { fairlane::net::UnixListener::from_std(std_listener) })?;
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        Ok(UnixListener {
            sock: Socket::listener_from_fd(OwnedFd::from(listener))?,
        })
    }

    /// Turns it into a std listener (non-blocking, as tokio leaves it),
    /// no longer part of the runtime; as
    /// [`TcpListener::into_std`](crate::net::TcpListener::into_std).
    ///
    /// # Example
    /// ```
    /// fn f(l: fairlane::net::UnixListener) -> std::io::Result<std::os::unix::net::UnixListener> {
    ///     l.into_std()
    /// }
    /// ```
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        self.sock
            .into_fd()
            .map(Into::into)
            .map_err(|sock| refused(UnixListener { sock }))
    }

    /// Waits for a connection.
    ///
    /// # Example
    /// See [`UnixListener`].
    /// ```
    /// async fn f(l: &fairlane::net::UnixListener) -> std::io::Result<()> {
    ///     let (_stream, _addr) = l.accept().await?;
    ///     Ok(())
    /// }
    /// ```
    ///
    /// Cancel-safe: a dropped `accept` takes no connection from the
    /// listener. A connection whose peer went away before it was accepted does not
    /// make `accept` fail: it is returned (its reads then see the end of
    /// the stream). Running out of descriptors is an error to wait out, as
    /// described at [`TcpListener::accept`](crate::net::TcpListener::accept).
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (fd, addr) = self.sock.accept().await?;
        let stream = UnixStream::from_socket(Socket::from_fd(fd)?);
        // The address accept4 reported, not a second look with
        // `getpeername` that the peer's state could make fail.
        let addr = unix_addr(&addr)?;
        Ok((stream, addr))
    }

    /// The poll-based form of [`accept`](Self::accept), as tokio's
    /// `poll_accept`: `Ready` with a connection, or `Pending` with `cx`'s
    /// waker registered while none waits (only the task that polled last
    /// is woken).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let dir = std::env::temp_dir().join(format!("fairlane-doc-poll-accept-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&dir);
    /// let listener = fairlane::net::UnixListener::bind(&dir)?;
    /// let _client = fairlane::net::UnixStream::connect(&dir).await?;
    /// let (_stream, _addr) = std::future::poll_fn(|cx| listener.poll_accept(cx)).await?;
    /// # std::fs::remove_file(&dir)?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        let (fd, addr) = std::task::ready!(self.sock.poll_accept(cx))?;
        let stream = UnixStream::from_socket(Socket::from_fd(fd)?);
        Poll::Ready(Ok((stream, unix_addr(&addr)?)))
    }

    /// The address it listens on.
    ///
    /// # Example
    /// ```
    /// fn f(l: &fairlane::net::UnixListener) -> std::io::Result<()> {
    ///     println!("{:?}", l.local_addr()?.as_pathname());
    ///     Ok(())
    /// }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(
            self.sock.raw(),
            std::os::unix::net::UnixListener::local_addr,
        )
    }

    /// Takes the socket's pending error (`SO_ERROR`); `None` if there is
    /// none.
    ///
    /// # Example
    /// ```
    /// fn f(l: &fairlane::net::UnixListener) -> std::io::Result<bool> { Ok(l.take_error()?.is_none()) }
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        crate::net::socket::take_error(self.sock.raw())
    }
}

/// A Unix-domain address in the kernel's form (as `accept4` fills it in)
/// as std's type: unnamed (the peer never bound, or the length holds no
/// path), an abstract name (leading NUL), or a path.
fn unix_addr(buf: &SockAddrBuf) -> io::Result<SocketAddr> {
    let path_offset = std::mem::offset_of!(libc::sockaddr_un, sun_path);
    let len = buf.len as usize;
    if len <= path_offset {
        return unnamed();
    }
    if i32::from(buf.storage.ss_family) != libc::AF_UNIX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the peer's address is not a Unix-domain address",
        ));
    }
    // SAFETY: the family says the storage holds a `sockaddr_un`, which is
    // smaller than and aligned within `sockaddr_storage`.
    let sun =
        unsafe { &*(&buf.storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_un>() };
    let path: Vec<u8> = sun.sun_path[..(len - path_offset).min(sun.sun_path.len())]
        .iter()
        .map(|&c| c as u8)
        .collect();
    match path.split_first() {
        Some((0, name)) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name)
        }
        _ => {
            use std::os::unix::ffi::OsStrExt;
            // A path ends at its first NUL (the kernel may count one).
            let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
            if end == 0 {
                return unnamed();
            }
            SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(&path[..end]))
        }
    }
}

/// An unnamed Unix-domain address (std has no constructor for one).
fn unnamed() -> io::Result<SocketAddr> {
    // An empty path gives std's unnamed form (family only); checked, with
    // an unbound socket's own address as the way that always works.
    let addr = SocketAddr::from_pathname("")?;
    if addr.is_unnamed() {
        Ok(addr)
    } else {
        std::os::unix::net::UnixDatagram::unbound()?.local_addr()
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.raw()
    }
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("fd", &self.sock.raw())
            .finish()
    }
}
