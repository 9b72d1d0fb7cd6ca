//! Readiness, poll-based I/O and non-blocking peeks of a [`UdpSocket`],
//! with tokio's names: `ready`, `poll_send_ready`/`poll_recv_ready`,
//! `poll_send`/`poll_send_to`, `poll_recv`/`poll_recv_from`/`poll_peek`/
//! `poll_peek_from` (these four fill tokio's `ReadBuf`, so they come with
//! the `tokio-io` feature), `peek`, `try_peek`/`try_peek_from`, and the
//! sender-only peeks.
//!
//! A poll-based call keeps its io_uring `POLL_ADD` in the socket between
//! polls, one per direction: only the task that polled a direction last is
//! woken.

use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use super::UdpSocket;
use crate::io::reactor::Direction;
use crate::io::{Interest, Ready};

impl UdpSocket {
    /// Waits until the socket is ready for any of `interest` (an error
    /// ends the wait too) and says what it reported.
    ///
    /// # Cancellation
    /// Cancel-safe: it takes nothing from the socket.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// assert!(s.ready(Interest::WRITABLE).await?.is_writable());
    /// s.send_to(b"x", s.local_addr()?).await?;
    /// assert!(s.ready(Interest::READABLE).await?.is_readable());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// Polls until a datagram can be sent without waiting: `Pending` with
    /// `cx`'s waker registered while the send buffer is full.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<()> {
    ///     std::future::poll_fn(|cx| s.poll_send_ready(cx)).await
    /// }
    /// ```
    pub fn poll_send_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sock.poll_ready(cx, Direction::Write).map_ok(drop)
    }

    /// Polls until a datagram is there to receive: `Pending` with `cx`'s
    /// waker registered while none is.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<()> {
    ///     std::future::poll_fn(|cx| s.poll_recv_ready(cx)).await
    /// }
    /// ```
    pub fn poll_recv_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sock.poll_ready(cx, Direction::Read).map_ok(drop)
    }

    /// The poll-based form of [`send`](Self::send): one datagram to the
    /// connected peer, or `Pending` while the send buffer is full.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// s.connect(s.local_addr()?).await?;
    /// let n = std::future::poll_fn(|cx| s.poll_send(cx, b"hello")).await?;
    /// assert_eq!(n, 5);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.sock
            .poll_io(cx, Direction::Write, || self.sock.try_send_to(buf, None))
    }

    /// The poll-based form of [`send_to`](Self::send_to): one datagram to
    /// `target`, or `Pending` while the send buffer is full.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// let to = s.local_addr()?;
    /// let n = std::future::poll_fn(|cx| s.poll_send_to(cx, b"hello", to)).await?;
    /// assert_eq!(n, 5);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        self.sock.poll_io(cx, Direction::Write, || {
            self.sock.try_send_to(buf, Some(target))
        })
    }

    /// Waits for a datagram and copies it into `buf` without taking it:
    /// the next receive returns it again. A datagram longer than `buf` is
    /// cut to fit (and stays whole in the socket).
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
    /// assert_eq!(s.peek(&mut buf).await?, 4);
    /// assert_eq!(s.recv(&mut buf).await?, 4);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.peek_from(buf).await?.0)
    }

    /// As [`peek_from`](Self::peek_from) without waiting: `WouldBlock` if
    /// no datagram is there. A datagram that a dropped receive left
    /// (io_uring) comes first.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// let err = s.try_peek_from(&mut [0u8; 8]).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.sock.try_peek_from(buf)
    }

    /// As [`try_peek_from`](Self::try_peek_from), without the sender.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<usize> { s.try_peek(&mut [0u8; 1500]) }
    /// ```
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.sock.try_peek_from(buf)?.0)
    }

    /// Waits for a datagram and says who sent it, leaving it queued.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let a = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// let b = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// a.send_to(b"hi", b.local_addr()?).await?;
    /// assert_eq!(b.peek_sender().await?, a.local_addr()?);
    /// assert_eq!(b.recv_from(&mut [0u8; 8]).await?, (2, a.local_addr()?));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn peek_sender(&self) -> io::Result<SocketAddr> {
        std::future::poll_fn(|cx| self.poll_peek_sender(cx)).await
    }

    /// The poll-based form of [`peek_sender`](Self::peek_sender).
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<std::net::SocketAddr> {
    ///     std::future::poll_fn(|cx| s.poll_peek_sender(cx)).await
    /// }
    /// ```
    pub fn poll_peek_sender(&self, cx: &mut Context<'_>) -> Poll<io::Result<SocketAddr>> {
        self.sock
            .poll_io(cx, Direction::Read, || self.try_peek_sender())
    }

    /// The sender of the next datagram, left queued, without waiting;
    /// `WouldBlock` if none is there.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<std::net::SocketAddr> { s.try_peek_sender() }
    /// ```
    pub fn try_peek_sender(&self) -> io::Result<SocketAddr> {
        Ok(self.sock.try_peek_from(&mut [])?.1)
    }
}

