//! `UnixStream::split` (borrowed halves, each closing its write side and
//! reading the other's to the end, at once) and `into_split` + `reunite`,
//! and the stream's poll readiness and vectored try_ calls, on both I/O
//! backends.

mod common;

use std::io::{IoSlice, IoSliceMut};

use fairlane::io::IoBackend;
use fairlane::net::unix::{ReadHalf, ReuniteError, WriteHalf};
use fairlane::net::UnixStream;
use futures_lite::future::poll_once;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

common::on_both_backends!(
    split_halves_exchange_to_the_end,
    into_split_and_reunite,
    poll_ready_and_vectored_calls,
);

async fn send_then_read_all(r: &mut ReadHalf<'_>, w: &mut WriteHalf<'_>, msg: &[u8]) -> Vec<u8> {
    w.write_all(msg).await.unwrap();
    w.close().await.unwrap();
    let mut out = Vec::new();
    r.read_to_end(&mut out).await.unwrap();
    out
}

fn split_halves_exchange_to_the_end(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let (mut ar, mut aw) = a.split();
        let (mut br, mut bw) = b.split();
        let (from_b, from_a) = futures_lite::future::zip(
            send_then_read_all(&mut ar, &mut aw, b"A"),
            send_then_read_all(&mut br, &mut bw, b"B"),
        )
        .await;
        assert_eq!(
            (from_b.as_slice(), from_a.as_slice()),
            (&b"B"[..], &b"A"[..])
        );
        assert!(ar.peer_addr().is_ok() && aw.local_addr().is_ok());
    });
}

fn into_split_and_reunite(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"abcd").await.unwrap();
        let (mut read, write) = a.into_split();
        let mut two = [0u8; 2];
        read.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"ab");
        let (c, _d) = UnixStream::pair().unwrap();
        let (c_read, c_write) = c.into_split();
        let ReuniteError(read, c_write) = read.reunite(c_write).unwrap_err();
        let mut a = write.reunite(read).unwrap();
        a.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"cd");
        assert!(c_read.reunite(c_write).is_ok());
        // The write side is still open after reuniting.
        a.write_all(b"ok").await.unwrap();
        b.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"ok");
    });
}

fn poll_ready_and_vectored_calls(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = UnixStream::pair().unwrap();
        std::future::poll_fn(|cx| a.poll_write_ready(cx))
            .await
            .unwrap();
        let mut ready = std::pin::pin!(std::future::poll_fn(|cx| b.poll_read_ready(cx)));
        assert!(poll_once(&mut ready).await.is_none(), "nothing sent yet");
        let n = a
            .try_write_vectored(&[IoSlice::new(b"hello "), IoSlice::new(b"world")])
            .unwrap();
        assert_eq!(n, 11);
        ready.await.unwrap();
        let (mut x, mut y) = ([0u8; 6], [0u8; 16]);
        let n = b
            .try_read_vectored(&mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)])
            .unwrap();
        assert_eq!((n, &x, &y[..5]), (11, b"hello ", &b"world"[..]));
    });
}
