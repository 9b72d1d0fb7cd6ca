//! TCP socket options on a connected [`TcpStream`] (`SO_LINGER`,
//! `TCP_QUICKACK`, `IP_TTL`, the pending error), on a [`TcpListener`]
//! (`IP_TTL`) and on a [`TcpSocket`] before it connects or listens
//! (`IP_TOS`), with tokio's names.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use super::socket::{option, set_option, take_error, with_std};
use super::{TcpListener, TcpSocket, TcpStream};

/// Sets `SO_LINGER` on `fd`: `Some(d)` (whole seconds, rounded down) or off.
pub(super) fn set_linger(fd: RawFd, dur: Option<Duration>) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: libc::c_int::from(dur.is_some()),
        l_linger: dur.map_or(0, |d| {
            d.as_secs().min(libc::c_int::MAX as u64) as libc::c_int
        }),
    };
    set_option(fd, libc::SOL_SOCKET, libc::SO_LINGER, linger)
}

/// `fd`'s `SO_LINGER`.
pub(super) fn linger(fd: RawFd) -> io::Result<Option<Duration>> {
    let l: libc::linger = option(fd, libc::SOL_SOCKET, libc::SO_LINGER)?;
    Ok((l.l_onoff != 0).then(|| Duration::from_secs(l.l_linger.max(0) as u64)))
}

impl TcpStream {
    /// Sets `SO_LINGER`: with `Some(d)`, closing waits up to `d` (whole
    /// seconds) for unsent data, and `Some(Duration::ZERO)` resets the
    /// connection on close; `None` turns it off.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// assert_eq!(s.linger()?, None);
    /// s.set_linger(Some(Duration::from_secs(3)))?;
    /// assert_eq!(s.linger()?, Some(Duration::from_secs(3)));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_linger(&self, dur: Option<Duration>) -> io::Result<()> {
        set_linger(self.as_raw_fd(), dur)
    }

    /// `SO_LINGER`: see [`set_linger`](Self::set_linger).
    ///
    /// # Example
    /// See [`set_linger`](Self::set_linger).
    /// ```
    /// fn f(s: &fairlane::net::TcpStream) -> std::io::Result<bool> { Ok(s.linger()?.is_some()) }
    /// ```
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        linger(self.as_raw_fd())
    }

    /// Sets `TCP_QUICKACK` (Linux): acknowledgements are sent at once
    /// rather than delayed. The kernel may turn it off again by itself, as
    /// its documentation says; set it again where it matters.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// s.set_quickack(true)?;
    /// assert!(s.quickack()?);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_quickack(&self, quickack: bool) -> io::Result<()> {
        let on = libc::c_int::from(quickack);
        set_option(self.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK, on)
    }

    /// Whether `TCP_QUICKACK` is on (Linux).
    ///
    /// # Example
    /// See [`set_quickack`](Self::set_quickack).
    /// ```
    /// fn f(s: &fairlane::net::TcpStream) -> std::io::Result<bool> { s.quickack() }
    /// ```
    pub fn quickack(&self) -> io::Result<bool> {
        let on: libc::c_int = option(self.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK)?;
        Ok(on != 0)
    }

    /// Sets `SO_LINGER` to zero: closing the stream resets the connection
    /// (the peer reads `ConnectionReset`) and drops unsent data, without
    /// waiting.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// s.set_zero_linger()?;
    /// assert_eq!(s.linger()?, Some(std::time::Duration::ZERO));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_zero_linger(&self) -> io::Result<()> {
        set_linger(self.as_raw_fd(), Some(Duration::ZERO))
    }

    /// `IP_TTL`: the time-to-live of the packets this stream sends.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// # let l = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let s = fairlane::net::TcpStream::connect(l.local_addr()?).await?;
    /// s.set_ttl(42)?;
    /// assert_eq!(s.ttl()?, 42);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        with_std(self.as_raw_fd(), std::net::TcpStream::ttl)
    }

    /// Sets `IP_TTL` (see [`ttl`](Self::ttl)).
    ///
    /// # Example
    /// See [`ttl`](Self::ttl).
    /// ```
    /// fn f(s: &fairlane::net::TcpStream) -> std::io::Result<()> { s.set_ttl(64) }
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        with_std(self.as_raw_fd(), |s: &std::net::TcpStream| s.set_ttl(ttl))
    }

    /// Takes the socket's pending error (`SO_ERROR`); `None` if there is
    /// none.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::TcpStream) -> std::io::Result<bool> { Ok(s.take_error()?.is_none()) }
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        take_error(self.as_raw_fd())
    }
}