/// The `ReadBuf` forms, with tokio's `ReadBuf` (feature `tokio-io`).
#[cfg(feature = "tokio-io")]
impl UdpSocket {
    /// The poll-based form of [`recv`](Self::recv): one datagram from the
    /// connected peer into `buf`'s unfilled part (cut to fit), or `Pending`
    /// while none is there.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let s = fairlane::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// s.connect(s.local_addr()?).await?;
    /// s.send(b"hello").await?;
    /// let mut space = [0u8; 16];
    /// let mut buf = tokio::io::ReadBuf::new(&mut space);
    /// std::future::poll_fn(|cx| s.poll_recv(cx, &mut buf)).await?;
    /// assert_eq!(buf.filled(), b"hello");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_datagram(cx, buf, false).map_ok(drop)
    }

    /// The poll-based form of [`recv_from`](Self::recv_from): as
    /// [`poll_recv`](Self::poll_recv), with the sender.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<std::net::SocketAddr> {
    ///     let mut space = [0u8; 1500];
    ///     let mut buf = tokio::io::ReadBuf::new(&mut space);
    ///     std::future::poll_fn(|cx| s.poll_recv_from(cx, &mut buf)).await
    /// }
    /// ```
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        self.poll_datagram(cx, buf, false)
    }

    /// The poll-based form of [`peek`](Self::peek): as
    /// [`poll_recv`](Self::poll_recv), leaving the datagram queued.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<()> {
    ///     let mut space = [0u8; 1500];
    ///     let mut buf = tokio::io::ReadBuf::new(&mut space);
    ///     std::future::poll_fn(|cx| s.poll_peek(cx, &mut buf)).await
    /// }
    /// ```
    pub fn poll_peek(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_datagram(cx, buf, true).map_ok(drop)
    }

    /// The poll-based form of [`peek_from`](Self::peek_from): as
    /// [`poll_recv_from`](Self::poll_recv_from), leaving the datagram
    /// queued.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<std::net::SocketAddr> {
    ///     let mut space = [0u8; 1500];
    ///     let mut buf = tokio::io::ReadBuf::new(&mut space);
    ///     std::future::poll_fn(|cx| s.poll_peek_from(cx, &mut buf)).await
    /// }
    /// ```
    pub fn poll_peek_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        self.poll_datagram(cx, buf, true)
    }

    /// One datagram received (or peeked at) into `buf`'s unfilled part.
    fn poll_datagram(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
        peek: bool,
    ) -> Poll<io::Result<SocketAddr>> {
        let out = buf.initialize_unfilled();
        let (n, from) = std::task::ready!(self.sock.poll_io(cx, Direction::Read, || {
            if peek {
                self.sock.try_peek_from(out)
            } else {
                self.sock.try_recv_from(out)
            }
        }))?;
        buf.advance(n);
        Poll::Ready(Ok(from))
    }
}
