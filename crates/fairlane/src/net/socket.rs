//! The socket under every `net` type: a descriptor, the runtime's driver,
//! and (fallback backend) its poller registration; every operation in both
//! backends' forms.
//!
//! io_uring sockets stay in blocking mode (the ring makes them
//! asynchronous, and a non-blocking descriptor would make some operations
//! fail with `EAGAIN` instead of waiting); fallback sockets are
//! non-blocking and wait for readiness.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use crate::io::carry::{Carry, Keep, Received};
use crate::io::driver::Driver;
use crate::io::reactor::{Direction, Registration};
use crate::io::unix::readiness;
use crate::io::uring::{self, Op};
use crate::io::{current_driver, submit_and_wait, Interest, IoBackend, IoBuf, IoBufMut, Ready};

/// Converts a `-1`-on-error system call result.
pub(crate) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// A socket address in the kernel's form, boxed so that its address is
/// stable while an operation uses it.
#[derive(Clone, Copy)]
pub(crate) struct SockAddrBuf {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl SockAddrBuf {
    pub(crate) fn empty() -> Box<SockAddrBuf> {
        Box::new(SockAddrBuf {
            // SAFETY: all-zero bytes are a valid `sockaddr_storage`.
            storage: unsafe { zeroed() },
            len: size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        })
    }

    pub(crate) fn from_addr(addr: &SocketAddr) -> Box<SockAddrBuf> {
        let mut buf = Self::empty();
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: `sockaddr_storage` is larger than and aligned for
                // `sockaddr_in`.
                unsafe {
                    std::ptr::write(&mut buf.storage as *mut _ as *mut libc::sockaddr_in, sin)
                };
                buf.len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: `sockaddr_storage` is larger than and aligned for
                // `sockaddr_in6`.
                unsafe {
                    std::ptr::write(&mut buf.storage as *mut _ as *mut libc::sockaddr_in6, sin6)
                };
                buf.len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            }
        }
        buf
    }

    /// A Unix-domain address for `path` (not an abstract name).
    pub(crate) fn from_path(path: &std::path::Path) -> io::Result<Box<SockAddrBuf>> {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        let mut buf = Self::empty();
        // SAFETY: `sockaddr_storage` is larger than and aligned for
        // `sockaddr_un`; zeroed bytes are a valid one.
        let sun = unsafe { &mut *(&mut buf.storage as *mut _ as *mut libc::sockaddr_un) };
        if bytes.is_empty() || bytes.len() >= sun.sun_path.len() || bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a Unix socket path must be non-empty, shorter than 108 bytes, without NUL",
            ));
        }
        sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (dst, &src) in sun.sun_path.iter_mut().zip(bytes) {
            *dst = src as libc::c_char;
        }
        buf.len = (size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
        Ok(buf)
    }

    /// A Unix-domain address: a path, an abstract name, or unnamed.
    pub(crate) fn unix_addr(&self) -> io::Result<std::os::unix::net::SocketAddr> {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::net::SocketAddr as UnixAddr;
        let header = size_of::<libc::sa_family_t>();
        // An unnamed sender: the kernel writes no address at all.
        let unnamed = (self.len as usize) <= header;
        if !unnamed && i32::from(self.storage.ss_family) != libc::AF_UNIX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the address is not a Unix-domain address",
            ));
        }
        // SAFETY: the family says the storage holds a `sockaddr_un`.
        let sun = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_un) };
        let len = (self.len as usize)
            .saturating_sub(header)
            .min(sun.sun_path.len());
        // SAFETY: `c_char` and `u8` have the same size and layout.
        let path: &[u8] = unsafe { std::slice::from_raw_parts(sun.sun_path.as_ptr().cast(), len) };
        match path.first() {
            // Unnamed: std gives no constructor, but an unbound socket's
            // own address is one (made once).
            None => {
                static UNNAMED: std::sync::OnceLock<UnixAddr> = std::sync::OnceLock::new();
                if let Some(a) = UNNAMED.get() {
                    return Ok(a.clone());
                }
                let a = std::os::unix::net::UnixDatagram::unbound()?.local_addr()?;
                Ok(UNNAMED.get_or_init(|| a).clone())
            }
            Some(0) => UnixAddr::from_abstract_name(&path[1..]),
            Some(_) => {
                let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                UnixAddr::from_pathname(std::ffi::OsStr::from_bytes(&path[..end]))
            }
        }
    }

    pub(crate) fn ip_addr(&self) -> io::Result<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a `sockaddr_in`.
                let sin = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in) };
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    sin.sin_addr.s_addr.to_ne_bytes().into(),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a `sockaddr_in6`.
                let sin6 = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in6) };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    sin6.sin6_addr.s6_addr.into(),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer's address is not an IP address",
            )),
        }
    }
}

