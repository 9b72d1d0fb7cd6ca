//! [`TcpSocket`]: a TCP socket to configure before it connects or listens.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::socket::{cvt, option, set_option, with_std, SockAddrBuf, Socket};
use super::{TcpListener, TcpStream};

/// A TCP socket that has not yet connected or listened, to set options on
/// and bind first, as tokio's `TcpSocket`. [`connect`](Self::connect)
/// makes it a [`TcpStream`] (waiting for the handshake without blocking
/// the thread), [`listen`](Self::listen) a [`TcpListener`].
///
/// Creating and configuring one works anywhere; `connect` and `listen`
/// must run inside a runtime.
///
/// # Example
/// ```
/// use fairlane::net::TcpSocket;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let socket = TcpSocket::new_v4()?;
///     socket.set_reuseaddr(true)?;
///     socket.bind("127.0.0.1:0".parse().unwrap())?;
///     let listener = socket.listen(128)?;
///
///     let client = TcpSocket::new_v4()?;
///     client.set_nodelay(true)?;
///     let stream = client.connect(listener.local_addr()?).await?;
///     let (_server_side, peer) = listener.accept().await?;
///     assert_eq!(peer, stream.local_addr()?);
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpSocket {
    fd: OwnedFd,
}

impl TcpSocket {
    fn new(domain: libc::c_int) -> io::Result<TcpSocket> {
        // SAFETY: plain system call without pointers.
        let fd = cvt(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
        Ok(TcpSocket {
            // SAFETY: a new descriptor nobody else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// A new IPv4 TCP socket.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new_v4() -> io::Result<TcpSocket> {
        TcpSocket::new(libc::AF_INET)
    }

    /// A new IPv6 TCP socket.
    ///
    /// # Errors
    /// `EAFNOSUPPORT` where the system has no IPv6.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v6();
    /// ```
    pub fn new_v6() -> io::Result<TcpSocket> {
        TcpSocket::new(libc::AF_INET6)
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn set_flag(&self, level: libc::c_int, name: libc::c_int, on: bool) -> io::Result<()> {
        set_option(self.raw(), level, name, libc::c_int::from(on))
    }

    fn flag(&self, level: libc::c_int, name: libc::c_int) -> io::Result<bool> {
        option::<libc::c_int>(self.raw(), level, name).map(|v| v != 0)
    }

    /// Sets `SO_REUSEADDR`: bind to an address still in `TIME_WAIT`.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_reuseaddr(true)?;
    /// assert!(socket.reuseaddr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_reuseaddr(&self, reuseaddr: bool) -> io::Result<()> {
        self.set_flag(libc::SOL_SOCKET, libc::SO_REUSEADDR, reuseaddr)
    }

    /// Whether `SO_REUSEADDR` is set.
    ///
    /// # Example
    /// ```
    /// assert!(!fairlane::net::TcpSocket::new_v4()?.reuseaddr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reuseaddr(&self) -> io::Result<bool> {
        self.flag(libc::SOL_SOCKET, libc::SO_REUSEADDR)
    }

    /// Sets `SO_REUSEPORT`: several sockets (all with it set) may bind the
    /// same address, and the kernel spreads connections among them.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_reuseport(true)?;
    /// assert!(socket.reuseport()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_reuseport(&self, reuseport: bool) -> io::Result<()> {
        self.set_flag(libc::SOL_SOCKET, libc::SO_REUSEPORT, reuseport)
    }

    /// Whether `SO_REUSEPORT` is set.
    ///
    /// # Example
    /// ```
    /// assert!(!fairlane::net::TcpSocket::new_v4()?.reuseport()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reuseport(&self) -> io::Result<bool> {
        self.flag(libc::SOL_SOCKET, libc::SO_REUSEPORT)
    }

