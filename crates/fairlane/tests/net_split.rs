//! `TcpStream::split` (borrowed halves used at once in one task, through
//! the futures-io and tokio traits) and `into_split` + `reunite` (bytes the
//! read adapter buffered stay with the stream; halves of two streams come
//! back in the error; `forget` leaves the write side open), on both I/O
//! backends.

mod common;

use std::io::{Read, Write};

use common::{fairlane_pair, pair};
use fairlane::io::IoBackend;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

common::on_both_backends!(
    split_halves_read_and_write_at_once,
    split_peek_then_read,
    reunite_keeps_buffered_bytes,
    reunite_refuses_halves_of_two_streams,
    forget_leaves_the_write_side_open,
);

fn split_halves_read_and_write_at_once(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut a, mut b) = fairlane_pair().await;
        let (mut ar, mut aw) = a.split();
        let (mut br, mut bw) = b.split();
        let big = vec![7u8; 1 << 20];
        // Each side writes more than the socket buffers hold while reading:
        // only reading and writing at once finishes.
        futures_lite::future::zip(
            exchange(&mut ar, &mut aw, &big),
            exchange(&mut br, &mut bw, &big),
        )
        .await;
        assert_eq!(ar.local_addr().unwrap(), bw.peer_addr().unwrap());
        // Closing the write half shuts the stream's write side down.
        aw.close().await.unwrap();
        let mut rest = Vec::new();
        br.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    });
}

/// Writes `big` through `w` while reading as many bytes through `r`.
async fn exchange(
    r: &mut fairlane::net::tcp::ReadHalf<'_>,
    w: &mut fairlane::net::tcp::WriteHalf<'_>,
    big: &[u8],
) {
    let mut got = vec![0u8; big.len()];
    let (wr, rr) = futures_lite::future::zip(w.write_all(big), r.read_exact(&mut got)).await;
    wr.unwrap();
    rr.unwrap();
    assert_eq!(got, big);
}

fn split_peek_then_read(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut s, mut peer) = pair().await;
        peer.write_all(b"split").unwrap();
        let (mut read, mut write) = s.split();
        let mut buf = [0u8; 32];
        let n1 = read.peek(&mut buf).await.unwrap();
        let n2 = read.peek(&mut buf).await.unwrap();
        assert_eq!(n1, n2);
        assert_eq!(&buf[..n1], b"split");
        let n = read.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"split");
        assert_eq!(write.write(b"back").await.unwrap(), 4);
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"back");
    });
}

#[cfg(feature = "tokio-io")]
#[test]
fn split_halves_implement_tokio_traits() {
    common::runtime(1).block_on(async {
        let (mut s, mut peer) = pair().await;
        let (mut read, mut write) = s.split();
        tokio::io::AsyncWriteExt::write_all(&mut write, b"tokio")
            .await
            .unwrap();
        let mut got = [0u8; 5];
        peer.read_exact(&mut got).unwrap();
        peer.write_all(&got).unwrap();
        let mut back = [0u8; 5];
        tokio::io::AsyncReadExt::read_exact(&mut read, &mut back)
            .await
            .unwrap();
        assert_eq!(&back, b"tokio");
        tokio::io::AsyncWriteExt::shutdown(&mut write)
            .await
            .unwrap();
        assert_eq!(peer.read(&mut back).unwrap(), 0);
    });
}

fn reunite_keeps_buffered_bytes(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut s, mut peer) = pair().await;
        peer.write_all(b"abcdef").unwrap();
        let mut first = [0u8; 2];
        s.read_exact(&mut first).await.unwrap();
        let (mut read, write) = s.into_split();
        read.read_exact(&mut first).await.unwrap();
        assert_eq!(&first, b"cd");
        let mut s = read.reunite(write).unwrap();
        s.read_exact(&mut first).await.unwrap();
        assert_eq!(&first, b"ef");
        // Reuniting does not shut the write side down.
        s.write_all(b"ok").await.unwrap();
        let mut got = [0u8; 2];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ok");
    });
}

fn reunite_refuses_halves_of_two_streams(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, _pa) = pair().await;
        let (b, _pb) = pair().await;
        let (ar, aw) = a.into_split();
        let (br, bw) = b.into_split();
        let err = ar.reunite(bw).unwrap_err();
        assert!(err.to_string().contains("not from the same socket"));
        let fairlane::net::tcp::ReuniteError(ar, bw) = err;
        assert!(aw.reunite(ar).is_ok());
        assert!(bw.reunite(br).is_ok());
    });
}

fn forget_leaves_the_write_side_open(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        let (read, write) = s.into_split();
        write.forget();
        peer.set_nonblocking(true).unwrap();
        let err = peer.read(&mut [0u8; 1]).unwrap_err();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::WouldBlock,
            "no end of stream"
        );
        drop(read);
    });
}
