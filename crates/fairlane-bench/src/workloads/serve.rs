//! The measuring loop the server workloads (echo, memcached, http) share: a
//! server on the runtime under test (or a process of its own), driven over
//! loopback by closed-loop clients on one thread of their own.
//!
//! The clients connect (and store what they need) first and then say they
//! are ready; the warm-up follows, then the window. Metrics over the
//! window, named after the workload's unit (a request, an operation): wall
//! time per unit with every connection together (the inverse of
//! throughput), units per second, the p99 of one unit in microseconds, and
//! the server's CPU time per unit in microseconds (see
//! [`super::server_cpu`]: server and clients pinned apart where the cores
//! allow).

use super::server_cpu::{self, ServerCpu, ServerProcess};
use super::{crashed, Emit};
use crate::spec::{ChildSpec, Metric, Outcome};
use hdrhistogram::Histogram;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The names of a server workload's four metrics.
pub struct Units {
    /// Wall time per unit, in ns.
    pub per: &'static str,
    /// Units per second.
    pub rate: &'static str,
    /// Server CPU time per unit, in µs.
    pub cpu: &'static str,
    /// What one unit is, for messages ("request", "operation").
    pub what: &'static str,
}

/// Units of request-reply workloads (echo, http).
pub const REQUESTS: Units = Units {
    per: "ns/req",
    rate: "req/s",
    cpu: "cpu/req",
    what: "request",
};

/// How long the clients may take to connect and prepare, and how long a
/// window stays open past its duration waiting for its first request.
const SETUP_LIMIT: Duration = Duration::from_secs(30);

