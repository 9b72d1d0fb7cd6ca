//! tokio's borrowed-buffer datagram calls (`send`, `send_to`, `recv`,
//! `recv_from`, `peek_from` on `&[u8]` / `&mut [u8]`) of `UdpSocket` and
//! `UnixDatagram`, on both I/O backends: contents, senders, datagram
//! boundaries, truncation to the slice, empty datagrams, and a dropped
//! `recv_from` losing nothing.

mod common;

use common::drop_after_delivery;
use fairlane::io::IoBackend;
use fairlane::net::{UdpSocket, UnixDatagram};

common::on_both_backends!(
    udp_slices_round_trip,
    udp_connected_slices_and_truncation,
    udp_dropped_slice_recv_keeps_datagram,
    unix_datagram_slices,
);

fn udp_slices_round_trip(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = b.local_addr().unwrap();
        assert_eq!(a.send_to(b"first", to).await.unwrap(), 5);
        assert_eq!(a.send_to(b"", to).await.unwrap(), 0);
        let mut buf = [0u8; 16];
        // A peek leaves the datagram queued.
        let (n, from) = b.peek_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"first"[..], a.local_addr().unwrap()));
        buf.fill(0);
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"first"[..], a.local_addr().unwrap()));
        // The empty datagram is one of its own.
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!((n, from), (0, a.local_addr().unwrap()));
        // `send_to` resolves its target as tokio's does.
        let named = format!("127.0.0.1:{}", to.port());
        assert_eq!(a.send_to(b"named", named.as_str()).await.unwrap(), 5);
        let (n, _) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"named");
    });
}

fn udp_connected_slices_and_truncation(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.connect(b.local_addr().unwrap()).await.unwrap();
        b.connect(a.local_addr().unwrap()).await.unwrap();
        assert_eq!(a.send(b"0123456789").await.unwrap(), 10);
        assert_eq!(a.send(b"next").await.unwrap(), 4);
        // A datagram larger than the slice is cut to it; the rest is gone.
        let mut small = [0u8; 4];
        assert_eq!(b.recv(&mut small).await.unwrap(), 4);
        assert_eq!(&small, b"0123");
        let mut buf = [0u8; 16];
        let n = b.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"next");
        // An unconnected socket's `send` is the operating system's error.
        let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        assert!(c.send(b"x").await.is_err());
    });
}

fn udp_dropped_slice_recv_keeps_datagram(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = s.local_addr().unwrap();
        let mut dropped = [0u8; 16];
        drop_after_delivery(s.recv_from(&mut dropped), || {
            peer.send_to(b"kept", to).unwrap();
        })
        .await;
        let mut buf = [0u8; 16];
        let read = s.recv_from(&mut buf);
        let (n, from) = fairlane::time::timeout(common::DEADLINE, read)
            .await
            .expect("the datagram a dropped recv_from took was lost")
            .unwrap();
        assert_eq!(
            (&buf[..n], from),
            (&b"kept"[..], peer.local_addr().unwrap())
        );
    });
}

fn unix_datagram_slices(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = UnixDatagram::pair().unwrap();
        assert_eq!(a.send(b"pair").await.unwrap(), 4);
        let mut small = [0u8; 2];
        assert_eq!(b.recv(&mut small).await.unwrap(), 2);
        assert_eq!(&small, b"pa");
        let path = std::env::temp_dir().join(format!(
            "fairlane-udg-slices-{}-{backend}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        assert_eq!(client.send_to(b"to path", &path).await.unwrap(), 7);
        let mut buf = [0u8; 16];
        let (n, from) = server.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"to path");
        assert!(from.is_unnamed());
        std::fs::remove_file(&path).unwrap();
    });
}
