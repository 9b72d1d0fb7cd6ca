//! `from_std`/`into_std` on every socket type, on both I/O backends: the
//! descriptor changes hands with its connection and data, and `into_std`
//! refuses, giving the socket back, where the runtime still holds data
//! that the std socket would not see.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::time::Duration;

use common::drop_after_delivery;
use fairlane::io::IoBackend;
use fairlane::net::{IntoStdError, TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use futures_lite::AsyncReadExt;

common::on_both_backends!(
    tcp_round_trip_through_std,
    udp_round_trip_through_std,
    unix_round_trip_through_std,
    into_std_refuses_while_carried_bytes_wait,
    into_std_refuses_while_a_carried_datagram_waits,
    into_std_refuses_while_the_async_read_adapter_holds_bytes,
);

/// Whether a std socket is non-blocking (tokio's `into_std` leaves it so).
fn nonblocking(fd: &impl std::os::fd::AsRawFd) -> bool {
    // SAFETY: fcntl on a live descriptor, no pointers.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    flags & libc::O_NONBLOCK != 0
}

/// The stream an `into_std` refusal gives back.
fn given_back<T: 'static + std::fmt::Debug>(e: std::io::Error) -> T {
    assert_eq!(e.kind(), ErrorKind::ResourceBusy);
    assert!(e.to_string().contains("would lose data"), "message: {e}");
    e.into_inner()
        .expect("the error carries the socket")
        .downcast::<IntoStdError<T>>()
        .expect("an IntoStdError of this type")
        .into_inner()
}

fn tcp_round_trip_through_std(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let std_listener = listener.into_std().unwrap();
        assert!(nonblocking(&std_listener));
        let listener = TcpListener::from_std(std_listener).unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all_owned("to-std").await.0.unwrap();
        fairlane::time::sleep(Duration::from_millis(10)).await;
        let mut std_server = server.into_std().unwrap();
        assert!(nonblocking(&std_server));
        std_server.set_nonblocking(false).unwrap();
        let mut buf = [0u8; 6];
        std_server.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"to-std");
        std_server.write_all(b"back").unwrap();
        let server = TcpStream::from_std(std_server).unwrap();
        let (n, buf) = client.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"back");
        server.write_all_owned("again").await.0.unwrap();
        let (n, buf) = client.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"again");
    });
}

fn udp_round_trip_through_std(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.send_to_owned("d", b.local_addr().unwrap())
            .await
            .0
            .unwrap();
        fairlane::time::sleep(Duration::from_millis(10)).await;
        let std_b = b.into_std().unwrap();
        assert!(nonblocking(&std_b));
        std_b.set_nonblocking(false).unwrap();
        let mut buf = [0u8; 4];
        let (n, from) = std_b.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"d"[..], a.local_addr().unwrap()));
        let b = UdpSocket::from_std(std_b).unwrap();
        a.send_to_owned("e", b.local_addr().unwrap())
            .await
            .0
            .unwrap();
        let (r, buf) = b.recv_from_owned(Vec::with_capacity(4)).await;
        assert_eq!(&buf[..r.unwrap().0], b"e");
    });
}

fn unix_round_trip_through_std(backend: IoBackend) {
    let dir = std::env::temp_dir().join(format!("fairlane-std-{}-{backend:?}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("l.sock");
    let _ = std::fs::remove_file(&path);
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let std_listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let listener = UnixListener::from_std(std_listener).unwrap();
        let listener = UnixListener::from_std(listener.into_std().unwrap()).unwrap();
        let client = UnixStream::connect(&path).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (a, mut b) = StdUnixStream::pair().unwrap();
        let a = UnixStream::from_std(a).unwrap();
        a.write_all_owned("pair").await.0.unwrap();
        let mut buf = [0u8; 4];
        b.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"pair");
        client.write_all_owned("x").await.0.unwrap();
        fairlane::time::sleep(Duration::from_millis(10)).await;
        let mut std_server = server.into_std().unwrap();
        std_server.set_nonblocking(false).unwrap();
        let mut one = [0u8; 1];
        std_server.read_exact(&mut one).unwrap();
        assert_eq!(&one, b"x");
        drop(a.into_std().unwrap());
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A read dropped after the kernel gave it bytes: with io_uring they wait
/// in the runtime, so `into_std` refuses and gives the stream back; once a
/// read took them, `into_std` works and the std stream sees what follows.
fn into_std_refuses_while_carried_bytes_wait(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (s, _) = listener.accept().await.unwrap();
        drop_after_delivery(s.read_owned(Vec::with_capacity(64)), || {
            peer.write_all(b"carried").unwrap()
        })
        .await;
        let s = match s.into_std() {
            Ok(std_s) => {
                assert_eq!(backend, IoBackend::Fallback, "the carried bytes were lost");
                TcpStream::from_std(std_s).unwrap()
            }
            Err(e) => given_back::<TcpStream>(e),
        };
        let (n, buf) = s.read_owned(Vec::with_capacity(64)).await;
        assert_eq!(&buf[..n.unwrap()], b"carried");
        let mut std_s = s.into_std().unwrap();
        std_s.set_nonblocking(false).unwrap();
        peer.write_all(b"after").unwrap();
        let mut buf = [0u8; 5];
        std_s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"after");
    });
}

/// As above for a datagram.
fn into_std_refuses_while_a_carried_datagram_waits(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = s.local_addr().unwrap();
        drop_after_delivery(s.recv_from_owned(Vec::with_capacity(16)), || {
            peer.send_to(b"dgram", to).unwrap();
        })
        .await;
        let s = match s.into_std() {
            Ok(std_s) => {
                assert_eq!(
                    backend,
                    IoBackend::Fallback,
                    "the carried datagram was lost"
                );
                UdpSocket::from_std(std_s).unwrap()
            }
            Err(e) => given_back::<UdpSocket>(e),
        };
        let (r, buf) = s.recv_from_owned(Vec::with_capacity(16)).await;
        assert_eq!(&buf[..r.unwrap().0], b"dgram");
        assert!(s.into_std().is_ok());
    });
}

/// With io_uring the `AsyncRead` adapter reads ahead into its own buffer:
/// `into_std` refuses while it holds bytes, and works once they are read.
fn into_std_refuses_while_the_async_read_adapter_holds_bytes(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut s, _) = listener.accept().await.unwrap();
        peer.write_all(b"abc").unwrap();
        let mut one = [0u8; 1];
        s.read_exact(&mut one).await.unwrap();
        assert_eq!(&one, b"a");
        let mut rest = Vec::new();
        let s = match s.into_std() {
            Ok(mut std_s) => {
                // The fallback adapter reads into the caller's slice.
                assert_eq!(
                    backend,
                    IoBackend::Fallback,
                    "the adapter's bytes were lost"
                );
                std_s.set_nonblocking(false).unwrap();
                let mut two = [0u8; 2];
                std_s.read_exact(&mut two).unwrap();
                rest.extend_from_slice(&two);
                TcpStream::from_std(std_s).unwrap()
            }
            Err(e) => {
                let mut s: TcpStream = given_back(e);
                let mut two = [0u8; 2];
                s.read_exact(&mut two).await.unwrap();
                rest.extend_from_slice(&two);
                s
            }
        };
        assert_eq!(rest, b"bc");
        assert!(s.into_std().is_ok());
    });
}
