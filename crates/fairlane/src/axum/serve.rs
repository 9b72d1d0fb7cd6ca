//! [`serve`], the futures it makes, and the accept loop and connection
//! tasks behind them.
//!
//! The accept loop takes a connection from the [`Listener`], asks the make
//! service for the connection's service (with an [`IncomingStream`] that
//! lends it the stream and the peer address), and spawns a fairlane task
//! that serves it with hyper-util's automatic connection: HTTP/1 (with
//! upgrades), or HTTP/2 when the client opens with its preface.
//!
//! With a graceful shutdown, the loop polls the signal beside the accept;
//! once it fires, the loop drops the listener (new connections are refused
//! from then on), raises the [`Drain`] (each connection task asks hyper for
//! its connection's graceful shutdown: an idle connection closes, requests
//! in flight are answered first), and waits for the last connection task.

use std::convert::Infallible;
use std::fmt;
use std::future::{poll_fn, Future, IntoFuture};
use std::io;
use std::marker::PhantomData;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::Response;
use hyper_util::server::conn::auto;
use tower_service::Service;

use super::drain::{Drain, Watch};
use super::service::HyperService;
use super::Listener;

/// Serves `make_service` on the connections `listener` accepts, each in a
/// fairlane task of its own, over HTTP/1 or HTTP/2 (told apart by what the
/// client sends first): axum's `axum::serve`, on fairlane.
///
/// `make_service` is what `axum::serve` takes: a [`Router`](axum::Router),
/// a [`MethodRouter`](axum::routing::MethodRouter), a handler's service
/// (`handler.into_service()`, `handler.with_state(state)`), or any of
/// their `into_make_service()` and
/// `into_make_service_with_connect_info::<SocketAddr>()` (for the
/// [`ConnectInfo`](axum::extract::ConnectInfo) extractor).
///
/// Connections are served by hyper with [`crate::hyper::Executor`] and
/// [`crate::hyper::Timer`], with `axum::serve`'s settings: HTTP/1 without
/// a header read timeout (an idle keep-alive connection stays open until
/// its client closes it), HTTP/2 with extended `CONNECT`.
///
/// Awaiting it serves for ever (the future never completes; an accept error
/// is waited out, see [`Listener::accept`]);
/// [`with_graceful_shutdown`](Serve::with_graceful_shutdown) makes it stop.
///
/// # Example
/// ```no_run
/// use axum::{routing::get, Router};
///
/// #[fairlane::main]
/// async fn main() -> std::io::Result<()> {
///     let app = Router::new().route("/", get(|| async { "Hello, World!" }));
///     let listener = fairlane::net::TcpListener::bind("0.0.0.0:3000").await?;
///     fairlane::axum::serve(listener, app).await
/// }
/// ```
pub fn serve<L, M, S>(listener: L, make_service: M) -> Serve<L, M, S>
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Error = Infallible, Response = S>,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    Serve {
        listener,
        make_service,
        _service: PhantomData,
    }
}

/// The server [`serve`] returns: `.await` it (it is
/// [`IntoFuture`]), or give it a shutdown signal first.
///
/// # Example
/// ```
/// use std::future::IntoFuture;
/// use axum::{routing::get, Router};
///
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let app = Router::new().route("/", get(|| async { "hi" }));
/// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
/// let server: fairlane::axum::Serve<_, _, _> = fairlane::axum::serve(listener, app);
/// println!("listening on {}", server.local_addr()?);
/// fairlane::spawn(server.into_future());
/// # Ok::<(), std::io::Error>(())
/// # })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Serve<L, M, S> {
    listener: L,
    make_service: M,
    _service: PhantomData<fn() -> S>,
}

impl<L: Listener, M, S> Serve<L, M, S> {
    /// The server with a graceful shutdown: once `signal` completes, it
    /// stops accepting (dropping the listener), lets each connection finish
    /// the requests it has in flight (hyper's graceful shutdown: an idle
    /// connection closes at once, HTTP/2 clients are sent `GOAWAY`), and
    /// completes with `Ok(())` when the last connection has closed.
    ///
    /// # Example
    /// ```
    /// use std::future::IntoFuture;
    /// use axum::{routing::get, Router};
    ///
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let app = Router::new().route("/", get(|| async { "hi" }));
    /// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let (stop, stopped) = async_channel::bounded::<()>(1);
    /// let server = fairlane::axum::serve(listener, app).with_graceful_shutdown(async move {
    ///     let _ = stopped.recv().await;
    /// });
    /// let server = fairlane::spawn(server.into_future());
    /// // Later: the signal, then the server's end.
    /// drop(stop);
    /// server.await.unwrap()?;
    /// # Ok::<(), std::io::Error>(())
    /// # })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_graceful_shutdown<F>(self, signal: F) -> WithGracefulShutdown<L, M, S, F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        WithGracefulShutdown {
            listener: self.listener,
            make_service: self.make_service,
            signal,
            _service: PhantomData,
        }
    }

    /// The address the listener listens on.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let app: axum::Router = axum::Router::new();
    /// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = fairlane::axum::serve(listener, app);
    /// assert_ne!(server.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// # })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<L::Addr> {
        self.listener.local_addr()
    }
}