/// A message header for `sendmsg`/`recvmsg`, boxed with its address and
/// buffer descriptor so that the kernel's pointers stay valid.
struct MsgBox {
    hdr: libc::msghdr,
    iov: libc::iovec,
    addr: SockAddrBuf,
}

// SAFETY: the raw pointers in `hdr` and `iov` point into this same box and
// into the operation's buffer, which travel together; only the kernel
// dereferences them.
unsafe impl Send for MsgBox {}

impl MsgBox {
    fn new(addr: SockAddrBuf, ptr: *mut u8, len: usize) -> Box<MsgBox> {
        let mut m = Box::new(MsgBox {
            // SAFETY: all-zero bytes are a valid `msghdr`.
            hdr: unsafe { zeroed() },
            iov: libc::iovec {
                iov_base: ptr.cast(),
                iov_len: len,
            },
            addr,
        });
        m.hdr.msg_name = (&mut m.addr.storage as *mut libc::sockaddr_storage).cast();
        m.hdr.msg_namelen = m.addr.len;
        m.hdr.msg_iov = &mut m.iov;
        m.hdr.msg_iovlen = 1;
        m
    }
}

/// A submitted operation, or the error with the resources back.
type Submitted<T> = Result<Op<T>, (io::Error, T)>;

/// A socket of a fairlane runtime.
pub(crate) struct Socket {
    /// Declared before `fd`: it must be dropped (deleted from the poller)
    /// before the descriptor closes.
    reg: Option<Registration>,
    fd: OwnedFd,
    driver: Arc<Driver>,
    /// io_uring: what dropped reads received and dropped writes did not
    /// send (see [`Carry`]); `None` in the fallback backend.
    carry: Option<Arc<Carry>>,
    /// io_uring, listeners only: an epoll instance watching the listener,
    /// which `accept` waits on (see [`Socket::accept`]).
    accept_watch: Option<OwnedFd>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        if let Some(carry) = &self.carry {
            if carry.is_busy() {
                uring::cancel_kept(carry);
            }
        }
    }
}

/// What a dropped stream read's buffer holds.
fn received_bytes<B: IoBufMut>(mut buf: B, n: usize) -> Received {
    // SAFETY: the kernel wrote `n` bytes (at most the `bytes_total` it was
    // given) from the buffer's start, and the buffer is alive here.
    let bytes = unsafe { std::slice::from_raw_parts(buf.stable_mut_ptr(), n) };
    Received::bytes(bytes.to_vec())
}

/// What a dropped `recvmsg`'s buffer and header hold.
fn received_datagram<B: IoBufMut>((mut buf, mut m): (B, Box<MsgBox>), n: usize) -> Received {
    m.addr.len = m.hdr.msg_namelen;
    // SAFETY: as in `received_bytes`.
    let bytes = unsafe { std::slice::from_raw_parts(buf.stable_mut_ptr(), n) };
    Received::datagram(bytes.to_vec(), m.addr)
}

/// What a dropped send (of `buf` from `start`) did not send of its
/// initialised bytes, after `sent` bytes.
fn unsent_bytes<B: IoBuf>((buf, start): (B, usize), sent: usize) -> Option<Vec<u8>> {
    let from = start.saturating_add(sent).min(buf.bytes_init());
    let len = buf.bytes_init() - from;
    // SAFETY: `from..bytes_init` lies inside the initialised bytes of the
    // live buffer.
    (len > 0)
        .then(|| unsafe { std::slice::from_raw_parts(buf.stable_ptr().add(from), len) }.to_vec())
}

impl Socket {
    /// Adopts `fd` for the current runtime's backend.
    pub(crate) fn from_fd(fd: OwnedFd) -> io::Result<Socket> {
        let driver = current_driver()?;
        let fallback = driver.backend() == IoBackend::Fallback;
        set_nonblocking(fd.as_raw_fd(), fallback)?;
        let reg = if fallback {
            Some(Registration::new(&driver, fd.as_raw_fd())?)
        } else {
            None
        };
        let carry = (!fallback).then(Carry::new);
        Ok(Socket {
            reg,
            fd,
            driver,
            carry,
            accept_watch: None,
        })
    }

    /// Adopts a listening `fd`: non-blocking in both backends, because
    /// [`Socket::accept`] calls `accept4` itself; with io_uring, watched by
    /// an epoll instance of its own.
    pub(crate) fn listener_from_fd(fd: OwnedFd) -> io::Result<Socket> {
        let mut sock = Socket::from_fd(fd)?;
        set_nonblocking(sock.raw(), true)?;
        if sock.uring() {
            sock.accept_watch = Some(watch_readable(sock.raw())?);
        }
        Ok(sock)
    }

