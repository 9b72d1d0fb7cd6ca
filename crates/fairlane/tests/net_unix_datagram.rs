//! `net::UnixDatagram` on both I/O backends: pairs, bound and unbound
//! sockets, `connect`, the owned-buffer and `try_` calls, readiness, the
//! senders' addresses (also of a datagram a dropped receive left), and
//! `from_std`/`into_std`.

mod common;

use std::io::ErrorKind;
use std::path::PathBuf;

use common::{at_once, drop_after_delivery};
use fairlane::io::IoBackend;
use fairlane::net::UnixDatagram;
use futures_lite::future::poll_once;

common::on_both_backends!(
    pair_send_recv_and_try_calls,
    bound_and_unbound_senders_addresses,
    connect_peer_addr_and_refusals,
    a_dropped_recv_from_keeps_datagram_and_sender,
    std_round_trip,
);

/// A fresh socket path for `name` and `backend` (removed if left over).
fn path(name: &str, backend: IoBackend) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "fairlane-udg-{}-{name}-{backend}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&p);
    p
}

fn pair_send_recv_and_try_calls(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = UnixDatagram::pair().unwrap();
        assert!(a.local_addr().unwrap().is_unnamed());
        assert!(a.peer_addr().unwrap().is_unnamed());
        let err = b.try_recv(&mut [0u8; 8]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        {
            let mut readable = std::pin::pin!(b.readable());
            assert!(poll_once(&mut readable).await.is_none(), "nothing sent yet");
            assert_eq!(a.try_send(b"one").unwrap(), 3);
            readable.await.unwrap();
        }
        let mut buf = [0u8; 8];
        assert_eq!(b.try_recv(&mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"one");
        // Datagram boundaries are kept; the owned-buffer calls.
        a.send_owned("two").await.0.unwrap();
        a.send_owned(vec![b'3'; 5]).await.0.unwrap();
        let (n, got) = b.recv_owned(Vec::with_capacity(16)).await;
        assert_eq!(&got[..n.unwrap()], b"two");
        let (n, got) = b.recv_owned(Vec::with_capacity(16)).await;
        assert_eq!(&got[..n.unwrap()], b"33333");
        a.writable().await.unwrap();
        drop(b);
        let (r, _) = a.send_owned("gone").await;
        assert!(r.is_err(), "the peer is closed");
    });
}

fn bound_and_unbound_senders_addresses(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let (sp, cp) = (path("server", backend), path("client", backend));
    rt.block_on(async {
        let server = UnixDatagram::bind(&sp).unwrap();
        assert_eq!(
            server.local_addr().unwrap().as_pathname(),
            Some(sp.as_path())
        );
        let bound = UnixDatagram::bind(&cp).unwrap();
        let unbound = UnixDatagram::unbound().unwrap();
        bound.send_to_owned("from bound", &sp).await.0.unwrap();
        let (r, buf) = server.recv_from_owned(Vec::with_capacity(32)).await;
        let (n, from) = r.unwrap();
        assert_eq!(&buf[..n], b"from bound");
        assert_eq!(from.as_pathname(), Some(cp.as_path()));
        // Reply to the sender's address.
        server
            .send_to_owned("reply", from.as_pathname().unwrap())
            .await
            .0
            .unwrap();
        let (n, buf) = bound.recv_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"reply");
        unbound.try_send_to(b"anon", &sp).unwrap();
        let mut out = [0u8; 8];
        let (n, from) = loop {
            server.readable().await.unwrap();
            match server.try_recv_from(&mut out) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                r => break r.unwrap(),
            }
        };
        assert_eq!(&out[..n], b"anon");
        assert!(from.is_unnamed());
        // Addresses the kernel cannot take.
        let (r, _) = unbound.send_to_owned("x", "").await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidInput);
        let long = "x".repeat(200);
        assert_eq!(
            unbound.try_send_to(b"x", &long).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        let err = UnixDatagram::bind(&sp).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AddrInUse);
    });
    let _ = std::fs::remove_file(&sp);
    let _ = std::fs::remove_file(&cp);
}

fn connect_peer_addr_and_refusals(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let sp = path("conn", backend);
    rt.block_on(async {
        let server = UnixDatagram::bind(&sp).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        assert_eq!(
            client.peer_addr().unwrap_err().kind(),
            ErrorKind::NotConnected
        );
        let (r, _) = client.send_owned("nowhere").await;
        assert!(r.is_err(), "not connected");
        client.connect(&sp).unwrap();
        assert_eq!(
            client.peer_addr().unwrap().as_pathname(),
            Some(sp.as_path())
        );
        client.send_owned("hi").await.0.unwrap();
        let (n, buf) = server.recv_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"hi");
        let missing = path("missing", backend);
        assert_eq!(
            client.connect(&missing).unwrap_err().kind(),
            ErrorKind::NotFound
        );
    });
    let _ = std::fs::remove_file(&sp);
}

fn a_dropped_recv_from_keeps_datagram_and_sender(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let (sp, cp) = (path("drop-s", backend), path("drop-c", backend));
    rt.block_on(async {
        let server = UnixDatagram::bind(&sp).unwrap();
        let client = std::os::unix::net::UnixDatagram::bind(&cp).unwrap();
        drop_after_delivery(server.recv_from_owned(Vec::with_capacity(16)), || {
            client.send_to(b"kept", &sp).unwrap();
        })
        .await;
        let read = server.recv_from_owned(Vec::with_capacity(16));
        let (r, buf) = if backend == IoBackend::IoUring {
            at_once(read).await
        } else {
            read.await
        };
        let (n, from) = r.unwrap();
        assert_eq!(&buf[..n], b"kept");
        assert_eq!(from.as_pathname(), Some(cp.as_path()));
    });
    let _ = std::fs::remove_file(&sp);
    let _ = std::fs::remove_file(&cp);
}

fn std_round_trip(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let a = UnixDatagram::from_std(a).unwrap();
        b.send(b"to fairlane").unwrap();
        let (n, buf) = a.recv_owned(Vec::with_capacity(16)).await;
        assert_eq!(&buf[..n.unwrap()], b"to fairlane");
        let a = a.into_std().unwrap();
        a.send(b"back").unwrap();
        let mut out = [0u8; 8];
        assert_eq!(b.recv(&mut out).unwrap(), 4);
        // Non-blocking, as tokio leaves it.
        assert_eq!(a.recv(&mut out).unwrap_err().kind(), ErrorKind::WouldBlock);
    });
}