/// Measures the server `start` puts on a loopback listening socket (or on
/// its port), returning once it is accepting, under the load `clients`
/// generates on a thread named `load_thread` (short enough for `comm`: 15
/// bytes). `clients` gets the server's address and the [`Load`] it reports
/// to, and runs [`closed_loop`]. What `start` returns (a server that shuts
/// down when dropped) is dropped after the outcome is emitted, so its
/// shutdown is teardown, under the child's watchdog.
pub fn drive<S>(
    spec: &ChildSpec,
    emit: Emit<'_>,
    units: &Units,
    load_thread: &'static str,
    start: impl FnOnce(std::net::TcpListener) -> io::Result<(S, ServerProcess)>,
    clients: impl FnOnce(std::net::SocketAddr, Arc<Load>) -> io::Result<()> + Send + 'static,
) {
    let ((server, process), addr) = match start_server(start) {
        Ok(started) => started,
        Err(outcome) => return emit(outcome),
    };
    let pin = server_cpu::client_core(spec.processors);
    let load = Load::new();
    let client = {
        let load = load.clone();
        std::thread::Builder::new()
            .name(load_thread.into())
            .spawn(move || {
                if let Some(core) = pin {
                    server_cpu::pin_thread(0, &[core]);
                }
                clients(addr, load)
            })
            .expect("start the client thread")
    };
    let cpu = ServerCpu::new(&process, &client);
    if let Some(p) = pin {
        server_cpu::pin_server(&process, &(0..p).collect::<Vec<_>>(), load_thread);
    }
    let setup_deadline = Instant::now() + SETUP_LIMIT;
    while !load.ready.load(Ordering::SeqCst) && !client.is_finished() {
        if Instant::now() > setup_deadline {
            return emit(crashed(format!(
                "the clients took over {SETUP_LIMIT:?} to connect"
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(spec.warmup());
    load.recording.store(true, Ordering::SeqCst);
    let start_count = load.requests.load(Ordering::SeqCst);
    let cpu0 = cpu.read();
    let start = Instant::now();
    std::thread::sleep(spec.duration());
    // On an oversubscribed machine a short window can pass without one
    // request, on every runtime alike: keep it open until one completes
    // (the figures divide by the window's real length), for at most
    // SETUP_LIMIT; a server that serves nothing by then is reported.
    let mut done = load.requests.load(Ordering::SeqCst) - start_count;
    while done == 0 && start.elapsed() < SETUP_LIMIT && !client.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
        done = load.requests.load(Ordering::SeqCst) - start_count;
    }
    let cpu = cpu.since(cpu0);
    let elapsed = start.elapsed();
    load.recording.store(false, Ordering::SeqCst);
    load.stop.store(true, Ordering::SeqCst);
    let outcome = match client.join() {
        Ok(Ok(())) if done > 0 => Outcome {
            metrics: vec![
                Metric::new(units.per, elapsed.as_nanos() as f64 / done as f64, "ns"),
                Metric::new(units.rate, done as f64 / elapsed.as_secs_f64(), "/s"),
                Metric::new("p99", load.p99_us(), "us"),
                Metric::new(
                    units.cpu,
                    cpu.as_nanos() as f64 / 1000.0 / done as f64,
                    "us",
                ),
            ],
            ..Outcome::default()
        },
        Ok(Ok(())) => crashed(format!("no {} completed in the window", units.what)),
        Ok(Err(e)) => crashed(format!("client: {e}")),
        Err(_) => crashed("the client thread panicked".into()),
    };
    emit(outcome);
    drop(server);
}

/// Binds a loopback listener and hands it to `start` (which returns once
/// its server accepts): the server and the address, or why not.
fn start_server<S>(
    start: impl FnOnce(std::net::TcpListener) -> io::Result<S>,
) -> Result<(S, std::net::SocketAddr), Outcome> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| crashed(format!("bind: {e}")))?;
    let addr = listener.local_addr().expect("bound");
    let server = start(listener).map_err(|e| crashed(format!("server: {e}")))?;
    Ok((server, addr))
}

/// What the closed-loop clients of a server workload share with the
/// driver thread.
pub struct Load {
    /// Units answered so far.
    requests: AtomicU64,
    /// The clients are connected (and have stored what they need).
    ready: AtomicBool,
    /// The window is open: latencies are recorded.
    recording: AtomicBool,
    /// The clients are to stop.
    stop: AtomicBool,
    latencies: Mutex<Histogram<u64>>,
}

impl Load {
    fn new() -> Arc<Load> {
        Arc::new(Load {
            requests: AtomicU64::new(0),
            ready: AtomicBool::new(false),
            recording: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            latencies: Mutex::new(Load::histogram()),
        })
    }

    /// A histogram of latencies in nanoseconds, for one client to fill.
    fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
    }

    /// Counts a unit answered, started at `started`, and records its
    /// latency in `local` while the window is open.
    fn answered(&self, local: &mut Histogram<u64>, started: Instant) {
        if self.recording.load(Ordering::Relaxed) {
            let _ = local.record(started.elapsed().as_nanos().max(1) as u64);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds one client's latencies.
    fn merge(&self, local: &Histogram<u64>) {
        self.latencies
            .lock()
            .unwrap()
            .add(local)
            .expect("same bounds");
    }

    /// The 99th percentile of the merged latencies, in microseconds.
    fn p99_us(&self) -> f64 {
        self.latencies.lock().unwrap().value_at_quantile(0.99) as f64 / 1000.0
    }
}

/// One client connection of a server workload.
pub trait Connection: Send + 'static {
    /// One unit: a request and its whole reply, checked.
    fn request(&mut self) -> impl Future<Output = io::Result<()>> + Send;
}

/// The load generator, on the calling thread: a tokio current-thread
/// runtime (the same for every server measured) that awaits `connect` (the
/// connections, and whatever they store first), says the clients are
/// ready, and runs every connection in a closed loop of
/// [`Connection::request`]s until the driver stops them. The first error.
pub fn closed_loop<C: Connection>(
    load: Arc<Load>,
    connect: impl Future<Output = io::Result<Vec<C>>>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(async move {
        let tasks: Vec<_> = connect
            .await?
            .into_iter()
            .map(|mut connection| {
                let load = load.clone();
                tokio::spawn(async move {
                    let mut local = Load::histogram();
                    while !load.stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        connection.request().await?;
                        load.answered(&mut local, t);
                    }
                    load.merge(&local);
                    Ok::<(), io::Error>(())
                })
            })
            .collect();
        load.ready.store(true, Ordering::SeqCst);
        for t in tasks {
            t.await.map_err(io::Error::other)??;
        }
        Ok(())
    })
}
