//! **echo**: a TCP echo server on the runtime under test, driven over
//! loopback by `tasks` client connections.
//!
//! The clients run on one thread of their own (a tokio current-thread
//! runtime, the same for every runtime measured), each connection in a
//! closed loop: write a [`MESSAGE`]-byte message, read the echo back, again.
//! Metrics over the window: `ns/req` (wall time per request, all
//! connections together: the inverse of throughput), `req/s`, the p99
//! round-trip latency of one request in microseconds, and `cpu/req`: the
//! server's CPU time per request in microseconds, with the server and the
//! clients pinned apart where the cores allow (see [`super::server_cpu`]).
//!
//! The server is the runtime's own: fairlane's `net` (on io_uring or on the
//! fallback backend, two runtime columns), tokio's `net`, and monoio's `net`
//! on its io_uring driver. monoio is thread-per-core: `processors` threads,
//! each with its own runtime accepting on its own clone of the listening
//! socket, each connection served by the thread that accepted it (see
//! [`crate::runtimes::MonoioEchoServer`]); it runs no other workload.
//! Runtimes without a network API (async-executor here) are not measured.

use super::serve::{self, REQUESTS};
use super::server_cpu::ServerProcess;
use super::Load;
use crate::runtimes::BenchRuntime;
use crate::spec::ChildSpec;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
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

/// The load generator: `connections` closed-loop clients on one thread.
fn clients(addr: std::net::SocketAddr, connections: usize, load: Arc<Load>) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(async move {
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let load = load.clone();
            let mut stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            tasks.push(tokio::spawn(async move {
                let msg = [7u8; MESSAGE];
                let mut back = [0u8; MESSAGE];
                let mut local = Load::histogram();
                while !load.stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    stream.write_all(&msg).await?;
                    stream.read_exact(&mut back).await?;
                    load.answered(&mut local, t);
                }
                load.merge(&local);
                Ok::<(), std::io::Error>(())
            }));
        }
        load.set_ready();
        Load::join(tasks).await
    })
}
