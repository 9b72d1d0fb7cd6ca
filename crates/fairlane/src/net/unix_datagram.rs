//! Unix-domain datagram sockets: [`UnixDatagram`].

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;

use super::into_std::refused;
use super::socket::{copy_received, with_std, SockAddrBuf, Socket};
use crate::io::{IoBuf, IoBufMut};

/// A Unix-domain datagram socket, as tokio's: bound to a path, unbound, or
/// one of a connected pair.
///
/// # Example
/// ```
/// use fairlane::net::UnixDatagram;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let (a, b) = UnixDatagram::pair()?;
///     a.send_owned("hi").await.0?;
///     let (n, buf) = b.recv_owned(Vec::with_capacity(16)).await;
///     assert_eq!(&buf[..n?], b"hi");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct UnixDatagram {
    pub(super) sock: Socket,
}

impl UnixDatagram {
    /// A socket bound to `path`.
    ///
    /// # Errors
    /// The operating system's, e.g. `AddrInUse` if the path exists.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-dgram-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let s = rt.block_on(async { fairlane::net::UnixDatagram::bind(&path) })?;
    /// assert_eq!(s.local_addr()?.as_pathname(), Some(path.as_path()));
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixDatagram> {
        UnixDatagram::from_std(std::os::unix::net::UnixDatagram::bind(path)?)
    }