impl TcpSocket {
    /// Sets `IP_TOS`, the type-of-service byte of the IPv4 packets it sends.
    ///
    /// # Errors
    /// The operating system's, e.g. for an IPv6 socket.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_tos(0x10)?;
    /// assert_eq!(socket.tos()?, 0x10);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_tos(&self, tos: u32) -> io::Result<()> {
        set_option(
            self.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_TOS,
            tos as libc::c_int,
        )
    }

    /// `IP_TOS`: see [`set_tos`](Self::set_tos).
    ///
    /// # Example
    /// ```
    /// assert_eq!(fairlane::net::TcpSocket::new_v4()?.tos()?, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn tos(&self) -> io::Result<u32> {
        let tos: libc::c_int = option(self.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS)?;
        Ok(tos as u32)
    }

    /// As [`set_tos`](Self::set_tos) (tokio's newer name).
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_tos_v4(0x08)?;
    /// assert_eq!(socket.tos_v4()?, 0x08);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
        self.set_tos(tos)
    }

    /// As [`tos`](Self::tos) (tokio's newer name).
    ///
    /// # Example
    /// ```
    /// assert_eq!(fairlane::net::TcpSocket::new_v4()?.tos_v4()?, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn tos_v4(&self) -> io::Result<u32> {
        self.tos()
    }

    /// Sets `IPV6_TCLASS`, the traffic class of the IPv6 packets it sends.
    ///
    /// # Errors
    /// The operating system's, e.g. for an IPv4 socket.
    ///
    /// # Example
    /// ```
    /// if let Ok(socket) = fairlane::net::TcpSocket::new_v6() {
    ///     socket.set_tclass_v6(96)?;
    ///     assert_eq!(socket.tclass_v6()?, 96);
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_tclass_v6(&self, tclass: u32) -> io::Result<()> {
        set_option(
            self.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            tclass as libc::c_int,
        )
    }

    /// `IPV6_TCLASS`: see [`set_tclass_v6`](Self::set_tclass_v6).
    ///
    /// # Example
    /// See [`set_tclass_v6`](Self::set_tclass_v6).
    /// ```
    /// fn f(s: &fairlane::net::TcpSocket) -> std::io::Result<u32> { s.tclass_v6() }
    /// ```
    pub fn tclass_v6(&self) -> io::Result<u32> {
        let tclass: libc::c_int = option(self.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS)?;
        Ok(tclass as u32)
    }

    /// Sets `SO_LINGER` to zero: closing the connection made from this
    /// socket resets it and drops unsent data, without waiting.
    ///
    /// # Example
    /// ```
    /// let socket = fairlane::net::TcpSocket::new_v4()?;
    /// socket.set_zero_linger()?;
    /// assert_eq!(socket.linger()?, Some(std::time::Duration::ZERO));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_zero_linger(&self) -> io::Result<()> {
        set_linger(self.as_raw_fd(), Some(Duration::ZERO))
    }
}

impl TcpListener {
    /// `IP_TTL`: the time-to-live of the packets the accepted streams
    /// send.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let l = rt.block_on(fairlane::net::TcpListener::bind("127.0.0.1:0"))?;
    /// l.set_ttl(42)?;
    /// assert_eq!(l.ttl()?, 42);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        with_std(self.as_raw_fd(), std::net::TcpListener::ttl)
    }

    /// Sets `IP_TTL` (see [`ttl`](Self::ttl)).
    ///
    /// # Example
    /// See [`ttl`](Self::ttl).
    /// ```
    /// fn f(l: &fairlane::net::TcpListener) -> std::io::Result<()> { l.set_ttl(64) }
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        with_std(self.as_raw_fd(), |l: &std::net::TcpListener| l.set_ttl(ttl))
    }
}
