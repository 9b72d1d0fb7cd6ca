//! The server: one fairlane task per connection, reading into an owned
//! buffer, running the [`protocol`](crate::protocol) over what arrived and
//! writing the replies in one write.
//!
//! On SIGINT or SIGTERM it shuts down gracefully: it stops accepting,
//! closes each connection as soon as it is between commands (a command
//! whose bytes are still arriving is finished first), waits up to the
//! grace period for them, then cancels those left and returns. A new
//! server can then bind the same port at once. One killed with SIGKILL
//! cannot clean up: on io_uring its port stays busy for as long as the
//! kernel takes to tear its rings down (their pending accept holds the
//! listening socket).

use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fairlane::io::{IoBuf, IoBufMut};
use fairlane::net::{TcpListener, TcpStream};
use fairlane::signal::unix::{signal, Signal, SignalKind};
use slab::Slab;

use crate::protocol::{Session, Shared};
use crate::store::{Config, Store, SystemClock};

/// The bytes a connection asks for in one read, at least.
const READ_SIZE: usize = 16 * 1024;

/// How long the accept loop waits after an error that would repeat at once
/// (out of descriptors or memory).
const BACKOFF: Duration = Duration::from_millis(100);

/// The server's settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where to listen.
    pub address: String,
    /// The runtime's processors (default: one per core).
    pub processors: Option<usize>,
    /// The store's limits.
    pub store: Config,
    /// How long open connections may take to finish after a shutdown
    /// signal.
    pub grace: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            address: "127.0.0.1:11211".into(),
            processors: None,
            store: Config::default(),
            grace: Duration::from_secs(10),
        }
    }
}

/// Runs the server until SIGINT or SIGTERM and the graceful shutdown that
/// follows. It prints a line when it listens (with its address) and lines
/// on the way out, on standard error.
///
/// # Errors
/// If the runtime cannot be built, the signals cannot be listened for, or
/// the address cannot be bound.
pub fn run(options: Options) -> io::Result<()> {
    let mut builder = fairlane::Runtime::builder();
    if let Some(p) = options.processors {
        builder.processors(p);
    }
    let rt = builder.build()?;
    let processors = rt.metrics().processors.len();
    rt.block_on(async {
        // Listening before the server is announced: from then on, SIGINT
        // and SIGTERM no longer end the process, they stop the server.
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let listener = TcpListener::bind(options.address.as_str()).await?;
        let shared = Arc::new(Shared::new(
            Store::new(options.store, Arc::new(SystemClock)),
            processors,
        ));
        let connections = Arc::new(Connections::default());
        eprintln!(
            "fairlane-memcached: listening on {} ({} backend, {processors} processors)",
            listener.local_addr()?,
            fairlane::Handle::current().io_backend()
        );
        let signal = futures_lite::future::or(stop_signal(&mut interrupt, &mut terminate), async {
            accept(&listener, &shared, &connections).await;
            unreachable!("the accept loop never returns")
        })
        .await;
        drop(listener);
        eprintln!(
            "fairlane-memcached: {signal}: no longer accepting; closing {} connections as they \
             finish their commands (at most {:?})",
            connections.open(),
            options.grace
        );
        match connections.stop(options.grace).await {
            0 => {}
            left => eprintln!("fairlane-memcached: cancelling the {left} connections still open"),
        }
        Ok::<(), io::Error>(())
    })?;
    rt.shutdown_timeout(Duration::from_secs(1));
    eprintln!("fairlane-memcached: stopped");
    Ok(())
}

/// The name of the first of SIGINT and SIGTERM to arrive.
async fn stop_signal(interrupt: &mut Signal, terminate: &mut Signal) -> &'static str {
    let interrupted = async {
        interrupt.recv().await;
        "SIGINT"
    };
    let terminated = async {
        terminate.recv().await;
        "SIGTERM"
    };
    futures_lite::future::or(interrupted, terminated).await
}

/// Serves memcached on `listener` for ever, one task per connection, with
/// no signal handling: for a server inside another program (a benchmark);
/// aborting the task stops accepting.
///
/// # Example
/// ```
/// use std::sync::Arc;
/// use fairlane_memcached::protocol::Shared;
/// use fairlane_memcached::store::{Config, Store, SystemClock};
///
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let listener = rt.block_on(fairlane::net::TcpListener::bind("127.0.0.1:0"))?;
/// let addr = listener.local_addr()?;
/// let shared = Arc::new(Shared::new(Store::new(Config::default(), Arc::new(SystemClock)), 1));
/// rt.spawn(fairlane_memcached::server::serve(listener, shared));
/// let mut client = std::net::TcpStream::connect(addr)?;
/// std::io::Write::write_all(&mut client, b"version\r\n")?;
/// let mut reply = [0; 8];
/// std::io::Read::read_exact(&mut client, &mut reply)?;
/// assert_eq!(&reply, b"VERSION ");
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    accept(&listener, &shared, &Arc::new(Connections::default())).await
}

/// Accepts connections for ever, one task each.
async fn accept(listener: &TcpListener, shared: &Arc<Shared>, connections: &Arc<Connections>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let (shared, registration) = (shared.clone(), connections.register());
                drop(fairlane::spawn(connection(stream, shared, registration)));
            }
            Err(e) => {
                eprintln!("fairlane-memcached: accept failed: {e}");
                // These would fail again at once; the others concern one
                // connection.
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) {
                    fairlane::time::sleep(BACKOFF).await;
                }
            }
        }
    }
}

