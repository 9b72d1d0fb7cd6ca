//! **echo**: a TCP echo server on the runtime under test, driven over
//! loopback by `tasks` client connections.
//!
//! The clients run on one thread of their own (a tokio current-thread
//! runtime, the same for every runtime measured), each connection in a
//! closed loop: write a [`MESSAGE`]-byte message, read the echo back, again.
//! Metrics over the window: `ns/req` (wall time per request, all
//! connections together: the inverse of throughput), `req/s`, the p99
//! round-trip latency of one request in microseconds, and `cpu us/req`: the
//! CPU time of every thread of the process but the clients' (the runtime's
//! processors, its helper threads, io_uring's kernel workers, which are
//! threads of the process too) per request, from each thread's
//! `/proc/self/task/TID/schedstat`. A thread that exits inside the window
//! takes its share with it; one that starts inside it counts from zero.
//!
//! With one processor on a machine with at least two cores, the server's
//! threads are pinned to the first core and the client thread to the last
//! (`sched_setaffinity`), so that the two do not share a core and the CPU
//! figure is the server's alone.
//!
//! The server is the runtime's own: fairlane's `net` (on io_uring or on the
//! fallback backend, two runtime columns), tokio's `net`, and monoio's `net`
//! on its io_uring driver. monoio is thread-per-core: `processors` threads,
//! each with its own runtime accepting on its own clone of the listening
//! socket, each connection served by the thread that accepted it (see
//! [`crate::runtimes::MonoioEchoServer`]); it runs no other workload.
//! Runtimes without a network API (async-executor here) are not measured.

use super::Emit;
use crate::runtimes::BenchRuntime;
use crate::spec::{ChildSpec, Metric, Outcome, Status};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes per request.
pub const MESSAGE: usize = 64;

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
    let failed = |detail: String| Outcome {
        status: Status::Crashed,
        detail: Some(detail),
        ..Outcome::default()
    };
    let listener = match std::net::TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => return emit(failed(format!("bind: {e}"))),
    };
    let addr = listener.local_addr().expect("bound");
    let server = match start(listener) {
        Ok(server) => server,
        Err(e) => return emit(failed(format!("echo server: {e}"))),
    };
    let connections = spec.tasks.max(1);
    let requests = Arc::new(AtomicU64::new(0));
    let recording = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
    ));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = spec.processors == 1 && cores >= 2;
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let client = {
        let (requests, recording, stop, hist) = (
            requests.clone(),
            recording.clone(),
            stop.clone(),
            hist.clone(),
        );
        std::thread::Builder::new()
            .name("echo-clients".into())
            .spawn(move || {
                if pin {
                    pin_thread(0, cores - 1);
                }
                // SAFETY: gettid has no preconditions.
                let _ = tid_tx.send(unsafe { libc::gettid() });
                clients(addr, connections, requests, recording, stop, hist)
            })
            .expect("start the client thread")
    };
    let client_tid = tid_rx.recv().unwrap_or(-1);
    if pin {
        // The server's threads (all but the clients'), present now; those
        // it starts later inherit the affinity of the thread starting them.
        for tid in threads().into_iter().filter(|&t| t != client_tid) {
            pin_thread(tid, 0);
        }
    }
    std::thread::sleep(spec.warmup());
    recording.store(true, Ordering::SeqCst);
    let start_count = requests.load(Ordering::SeqCst);
    let cpu_start = server_cpu(client_tid);
    let start = Instant::now();
    std::thread::sleep(spec.duration());
    let done = requests.load(Ordering::SeqCst) - start_count;
    let elapsed = start.elapsed();
    let cpu = cpu_between(&cpu_start, &server_cpu(client_tid));
    recording.store(false, Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let client_result = client.join();
    let outcome = match client_result {
        Ok(Ok(())) if done > 0 => {
            let p99 = hist.lock().unwrap().value_at_quantile(0.99) as f64 / 1000.0;
            Outcome {
                metrics: vec![
                    Metric::new("ns/req", elapsed.as_nanos() as f64 / done as f64, "ns"),
                    Metric::new("req/s", done as f64 / elapsed.as_secs_f64(), "/s"),
                    Metric::new("p99", p99, "us"),
                    Metric::new("cpu us/req", cpu as f64 / 1000.0 / done as f64, "us"),
                ],
                ..Outcome::default()
            }
        }
        Ok(Ok(())) => failed("no request completed in the window".into()),
        Ok(Err(e)) => failed(format!("client: {e}")),
        Err(_) => failed("the client thread panicked".into()),
    };
    emit(outcome);
    drop(server);
}

/// The thread ids of this process.
fn threads() -> Vec<libc::pid_t> {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Nanoseconds on CPU of each thread of this process but `client`.
fn server_cpu(client: libc::pid_t) -> Vec<(libc::pid_t, u64)> {
    threads()
        .into_iter()
        .filter(|&t| t != client)
        .filter_map(|t| {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{t}/schedstat")).ok()?;
            Some((t, stat.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

/// CPU nanoseconds spent between two [`server_cpu`] snapshots (a thread
/// new in `after` counts from zero).
fn cpu_between(before: &[(libc::pid_t, u64)], after: &[(libc::pid_t, u64)]) -> u64 {
    after
        .iter()
        .map(|&(t, ns)| {
            let was = before.iter().find(|&&(b, _)| b == t).map_or(0, |&(_, v)| v);
            ns.saturating_sub(was)
        })
        .sum()
}

/// Pins thread `tid` (0: the calling thread) to `core`; best effort (a
/// refusal leaves the measurement unpinned).
fn pin_thread(tid: libc::pid_t, core: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside
    // it (core < available_parallelism <= CPU_SETSIZE here); the call reads
    // the set of the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        let _ = libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The load generator: `connections` closed-loop clients on one thread.
fn clients(
    addr: std::net::SocketAddr,
    connections: usize,
    requests: Arc<AtomicU64>,
    recording: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    hist: Arc<Mutex<Histogram<u64>>>,
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(async move {
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let (requests, recording, stop, hist) = (
                requests.clone(),
                recording.clone(),
                stop.clone(),
                hist.clone(),
            );
            let mut stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            tasks.push(tokio::spawn(async move {
                let msg = [7u8; MESSAGE];
                let mut back = [0u8; MESSAGE];
                let mut local =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    stream.write_all(&msg).await?;
                    stream.read_exact(&mut back).await?;
                    if recording.load(Ordering::Relaxed) {
                        let _ = local.record(t.elapsed().as_nanos().max(1) as u64);
                    }
                    requests.fetch_add(1, Ordering::Relaxed);
                }
                hist.lock().unwrap().add(&local).expect("same bounds");
                Ok::<(), std::io::Error>(())
            }));
        }
        for t in tasks {
            t.await.map_err(std::io::Error::other)??;
        }
        // Give the server a moment to see the connections close.
        tokio::task::yield_now().await;
        let _ = Duration::ZERO;
        Ok(())
    })
}
