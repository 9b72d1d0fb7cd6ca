//! Sockets on both I/O backends: every scenario runs once with io_uring and
//! once with the fallback backend forced through the builder, and asserts
//! which backend is active.

mod common;

use std::io;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairlane::io::{IoBackend, IoBuf, IoBufMut};
use fairlane::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

use common::backend_runtime as runtime;

common::on_both_backends!(
    tcp_echo_with_many_connections,
    tcp_large_transfer_through_futures_io,
    tcp_split_halves,
    udp_round_trips,
    unix_echo_with_many_connections,
    connection_refused,
    address_in_use,
    closed_peer_reads_zero,
    reset_connection_is_an_error,
    dropped_reads_keep_their_buffer_until_completion,
    dropped_accepts_are_cancelled,
    busy_io_loop_yields,
    host_names_resolve_off_processor,
    completions_of_a_stuck_processor_are_rescued,
    work_that_appears_after_the_others_slept_is_watched,
    a_processor_that_resumes_with_work_is_watched,
    io_across_block_in_place,
    io_after_shutdown_is_an_error,
    incoming_and_split_halves_through_futures_io,
    futures_extension_methods_are_not_shadowed,
    thousands_of_completions_while_the_processor_is_busy,
    data_read_by_dropped_reads_lands_in_live_buffers,
);

fn tcp_echo_with_many_connections(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        fairlane::spawn(common::echo_server(listener));
        let clients: Vec<_> = (0..100u32)
            .map(|c| {
                fairlane::spawn(async move {
                    let stream = TcpStream::connect(addr).await.unwrap();
                    stream.set_nodelay(true).unwrap();
                    assert!(stream.nodelay().unwrap());
                    assert_eq!(stream.peer_addr().unwrap(), addr);
                    common::echo_round_trips(&stream, c, 20).await;
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
    });
    // A client on this (non-processor) thread: its operations go through a
    // processor's ring under its lock.
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = fairlane::spawn(common::echo_server(listener));
        let stream = TcpStream::connect(addr).await.unwrap();
        let (r, _) = stream.write_all_owned(&b"from a plain thread"[..]).await;
        r.unwrap();
        let (n, buf) = stream.read_owned(vec![0u8; 64]).await;
        assert_eq!(&buf[..n.unwrap()], b"from a plain thread");
        server.abort();
    });
}

fn tcp_large_transfer_through_futures_io(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let expected = data.clone();
        let writer = fairlane::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            AsyncWriteExt::write_all(&mut stream, &data).await.unwrap();
            stream.flush().await.unwrap();
            stream.close().await.unwrap();
        });
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected);
        writer.await.unwrap();
    });
}

fn tcp_split_halves(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        fairlane::spawn(common::echo_server(listener));
        let (read, write) = TcpStream::connect(addr).await.unwrap().into_split();
        assert_eq!(read.peer_addr().unwrap(), addr);
        let total = 200 * 1000;
        let writer = fairlane::spawn(async move {
            for _ in 0..200 {
                let (r, _) = write.write_all_owned(vec![b'z'; 1000]).await;
                r.unwrap();
            }
            drop(write); // shuts down the write side: the echo ends
        });
        let mut got = 0;
        loop {
            let (n, _) = read.read_owned(Vec::with_capacity(8192)).await;
            match n.unwrap() {
                0 => break,
                n => got += n,
            }
        }
        assert_eq!(got, total);
        writer.await.unwrap();
    });
}

