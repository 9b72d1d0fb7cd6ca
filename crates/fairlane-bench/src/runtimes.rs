//! The runtimes under test, behind one small trait.
//!
//! Workloads are written once, generic over [`BenchRuntime`], so every runtime
//! runs the same task code (and the same [`crate::sync::Semaphore`]); only the
//! scheduler differs. The trait has no boxing: `spawn` returns each runtime's
//! own join future adapted by an `async` block, so spawn costs and task sizes
//! are the runtime's.
//!
//! Each runtime gets `processors` worker threads; `block_on` runs on the
//! calling (driver) thread, which is not one of them for any of the three.
//!
//! monoio is not behind the trait: it is thread-per-core, with no pool of
//! workers that tasks are spawned onto from outside, so only its echo server
//! is here ([`MonoioEchoServer`]), and it runs only the echo workload.

use crate::spec::ChildSpec;
use std::future::Future;
use std::io;

/// A cheap, cloneable handle that spawns onto a runtime, from inside or
/// outside of it.
pub trait Spawner: Clone + Send + Sync + 'static {
    /// Spawns `f`; the returned future resolves to its output (a panic in the
    /// task is re-raised in the joiner).
    fn spawn<F>(&self, f: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
}

/// A runtime with a fixed number of worker threads ("processors").
pub trait BenchRuntime: Sized + 'static {
    /// Its spawn handle.
    type Spawner: Spawner;
    /// A runtime with `spec.processors` worker threads (fairlane also takes
    /// its scheduler settings from `spec.fairlane`).
    fn build(spec: &ChildSpec) -> io::Result<Self>;
    /// A spawn handle.
    fn spawner(&self) -> Self::Spawner;
    /// Runs `f` to completion on the calling thread.
    fn block_on<F: Future>(&self, f: F) -> F::Output;
    /// The runtime's own `yield_now`.
    fn yield_now() -> impl Future<Output = ()> + Send;

    /// The number of processors.
    fn processors(&self) -> usize;

    /// The scheduler's counts of tasks moving between processors, by
    /// cause, summed over its processors: [`MOVE_CAUSES`] in order. `None`:
    /// the runtime counts none (only fairlane does).
    fn moves(&self) -> Option<[u64; MOVE_CAUSES.len()]> {
        None
    }

    /// Starts a TCP echo server on `listener` with the runtime's own network
    /// API (one task per connection), returning once it is accepting. The
    /// default: the runtime has none.
    fn echo_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
        drop(listener);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this runtime has no network API here",
        ))
    }

    /// Starts an HTTP/1.1 server (hyper, one task per keep-alive
    /// connection, [`crate::workloads::http::respond`] its service) on
    /// `listener`, returning once it is accepting. The default: the runtime
    /// has no network API.
    fn http_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
        drop(listener);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this runtime has no network API here",
        ))
    }

    /// Starts [`crate::workloads::http::axum_app`] on `listener` with the
    /// runtime's `serve` (axum's own shape: one task per connection, HTTP/1
    /// and HTTP/2), its connections' `TCP_NODELAY` set through `tap_io`,
    /// returning once it is accepting. The default: the runtime has none.
    fn axum_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
        drop(listener);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this runtime has no axum server here",
        ))
    }

    /// Starts a memcached server (`fairlane-memcached`'s protocol and
    /// store, one task per connection) on `listener`, returning once it is
    /// accepting. The default: the runtime has no network API.
    fn memcached_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
        drop(listener);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this runtime has no network API here",
        ))
    }
}

/// The metric names of [`BenchRuntime::moves`]' counts: polls of a task
/// that another processor polled last, by how it came (help, rebalance,
/// steal, wake path), and the tasks a sleeping processor handed over.
pub const MOVE_CAUSES: [&str; 5] = [
    "moved help",
    "moved rebalance",
    "moved steal",
    "moved wake",
    "handoffs",
];

