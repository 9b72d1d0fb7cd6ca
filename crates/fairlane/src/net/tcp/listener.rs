//! [`TcpListener`] and its [`Incoming`] stream of connections.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use super::TcpStream;
use crate::net::addr::{resolve, ToSocketAddrs};
use crate::net::into_std::refused;
use crate::net::socket::{with_std, Socket};

/// A TCP socket listening for connections.
///
/// # Example
/// ```
/// use fairlane::net::{TcpListener, TcpStream};
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await?;
///     let addr = listener.local_addr()?;
///     let client = fairlane::spawn(async move { TcpStream::connect(addr).await });
///     let (_server_side, peer) = listener.accept().await?;
///     let client = client.await.unwrap()?;
///     assert_eq!(peer, client.local_addr()?);
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpListener {
    sock: Socket,
}

impl TcpListener {
    /// Binds to `addr` (the first of its addresses that works; a host name
    /// is resolved on the blocking pool), with `SO_REUSEADDR` as std does.
    ///
    /// # Errors
    /// The operating system's error of the last address tried, e.g.
    /// `AddrInUse`.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let listener = rt.block_on(fairlane::net::TcpListener::bind("localhost:0"))?;
    /// assert!(listener.local_addr()?.ip().is_loopback());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        let mut last = None;
        for addr in resolve(addr).await? {
            match std::net::TcpListener::bind(addr) {
                Ok(l) => return TcpListener::from_std(l),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("resolve returns at least one address"))
    }

    /// Adopts a std listener (which must be bound and listening).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let listener = rt.block_on(async { fairlane::net::TcpListener::from_std(std_listener) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener {
            sock: Socket::listener_from_fd(OwnedFd::from(listener))?,
        })
    }

    /// Turns it into a std listener (non-blocking, as tokio leaves it),
    /// no longer part of the runtime.
    ///
    /// # Errors
    /// None in practice (a listener keeps nothing in the runtime); the
    /// shape is that of the streams' [`TcpStream::into_std`].
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let listener = rt.block_on(fairlane::net::TcpListener::bind("127.0.0.1:0"))?;
    /// let addr = listener.local_addr()?;
    /// let std_listener = listener.into_std()?;
    /// assert_eq!(std_listener.local_addr()?, addr);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        self.sock
            .into_fd()
            .map(Into::into)
            .map_err(|sock| refused(TcpListener { sock }))
    }

    /// Waits for a connection; returns it with the peer's address.
    ///
    /// A connection that the peer reset or abandoned before it was accepted
    /// does not make `accept` fail: it is returned (with its address; its
    /// first read reports the reset) or skipped for the next one.
    ///
    /// # Errors
    /// - Out of resources: `EMFILE`/`ENFILE` (no descriptor left for the
    ///   process or the system), `ENOBUFS`/`ENOMEM`. The connection stays
    ///   queued and the listener stays ready, so an `accept` right after
    ///   fails the same way: a server should not give up on the listener
    ///   but wait a little (say 100 ms, with [`fairlane::time::sleep`]),
    ///   report the error once per wait, and try again; connections that
    ///   finish meanwhile free descriptors.
    /// - Other errors concern one incoming connection (e.g. `EPERM` from a
    ///   firewall rule): the next `accept` may succeed.
    /// - After the runtime shut down, an error saying so.
    ///
    /// [`fairlane::time::sleep`]: crate::time::sleep
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let addr = listener.local_addr()?;
    /// std::thread::spawn(move || std::net::TcpStream::connect(addr));
    /// let (stream, peer) = listener.accept().await?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Cancellation
    /// Cancel-safe: a dropped `accept` takes no connection from the
    /// listener; the next `accept` returns it.
    ///
    /// A server loop that survives running out of descriptors:
    /// ```
    /// use std::time::Duration;
    /// async fn serve(listener: fairlane::net::TcpListener) {
    ///     loop {
    ///         match listener.accept().await {
    ///             Ok((stream, _peer)) => {
    ///                 fairlane::spawn(async move { drop(stream) });
    ///             }
    ///             Err(e) if matches!(
    ///                 e.raw_os_error(),
    ///                 Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    ///             ) => {
    ///                 eprintln!("accept: {e}; retrying in 100 ms");
    ///                 fairlane::time::sleep(Duration::from_millis(100)).await;
    ///             }
    ///             Err(e) => eprintln!("accept: {e}"),
    ///         }
    ///     }
    /// }
    /// ```
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (fd, addr) = self.sock.accept().await?;
        let stream = TcpStream::from_socket(Socket::from_fd(fd)?);
        // From accept4: `getpeername` fails for a connection already reset.
        let peer = addr.ip_addr()?;
        Ok((stream, peer))
    }

    /// The poll-based form of [`accept`](Self::accept), as tokio's
    /// `poll_accept`: `Ready` with a connection, or `Pending` with `cx`'s
    /// waker registered while none waits (only the task that polled last
    /// is woken).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = fairlane::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_stream, peer) = std::future::poll_fn(|cx| listener.poll_accept(cx)).await?;
    /// assert_eq!(peer, client.local_addr()?);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (fd, addr) = std::task::ready!(self.sock.poll_accept(cx))?;
        let stream = TcpStream::from_socket(Socket::from_fd(fd)?);
        Poll::Ready(Ok((stream, addr.ip_addr()?)))
    }

    /// The connections as they come, as a [`futures_core::Stream`] that
    /// never ends (each item is one `accept`).
    ///
    /// # Example
    /// ```
    /// use futures_lite::StreamExt;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let addr = listener.local_addr()?;
    /// std::thread::spawn(move || std::net::TcpStream::connect(addr));
    /// let mut incoming = listener.incoming();
    /// let stream = incoming.next().await.unwrap()?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming {
            listener: self,
            accept: None,
        }
    }

    /// The address it listens on.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let listener = rt.block_on(fairlane::net::TcpListener::bind("127.0.0.1:0"))?;
    /// assert_ne!(listener.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::net::TcpListener::local_addr)
    }
}

type AcceptFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = io::Result<(TcpStream, SocketAddr)>> + Send + 'a>,
>;

/// The stream of [`TcpListener::incoming`].
///
/// # Example
/// ```
/// async fn serve(listener: fairlane::net::TcpListener) {
///     use futures_lite::StreamExt;
///     let mut incoming = listener.incoming();
///     while let Some(Ok(stream)) = incoming.next().await {
///         fairlane::spawn(async move { drop(stream) });
///     }
/// }
/// ```
pub struct Incoming<'a> {
    listener: &'a TcpListener,
    accept: Option<AcceptFuture<'a>>,
}

impl futures_core::Stream for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let listener = this.listener;
        let accept = this
            .accept
            .get_or_insert_with(|| Box::pin(listener.accept()));
        let result = std::task::ready!(accept.as_mut().poll(cx));
        this.accept = None;
        std::task::Poll::Ready(Some(result.map(|(stream, _)| stream)))
    }
}

impl fmt::Debug for Incoming<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("listener", self.listener)
            .finish_non_exhaustive()
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.raw()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("fd", &self.sock.raw())
            .finish()
    }
}
