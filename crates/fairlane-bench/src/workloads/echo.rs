//! **echo**: a TCP echo server on the runtime under test, driven over
//! loopback by `tasks` client connections.
//!
//! The clients run on one thread of their own (see [`serve::closed_loop`]),
//! each connection in a closed loop: write a [`MESSAGE`]-byte message, read
//! the echo back, again. Metrics: as every server workload's (see
//! [`super::serve`]), per request: `ns/req`, `req/s`, the p99 round trip
//! and the server's CPU time per request, `cpu/req`.
//!
//! The server is the runtime's own: fairlane's `net` (on io_uring or on the
//! fallback backend, two runtime columns), tokio's `net`, and monoio's `net`
//! on its io_uring driver. monoio is thread-per-core: `processors` threads,
//! each with its own runtime accepting on its own clone of the listening
//! socket, each connection served by the thread that accepted it (see
//! [`crate::runtimes::MonoioEchoServer`]); it runs no other workload.
//! Runtimes without a network API (async-executor here) are not measured.

use super::serve::{self, Connection, Load, REQUESTS};
use super::server_cpu::ServerProcess;
use crate::runtimes::BenchRuntime;
use crate::spec::ChildSpec;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes per request.
pub const MESSAGE: usize = 64;

/// The client thread's name (short enough for `comm`).
const LOAD_THREAD: &str = "echo-clients";

/// The workload with `rt`'s server ([`BenchRuntime::echo_serve`]).
pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: super::Emit<'_>) {
    drive(spec, emit, |listener| rt.echo_serve(listener));
}

/// The workload with the server `start` puts on the listening socket,
/// returning once it is accepting (see [`serve::drive`]).
pub fn drive<S>(
    spec: &ChildSpec,
    emit: super::Emit<'_>,
    start: impl FnOnce(std::net::TcpListener) -> std::io::Result<S>,
) {
    let connections = spec.tasks.max(1);
    serve::drive(
        spec,
        emit,
        &REQUESTS,
        LOAD_THREAD,
        |listener| start(listener).map(|s| (s, ServerProcess::This)),
        move |addr, load| clients(addr, connections, load),
    );
}

/// The load generator: `connections` closed-loop clients on this thread.
fn clients(addr: std::net::SocketAddr, connections: usize, load: Arc<Load>) -> std::io::Result<()> {
    serve::closed_loop(load, async move {
        let mut all = Vec::with_capacity(connections);
        for _ in 0..connections {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            all.push(Echo(stream));
        }
        Ok(all)
    })
}

/// One client connection: a message, and its echo read back.
struct Echo(tokio::net::TcpStream);

impl Connection for Echo {
    async fn request(&mut self) -> std::io::Result<()> {
        let mut back = [0u8; MESSAGE];
        self.0.write_all(&[7u8; MESSAGE]).await?;
        self.0.read_exact(&mut back).await?;
        Ok(())
    }
}
