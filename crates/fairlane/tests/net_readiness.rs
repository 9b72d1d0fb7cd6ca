//! `readable`/`writable`/`ready` and the non-blocking `try_read`/`try_write`
//! (`try_recv`/`try_send` for UDP) on both I/O backends, UDP `connect`,
//! `send`, `recv` and `peer_addr`; and, with io_uring, the order of bytes
//! when reads or writes were dropped in flight before a `try_` call.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

use common::{drop_after_completion, drop_after_delivery, pair};
use fairlane::io::{Interest, IoBackend};
use fairlane::net::{TcpStream, UdpSocket, UnixListener, UnixStream};
use futures_lite::future::poll_once;

common::on_both_backends!(
    tcp_readable_then_try_read,
    tcp_writable_after_the_send_buffer_drains,
    unix_readiness_and_try_calls,
    udp_connect_send_recv_and_try_calls,
    try_read_takes_carried_bytes_first,
    try_read_after_a_read_dropped_in_flight_loses_nothing,
    try_recv_takes_a_carried_datagram_first,
    try_write_after_a_dropped_write_keeps_the_order,
    empty_reads_return_at_once,
    udp_peek_from_leaves_the_datagram,
    tcp_ready_reports_both_directions_and_the_peer_closing,
    tcp_ready_sees_bytes_a_dropped_read_took,
);

/// Reads with `readable` + `try_read` until `want` bytes came (or the end).
async fn read_n(s: &TcpStream, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < want {
        s.readable().await.unwrap();
        match s.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("try_read: {e}"),
        }
    }
    got
}

fn tcp_readable_then_try_read(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        let err = s.try_read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        let mut readable = std::pin::pin!(s.readable());
        assert!(
            poll_once(&mut readable).await.is_none(),
            "nothing to read yet"
        );
        peer.write_all(b"hello").unwrap();
        readable.await.unwrap();
        assert_eq!(read_n(&s, 5).await, b"hello");
        drop(peer);
        s.readable().await.unwrap();
        assert_eq!(
            s.try_read(&mut [0u8; 8]).unwrap(),
            0,
            "the end of the stream"
        );
    });
}

fn tcp_writable_after_the_send_buffer_drains(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        s.writable().await.unwrap();
        let chunk = vec![5u8; 64 * 1024];
        let mut sent = 0;
        loop {
            match s.try_write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("try_write: {e}"),
            }
        }
        assert!(sent > 0);
        let reader = {
            let mut writable = std::pin::pin!(s.writable());
            assert!(
                poll_once(&mut writable).await.is_none(),
                "the send buffer is full"
            );
            let reader = std::thread::spawn(move || {
                let mut all = Vec::new();
                peer.read_to_end(&mut all).unwrap();
                all
            });
            writable.await.unwrap();
            reader
        };
        let more = loop {
            match s.try_write(b"tail") {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => s.writable().await.unwrap(),
                Err(e) => panic!("try_write: {e}"),
            }
        };
        drop(s);
        let all = reader.join().unwrap();
        assert_eq!(all.len(), sent + more);
        assert!(all[..sent].iter().all(|&b| b == 5));
        assert_eq!(&all[sent..], &b"tail"[..more]);
    });
}

