//! Datagram operations of [`Socket`]: sends to an address, receives with
//! the sender's address, and peeks.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;

use io_uring::{opcode, types};

use super::sys::cvt_size;
use super::{SockAddrBuf, Socket};
use crate::io::carry::{Keep, Received};
use crate::io::reactor::Direction;
use crate::io::uring::Op;
use crate::io::{submit_and_wait, IoBuf, IoBufMut};

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

/// What a dropped `recvmsg`'s buffer and header hold.
fn received_datagram<B: IoBufMut>((mut buf, mut m): (B, Box<MsgBox>), n: usize) -> Received {
    m.addr.len = m.hdr.msg_namelen;
    // SAFETY: as in `received_bytes`.
    let bytes = unsafe { std::slice::from_raw_parts(buf.stable_mut_ptr(), n) };
    Received::datagram(bytes.to_vec(), m.addr)
}

impl Socket {
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
        self.try_datagram(out, false)
    }

    /// As [`try_recv_from`](Self::try_recv_from), leaving the datagram
    /// queued (in the socket or in the carry).
    pub(crate) fn try_peek_from(&self, out: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, from) = self.try_datagram(out, true)?;
        Ok((n, from.ip_addr()?))
    }

    /// One datagram received (or, with `peek`, peeked at) into `out`
    /// without waiting, with its sender; one that a dropped receive left
    /// comes first.
    fn try_datagram(&self, out: &mut [u8], peek: bool) -> io::Result<(usize, SockAddrBuf)> {
        if let Some(e) = self.carried_reads_unknown() {
            return Err(e);
        }
        if let Some(carry) = self.carry.as_ref().filter(|c| c.is_busy()) {
            // SAFETY: `out` is a live, writable slice of `out.len()` bytes.
            if let Some(got) = unsafe { carry.take_datagram(out.as_mut_ptr(), out.len(), peek) } {
                let (n, from) = got?;
                return Ok((n, from.ok_or_else(no_sender)?));
            }
        }
        let flags = libc::MSG_DONTWAIT | if peek { libc::MSG_PEEK } else { 0 };
        let mut sa = SockAddrBuf::empty();
        // SAFETY: `out` is a live, writable slice; `sa` a boxed storage of
        // `sa.len` bytes.
        let n = cvt_size(unsafe {
            libc::recvfrom(
                self.raw(),
                out.as_mut_ptr().cast(),
                out.len(),
                flags,
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
}

/// The error for a carried datagram without a sender (never made: every
/// carried datagram records one).
fn no_sender() -> io::Error {
    io::Error::other("a carried datagram without its sender's address")
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