/// The memcached state every server of the workload starts from.
fn memcached_state(processors: usize) -> std::sync::Arc<fairlane_memcached::protocol::Shared> {
    use fairlane_memcached::store::{Config, Store, SystemClock};
    let store = Store::new(Config::default(), std::sync::Arc::new(SystemClock));
    std::sync::Arc::new(fairlane_memcached::protocol::Shared::new(store, processors))
}

pub use self::async_executor_rt::AsyncExecutorRuntime;
pub use self::fairlane_rt::FairlaneRuntime;
pub use self::memcached_process::RealMemcached;
pub use self::monoio_rt::MonoioEchoServer;
pub use self::tokio_rt::TokioRuntime;

mod fairlane_rt {
    use super::*;

    /// fairlane with `processors(n)` and the suite's fairlane settings (its
    /// own defaults where none are given).
    pub struct FairlaneRuntime(fairlane::Runtime);

    impl Spawner for fairlane::Handle {
        fn spawn<F>(&self, f: F) -> impl Future<Output = F::Output> + Send + 'static
        where
            F: Future + Send + 'static,
            F::Output: Send + 'static,
        {
            let handle = fairlane::Handle::spawn(self, f);
            async move {
                handle
                    .await
                    .unwrap_or_else(|e| panic!("fairlane task failed: {e}"))
            }
        }
    }

    impl BenchRuntime for FairlaneRuntime {
        type Spawner = fairlane::Handle;

        fn build(spec: &ChildSpec) -> io::Result<Self> {
            let mut builder = fairlane::Runtime::builder();
            builder
                .processors(spec.processors)
                .thread_name("fairlane-bench");
            let knobs = &spec.fairlane;
            if let Some(l) = knobs.lanes_per_processor {
                builder.lanes_per_processor(l);
            }
            if let Some(h) = knobs.help_period {
                builder.help_period(h);
            }
            if let Some(f) = knobs.help_factor_log2 {
                builder.help_factor_log2(f);
            }
            if let Some(r) = knobs.spin_rounds {
                builder.spin_rounds(r);
            }
            if let Some(g) = knobs.grow_after {
                builder.grow_after(g);
            }
            if spec.runtime == crate::spec::RuntimeKind::FairlaneFallback {
                builder.io_backend(fairlane::io::IoBackend::Fallback);
            }
            builder.build().map(FairlaneRuntime)
        }

        fn spawner(&self) -> Self::Spawner {
            self.0.handle().clone()
        }

        fn block_on<F: Future>(&self, f: F) -> F::Output {
            self.0.block_on(f)
        }

        fn yield_now() -> impl Future<Output = ()> + Send {
            fairlane::yield_now()
        }

        fn processors(&self) -> usize {
            self.0.metrics().processors.len()
        }

        fn moves(&self) -> Option<[u64; MOVE_CAUSES.len()]> {
            let mut sum = [0; MOVE_CAUSES.len()];
            for p in self.0.metrics().processors {
                let counts = [
                    p.moved_help,
                    p.moved_rebalance,
                    p.moved_steal,
                    p.moved_wake,
                    p.handoffs,
                ];
                for (s, c) in sum.iter_mut().zip(counts) {
                    *s += c;
                }
            }
            Some(sum)
        }