fn udp_round_trips(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let server_addr = server.local_addr().unwrap();
        let echo = fairlane::spawn(async move {
            let mut buf = Vec::with_capacity(2048);
            loop {
                let (r, b) = server.recv_from_owned(buf).await;
                let (n, from) = r.unwrap();
                if &b[..n] == b"stop" {
                    return;
                }
                let (r, b) = server.send_to_owned(b, from).await;
                r.unwrap();
                buf = b;
            }
        });
        let clients: Vec<_> = (0..16u32)
            .map(|c| {
                fairlane::spawn(async move {
                    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                    for i in 0..20u32 {
                        let msg = format!("{c}/{i}").into_bytes();
                        let (r, msg) = sock.send_to_owned(msg, server_addr).await;
                        assert_eq!(r.unwrap(), msg.len());
                        let (r, buf) = sock.recv_from_owned(Vec::with_capacity(64)).await;
                        let (n, from) = r.unwrap();
                        assert_eq!(from, server_addr);
                        assert_eq!(&buf[..n], &msg[..]);
                    }
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sock.send_to_owned("stop", server_addr).await.0.unwrap();
        echo.await.unwrap();
    });
}

fn socket_path(tag: &str) -> std::path::PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "fairlane-test-{}-{tag}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&path);
    path
}

fn unix_echo_with_many_connections(backend: IoBackend) {
    let rt = runtime(backend, 2);
    let path = socket_path("echo");
    rt.block_on(async {
        let listener = UnixListener::bind(&path).unwrap();
        assert_eq!(
            listener.local_addr().unwrap().as_pathname(),
            Some(path.as_path())
        );
        fairlane::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                fairlane::spawn(async move {
                    let mut buf = [0u8; 512];
                    loop {
                        let n = AsyncReadExt::read(&mut stream, &mut buf).await.unwrap();
                        if n == 0 {
                            return;
                        }
                        AsyncWriteExt::write_all(&mut stream, &buf[..n])
                            .await
                            .unwrap();
                        stream.flush().await.unwrap();
                    }
                });
            }
        });
        let clients: Vec<_> = (0..32u32)
            .map(|c| {
                let path = path.clone();
                fairlane::spawn(async move {
                    let stream = UnixStream::connect(&path).await.unwrap();
                    for i in 0..10u32 {
                        let msg = format!("unix {c} {i}").into_bytes();
                        stream.write_all_owned(msg.clone()).await.0.unwrap();
                        let mut got = Vec::new();
                        while got.len() < msg.len() {
                            let (n, buf) = stream.read_owned(Vec::with_capacity(64)).await;
                            assert!(n.unwrap() > 0);
                            got.extend_from_slice(&buf);
                        }
                        assert_eq!(got, msg);
                    }
                    stream.shutdown_with(Shutdown::Both).unwrap();
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
    });
    let _ = std::fs::remove_file(&path);
}

fn connection_refused(backend: IoBackend) {
    let rt = runtime(backend, 2);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    rt.block_on(async {
        let err = TcpStream::connect(("127.0.0.1", port)).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        assert_eq!(err.raw_os_error(), Some(libc::ECONNREFUSED));
        let err = UnixStream::connect(socket_path("missing"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        // The runtime is unharmed.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = fairlane::spawn(async move { TcpStream::connect(addr).await.map(drop) });
        listener.accept().await.unwrap();
        client.await.unwrap().unwrap();
    });
}

fn address_in_use(backend: IoBackend) {
    let rt = runtime(backend, 1);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let err = TcpListener::bind(addr).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let err = UdpSocket::bind(udp.local_addr().unwrap())
            .await
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EADDRINUSE));
        let err = TcpListener::bind("not an address").await.unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::Other | io::ErrorKind::NotFound
            ) || err.raw_os_error().is_none(),
            "{err:?}"
        );
    });
}

fn closed_peer_reads_zero(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all_owned(&b"last words"[..]).await.0.unwrap();
        drop(client);
        let (n, buf) = server.read_owned(Vec::with_capacity(64)).await;
        assert_eq!(&buf[..n.unwrap()], b"last words");
        let (n, _) = server.read_owned(Vec::with_capacity(64)).await;
        assert_eq!(n.unwrap(), 0);
    });
}