    /// A socket bound to no address: it can send with
    /// [`send_to`](Self::send_to), or [`connect`](Self::connect) first.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(async { fairlane::net::UnixDatagram::unbound() })?;
    /// assert!(s.local_addr()?.is_unnamed());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::from_std(std::os::unix::net::UnixDatagram::unbound()?)
    }

    /// Two sockets connected to each other.
    ///
    /// # Example
    /// See [`UnixDatagram`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let (a, b) = rt.block_on(async { fairlane::net::UnixDatagram::pair() })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = std::os::unix::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::from_std(a)?, UnixDatagram::from_std(b)?))
    }

    /// Adopts a std socket.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = std::os::unix::net::UnixDatagram::unbound()?;
    /// let s = rt.block_on(async { fairlane::net::UnixDatagram::from_std(s) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std(socket: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            sock: Socket::from_fd(OwnedFd::from(socket))?,
        })
    }

    /// Turns it into a std socket (non-blocking, as tokio leaves it), no
    /// longer part of the runtime.
    ///
    /// # Errors
    /// As [`UdpSocket::into_std`](super::UdpSocket::into_std): `ResourceBusy`
    /// with the socket given back if that would lose a datagram.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(async { fairlane::net::UnixDatagram::unbound() })?;
    /// let s: std::os::unix::net::UnixDatagram = s.into_std()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixDatagram> {
        self.sock
            .into_fd()
            .map(Into::into)
            .map_err(|sock| refused(UnixDatagram { sock }))
    }

    /// Connects the socket to `path`: [`send`](Self::send) goes there, and
    /// only its datagrams are received.
    ///
    /// # Errors
    /// The operating system's, e.g. `NotFound` or `ConnectionRefused`.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let path = std::env::temp_dir().join(format!("fairlane-dgram-conn-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let server = fairlane::net::UnixDatagram::bind(&path)?;
    /// let client = fairlane::net::UnixDatagram::unbound()?;
    /// client.connect(&path)?;
    /// assert_eq!(client.peer_addr()?.as_pathname(), Some(path.as_path()));
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn connect<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        with_std(self.sock.raw(), |s: &std::os::unix::net::UnixDatagram| {
            s.connect(path)
        })
    }

    /// Sends one datagram with `buf`'s bytes to the connected peer.
    ///
    /// # Cancellation
    /// A datagram is sent whole or not at all: if the future is dropped
    /// before it completes, it may or may not have been sent.
    ///
    /// # Example
    /// See [`UnixDatagram`].
    /// ```
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> { s.send_owned("x").await.0 }
    /// ```
    pub async fn send_owned<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.send_connected(buf).await
    }

    /// Receives one datagram into `buf` (from its start, up to its
    /// capacity, the rest of a larger datagram dropped).
    ///
    /// # Cancellation
    /// Cancel-safe, as [`UdpSocket::recv_from_owned`](super::UdpSocket::recv_from_owned).
    ///
    /// # Example
    /// See [`UnixDatagram`].
    /// ```
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> {
    ///     s.recv_owned(Vec::with_capacity(1500)).await.0
    /// }
    /// ```
    pub async fn recv_owned<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        let (r, buf) = self.sock.receive_datagram(buf, false).await;
        (r.map(|(n, _)| n), buf)
    }

    /// Sends one datagram with `buf`'s bytes to the socket bound at `path`.
    ///
    /// # Cancellation
    /// As [`send_owned`](Self::send_owned).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let path = std::env::temp_dir().join(format!("fairlane-dgram-to-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let server = fairlane::net::UnixDatagram::bind(&path)?;
    /// let client = fairlane::net::UnixDatagram::unbound()?;
    /// client.send_to_owned("ping", &path).await.0?;
    /// let (r, buf) = server.recv_from_owned(Vec::with_capacity(8)).await;
    /// let (n, from) = r?;
    /// assert_eq!(&buf[..n], b"ping");
    /// assert!(from.is_unnamed());
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send_to_owned<B: IoBuf, P: AsRef<Path>>(
        &self,
        buf: B,
        target: P,
    ) -> (io::Result<usize>, B) {
        match SockAddrBuf::from_path(target.as_ref()) {
            Ok(sa) => self.sock.send_to_sockaddr(buf, sa).await,
            Err(e) => (Err(e), buf),
        }
    }

    /// Receives one datagram into `buf`, with its sender's address.
    ///
    /// # Cancellation
    /// Cancel-safe, as [`recv_owned`](Self::recv_owned).
    ///
    /// # Example
    /// See [`send_to_owned`](Self::send_to_owned).
    /// ```
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> {
    ///     Ok(s.recv_from_owned(Vec::with_capacity(1500)).await.0?.0)
    /// }
    /// ```
    pub async fn recv_from_owned<B: IoBufMut>(
        &self,
        buf: B,
    ) -> (io::Result<(usize, SocketAddr)>, B) {
        let (r, buf) = self.sock.receive_datagram(buf, false).await;
        (r.and_then(|(n, a)| Ok((n, a.unix_addr()?))), buf)
    }

    /// Sends one datagram with `buf`'s bytes to the connected peer; tokio's
    /// signature (the bytes are copied into an owned buffer;
    /// [`send_owned`](Self::send_owned) takes one and copies nothing).
    ///
    /// # Cancellation
    /// As [`send_owned`](Self::send_owned): sent whole or not at all.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, b) = fairlane::net::UnixDatagram::pair()?;
    /// assert_eq!(a.send(b"hi").await?, 2);
    /// let mut buf = [0u8; 8];
    /// let n = b.recv(&mut buf).await?;
    /// assert_eq!(&buf[..n], b"hi");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.send_owned(buf.to_vec()).await.0
    }

    /// Receives one datagram into `buf` (the rest of a larger datagram is
    /// dropped); tokio's signature (see [`recv_owned`](Self::recv_owned)).
    ///
    /// # Cancellation
    /// Cancel-safe, as [`recv_owned`](Self::recv_owned).
    ///
    /// # Example
    /// See [`send`](Self::send).
    /// ```
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> {
    ///     s.recv(&mut [0u8; 1500]).await
    /// }
    /// ```
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.recv_from(buf).await?.0)
    }

    /// Sends one datagram with `buf`'s bytes to the socket bound at
    /// `target`; tokio's signature (see
    /// [`send_to_owned`](Self::send_to_owned)).
    ///
    /// # Cancellation
    /// As [`send_owned`](Self::send_owned).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let path = std::env::temp_dir().join(format!("fairlane-dgram-slice-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let server = fairlane::net::UnixDatagram::bind(&path)?;
    /// let client = fairlane::net::UnixDatagram::unbound()?;
    /// client.send_to(b"ping", &path).await?;
    /// let mut buf = [0u8; 8];
    /// let (n, from) = server.recv_from(&mut buf).await?;
    /// assert_eq!(&buf[..n], b"ping");
    /// assert!(from.is_unnamed());
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send_to<P: AsRef<Path>>(&self, buf: &[u8], target: P) -> io::Result<usize> {
        self.send_to_owned(buf.to_vec(), target).await.0
    }

    /// Receives one datagram into `buf`, with its sender's address; tokio's
    /// signature (see [`recv_from_owned`](Self::recv_from_owned)).
    ///
    /// # Cancellation
    /// Cancel-safe, as [`recv_owned`](Self::recv_owned).
    ///
    /// # Example
    /// See [`send_to`](Self::send_to).
    /// ```
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> {
    ///     Ok(s.recv_from(&mut [0u8; 1500]).await?.0)
    /// }
    /// ```
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (r, got) = self.recv_from_owned(Vec::with_capacity(buf.len())).await;
        copy_received(r, &got, buf)
    }

    /// Waits until a datagram (or an error) is there to receive; then
    /// [`try_recv`](Self::try_recv) takes it (in a loop, as with tokio).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, b) = fairlane::net::UnixDatagram::pair()?;
    /// a.try_send(b"ping")?;
    /// let mut buf = [0u8; 16];
    /// let n = loop {
    ///     b.readable().await?;
    ///     match b.try_recv(&mut buf) {
    ///         Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
    ///         r => break r?,
    ///     }
    /// };
    /// assert_eq!(&buf[..n], b"ping");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    /// Waits until a datagram can be sent without waiting.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = fairlane::net::UnixDatagram::pair()?;
    /// a.writable().await?;
    /// assert_eq!(a.try_send(b"x")?, 1);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    /// Sends one datagram to the connected peer without waiting;
    /// `WouldBlock` if the peer's queue is full.
    ///
    /// # Example
    /// See [`readable`](Self::readable).
    /// ```
    /// fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> { s.try_send(b"x") }
    /// ```
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.try_send_to_sockaddr(buf, None)
    }

    /// Sends one datagram to the socket bound at `target` without waiting.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> {
    ///     s.try_send_to(b"x", "/tmp/some.sock")
    /// }
    /// ```
    pub fn try_send_to<P: AsRef<Path>>(&self, buf: &[u8], target: P) -> io::Result<usize> {
        let sa = SockAddrBuf::from_path(target.as_ref())?;
        self.sock.try_send_to_sockaddr(buf, Some(&sa))
    }

    /// Receives one datagram without waiting; `WouldBlock` if none is
    /// there. A datagram that a dropped receive left (io_uring) comes
    /// first; while such a receive's outcome is unknown this returns
    /// `WouldBlock`, and [`readable`](Self::readable) waits for it.
    ///
    /// # Example
    /// See [`readable`](Self::readable).
    /// ```
    /// fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> { s.try_recv(&mut [0u8; 1500]) }
    /// ```
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.try_receive_datagram(buf).map(|(n, _)| n)
    }

    /// Receives one datagram without waiting, with its sender; as
    /// [`try_recv`](Self::try_recv).
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> {
    ///     Ok(s.try_recv_from(&mut [0u8; 1500])?.0)
    /// }
    /// ```
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, from) = self.sock.try_receive_datagram(buf)?;
        Ok((n, from.unix_addr()?))
    }

    /// The local address (unnamed if it is not bound).
    ///
    /// # Example
    /// See [`bind`](Self::bind).
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let (a, _b) = rt.block_on(async { fairlane::net::UnixDatagram::pair() })?;
    /// assert!(a.local_addr()?.is_unnamed());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(
            self.sock.raw(),
            std::os::unix::net::UnixDatagram::local_addr,
        )
    }

    /// The address of the connected peer.
    ///
    /// # Errors
    /// `NotConnected` if it is not connected.
    ///
    /// # Example
    /// See [`connect`](Self::connect).
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(async { fairlane::net::UnixDatagram::unbound() })?;
    /// assert_eq!(s.peer_addr().unwrap_err().kind(), std::io::ErrorKind::NotConnected);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixDatagram::peer_addr)
    }
}

impl AsRawFd for UnixDatagram {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.raw()
    }
}
