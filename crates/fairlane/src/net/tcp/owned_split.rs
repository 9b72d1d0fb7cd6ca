//! A [`TcpStream`](super::TcpStream) split into owned halves:
//! [`OwnedReadHalf`] and [`OwnedWriteHalf`].

use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;

use crate::io::{IoBuf, IoBufMut};
use crate::net::socket::{with_std, Socket};
use crate::net::stream::{impl_async_read, impl_async_write, Compat};

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
    /// Declared before `sock`: a wait the adapters keep in flight is
    /// cancelled before the descriptor can close.
    compat: Compat,
    sock: Arc<Socket>,
}

impl OwnedReadHalf {
    pub(super) fn new(sock: Arc<Socket>) -> OwnedReadHalf {
        OwnedReadHalf {
            sock,
            compat: Compat::new(),
        }
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
    /// Declared before `sock`: a wait the adapters keep in flight is
    /// cancelled before the descriptor can close.
    compat: Compat,
    sock: Arc<Socket>,
}

impl OwnedWriteHalf {
    pub(super) fn new(sock: Arc<Socket>) -> OwnedWriteHalf {
        OwnedWriteHalf {
            sock,
            compat: Compat::new(),
        }
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
        let _ = self.sock.shutdown(Shutdown::Write);
    }
}