fn reset_connection_is_an_error(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(addr).unwrap();
        let (server, _) = listener.accept().await.unwrap();
        // SO_LINGER with a zero timeout: close sends a reset.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: sets an option from a live local on an open socket.
        let r = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&client),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0);
        drop(client);
        let (n, _) = server.read_owned(Vec::with_capacity(64)).await;
        let err = n.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
        // Writing to it fails too, with an error rather than a signal.
        let (r, _) = server.write_all_owned(vec![1u8; 100_000]).await;
        assert!(r.is_err());
        // Unharmed: another connection works.
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        server.write_all_owned("ok").await.0.unwrap();
        let (n, buf) = client.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"ok");
    });
}

/// The buffer traits for a test buffer type whose bytes are its field
/// `bytes: Vec<u8>`: the types differ only in what their `Drop` records.
macro_rules! vec_backed_buf {
    ($($t:ty),*) => {$(
        // SAFETY: delegates to the Vec, whose heap block does not move while
        // the buffer lives.
        unsafe impl IoBuf for $t {
            fn stable_ptr(&self) -> *const u8 {
                self.bytes.as_ptr()
            }
            fn bytes_init(&self) -> usize {
                self.bytes.len()
            }
        }

        // SAFETY: as above.
        unsafe impl IoBufMut for $t {
            fn stable_mut_ptr(&mut self) -> *mut u8 {
                self.bytes.as_mut_ptr()
            }
            fn bytes_total(&self) -> usize {
                self.bytes.capacity()
            }
            unsafe fn set_init(&mut self, n: usize) {
                // SAFETY: forwarded contract.
                unsafe { self.bytes.set_len(n) }
            }
        }
    )*};
}

vec_backed_buf!(TrackedBuf, Canary);

/// A buffer that records when it is freed.
struct TrackedBuf {
    bytes: Vec<u8>,
    freed: Arc<AtomicBool>,
}

impl Drop for TrackedBuf {
    fn drop(&mut self) {
        assert!(!self.freed.swap(true, Ordering::SeqCst), "freed twice");
    }
}

fn dropped_reads_keep_their_buffer_until_completion(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let server = Arc::new(server);
        let mut flags = Vec::new();
        for _ in 0..50 {
            let freed = Arc::new(AtomicBool::new(false));
            flags.push(freed.clone());
            let buf = TrackedBuf {
                bytes: Vec::with_capacity(4096),
                freed,
            };
            let s = server.clone();
            // The read is in flight (nothing to read) when it is dropped.
            let r = fairlane::time::timeout(Duration::from_millis(1), async move {
                s.read_owned(buf).await
            })
            .await;
            assert!(r.is_err(), "nothing was sent, the read cannot complete");
        }
        // Every buffer is freed once its cancellation completed (the wait
        // is bounded by the test deadline).
        for freed in &flags {
            while !freed.load(Ordering::SeqCst) {
                fairlane::time::sleep(Duration::from_millis(1)).await;
            }
        }
        // No cancelled read took data: what is sent now arrives whole.
        client
            .write_all_owned(&b"after the cancelled reads"[..])
            .await
            .0
            .unwrap();
        let mut got = Vec::new();
        while got.len() < 25 {
            let (n, buf) = server.read_owned(Vec::with_capacity(64)).await;
            assert!(n.unwrap() > 0);
            got.extend_from_slice(&buf);
        }
        assert_eq!(got, b"after the cancelled reads");
    });
    // Reads dropped at shutdown: the runtime reaps them before freeing.
    let freed = Arc::new(AtomicBool::new(false));
    let flag = freed.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let keep = rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        fairlane::spawn(async move {
            let buf = TrackedBuf {
                bytes: Vec::with_capacity(4096),
                freed: flag,
            };
            tx.send(()).unwrap();
            let _ = server.read_owned(buf).await;
        });
        client
    });
    rx.recv().unwrap();
    drop(rt);
    assert!(freed.load(Ordering::SeqCst), "shutdown frees every buffer");
    drop(keep);
}

