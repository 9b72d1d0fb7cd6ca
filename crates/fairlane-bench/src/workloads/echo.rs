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

use super::server_cpu::{self, ServerCpu, ServerProcess};
use super::{crashed, start_server, Emit, Load};
use crate::runtimes::BenchRuntime;
use crate::spec::{ChildSpec, Metric, Outcome};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes per request.
pub const MESSAGE: usize = 64;

/// The client thread's name (short enough for `comm`).
const LOAD_THREAD: &str = "echo-clients";

/// The workload with `rt`'s server ([`BenchRuntime::echo_serve`]).
pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    drive(spec, emit, |listener| rt.echo_serve(listener));
}

/// The workload with the server `start` puts on the listening socket,
/// returning once it is accepting. What `start` returns (a server that
/// shuts down when dropped) is dropped after the outcome is emitted, so its
/// shutdown is teardown, under the child's watchdog.
pub fn drive<S>(
    spec: &ChildSpec,
    emit: Emit<'_>,
    start: impl FnOnce(std::net::TcpListener) -> std::io::Result<S>,
) {
    let (server, addr) = match start_server(start) {
        Ok(started) => started,
        Err(outcome) => return emit(outcome),
    };
    let connections = spec.tasks.max(1);
    let pin = server_cpu::client_core(spec.processors);
    let load = Load::new();
    let client = {
        let load = load.clone();
        std::thread::Builder::new()
            .name(LOAD_THREAD.into())
            .spawn(move || {
                if let Some(core) = pin {
                    server_cpu::pin_thread(0, &[core]);
                }
                clients(addr, connections, load)
            })
            .expect("start the client thread")
    };
    let cpu = ServerCpu::new(&ServerProcess::This, &client);
    if let Some(p) = pin {
        let cores: Vec<usize> = (0..p).collect();
        server_cpu::pin_server(&ServerProcess::This, &cores, LOAD_THREAD);
    }
    std::thread::sleep(spec.warmup());
    load.recording.store(true, Ordering::SeqCst);
    let start_count = load.requests.load(Ordering::SeqCst);
    let cpu0 = cpu.read();
    let start = Instant::now();
    std::thread::sleep(spec.duration());
    let done = load.requests.load(Ordering::SeqCst) - start_count;
    let cpu = cpu.since(cpu0);
    let elapsed = start.elapsed();
    load.recording.store(false, Ordering::SeqCst);
    load.stop.store(true, Ordering::SeqCst);
    let client_result = client.join();
    let outcome = match client_result {
        Ok(Ok(())) if done > 0 => Outcome {
            metrics: vec![
                Metric::new("ns/req", elapsed.as_nanos() as f64 / done as f64, "ns"),
                Metric::new("req/s", done as f64 / elapsed.as_secs_f64(), "/s"),
                Metric::new("p99", load.p99_us(), "us"),
                Metric::new(
                    "cpu/req",
                    cpu.as_nanos() as f64 / 1000.0 / done as f64,
                    "us",
                ),
            ],
            ..Outcome::default()
        },
        Ok(Ok(())) => crashed("no request completed in the window".into()),
        Ok(Err(e)) => crashed(format!("client: {e}")),
        Err(_) => crashed("the client thread panicked".into()),
    };
    emit(outcome);
    drop(server);
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
        Load::join(tasks).await
    })
}
