//! The poll-based readiness of the streams and listeners:
//! `TcpStream::poll_read_ready`/`poll_write_ready` (ready while a try_
//! call would not block, pending once it would, the waker woken when that
//! changes) and `TcpListener`/`UnixListener::poll_accept`, on both I/O
//! backends.

mod common;

use std::io::Write;
use std::task::Poll;

use common::pair;
use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use futures_lite::future::poll_once;

common::on_both_backends!(
    tcp_poll_read_ready_follows_the_data,
    tcp_poll_write_ready_follows_the_send_buffer,
    tcp_poll_accept,
    unix_poll_accept,
    readiness_already_there_is_seen_at_once,
);

fn tcp_poll_read_ready_follows_the_data(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        let mut ready = std::pin::pin!(std::future::poll_fn(|cx| s.poll_read_ready(cx)));
        assert!(poll_once(&mut ready).await.is_none(), "nothing to read");
        peer.write_all(b"data").unwrap();
        ready.await.unwrap();
        // Readable until the bytes are taken.
        std::future::poll_fn(|cx| s.poll_read_ready(cx))
            .await
            .unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(s.try_read(&mut buf).unwrap(), 4);
        std::future::poll_fn(|cx| {
            assert!(s.poll_read_ready(cx).is_pending(), "drained");
            Poll::Ready(())
        })
        .await;
    });
}

fn tcp_poll_write_ready_follows_the_send_buffer(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        std::future::poll_fn(|cx| s.poll_write_ready(cx))
            .await
            .unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 0usize;
        loop {
            match s.try_write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("try_write: {e}"),
            }
        }
        let mut ready = std::pin::pin!(std::future::poll_fn(|cx| s.poll_write_ready(cx)));
        assert!(
            poll_once(&mut ready).await.is_none(),
            "the send buffer is full"
        );
        // The peer reads everything on a thread; the wait then ends.
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            let mut left = written;
            while left > 0 {
                left -= std::io::Read::read(&mut peer, &mut buf).unwrap();
            }
        });
        ready.await.unwrap();
        reader.join().unwrap();
    });
}

fn tcp_poll_accept(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut accept = std::pin::pin!(std::future::poll_fn(|cx| listener.poll_accept(cx)));
        assert!(poll_once(&mut accept).await.is_none(), "nobody connected");
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, peer) = accept.await.unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(server.peer_addr().unwrap(), client.local_addr().unwrap());
    });
}

fn unix_poll_accept(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let dir = std::env::temp_dir().join(format!(
        "fairlane-poll-accept-{}-{backend:?}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&dir);
    rt.block_on(async {
        let listener = UnixListener::bind(&dir).unwrap();
        let mut accept = std::pin::pin!(std::future::poll_fn(|cx| listener.poll_accept(cx)));
        assert!(poll_once(&mut accept).await.is_none(), "nobody connected");
        let client = UnixStream::connect(&dir).await.unwrap();
        let (server, _) = accept.await.unwrap();
        client.write_all_owned("x").await.0.unwrap();
        let (n, buf) = server.read_owned(Vec::with_capacity(4)).await;
        assert_eq!(&buf[..n.unwrap()], b"x");
    });
    std::fs::remove_file(&dir).unwrap();
}

/// `writable()`/`readable()` on a socket that is ready already complete on
/// their first poll (with io_uring too: the descriptor is asked before a
/// `POLL_ADD` is submitted).
fn readiness_already_there_is_seen_at_once(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        assert!(poll_once(s.writable()).await.is_some());
        peer.write_all(b"x").unwrap();
        s.readable().await.unwrap();
        assert!(poll_once(s.readable()).await.is_some());
        let ready = poll_once(s.ready(fairlane::io::Interest::READABLE)).await;
        assert!(ready.unwrap().unwrap().is_readable());
    });
}
