//! Readiness, poll-based I/O, the pending error and shutdown of a
//! [`UnixDatagram`], with tokio's names: `ready`, `poll_send_ready`/
//! `poll_recv_ready`, `poll_send`/`poll_send_to`, `poll_recv`/
//! `poll_recv_from` (these two fill tokio's `ReadBuf`, so they come with
//! the `tokio-io` feature), `take_error`, `shutdown`.
//!
//! A poll-based call keeps its io_uring `POLL_ADD` in the socket between
//! polls, one per direction: only the task that polled a direction last is
//! woken.

use std::io;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::task::{Context, Poll};

use super::socket::{take_error, SockAddrBuf};
use super::UnixDatagram;
use crate::io::reactor::Direction;
use crate::io::{Interest, Ready};

impl UnixDatagram {
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
    /// let (a, b) = fairlane::net::UnixDatagram::pair()?;
    /// assert!(a.ready(Interest::WRITABLE).await?.is_writable());
    /// a.send(b"x").await?;
    /// assert!(b.ready(Interest::READABLE).await?.is_readable());
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
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<()> {
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
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<()> {
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
    /// let (a, b) = fairlane::net::UnixDatagram::pair()?;
    /// assert_eq!(std::future::poll_fn(|cx| a.poll_send(cx, b"hi")).await?, 2);
    /// assert_eq!(b.recv(&mut [0u8; 8]).await?, 2);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.sock.poll_io(cx, Direction::Write, || {
            self.sock.try_send_to_sockaddr(buf, None)
        })
    }

    /// The poll-based form of [`send_to`](Self::send_to): one datagram to
    /// the socket bound at `target`, or `Pending` while the send buffer is
    /// full.
    ///
    /// # Errors
    /// `InvalidInput` for a path a Unix-domain address cannot hold; the
    /// operating system's error otherwise.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<usize> {
    ///     std::future::poll_fn(|cx| s.poll_send_to(cx, b"hi", "/tmp/peer.sock")).await
    /// }
    /// ```
    pub fn poll_send_to<P: AsRef<Path>>(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: P,
    ) -> Poll<io::Result<usize>> {
        let sa = SockAddrBuf::from_path(target.as_ref())?;
        self.sock.poll_io(cx, Direction::Write, || {
            self.sock.try_send_to_sockaddr(buf, Some(&sa))
        })
    }

    /// Takes the socket's pending error (`SO_ERROR`); `None` if there is
    /// none.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = fairlane::net::UnixDatagram::pair()?;
    /// assert!(a.take_error()?.is_none());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        take_error(self.as_raw_fd())
    }

    /// Shuts down the read side, the write side, or both, at once: after
    /// `Shutdown::Write` sends fail with `BrokenPipe`; after
    /// `Shutdown::Read` receives return `Ok(0)` once the queue is empty.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = fairlane::net::UnixDatagram::pair()?;
    /// a.shutdown(std::net::Shutdown::Write)?;
    /// assert_eq!(a.try_send(b"x").unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.shutdown(how)
    }
}

/// The `ReadBuf` forms, with tokio's `ReadBuf` (feature `tokio-io`).
#[cfg(feature = "tokio-io")]
impl UnixDatagram {
    /// The poll-based form of [`recv`](Self::recv): one datagram into
    /// `buf`'s unfilled part (cut to fit), or `Pending` while none is
    /// there.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, b) = fairlane::net::UnixDatagram::pair()?;
    /// a.send(b"hello").await?;
    /// let mut space = [0u8; 16];
    /// let mut buf = tokio::io::ReadBuf::new(&mut space);
    /// std::future::poll_fn(|cx| b.poll_recv(cx, &mut buf)).await?;
    /// assert_eq!(buf.filled(), b"hello");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_recv_from(cx, buf).map_ok(drop)
    }

    /// The poll-based form of [`recv_from`](Self::recv_from): as
    /// [`poll_recv`](Self::poll_recv), with the sender's address.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UnixDatagram) -> std::io::Result<std::os::unix::net::SocketAddr> {
    ///     let mut space = [0u8; 1500];
    ///     let mut buf = tokio::io::ReadBuf::new(&mut space);
    ///     std::future::poll_fn(|cx| s.poll_recv_from(cx, &mut buf)).await
    /// }
    /// ```
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<std::os::unix::net::SocketAddr>> {
        let out = buf.initialize_unfilled();
        let (n, from) = std::task::ready!(self
            .sock
            .poll_io(cx, Direction::Read, || self.sock.try_receive_datagram(out)))?;
        buf.advance(n);
        Poll::Ready(from.unix_addr())
    }
}
