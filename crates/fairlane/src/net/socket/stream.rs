//! Stream operations of [`Socket`]: receives and sends of bytes, owned
//! and borrowed, with io_uring's carry for dropped operations.

use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::sys::cvt_size;
use super::Socket;
use crate::io::carry::{Carry, Keep, Received};
use crate::io::reactor::Direction;
use crate::io::unix::readiness;
use crate::io::uring::Op;
use crate::io::{IoBuf, IoBufMut};

/// A submitted operation, or the error with the resources back.
type Submitted<T> = Result<Op<T>, (io::Error, T)>;

/// What a dropped stream read's buffer holds.
fn received_bytes<B: IoBufMut>(mut buf: B, n: usize) -> Received {
    // SAFETY: the kernel wrote `n` bytes (at most the `bytes_total` it was
    // given) from the buffer's start, and the buffer is alive here.
    let bytes = unsafe { std::slice::from_raw_parts(buf.stable_mut_ptr(), n) };
    Received::bytes(bytes.to_vec())
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
    pub(super) async fn send_when_writable<B: IoBuf>(
        &self,
        buf: B,
        start: usize,
    ) -> (io::Result<usize>, B) {
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
    pub(super) async fn send_carried(&self, carry: &Arc<Carry>) -> io::Result<()> {
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

    /// Stream read into `out` without waiting: bytes (or the end of the
    /// stream, or an error) that dropped reads left come first.
    pub(crate) fn try_recv(&self, out: &mut [u8]) -> io::Result<usize> {
        self.try_recv_with(out, false)
    }

    /// [`try_recv`](Self::try_recv), or with `peek` a look that leaves what
    /// it reports in place (in the carry and in the kernel).
    pub(super) fn try_recv_with(&self, out: &mut [u8], peek: bool) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0); // as in `recv`
        }
        if let Some(e) = self.carried_reads_unknown() {
            return Err(e);
        }
        if let Some(carry) = self.carry.as_ref().filter(|c| c.is_busy()) {
            let (ptr, len) = (out.as_mut_ptr(), out.len());
            // SAFETY: `out` is a live, writable slice of `len` bytes at `ptr`.
            let got = unsafe {
                if peek {
                    carry.peek_bytes(ptr, len)
                } else {
                    carry.take_bytes(ptr, len)
                }
            };
            if let Some(got) = got {
                return got;
            }
        }
        let flags = if peek {
            libc::MSG_PEEK | libc::MSG_DONTWAIT
        } else {
            libc::MSG_DONTWAIT
        };
        // SAFETY: `out` is a live, writable slice.
        cvt_size(unsafe { libc::recv(self.raw(), out.as_mut_ptr().cast(), out.len(), flags) })
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
}