impl<L: fmt::Debug, M: fmt::Debug, S> fmt::Debug for Serve<L, M, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("make_service", &self.make_service)
            .finish()
    }
}

impl<L, M, S> IntoFuture for Serve<L, M, S>
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Error = Infallible, Response = S> + Send + 'static,
    for<'a> <M as Service<IncomingStream<'a, L>>>::Future: Send,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        ServeFuture(Box::pin(async move {
            let never = std::future::pending();
            accept_loop(self.listener, self.make_service, never, None).await;
            unreachable!("a signal that never comes ended the accept loop")
        }))
    }
}

/// The server [`Serve::with_graceful_shutdown`] returns: `.await` it (it is
/// [`IntoFuture`]).
///
/// # Example
/// ```
/// use axum::{routing::get, Router};
///
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let app = Router::new().route("/", get(|| async { "hi" }));
/// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
/// let server: fairlane::axum::WithGracefulShutdown<_, _, _, _> =
///     fairlane::axum::serve(listener, app).with_graceful_shutdown(async {});
/// println!("listening on {}", server.local_addr()?);
/// server.await?;
/// # Ok::<(), std::io::Error>(())
/// # })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct WithGracefulShutdown<L, M, S, F> {
    listener: L,
    make_service: M,
    signal: F,
    _service: PhantomData<fn() -> S>,
}

impl<L: Listener, M, S, F> WithGracefulShutdown<L, M, S, F> {
    /// The address the listener listens on.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let app: axum::Router = axum::Router::new();
    /// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = fairlane::axum::serve(listener, app).with_graceful_shutdown(async {});
    /// assert_ne!(server.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// # })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<L::Addr> {
        self.listener.local_addr()
    }
}

impl<L: fmt::Debug, M: fmt::Debug, S, F: fmt::Debug> fmt::Debug
    for WithGracefulShutdown<L, M, S, F>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithGracefulShutdown")
            .field("listener", &self.listener)
            .field("make_service", &self.make_service)
            .field("signal", &self.signal)
            .finish()
    }
}

impl<L, M, S, F> IntoFuture for WithGracefulShutdown<L, M, S, F>
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Error = Infallible, Response = S> + Send + 'static,
    for<'a> <M as Service<IncomingStream<'a, L>>>::Future: Send,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        ServeFuture(Box::pin(async move {
            let drain = Drain::new();
            accept_loop(self.listener, self.make_service, self.signal, Some(&drain)).await;
            drain.raise();
            drain.drained().await;
            Ok(())
        }))
    }
}

/// The future of a [`Serve`] or a [`WithGracefulShutdown`]: what `.await`
/// on them awaits, and what to spawn to serve in a task of its own.
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// use std::future::IntoFuture;
/// let app: axum::Router = axum::Router::new();
/// let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
/// let server: fairlane::axum::ServeFuture = fairlane::axum::serve(listener, app).into_future();
/// let task = fairlane::spawn(server);
/// task.abort();
/// # Ok::<(), std::io::Error>(())
/// # })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct ServeFuture(Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>>);

impl Future for ServeFuture {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for ServeFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeFuture").finish_non_exhaustive()
    }
}

/// A connection just accepted, as the make service sees it: the stream
/// (lent) and the peer address. axum's `axum::serve::IncomingStream`.
///
/// # Example
/// A make service that logs every connection, then serves it with the
/// router:
/// ```
/// use std::convert::Infallible;
/// use std::future::{ready, Ready};
/// use std::net::SocketAddr;
/// use std::task::{Context, Poll};
/// use axum::Router;
/// use fairlane::axum::IncomingStream;
/// use fairlane::net::TcpListener;
///
/// #[derive(Clone)]
/// struct Logged(Router);
///
/// impl tower_service::Service<IncomingStream<'_, TcpListener>> for Logged {
///     type Response = Router;
///     type Error = Infallible;
///     type Future = Ready<Result<Router, Infallible>>;
///
///     fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
///         Poll::Ready(Ok(()))
///     }
///
///     fn call(&mut self, stream: IncomingStream<'_, TcpListener>) -> Self::Future {
///         let peer: &SocketAddr = stream.remote_addr();
///         let nodelay = stream.io().nodelay().unwrap_or(false);
///         tracing::info!("connection from {peer} (nodelay {nodelay})");
///         ready(Ok(self.0.clone()))
///     }
/// }
/// # fn _f(listener: TcpListener) {
/// #     let _ = fairlane::axum::serve(listener, Logged(Router::new()));
/// # }
/// ```
pub struct IncomingStream<'a, L: Listener> {
    io: &'a L::Io,
    remote_addr: L::Addr,
}

