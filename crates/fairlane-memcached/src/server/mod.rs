//! The server: one fairlane task per connection (see `connection.rs` for
//! what each holds), at most [`Shared::max_connections`] of them: past it a
//! new connection is told `ERROR Too many open connections` and closed, as
//! memcached does.
//!
//! On SIGINT or SIGTERM it shuts down gracefully: it stops accepting,
//! closes each connection as soon as it is between commands (a command
//! whose bytes are still arriving is finished first), waits up to the
//! grace period for them, then cancels those left and returns. A new
//! server can then bind the same port at once. One killed with SIGKILL
//! cannot clean up: on io_uring its port stays busy for as long as the
//! kernel takes to tear its rings down (their pending accept holds the
//! listening socket).

mod connection;
mod open;
mod shutdown;

use std::io;
use std::net::ToSocketAddrs;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fairlane::net::{TcpListener, TcpSocket};
use fairlane::signal::unix::{signal, Signal, SignalKind};

use self::connection::connection;
pub use self::connection::{CONNECTION_MEMORY, IDLE_READ};
use self::open::{Open, Peak};
use self::shutdown::Connections;
use crate::protocol::Shared;
use crate::store::{Config, Store, SystemClock};

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
    /// The most connections open at once (memcached's `-c`).
    pub max_connections: usize,
    /// The listening socket's queue of connections not yet accepted
    /// (memcached's `-b`; the kernel caps it at `net.core.somaxconn`).
    pub backlog: u32,
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
            max_connections: 1024,
            backlog: 1024,
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
        let listener = listen(&options.address, options.backlog)?;
        let mut shared = Shared::new(Store::new(options.store, Arc::new(SystemClock)), processors);
        shared.max_connections = options.max_connections;
        let shared = Arc::new(shared);
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

/// Listens on the first of `address`'s addresses that binds, with a queue
/// of `backlog` connections.
fn listen(address: &str, backlog: u32) -> io::Result<TcpListener> {
    let mut last = None;
    for addr in address.to_socket_addrs()? {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(addr) {
            Ok(()) => return socket.listen(backlog),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{address}: no address to listen on"),
        )
    }))
}

/// Accepts connections for ever, one task each, refusing those past the
/// maximum.
async fn accept(listener: &TcpListener, shared: &Arc<Shared>, connections: &Arc<Connections>) {
    let peak = Arc::new(Peak::default());
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                // Relaxed: only this loop adds connections, so none is
                // counted twice; one closing meanwhile only leaves room.
                if shared.curr_connections.load(Ordering::Relaxed) >= shared.max_connections as u64
                {
                    shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
                    // The socket's buffer is empty: the line goes at once,
                    // or not at all.
                    let _ = stream.try_write(b"ERROR Too many open connections\r\n");
                    continue;
                }
                let open = Open::new(shared, &peak);
                drop(fairlane::spawn(connection(
                    stream,
                    open,
                    connections.register(),
                )));
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
