//! [`TcpStream`]: a TCP connection.

use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::split;
use super::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
use crate::io::reactor::Direction;
use crate::io::{Interest, IoBuf, IoBufMut, Ready};
use crate::net::addr::{resolve, ToSocketAddrs};
use crate::net::into_std::refused;
use crate::net::socket::{with_std, SockAddrBuf, Socket};
use crate::net::stream::{impl_async_io, stream_into_fd, Compat};

/// A TCP connection. Reads and writes take owned buffers and hand them
/// back; [`futures_io::AsyncRead`]/[`futures_io::AsyncWrite`] are
/// implemented too (writes from the caller's slice; reads through an
/// internal buffer with io_uring).
///
/// # Example
/// ```
/// use fairlane::net::{TcpListener, TcpStream};
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// rt.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await?;
///     let addr = listener.local_addr()?;
///     fairlane::spawn(async move {
///         let (stream, _) = listener.accept().await.unwrap();
///         let (n, buf) = stream.read_owned(Vec::with_capacity(64)).await;
///         let _ = stream.write_all_owned(buf).await; // echo
///         n
///     });
///     let stream = TcpStream::connect(addr).await?;
///     stream.write_all_owned(b"ping".to_vec()).await.0?;
///     let (n, buf) = stream.read_owned(vec![0u8; 64]).await;
///     assert_eq!(&buf[..n?], b"ping");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpStream {
    /// Declared before `sock`: a wait the adapters keep in flight is
    /// cancelled before the descriptor can close.
    compat: Compat,
    sock: Arc<Socket>,
}

impl TcpStream {
    pub(crate) fn from_socket(sock: Socket) -> TcpStream {
        TcpStream {
            sock: Arc::new(sock),
            compat: Compat::new(),
        }
    }