/// One connection, until its client closes it, sends `quit`, or the server
/// stops while it is between commands.
async fn connection(stream: TcpStream, shared: Arc<Shared>, mut registration: Registration) {
    // Relaxed: counters read on their own.
    shared.curr_connections.fetch_add(1, Ordering::Relaxed);
    shared.total_connections.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let mut session = Session::new();
    let mut input = Vec::with_capacity(READ_SIZE);
    let mut out = Vec::with_capacity(READ_SIZE);
    loop {
        let between_commands = input.is_empty() && !session.mid_command();
        if between_commands && registration.stopping() {
            break;
        }
        let read = stream.read_owned(Tail(input));
        let (n, buf) = if between_commands {
            // Between commands, a stop ends the wait for the next one.
            let stopped = async {
                poll_fn(|cx| registration.poll_stopped(cx)).await;
                None
            };
            match futures_lite::future::or(async { Some(read.await) }, stopped).await {
                Some(read) => read,
                None => break,
            }
        } else {
            read.await
        };
        input = buf.0;
        match n {
            Ok(n) if n > 0 => {}
            // End of stream or an error (reset): this connection is done.
            _ => break,
        }
        let done = session.execute(&shared, &input, &mut out);
        input.drain(..done.consumed);
        if !out.is_empty() {
            let (written, buf) = stream.write_all_owned(out).await;
            out = buf;
            out.clear();
            if written.is_err() {
                break;
            }
        }
        if done.close {
            break;
        }
        if input.is_empty() && input.capacity() > 4 * READ_SIZE {
            // After a large value: give the memory back.
            input = Vec::with_capacity(READ_SIZE);
        }
        let room = done.wanted.saturating_sub(input.len()).max(READ_SIZE);
        if input.capacity() - input.len() < room / 2 {
            input.reserve(room);
        }
    }
    shared.curr_connections.fetch_sub(1, Ordering::Relaxed);
}

/// A `Vec` read into after its initialised bytes, so that a read adds to
/// what is there.
struct Tail(Vec<u8>);

// SAFETY: the Vec's heap block does not move when the value moves, and
// `len` initialised bytes start at its pointer.
unsafe impl IoBuf for Tail {
    fn stable_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.0.len()
    }
}

// SAFETY: the `capacity - len` bytes after the initialised ones are
// allocated, writable and stay put while the value moves; `set_init(n)`
// marks `n` of them initialised, within the capacity as the caller
// promises `n <= bytes_total()`.
unsafe impl IoBufMut for Tail {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.0.spare_capacity_mut().as_mut_ptr().cast()
    }
    fn bytes_total(&self) -> usize {
        self.0.capacity() - self.0.len()
    }
    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: the caller promises the `n` bytes after `len` were
        // written, and `len + n <= capacity`.
        unsafe { self.0.set_len(self.0.len() + n) }
    }
}

/// The open connections: told to stop together, waited for together.
#[derive(Default)]
struct Connections {
    stopping: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each open connection's waker, while it waits between commands.
    wakers: Slab<Option<Waker>>,
    /// The task waiting for every connection to close.
    closed: Option<Waker>,
}

/// A connection's place in [`Connections`]; dropping it counts the
/// connection closed.
struct Registration {
    connections: Arc<Connections>,
    key: usize,
    /// The waker stored under `key`, to store another only when it changes.
    waker: Option<Waker>,
}

impl Connections {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(self: &Arc<Self>) -> Registration {
        let key = self.lock().wakers.insert(None);
        Registration {
            connections: self.clone(),
            key,
            waker: None,
        }
    }

    fn open(&self) -> usize {
        self.lock().wakers.len()
    }

    /// Tells every connection to stop once it is between commands, and
    /// waits up to `grace` for them to close; returns how many are left.
    async fn stop(&self, grace: Duration) -> usize {
        // Release, with the Acquire in `poll_stopped`: a connection that
        // stored its waker after this store sees the flag on its second
        // look; one that stored it before is woken below (the lock orders
        // the two).
        self.stopping.store(true, Ordering::Release);
        let wakers: Vec<Waker> = self
            .lock()
            .wakers
            .iter_mut()
            .filter_map(|(_, w)| w.take())
            .collect();
        wakers.into_iter().for_each(Waker::wake);
        let all_closed = poll_fn(|cx| {
            let mut inner = self.lock();
            if inner.wakers.is_empty() {
                Poll::Ready(())
            } else {
                inner.closed = Some(cx.waker().clone());
                Poll::Pending
            }
        });
        let _ = fairlane::time::timeout(grace, all_closed).await;
        self.open()
    }
}

impl Registration {
    fn stopping(&self) -> bool {
        self.connections.stopping.load(Ordering::Acquire)
    }

    /// Ready once the server stops.
    fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.stopping() {
            return Poll::Ready(());
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
            self.connections.lock().wakers[self.key] = self.waker.clone();
        }
        // `stop` may have taken the wakers between the first look and the
        // store above: look again.
        if self.stopping() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut inner = self.connections.lock();
        inner.wakers.remove(self.key);
        if inner.wakers.is_empty() {
            if let Some(w) = inner.closed.take() {
                w.wake();
            }
        }
    }
}