    /// A new socket of `domain` and `ty`.
    pub(crate) fn new(domain: libc::c_int, ty: libc::c_int) -> io::Result<Socket> {
        // SAFETY: plain system call without pointers.
        let fd = cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: a new descriptor nobody else owns.
        Socket::from_fd(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Gives up the descriptor, non-blocking as tokio's `into_std` leaves
    /// it, or gives the socket back if the runtime holds what the
    /// descriptor alone would not show: io_uring operations dropped in
    /// flight, or what they received or did not send. Once this is called
    /// on a socket owned alone, no new operation can start, and a carry
    /// that is idle stays idle (it becomes busy only by a drop).
    pub(crate) fn into_fd(self) -> Result<OwnedFd, Socket> {
        if self.carry.as_ref().is_some_and(|c| c.is_busy()) {
            return Err(self);
        }
        if let Err(e) = set_nonblocking(self.raw(), true) {
            tracing::debug!("into_std: setting O_NONBLOCK failed: {e}");
        }
        let mut this = std::mem::ManuallyDrop::new(self);
        // Deleted from the poller before the descriptor leaves.
        drop(this.reg.take());
        // SAFETY: `this` is never used or dropped again, so each field is
        // moved out exactly once; `Socket::drop` (which only cancels kept
        // operations, of which there are none) is skipped.
        let (fd, driver, carry, accept_watch) = unsafe {
            (
                std::ptr::read(&this.fd),
                std::ptr::read(&this.driver),
                std::ptr::read(&this.carry),
                std::ptr::read(&this.accept_watch),
            )
        };
        drop((driver, carry, accept_watch));
        Ok(fd)
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn reg(&self) -> &Registration {
        self.reg.as_ref().expect("fallback sockets are registered")
    }

    fn uring(&self) -> bool {
        self.reg.is_none()
    }

    /// Receives into `buf` from its start (up to `bytes_total`).
    ///
    /// Cancel-safe: bytes, the end of the stream or an error the kernel
    /// delivered to a dropped call are returned by the next one (see
    /// [`Carry`]).
    pub(crate) async fn recv<B: IoBufMut>(&self, mut buf: B) -> (io::Result<usize>, B) {
        if buf.bytes_total() == 0 {
            // A stream receive of no bytes would wait (io_uring) or fail
            // with `EAGAIN` (non-blocking) while nothing is there, for data
            // it cannot take.
            return (Ok(0), buf);
        }
        let fd = self.raw();
        let result = if let Some(carry) = &self.carry {
            if carry.is_busy() {
                carry.settle_reads().await;
                let (ptr, cap) = (buf.stable_mut_ptr(), buf.bytes_total());
                // SAFETY: the buffer promises `cap` writable bytes at `ptr`.
                if let Some(got) = unsafe { carry.take_bytes(ptr, cap) } {
                    if let Ok(n) = got {
                        // SAFETY: `take_bytes` wrote `n` bytes from the start.
                        unsafe { buf.set_init(n) };
                    }
                    return (got, buf);
                }
            }
            let op = Op::submit(&self.driver, buf, false, |b| {
                let len = b.bytes_total().min(u32::MAX as usize) as u32;
                opcode::Recv::new(types::Fd(fd), b.stable_mut_ptr(), len).build()
            })
            .map(|op| op.keep_in(carry, Keep::Read(received_bytes::<B>)));
            match op {
                Ok(op) => {
                    let (r, b) = op.await;
                    buf = b;
                    r.map(|n| n as usize)
                }
                Err((e, b)) => {
                    buf = b;
                    Err(e)
                }
            }
        } else {
            // As an integer: a raw pointer held across the await would make
            // the future `!Send`.
            let ptr = buf.stable_mut_ptr() as usize;
            let len = buf.bytes_total();
            self.reg()
                .io(Direction::Read, || {
                    // SAFETY: `ptr` points to `len` writable bytes of `buf`,
                    // alive across this call.
                    cvt_size(unsafe { libc::recv(fd, ptr as *mut libc::c_void, len, 0) })
                })
                .await
        };
        if let Ok(n) = result {
            // SAFETY: the kernel wrote `n` bytes from the buffer's start.
            unsafe { buf.set_init(n) };
        }
        (result, buf)
    }

    /// Sends the initialised bytes of `buf` from `start` on.
    pub(crate) async fn send<B: IoBuf>(&self, buf: B, start: usize) -> (io::Result<usize>, B) {
        let fd = self.raw();
        let start = start.min(buf.bytes_init());
        if let Some(carry) = &self.carry {
            if carry.is_busy() {
                if let Err(e) = self.send_carried(carry).await {
                    return (Err(e), buf);
                }
            }
            // Eager attempt: a send that fits in the socket's buffer is done
            // by one non-blocking system call, and the task goes on within
            // the same poll instead of waiting for a completion to be reaped
            // and being woken again (in a request-response exchange, half
            // the task's wake-ups).
            // Only a send that would block goes through the ring.
            crate::task::coop::proceed().await;
            let len = buf.bytes_init() - start;
            // SAFETY: `start <= bytes_init`, so `ptr .. ptr + len` lies in
            // the buffer's initialised bytes, alive across the call.
            let r = cvt_size(unsafe {
                libc::send(
                    fd,
                    buf.stable_ptr().add(start).cast(),
                    len,
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            });
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return (r, buf),
            }
            match self.send_op(carry, buf, start) {
                Ok(op) => {
                    let (r, (b, _)) = op.await;
                    (r.map(|n| n as usize), b)
                }
                Err((e, (b, _))) => (Err(e), b),
            }
        } else {
            self.send_when_writable(buf, start).await
        }
    }

    /// The fallback backend's send: waits for the socket to be writable and
    /// sends `buf`'s initialised bytes from `start` in one system call.
    async fn send_when_writable<B: IoBuf>(&self, buf: B, start: usize) -> (io::Result<usize>, B) {
        let fd = self.raw();
        let ptr = buf.stable_ptr() as usize + start;
        let len = buf.bytes_init() - start;
        let r = self
            .reg()
            .io(Direction::Write, || {
                // SAFETY: `start <= bytes_init`, so `ptr .. ptr + len` lies
                // inside `buf`'s initialised bytes, alive across this call
                // (the buffer is held until it is handed back below).
                cvt_size(unsafe {
                    libc::send(fd, ptr as *const libc::c_void, len, libc::MSG_NOSIGNAL)
                })
            })
            .await;
        (r, buf)
    }

    /// io_uring: submits a send of `buf`'s initialised bytes from `start`,
    /// kept in `carry` if its future is dropped: it then runs to completion
    /// (`MSG_WAITALL`: the kernel retries short sends of a stream until
    /// every byte is sent or the connection fails) and the next send waits
    /// for it.
    fn send_op<B: IoBuf>(&self, carry: &Arc<Carry>, buf: B, start: usize) -> Submitted<(B, usize)> {
        let fd = self.raw();
        Op::submit(&self.driver, (buf, start), false, |(b, start)| {
            let len = (b.bytes_init() - *start).min(u32::MAX as usize) as u32;
            // SAFETY: `start <= bytes_init`, so the pointer stays inside the
            // buffer.
            let ptr = unsafe { b.stable_ptr().add(*start) };
            opcode::Send::new(types::Fd(fd), ptr, len)
                .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                .build()
        })
        .map(|op| op.keep_in(carry, Keep::Write(unsent_bytes::<B>)))
    }

    /// io_uring: before any other write, waits for the dropped writes still
    /// in flight and sends what they did not.
    async fn send_carried(&self, carry: &Arc<Carry>) -> io::Result<()> {
        loop {
            carry.settle_writes().await;
            let Some(bytes) = carry.take_unsent() else {
                return Ok(());
            };
            // Submitted with no await in between: if this future is dropped,
            // the bytes are with the operation, which keeps what it does
            // not send.
            let op = self.send_op(carry, bytes, 0).map_err(|(e, (bytes, _))| {
                carry.put_back_unsent(bytes);
                e
            })?;
            let (r, (bytes, _)) = op.await;
            let n = r? as usize;
            if n < bytes.len() {
                carry.put_back_unsent(bytes[n..].to_vec());
            }
        }
    }

    /// Sends every initialised byte of `buf`.
    pub(crate) async fn send_all<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        crate::io::write_all_with(buf, |buf, done| self.send(buf, done)).await
    }

    /// Accepts a connection: the new descriptor, close-on-exec, and the
    /// peer's address as `accept4` reported it.
    ///
    /// The address comes from `accept4` itself, not from `getpeername`
    /// afterwards: a connection the peer reset before it was accepted is
    /// still handed out by the kernel, but `getpeername` on it fails with
    /// `ENOTCONN`. A connection that the kernel drops from the queue
    /// instead (`ECONNABORTED`) is skipped and the next one waited for, so
    /// a peer that gives up early never makes `accept` fail.
    ///
    /// The listener is non-blocking in both backends (see
    /// [`Socket::listener_from_fd`]). With io_uring this tries `accept4`
    /// first and, while nobody is waiting to be accepted, waits with a
    /// one-shot `POLL_ADD` rather than with io_uring's own `ACCEPT`: the
    /// kernel queues an `ACCEPT` as an *exclusive* waiter on the listener,
    /// so a connection's single wake-up can go to an accept that is being
    /// cancelled (its future was dropped) and be lost with it, leaving the
    /// connection in the backlog while a live accept waits forever. A poll
    /// request is woken together with every other waiter.
    ///
    /// The poll is on the listener's own epoll instance (`accept_watch`),
    /// not on the listener: a request in a ring holds its file until the
    /// request is reaped, and a process killed by a signal has its ring
    /// torn down asynchronously after it exits, so a poll on the listener
    /// would keep the port taken after the process is gone. An epoll
    /// instance holds no reference to what it watches: the listener closes
    /// with its descriptor (when it is dropped, or when the process exits),
    /// and only the epoll instance waits for the ring.
    pub(crate) async fn accept(&self) -> io::Result<(OwnedFd, Box<SockAddrBuf>)> {
        let fd = self.raw();
        let mut addr = SockAddrBuf::empty();
        let mut accept_now = || loop {
            addr.len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            // SAFETY: `addr` is a boxed storage of `addr.len` bytes, alive
            // across the call; accept4 writes at most that many and the
            // length it used.
            let r = cvt(unsafe {
                libc::accept4(
                    fd,
                    (&mut addr.storage as *mut libc::sockaddr_storage).cast(),
                    &mut addr.len,
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            });
            match r {
                // That connection is gone; look at the next one.
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
                r => return r,
            }
        };
        let new = if self.uring() {
            // A listener that outlived its runtime accepts nothing.
            self.driver.check_live()?;
            crate::task::coop::proceed().await;
            loop {
                match accept_now() {
                    Ok(new) => break new,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(e),
                }
                let watch = self.accept_watch.as_ref().expect("listeners are watched");
                readiness::poll_add(&self.driver, watch.as_raw_fd(), libc::POLLIN).await?;
            }
        } else {
            self.reg().io(Direction::Read, accept_now).await?
        };
        // SAFETY: a new descriptor nobody else owns.
        let new = unsafe { OwnedFd::from_raw_fd(new) };
        Ok((new, addr))
    }

    /// Connects to `addr`.
    pub(crate) async fn connect(&self, addr: Box<SockAddrBuf>) -> io::Result<()> {
        let fd = self.raw();
        if self.uring() {
            let op = Op::submit(&self.driver, addr, false, |a| {
                opcode::Connect::new(
                    types::Fd(fd),
                    (&a.storage as *const libc::sockaddr_storage).cast(),
                    a.len,
                )
                .build()
            })
            .map_err(|(e, _)| e)?
            .once();
            op.await.0.map(drop)
        } else {
            // SAFETY: `addr` is a valid address of `len` bytes.
            let r = unsafe {
                libc::connect(
                    fd,
                    (&addr.storage as *const libc::sockaddr_storage).cast(),
                    addr.len,
                )
            };
            if r == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINPROGRESS) | Some(libc::EAGAIN) => {}
                _ => return Err(err),
            }
            // Writable once the connection is made or failed. Each attempt
            // looks at the socket itself (SO_ERROR, then whether a peer is
            // known), so an edge that came before the wait is not needed.
            self.reg()
                .io(Direction::Write, || {
                    match take_error(fd)? {
                        Some(e) => Err(e),
                        None => {
                            // Connected if the peer address is known.
                            let mut storage = SockAddrBuf::empty();
                            // SAFETY: writes at most `len` bytes into the
                            // boxed storage.
                            let r = unsafe {
                                libc::getpeername(
                                    fd,
                                    (&mut storage.storage as *mut libc::sockaddr_storage).cast(),
                                    &mut storage.len,
                                )
                            };
                            if r == 0 {
                                Ok(())
                            } else {
                                let e = io::Error::last_os_error();
                                if e.raw_os_error() == Some(libc::ENOTCONN) {
                                    Err(io::ErrorKind::WouldBlock.into())
                                } else {
                                    Err(e)
                                }
                            }
                        }
                    }
                })
                .await
        }
    }

    /// Sends one datagram of `buf`'s initialised bytes to `addr`.
    pub(crate) async fn send_to<B: IoBuf>(
        &self,
        buf: B,
        addr: SocketAddr,
    ) -> (io::Result<usize>, B) {
        self.send_to_sockaddr(buf, SockAddrBuf::from_addr(&addr))
            .await
    }

    /// Sends one datagram of `buf`'s initialised bytes to `sa` (any
    /// family).
    pub(crate) async fn send_to_sockaddr<B: IoBuf>(
        &self,
        buf: B,
        sa: Box<SockAddrBuf>,
    ) -> (io::Result<usize>, B) {
        let fd = self.raw();
        if self.uring() {
            let ptr = buf.stable_ptr() as *mut u8;
            let len = buf.bytes_init();
            let msg = MsgBox::new(*sa, ptr, len);
            let (r, (b, _)) = submit_and_wait(&self.driver, (buf, msg), |(_, m)| {
                opcode::SendMsg::new(types::Fd(fd), &m.hdr)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build()
            })
            .await;
            (r, b)
        } else {
            let ptr = buf.stable_ptr() as usize;
            let len = buf.bytes_init();
            let r = self
                .reg()
                .io(Direction::Write, || {
                    // SAFETY: `ptr`/`len` describe `buf`'s initialised
                    // bytes and `sa` a valid address, both alive here.
                    cvt_size(unsafe {
                        libc::sendto(
                            fd,
                            ptr as *const libc::c_void,
                            len,
                            libc::MSG_NOSIGNAL,
                            (&sa.storage as *const libc::sockaddr_storage).cast(),
                            sa.len,
                        )
                    })
                })
                .await;
            (r, buf)
        }
    }

    /// Receives one datagram into `buf` and says where it came from.
    pub(crate) async fn recv_from<B: IoBufMut>(
        &self,
        buf: B,
    ) -> (io::Result<(usize, SocketAddr)>, B) {
        let (r, buf) = self.receive_datagram(buf, false).await;
        (r.and_then(|(n, a)| Ok((n, a.ip_addr()?))), buf)
    }

    /// As [`recv_from`](Self::recv_from), leaving the datagram queued.
    pub(crate) async fn peek_from<B: IoBufMut>(
        &self,
        buf: B,
    ) -> (io::Result<(usize, SocketAddr)>, B) {
        let (r, buf) = self.receive_datagram(buf, true).await;
        (r.and_then(|(n, a)| Ok((n, a.ip_addr()?))), buf)
    }

    /// `recv_from`, or with `peek` a `MSG_PEEK` that leaves the datagram
    /// (in the socket or in the carry). A peek dropped in flight took
    /// nothing, so it is not kept in the carry.
    pub(crate) async fn receive_datagram<B: IoBufMut>(
        &self,
        mut buf: B,
        peek: bool,
    ) -> (io::Result<(usize, SockAddrBuf)>, B) {
        let fd = self.raw();
        let flags = if peek { libc::MSG_PEEK } else { 0 };
        let result = if let Some(carry) = &self.carry {
            if carry.is_busy() {
                carry.settle_reads().await;
                let (ptr, cap) = (buf.stable_mut_ptr(), buf.bytes_total());
                // SAFETY: the buffer promises `cap` writable bytes at `ptr`.
                if let Some(got) = unsafe { carry.take_datagram(ptr, cap, peek) } {
                    let got = got.and_then(|(n, from)| {
                        // SAFETY: `take_datagram` wrote `n` bytes from the
                        // start.
                        unsafe { buf.set_init(n) };
                        Ok((n, from.ok_or_else(no_sender)?))
                    });
                    return (got, buf);
                }
            }
            let msg = MsgBox::new(
                *SockAddrBuf::empty(),
                buf.stable_mut_ptr(),
                buf.bytes_total(),
            );
            let op = Op::submit(&self.driver, (buf, msg), false, |(_, m)| {
                opcode::RecvMsg::new(types::Fd(fd), &mut m.hdr)
                    .flags(flags as u32)
                    .build()
            })
            .map(|op| {
                if peek {
                    op
                } else {
                    op.keep_in(carry, Keep::Read(received_datagram::<B>))
                }
            });
            match op {
                Ok(op) => {
                    let (r, (b, mut m)) = op.await;
                    buf = b;
                    m.addr.len = m.hdr.msg_namelen;
                    r.map(|n| (n as usize, m.addr))
                }
                Err((e, (b, _))) => {
                    buf = b;
                    Err(e)
                }
            }
        } else {
            let ptr = buf.stable_mut_ptr() as usize;
            let len = buf.bytes_total();
            let mut sa = SockAddrBuf::empty();
            self.reg()
                .io(Direction::Read, || {
                    sa.len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                    // SAFETY: `ptr`/`len` describe `buf`'s writable bytes,
                    // `sa` a boxed storage of `sa.len` bytes; all alive here.
                    let n = cvt_size(unsafe {
                        libc::recvfrom(
                            fd,
                            ptr as *mut libc::c_void,
                            len,
                            flags,
                            (&mut sa.storage as *mut libc::sockaddr_storage).cast(),
                            &mut sa.len,
                        )
                    })?;
                    Ok((n, *sa))
                })
                .await
        };
        if let Ok((n, _)) = result {
            // SAFETY: the kernel wrote `n` bytes from the buffer's start.
            unsafe { buf.set_init(n) };
        }
        (result, buf)
    }

    /// Waits until the socket is ready for any of `interest` (or has an
    /// error or a hang-up), without doing any I/O; what it reported. With
    /// io_uring, first: for reading, dropped reads still in flight are
    /// waited for, and an outcome they left counts as readable; for
    /// writing, what dropped writes left to send is sent.
    pub(crate) async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        if let Some(carry) = &self.carry {
            if carry.is_busy() {
                if interest.is_readable() {
                    carry.settle_reads().await;
                    if carry.has_received() {
                        return Ok(Ready::READABLE);
                    }
                }
                if interest.is_writable() {
                    self.send_carried(carry).await?;
                }
            }
        }
        readiness::wait(&self.driver, self.reg.as_ref(), self.raw(), interest).await
    }

