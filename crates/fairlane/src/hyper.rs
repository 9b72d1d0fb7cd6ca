//! hyper on fairlane (`hyper` feature): the streams implement hyper's
//! `rt::Read`/`rt::Write` themselves, so a connection is served or opened
//! with no adapter; [`Executor`] spawns hyper's background tasks (HTTP/2
//! streams, client connections) on fairlane, and [`Timer`] gives hyper its
//! timeouts (`header_read_timeout`, keep-alive, HTTP/2 pings) on fairlane's
//! timers. Without a timer hyper panics as soon as a timeout is set.
//!
//! # Example
//! An HTTP/1 server and a client on one runtime.
//! ```
//! use std::convert::Infallible;
//! use bytes::Bytes;
//! use http_body_util::{BodyExt, Full};
//! use hyper::{Request, Response};
//!
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! rt.block_on(async {
//!     let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     fairlane::spawn(async move {
//!         let (stream, _) = listener.accept().await.unwrap();
//!         let service = hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
//!             Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("hello"))))
//!         });
//!         hyper::server::conn::http1::Builder::new()
//!             .timer(fairlane::hyper::Timer)
//!             .header_read_timeout(std::time::Duration::from_secs(5))
//!             .serve_connection(stream, service)
//!             .await
//!             .unwrap();
//!     });
//!     let stream = fairlane::net::TcpStream::connect(addr).await?;
//!     let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
//!     fairlane::spawn(conn);
//!     let req = Request::get("/").body(Full::new(Bytes::new())).unwrap();
//!     let body = sender.send_request(req).await.unwrap().into_body().collect().await.unwrap();
//!     assert_eq!(body.to_bytes(), "hello");
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// hyper's executor on fairlane: `execute` spawns the future as a task of
/// the current runtime (it must be called inside one, as hyper does from
/// the connection's task).
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let http2 = hyper::server::conn::http2::Builder::new(fairlane::hyper::Executor);
///     # let _ = http2;
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Executor;

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        // Detached, as hyper expects: its tasks end with their connection.
        drop(crate::spawn(fut));
    }
}

/// hyper's timer on fairlane: its sleeps are fairlane sleeps on the
/// current runtime.
///
/// # Example
/// ```
/// let builder = hyper::server::conn::http1::Builder::new()
///     .timer(fairlane::hyper::Timer)
///     .header_read_timeout(std::time::Duration::from_secs(10))
///     .clone();
/// # let _ = builder;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Timer;

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep(crate::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep(deadline.saturating_duration_since(Instant::now()))
    }
}

/// A fairlane sleep as hyper's `Sleep`.
struct Sleep(crate::time::Sleep);

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // fairlane's `Sleep` is `Unpin`.
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for Sleep {}
