//! `UnixDatagram`'s readiness and poll-based I/O (`ready`,
//! `poll_send_ready`/`poll_recv_ready`, `poll_send`, `poll_send_to`,
//! `poll_recv`, `poll_recv_from`), `take_error` and `shutdown`, on both
//! I/O backends.

mod common;

use std::future::poll_fn;

use fairlane::io::{Interest, IoBackend};
use fairlane::net::UnixDatagram;
use futures_lite::future::poll_once;

common::on_both_backends!(poll_send_and_recv_ready, send_to_a_path, shutdown_write);
#[cfg(feature = "tokio-io")]
common::on_both_backends!(poll_recv_fills_a_read_buf);

fn poll_send_and_recv_ready(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = UnixDatagram::pair().unwrap();
        let mut ready = std::pin::pin!(poll_fn(|cx| b.poll_recv_ready(cx)));
        assert!(poll_once(&mut ready).await.is_none(), "nothing sent yet");
        poll_fn(|cx| a.poll_send_ready(cx)).await.unwrap();
        assert_eq!(poll_fn(|cx| a.poll_send(cx, b"one")).await.unwrap(), 3);
        ready.await.unwrap();
        assert!(b.ready(Interest::READABLE).await.unwrap().is_readable());
        let mut buf = [0u8; 8];
        assert_eq!(b.try_recv(&mut buf).unwrap(), 3);
        assert!(a.take_error().unwrap().is_none());
    });
}

fn send_to_a_path(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let path = std::env::temp_dir().join(format!(
        "fairlane-dgram-poll-{}-{backend:?}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    rt.block_on(async {
        let server = UnixDatagram::bind(&path).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        let n = poll_fn(|cx| client.poll_send_to(cx, b"to path", &path))
            .await
            .unwrap();
        assert_eq!(n, 7);
        let mut buf = [0u8; 16];
        assert_eq!(server.recv(&mut buf).await.unwrap(), 7);
        let bad = poll_fn(|cx| client.poll_send_to(cx, b"x", "")).await;
        assert_eq!(bad.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    });
    std::fs::remove_file(&path).unwrap();
}

fn shutdown_write(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, _b) = UnixDatagram::pair().unwrap();
        a.shutdown(std::net::Shutdown::Write).unwrap();
        let err = a.try_send(b"x").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
    });
}

#[cfg(feature = "tokio-io")]
fn poll_recv_fills_a_read_buf(backend: IoBackend) {
    use tokio::io::ReadBuf;
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = UnixDatagram::pair().unwrap();
        let mut space = [0u8; 16];
        {
            let mut buf = ReadBuf::new(&mut space);
            let mut recv = std::pin::pin!(poll_fn(|cx| b.poll_recv_from(cx, &mut buf)));
            assert!(poll_once(&mut recv).await.is_none(), "nothing sent yet");
            a.send(b"first").await.unwrap();
            let from = recv.await.unwrap();
            assert!(from.is_unnamed());
        }
        assert_eq!(&space[..5], b"first");
        a.send(b"second").await.unwrap();
        let mut buf = ReadBuf::new(&mut space);
        poll_fn(|cx| b.poll_recv(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"second");
    });
}