    /// Waits until a read would not block: data, the end of the stream or
    /// an error is there (see [`ready`](Self::ready)).
    pub(crate) async fn readable(&self) -> io::Result<()> {
        self.ready(Interest::READABLE).await.map(drop)
    }

    /// Waits until a write would not block (see [`ready`](Self::ready)).
    pub(crate) async fn writable(&self) -> io::Result<()> {
        self.ready(Interest::WRITABLE).await.map(drop)
    }

    /// io_uring: `WouldBlock` while a dropped read's outcome is unknown (it
    /// may hold bytes that come before the socket's), else `None`.
    fn carried_reads_unknown(&self) -> Option<io::Error> {
        let carry = self.carry.as_ref()?;
        (carry.is_busy() && carry.reads_in_flight()).then(|| io::ErrorKind::WouldBlock.into())
    }

    /// Stream read into `out` without waiting: bytes (or the end of the
    /// stream, or an error) that dropped reads left come first.
    pub(crate) fn try_recv(&self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0); // as in `recv`
        }
        if let Some(e) = self.carried_reads_unknown() {
            return Err(e);
        }
        if let Some(carry) = self.carry.as_ref().filter(|c| c.is_busy()) {
            // SAFETY: `out` is a live, writable slice of `out.len()` bytes.
            if let Some(got) = unsafe { carry.take_bytes(out.as_mut_ptr(), out.len()) } {
                return got;
            }
        }
        // SAFETY: `out` is a live, writable slice.
        cvt_size(unsafe {
            libc::recv(
                self.raw(),
                out.as_mut_ptr().cast(),
                out.len(),
                libc::MSG_DONTWAIT,
            )
        })
    }

    /// Stream write from `data` without waiting; `WouldBlock` while dropped
    /// writes are in flight or left bytes to send (which go first:
    /// [`writable`](Self::writable) sends them).
    pub(crate) fn try_send(&self, data: &[u8]) -> io::Result<usize> {
        if self.has_carried_writes() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.try_send_to(data, None)
    }

    /// One datagram sent without waiting, to `addr` or (`None`) to the
    /// connected peer; also a stream's non-blocking send.
    pub(crate) fn try_send_to(&self, data: &[u8], addr: Option<SocketAddr>) -> io::Result<usize> {
        let sa = addr.map(|a| SockAddrBuf::from_addr(&a));
        self.try_send_to_sockaddr(data, sa.as_deref())
    }

    /// As [`try_send_to`](Self::try_send_to), to an address of any family.
    pub(crate) fn try_send_to_sockaddr(
        &self,
        data: &[u8],
        sa: Option<&SockAddrBuf>,
    ) -> io::Result<usize> {
        let (name, len) = match sa {
            Some(sa) => (
                (&sa.storage as *const libc::sockaddr_storage).cast(),
                sa.len,
            ),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: `data` is a live slice; `name` is null or a valid address
        // of `len` bytes, alive across the call.
        cvt_size(unsafe {
            libc::sendto(
                self.raw(),
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                name,
                len,
            )
        })
    }

    /// One datagram received into `out` without waiting, with its sender;
    /// one that a dropped receive left comes first.
    pub(crate) fn try_recv_from(&self, out: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, from) = self.try_receive_datagram(out)?;
        Ok((n, from.ip_addr()?))
    }

    /// As [`try_recv_from`](Self::try_recv_from), with the sender's address
    /// as the kernel wrote it (any family).
    pub(crate) fn try_receive_datagram(&self, out: &mut [u8]) -> io::Result<(usize, SockAddrBuf)> {
        if let Some(e) = self.carried_reads_unknown() {
            return Err(e);
        }
        if let Some(carry) = self.carry.as_ref().filter(|c| c.is_busy()) {
            // SAFETY: `out` is a live, writable slice of `out.len()` bytes.
            if let Some(got) = unsafe { carry.take_datagram(out.as_mut_ptr(), out.len(), false) } {
                let (n, from) = got?;
                return Ok((n, from.ok_or_else(no_sender)?));
            }
        }
        let mut sa = SockAddrBuf::empty();
        // SAFETY: `out` is a live, writable slice; `sa` a boxed storage of
        // `sa.len` bytes.
        let n = cvt_size(unsafe {
            libc::recvfrom(
                self.raw(),
                out.as_mut_ptr().cast(),
                out.len(),
                libc::MSG_DONTWAIT,
                (&mut sa.storage as *mut libc::sockaddr_storage).cast(),
                &mut sa.len,
            )
        })?;
        Ok((n, *sa))
    }

    /// Sends one datagram of `buf`'s initialised bytes to the connected
    /// peer.
    pub(crate) async fn send_connected<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        let fd = self.raw();
        if self.uring() {
            submit_and_wait(&self.driver, buf, |b| {
                let len = b.bytes_init().min(u32::MAX as usize) as u32;
                opcode::Send::new(types::Fd(fd), b.stable_ptr(), len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            })
            .await
        } else {
            self.send_when_writable(buf, 0).await
        }
    }

    /// Fallback only: `recv` into a borrowed slice.
    pub(crate) fn poll_recv_slice(
        &self,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if out.is_empty() {
            return Poll::Ready(Ok(0)); // as in `recv`
        }
        let fd = self.raw();
        self.reg().poll_io(cx, Direction::Read, || {
            // SAFETY: `out` is a live, writable slice.
            cvt_size(unsafe { libc::recv(fd, out.as_mut_ptr().cast(), out.len(), 0) })
        })
    }

    /// A stream `send` from a borrowed slice, of what the kernel takes now;
    /// while it takes nothing, a wait for the socket to be writable (the
    /// fallback backend's registration, or with io_uring the `POLL_ADD`
    /// kept in `wait` between polls). Nothing is sent in the background:
    /// what it reports is in the kernel, and a caller that stops polling
    /// has sent nothing more. With io_uring, what dropped owned writes left
    /// must have been sent first ([`Socket::flush_carried`]).
    pub(crate) fn poll_send_slice(
        &self,
        cx: &mut Context<'_>,
        wait: &mut readiness::KeptPoll,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        // `MSG_DONTWAIT`: io_uring sockets are in blocking mode.
        let send = || self.try_send_to_sockaddr(data, None);
        match &self.reg {
            Some(reg) => reg.poll_io(cx, Direction::Write, send),
            None => {
                readiness::poll_io_kept(wait, &self.driver, self.raw(), Direction::Write, cx, send)
            }
        }
    }

    /// io_uring: whether dropped owned writes are still sending or left
    /// bytes to send, which go before any other write
    /// ([`flush_carried`](Self::flush_carried) sends them).
    pub(crate) fn has_carried_writes(&self) -> bool {
        self.carry
            .as_ref()
            .is_some_and(|c| c.is_busy() && c.writes_pending())
    }

    /// io_uring: waits for the dropped owned writes still in flight and
    /// sends what they left; at once if there are none (and in the fallback
    /// backend, which has none).
    pub(crate) async fn flush_carried(&self) -> io::Result<()> {
        match &self.carry {
            Some(carry) if carry.is_busy() => self.send_carried(carry).await,
            _ => Ok(()),
        }
    }

    pub(crate) fn is_uring(&self) -> bool {
        self.uring()
    }

    pub(crate) fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        let how = match how {
            std::net::Shutdown::Read => libc::SHUT_RD,
            std::net::Shutdown::Write => libc::SHUT_WR,
            std::net::Shutdown::Both => libc::SHUT_RDWR,
        };
        // SAFETY: plain system call on our descriptor.
        cvt(unsafe { libc::shutdown(self.raw(), how) }).map(drop)
    }
}

