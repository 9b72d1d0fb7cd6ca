//! tokio's TCP options on `TcpStream` (`set_linger`/`linger`,
//! `set_quickack`/`quickack`) and `TcpSocket` (`set_tos`/`tos`), on both
//! I/O backends: the values read back, and a zero linger resetting the
//! connection when the stream is dropped (`set_zero_linger` too); `ttl`/
//! `set_ttl` on streams and listeners, and `take_error`.

mod common;

use std::io::{ErrorKind, Read};
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpSocket, TcpStream};

common::on_both_backends!(
    stream_options_read_back,
    zero_linger_resets_on_drop,
    set_zero_linger_resets_on_drop,
    ttl_and_take_error,
);

fn stream_options_read_back(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        assert_eq!(s.linger().unwrap(), None);
        s.set_linger(Some(Duration::from_millis(2500))).unwrap();
        assert_eq!(s.linger().unwrap(), Some(Duration::from_secs(2)));
        s.set_linger(None).unwrap();
        assert_eq!(s.linger().unwrap(), None);
        s.set_quickack(true).unwrap();
        assert!(s.quickack().unwrap());
        s.set_quickack(false).unwrap();
        assert!(!s.quickack().unwrap());

        let socket = TcpSocket::new_v4().unwrap();
        assert_eq!(socket.tos().unwrap(), 0);
        socket.set_tos(0x20).unwrap();
        assert_eq!(socket.tos().unwrap(), 0x20);
    });
}

fn zero_linger_resets_on_drop(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    rt.block_on(async {
        let s = TcpStream::connect(addr).await.unwrap();
        s.set_linger(Some(Duration::ZERO)).unwrap();
        drop(s);
    });
    let (mut peer, _) = l.accept().unwrap();
    peer.set_read_timeout(Some(common::DEADLINE)).unwrap();
    let err = peer.read(&mut [0u8; 8]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
}

fn set_zero_linger_resets_on_drop(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    rt.block_on(async {
        let s = TcpStream::connect(addr).await.unwrap();
        s.set_zero_linger().unwrap();
        assert_eq!(s.linger().unwrap(), Some(Duration::ZERO));
        drop(s);
    });
    let (mut peer, _) = l.accept().unwrap();
    peer.set_read_timeout(Some(common::DEADLINE)).unwrap();
    let err = peer.read(&mut [0u8; 8]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
}

fn ttl_and_take_error(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.set_ttl(33).unwrap();
        assert_eq!(l.ttl().unwrap(), 33);
        let s = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        s.set_ttl(44).unwrap();
        assert_eq!(s.ttl().unwrap(), 44);
        assert!(s.take_error().unwrap().is_none());
        let (a, _b) = fairlane::net::UnixStream::pair().unwrap();
        assert!(a.take_error().unwrap().is_none());
    });
}