        fn echo_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
            let listener = self
                .0
                .block_on(async { fairlane::net::TcpListener::from_std(listener) })?;
            self.0.spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    fairlane::spawn(async move {
                        let _ = stream.set_nodelay(true);
                        let mut buf = Vec::with_capacity(4096);
                        loop {
                            let (n, b) = stream.read_owned(buf).await;
                            if !matches!(n, Ok(n) if n > 0) {
                                return;
                            }
                            let (r, b) = stream.write_all_owned(b).await;
                            if r.is_err() {
                                return;
                            }
                            buf = b;
                        }
                    });
                }
            });
            Ok(())
        }

        fn http_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
            let listener = self
                .0
                .block_on(async { fairlane::net::TcpListener::from_std(listener) })?;
            self.0.spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let _ = stream.set_nodelay(true);
                    fairlane::spawn(async move {
                        let service = hyper::service::service_fn(crate::workloads::http::respond);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(fairlane::hyper::Timer)
                            .serve_connection(stream, service)
                            .await;
                    });
                }
            });
            Ok(())
        }

        fn axum_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
            use fairlane::axum::ListenerExt;
            use std::future::IntoFuture;
            let listener = self
                .0
                .block_on(async { fairlane::net::TcpListener::from_std(listener) })?
                .tap_io(|stream| drop(stream.set_nodelay(true)));
            let app = crate::workloads::http::axum_app();
            self.0
                .spawn(fairlane::axum::serve(listener, app).into_future());
            Ok(())
        }

        fn memcached_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
            let listener = self
                .0
                .block_on(async { fairlane::net::TcpListener::from_std(listener) })?;
            let shared = memcached_state(self.0.metrics().processors.len());
            self.0
                .spawn(fairlane_memcached::server::serve(listener, shared));
            Ok(())
        }
    }
}

mod tokio_rt {
    use super::*;

    /// tokio's multi-thread runtime with `worker_threads = processors`.
    pub struct TokioRuntime(tokio::runtime::Runtime);

    impl Spawner for tokio::runtime::Handle {
        fn spawn<F>(&self, f: F) -> impl Future<Output = F::Output> + Send + 'static
        where
            F: Future + Send + 'static,
            F::Output: Send + 'static,
        {
            let handle = tokio::runtime::Handle::spawn(self, f);
            async move {
                handle
                    .await
                    .unwrap_or_else(|e| panic!("tokio task failed: {e}"))
            }
        }
    }

    impl BenchRuntime for TokioRuntime {
        type Spawner = tokio::runtime::Handle;

        fn build(spec: &ChildSpec) -> io::Result<Self> {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder
                .worker_threads(spec.processors)
                .thread_name("tokio-bench");
            // The I/O driver only for I/O workloads: it changes how idle
            // workers park, and the other workloads measure tokio as before.
            if spec.workload.is_io() {
                builder.enable_io();
            }
            // hyper's timeouts run on tokio's timer (`axum::serve` sets
            // none, but an axum program's runtime has one: `tokio::main`
            // enables it).
            if spec.workload.is_http() {
                builder.enable_time();
            }
            builder.build().map(TokioRuntime)
        }

        fn spawner(&self) -> Self::Spawner {
            self.0.handle().clone()
        }

        fn block_on<F: Future>(&self, f: F) -> F::Output {
            self.0.block_on(f)
        }

        fn yield_now() -> impl Future<Output = ()> + Send {
            tokio::task::yield_now()
        }

        fn processors(&self) -> usize {
            self.0.metrics().num_workers()
        }

        fn echo_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            listener.set_nonblocking(true)?;
            let listener = {
                let _guard = self.0.enter();
                tokio::net::TcpListener::from_std(listener)?
            };
            self.0.spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let _ = stream.set_nodelay(true);
                        let mut buf = vec![0u8; 4096];
                        loop {
                            let n = match stream.read(&mut buf).await {
                                Ok(n) if n > 0 => n,
                                _ => return,
                            };
                            if stream.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            });
            Ok(())
        }

        fn http_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
            listener.set_nonblocking(true)?;
            let listener = {
                let _guard = self.0.enter();
                tokio::net::TcpListener::from_std(listener)?
            };
            self.0.spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(crate::workloads::http::respond);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
            Ok(())
        }

        fn axum_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
            use axum::serve::ListenerExt;
            use std::future::IntoFuture;
            listener.set_nonblocking(true)?;
            let listener = {
                let _guard = self.0.enter();
                tokio::net::TcpListener::from_std(listener)?
            }
            .tap_io(|stream| drop(stream.set_nodelay(true)));
            let app = crate::workloads::http::axum_app();
            self.0.spawn(axum::serve(listener, app).into_future());
            Ok(())
        }

        fn memcached_serve(&self, listener: std::net::TcpListener) -> io::Result<()> {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            listener.set_nonblocking(true)?;
            let listener = {
                let _guard = self.0.enter();
                tokio::net::TcpListener::from_std(listener)?
            };
            let shared = memcached_state(self.0.metrics().num_workers());
            self.0.spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let _ = stream.set_nodelay(true);
                        let mut session = fairlane_memcached::protocol::Session::new();
                        let (mut input, mut out) = (Vec::with_capacity(16384), Vec::new());
                        loop {
                            input.reserve(4096);
                            if !matches!(stream.read_buf(&mut input).await, Ok(n) if n > 0) {
                                return;
                            }
                            let done = session.execute(&shared, &input, &mut out);
                            input.drain(..done.consumed);
                            if stream.write_all(&out).await.is_err() || done.close {
                                return;
                            }
                            out.clear();
                            input.reserve(done.wanted.saturating_sub(input.len()));
                        }
                    });
                }
            });
            Ok(())
        }
    }
}

