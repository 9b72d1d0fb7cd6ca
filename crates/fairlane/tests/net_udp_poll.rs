//! `UdpSocket`'s readiness and poll-based I/O (`poll_send`,
//! `poll_send_to`, `poll_recv`, `poll_recv_from`, `poll_peek`,
//! `poll_peek_from`, `poll_send_ready`/`poll_recv_ready`) and its peeks
//! (`peek`, `try_peek_from`, `peek_sender`, `try_peek_sender`,
//! `poll_peek_sender`), on both I/O backends.

mod common;

use std::future::poll_fn;

use fairlane::io::{Interest, IoBackend};
use fairlane::net::UdpSocket;
use futures_lite::future::poll_once;

common::on_both_backends!(
    poll_send_to_and_recv_ready,
    peeks_leave_the_datagram,
    peek_sender_names_the_sender,
    ready_reports_both_directions,
);
#[cfg(feature = "tokio-io")]
common::on_both_backends!(poll_recv_and_peek_fill_a_read_buf);

async fn two() -> (UdpSocket, UdpSocket) {
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    (a, b)
}

fn poll_send_to_and_recv_ready(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = two().await;
        let mut ready = std::pin::pin!(poll_fn(|cx| b.poll_recv_ready(cx)));
        assert!(poll_once(&mut ready).await.is_none(), "nothing sent yet");
        poll_fn(|cx| a.poll_send_ready(cx)).await.unwrap();
        let to = b.local_addr().unwrap();
        let n = poll_fn(|cx| a.poll_send_to(cx, b"one", to)).await.unwrap();
        assert_eq!(n, 3);
        ready.await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(
            b.try_recv_from(&mut buf).unwrap(),
            (3, a.local_addr().unwrap())
        );
        a.connect(to).await.unwrap();
        assert_eq!(poll_fn(|cx| a.poll_send(cx, b"two")).await.unwrap(), 3);
        assert_eq!(b.recv(&mut buf).await.unwrap(), 3);
        assert_eq!(&buf[..3], b"two");
    });
}

fn peeks_leave_the_datagram(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = two().await;
        let mut buf = [0u8; 8];
        let err = b.try_peek_from(&mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
        a.send_to(b"hello", b.local_addr().unwrap()).await.unwrap();
        assert_eq!(b.peek(&mut buf).await.unwrap(), 5);
        assert_eq!(
            b.try_peek_from(&mut buf).unwrap(),
            (5, a.local_addr().unwrap())
        );
        // A shorter buffer: the peek is cut, the datagram stays whole.
        let mut small = [0u8; 2];
        assert_eq!(b.try_peek(&mut small).unwrap(), 2);
        assert_eq!(&small, b"he");
        assert_eq!(b.recv(&mut buf).await.unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        let err = b.try_peek(&mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    });
}

fn peek_sender_names_the_sender(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = two().await;
        let (c, _) = two().await;
        let err = b.try_peek_sender().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
        let mut peek = std::pin::pin!(poll_fn(|cx| b.poll_peek_sender(cx)));
        assert!(poll_once(&mut peek).await.is_none());
        a.send_to(b"from a", b.local_addr().unwrap()).await.unwrap();
        assert_eq!(peek.await.unwrap(), a.local_addr().unwrap());
        c.send_to(b"from c", b.local_addr().unwrap()).await.unwrap();
        assert_eq!(b.peek_sender().await.unwrap(), a.local_addr().unwrap());
        assert_eq!(b.try_peek_sender().unwrap(), a.local_addr().unwrap());
        let mut buf = [0u8; 8];
        assert_eq!(
            b.recv_from(&mut buf).await.unwrap().1,
            a.local_addr().unwrap()
        );
        assert_eq!(b.peek_sender().await.unwrap(), c.local_addr().unwrap());
    });
}

fn ready_reports_both_directions(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = two().await;
        let ready = b
            .ready(Interest::READABLE | Interest::WRITABLE)
            .await
            .unwrap();
        assert!(ready.is_writable() && !ready.is_readable());
        a.send_to(b"x", b.local_addr().unwrap()).await.unwrap();
        let ready = b.ready(Interest::READABLE).await.unwrap();
        assert!(ready.is_readable());
    });
}

#[cfg(feature = "tokio-io")]
fn poll_recv_and_peek_fill_a_read_buf(backend: IoBackend) {
    use tokio::io::ReadBuf;
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = two().await;
        let mut space = [0u8; 16];
        {
            let mut buf = ReadBuf::new(&mut space);
            let mut recv = std::pin::pin!(poll_fn(|cx| b.poll_recv_from(cx, &mut buf)));
            assert!(poll_once(&mut recv).await.is_none(), "nothing sent yet");
            a.send_to(b"first", b.local_addr().unwrap()).await.unwrap();
            assert_eq!(recv.await.unwrap(), a.local_addr().unwrap());
        }
        assert_eq!(&space[..5], b"first");
        a.send_to(b"second", b.local_addr().unwrap()).await.unwrap();
        let mut buf = ReadBuf::new(&mut space);
        let from = poll_fn(|cx| b.poll_peek_from(cx, &mut buf)).await.unwrap();
        assert_eq!(
            (buf.filled(), from),
            (&b"second"[..], a.local_addr().unwrap())
        );
        let mut buf = ReadBuf::new(&mut space);
        poll_fn(|cx| b.poll_peek(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"second");
        b.connect(a.local_addr().unwrap()).await.unwrap();
        let mut buf = ReadBuf::new(&mut space);
        poll_fn(|cx| b.poll_recv(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"second");
    });
}