fn unix_readiness_and_try_calls(backend: IoBackend) {
    let dir = std::env::temp_dir().join(format!(
        "fairlane-readiness-{}-{backend:?}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sock");
    let _ = std::fs::remove_file(&path);
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let listener = UnixListener::bind(&path).unwrap();
        let client = UnixStream::connect(&path).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        assert_eq!(
            server.try_read(&mut [0u8; 4]).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        client.writable().await.unwrap();
        assert_eq!(client.try_write(b"unix").unwrap(), 4);
        let mut buf = [0u8; 8];
        let n = loop {
            server.readable().await.unwrap();
            match server.try_read(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                r => break r.unwrap(),
            }
        };
        assert_eq!(&buf[..n], b"unix");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

fn udp_connect_send_recv_and_try_calls(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        assert_eq!(a.peer_addr().unwrap_err().kind(), ErrorKind::NotConnected);
        a.connect(b.local_addr().unwrap()).await.unwrap();
        b.connect(a.local_addr().unwrap()).await.unwrap();
        assert_eq!(a.peer_addr().unwrap(), b.local_addr().unwrap());

        // A connected socket receives only from its peer.
        stranger
            .send_to_owned("stranger", b.local_addr().unwrap())
            .await
            .0
            .unwrap();
        assert_eq!(a.send_owned("one").await.0.unwrap(), 3);
        let (n, buf) = b.recv_owned(Vec::with_capacity(16)).await;
        assert_eq!(&buf[..n.unwrap()], b"one");

        assert_eq!(
            b.try_recv(&mut [0u8; 16]).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        let mut readable = std::pin::pin!(b.readable());
        assert!(poll_once(&mut readable).await.is_none(), "no datagram yet");
        a.writable().await.unwrap();
        assert_eq!(a.try_send(b"two").unwrap(), 3);
        readable.await.unwrap();
        let mut buf = [0u8; 16];
        let n = loop {
            match b.try_recv(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => b.readable().await.unwrap(),
                r => break r.unwrap(),
            }
        };
        assert_eq!(&buf[..n], b"two");

        // Unconnected: try_send_to / try_recv_from.
        let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        c.try_send_to(b"three", c.local_addr().unwrap()).unwrap();
        let (n, from) = loop {
            c.readable().await.unwrap();
            match c.try_recv_from(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                r => break r.unwrap(),
            }
        };
        assert_eq!((&buf[..n], from), (&b"three"[..], c.local_addr().unwrap()));
    });
}

/// Rounds of the carried-data scenarios.
const ROUNDS: usize = 3;

/// A read dropped after the kernel gave it bytes (io_uring: they are
/// carried), then more bytes: `try_read` returns the carried ones first.
fn try_read_takes_carried_bytes_first(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        for round in 0..ROUNDS {
            let (first, second) = (format!("first-{round}-"), format!("second-{round}"));
            drop_after_delivery(s.read_owned(Vec::with_capacity(64)), || {
                peer.write_all(first.as_bytes()).unwrap()
            })
            .await;
            peer.write_all(second.as_bytes()).unwrap();
            // Let the second part arrive, so that a try_read that ignored
            // the carried bytes would find it in the socket.
            fairlane::time::sleep(Duration::from_millis(20)).await;
            let got = read_n(&s, first.len() + second.len()).await;
            assert_eq!(
                got,
                format!("{first}{second}").as_bytes(),
                "bytes reordered or lost"
            );
        }
    });
}

/// A read dropped while in flight with nothing received yet, then bytes
/// come: `readable` + `try_read` find them all, whether the cancelled
/// read took them (carried) or not.
fn try_read_after_a_read_dropped_in_flight_loses_nothing(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        for round in 0..20u8 {
            assert!(drop_after_completion(s.read_owned(Vec::with_capacity(64)))
                .await
                .is_none());
            let msg = [round; 3];
            peer.write_all(&msg).unwrap();
            assert_eq!(read_n(&s, 3).await, msg, "round {round}");
        }
    });
}

/// A receive dropped after the kernel gave it a datagram, then another
/// datagram: `try_recv_from` returns them in order.
fn try_recv_takes_a_carried_datagram_first(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = s.local_addr().unwrap();
        for round in 0..ROUNDS {
            let (d1, d2) = (format!("d1-{round}"), format!("d2-{round}"));
            drop_after_delivery(s.recv_from_owned(Vec::with_capacity(16)), || {
                peer.send_to(d1.as_bytes(), to).unwrap();
            })
            .await;
            peer.send_to(d2.as_bytes(), to).unwrap();
            fairlane::time::sleep(Duration::from_millis(20)).await;
            let mut got = Vec::new();
            let mut buf = [0u8; 16];
            while got.len() < 2 {
                s.readable().await.unwrap();
                match s.try_recv_from(&mut buf) {
                    Ok((n, from)) => {
                        assert_eq!(from, peer.local_addr().unwrap());
                        got.push(buf[..n].to_vec());
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("try_recv_from: {e}"),
                }
            }
            assert_eq!(
                got,
                [d1.into_bytes(), d2.into_bytes()],
                "datagrams reordered"
            );
        }
    });
}