mod async_executor_rt {
    use super::*;
    use crate::sync::Semaphore;
    use async_executor::Executor;
    use std::sync::Arc;
    use std::thread::JoinHandle;

    /// One `async_executor::Executor` run by `processors` threads, each in
    /// `Executor::run` until the runtime is dropped.
    pub struct AsyncExecutorRuntime {
        executor: Arc<Executor<'static>>,
        shutdown: Arc<Semaphore>,
        threads: Vec<JoinHandle<()>>,
    }

    impl Spawner for Arc<Executor<'static>> {
        fn spawn<F>(&self, f: F) -> impl Future<Output = F::Output> + Send + 'static
        where
            F: Future + Send + 'static,
            F::Output: Send + 'static,
        {
            Executor::spawn(self, f)
        }
    }

    impl BenchRuntime for AsyncExecutorRuntime {
        type Spawner = Arc<Executor<'static>>;

        fn build(spec: &ChildSpec) -> io::Result<Self> {
            let executor = Arc::new(Executor::new());
            let shutdown = Arc::new(Semaphore::<crate::sync::Padded>::binary(false));
            let threads = (0..spec.processors)
                .map(|i| {
                    let (ex, stop) = (executor.clone(), shutdown.clone());
                    std::thread::Builder::new()
                        .name(format!("async-executor-{i}"))
                        .spawn(move || {
                            futures_lite::future::block_on(ex.run(async move {
                                let _ = stop.wait().await;
                            }))
                        })
                })
                .collect::<io::Result<Vec<_>>>()?;
            Ok(AsyncExecutorRuntime {
                executor,
                shutdown,
                threads,
            })
        }

        fn spawner(&self) -> Self::Spawner {
            self.executor.clone()
        }

        fn block_on<F: Future>(&self, f: F) -> F::Output {
            futures_lite::future::block_on(f)
        }

        fn yield_now() -> impl Future<Output = ()> + Send {
            futures_lite::future::yield_now()
        }

        fn processors(&self) -> usize {
            self.threads.len()
        }
    }

    impl Drop for AsyncExecutorRuntime {
        fn drop(&mut self) {
            self.shutdown.close();
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

mod monoio_rt {
    use std::io;
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::os::fd::OwnedFd;
    use std::sync::mpsc;
    use std::thread::JoinHandle;

    /// monoio's echo server, the thread-per-core way: `processors` threads,
    /// each running its own monoio runtime on io_uring (`IoUringDriver`) and
    /// accepting on its own clone of the listening socket (the kernel hands
    /// each connection to one of the waiting accepts); a connection is served
    /// by a task on the thread that accepted it.
    ///
    /// Dropping it shuts the listening socket down, which fails the accept
    /// waiting in every thread; each thread then waits for its connections to
    /// end (the clients have closed them by then) and is joined.
    pub struct MonoioEchoServer {
        /// The socket the threads accept on (each has its own descriptor of
        /// it); taken when dropped.
        listener: Option<TcpListener>,
        threads: Vec<JoinHandle<()>>,
    }

    impl MonoioEchoServer {
        /// Starts `processors` server threads on `listener`, returning once
        /// every one is accepting, or with the first thread's error (io_uring
        /// unavailable, for one).
        pub fn start(listener: TcpListener, processors: usize) -> io::Result<Self> {
            let mut server = MonoioEchoServer {
                listener: Some(listener),
                threads: Vec::new(),
            };
            let (ready_tx, ready) = mpsc::channel();
            for i in 0..processors.max(1) {
                let own = server.listener.as_ref().expect("not dropped").try_clone()?;
                let ready_tx = ready_tx.clone();
                server.threads.push(
                    std::thread::Builder::new()
                        .name(format!("monoio-bench-{i}"))
                        .spawn(move || serve(own, ready_tx))?,
                );
            }
            drop(ready_tx);
            for _ in 0..server.threads.len() {
                match ready.recv() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {
                        return Err(io::Error::other(
                            "a monoio server thread ended before accepting",
                        ))
                    }
                }
            }
            Ok(server)
        }
    }

    impl Drop for MonoioEchoServer {
        fn drop(&mut self) {
            if let Some(listener) = self.listener.take() {
                // shutdown(2) on a listening socket fails every accept waiting
                // on it, through any of its descriptors. std has `shutdown`
                // on streams only, where it is that same call on the
                // descriptor, so the listener is handed over as one.
                let _ = TcpStream::from(OwnedFd::from(listener)).shutdown(Shutdown::Read);
            }
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }

    /// One server thread: reports on `ready` whether it is accepting, then
    /// accepts until the listening socket is shut down and waits for its
    /// connections to end.
    fn serve(listener: TcpListener, ready: mpsc::Sender<io::Result<()>>) {
        let mut rt = match monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().build() {
            Ok(rt) => rt,
            Err(e) => {
                let e = io::Error::new(e.kind(), format!("monoio's io_uring runtime: {e}"));
                let _ = ready.send(Err(e));
                return;
            }
        };
        rt.block_on(async move {
            let listener = match monoio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            drop(ready);
            let mut connections = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                connections.push(monoio::spawn(echo(stream)));
            }
            for c in connections {
                c.await;
            }
        });
    }

    /// Echoes what `stream` sends until it closes (or fails).
    async fn echo(mut stream: monoio::net::TcpStream) {
        use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
        let _ = stream.set_nodelay(true);
        let mut buf = Vec::with_capacity(4096);
        loop {
            let (n, b) = stream.read(buf).await;
            if !matches!(n, Ok(n) if n > 0) {
                return;
            }
            let (r, b) = stream.write_all(b).await;
            if r.is_err() {
                return;
            }
            buf = b;
        }
    }
}

mod memcached_process {
    use std::io;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// Real memcached in a process of its own, with `-t processors`
    /// threads, on the port of the listener it is given; killed when
    /// dropped.
    pub struct RealMemcached(Child);

    impl RealMemcached {
        /// The program, if it is installed.
        pub fn program() -> Option<std::path::PathBuf> {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("memcached"))
                    .find(|p| p.is_file())
            })
        }

        /// Starts it on `listener`'s port (closing the listener first) and
        /// waits until it accepts.
        pub fn start(listener: std::net::TcpListener, processors: usize) -> io::Result<Self> {
            let addr = listener.local_addr()?;
            drop(listener);
            let program = Self::program().ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "memcached is not installed")
            })?;
            let mut command = Command::new(program);
            command
                .args([
                    "-t",
                    &processors.to_string(),
                    "-p",
                    &addr.port().to_string(),
                ])
                .args(["-l", &addr.ip().to_string(), "-U", "0", "-m", "64"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                // memcached refuses to run as root without a user to become.
                command.args(["-u", "nobody"]);
            }
            let server = RealMemcached(command.spawn()?);
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(addr).is_err() {
                if Instant::now() > deadline {
                    return Err(io::Error::other("memcached did not accept within 10 s"));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(server)
        }

        /// Its process id.
        pub fn pid(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for RealMemcached {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
