//! A [`UnixStream`](super::UnixStream) split into borrowed halves: [`ReadHalf`] and
//! [`WriteHalf`] ([`UnixStream::split`](super::UnixStream::split)), usable at the same time (in one
//! task, e.g. with `join`) without moving the stream.

use std::fmt;
use std::io;
use std::os::unix::net::SocketAddr;
use std::sync::Arc;

use crate::io::{Interest, Ready};
use crate::net::socket::{with_std, Socket};
use crate::net::stream::{impl_async_read, impl_async_write, ReadSide, WriteSide};

/// The read half of a [`UnixStream`](super::UnixStream) borrowed by [`UnixStream::split`](super::UnixStream::split): it
/// implements the stream's read traits and its reading methods.
///
/// # Example
/// ```
/// use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let (mut s, mut peer) = fairlane::net::UnixStream::pair()?;
/// let (mut read, mut write) = s.split();
/// write.write_all(b"ping").await?;
/// let mut got = [0u8; 4];
/// peer.read_exact(&mut got).await?;
/// peer.write_all(&got).await?;
/// read.read_exact(&mut got).await?;
/// assert_eq!(&got, b"ping");
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ReadHalf<'a> {
    compat: &'a mut ReadSide,
    sock: &'a Arc<Socket>,
}

/// The write half of a [`UnixStream`](super::UnixStream) borrowed by [`UnixStream::split`](super::UnixStream::split):
/// it implements the stream's write traits and its writing methods.
/// Shutting it down (`close`, or tokio's `shutdown`) shuts down the
/// stream's write side; dropping it does not.
///
/// # Example
/// See [`ReadHalf`].
/// ```
/// async fn f(w: &mut fairlane::net::unix::WriteHalf<'_>) -> std::io::Result<()> {
///     futures_lite::io::AsyncWriteExt::write_all(w, b"x").await
/// }
/// ```
pub struct WriteHalf<'a> {
    compat: &'a mut WriteSide,
    sock: &'a Arc<Socket>,
}

/// Splits `sock` and its adapters' sides into borrowed halves.
pub(super) fn split<'a>(
    sock: &'a Arc<Socket>,
    read: &'a mut ReadSide,
    write: &'a mut WriteSide,
) -> (ReadHalf<'a>, WriteHalf<'a>) {
    (
        ReadHalf { compat: read, sock },
        WriteHalf {
            compat: write,
            sock,
        },
    )
}

impl ReadHalf<'_> {
    /// As [`UnixStream::ready`](super::UnixStream::ready).
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::unix::ReadHalf<'_>) -> std::io::Result<()> {
    ///     r.ready(fairlane::io::Interest::READABLE).await.map(drop)
    /// }
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`UnixStream::readable`](super::UnixStream::readable).
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::unix::ReadHalf<'_>) -> std::io::Result<()> { r.readable().await }
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    /// As [`UnixStream::try_read`](super::UnixStream::try_read).
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::unix::ReadHalf<'_>) -> std::io::Result<usize> { r.try_read(&mut [0u8; 8]) }
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.try_recv(buf)
    }

    /// As [`UnixStream::try_read_vectored`](super::UnixStream::try_read_vectored).
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::unix::ReadHalf<'_>) -> std::io::Result<usize> {
    ///     let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
    ///     r.try_read_vectored(&mut [std::io::IoSliceMut::new(&mut a), std::io::IoSliceMut::new(&mut b)])
    /// }
    /// ```
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.sock.try_recv_vectored(bufs)
    }

    /// As [`UnixStream::peer_addr`](super::UnixStream::peer_addr).
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::unix::ReadHalf<'_>) -> std::io::Result<std::os::unix::net::SocketAddr> { r.peer_addr() }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::peer_addr)
    }

    /// As [`UnixStream::local_addr`](super::UnixStream::local_addr).
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::unix::ReadHalf<'_>) -> std::io::Result<std::os::unix::net::SocketAddr> { r.local_addr() }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::local_addr)
    }
}

impl WriteHalf<'_> {
    /// As [`UnixStream::ready`](super::UnixStream::ready).
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::unix::WriteHalf<'_>) -> std::io::Result<()> {
    ///     w.ready(fairlane::io::Interest::WRITABLE).await.map(drop)
    /// }
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`UnixStream::writable`](super::UnixStream::writable).
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::unix::WriteHalf<'_>) -> std::io::Result<()> { w.writable().await }
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    /// As [`UnixStream::try_write`](super::UnixStream::try_write).
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::unix::WriteHalf<'_>) -> std::io::Result<usize> { w.try_write(b"x") }
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.try_send(buf)
    }

    /// As [`UnixStream::try_write_vectored`](super::UnixStream::try_write_vectored).
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::unix::WriteHalf<'_>) -> std::io::Result<usize> {
    ///     w.try_write_vectored(&[std::io::IoSlice::new(b"a"), std::io::IoSlice::new(b"b")])
    /// }
    /// ```
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.sock.try_send_vectored(bufs)
    }

    /// As [`UnixStream::peer_addr`](super::UnixStream::peer_addr).
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::unix::WriteHalf<'_>) -> std::io::Result<std::os::unix::net::SocketAddr> { w.peer_addr() }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::peer_addr)
    }

    /// As [`UnixStream::local_addr`](super::UnixStream::local_addr).
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::unix::WriteHalf<'_>) -> std::io::Result<std::os::unix::net::SocketAddr> { w.local_addr() }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::local_addr)
    }
}

impl_async_read!(ReadHalf<'_>);
impl_async_write!(WriteHalf<'_>);

impl fmt::Debug for ReadHalf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadHalf")
            .field("fd", &self.sock.raw())
            .finish()
    }
}

impl fmt::Debug for WriteHalf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteHalf")
            .field("fd", &self.sock.raw())
            .finish()
    }
}
