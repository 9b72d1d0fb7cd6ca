//! What clients can make the server hold, counted by a counting allocator
//! (this test binary's global allocator): with a memory limit of 8 MiB, the
//! server's live bytes stay within the limit plus, per connection,
//! [`CONNECTION_MEMORY`], whatever the clients send: gets of a large value
//! pipelined and never read (while another client keeps replacing the
//! value), and values announced and never finished. On both I/O backends.
//!
//! The server runs in this process, its clients on threads of their own
//! that allocate nothing while the counts are taken.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlane::io::IoBackend;
use fairlane_memcached::protocol::Shared;
use fairlane_memcached::server::{serve, CONNECTION_MEMORY};
use fairlane_memcached::store::{Config, Store, SystemClock};

/// Counts the bytes allocated and not yet freed, and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// Relaxed: lone counters; a peak read after the threads that moved them
// were waited for (or their effects observed) is what the tests use.
fn grown(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn shrunk(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator with the
// caller's arguments; the counting touches no memory of the blocks.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's promises about `layout` are System's.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            grown(layout.size());
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let block = unsafe { System.alloc_zeroed(layout) };
        if !block.is_null() {
            grown(layout.size());
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: the caller gives back a block System allocated with
        // `layout`.
        unsafe { System.dealloc(block, layout) };
        shrunk(layout.size());
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`, and `new_size` is the caller's promise.
        let moved = unsafe { System.realloc(block, layout, new_size) };
        if !moved.is_null() {
            if new_size > layout.size() {
                grown(new_size - layout.size());
            } else {
                shrunk(layout.size() - new_size);
            }
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The tests take turns: the counts are the process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const LIMIT: usize = 8 << 20;

/// Generous: only a server that hangs takes this long.
const DEADLINE: Duration = Duration::from_secs(60);

/// Room for what the process allocates besides the server's connections
/// and items: the runtime's rings and tasks, the client threads' stacks
/// bookkeeping, one value being stored while its bytes are still in a
/// connection's buffer.
const SLACK: usize = 2 << 20;

/// A server with an 8 MiB memory limit on `backend`, in this process.
fn server(backend: IoBackend) -> (fairlane::Runtime, Arc<Shared>, SocketAddr) {
    let rt = fairlane::Runtime::builder()
        .processors(2)
        .io_backend(backend)
        .build()
        .expect("a runtime");
    let listener = rt
        .block_on(fairlane::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a listener");
    let addr = listener.local_addr().unwrap();
    let config = Config {
        memory_limit: LIMIT,
        ..Config::default()
    };
    let shared = Arc::new(Shared::new(Store::new(config, Arc::new(SystemClock)), 2));
    rt.spawn(serve(listener, shared.clone()));
    (rt, shared, addr)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    stream
}

/// Waits until `done` holds, up to the deadline.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sets `key` to `value` and waits for the reply.
fn set(stream: &mut TcpStream, key: &str, value: &[u8]) {
    let mut command = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
    command.extend_from_slice(value);
    command.extend_from_slice(b"\r\n");
    stream.write_all(&command).unwrap();
    let mut reply = [0; 8];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"STORED\r\n");
}

/// The peak of live bytes over what `attack` does, from a count taken
/// after the server started.
fn peak_over(attack: impl FnOnce()) -> (usize, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    attack();
    (base, PEAK.load(Ordering::Relaxed))
}

/// Connections that each send one write of 1,820 gets of a 20 KB value and
/// read nothing for a while, then everything; meanwhile another client
/// replaces the value again and again, so that replies hold values the
/// store let go.
#[test]
fn pipelined_gets_do_not_grow_the_server() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for backend in [IoBackend::IoUring, IoBackend::Fallback] {
        let (_rt, shared, addr) = server(backend);
        let value = vec![b'v'; 20_000];
        let mut writer = connect(addr);
        set(&mut writer, "big", &value);
        const CONNECTIONS: usize = 8;
        let gets = b"get big\r\n".repeat(1820);
        let mut clients: Vec<TcpStream> = (0..CONNECTIONS).map(|_| connect(addr)).collect();
        let (base, peak) = peak_over(|| {
            for client in &mut clients {
                client.write_all(&gets).unwrap();
            }
            for round in 0..50 {
                let mut other = value.clone();
                other[0] = b'0' + round % 10;
                set(&mut writer, "big", &other);
            }
            // Every reply read: every get ran.
            let len = value.len();
            std::thread::scope(|scope| {
                for client in &mut clients {
                    scope.spawn(move || {
                        let mut reader = BufReader::with_capacity(64 << 10, client);
                        let mut line = String::with_capacity(64);
                        let mut skip = vec![0; len + 2];
                        for _ in 0..1820 {
                            line.clear();
                            reader.read_line(&mut line).unwrap();
                            assert!(line.starts_with("VALUE big 0 20000"), "{line:?}");
                            reader.read_exact(&mut skip).unwrap();
                            line.clear();
                            reader.read_line(&mut line).unwrap();
                            assert_eq!(line, "END\r\n");
                        }
                    });
                }
            });
        });
        let bound = LIMIT + (CONNECTIONS + 1) * CONNECTION_MEMORY + SLACK;
        eprintln!("{backend}: grew by {} bytes (bound {bound})", peak - base);
        assert!(
            peak - base <= bound,
            "{backend}: the server grew by {} bytes, more than {bound}",
            peak - base
        );
        assert!(shared.store.memory_used() <= LIMIT);
    }
}

/// 50 connections each announce a value of 1,000,000 bytes, send all but
/// 10 of them, and stop: the values still arriving are given room only
/// within the memory limit; the others are refused (and their bytes
/// skipped), as memcached refuses what it has no memory for.
#[test]
fn unfinished_values_stay_within_the_limit() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for backend in [IoBackend::IoUring, IoBackend::Fallback] {
        let (_rt, shared, addr) = server(backend);
        const CONNECTIONS: usize = 50;
        let body = vec![b'v'; 999_990];
        let refused = AtomicUsize::new(0);
        let mut clients: Vec<TcpStream> = (0..CONNECTIONS).map(|_| connect(addr)).collect();
        let (base, peak) = peak_over(|| {
            std::thread::scope(|scope| {
                for (i, client) in clients.iter_mut().enumerate() {
                    let body = &body;
                    scope.spawn(move || {
                        client
                            .write_all(format!("set p{i} 0 0 1000000\r\n").as_bytes())
                            .unwrap();
                        client.write_all(body).unwrap();
                    });
                }
            });
            // Each line is read once its connection is either given room
            // (held as a reservation) or refused (an error to read).
            let mut readers: Vec<_> = clients.iter().map(|c| c.try_clone().unwrap()).collect();
            for reader in &mut readers {
                reader.set_nonblocking(true).unwrap();
            }
            let mut line = [0; 64];
            wait_until("every value to be given room or refused", || {
                for reader in &mut readers {
                    if let Ok(n) = reader.read(&mut line) {
                        assert!(
                            line[..n].starts_with(b"SERVER_ERROR out of memory"),
                            "{:?}",
                            String::from_utf8_lossy(&line[..n])
                        );
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let given_room = shared.store.stats().reserved as usize / 1_000_000;
                given_room + refused.load(Ordering::Relaxed) == CONNECTIONS
            });
        });
        let bound = LIMIT + CONNECTIONS * CONNECTION_MEMORY + SLACK;
        eprintln!("{backend}: grew by {} bytes (bound {bound})", peak - base);
        assert!(
            peak - base <= bound,
            "{backend}: the server grew by {} bytes, more than {bound}",
            peak - base
        );
        assert!(refused.load(Ordering::Relaxed) > 0);
        // Closed, the connections give their room back.
        drop(clients);
        wait_until("the reservations to be released", || {
            shared.store.stats().reserved == 0
        });
    }
}
