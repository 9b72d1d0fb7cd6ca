//! Connection setup of [`Socket`]: `accept` on listeners and `connect`.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::sys::{cvt, take_error};
use super::{SockAddrBuf, Socket};
use crate::io::reactor::Direction;
use crate::io::unix::readiness;
use crate::io::uring::Op;

impl Socket {
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
        let mut accept_now = || accept_now(fd, &mut addr);
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

    /// The poll-based form of [`accept`](Self::accept): `Pending` with
    /// `cx`'s waker registered while nobody waits to be accepted (with
    /// io_uring, a `POLL_ADD` on the listener's epoll instance kept between
    /// polls; only the task that polled last is woken).
    pub(crate) fn poll_accept(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<(OwnedFd, Box<SockAddrBuf>)>> {
        let fd = self.raw();
        let mut addr = SockAddrBuf::empty();
        let new = match &self.reg {
            Some(reg) => {
                std::task::ready!(reg.poll_io(cx, Direction::Read, || accept_now(fd, &mut addr)))?
            }
            None => {
                self.driver.check_live()?;
                let watch = self.accept_watch.as_ref().expect("listeners are watched");
                let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
                std::task::ready!(readiness::poll_io_kept(
                    &mut kept[Direction::Read as usize],
                    &self.driver,
                    watch.as_raw_fd(),
                    Direction::Read,
                    cx,
                    || accept_now(fd, &mut addr),
                ))?
            }
        };
        // SAFETY: a new descriptor nobody else owns.
        let new = unsafe { OwnedFd::from_raw_fd(new) };
        Poll::Ready(Ok((new, addr)))
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
}

/// A new epoll instance (close-on-exec) watching `fd` for `EPOLLIN`,
/// level-triggered: it is readable exactly while `fd` is (polling an epoll
/// instance asks each of its ready items again).
pub(super) fn watch_readable(fd: RawFd) -> io::Result<OwnedFd> {
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

/// One `accept4` on the non-blocking listener `fd` (close-on-exec,
/// non-blocking), the peer's address written to `addr`; a connection the
/// kernel dropped from the queue (`ECONNABORTED`) is skipped.
fn accept_now(fd: RawFd, addr: &mut SockAddrBuf) -> io::Result<RawFd> {
    loop {
        addr.len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `addr` is a storage of `addr.len` bytes, alive across the
        // call; accept4 writes at most that many and the length it used.
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
    }
}
