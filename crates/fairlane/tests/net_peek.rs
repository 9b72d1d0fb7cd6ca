//! `TcpStream::peek` and `poll_peek`: what the next read returns, left in
//! place; the end of the stream; and, with io_uring, bytes a dropped read
//! left come first; on both I/O backends.

mod common;

use std::io::Write;

use common::{drop_after_delivery, pair};
use fairlane::io::IoBackend;
use futures_lite::future::poll_once;

common::on_both_backends!(
    peek_leaves_the_bytes_for_the_next_read,
    peek_waits_for_data,
    peek_sees_the_end_of_the_stream,
    poll_peek_registers_the_waker,
    peek_sees_bytes_a_dropped_read_left,
);

fn peek_leaves_the_bytes_for_the_next_read(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        peer.write_all(&[1, 2, 3, 4]).unwrap();
        let mut buf = [0u8; 16];
        let n = s.peek(&mut buf).await.unwrap();
        assert_eq!(buf[..n], [1, 2, 3, 4]);
        let mut small = [0u8; 2];
        assert_eq!(s.peek(&mut small).await.unwrap(), 2);
        assert_eq!(small, [1, 2]);
        let (n, got) = s.read_owned(Vec::with_capacity(16)).await;
        assert_eq!(got[..n.unwrap()], [1, 2, 3, 4]);
        assert_eq!(s.peek(&mut []).await.unwrap(), 0);
    });
}

fn peek_waits_for_data(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        let mut buf = [0u8; 8];
        {
            let mut peek = std::pin::pin!(s.peek(&mut buf));
            assert!(poll_once(&mut peek).await.is_none(), "nothing sent yet");
            peer.write_all(b"hi").unwrap();
            assert_eq!(peek.await.unwrap(), 2);
        }
        assert_eq!(&buf[..2], b"hi");
    });
}

fn peek_sees_the_end_of_the_stream(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, peer) = pair().await;
        drop(peer);
        assert_eq!(s.peek(&mut [0u8; 8]).await.unwrap(), 0);
        assert_eq!(s.peek(&mut [0u8; 8]).await.unwrap(), 0);
    });
}

fn poll_peek_registers_the_waker(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        let mut buf = [0u8; 8];
        let mut peek = std::pin::pin!(std::future::poll_fn(|cx| s.poll_peek(cx, &mut buf)));
        assert!(poll_once(&mut peek).await.is_none());
        peer.write_all(b"abc").unwrap();
        assert_eq!(peek.await.unwrap(), 3);
        assert_eq!(s.try_read(&mut buf).unwrap(), 3);
    });
}

fn peek_sees_bytes_a_dropped_read_left(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        drop_after_delivery(s.read_owned(Vec::with_capacity(4)), || {
            peer.write_all(b"abcdef").unwrap()
        })
        .await;
        // The dropped read may have taken the first bytes (io_uring): peek
        // shows them, and the reads that follow return everything in order.
        let mut buf = [0u8; 16];
        let n = s.peek(&mut buf).await.unwrap();
        assert!(n > 0 && b"abcdef".starts_with(&buf[..n]), "{:?}", &buf[..n]);
        let mut got = Vec::new();
        while got.len() < 6 {
            let (n, b) = s.read_owned(Vec::with_capacity(16)).await;
            assert!(n.unwrap() > 0);
            got.extend_from_slice(&b);
        }
        assert_eq!(got, b"abcdef");
    });
}
