//! Cancellation safety of socket I/O, on both backends: a read dropped in
//! flight (a `timeout` or `select!` that gave up) loses no byte and no
//! datagram, and a write dropped in flight leaves no hole and no reordering
//! in the byte stream. Content is checked byte for byte, not only counted.

mod common;

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, UdpSocket};

use common::backend_runtime as runtime;
use common::{at_once, drop_after_completion, pair};

common::on_both_backends!(
    reads_dropped_by_timeouts_lose_no_byte,
    datagram_reads_dropped_by_timeouts_lose_no_datagram,
    a_dropped_write_leaves_no_hole,
    a_dropped_write_goes_before_a_trait_write,
    a_dropped_write_is_sent_before_shutdown,
    dropping_a_stream_cancels_its_dropped_writes,
    a_dropped_read_hands_on_the_end_of_the_stream,
    a_dropped_read_hands_on_a_reset,
    a_dropped_receive_hands_on_an_empty_datagram,
);

/// Raises the soft descriptor limit towards `want`; returns what it is now.
fn raise_nofile(want: u64) -> u64 {
    // SAFETY: get/setrlimit with a live, initialised local.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
        lim.rlim_cur
    }
}

/// Byte `j` of connection `c`'s stream.
fn stream_byte(c: usize, j: usize) -> u8 {
    ((c * 7 + j * 13 + j / 251) % 251) as u8
}

