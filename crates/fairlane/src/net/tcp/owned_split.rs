//! A [`TcpStream`](super::TcpStream) split into owned halves:
//! [`OwnedReadHalf`] and [`OwnedWriteHalf`].

use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::TcpStream;
use crate::io::{Interest, IoBuf, IoBufMut, Ready};
use crate::net::socket::{with_std, Socket};
use crate::net::stream::{impl_async_read, impl_async_write, Compat, ReadSide, WriteSide};

/// The read half of a [`TcpStream`]; see [`TcpStream::into_split`].
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
/// # let (peer, _) = l.accept().await?;
/// # peer.write_all_owned("abc").await.0?;
/// let (read, _write) = s.into_split();
/// let (n, buf) = read.read_owned(Vec::with_capacity(8)).await;
/// assert_eq!(&buf[..n?], b"abc");
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct OwnedReadHalf {
    /// Declared before `sock`: a read the adapter keeps in flight is
    /// cancelled before the descriptor can close.
    compat: ReadSide,
    sock: Arc<Socket>,
}

impl OwnedReadHalf {
    pub(super) fn new(sock: Arc<Socket>, compat: ReadSide) -> OwnedReadHalf {
        OwnedReadHalf { sock, compat }
    }

    /// Puts the stream back together from this half and `other`, the
    /// write half split from the same stream; otherwise both halves come
    /// back in the error. Bytes the read half's `AsyncRead` implementation
    /// buffered stay with the stream.
    ///
    /// # Errors
    /// [`ReuniteError`] if `other` comes from another stream.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let addr = s.local_addr()?;
    /// let (read, write) = s.into_split();
    /// let s = read.reunite(write).expect("halves of one stream");
    /// assert_eq!(s.local_addr()?, addr);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reunite(self, other: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        if !Arc::ptr_eq(&self.sock, &other.sock) {
            return Err(ReuniteError(self, other));
        }
        let mut other = other;
        other.shutdown_on_drop = false;
        let write = std::mem::take(&mut other.compat);
        drop(other);
        let OwnedReadHalf { compat, sock } = self;
        Ok(TcpStream::from_parts(sock, Compat::join(compat, write)))
    }

    /// As [`TcpStream::peek`].
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::tcp::OwnedReadHalf) -> std::io::Result<usize> {
    ///     r.peek(&mut [0u8; 8]).await
    /// }
    /// ```
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.peek(buf).await
    }

    /// As [`TcpStream::poll_peek`].
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::tcp::OwnedReadHalf) -> std::io::Result<usize> {
    ///     let mut buf = [0u8; 8];
    ///     std::future::poll_fn(|cx| r.poll_peek(cx, &mut buf)).await
    /// }
    /// ```
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.sock.poll_peek(cx, buf)
    }

    /// As [`TcpStream::ready`].
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::tcp::OwnedReadHalf) -> std::io::Result<()> {
    ///     r.ready(fairlane::io::Interest::READABLE).await.map(drop)
    /// }
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`TcpStream::try_read_vectored`].
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::tcp::OwnedReadHalf) -> std::io::Result<usize> {
    ///     r.try_read_vectored(&mut [std::io::IoSliceMut::new(&mut [0u8; 8])])
    /// }
    /// ```
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.sock.try_recv_vectored(bufs)
    }

    /// As [`TcpStream::local_addr`].
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::tcp::OwnedReadHalf) -> std::io::Result<std::net::SocketAddr> { r.local_addr() }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::local_addr)
    }

    /// As [`TcpStream::read_owned`].
    ///
    /// # Example
    /// See [`OwnedReadHalf`].
    /// ```
    /// async fn f(r: &fairlane::net::tcp::OwnedReadHalf) { let _ = r.read_owned(vec![0u8; 8]).await; }
    /// ```
    pub async fn read_owned<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.recv(buf).await
    }

    /// As [`TcpStream::readable`].
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::tcp::OwnedReadHalf) -> std::io::Result<()> { r.readable().await }
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    /// As [`TcpStream::try_read`].
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::tcp::OwnedReadHalf) -> std::io::Result<usize> { r.try_read(&mut [0u8; 8]) }
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.try_recv(buf)
    }

    /// As [`TcpStream::peer_addr`].
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::tcp::OwnedReadHalf) -> std::io::Result<std::net::SocketAddr> { r.peer_addr() }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::peer_addr)
    }
}

