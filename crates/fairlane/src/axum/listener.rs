//! What [`serve`](super::serve) accepts connections from: the [`Listener`]
//! trait, its implementations for fairlane's TCP and Unix listeners (which
//! wait out accept errors instead of returning them), and
//! [`ListenerExt::tap_io`].

use std::fmt;
use std::future::Future;
use std::io;
use std::time::Duration;

use crate::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// How long the accept loop waits after an error that is not about the one
/// connection being accepted (running out of descriptors, above all) before
/// it accepts again: the error would otherwise come back at once, and the
/// connections that finish meanwhile free what it lacks.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// A source of connections for [`serve`](super::serve): axum's
/// `axum::serve::Listener`, for streams with hyper's I/O traits (fairlane's
/// streams have them) instead of tokio's.
///
/// # Example
/// A listener handing out the connections of another one, counted:
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use fairlane::axum::Listener;
///
/// struct Counted<L> {
///     inner: L,
///     accepted: Arc<AtomicUsize>,
/// }
///
/// impl<L: Listener> Listener for Counted<L> {
///     type Io = L::Io;
///     type Addr = L::Addr;
///
///     async fn accept(&mut self) -> (Self::Io, Self::Addr) {
///         let accepted = self.inner.accept().await;
///         self.accepted.fetch_add(1, Ordering::Relaxed);
///         accepted
///     }
///
///     fn local_addr(&self) -> std::io::Result<Self::Addr> {
///         self.inner.local_addr()
///     }
/// }
/// # fn _f(l: fairlane::net::TcpListener) {
/// #     let app: axum::Router = axum::Router::new();
/// #     let _ = fairlane::axum::serve(Counted { inner: l, accepted: Arc::default() }, app);
/// # }
/// ```
pub trait Listener: Send + 'static {
    /// The connections' stream type.
    type Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;

    /// The peers' address type.
    type Addr: Send;

    /// Waits for the next connection. An error is not returned: the
    /// implementation deals with it (fairlane's listeners retry at once
    /// after an error about the one connection, and otherwise report the
    /// error as a `tracing` event at error level and wait a second before
    /// accepting again).
    ///
    /// # Example
    /// ```
    /// use fairlane::axum::Listener;
    /// async fn first(mut listener: fairlane::net::TcpListener) -> std::net::SocketAddr {
    ///     // The trait's method, not `TcpListener::accept`, which returns a `Result`.
    ///     let (_stream, peer) = Listener::accept(&mut listener).await;
    ///     peer
    /// }
    /// ```
    fn accept(&mut self) -> impl Future<Output = (Self::Io, Self::Addr)> + Send;

    /// The address it listens on.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let listener = rt.block_on(fairlane::net::TcpListener::bind("127.0.0.1:0"))?;
    /// let addr = fairlane::axum::Listener::local_addr(&listener)?;
    /// assert_ne!(addr.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    fn local_addr(&self) -> io::Result<Self::Addr>;
}

impl Listener for TcpListener {
    type Io = TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (TcpStream, std::net::SocketAddr) {
        loop {
            match TcpListener::accept(self).await {
                Ok(accepted) => return accepted,
                Err(e) => accept_error(e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        TcpListener::local_addr(self)
    }
}

impl Listener for UnixListener {
    type Io = UnixStream;
    type Addr = std::os::unix::net::SocketAddr;

    async fn accept(&mut self) -> (UnixStream, std::os::unix::net::SocketAddr) {
        loop {
            match UnixListener::accept(self).await {
                Ok(accepted) => return accepted,
                Err(e) => accept_error(e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<std::os::unix::net::SocketAddr> {
        UnixListener::local_addr(self)
    }
}

/// Waits out an accept error: at once for one that concerns only the
/// connection being accepted, [`ACCEPT_BACKOFF`] for the others (reported
/// at error level: a server out of descriptors wants its operator to
/// know).
async fn accept_error(e: io::Error) {
    if is_connection_error(&e) {
        tracing::debug!("accept: {e}; accepting the next connection");
        return;
    }
    tracing::error!("accept error: {e}; accepting again in {ACCEPT_BACKOFF:?}");
    crate::time::sleep(ACCEPT_BACKOFF).await;
}

/// Whether an accept error is about the connection being accepted, which
/// the next accept does not meet again.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Extensions of every [`Listener`] (axum's `ListenerExt`).
pub trait ListenerExt: Listener + Sized {
    /// A listener that calls `tap` on every connection it accepts, before
    /// handing it on (to set socket options, for one).
    ///
    /// # Example
    /// ```
    /// use axum::{routing::get, Router};
    /// use fairlane::axum::ListenerExt;
    ///
    /// async fn run() -> std::io::Result<()> {
    ///     let app = Router::new().route("/", get(|| async { "hi" }));
    ///     let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
    ///         .await?
    ///         .tap_io(|stream| {
    ///             if let Err(e) = stream.set_nodelay(true) {
    ///                 tracing::warn!("TCP_NODELAY: {e}");
    ///             }
    ///         });
    ///     fairlane::axum::serve(listener, app).await
    /// }
    /// ```
    fn tap_io<F>(self, tap: F) -> TapIo<Self, F>
    where
        F: FnMut(&mut Self::Io) + Send + 'static,
    {
        TapIo {
            listener: self,
            tap,
        }
    }
}

impl<L: Listener> ListenerExt for L {}

/// The listener [`ListenerExt::tap_io`] makes.
///
/// # Example
/// ```
/// use fairlane::axum::{ListenerExt, TapIo};
/// use fairlane::net::{TcpListener, TcpStream};
///
/// fn nodelay(listener: TcpListener) -> TapIo<TcpListener, fn(&mut TcpStream)> {
///     listener.tap_io(|stream| drop(stream.set_nodelay(true)))
/// }
/// ```
pub struct TapIo<L, F> {
    listener: L,
    tap: F,
}

impl<L: fmt::Debug, F> fmt::Debug for TapIo<L, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TapIo")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl<L, F> Listener for TapIo<L, F>
where
    L: Listener,
    F: FnMut(&mut L::Io) + Send + 'static,
{
    type Io = L::Io;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (L::Io, L::Addr) {
        let (mut io, addr) = self.listener.accept().await;
        (self.tap)(&mut io);
        (io, addr)
    }

    fn local_addr(&self) -> io::Result<L::Addr> {
        self.listener.local_addr()
    }
}
