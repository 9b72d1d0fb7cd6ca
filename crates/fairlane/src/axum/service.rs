//! The services [`serve`](super::serve) works with: axum's routers and
//! handlers as makers of per-connection services for an
//! [`IncomingStream`], axum's `Connected` for the peer addresses
//! (`ConnectInfo`), and the adapter that hands a connection's requests from
//! hyper to a tower service.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::connect_info::Connected;
use axum::extract::Request;
use axum::handler::HandlerService;
use axum::response::Response;
use axum::routing::MethodRouter;
use axum::Router;
use hyper::body::Incoming;
use pin_project_lite::pin_project;
use tower_service::Service;

use super::{IncomingStream, Listener};

// A `Router`, a `MethodRouter` and a handler's service each serve every
// connection as they are (as with `axum::serve`): their per-connection
// service is a clone of themselves.

impl<L: Listener> Service<IncomingStream<'_, L>> for Router<()> {
    type Response = Router;
    type Error = Infallible;
    type Future = Ready<Result<Router, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _stream: IncomingStream<'_, L>) -> Self::Future {
        // `with_state` turns the routes into their final form once per
        // connection, not once per request.
        ready(Ok(self.clone().with_state(())))
    }
}

impl<L: Listener> Service<IncomingStream<'_, L>> for MethodRouter<()> {
    type Response = MethodRouter;
    type Error = Infallible;
    type Future = Ready<Result<MethodRouter, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _stream: IncomingStream<'_, L>) -> Self::Future {
        ready(Ok(self.clone().with_state(())))
    }
}

impl<H, T, S, L> Service<IncomingStream<'_, L>> for HandlerService<H, T, S>
where
    H: Clone,
    S: Clone,
    L: Listener,
{
    type Response = Self;
    type Error = Infallible;
    type Future = Ready<Result<Self, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _stream: IncomingStream<'_, L>) -> Self::Future {
        ready(Ok(self.clone()))
    }
}

// `ConnectInfo<SocketAddr>` (and the Unix socket address) for
// `into_make_service_with_connect_info`: the peer address the listener
// reported, for any listener with that address type (fairlane's, and those
// wrapped by `tap_io`).

impl<L> Connected<IncomingStream<'_, L>> for SocketAddr
where
    L: Listener<Addr = SocketAddr>,
{
    fn connect_info(stream: IncomingStream<'_, L>) -> SocketAddr {
        *stream.remote_addr()
    }
}

impl<L> Connected<IncomingStream<'_, L>> for std::os::unix::net::SocketAddr
where
    L: Listener<Addr = std::os::unix::net::SocketAddr>,
{
    fn connect_info(stream: IncomingStream<'_, L>) -> std::os::unix::net::SocketAddr {
        stream.remote_addr().clone()
    }
}

/// A connection's tower service as hyper's: each request (its body made
/// axum's `Body`) goes to a clone of the service, called once it is ready.
#[derive(Clone)]
pub(super) struct HyperService<S>(pub(super) S);

impl<S> hyper::service::Service<hyper::Request<Incoming>> for HyperService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ReadyThenCall<S>;

    fn call(&self, req: hyper::Request<Incoming>) -> ReadyThenCall<S> {
        ReadyThenCall {
            service: self.0.clone(),
            request: Some(req.map(Body::new)),
            call: None,
        }
    }
}

pin_project! {
    /// A request on its way through one clone of the service: waiting for
    /// the clone to be ready, then its call.
    pub(super) struct ReadyThenCall<S>
    where
        S: Service<Request>,
    {
        service: S,
        request: Option<Request>,
        #[pin]
        call: Option<S::Future>,
    }
}

impl<S> Future for ReadyThenCall<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(call) = this.call.as_mut().as_pin_mut() {
            return call.poll(cx);
        }
        match this.service.poll_ready(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(never)) => match never {},
            Poll::Ready(Ok(())) => {}
        }
        let request = this
            .request
            .take()
            .expect("a request is called once, and its future not polled after its output");
        this.call.set(Some(this.service.call(request)));
        this.call
            .as_pin_mut()
            .expect("the call was just made")
            .poll(cx)
    }
}