    /// Sets `SO_KEEPALIVE`.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_keepalive(true)?;
    /// assert!(socket.keepalive()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_keepalive(&self, keepalive: bool) -> io::Result<()> {
        self.set_flag(libc::SOL_SOCKET, libc::SO_KEEPALIVE, keepalive)
    }

    /// Whether `SO_KEEPALIVE` is set.
    ///
    /// # Example
    /// ```
    /// assert!(!fairlane::net::TcpSocket::new_v4()?.keepalive()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn keepalive(&self) -> io::Result<bool> {
        self.flag(libc::SOL_SOCKET, libc::SO_KEEPALIVE)
    }

    /// Sets `TCP_NODELAY` (no Nagle delay for small writes); the stream
    /// that [`connect`](Self::connect) makes keeps it.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_nodelay(true)?;
    /// assert!(socket.nodelay()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.set_flag(libc::IPPROTO_TCP, libc::TCP_NODELAY, nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Example
    /// ```
    /// assert!(!fairlane::net::TcpSocket::new_v4()?.nodelay()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        self.flag(libc::IPPROTO_TCP, libc::TCP_NODELAY)
    }

    /// Sets the send buffer size (`SO_SNDBUF`). Linux doubles the value
    /// (for its bookkeeping) and clamps it to its limits, so
    /// [`send_buffer_size`](Self::send_buffer_size) reports what it chose.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_send_buffer_size(64 * 1024)?;
    /// assert!(socket.send_buffer_size()? >= 64 * 1024);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_send_buffer_size(&self, size: u32) -> io::Result<()> {
        set_option(self.raw(), libc::SOL_SOCKET, libc::SO_SNDBUF, clamp(size))
    }

    /// The send buffer size (`SO_SNDBUF`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::net::TcpSocket::new_v4()?.send_buffer_size()? > 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn send_buffer_size(&self) -> io::Result<u32> {
        option::<libc::c_int>(self.raw(), libc::SOL_SOCKET, libc::SO_SNDBUF).map(|v| v as u32)
    }

    /// Sets the receive buffer size (`SO_RCVBUF`); as with the send buffer,
    /// Linux doubles and clamps it.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_recv_buffer_size(64 * 1024)?;
    /// assert!(socket.recv_buffer_size()? >= 64 * 1024);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_recv_buffer_size(&self, size: u32) -> io::Result<()> {
        set_option(self.raw(), libc::SOL_SOCKET, libc::SO_RCVBUF, clamp(size))
    }

    /// The receive buffer size (`SO_RCVBUF`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::net::TcpSocket::new_v4()?.recv_buffer_size()? > 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn recv_buffer_size(&self) -> io::Result<u32> {
        option::<libc::c_int>(self.raw(), libc::SOL_SOCKET, libc::SO_RCVBUF).map(|v| v as u32)
    }

    /// Sets `SO_LINGER`: with `Some(d)`, closing the socket waits up to `d`
    /// for unsent data (`Some(Duration::ZERO)`: the close resets the
    /// connection); `None` turns it off. Whole seconds (rounded down).
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_linger(Some(Duration::from_secs(2)))?;
    /// assert_eq!(socket.linger()?, Some(Duration::from_secs(2)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_linger(&self, dur: Option<Duration>) -> io::Result<()> {
        super::tcp_options::set_linger(self.raw(), dur)
    }

    /// `SO_LINGER`: see [`set_linger`](Self::set_linger).
    ///
    /// # Example
    /// ```
    /// assert_eq!(fairlane::net::TcpSocket::new_v4()?.linger()?, None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        super::tcp_options::linger(self.raw())
    }

    /// Binds to `addr` (port 0: one the system chooses).
    ///
    /// # Errors
    /// The operating system's, e.g. `AddrInUse`, or `InvalidInput` for an
    /// address of the other family.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.bind("127.0.0.1:0".parse().unwrap())?;
    /// assert_ne!(socket.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind(&self, addr: SocketAddr) -> io::Result<()> {
        let sa = SockAddrBuf::from_addr(&addr);
        // SAFETY: `sa` holds a valid address of `sa.len` bytes.
        cvt(unsafe {
            libc::bind(
                self.raw(),
                (&sa.storage as *const libc::sockaddr_storage).cast(),
                sa.len,
            )
        })
        .map(drop)
    }

    /// The local address (after [`bind`](Self::bind); unbound: the
    /// unspecified address, port 0).
    ///
    /// # Example
    /// See [`bind`](Self::bind).
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// assert_eq!(socket.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.raw(), std::net::TcpStream::local_addr)
    }

    /// Reads and clears the socket's pending error (`SO_ERROR`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::net::TcpSocket::new_v4()?.take_error()?.is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        super::socket::take_error(self.raw())
    }

    /// Connects to `addr`. The handshake is waited for as any I/O is (an
    /// io_uring `connect`, or a non-blocking one and readiness), so other
    /// tasks of the processor run meanwhile.
    ///
    /// # Errors
    /// The operating system's, e.g. `ConnectionRefused`; an error if called
    /// outside a runtime.
    ///
    /// # Cancellation
    /// Dropping the future abandons the attempt and closes the socket.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// let stream = socket.connect(listener.local_addr()?).await?;
    /// assert_eq!(stream.peer_addr()?, listener.local_addr()?);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect(self, addr: SocketAddr) -> io::Result<TcpStream> {
        let sock = Socket::from_fd(self.fd)?;
        sock.connect(SockAddrBuf::from_addr(&addr)).await?;
        Ok(TcpStream::from_socket(sock))
    }

    /// Listens for connections, with a queue of up to `backlog` not yet
    /// accepted (the kernel caps it at `net.core.somaxconn`). Unbound: on
    /// a port the system chooses.
    ///
    /// # Errors
    /// The operating system's; an error if called outside a runtime.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.bind("127.0.0.1:0".parse().unwrap())?;
    /// let listener = socket.listen(1024)?;
    /// assert_ne!(listener.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn listen(self, backlog: u32) -> io::Result<TcpListener> {
        let backlog = backlog.min(libc::c_int::MAX as u32) as libc::c_int;
        // SAFETY: plain system call on our descriptor.
        cvt(unsafe { libc::listen(self.raw(), backlog) })?;
        TcpListener::from_std(std::net::TcpListener::from(self.fd))
    }

    /// Wraps a std stream's socket (to read or set its options), as
    /// tokio's `TcpSocket::from_std_stream`.
    ///
    /// # Example
    /// ```
    /// let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let s = std::net::TcpStream::connect(l.local_addr()?)?;
    /// let socket = fairlane::net::TcpSocket::from_std_stream(s);
    /// assert!(socket.local_addr()?.ip().is_loopback());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std_stream(stream: std::net::TcpStream) -> TcpSocket {
        TcpSocket {
            fd: OwnedFd::from(stream),
        }
    }
}

/// A buffer size as the `c_int` that `setsockopt` takes.
fn clamp(size: u32) -> libc::c_int {
    size.min(libc::c_int::MAX as u32) as libc::c_int
}

impl AsRawFd for TcpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

impl AsFd for TcpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl IntoRawFd for TcpSocket {
    fn into_raw_fd(self) -> RawFd {
        self.fd.into_raw_fd()
    }
}

impl FromRawFd for TcpSocket {
    /// Adopts a TCP socket descriptor.
    ///
    /// # Safety
    /// `fd` must be an open TCP socket that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> TcpSocket {
        TcpSocket {
            // SAFETY: the caller's promise.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        }
    }
}

impl fmt::Debug for TcpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpSocket")
            .field("fd", &self.raw())
            .finish()
    }
}
