//! With the `tokio-io` feature (on for the crate's tests), the streams
//! implement tokio's `AsyncRead`/`AsyncWrite`, so tokio's own I/O helpers
//! and crates written against tokio's traits take them directly; on both
//! backends.

mod common;

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use common::backend_runtime as runtime;

common::on_both_backends!(
    tokio_helpers_drive_a_tcp_stream,
    tokio_helpers_drive_split_halves_and_unix_streams
);

fn tokio_helpers_drive_a_tcp_stream(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = fairlane::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut lines = BufReader::new(stream).lines();
            let mut got = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                got.push(line);
            }
            got
        });
        let mut client = TcpStream::connect(addr).await.unwrap();
        for i in 0..1000 {
            client
                .write_all(format!("line {i}\n").as_bytes())
                .await
                .unwrap();
        }
        client.flush().await.unwrap();
        client.shutdown().await.unwrap();
        let got = server.await.unwrap();
        assert_eq!(got.len(), 1000);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, l)| *l == format!("line {i}")));
    });
}

fn tokio_helpers_drive_split_halves_and_unix_streams(backend: IoBackend) {
    let rt = runtime(backend, 2);
    let dir = std::env::temp_dir().join(format!(
        "fairlane-tokio-io-{}-{backend}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    rt.block_on(async {
        // A TCP echo through the owned halves and tokio::io::copy.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        fairlane::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (mut r, mut w) = stream.into_split();
            tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let client = TcpStream::connect(addr).await.unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (mut r, mut w) = client.into_split();
        let writer = async {
            w.write_all(&data).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let mut back = Vec::new();
        let reader = async { r.read_to_end(&mut back).await.unwrap() };
        let ((), n) = futures_lite::future::zip(writer, reader).await;
        assert_eq!(n, data.len());
        assert!(back == data, "bytes reordered or corrupted");

        // A Unix stream with read_exact.
        let listener = UnixListener::bind(&path).unwrap();
        fairlane::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"hello over unix").await.unwrap();
        });
        let mut s = UnixStream::connect(&path).await.unwrap();
        let mut buf = [0u8; 15];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello over unix");
    });
    let _ = std::fs::remove_dir_all(&dir);
}
