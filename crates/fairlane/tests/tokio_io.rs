//! With the `tokio-io` feature (on for the crate's tests), the streams
//! implement tokio's `AsyncRead`/`AsyncWrite`, so tokio's own I/O helpers
//! and crates written against tokio's traits take them directly; on both
//! backends.

mod common;

use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use fairlane::time::timeout;
use futures_lite::future::poll_once;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use common::backend_runtime as runtime;

common::on_both_backends!(
    tokio_helpers_drive_a_tcp_stream,
    tokio_helpers_drive_split_halves_and_unix_streams,
    tokio_shutdown_does_not_wait_for_the_peer_to_read,
    futures_close_does_not_wait_for_the_peer_to_read,
    copy_bidirectional_returns_before_the_peers_read
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

/// A bound on waits that must end at once (a shutdown) or as soon as the
/// peer reads: only a hang trips it.
const BOUND: Duration = Duration::from_secs(10);

/// The byte at offset `i` of what the write tests send.
fn byte_at(i: usize) -> u8 {
    (i % 251) as u8
}

/// The next `len` bytes of the test stream from offset `from`.
fn pattern(from: usize, len: usize) -> Vec<u8> {
    (from..from + len).map(byte_at).collect()
}

/// The write traits a scenario goes through.
#[derive(Clone, Copy)]
enum Traits {
    Tokio,
    Futures,
}

/// Writes through `traits` until the kernel takes no more (a write stays
/// pending: the peer reads nothing yet), shuts the write side down (it must
/// return although the peer has not read), and then checks that the peer
/// reads every byte the writes reported, in order, and then the end.
fn shutdown_after_filling(backend: IoBackend, traits: Traits) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let (mut client, mut server) = common::fairlane_pair().await;
        let mut sent = 0;
        loop {
            let chunk = pattern(sent, 64 * 1024);
            let wrote = match traits {
                Traits::Tokio => poll_once(AsyncWriteExt::write(&mut client, &chunk)).await,
                Traits::Futures => {
                    poll_once(futures_lite::AsyncWriteExt::write(&mut client, &chunk)).await
                }
            };
            match wrote {
                Some(n) => sent += n.unwrap(),
                None => break, // the kernel takes no more
            }
            assert!(sent < 1 << 30, "the writes never filled the socket");
        }
        let shut = match traits {
            Traits::Tokio => timeout(BOUND, AsyncWriteExt::shutdown(&mut client)).await,
            Traits::Futures => {
                timeout(BOUND, futures_lite::AsyncWriteExt::close(&mut client)).await
            }
        };
        shut.expect("the shutdown waited for the peer to read")
            .unwrap();
        let mut got = Vec::new();
        timeout(BOUND, server.read_to_end(&mut got))
            .await
            .expect("the peer read everything")
            .unwrap();
        assert_eq!(got.len(), sent, "bytes lost or made up");
        assert!(got == pattern(0, sent), "bytes reordered or corrupted");
    });
}

fn tokio_shutdown_does_not_wait_for_the_peer_to_read(backend: IoBackend) {
    shutdown_after_filling(backend, Traits::Tokio);
}

fn futures_close_does_not_wait_for_the_peer_to_read(backend: IoBackend) {
    shutdown_after_filling(backend, Traits::Futures);
}

/// A proxy's `copy_bidirectional` between two peers that read only after
/// it returned: each direction's bytes are in the kernel once written, so
/// its shutdowns return, and then each peer reads the other's bytes, all
/// of them.
fn copy_bidirectional_returns_before_the_peers_read(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        // Far less than loopback sockets hold without reads.
        const LEN: usize = 32 * 1024;
        let server_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(proxy_listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut to_client, _) = proxy_listener.accept().await.unwrap();
        let mut to_server = TcpStream::connect(server_listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = server_listener.accept().await.unwrap();
        let (request, response) = (pattern(0, LEN), pattern(7, LEN));
        client.write_all(&request).await.unwrap();
        client.shutdown().await.unwrap();
        server.write_all(&response).await.unwrap();
        server.shutdown().await.unwrap();
        let copied = timeout(
            BOUND,
            tokio::io::copy_bidirectional(&mut to_client, &mut to_server),
        )
        .await
        .expect("copy_bidirectional waited for a peer to read")
        .unwrap();
        assert_eq!(copied, (LEN as u64, LEN as u64));
        let (mut at_server, mut at_client) = (Vec::new(), Vec::new());
        timeout(BOUND, server.read_to_end(&mut at_server))
            .await
            .unwrap()
            .unwrap();
        timeout(BOUND, client.read_to_end(&mut at_client))
            .await
            .unwrap()
            .unwrap();
        assert!(at_server == request, "the request arrived altered");
        assert!(at_client == response, "the response arrived altered");
    });
}