impl<L: Listener> IncomingStream<'_, L> {
    /// The connection's stream.
    ///
    /// # Example
    /// ```
    /// fn peer(stream: &fairlane::axum::IncomingStream<'_, fairlane::net::TcpListener>) {
    ///     let _ = stream.io().peer_addr();
    /// }
    /// ```
    pub fn io(&self) -> &L::Io {
        self.io
    }

    /// The peer's address, as the listener reported it.
    ///
    /// # Example
    /// ```
    /// fn peer(stream: &fairlane::axum::IncomingStream<'_, fairlane::net::TcpListener>) {
    ///     println!("{}", stream.remote_addr());
    /// }
    /// ```
    pub fn remote_addr(&self) -> &L::Addr {
        &self.remote_addr
    }
}

impl<L> fmt::Debug for IncomingStream<'_, L>
where
    L: Listener,
    L::Io: fmt::Debug,
    L::Addr: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IncomingStream")
            .field("io", self.io)
            .field("remote_addr", &self.remote_addr)
            .finish()
    }
}

/// Accepts connections and spawns their tasks until `signal` completes
/// (with `drain`, whose watches the tasks get, for a graceful shutdown).
/// Returns once the signal came, the listener dropped.
async fn accept_loop<L, M, S, F>(
    mut listener: L,
    mut make_service: M,
    signal: F,
    drain: Option<&Drain>,
) where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Error = Infallible, Response = S>,
    for<'a> <M as Service<IncomingStream<'a, L>>>::Future: Send,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    F: Future<Output = ()>,
{
    let builder = Arc::new(builder());
    let mut signal = pin!(signal);
    loop {
        let accepted = {
            let mut accept = pin!(listener.accept());
            // The signal first: once it came, a connection that is ready too
            // is not taken.
            poll_fn(|cx| {
                if signal.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                accept.as_mut().poll(cx).map(Some)
            })
            .await
        };
        let Some((io, remote_addr)) = accepted else {
            tracing::trace!("shutdown signal received: no longer accepting");
            return;
        };
        poll_fn(|cx| make_service.poll_ready(cx))
            .await
            .unwrap_or_else(|never| match never {});
        let service = make_service
            .call(IncomingStream {
                io: &io,
                remote_addr,
            })
            .await
            .unwrap_or_else(|never| match never {});
        let watch = drain.map(Drain::watch);
        crate::spawn(serve_connection(
            builder.clone(),
            io,
            HyperService(service),
            watch,
        ));
    }
}

/// hyper-util's connection builder as [`serve`] uses it: fairlane's
/// executor (HTTP/2's stream tasks) and timer, and `axum::serve`'s
/// settings. Its connections have no timer, so hyper arms no HTTP/1
/// header read timeout there; here the default one (30 s) is turned off
/// to match, which also saves a timer per request. HTTP/2's extended
/// `CONNECT` is for WebSockets over HTTP/2.
fn builder() -> auto::Builder<crate::hyper::Executor> {
    let mut builder = auto::Builder::new(crate::hyper::Executor);
    builder
        .http1()
        .timer(crate::hyper::Timer)
        .header_read_timeout(None);
    builder
        .http2()
        .timer(crate::hyper::Timer)
        .enable_connect_protocol();
    builder
}

/// One connection's task: serves `io` until the client is done, or, once
/// `watch` says the drain was raised, until hyper's graceful shutdown of
/// the connection has finished.
async fn serve_connection<I, S>(
    builder: Arc<auto::Builder<crate::hyper::Executor>>,
    io: I,
    service: HyperService<S>,
    mut watch: Option<Watch>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let result = {
        let mut conn = pin!(builder.serve_connection_with_upgrades(io, service));
        let mut shutting_down = false;
        poll_fn(|cx| {
            if !shutting_down && watch.as_mut().is_some_and(|w| w.poll_raised(cx)) {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
            conn.as_mut().poll(cx)
        })
        .await
        // The connection (and its stream) is dropped here, before the
        // watch: a drained server has closed its connections.
    };
    if let Err(e) = result {
        tracing::trace!("connection ended with an error: {e}");
    }
    drop(watch);
}
