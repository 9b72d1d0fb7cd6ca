//! `net::TcpSocket` on both I/O backends: options set before the socket
//! connects or listens take effect, `listen` and `connect` make working
//! streams, and a `connect` that waits for its handshake leaves the thread
//! to other tasks.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::net::TcpSocket;

common::on_both_backends!(
    listen_and_connect_exchange_bytes,
    options_read_back,
    reuseport_lets_two_listeners_share_a_port,
    connect_refused_and_wrong_family_are_errors,
    a_pending_connect_does_not_block_the_thread,
);

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A listener made by `TcpSocket::listen` accepts a stream made by
/// `TcpSocket::connect`, and bytes go both ways; the options set before
/// are on the resulting sockets.
fn listen_and_connect_exchange_bytes(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let server = TcpSocket::new_v4().unwrap();
        server.set_reuseaddr(true).unwrap();
        server.bind(loopback()).unwrap();
        let bound = server.local_addr().unwrap();
        let listener = server.listen(16).unwrap();
        assert_eq!(listener.local_addr().unwrap(), bound);

        let client = TcpSocket::new_v4().unwrap();
        client.set_nodelay(true).unwrap();
        client.bind(loopback()).unwrap();
        let client_addr = client.local_addr().unwrap();
        let stream = client.connect(bound).await.unwrap();
        assert!(stream.nodelay().unwrap(), "TCP_NODELAY kept by connect");
        assert_eq!(stream.local_addr().unwrap(), client_addr);
        assert_eq!(stream.peer_addr().unwrap(), bound);

        let (peer, from) = listener.accept().await.unwrap();
        assert_eq!(from, client_addr);
        stream.write_all_owned("ping").await.0.unwrap();
        let (n, buf) = peer.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"ping");
        peer.write_all_owned("pong").await.0.unwrap();
        let (n, buf) = stream.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"pong");
    });
}

/// Each option reads back what was set (buffer sizes: at least that).
fn options_read_back(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let s = TcpSocket::new_v4().unwrap();
        for on in [true, false] {
            s.set_reuseaddr(on).unwrap();
            assert_eq!(s.reuseaddr().unwrap(), on);
            s.set_reuseport(on).unwrap();
            assert_eq!(s.reuseport().unwrap(), on);
            s.set_keepalive(on).unwrap();
            assert_eq!(s.keepalive().unwrap(), on);
            s.set_nodelay(on).unwrap();
            assert_eq!(s.nodelay().unwrap(), on);
        }
        s.set_send_buffer_size(100_000).unwrap();
        assert!(s.send_buffer_size().unwrap() >= 100_000);
        s.set_recv_buffer_size(100_000).unwrap();
        assert!(s.recv_buffer_size().unwrap() >= 100_000);
        s.set_linger(Some(Duration::from_secs(3))).unwrap();
        assert_eq!(s.linger().unwrap(), Some(Duration::from_secs(3)));
        s.set_linger(None).unwrap();
        assert_eq!(s.linger().unwrap(), None);
        assert!(s.take_error().unwrap().is_none());
    });
}

/// Two listeners with `SO_REUSEPORT` share a port; without it the second
/// bind fails with `AddrInUse`.
fn reuseport_lets_two_listeners_share_a_port(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let first = TcpSocket::new_v4().unwrap();
        first.set_reuseport(true).unwrap();
        first.bind(loopback()).unwrap();
        let addr = first.local_addr().unwrap();
        let _first = first.listen(8).unwrap();

        let plain = TcpSocket::new_v4().unwrap();
        let err = plain.bind(addr).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);

        let second = TcpSocket::new_v4().unwrap();
        second.set_reuseport(true).unwrap();
        second.bind(addr).unwrap();
        let second = second.listen(8).unwrap();
        assert_eq!(second.local_addr().unwrap(), addr);
    });
}

/// A refused connection is `ConnectionRefused`; an IPv6 address on an
/// IPv4 socket is an error, not a panic.
fn connect_refused_and_wrong_family_are_errors(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let err = TcpSocket::new_v4()
            .unwrap()
            .connect(addr)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);

        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert!(TcpSocket::new_v4().unwrap().bind(v6).is_err());
        assert!(TcpSocket::new_v4().unwrap().connect(v6).await.is_err());
    });
}

/// A connect whose handshake cannot finish (the listener's accept queue is
/// full, so the kernel drops its SYN and retries it) leaves the single
/// processor to other tasks: it completes only because a task on the same
/// processor accepts meanwhile and so makes room. A connect that blocked
/// the thread would keep that task from running until the kernel gave up.
fn a_pending_connect_does_not_block_the_thread(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let scenario = rt.spawn(async {
        let server = TcpSocket::new_v4().unwrap();
        server.bind(loopback()).unwrap();
        let listener = server.listen(0).unwrap();
        let addr = listener.local_addr().unwrap();
        // Fill the accept queue (backlog 0 holds one connection).
        let mut fillers = Vec::new();
        for _ in 0..3 {
            let filler = TcpSocket::new_v4().unwrap();
            let attempt = fairlane::time::timeout(Duration::from_millis(50), filler.connect(addr));
            if let Ok(Ok(s)) = attempt.await {
                fillers.push(s);
            }
        }
        assert!(!fillers.is_empty(), "one connection fits the accept queue");
        // Spawned on this processor, runs only when this task waits.
        let accepted = Arc::new(AtomicBool::new(false));
        let flag = accepted.clone();
        let acceptor = fairlane::spawn(async move {
            let mut streams = Vec::new();
            for _ in 0..fillers.len() + 1 {
                streams.push(listener.accept().await.unwrap().0);
                flag.store(true, Ordering::SeqCst);
            }
            streams
        });
        let stream = TcpSocket::new_v4().unwrap().connect(addr).await.unwrap();
        assert!(
            accepted.load(Ordering::SeqCst),
            "the acceptor ran while connect waited"
        );
        let streams = acceptor.await.unwrap();
        assert_eq!(
            streams.last().unwrap().peer_addr().unwrap(),
            stream.local_addr().unwrap()
        );
    });
    rt.block_on(scenario).unwrap();
}
