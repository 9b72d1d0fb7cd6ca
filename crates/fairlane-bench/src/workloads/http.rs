//! **http**: an HTTP/1.1 server (hyper 1.x) on the runtime under test,
//! driven over loopback by [`CONNECTIONS`] keep-alive connections, each a
//! closed loop of `GET /` answered with a [`BODY`]-byte body.
//!
//! **http-axum**: the same clients against the same route written with
//! axum ([`axum_app`]) and served the way an axum program is, by the
//! runtime's `serve`: `fairlane::axum::serve` on fairlane (both backends;
//! hyper-util's automatic HTTP/1 and HTTP/2 connection, fairlane's hyper
//! executor and timer) and `axum::serve` on tokio (the same hyper-util
//! connection, tokio's executor, no timer); the connections'
//! `TCP_NODELAY` set through each `serve`'s `tap_io`.
//!
//! The server is the same hyper code on every runtime measured, one task
//! per connection served by `hyper::server::conn::http1::Builder` with
//! keep-alive and the runtime's timer (hyper arms its header-read timeout
//! on it for every request): fairlane's `net` with its `hyper` feature (the
//! streams are hyper's `rt::Read`/`rt::Write` themselves,
//! `fairlane::hyper::Timer`; on io_uring and on the fallback backend, two
//! runtime columns) and tokio's `net` through hyper-util's `TokioIo` and
//! `TokioTimer`. Runtimes without a network API, monoio and real memcached
//! are not measured.
//!
//! The clients run on one thread of their own (see
//! [`serve::closed_loop`]), each writing the request and reading the
//! response's head and `Content-Length` body, checked. Metrics: as every
//! server workload's (see [`super::serve`]), per request.

use super::serve::{self, Connection, Load, REQUESTS};
use super::server_cpu::ServerProcess;
use super::Emit;
use crate::runtimes::BenchRuntime;
use crate::spec::ChildSpec;
use bytes::Bytes;
use http_body_util::Full;
use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Client connections.
pub const CONNECTIONS: usize = 32;
/// The response body.
pub const BODY: &[u8] = b"Hello, world!\n";
/// The request every client sends.
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

/// The load generator thread's name (short enough for `comm`).
const LOAD_THREAD: &str = "http-clients";

/// The workload with `rt`'s server ([`BenchRuntime::http_serve`]).
pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    drive(spec, emit, |listener| rt.http_serve(listener));
}

/// The http-axum workload, with `rt`'s axum server
/// ([`BenchRuntime::axum_serve`]).
pub fn run_axum<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    drive(spec, emit, |listener| rt.axum_serve(listener));
}

/// Measures the server `start` puts on the listener under the clients'
/// load.
fn drive(
    spec: &ChildSpec,
    emit: Emit<'_>,
    start: impl FnOnce(std::net::TcpListener) -> io::Result<()>,
) {
    let connections = spec.tasks.max(1);
    serve::drive(
        spec,
        emit,
        &REQUESTS,
        LOAD_THREAD,
        |listener| start(listener).map(|()| ((), ServerProcess::This)),
        move |addr, load| clients(addr, connections, load),
    );
}

/// The server's one service: every request gets [`BODY`].
pub async fn respond<B>(
    _request: hyper::Request<B>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    Ok(hyper::Response::new(Full::new(Bytes::from_static(BODY))))
}

/// The axum application of the http-axum workload: `GET /` answered with
/// [`BODY`], as [`respond`] does.
pub fn axum_app() -> axum::Router {
    axum::Router::new().route(
        "/",
        axum::routing::get(|| async { Bytes::from_static(BODY) }),
    )
}

/// The load generator: `connections` closed-loop clients on this thread.
fn clients(addr: std::net::SocketAddr, connections: usize, load: Arc<Load>) -> io::Result<()> {
    serve::closed_loop(load, async move {
        let mut all = Vec::with_capacity(connections);
        for _ in 0..connections {
            all.push(Client::connect(addr).await?);
        }
        Ok(all)
    })
}

/// One keep-alive client connection.
struct Client {
    stream: tokio::net::TcpStream,
    /// What has been read and not yet taken (a response arrives in pieces).
    buf: Vec<u8>,
}

impl Client {
    async fn connect(addr: std::net::SocketAddr) -> io::Result<Client> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            buf: Vec::with_capacity(1024),
        })
    }

    /// Reads more of the response.
    async fn fill(&mut self) -> io::Result<()> {
        self.buf.reserve(1024);
        if self.stream.read_buf(&mut self.buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }
}

impl Connection for Client {
    /// One request and its whole response, checked: status 200 and the
    /// body [`BODY`].
    async fn request(&mut self) -> io::Result<()> {
        self.stream.write_all(REQUEST).await?;
        let (head, length) = loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break (end + 4, content_length(&self.buf[..end])?);
            }
            self.fill().await?;
        };
        while self.buf.len() < head + length {
            self.fill().await?;
        }
        if !self.buf.starts_with(b"HTTP/1.1 200 ") || &self.buf[head..head + length] != BODY {
            return Err(io::Error::other(format!(
                "unexpected response: {:?}",
                String::from_utf8_lossy(&self.buf[..head + length])
            )));
        }
        self.buf.drain(..head + length);
        Ok(())
    }
}

/// The `Content-Length` of a response head (without its blank line).
fn content_length(head: &[u8]) -> io::Result<usize> {
    let bad = || {
        io::Error::other(format!(
            "a response head without a Content-Length: {:?}",
            String::from_utf8_lossy(head)
        ))
    };
    let head = std::str::from_utf8(head).map_err(|_| bad())?;
    head.split("\r\n")
        .skip(1)
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::content_length;

    #[test]
    fn content_length_is_read_from_any_header_case() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 14\r\ndate: x";
        assert_eq!(content_length(head).unwrap(), 14);
        let head = b"HTTP/1.1 200 OK\r\nContent-Length:7";
        assert_eq!(content_length(head).unwrap(), 7);
    }

    #[test]
    fn a_head_without_a_length_is_an_error() {
        let err = content_length(b"HTTP/1.1 200 OK\r\ndate: x").unwrap_err();
        assert!(
            err.to_string().contains("without a Content-Length"),
            "{err}"
        );
        assert!(content_length(b"HTTP/1.1 200 OK\r\ncontent-length: x").is_err());
    }
}
