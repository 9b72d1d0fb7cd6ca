//! UDP: [`UdpSocket`].

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::addr::{resolve, ToSocketAddrs};
use super::socket::{with_std, Socket};
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
///     a.send_to(b"hi".to_vec(), b.local_addr()?).await.0?;
///     let (result, buf) = b.recv_from(Vec::with_capacity(16)).await;
///     let (n, from) = result?;
///     assert_eq!((&buf[..n], from), (&b"hi"[..], a.local_addr()?));
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    sock: Socket,
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
    /// let (n, _) = s.send_to("ping", s.local_addr()?).await;
    /// assert_eq!(n?, 4);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn send_to<B: IoBuf, A: ToSocketAddrs>(
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
    /// empty one too) is returned by the next `recv_from` (cut to that
    /// buffer's capacity, as any datagram is), and so is an error the
    /// kernel had already reported to it.
    ///
    /// # Example
    /// See [`UdpSocket`].
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// s.send_to("ping", s.local_addr()?).await.0?;
    /// let (r, buf) = s.recv_from(Vec::with_capacity(8)).await;
    /// assert_eq!(r?.0, 4);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn recv_from<B: IoBufMut>(&self, buf: B) -> (io::Result<(usize, SocketAddr)>, B) {
        self.sock.recv_from(buf).await
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