/// The error for a carried datagram without a sender (never made: every
/// carried datagram records one).
fn no_sender() -> io::Error {
    io::Error::other("a carried datagram without its sender's address")
}

/// A new epoll instance (close-on-exec) watching `fd` for `EPOLLIN`,
/// level-triggered: it is readable exactly while `fd` is (polling an epoll
/// instance asks each of its ready items again).
fn watch_readable(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: plain system call without pointers.
    let ep = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: a new descriptor nobody else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    let mut event = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: `event` is a live local the call only reads.
    cvt(unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) })?;
    Ok(ep)
}

/// Reads and clears the socket's pending error (`SO_ERROR`).
pub(crate) fn take_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: writes one c_int into the live local.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on our own descriptor, no pointers.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let new = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if new != flags {
        // SAFETY: as above.
        cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, new) })?;
    }
    Ok(())
}

/// Runs `f` on a std view of `fd` (for socket options and addresses)
/// without taking ownership.
pub(crate) fn with_std<S: FromRawFd, R>(fd: RawFd, f: impl FnOnce(&S) -> R) -> R {
    // SAFETY: the view is never dropped (ManuallyDrop), so `fd` stays owned
    // by its socket, which outlives this call.
    let view = std::mem::ManuallyDrop::new(unsafe { S::from_raw_fd(fd) });
    f(&view)
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket").field("fd", &self.raw()).finish()
    }
}

/// Sets socket option `name` at `level` to `value` (`setsockopt`).
pub(crate) fn set_option<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: T,
) -> io::Result<()> {
    // SAFETY: setsockopt reads `size_of::<T>()` bytes from the live local.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Reads socket option `name` at `level` (`getsockopt`); `T` must be a
/// plain C type for which all-zero bytes are a valid value.
pub(crate) fn option<T: Copy>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    // SAFETY: the callers use C integer and struct types, for which
    // all-zero bytes are valid.
    let mut value: T = unsafe { zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live local.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut T).cast(), &mut len) })?;
    Ok(value)
}

/// A datagram received into an owned buffer (`got`, outcome `r`), copied to
/// the start of the caller's slice `buf`; the slice forms of the datagram
/// sockets' receives. `got` never holds more than `buf.len()` bytes (it was
/// made with that capacity).
pub(crate) fn copy_received<A>(
    r: io::Result<(usize, A)>,
    got: &[u8],
    buf: &mut [u8],
) -> io::Result<(usize, A)> {
    let (n, from) = r?;
    buf[..n].copy_from_slice(&got[..n]);
    Ok((n, from))
}