fn dropped_accepts_are_cancelled(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = listener.local_addr().unwrap();
        for _ in 0..50 {
            let l = listener.clone();
            let r = fairlane::time::timeout(Duration::from_millis(1), async move {
                l.accept().await.map(drop)
            })
            .await;
            assert!(r.is_err(), "nobody connects: the accept cannot complete");
        }
        // The listener still works, and a dropped accept never takes a
        // connection with it (both backends wait for readiness and accept
        // only when polled). Connect at once, while the cancellations of the
        // dropped accepts may still be in flight: the connection's wake-up
        // must not be lost with a cancelled request (io_uring's own ACCEPT
        // is an exclusive waiter and can lose it, which is why
        // `Socket::accept` polls instead).
        let server = fairlane::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                stream.write_all_owned("hello").await.0.unwrap();
            }
        });
        let s = TcpStream::connect(addr).await.unwrap();
        let (n, buf) = s.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(n.unwrap(), 5);
        assert_eq!(&buf[..], b"hello");
        server.abort();
    });
}

fn busy_io_loop_yields(backend: IoBackend) {
    // One processor: the flag-setting task runs only if the busy task
    // yields. Its reads are always ready (the peer sent a lot), so without
    // the cooperative budget it would never return to the loop.
    let rt = runtime(backend, 1);
    rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // Few enough to fit in the socket's receive buffer.
        for _ in 0..100 {
            sender.send_to(b"x", addr).unwrap();
        }
        let s = stop.clone();
        let busy = fairlane::spawn(async move {
            let mut reads = 0u64;
            let mut buf = Vec::with_capacity(16);
            while !s.load(Ordering::SeqCst) {
                // Ready at once as long as datagrams are queued; then ready
                // sleeps keep it busy.
                if reads < 90 {
                    let (r, b) = sock.recv_from_owned(buf).await;
                    r.unwrap();
                    buf = b;
                } else {
                    fairlane::time::sleep(Duration::ZERO).await;
                }
                reads += 1;
            }
            reads
        });
        let s = stop.clone();
        let setter = fairlane::spawn(async move { s.store(true, Ordering::SeqCst) });
        setter.await.unwrap();
        assert!(busy.await.unwrap() > 0);
    });
}

fn host_names_resolve_off_processor(backend: IoBackend) {
    let rt = runtime(backend, 1);
    rt.block_on(async {
        let listener = TcpListener::bind("localhost:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = fairlane::spawn(async move { TcpStream::connect(("localhost", port)).await });
        let (_s, peer) = listener.accept().await.unwrap();
        assert!(peer.ip().is_loopback());
        client.await.unwrap().unwrap();
        let err = TcpStream::connect("no-such-host.invalid:80")
            .await
            .unwrap_err();
        assert!(err.raw_os_error().is_none() || err.kind() != io::ErrorKind::ConnectionRefused);
    });
}

fn completions_of_a_stuck_processor_are_rescued(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let reader = fairlane::spawn(async move {
            // A task that never yields, queued on this processor: it runs
            // here while the read waits, and stops only once the read
            // completed, which needs another processor to reap this
            // processor's completion (or to take one of the two tasks).
            let spin = d.clone();
            fairlane::spawn(async move {
                while !spin.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
            });
            let (n, buf) = server.read_owned(Vec::with_capacity(16)).await;
            d.store(true, Ordering::SeqCst);
            (n.unwrap(), buf)
        });
        fairlane::time::sleep(Duration::from_millis(20)).await;
        client.write_all_owned("wake").await.0.unwrap();
        let (n, buf) = reader.await.unwrap();
        assert_eq!(&buf[..n], b"wake");
        assert!(done.load(Ordering::SeqCst));
    });
}