fn reads_dropped_by_timeouts_lose_no_byte(backend: IoBackend) {
    // Heavy: one scenario of this binary at a time.
    let _serial = common::serial();
    // Many connections, each sending 50 chunks of 64 bytes in rounds, while
    // the server's reads time out every few hundred microseconds: reads are
    // dropped in flight all the time, some just as their data arrived.
    const CHUNKS: usize = 50;
    const CHUNK: usize = 64;
    let limit = raise_nofile(4096);
    // Two descriptors a connection (both ends are in this process), plus
    // the runtime's and the test harness's own.
    let connections = 1000.min((limit as usize).saturating_sub(200) / 2);
    assert!(connections >= 100, "descriptor limit {limit} is too low");
    let rt = runtime(backend, 2);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let sender = std::thread::spawn(move || {
        let mut streams: Vec<std::net::TcpStream> = (0..connections)
            .map(|_| {
                let s = std::net::TcpStream::connect(addr).unwrap();
                s.set_nodelay(true).unwrap();
                s
            })
            .collect();
        for k in 0..CHUNKS {
            for (c, s) in streams.iter_mut().enumerate() {
                let chunk: Vec<u8> = (k * CHUNK..(k + 1) * CHUNK)
                    .map(|j| stream_byte(c, j))
                    .collect();
                s.write_all(&chunk).unwrap();
            }
            std::thread::sleep(Duration::from_micros(300));
        }
    });
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    let checked = rt.block_on(async move {
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let (stream, _) = listener.accept().await.unwrap();
            let d = d.clone();
            tasks.push(fairlane::spawn(async move {
                let mut got = Vec::with_capacity(CHUNKS * CHUNK);
                let mut i = 0u64;
                loop {
                    i += 1;
                    // Buffers of varying size, timeouts of 50..450 us.
                    let cap = 16 + (i as usize * 29) % 100;
                    let wait = Duration::from_micros(50 + (i * 97) % 400);
                    let read =
                        fairlane::time::timeout(wait, stream.read_owned(Vec::with_capacity(cap)));
                    match read.await {
                        Ok((n, buf)) => {
                            let n = n.expect("read");
                            if n == 0 {
                                break;
                            }
                            got.extend_from_slice(&buf[..n]);
                        }
                        Err(_) => {
                            d.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                got
            }));
        }
        let mut checked = 0;
        for task in tasks {
            let got = task.await.unwrap();
            // A stream's first byte names its connection (modulo 251, which
            // is all `stream_byte` depends on); the whole content must then
            // be that connection's stream.
            let c = (0..251)
                .find(|&c| got.first() == Some(&stream_byte(c, 0)))
                .expect("a stream starts with a connection's first byte");
            let expected: Vec<u8> = (0..CHUNKS * CHUNK).map(|j| stream_byte(c, j)).collect();
            assert_eq!(got.len(), expected.len(), "bytes lost or duplicated");
            assert!(got == expected, "bytes reordered or corrupted");
            checked += 1;
        }
        checked
    });
    sender.join().unwrap();
    assert_eq!(checked, connections);
    // The scenario must have exercised what it tests.
    assert!(dropped.load(Ordering::Relaxed) > 0, "no read was dropped");
}

fn datagram_reads_dropped_by_timeouts_lose_no_datagram(backend: IoBackend) {
    // Heavy: one scenario of this binary at a time.
    let _serial = common::serial();
    const DATAGRAMS: u32 = 400;
    let rt = runtime(backend, 2);
    let socket = rt
        .block_on(async { UdpSocket::bind("127.0.0.1:0").await })
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let peer_addr = peer.local_addr().unwrap();
    let sender = std::thread::spawn(move || {
        for i in 0..DATAGRAMS {
            let mut d = i.to_le_bytes().to_vec();
            d.resize(8 + (i as usize % 40), i as u8);
            peer.send_to(&d, addr).unwrap();
            // Slow enough that the receive buffer never overflows.
            std::thread::sleep(Duration::from_micros(150 + u64::from(i % 7) * 60));
        }
        peer.send_to(b"end", addr).unwrap();
    });
    let (received, dropped) = rt.block_on(async move {
        let mut received = Vec::new();
        let mut dropped = 0;
        let mut i = 0u64;
        loop {
            i += 1;
            let wait = Duration::from_micros(40 + (i * 53) % 300);
            match fairlane::time::timeout(wait, socket.recv_from_owned(Vec::with_capacity(64)))
                .await
            {
                Ok((r, buf)) => {
                    let (n, from) = r.expect("recv_from");
                    assert_eq!(from, peer_addr);
                    if &buf[..n] == b"end" {
                        break;
                    }
                    let seq = u32::from_le_bytes(buf[..4].try_into().unwrap());
                    assert_eq!(n, 8 + (seq as usize % 40), "datagram {seq} cut or merged");
                    assert!(buf[4..n].iter().all(|&b| b == seq as u8));
                    received.push(seq);
                }
                Err(_) => dropped += 1,
            }
        }
        (received, dropped)
    });
    sender.join().unwrap();
    assert_eq!(
        received,
        (0..DATAGRAMS).collect::<Vec<_>>(),
        "datagrams lost or reordered"
    );
    assert!(dropped > 0, "no receive was dropped");
}

fn a_dropped_write_leaves_no_hole(backend: IoBackend) {
    // Heavy: one scenario of this binary at a time.
    let _serial = common::serial();
    // The peer does not read, so a large write cannot finish and is dropped
    // by its timeout in flight; the next write must come after all of it.
    const FIRST: usize = 8 << 20;
    let rt = runtime(backend, 2);
    let first: Vec<u8> = (0..FIRST).map(|j| (j % 253) as u8).collect();
    let expected_first = first.clone();
    let (stream, mut peer) = rt.block_on(pair());
    let reader = std::thread::spawn(move || {
        // Let the write time out first.
        std::thread::sleep(Duration::from_millis(300));
        let mut all = Vec::new();
        peer.read_to_end(&mut all).unwrap();
        all
    });
    let timed_out = rt.block_on(async move {
        let timed_out =
            fairlane::time::timeout(Duration::from_millis(50), stream.write_all_owned(first))
                .await
                .is_err();
        stream.write_all_owned(&b"-second-"[..]).await.0.unwrap();
        timed_out
    });
    let all = reader.join().unwrap();
    assert!(timed_out, "the first write finished before its timeout");
    common::assert_dropped_write_then(&all, &expected_first, b"-second-", backend);
}

fn a_dropped_write_goes_before_a_trait_write(backend: IoBackend) {
    dropped_write_then_trait_shutdown(backend, b"-second-");
}

fn a_dropped_write_is_sent_before_shutdown(backend: IoBackend) {
    dropped_write_then_trait_shutdown(backend, b"");
}

/// An owned write dropped in flight (the peer reads nothing yet), then
/// `second` written through tokio's `AsyncWrite` (if not empty) and the
/// write side shut down through it: the peer reads what the dropped write
/// sent (with io_uring all of it), then `second`, then the end.
fn dropped_write_then_trait_shutdown(backend: IoBackend, second: &'static [u8]) {
    use tokio::io::AsyncWriteExt;
    // Heavy: one scenario of this binary at a time.
    let _serial = common::serial();
    const FIRST: usize = 8 << 20;
    let rt = runtime(backend, 2);
    let first: Vec<u8> = (0..FIRST).map(|j| (j % 253) as u8).collect();
    let expected_first = first.clone();
    let (mut stream, mut peer) = rt.block_on(pair());
    let (start, started) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        started
            .recv_timeout(common::DEADLINE)
            .expect("the write was dropped");
        let mut all = Vec::new();
        peer.read_to_end(&mut all).unwrap();
        all
    });
    rt.block_on(async move {
        let r =
            fairlane::time::timeout(Duration::from_millis(50), stream.write_all_owned(first)).await;
        assert!(r.is_err(), "the write finished before its timeout");
        start.send(()).unwrap();
        if !second.is_empty() {
            stream.write_all(second).await.unwrap();
        }
        stream.shutdown().await.unwrap();
    });
    let all = reader.join().unwrap();
    common::assert_dropped_write_then(&all, &expected_first, second, backend);
}

