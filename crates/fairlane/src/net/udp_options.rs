//! Socket options of a [`UdpSocket`], with tokio's names: broadcast,
//! multicast (loop, TTL, membership), TTL, type of service, IPv6 traffic
//! class, and the pending error.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;

use super::socket::{option, set_option, take_error, with_std};
use super::UdpSocket;

impl UdpSocket {
    /// `SO_BROADCAST`: whether datagrams may go to broadcast addresses.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// assert!(!s.broadcast()?);
    /// s.set_broadcast(true)?;
    /// assert!(s.broadcast()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn broadcast(&self) -> io::Result<bool> {
        with_std(self.as_raw_fd(), std::net::UdpSocket::broadcast)
    }

    /// Sets `SO_BROADCAST` (see [`broadcast`](Self::broadcast)).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_broadcast(true)?;
    /// assert!(s.broadcast()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| {
            s.set_broadcast(on)
        })
    }

    /// `IP_MULTICAST_LOOP`: whether multicast datagrams this socket sends come
    /// back to the local host.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_multicast_loop_v4(false)?;
    /// assert!(!s.multicast_loop_v4()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        with_std(self.as_raw_fd(), std::net::UdpSocket::multicast_loop_v4)
    }

    /// Sets `IP_MULTICAST_LOOP` (see
    /// [`multicast_loop_v4`](Self::multicast_loop_v4)).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_multicast_loop_v4(true)?;
    /// assert!(s.multicast_loop_v4()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| {
            s.set_multicast_loop_v4(on)
        })
    }

    /// `IP_MULTICAST_TTL`: the time-to-live of multicast datagrams this socket
    /// sends (1 by default: the local network).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// assert_eq!(s.multicast_ttl_v4()?, 1);
    /// s.set_multicast_ttl_v4(4)?;
    /// assert_eq!(s.multicast_ttl_v4()?, 4);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        with_std(self.as_raw_fd(), std::net::UdpSocket::multicast_ttl_v4)
    }

    /// Sets `IP_MULTICAST_TTL` (see
    /// [`multicast_ttl_v4`](Self::multicast_ttl_v4)).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_multicast_ttl_v4(2)?;
    /// assert_eq!(s.multicast_ttl_v4()?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| {
            s.set_multicast_ttl_v4(ttl)
        })
    }

    /// `IPV6_MULTICAST_LOOP` (an IPv6 socket's): whether multicast datagrams it
    /// sends come back to the local host.
    ///
    /// # Example
    /// ```
    /// # use std::net::{Ipv4Addr, Ipv6Addr};
    /// fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<bool> { s.multicast_loop_v6() }
    /// ```
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        with_std(self.as_raw_fd(), std::net::UdpSocket::multicast_loop_v6)
    }

    /// Sets `IPV6_MULTICAST_LOOP` (see
    /// [`multicast_loop_v6`](Self::multicast_loop_v6)).
    ///
    /// # Example
    /// ```
    /// # use std::net::{Ipv4Addr, Ipv6Addr};
    /// fn f(s: &fairlane::net::UdpSocket, on: bool) -> std::io::Result<()> { s.set_multicast_loop_v6(on) }
    /// ```
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| {
            s.set_multicast_loop_v6(on)
        })
    }

    /// `IPV6_TCLASS` (an IPv6 socket's): the traffic class of the
    /// datagrams it sends.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// if let Ok(s) = rt.block_on(fairlane::net::UdpSocket::bind("[::1]:0")) {
    ///     s.set_tclass_v6(96)?;
    ///     assert_eq!(s.tclass_v6()?, 96);
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn tclass_v6(&self) -> io::Result<u32> {
        option::<libc::c_int>(self.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
            .map(|v| v as u32)
    }

    /// Sets `IPV6_TCLASS` (see [`tclass_v6`](Self::tclass_v6)).
    ///
    /// # Example
    /// See [`tclass_v6`](Self::tclass_v6).
    /// ```
    /// fn f(s: &fairlane::net::UdpSocket) -> std::io::Result<()> { s.set_tclass_v6(0) }
    /// ```
    pub fn set_tclass_v6(&self, tclass: u32) -> io::Result<()> {
        set_option(
            self.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            tclass as libc::c_int,
        )
    }

    /// `IP_TTL`: the time-to-live of the datagrams this socket sends.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_ttl(60)?;
    /// assert_eq!(s.ttl()?, 60);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        with_std(self.as_raw_fd(), std::net::UdpSocket::ttl)
    }

    /// Sets `IP_TTL` (see [`ttl`](Self::ttl)).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_ttl(10)?;
    /// assert_eq!(s.ttl()?, 10);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| s.set_ttl(ttl))
    }

    /// `IP_TOS`: the type-of-service field of the IPv4 datagrams this socket
    /// sends.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_tos_v4(0x10)?;
    /// assert_eq!(s.tos_v4()?, 0x10);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn tos_v4(&self) -> io::Result<u32> {
        option::<libc::c_int>(self.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS).map(|v| v as u32)
    }

    /// Sets `IP_TOS` (see [`tos_v4`](Self::tos_v4)).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_tos_v4(0x08)?;
    /// assert_eq!(s.tos_v4()?, 0x08);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
        set_option(
            self.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_TOS,
            tos as libc::c_int,
        )
    }

    /// As [`tos_v4`](Self::tos_v4) (tokio's older name).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_tos(0x10)?;
    /// assert_eq!(s.tos()?, 0x10);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn tos(&self) -> io::Result<u32> {
        self.tos_v4()
    }

    /// As [`set_tos_v4`](Self::set_tos_v4) (tokio's older name).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// s.set_tos(0x08)?;
    /// assert_eq!(s.tos()?, 0x08);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_tos(&self, tos: u32) -> io::Result<()> {
        self.set_tos_v4(tos)
    }

    /// Joins the IPv4 multicast group `multiaddr` on the interface with address
    /// `interface` (`UNSPECIFIED`: the system picks one) (`IP_ADD_MEMBERSHIP`).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// use std::net::Ipv4Addr;
    /// let group = Ipv4Addr::new(239, 255, 0, 1);
    /// match s.join_multicast_v4(group, Ipv4Addr::UNSPECIFIED) {
    ///     Ok(()) => s.leave_multicast_v4(group, Ipv4Addr::UNSPECIFIED)?,
    ///     Err(e) => eprintln!("no multicast route here: {e}"),
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn join_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| {
            s.join_multicast_v4(&multiaddr, &interface)
        })
    }

    /// Leaves a group joined with
    /// [`join_multicast_v4`](Self::join_multicast_v4) (`IP_DROP_MEMBERSHIP`).
    ///
    /// # Example
    /// ```
    /// # use std::net::{Ipv4Addr, Ipv6Addr};
    /// fn f(s: &fairlane::net::UdpSocket, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> std::io::Result<()> { s.leave_multicast_v4(multiaddr, interface) }
    /// ```
    pub fn leave_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| {
            s.leave_multicast_v4(&multiaddr, &interface)
        })
    }

    /// Joins the IPv6 multicast group `multiaddr` on the interface of index
    /// `interface` (0: the system picks one) (`IPV6_ADD_MEMBERSHIP`).
    ///
    /// # Example
    /// ```
    /// # use std::net::{Ipv4Addr, Ipv6Addr};
    /// fn f(s: &fairlane::net::UdpSocket, multiaddr: &Ipv6Addr, interface: u32) -> std::io::Result<()> { s.join_multicast_v6(multiaddr, interface) }
    /// ```
    pub fn join_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| {
            s.join_multicast_v6(multiaddr, interface)
        })
    }

    /// Leaves a group joined with
    /// [`join_multicast_v6`](Self::join_multicast_v6) (`IPV6_DROP_MEMBERSHIP`).
    ///
    /// # Example
    /// ```
    /// # use std::net::{Ipv4Addr, Ipv6Addr};
    /// fn f(s: &fairlane::net::UdpSocket, multiaddr: &Ipv6Addr, interface: u32) -> std::io::Result<()> { s.leave_multicast_v6(multiaddr, interface) }
    /// ```
    pub fn leave_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::UdpSocket| {
            s.leave_multicast_v6(multiaddr, interface)
        })
    }

    /// Takes the socket's pending error (`SO_ERROR`), e.g. an ICMP "port
    /// unreachable" for a datagram sent to a connected peer; `None` if there is
    /// none.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let s = rt.block_on(fairlane::net::UdpSocket::bind("127.0.0.1:0"))?;
    /// assert!(s.take_error()?.is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        take_error(self.as_raw_fd())
    }
}
