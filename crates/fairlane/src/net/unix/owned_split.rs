//! A [`UnixStream`](super::UnixStream) split into owned halves:
//! [`OwnedReadHalf`] and [`OwnedWriteHalf`].

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::sync::Arc;

use super::UnixStream;
use crate::io::{Interest, IoBuf, IoBufMut, Ready};
use crate::net::socket::{with_std, Socket};
use crate::net::stream::{impl_async_read, impl_async_write, Compat, ReadSide, WriteSide};

/// The read half of a [`UnixStream`]; see [`UnixStream::into_split`].
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// # let (s, peer) = fairlane::net::UnixStream::pair()?;
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
    /// let (s, peer) = fairlane::net::UnixStream::pair()?;
    /// let (read, write) = s.into_split();
    /// let s = read.reunite(write).expect("halves of one stream");
    /// s.write_all_owned("whole").await.0?;
    /// let (n, buf) = peer.read_owned(Vec::with_capacity(8)).await;
    /// assert_eq!(&buf[..n?], b"whole");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reunite(self, other: OwnedWriteHalf) -> Result<UnixStream, ReuniteError> {
        if !Arc::ptr_eq(&self.sock, &other.sock) {
            return Err(ReuniteError(self, other));
        }
        let mut other = other;
        other.shutdown_on_drop = false;
        let write = std::mem::take(&mut other.compat);
        drop(other);
        let OwnedReadHalf { compat, sock } = self;
        Ok(UnixStream::from_parts(sock, Compat::join(compat, write)))
    }

    /// As [`UnixStream::ready`].
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::unix::OwnedReadHalf) -> std::io::Result<()> {
    ///     r.ready(fairlane::io::Interest::READABLE).await.map(drop)
    /// }
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`UnixStream::try_read_vectored`].
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::unix::OwnedReadHalf) -> std::io::Result<usize> {
    ///     r.try_read_vectored(&mut [std::io::IoSliceMut::new(&mut [0u8; 8])])
    /// }
    /// ```
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.sock.try_recv_vectored(bufs)
    }

    /// As [`UnixStream::local_addr`].
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::unix::OwnedReadHalf) -> std::io::Result<std::os::unix::net::SocketAddr> { r.local_addr() }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::local_addr)
    }

    /// As [`UnixStream::read_owned`].
    ///
    /// # Example
    /// See [`OwnedReadHalf`].
    /// ```
    /// async fn f(r: &fairlane::net::unix::OwnedReadHalf) { let _ = r.read_owned(vec![0u8; 8]).await; }
    /// ```
    pub async fn read_owned<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.recv(buf).await
    }

    /// As [`UnixStream::readable`].
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::unix::OwnedReadHalf) -> std::io::Result<()> { r.readable().await }
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    /// As [`UnixStream::try_read`].
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::unix::OwnedReadHalf) -> std::io::Result<usize> { r.try_read(&mut [0u8; 8]) }
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.try_recv(buf)
    }

    /// As [`UnixStream::peer_addr`].
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::unix::OwnedReadHalf) -> std::io::Result<std::os::unix::net::SocketAddr> { r.peer_addr() }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::peer_addr)
    }
}

/// The write half of a [`UnixStream`]; dropping it shuts down the write
/// side (the peer reads end-of-stream). See [`UnixStream::into_split`].
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// # let (s, peer) = fairlane::net::UnixStream::pair()?;
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
    /// fn f(r: fairlane::net::unix::OwnedReadHalf, w: fairlane::net::unix::OwnedWriteHalf) -> fairlane::net::UnixStream {
    ///     w.reunite(r).expect("halves of one stream")
    /// }
    /// ```
    pub fn reunite(self, other: OwnedReadHalf) -> Result<UnixStream, ReuniteError> {
        other.reunite(self)
    }

    /// Drops the half without shutting down the write side (dropping it
    /// shuts it down otherwise).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (s, _peer) = fairlane::net::UnixStream::pair()?;
    /// let (read, write) = s.into_split();
    /// write.forget();
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn forget(mut self) {
        self.shutdown_on_drop = false;
    }

    /// As [`UnixStream::ready`].
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::unix::OwnedWriteHalf) -> std::io::Result<()> {
    ///     w.ready(fairlane::io::Interest::WRITABLE).await.map(drop)
    /// }
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`UnixStream::try_write_vectored`].
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::unix::OwnedWriteHalf) -> std::io::Result<usize> {
    ///     w.try_write_vectored(&[std::io::IoSlice::new(b"x")])
    /// }
    /// ```
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.sock.try_send_vectored(bufs)
    }

    /// As [`UnixStream::peer_addr`].
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::unix::OwnedWriteHalf) -> std::io::Result<std::os::unix::net::SocketAddr> { w.peer_addr() }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::peer_addr)
    }

    /// As [`UnixStream::local_addr`].
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::unix::OwnedWriteHalf) -> std::io::Result<std::os::unix::net::SocketAddr> { w.local_addr() }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::local_addr)
    }

    /// As [`UnixStream::write_owned`].
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::unix::OwnedWriteHalf) { let _ = w.write_owned("x").await; }
    /// ```
    pub async fn write_owned<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.send(buf, 0).await
    }

    /// As [`UnixStream::writable`].
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::unix::OwnedWriteHalf) -> std::io::Result<()> { w.writable().await }
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    /// As [`UnixStream::try_write`].
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::unix::OwnedWriteHalf) -> std::io::Result<usize> { w.try_write(b"x") }
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.try_send(buf)
    }

    /// As [`UnixStream::write_all_owned`].
    ///
    /// # Example
    /// See [`OwnedWriteHalf`].
    /// ```
    /// async fn f(w: &fairlane::net::unix::OwnedWriteHalf) { let _ = w.write_all_owned("x").await; }
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
/// let (a, _a_peer) = fairlane::net::UnixStream::pair()?;
/// let (b, _b_peer) = fairlane::net::UnixStream::pair()?;
/// let (a_read, _a_write) = a.into_split();
/// let (_b_read, b_write) = b.into_split();
/// let fairlane::net::unix::ReuniteError(a_read, b_write) = a_read.reunite(b_write).unwrap_err();
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
