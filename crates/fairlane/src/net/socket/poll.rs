//! Poll-based readiness and non-blocking attempts of [`Socket`]
//! (`poll_read_ready`, `poll_recv` and the like), peeks, and vectored
//! non-blocking I/O.
//!
//! A poll-based wait keeps its io_uring `POLL_ADD` in the socket between
//! polls (one per direction), so only the task that polled a direction last
//! is woken, as with tokio's `poll_*` methods.

use std::io;
use std::task::{Context, Poll};

use super::sys::cvt_size;
use super::Socket;
use crate::io::reactor::Direction;
use crate::io::unix::readiness;
use crate::io::{Interest, Ready};

impl Socket {
    /// Polls for readiness in `dir` without doing any I/O. With io_uring,
    /// an outcome that dropped reads left counts as readable.
    pub(crate) fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
    ) -> Poll<io::Result<Ready>> {
        let interest = match dir {
            Direction::Read => Interest::READABLE,
            Direction::Write => Interest::WRITABLE,
        };
        if dir == Direction::Read
            && self
                .carry
                .as_ref()
                .is_some_and(|c| c.is_busy() && c.has_received())
        {
            return Poll::Ready(Ok(Ready::READABLE));
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        readiness::poll_wait(
            &self.driver,
            self.reg.as_ref(),
            &mut kept[dir as usize],
            self.raw(),
            interest,
            cx,
        )
    }

    /// Runs the non-blocking `attempt` until it does not return
    /// `WouldBlock`; in between, waits for readiness in `dir` (the
    /// fallback backend's registration, or the `POLL_ADD` kept in the
    /// socket with io_uring).
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        attempt: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        match &self.reg {
            Some(reg) => reg.poll_io(cx, dir, attempt),
            None => {
                let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
                readiness::poll_io_kept(
                    &mut kept[dir as usize],
                    &self.driver,
                    self.raw(),
                    dir,
                    cx,
                    attempt,
                )
            }
        }
    }

    /// Stream peek into `out` without waiting: what the next read would
    /// return, left in place. Bytes (or the end of the stream, or an
    /// error) that dropped reads left come first, as for reads.
    pub(crate) fn try_peek(&self, out: &mut [u8]) -> io::Result<usize> {
        self.try_recv_with(out, true)
    }

    /// Waits until the stream has something to read and peeks at it (see
    /// [`try_peek`](Self::try_peek)).
    pub(crate) async fn peek(&self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if out.is_empty() {
                return Ok(0);
            }
            self.readable().await?;
            match self.try_peek(out) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
        }
    }

    /// Poll-based [`peek`](Self::peek).
    pub(crate) fn poll_peek(
        &self,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_io(cx, Direction::Read, || self.try_peek(out))
    }

    /// Stream read into the buffers of `bufs`, in order, without waiting
    /// (as [`try_recv`](Self::try_recv)).
    pub(crate) fn try_recv_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
        }
        if let Some(e) = self.carried_reads_unknown() {
            return Err(e);
        }
        if self
            .carry
            .as_ref()
            .is_some_and(|c| c.is_busy() && c.has_received())
        {
            // What dropped reads left comes first: into the first
            // non-empty buffer (a short read, as `readv` may make).
            let first = bufs
                .iter_mut()
                .find(|b| !b.is_empty())
                .expect("checked above");
            return self.try_recv(first);
        }
        // SAFETY: all-zero bytes are a valid `msghdr`.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = bufs.as_mut_ptr().cast();
        msg.msg_iovlen = bufs.len() as _;
        // `MSG_DONTWAIT`: io_uring sockets are in blocking mode.
        // SAFETY: `IoSliceMut` has the layout of `iovec` on Unix; each
        // describes a live, writable buffer of the caller's; `msg` is a
        // live local.
        cvt_size(unsafe { libc::recvmsg(self.raw(), &mut msg, libc::MSG_DONTWAIT) })
    }

    /// Stream write of the buffers of `bufs`, in order, without waiting
    /// (as [`try_send`](Self::try_send)).
    pub(crate) fn try_send_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        if self.has_carried_writes() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        // SAFETY: all-zero bytes are a valid `msghdr`.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        // `sendmsg` only reads the buffers.
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len() as _;
        // SAFETY: `IoSlice` has the layout of `iovec` on Unix; each
        // describes a live buffer of the caller's; `msg` is a live local.
        cvt_size(unsafe {
            libc::sendmsg(self.raw(), &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        })
    }
}