/// The other processor goes to sleep while this one has nothing in its
/// engine, so it watches nobody; then this one adopts a socket (on the
/// fallback backend, a registration in its engine) and submits a read on
/// it, and never yields again, polling the read in a loop. Nothing wakes
/// the sleeper but the watch handshake (the work's appearance finds it
/// sleeping unwatched and wakes it, and it then watches this processor),
/// and only a helper can submit and reap the read (or poll for its
/// readiness): without the handshake this hangs.
fn work_that_appears_after_the_others_slept_is_watched(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let (server, mut client) = common::std_pair();
        let submitted = Arc::new(AtomicBool::new(false));
        let s = submitted.clone();
        let reader = fairlane::spawn(async move {
            // Blocks this processor while the other finds nothing to do and
            // sleeps (this one has no I/O in flight and no timer).
            std::thread::sleep(Duration::from_millis(100));
            let server = fairlane::net::TcpStream::from_std(server).unwrap();
            let mut read = std::pin::pin!(server.read_owned(Vec::with_capacity(16)));
            loop {
                // The first poll submits the read; the loop never yields.
                if let std::task::Poll::Ready((n, buf)) = poll_once(read.as_mut()) {
                    break (n.unwrap(), buf);
                }
                s.store(true, Ordering::SeqCst);
                std::hint::spin_loop();
            }
        });
        while !submitted.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::io::Write::write_all(&mut client, b"wake").unwrap();
        let (n, buf) = reader.await.unwrap();
        assert_eq!(&buf[..n], b"wake");
    });
}

/// Both processors sleep while one has a read in flight in its engine (a
/// sleeper does not watch a parked processor: its own wait covers its
/// engine). Then that one resumes for a second read's completion and never
/// yields again, polling the first read in a loop, which only a helper can
/// reap: the resuming processor must announce its work so that the sleeper
/// watches it. Where the other processor takes the resumed task instead,
/// the round completes anyway; twenty rounds make the stuck case likely.
fn a_processor_that_resumes_with_work_is_watched(backend: IoBackend) {
    let rt = runtime(backend, 2);
    for _ in 0..20 {
        rt.block_on(resume_with_work_once());
    }
}

async fn resume_with_work_once() {
    let (first, mut first_peer) = common::std_pair();
    let (second, mut second_peer) = common::std_pair();
    let armed = Arc::new(AtomicBool::new(false));
    let resumed = Arc::new(AtomicBool::new(false));
    let (a, r) = (armed.clone(), resumed.clone());
    let task = fairlane::spawn(async move {
        // Both sockets in this processor's engine (fallback: registered
        // here; io_uring: their reads are submitted here).
        let first = fairlane::net::TcpStream::from_std(first).unwrap();
        let second = fairlane::net::TcpStream::from_std(second).unwrap();
        let mut stuck = std::pin::pin!(first.read_owned(Vec::with_capacity(16)));
        assert!(
            poll_once(stuck.as_mut()).is_pending(),
            "nothing was sent yet"
        );
        a.store(true, Ordering::SeqCst);
        let (n, _) = second.read_owned(Vec::with_capacity(16)).await;
        assert_eq!(n.unwrap(), 6);
        r.store(true, Ordering::SeqCst);
        loop {
            if let std::task::Poll::Ready((n, buf)) = poll_once(stuck.as_mut()) {
                break (n.unwrap(), buf);
            }
            std::hint::spin_loop();
        }
    });
    while !armed.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Both processors go to sleep.
    std::thread::sleep(Duration::from_millis(20));
    std::io::Write::write_all(&mut second_peer, b"resume").unwrap();
    while !resumed.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::io::Write::write_all(&mut first_peer, b"wake").unwrap();
    let (n, buf) = task.await.unwrap();
    assert_eq!(&buf[..n], b"wake");
}

/// One poll of `f` with a waker that does nothing (the caller polls again).
fn poll_once<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
    f.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
}

