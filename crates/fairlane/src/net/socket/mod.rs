//! The socket under every `net` type: a descriptor, the runtime's driver,
//! and (fallback backend) its poller registration; every operation in both
//! backends' forms.
//!
//! io_uring sockets stay in blocking mode (the ring makes them
//! asynchronous, and a non-blocking descriptor would make some operations
//! fail with `EAGAIN` instead of waiting); fallback sockets are
//! non-blocking and wait for readiness.

mod connect;
mod datagram;
mod poll;
mod sockaddr;
mod stream;
mod sys;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use crate::io::carry::Carry;
use crate::io::driver::Driver;
use crate::io::reactor::Registration;
use crate::io::unix::readiness;
use crate::io::uring;
use crate::io::{current_driver, Interest, IoBackend, Ready};

use self::connect::watch_readable;
pub(crate) use self::datagram::copy_received;
pub(crate) use self::sockaddr::SockAddrBuf;
pub(crate) use self::sys::{cvt, option, set_nonblocking, set_option, take_error, with_std};

/// A socket of a fairlane runtime.
pub(crate) struct Socket {
    /// io_uring: the `POLL_ADD` a poll-based wait (`poll_ready`,
    /// `poll_io`) keeps between polls, per direction (read, write).
    /// Declared before `fd`: dropping one cancels it before the descriptor
    /// closes.
    kept: Mutex<[readiness::KeptPoll; 2]>,
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
            kept: Mutex::new([None, None]),
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
        let (kept, fd, driver, carry, accept_watch) = unsafe {
            (
                std::ptr::read(&this.kept),
                std::ptr::read(&this.fd),
                std::ptr::read(&this.driver),
                std::ptr::read(&this.carry),
                std::ptr::read(&this.accept_watch),
            )
        };
        drop((kept, driver, carry, accept_watch));
        Ok(fd)
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub(super) fn reg(&self) -> &Registration {
        self.reg.as_ref().expect("fallback sockets are registered")
    }

    pub(super) fn uring(&self) -> bool {
        self.reg.is_none()
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
    pub(super) fn carried_reads_unknown(&self) -> Option<io::Error> {
        let carry = self.carry.as_ref()?;
        (carry.is_busy() && carry.reads_in_flight()).then(|| io::ErrorKind::WouldBlock.into())
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

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket").field("fd", &self.raw()).finish()
    }
}
