//! tokio's TCP options on `TcpStream` (`set_linger`/`linger`,
//! `set_quickack`/`quickack`) and `TcpSocket` (`set_tos`/`tos`), on both
//! I/O backends: the values read back, and a zero linger resetting the
//! connection when the stream is dropped.

mod common;

use std::io::{ErrorKind, Read};
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpSocket, TcpStream};

common::on_both_backends!(stream_options_read_back, zero_linger_resets_on_drop);

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