fn dropping_a_stream_cancels_its_dropped_writes(backend: IoBackend) {
    // Heavy: one scenario of this binary at a time.
    let _serial = common::serial();
    // A write dropped in flight to a peer that does not read, then the
    // stream dropped: the connection must close (the peer reads to the
    // end), not stay open behind the kept write.
    let rt = runtime(backend, 1);
    let (stream, mut peer) = rt.block_on(pair());
    rt.block_on(async move {
        let big = vec![7u8; 16 << 20];
        let r =
            fairlane::time::timeout(Duration::from_millis(50), stream.write_all_owned(big)).await;
        assert!(r.is_err(), "the write finished before its timeout");
        drop(stream);
        // Let the processor hand the cancellation to the kernel.
        fairlane::time::sleep(Duration::from_millis(10)).await;
    });
    let mut sink = Vec::new();
    // Returns once the connection is closed (or reset); a kept write would
    // keep it open and this would block until the deadline.
    let _ = peer.read_to_end(&mut sink);
    assert!(sink.iter().all(|&b| b == 7));
    drop(rt);
}

fn a_dropped_read_hands_on_the_end_of_the_stream(backend: IoBackend) {
    // A read that saw the end of the stream, dropped before it was polled
    // again: the next read reports the end at once. (Without that, a task
    // whose reads always time out before their completion is looked at
    // would resubmit the read that reports the end forever.)
    let rt = runtime(backend, 1);
    rt.block_on(async {
        let (stream, peer) = pair().await;
        drop(peer);
        fairlane::time::sleep(Duration::from_millis(20)).await;
        let first = drop_after_completion(stream.read_owned(vec![0u8; 16])).await;
        let (n, _) = match first {
            Some(out) => out,
            None => at_once(stream.read_owned(vec![0u8; 16])).await,
        };
        assert_eq!(n.expect("read"), 0, "the end of the stream");
    });
}

fn a_dropped_read_hands_on_a_reset(backend: IoBackend) {
    // The kernel reports a reset connection to one read only (later ones
    // see the end of the stream): if that read's future was dropped, the
    // next read must report the reset, not a clean end.
    let rt = runtime(backend, 1);
    rt.block_on(async {
        let (stream, peer) = pair().await;
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt on a live descriptor with a live, initialised
        // option value of the size given.
        let rc = unsafe {
            libc::setsockopt(
                peer.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        // Closing with a zero linger time sends a reset.
        drop(peer);
        fairlane::time::sleep(Duration::from_millis(20)).await;
        let first = drop_after_completion(stream.read_owned(vec![0u8; 16])).await;
        let (r, _) = match first {
            Some(out) => out,
            None => at_once(stream.read_owned(vec![0u8; 16])).await,
        };
        let e = r.expect_err("the reset is reported");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    });
}

fn a_dropped_receive_hands_on_an_empty_datagram(backend: IoBackend) {
    // An empty datagram is a datagram: one received for a dropped future
    // goes to the next receive like any other.
    let rt = runtime(backend, 1);
    rt.block_on(async {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.send_to(&[], socket.local_addr().unwrap()).unwrap();
        fairlane::time::sleep(Duration::from_millis(20)).await;
        let first = drop_after_completion(socket.recv_from_owned(vec![0u8; 16])).await;
        let (r, _) = match first {
            Some(out) => out,
            None => at_once(socket.recv_from_owned(vec![0u8; 16])).await,
        };
        let (n, from) = r.expect("recv_from");
        assert_eq!((n, from), (0, peer.local_addr().unwrap()));
    });
}
