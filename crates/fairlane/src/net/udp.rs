//! UDP: [`UdpSocket`].

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::addr::{resolve, ToSocketAddrs};
use super::into_std::refused;
use super::socket::{copy_received, with_std, Socket};
use crate::io::{IoBuf, IoBufMut};

/// A UDP socket.
///
/// # Example
/// ```
/// use fairlane::net::UdpSocket;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let a = UdpSocket::bind("127.0.0.1:0").await?;
///     let b = UdpSocket::bind("127.0.0.1:0").await?;
///     a.send_to_owned(b"hi".to_vec(), b.local_addr()?).await.0?;
///     let (result, buf) = b.recv_from_owned(Vec::with_capacity(16)).await;
///     let (n, from) = result?;
///     assert_eq!((&buf[..n], from), (&b"hi"[..], a.local_addr()?));
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    pub(super) sock: Socket,
}

impl UdpSocket {
    /// Binds to `addr` (the first of its addresses that works).
    ///
    /// # Errors
    /// The operating system's error of the last address tried, e.g.
    /// `AddrInUse`.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        let mut last = None;
        for addr in resolve(addr).await? {
            match std::net::UdpSocket::bind(addr) {
                Ok(s) => return UdpSocket::from_std(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("resolve returns at least one address"))
    }

    /// Adopts a bound std socket.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = std::net::UdpSocket::bind("127.0.0.1:0")?;
    /// let s = rt.block_on(async { fairlane::net::UdpSocket::from_std(s) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            sock: Socket::from_fd(OwnedFd::from(socket))?,
        })
    }

    /// Turns it into a std socket (non-blocking, as tokio leaves it), no
    /// longer part of the runtime.
    ///
    /// # Errors
    /// If that would lose a datagram, an error of kind `ResourceBusy`
    /// whose inner error, an [`IntoStdError`](super::IntoStdError), gives
    /// the socket back: with io_uring, a receive dropped in flight is still
    /// under way or left a datagram (the next receive returns it).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// let addr = s.local_addr()?;
    /// assert_eq!(s.into_std()?.local_addr()?, addr);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        self.sock
            .into_fd()
            .map(Into::into)
            .map_err(|sock| refused(UdpSocket { sock }))
    }

    /// Sends one datagram with `buf`'s bytes to `target`.
    ///
    /// # Cancellation
    /// A datagram is sent whole or not at all: if the future is dropped
    /// before it completes, the datagram may or may not have been sent.
    ///
    /// # Example
    /// See [`UdpSocket`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// let (n, _) = s.send_to_owned("ping", s.local_addr()?).await;
    /// assert_eq!(n?, 4);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send_to_owned<B: IoBuf, A: ToSocketAddrs>(
        &self,
        buf: B,
        target: A,
    ) -> (io::Result<usize>, B) {
        let addr = match resolve(target).await {
            Ok(addrs) => addrs[0],
            Err(e) => return (Err(e), buf),
        };
        self.sock.send_to(buf, addr).await
    }

    /// Receives one datagram into `buf` (from its start, up to its
    /// capacity); the count and the sender's address.
    ///
    /// # Cancellation
    /// Cancel-safe: if the future is dropped before it completes, no
    /// datagram is lost; one the kernel had already delivered to it (an
    /// empty one too) is returned by the next `recv_from_owned` (cut to that
    /// buffer's capacity, as any datagram is), and so is an error the
    /// kernel had already reported to it.
    ///
    /// # Example
    /// See [`UdpSocket`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// s.send_to_owned("ping", s.local_addr()?).await.0?;
    /// let (r, buf) = s.recv_from_owned(Vec::with_capacity(8)).await;
    /// assert_eq!(r?.0, 4);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn recv_from_owned<B: IoBufMut>(
        &self,
        buf: B,
    ) -> (io::Result<(usize, SocketAddr)>, B) {
        self.sock.recv_from(buf).await
    }

    /// Connects the socket to `addr` (the first of its addresses that
    /// works): [`send`](Self::send) goes there, and only its datagrams are
    /// received. No packet is sent.
    ///
    /// # Errors
    /// The operating system's error of the last address tried.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let a = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// let b = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// a.connect(b.local_addr()?).await?;
    /// b.connect(a.local_addr()?).await?;
    /// assert_eq!(a.peer_addr()?, b.local_addr()?);
    /// a.send_owned("hi").await.0?;
    /// let (n, buf) = b.recv_owned(Vec::with_capacity(8)).await;
    /// assert_eq!(&buf[..n?], b"hi");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        let mut last = None;
        for addr in resolve(addr).await? {
            match with_std(self.sock.raw(), |s: &std::net::UdpSocket| s.connect(addr)) {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("resolve returns at least one address"))
    }

    /// The address it is connected to.
    ///
    /// # Errors
    /// `NotConnected` if it is not connected.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// assert_eq!(s.peer_addr().unwrap_err().kind(), std::io::ErrorKind::NotConnected);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::UdpSocket::peer_addr)
    }

    /// Sends one datagram with `buf`'s bytes to the connected peer.
    ///
    /// # Errors
    /// Not connected: the operating system's (`EDESTADDRREQ`). A peer
    /// that is not listening may make a later call fail with
    /// `ConnectionRefused`.
    ///
    /// # Cancellation
    /// As [`send_to_owned`](Self::send_to_owned).
    ///
    /// # Example
    /// See [`connect`](Self::connect).
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<usize> { s.send_owned("x").await.0 }
    /// ```
    pub async fn send_owned<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.send_connected(buf).await
    }

    /// Receives one datagram from the connected peer into `buf` (from its
    /// start, up to its capacity, the rest of a larger datagram dropped).
    ///
    /// # Cancellation
    /// Cancel-safe, as [`recv_from_owned`](Self::recv_from_owned).
    ///
    /// # Example
    /// See [`connect`](Self::connect).
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<usize> {
    ///     s.recv_owned(Vec::with_capacity(1500)).await.0
    /// }
    /// ```
    pub async fn recv_owned<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        let (r, buf) = self.sock.recv_from(buf).await;
        (r.map(|(n, _)| n), buf)
    }

    /// Waits until a datagram (or an error) is there to receive; then
    /// [`try_recv`](Self::try_recv) or [`try_recv_from`](Self::try_recv_from)
    /// takes it (in a loop, as with tokio: another receiver may be first).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// s.try_send_to(b"ping", s.local_addr()?)?;
    /// let mut buf = [0u8; 16];
    /// let (n, from) = loop {
    ///     s.readable().await?;
    ///     match s.try_recv_from(&mut buf) {
    ///         Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
    ///         r => break r?,
    ///     }
    /// };
    /// assert_eq!((&buf[..n], from), (&b"ping"[..], s.local_addr()?));
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
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// s.writable().await?;
    /// assert_eq!(s.try_send_to(b"x", s.local_addr()?)?, 1);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    /// Sends one datagram to the connected peer without waiting;
    /// `WouldBlock` if the send buffer is full.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<usize> { s.try_send(b"x") }
    /// ```
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.try_send_to(buf, None)
    }

    /// Sends one datagram to `target` without waiting.
    ///
    /// # Example
    /// See [`readable`](Self::readable).
    /// ```
    /// fn f(s: &fairlane::net::UdpSocket, to: std::net::SocketAddr) -> std::io::Result<usize> {
    ///     s.try_send_to(b"x", to)
    /// }
    /// ```
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        self.sock.try_send_to(buf, Some(target))
    }

    /// Receives one datagram from the connected peer without waiting;
    /// `WouldBlock` if none is there. A datagram that a dropped receive
    /// left (io_uring) comes first; while such a receive's outcome is still
    /// unknown this returns `WouldBlock`, and [`readable`](Self::readable)
    /// waits for it.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<usize> { s.try_recv(&mut [0u8; 1500]) }
    /// ```
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.try_recv_from(buf).map(|(n, _)| n)
    }

    /// Receives one datagram without waiting, with its sender; as
    /// [`try_recv`](Self::try_recv).
    ///
    /// # Example
    /// See [`readable`](Self::readable).
    /// ```
    /// fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<(usize, std::net::SocketAddr)> {
    ///     s.try_recv_from(&mut [0u8; 1500])
    /// }
    /// ```
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.sock.try_recv_from(buf)
    }

    /// Receives the next datagram into `buf` as
    /// [`recv_from_owned`](Self::recv_from_owned) does, but leaves it queued: the next
    /// receive returns it again.
    ///
    /// # Cancellation
    /// Cancel-safe: a peek takes nothing.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// s.send_to_owned("ping", s.local_addr()?).await.0?;
    /// let (r, buf) = s.peek_from_owned(Vec::with_capacity(8)).await;
    /// assert_eq!(&buf[..r?.0], b"ping");
    /// let (r, buf) = s.recv_from_owned(Vec::with_capacity(8)).await;
    /// assert_eq!(&buf[..r?.0], b"ping");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek_from_owned<B: IoBufMut>(
        &self,
        buf: B,
    ) -> (io::Result<(usize, SocketAddr)>, B) {
        self.sock.peek_from(buf).await
    }

    /// Sends one datagram with `buf`'s bytes to `target` (the first of its
    /// addresses); the count sent. tokio's signature: the bytes are
    /// borrowed (copied into an owned buffer for the send;
    /// [`send_to_owned`](Self::send_to_owned) takes the buffer and copies
    /// nothing).
    ///
    /// # Cancellation
    /// As [`send_to_owned`](Self::send_to_owned): sent whole or not at all.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// assert_eq!(s.send_to(b"ping", s.local_addr()?).await?, 4);
    /// let mut buf = [0u8; 8];
    /// let (n, from) = s.recv_from(&mut buf).await?;
    /// assert_eq!((&buf[..n], from), (&b"ping"[..], s.local_addr()?));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], target: A) -> io::Result<usize> {
        self.send_to_owned(buf.to_vec(), target).await.0
    }

    /// Receives one datagram into `buf` (the rest of a larger datagram is
    /// dropped); the count and the sender. tokio's signature (the datagram
    /// goes through an owned buffer; [`recv_from_owned`](Self::recv_from_owned)
    /// receives into the caller's).
    ///
    /// # Cancellation
    /// Cancel-safe, as [`recv_from_owned`](Self::recv_from_owned).
    ///
    /// # Example
    /// See [`send_to`](Self::send_to).
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<usize> {
    ///     Ok(s.recv_from(&mut [0u8; 1500]).await?.0)
    /// }
    /// ```
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (r, got) = self.recv_from_owned(Vec::with_capacity(buf.len())).await;
        copy_received(r, &got, buf)
    }

    /// Sends one datagram with `buf`'s bytes to the connected peer; tokio's
    /// signature (see [`send_owned`](Self::send_owned) for the owned form).
    ///
    /// # Errors
    /// As [`send_owned`](Self::send_owned).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let a = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// let b = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// a.connect(b.local_addr()?).await?;
    /// b.connect(a.local_addr()?).await?;
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

    /// Receives one datagram from the connected peer into `buf`; tokio's
    /// signature (see [`recv_owned`](Self::recv_owned) for the owned form).
    ///
    /// # Cancellation
    /// Cancel-safe, as [`recv_from_owned`](Self::recv_from_owned).
    ///
    /// # Example
    /// See [`send`](Self::send).
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<usize> {
    ///     s.recv(&mut [0u8; 1500]).await
    /// }
    /// ```
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.recv_from(buf).await?.0)
    }

    /// Receives the next datagram into `buf` as
    /// [`recv_from`](Self::recv_from) does, but leaves it queued; tokio's
    /// signature (see [`peek_from_owned`](Self::peek_from_owned)).
    ///
    /// # Cancellation
    /// Cancel-safe: a peek takes nothing.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// s.send_to(b"ping", s.local_addr()?).await?;
    /// let mut buf = [0u8; 8];
    /// assert_eq!(s.peek_from(&mut buf).await?.0, 4);
    /// assert_eq!(s.recv_from(&mut buf).await?.0, 4);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (r, got) = self.peek_from_owned(Vec::with_capacity(buf.len())).await;
        copy_received(r, &got, buf)
    }

    /// The local address.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// assert_ne!(s.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::UdpSocket::local_addr)
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.raw()
    }
}