    /// Connects to `addr`, trying each of its addresses in turn (a host
    /// name is resolved on the blocking pool).
    ///
    /// # Errors
    /// The error of the last address tried, e.g. `ConnectionRefused`.
    ///
    /// # Cancellation
    /// Dropping the future abandons the connection attempt and closes its
    /// socket (a handshake already under way is reset by the close).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    /// // Nobody listens on `port` any more.
    /// let err = rt.block_on(fairlane::net::TcpStream::connect(("127.0.0.1", port))).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        let mut last = None;
        for addr in resolve(addr).await? {
            let domain = if addr.is_ipv4() {
                libc::AF_INET
            } else {
                libc::AF_INET6
            };
            let sock = Socket::new(domain, libc::SOCK_STREAM)?;
            match sock.connect(SockAddrBuf::from_addr(&addr)).await {
                Ok(()) => return Ok(TcpStream::from_socket(sock)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("resolve returns at least one address"))
    }

    /// Adopts a connected std stream.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let s = std::net::TcpStream::connect(l.local_addr()?)?;
    /// let stream = rt.block_on(async { fairlane::net::TcpStream::from_std(s) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream::from_socket(Socket::from_fd(OwnedFd::from(
            stream,
        ))?))
    }

    /// Turns it into a std stream (non-blocking, as tokio leaves it), no
    /// longer part of the runtime.
    ///
    /// # Errors
    /// If that would lose data, an error of kind `ResourceBusy` whose inner
    /// error, an [`IntoStdError`](crate::net::IntoStdError), gives the stream
    /// back: the runtime still holds bytes that reads dropped in flight
    /// received (io_uring; a read returns them), writes dropped in flight
    /// that are still sending, or bytes the `AsyncRead` adapter read
    /// ahead.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let addr = s.local_addr()?;
    /// let std_stream = s.into_std()?;
    /// assert_eq!(std_stream.local_addr()?, addr);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        stream_into_fd(self.sock, self.compat)
            .map(Into::into)
            .map_err(|(sock, compat)| refused(TcpStream { sock, compat }))
    }

    /// Reads into `buf` from its start, up to its capacity (a `Vec`'s
    /// length becomes the count read). `Ok(0)`: the peer closed its side.
    /// A buffer without room (zero capacity) reads `Ok(0)` too, which
    /// cannot be told from the end of the stream (tokio does the same):
    /// always read into a buffer with capacity.
    ///
    /// # Cancellation
    /// Cancel-safe: if the future is dropped before it completes (a
    /// `timeout` or `select!` that gave up), no byte is lost. Bytes the
    /// kernel had already received for it are returned, in order, by the
    /// next read on this stream, and so is the end of the stream or an
    /// error (a reset) the kernel had already reported to it.
    ///
    /// # Example
    /// See [`TcpStream`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// # let (peer, _) = l.accept().await?;
    /// # peer.write_all_owned("hi").await.0?;
    /// let (n, buf) = s.read_owned(Vec::with_capacity(16)).await;
    /// assert_eq!(buf.len(), n?);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn read_owned<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.recv(buf).await
    }

    /// Writes some of `buf`'s bytes; how many is the result.
    ///
    /// # Cancellation
    /// If the future is dropped before it completes, the byte stream keeps
    /// no hole and no reordering: with io_uring a send already in flight is
    /// finished by the runtime (all of its bytes are sent, unless the
    /// connection fails) before the next write on this stream goes out;
    /// with the fallback backend a dropped write has sent nothing beyond
    /// what an earlier completed call reported. Either way, whether the
    /// bytes of a dropped write were sent is not reported: do not retry
    /// them on the same stream.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (n, _buf) = s.write_owned(b"hello".to_vec()).await;
    /// assert!(n? > 0);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn write_owned<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.send(buf, 0).await
    }

    /// Writes all of `buf`'s bytes.
    ///
    /// # Errors
    /// The first write error, e.g. `BrokenPipe` or `ConnectionReset` once
    /// the peer is gone.
    ///
    /// # Cancellation
    /// Not cancel-safe in the way `write` is, as with tokio: dropped part
    /// way, it has sent a prefix of `buf` whose length is not reported (the
    /// stream itself keeps no hole or reordering; see
    /// [`write`](Self::write_owned)).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// s.write_all_owned(vec![7u8; 1000]).await.0?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn write_all_owned<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        self.sock.send_all(buf).await
    }

    /// Waits until the stream is readable: [`try_read`](Self::try_read)
    /// then finds data, the end of the stream or an error (or, rarely,
    /// `WouldBlock` again: call both in a loop, as with tokio).
    ///
    /// # Cancellation
    /// Cancel-safe: it takes nothing from the stream.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// # let (peer, _) = l.accept().await?;
    /// # peer.write_all_owned("hello").await.0?;
    /// let mut buf = [0u8; 64];
    /// let n = loop {
    ///     s.readable().await?;
    ///     match s.try_read(&mut buf) {
    ///         Ok(n) => break n,
    ///         Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
    ///         Err(e) => return Err(e),
    ///     }
    /// };
    /// assert_eq!(&buf[..n], b"hello");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    /// Waits until the stream is writable: [`try_write`](Self::try_write)
    /// then sends at least one byte (or reports an error), unless another
    /// writer came first. With io_uring, bytes that dropped writes left to
    /// send are sent first.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// s.writable().await?;
    /// assert_eq!(s.try_write(b"hi")?, 2);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    /// Waits until the stream is ready for any of `interest` (an error or
    /// a hang-up ends the wait too) and says what it reported, as tokio's
    /// `ready`: one wait for reading and writing at once, and the closed
    /// states ([`Ready::is_read_closed`]: the peer shut down its writing).
    /// What dropped operations left (io_uring) is handled first, as by
    /// [`readable`](Self::readable) and [`writable`](Self::writable): a
    /// read outcome they left is reported as readable.
    ///
    /// # Cancellation
    /// Cancel-safe: it takes nothing from the stream.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (peer, _) = l.accept().await?;
    /// peer.shutdown_with(std::net::Shutdown::Write)?;
    /// let ready = s.ready(Interest::READABLE | Interest::WRITABLE).await?;
    /// assert!(ready.is_writable());
    /// let ready = s.ready(Interest::READABLE).await?;
    /// assert!(ready.is_readable() && ready.is_read_closed());
    /// assert_eq!(s.try_read(&mut [0u8; 8])?, 0);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// Reads into `buf` without waiting; `WouldBlock` if nothing is there
    /// (wait with [`readable`](Self::readable)). `Ok(0)`: the peer closed
    /// its side (or `buf` is empty).
    ///
    /// Bytes, an end of stream or an error that reads dropped in flight
    /// left (io_uring) come first, in order; while such a read's outcome
    /// is still unknown this returns `WouldBlock`, and `readable` waits for
    /// it. Bytes buffered by the `AsyncRead` implementation are not seen
    /// here: use one way of reading per stream.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let err = s.try_read(&mut [0u8; 16]).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.try_recv(buf)
    }

    /// Writes some of `buf` without waiting; how many is the result.
    /// `WouldBlock` if the send buffer is full (wait with
    /// [`writable`](Self::writable)), and also while writes dropped in
    /// flight (io_uring) are still sending or left bytes to send, which go
    /// first.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (peer, _) = l.accept().await?;
    /// assert_eq!(s.try_write(b"hey")?, 3);
    /// let (n, buf) = peer.read_owned(Vec::with_capacity(8)).await;
    /// assert_eq!(&buf[..n?], b"hey");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.try_send(buf)
    }

    /// Shuts down the read side, the write side, or both, at once (std's
    /// `shutdown`). Named apart so that it does not hide the asynchronous
    /// `shutdown()` of tokio's `AsyncWriteExt` (`tokio-io` feature), which
    /// shuts the write side down as well, after what owned writes dropped
    /// in flight left to send (bytes the `AsyncWrite` adapters reported
    /// written are in the kernel already); futures' `AsyncWriteExt::close`
    /// does the same.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// s.shutdown_with(std::net::Shutdown::Write)?;
    /// let (peer, _) = l.accept().await?;
    /// assert_eq!(peer.read_owned(Vec::with_capacity(8)).await.0?, 0);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[doc(alias = "shutdown")]
    pub fn shutdown_with(&self, how: Shutdown) -> io::Result<()> {
        self.sock.shutdown(how)
    }

    /// Sets `TCP_NODELAY` (no Nagle delay for small writes).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// s.set_nodelay(true)?;
    /// assert!(s.nodelay()?);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        with_std(self.sock.raw(), |s: &std::net::TcpStream| {
            s.set_nodelay(nodelay)
        })
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Example
    /// See [`set_nodelay`](Self::set_nodelay).
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let _ = s.nodelay()?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        with_std(self.sock.raw(), std::net::TcpStream::nodelay)
    }

    /// The remote address.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// assert_eq!(s.peer_addr()?, l.local_addr()?);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::peer_addr)
    }

    /// The local address.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// assert!(s.local_addr()?.ip().is_loopback());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::local_addr)
    }

    /// Waits for data and copies it into `buf` without taking it from the
    /// stream: the next read returns the same bytes. `Ok(0)`: the peer
    /// closed its side (or `buf` is empty). As for
    /// [`try_read`](Self::try_read), bytes that reads dropped in flight left
    /// (io_uring) come first, and bytes buffered by the `AsyncRead`
    /// implementation are not seen.
    ///
    /// # Cancellation
    /// Cancel-safe: it takes nothing from the stream.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (peer, _) = l.accept().await?;
    /// peer.write_all_owned("abc").await.0?;
    /// let mut buf = [0u8; 8];
    /// let n = s.peek(&mut buf).await?;
    /// assert_eq!(&buf[..n], b"abc");
    /// assert_eq!(s.try_read(&mut buf)?, 3); // still there
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.peek(buf).await
    }

    /// The poll-based form of [`peek`](Self::peek): `Ready` with what it
    /// copied, or `Pending` with `cx`'s waker registered for readability
    /// (only the task that polled last is woken).
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::TcpStream) -> std::io::Result<usize> {
    ///     let mut buf = [0u8; 8];
    ///     std::future::poll_fn(|cx| s.poll_peek(cx, &mut buf)).await
    /// }
    /// ```
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.sock.poll_peek(cx, buf)
    }

    /// Polls for read readiness, as tokio's `poll_read_ready`: `Ready(Ok)`
    /// once a read would not block, else `Pending` with `cx`'s waker
    /// registered (only the task that polled last is woken). Readiness is
    /// not cached: while the stream stays readable, each poll says so.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::TcpStream) -> std::io::Result<usize> {
    ///     let mut buf = [0u8; 8];
    ///     loop {
    ///         std::future::poll_fn(|cx| s.poll_read_ready(cx)).await?;
    ///         match s.try_read(&mut buf) {
    ///             Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
    ///             r => return r,
    ///         }
    ///     }
    /// }
    /// ```
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sock.poll_ready(cx, Direction::Read).map_ok(drop)
    }

    /// Polls for write readiness, as [`poll_read_ready`](Self::poll_read_ready)
    /// for writing.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::TcpStream) -> std::io::Result<()> {
    ///     std::future::poll_fn(|cx| s.poll_write_ready(cx)).await
    /// }
    /// ```
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sock.poll_ready(cx, Direction::Write).map_ok(drop)
    }

    /// As [`try_read`](Self::try_read), into several buffers in order.
    ///
    /// # Example
    /// ```
    /// use std::io::IoSliceMut;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (peer, _) = l.accept().await?;
    /// peer.write_all_owned("abcdef").await.0?;
    /// s.readable().await?;
    /// let (mut a, mut b) = ([0u8; 2], [0u8; 8]);
    /// let n = s.try_read_vectored(&mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)])?;
    /// assert_eq!((n, &a, &b[..4]), (6, b"ab", &b"cdef"[..]));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.sock.try_recv_vectored(bufs)
    }

    /// As [`try_write`](Self::try_write), from several buffers in order.
    ///
    /// # Example
    /// ```
    /// use std::io::IoSlice;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (peer, _) = l.accept().await?;
    /// assert_eq!(s.try_write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")])?, 4);
    /// let (n, buf) = peer.read_owned(Vec::with_capacity(8)).await;
    /// assert_eq!(&buf[..n?], b"abcd");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.sock.try_send_vectored(bufs)
    }

    /// Splits into a read half and a write half that borrow the stream,
    /// for reading and writing at the same time within one task (tokio's
    /// `split`); they implement the stream's read and write traits. Bytes
    /// the `AsyncRead` implementation buffered stay with the stream and go
    /// to the read half.
    ///
    /// # Example
    /// ```
    /// use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let mut s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (mut peer, _) = l.accept().await?;
    /// let (mut read, mut write) = s.split();
    /// let copy = async move {
    ///     let mut buf = [0u8; 4];
    ///     peer.read_exact(&mut buf).await?;
    ///     peer.write_all(&buf).await
    /// };
    /// let mut got = [0u8; 4];
    /// let ((), (), ()) = futures_lite::future::try_zip(
    ///     futures_lite::future::try_zip(write.write_all(b"ping"), read.read_exact(&mut got)),
    ///     copy,
    /// )
    /// .await
    /// .map(|((a, b), c)| (a, b, c))?;
    /// assert_eq!(&got, b"ping");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        let (read, write) = self.compat.sides();
        split::split(&self.sock, read, write)
    }

    /// Splits into a read half and a write half that can move to different
    /// tasks (they implement `AsyncRead` and `AsyncWrite` respectively).
    /// Dropping the write half shuts down the write side;
    /// [`OwnedReadHalf::reunite`] puts the stream back together. Bytes the
    /// `AsyncRead` implementation buffered go to the read half.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (read, write) = s.into_split();
    /// fairlane::spawn(async move { write.write_all_owned("x").await.0 });
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let (read, write) = self.compat.into_halves();
        (
            OwnedReadHalf::new(self.sock.clone(), read),
            OwnedWriteHalf::new(self.sock, write),
        )
    }

    /// A stream from the parts of its owned halves ([`OwnedReadHalf::reunite`]).
    pub(super) fn from_parts(sock: Arc<Socket>, compat: Compat) -> TcpStream {
        TcpStream { compat, sock }
    }
}

impl_async_io!(TcpStream);

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.raw()
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("fd", &self.sock.raw())
            .finish()
    }
}
