//! `TcpStream::try_read_vectored`/`try_write_vectored`: the buffers are
//! filled and sent in order; `WouldBlock` when nothing is there; on both
//! I/O backends.

mod common;

use std::io::{IoSlice, IoSliceMut, Read, Write};

use common::pair;
use fairlane::io::IoBackend;

common::on_both_backends!(vectored_reads_fill_in_order, vectored_writes_send_in_order);

fn vectored_reads_fill_in_order(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        let (mut a, mut b) = ([0u8; 3], [0u8; 8]);
        let err = s
            .try_read_vectored(&mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)])
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
        peer.write_all(b"hello world").unwrap();
        let mut got = Vec::new();
        while got.len() < 11 {
            s.readable().await.unwrap();
            let (mut a, mut b) = ([0u8; 3], [0u8; 8]);
            match s.try_read_vectored(&mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)]) {
                Ok(n) => {
                    let all: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
                    got.extend_from_slice(&all[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, b"hello world");
        drop(peer);
        s.readable().await.unwrap();
        assert_eq!(
            s.try_read_vectored(&mut [IoSliceMut::new(&mut a)]).unwrap(),
            0
        );
    });
}

fn vectored_writes_send_in_order(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        s.writable().await.unwrap();
        let n = s
            .try_write_vectored(&[
                IoSlice::new(b"hello"),
                IoSlice::new(b" "),
                IoSlice::new(b"world"),
            ])
            .unwrap();
        assert_eq!(n, 11);
        let mut got = [0u8; 11];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello world");
    });
}