fn io_across_block_in_place(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        fairlane::spawn(common::echo_server(listener));
        let task = fairlane::spawn(async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            for round in 0..3u8 {
                // The processor is handed to a replacement thread and back;
                // its ring and its operations stay.
                fairlane::task::block_in_place(|| std::thread::sleep(Duration::from_millis(5)));
                stream.write_all_owned(vec![round; 10]).await.0.unwrap();
                let (n, buf) = stream.read_owned(Vec::with_capacity(10)).await;
                assert_eq!(n.unwrap(), 10);
                assert_eq!(buf, vec![round; 10]);
            }
        });
        task.await.unwrap();
    });
}

fn io_after_shutdown_is_an_error(backend: IoBackend) {
    let rt = runtime(backend, 1);
    let (listener, client) = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        (listener, client)
    });
    let handle = rt.handle().clone();
    drop(rt);
    // The objects outlive their runtime: using them is an error, not a hang.
    let other = runtime(backend, 1);
    other.block_on(async {
        let (n, _) = client.read_owned(Vec::with_capacity(8)).await;
        assert!(n.is_err());
        assert!(listener.accept().await.is_err());
    });
    drop(handle);
}

fn futures_extension_methods_are_not_shadowed(backend: IoBackend) {
    // Ported code calls the futures extension traits' `read`/`write_all`
    // with borrowed slices; the owned-buffer operations have names of their
    // own, so these resolve to the traits' methods.
    let rt = runtime(backend, 1);
    rt.block_on(async {
        let (mut client, mut server) = common::fairlane_pair().await;
        client.write_all(b"ported from tokio").await.unwrap();
        client.flush().await.unwrap();
        let mut buf = [0u8; 17];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ported from tokio");
        let n = server.write(b"ok").await.unwrap();
        assert_eq!(n, 2);
        server.flush().await.unwrap();
        let mut two = [0u8; 2];
        let n = client.read(&mut two).await.unwrap();
        assert!(n > 0);
    });
}

fn incoming_and_split_halves_through_futures_io(backend: IoBackend) {
    use futures_lite::StreamExt;
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = fairlane::spawn(async move {
            let mut incoming = listener.incoming();
            for _ in 0..3 {
                let stream = incoming.next().await.unwrap().unwrap();
                let (mut read, mut write) = stream.into_split();
                fairlane::spawn(async move {
                    let mut data = Vec::new();
                    read.read_to_end(&mut data).await.unwrap();
                    AsyncWriteExt::write_all(&mut write, &data).await.unwrap();
                    write.close().await.unwrap();
                });
            }
        });
        for i in 0..3u8 {
            let (mut read, mut write) = TcpStream::connect(addr).await.unwrap().into_split();
            let msg = vec![i; 10_000];
            AsyncWriteExt::write_all(&mut write, &msg).await.unwrap();
            write.close().await.unwrap();
            let mut back = Vec::new();
            read.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, msg);
        }
        server.await.unwrap();
    });
}