/// The write half of a [`TcpStream`]; dropping it shuts down the write
/// side (the peer reads end-of-stream). See [`TcpStream::into_split`].
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
/// # let (peer, _) = l.accept().await?;
/// let (_read, write) = s.into_split();
/// write.write_all_owned("abc").await.0?;
/// drop(write);
/// let (n, buf) = peer.read_owned(Vec::with_capacity(8)).await;
/// assert_eq!(&buf[..n?], b"abc");
/// assert_eq!(peer.read_owned(Vec::with_capacity(8)).await.0?, 0);
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct OwnedWriteHalf {
    /// Declared before `sock`: a wait the adapter keeps in flight is
    /// cancelled before the descriptor can close.
    compat: WriteSide,
    sock: Arc<Socket>,
    /// Cleared by [`forget`](Self::forget) and `reunite`.
    shutdown_on_drop: bool,
}

impl OwnedWriteHalf {
    pub(super) fn new(sock: Arc<Socket>, compat: WriteSide) -> OwnedWriteHalf {
        OwnedWriteHalf {
            sock,
            compat,
            shutdown_on_drop: true,
        }
    }

    /// As [`OwnedReadHalf::reunite`].
    ///
    /// # Errors
    /// [`ReuniteError`] if `other` comes from another stream.
    ///
    /// # Example
    /// ```
    /// fn f(r: fairlane::net::tcp::OwnedReadHalf, w: fairlane::net::tcp::OwnedWriteHalf) -> fairlane::net::TcpStream {
    ///     w.reunite(r).expect("halves of one stream")
    /// }
    /// ```
    pub fn reunite(self, other: OwnedReadHalf) -> Result<TcpStream, ReuniteError> {
        other.reunite(self)
    }

    /// Drops the half without shutting down the write side (dropping it
    /// shuts it down otherwise).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// let (read, write) = s.into_split();
    /// write.forget();
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn forget(mut self) {
        self.shutdown_on_drop = false;
    }

    /// As [`TcpStream::ready`].
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::tcp::OwnedWriteHalf) -> std::io::Result<()> {
    ///     w.ready(fairlane::io::Interest::WRITABLE).await.map(drop)
    /// }
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`TcpStream::try_write_vectored`].
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::tcp::OwnedWriteHalf) -> std::io::Result<usize> {
    ///     w.try_write_vectored(&[std::io::IoSlice::new(b"x")])
    /// }
    /// ```
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.sock.try_send_vectored(bufs)
    }

    /// As [`TcpStream::peer_addr`].
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::tcp::OwnedWriteHalf) -> std::io::Result<std::net::SocketAddr> { w.peer_addr() }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::peer_addr)
    }

    /// As [`TcpStream::local_addr`].
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::tcp::OwnedWriteHalf) -> std::io::Result<std::net::SocketAddr> { w.local_addr() }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::local_addr)
    }

    /// As [`TcpStream::write_owned`].
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::tcp::OwnedWriteHalf) { let _ = w.write_owned("x").await; }
    /// ```
    pub async fn write_owned<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.send(buf, 0).await
    }

    /// As [`TcpStream::writable`].
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::tcp::OwnedWriteHalf) -> std::io::Result<()> { w.writable().await }
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    /// As [`TcpStream::try_write`].
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::tcp::OwnedWriteHalf) -> std::io::Result<usize> { w.try_write(b"x") }
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.try_send(buf)
    }

    /// As [`TcpStream::write_all_owned`].
    ///
    /// # Example
    /// See [`OwnedWriteHalf`].
    /// ```
    /// async fn f(w: &fairlane::net::tcp::OwnedWriteHalf) { let _ = w.write_all_owned("x").await; }
    /// ```
    pub async fn write_all_owned<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        self.sock.send_all(buf).await
    }
}

impl_async_read!(OwnedReadHalf);
impl_async_write!(OwnedWriteHalf);

impl fmt::Debug for OwnedReadHalf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedReadHalf")
            .field("fd", &self.sock.raw())
            .finish()
    }
}

impl fmt::Debug for OwnedWriteHalf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedWriteHalf")
            .field("fd", &self.sock.raw())
            .finish()
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            let _ = self.sock.shutdown(Shutdown::Write);
        }
    }
}

/// The halves given to [`OwnedReadHalf::reunite`] came from different
/// streams; both are handed back.
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
/// let a = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
/// let b = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
/// let (a_read, _a_write) = a.into_split();
/// let (_b_read, b_write) = b.into_split();
/// let fairlane::net::tcp::ReuniteError(a_read, b_write) = a_read.reunite(b_write).unwrap_err();
/// # drop((a_read, b_write));
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves that are not from the same socket")
    }
}

impl std::error::Error for ReuniteError {}