/// A large write dropped in flight to a peer that does not read yet, then
/// `writable` + `try_write`: the stream is (a prefix of) the first write,
/// then the second, with no reordering (io_uring: all of the first).
fn try_write_after_a_dropped_write_keeps_the_order(backend: IoBackend) {
    let _serial = common::serial();
    const FIRST: usize = 8 << 20;
    let rt = common::backend_runtime(backend, 2);
    let first: Vec<u8> = (0..FIRST).map(|j| (j % 251) as u8).collect();
    let expected = first.clone();
    let (s, mut peer) = rt.block_on(pair());
    let reader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut all = Vec::new();
        peer.read_to_end(&mut all).unwrap();
        all
    });
    let timed_out = rt.block_on(async move {
        let timed_out =
            fairlane::time::timeout(Duration::from_millis(50), s.write_all_owned(first))
                .await
                .is_err();
        let tail = b"-second-";
        let mut done = 0;
        while done < tail.len() {
            s.writable().await.unwrap();
            match s.try_write(&tail[done..]) {
                Ok(n) => done += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("try_write: {e}"),
            }
        }
        timed_out
    });
    let all = reader.join().unwrap();
    assert!(timed_out, "the first write finished before its timeout");
    common::assert_dropped_write_then(&all, &expected, b"-second-", backend);
}

/// Reads into no room return `Ok(0)` at once while nothing is there (as
/// the docs of `read_owned` say and tokio does), not wait for data.
fn empty_reads_return_at_once(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut s, _peer) = pair().await;
        assert_eq!(s.try_read(&mut []).unwrap(), 0);
        assert_eq!(s.read_owned(Vec::new()).await.0.unwrap(), 0);
        assert_eq!(
            futures_lite::AsyncReadExt::read(&mut s, &mut [])
                .await
                .unwrap(),
            0
        );
    });
}

/// `peek_from` returns the next datagram and leaves it, also one that a
/// dropped receive left in the carry (io_uring).
fn udp_peek_from_leaves_the_datagram(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (to, from) = (s.local_addr().unwrap(), peer.local_addr().unwrap());
        for round in 0..2 * ROUNDS {
            let msg = format!("peek-{round}");
            let send = || {
                peer.send_to(msg.as_bytes(), to).unwrap();
            };
            if round % 2 == 1 {
                // Into the carry (io_uring).
                drop_after_delivery(s.recv_from_owned(Vec::with_capacity(16)), send).await;
            } else {
                send();
            }
            for _ in 0..2 {
                let (r, buf) = s.peek_from_owned(Vec::with_capacity(16)).await;
                assert_eq!((&buf[..], r.unwrap().1), (msg.as_bytes(), from));
            }
            let (r, buf) = s.recv_from_owned(Vec::with_capacity(16)).await;
            assert_eq!(&buf[..r.unwrap().0], msg.as_bytes());
            let err = s.try_recv(&mut [0u8; 4]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::WouldBlock, "one datagram only");
        }
    });
}

fn tcp_ready_reports_both_directions_and_the_peer_closing(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        let both = Interest::READABLE | Interest::WRITABLE;
        let ready = s.ready(both).await.unwrap();
        assert!(ready.is_writable() && !ready.is_readable(), "{ready:?}");
        {
            let mut readable = std::pin::pin!(s.ready(Interest::READABLE));
            assert!(poll_once(&mut readable).await.is_none(), "nothing sent");
            peer.write_all(b"hey").unwrap();
            let ready = readable.await.unwrap();
            assert!(ready.is_readable() && !ready.is_read_closed(), "{ready:?}");
        }
        assert_eq!(read_n(&s, 3).await, b"hey");
        peer.shutdown(std::net::Shutdown::Write).unwrap();
        let ready = s.ready(Interest::READABLE).await.unwrap();
        assert!(ready.is_read_closed(), "{ready:?}");
        assert!(!ready.is_write_closed(), "only the peer's writing ended");
        assert_eq!(s.try_read(&mut [0u8; 8]).unwrap(), 0);
    });
}

/// With io_uring a read dropped after its bytes arrived took them from the
/// socket: `ready` must report them as readable instead of waiting on a
/// socket that has nothing (with the fallback backend they are still in
/// the socket).
fn tcp_ready_sees_bytes_a_dropped_read_took(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (s, mut peer) = pair().await;
        drop_after_delivery(s.read_owned(Vec::with_capacity(64)), || {
            peer.write_all(b"carried").unwrap()
        })
        .await;
        let ready = fairlane::time::timeout(
            Duration::from_secs(10),
            s.ready(Interest::READABLE | Interest::WRITABLE),
        )
        .await
        .expect("ready must see the bytes the dropped read received")
        .unwrap();
        assert!(ready.is_readable(), "{ready:?}");
        assert_eq!(read_n(&s, 7).await, b"carried");
    });
}