fn thousands_of_completions_while_the_processor_is_busy(backend: IoBackend) {
    // One processor, 700 receives in flight on as many sockets; a task that
    // does not yield holds the processor while all of them complete (more
    // than the completion queue holds: the kernel keeps the rest in its
    // overflow list). Every one must still arrive.
    const N: usize = 700;
    let rt = runtime(backend, 1);
    let sockets: Vec<Arc<UdpSocket>> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..N {
            v.push(Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap()));
        }
        v
    });
    let received = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for s in &sockets {
        let (s, received, started) = (s.clone(), received.clone(), started.clone());
        tasks.push(rt.spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let (r, buf) = s.recv_from_owned(Vec::with_capacity(8)).await;
            assert_eq!(r.unwrap().0, 1);
            assert_eq!(buf, b"x");
            received.fetch_add(1, Ordering::SeqCst);
        }));
    }
    while started.load(Ordering::SeqCst) < N {
        std::thread::sleep(Duration::from_millis(1));
    }
    let g = go.clone();
    let busy = rt.spawn(async move {
        while !g.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
    });
    // Let the receives reach the kernel before the processor is taken.
    std::thread::sleep(Duration::from_millis(50));
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for s in &sockets {
        sender.send_to(b"x", s.local_addr().unwrap()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    go.store(true, Ordering::SeqCst);
    rt.block_on(async {
        busy.await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert_eq!(received.load(Ordering::SeqCst), N);
}

/// A buffer whose spare capacity starts zeroed; when freed without having
/// been handed back, it reports how many marker bytes the kernel wrote into
/// it (a read that completed after its future was dropped).
struct Canary {
    bytes: Vec<u8>,
    handed_back: bool,
    found: Arc<AtomicUsize>,
    freed: Arc<AtomicUsize>,
}

const MARK: u8 = 0xAB;

impl Canary {
    fn new(found: &Arc<AtomicUsize>, freed: &Arc<AtomicUsize>) -> Canary {
        let mut bytes = vec![0u8; 64];
        bytes.clear(); // capacity 64, every byte initialised to 0
        Canary {
            bytes,
            handed_back: false,
            found: found.clone(),
            freed: freed.clone(),
        }
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        if !self.handed_back {
            // SAFETY: all 64 bytes of the capacity were initialised (zeroed)
            // when the Vec was made, and the kernel only writes bytes.
            let all =
                unsafe { std::slice::from_raw_parts(self.bytes.as_ptr(), self.bytes.capacity()) };
            let n = all.iter().filter(|&&b| b == MARK).count();
            self.found.fetch_add(n, Ordering::SeqCst);
        }
        self.freed.fetch_add(1, Ordering::SeqCst);
    }
}

fn data_read_by_dropped_reads_lands_in_live_buffers(backend: IoBackend) {
    // Reads are dropped by a short timeout while a peer keeps sending marker
    // bytes. A dropped read may still complete (the data arrives before the
    // cancellation): the kernel then writes into its buffer, which must
    // still be alive, and the runtime hands those bytes to the next read.
    // Every byte sent reaches a read that returned, as a marker byte: a
    // write into freed memory would be missing or garbled, and every
    // buffer is freed in the end.
    const BYTES: usize = 300;
    let rt = runtime(backend, 2);
    for on_processor in [true, false] {
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let sender = std::thread::spawn(move || {
            use std::io::Write;
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            // About one byte per timer tick, so that data and timeouts
            // often meet.
            for i in 0..BYTES {
                s.write_all(&[MARK]).unwrap();
                std::thread::sleep(Duration::from_micros(700 + (i as u64 * 37) % 600));
            }
        });
        let found = Arc::new(AtomicUsize::new(0));
        let freed = Arc::new(AtomicUsize::new(0));
        let (f, fr) = (found.clone(), freed.clone());
        let scenario = async move {
            let (server, _) = listener.accept().await.unwrap();
            let mut read_back = 0;
            let mut made = 0;
            loop {
                made += 1;
                let buf = Canary::new(&f, &fr);
                // On a timeout the read is dropped in flight.
                let read =
                    fairlane::time::timeout(Duration::from_micros(900), server.read_owned(buf));
                if let Ok((n, mut buf)) = read.await {
                    buf.handed_back = true;
                    let n = n.unwrap();
                    if n == 0 {
                        break;
                    }
                    assert!(buf.bytes[..n].iter().all(|&b| b == MARK));
                    read_back += n;
                }
            }
            // Every buffer is freed once its operation is reaped.
            while fr.load(Ordering::SeqCst) < made {
                fairlane::time::sleep(Duration::from_millis(1)).await;
            }
            read_back
        };
        let read_back = if on_processor {
            rt.block_on(rt.spawn(scenario)).unwrap()
        } else {
            rt.block_on(scenario)
        };
        sender.join().unwrap();
        assert_eq!(
            read_back,
            BYTES,
            "{backend} (on a processor: {on_processor}): {read_back} read, {} in dropped buffers",
            found.load(Ordering::SeqCst)
        );
    }
}
