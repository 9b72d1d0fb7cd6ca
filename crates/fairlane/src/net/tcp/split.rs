//! A [`TcpStream`](super::TcpStream) split into borrowed halves: [`ReadHalf`] and
//! [`WriteHalf`] ([`TcpStream::split`](super::TcpStream::split)), usable at the same time (in one
//! task, e.g. with `join`) without moving the stream.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::io::{Interest, Ready};
use crate::net::socket::{with_std, Socket};
use crate::net::stream::{impl_async_read, impl_async_write, ReadSide, WriteSide};

/// The read half of a [`TcpStream`](super::TcpStream) borrowed by [`TcpStream::split`](super::TcpStream::split): it
/// implements the stream's read traits and its reading methods.
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

/// The write half of a [`TcpStream`](super::TcpStream) borrowed by [`TcpStream::split`](super::TcpStream::split):
/// it implements the stream's write traits and its writing methods.
/// Shutting it down (`close`, or tokio's `shutdown`) shuts down the
/// stream's write side; dropping it does not.
///
/// # Example
/// See [`ReadHalf`].
/// ```
/// async fn f(w: &mut fairlane::net::tcp::WriteHalf<'_>) -> std::io::Result<()> {
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
    /// As [`TcpStream::peek`](super::TcpStream::peek).
    ///
    /// # Example
    /// ```
    /// async fn f(r: &mut fairlane::net::tcp::ReadHalf<'_>) -> std::io::Result<usize> {
    ///     r.peek(&mut [0u8; 8]).await
    /// }
    /// ```
    pub async fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.peek(buf).await
    }

    /// As [`TcpStream::poll_peek`](super::TcpStream::poll_peek).
    ///
    /// # Example
    /// ```
    /// async fn f(r: &mut fairlane::net::tcp::ReadHalf<'_>) -> std::io::Result<usize> {
    ///     let mut buf = [0u8; 8];
    ///     std::future::poll_fn(|cx| r.poll_peek(cx, &mut buf)).await
    /// }
    /// ```
    pub fn poll_peek(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.sock.poll_peek(cx, buf)
    }

    /// As [`TcpStream::ready`](super::TcpStream::ready).
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::tcp::ReadHalf<'_>) -> std::io::Result<()> {
    ///     r.ready(fairlane::io::Interest::READABLE).await.map(drop)
    /// }
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`TcpStream::readable`](super::TcpStream::readable).
    ///
    /// # Example
    /// ```
    /// async fn f(r: &fairlane::net::tcp::ReadHalf<'_>) -> std::io::Result<()> { r.readable().await }
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    /// As [`TcpStream::try_read`](super::TcpStream::try_read).
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::tcp::ReadHalf<'_>) -> std::io::Result<usize> { r.try_read(&mut [0u8; 8]) }
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.try_recv(buf)
    }

    /// As [`TcpStream::try_read_vectored`](super::TcpStream::try_read_vectored).
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::tcp::ReadHalf<'_>) -> std::io::Result<usize> {
    ///     let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
    ///     r.try_read_vectored(&mut [std::io::IoSliceMut::new(&mut a), std::io::IoSliceMut::new(&mut b)])
    /// }
    /// ```
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.sock.try_recv_vectored(bufs)
    }

    /// As [`TcpStream::peer_addr`](super::TcpStream::peer_addr).
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::tcp::ReadHalf<'_>) -> std::io::Result<std::net::SocketAddr> { r.peer_addr() }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::peer_addr)
    }

    /// As [`TcpStream::local_addr`](super::TcpStream::local_addr).
    ///
    /// # Example
    /// ```
    /// fn f(r: &fairlane::net::tcp::ReadHalf<'_>) -> std::io::Result<std::net::SocketAddr> { r.local_addr() }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::local_addr)
    }
}

impl WriteHalf<'_> {
    /// As [`TcpStream::ready`](super::TcpStream::ready).
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::tcp::WriteHalf<'_>) -> std::io::Result<()> {
    ///     w.ready(fairlane::io::Interest::WRITABLE).await.map(drop)
    /// }
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`TcpStream::writable`](super::TcpStream::writable).
    ///
    /// # Example
    /// ```
    /// async fn f(w: &fairlane::net::tcp::WriteHalf<'_>) -> std::io::Result<()> { w.writable().await }
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    /// As [`TcpStream::try_write`](super::TcpStream::try_write).
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::tcp::WriteHalf<'_>) -> std::io::Result<usize> { w.try_write(b"x") }
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.try_send(buf)
    }

    /// As [`TcpStream::try_write_vectored`](super::TcpStream::try_write_vectored).
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::tcp::WriteHalf<'_>) -> std::io::Result<usize> {
    ///     w.try_write_vectored(&[std::io::IoSlice::new(b"a"), std::io::IoSlice::new(b"b")])
    /// }
    /// ```
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.sock.try_send_vectored(bufs)
    }

    /// As [`TcpStream::peer_addr`](super::TcpStream::peer_addr).
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::tcp::WriteHalf<'_>) -> std::io::Result<std::net::SocketAddr> { w.peer_addr() }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::peer_addr)
    }

    /// As [`TcpStream::local_addr`](super::TcpStream::local_addr).
    ///
    /// # Example
    /// ```
    /// fn f(w: &fairlane::net::tcp::WriteHalf<'_>) -> std::io::Result<std::net::SocketAddr> { w.local_addr() }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpStream::local_addr)
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
