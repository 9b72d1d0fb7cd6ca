//! `UdpSocket`'s socket options with tokio's names (broadcast, multicast
//! loop/TTL/membership, TTL, type of service, IPv6 traffic class) and
//! `take_error` (an ICMP "port unreachable" for a datagram to a connected
//! peer).

mod common;

use std::net::Ipv4Addr;

use fairlane::net::UdpSocket;

#[test]
fn options_round_trip() {
    common::runtime(1).block_on(async {
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        assert!(!s.broadcast().unwrap());
        s.set_broadcast(true).unwrap();
        assert!(s.broadcast().unwrap());
        s.set_multicast_loop_v4(false).unwrap();
        assert!(!s.multicast_loop_v4().unwrap());
        s.set_multicast_loop_v4(true).unwrap();
        assert!(s.multicast_loop_v4().unwrap());
        s.set_multicast_ttl_v4(7).unwrap();
        assert_eq!(s.multicast_ttl_v4().unwrap(), 7);
        s.set_ttl(33).unwrap();
        assert_eq!(s.ttl().unwrap(), 33);
        s.set_tos_v4(0x10).unwrap();
        assert_eq!(s.tos_v4().unwrap(), 0x10);
        #[allow(deprecated)]
        {
            s.set_tos(0x08).unwrap();
            assert_eq!(s.tos().unwrap(), 0x08);
        }
    });
}

#[test]
fn ipv6_options_round_trip() {
    common::runtime(1).block_on(async {
        let Ok(s) = UdpSocket::bind("[::1]:0").await else {
            return; // no IPv6 loopback on this machine
        };
        s.set_multicast_loop_v6(false).unwrap();
        assert!(!s.multicast_loop_v6().unwrap());
        s.set_multicast_loop_v6(true).unwrap();
        assert!(s.multicast_loop_v6().unwrap());
        s.set_tclass_v6(96).unwrap();
        assert_eq!(s.tclass_v6().unwrap(), 96);
    });
}

#[test]
fn multicast_join_and_leave() {
    common::runtime(1).block_on(async {
        let s = UdpSocket::bind("0.0.0.0:0").await.unwrap();
        let group = Ipv4Addr::new(239, 255, 42, 98);
        // A machine without a multicast route refuses the join (ENODEV);
        // leaving a group never joined is an error either way.
        let leave_unjoined = s.leave_multicast_v4(group, Ipv4Addr::LOCALHOST);
        assert!(leave_unjoined.is_err());
        if s.join_multicast_v4(group, Ipv4Addr::LOCALHOST).is_ok() {
            s.leave_multicast_v4(group, Ipv4Addr::LOCALHOST).unwrap();
        }
        // Not a multicast address: a clear error, no panic.
        assert!(s
            .join_multicast_v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::UNSPECIFIED)
            .is_err());
    });
}

#[test]
fn take_error_reports_port_unreachable() {
    common::runtime(1).block_on(async {
        // A port nobody listens on: bound, then closed.
        let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let target = closed.local_addr().unwrap();
        drop(closed);
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        assert!(s.take_error().unwrap().is_none());
        s.connect(target).await.unwrap();
        s.send(b"anyone?").await.unwrap();
        // The ICMP error arrives after the send: wait for it to be
        // reported (readiness includes errors).
        s.ready(fairlane::io::Interest::READABLE).await.unwrap();
        let err = s.take_error().unwrap().expect("a pending error");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
        assert!(s.take_error().unwrap().is_none(), "taken");
    });
}
