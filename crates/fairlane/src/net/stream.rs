//! `futures-io` adapters for the stream sockets (and tokio's and hyper's
//! traits, which share them).
//!
//! Writes, in both backends, send from the caller's slice with one
//! non-blocking `send` and report what the kernel took; while it takes
//! nothing, the write is pending on the socket's writability (with
//! io_uring, a one-shot `POLL_ADD` kept here between polls). No byte waits
//! in the runtime, so a write reported done is in the kernel, a flush has
//! nothing to wait for, a shutdown is immediate (it never waits for the
//! peer to read), and a write future dropped while pending has sent
//! nothing. With io_uring, what dropped owned writes (`write_owned`) left to
//! send goes first.
//!
//! Reads: in the fallback backend the non-blocking `recv` into the caller's
//! slice; with io_uring, whose receives need owned buffers, through an
//! internal buffer refilled by one `recv` at a time (a read dropped while
//! that is in flight loses nothing: its bytes wait here, or in the socket's
//! carry if the stream is gone).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::socket::Socket;
use crate::io::unix::readiness::KeptPoll;

/// Bytes the internal read buffer asks the kernel for at a time.
const READ_CHUNK: usize = 16 * 1024;

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The read side of a stream's trait implementations: with io_uring, the
/// internal buffer and the `recv` that refills it.
pub(crate) enum ReadSide {
    Idle { buf: Vec<u8>, pos: usize },
    Busy(BoxFut<(io::Result<usize>, Vec<u8>)>),
}

/// The write side's state between polls.
#[derive(Default)]
pub(crate) struct WriteSide {
    /// io_uring: the `POLL_ADD` for writability of a write that found the
    /// socket full (it holds no data). The streams declare their `Compat`
    /// before their socket, so that it is cancelled before the descriptor
    /// can close.
    wait: KeptPoll,
    /// io_uring: sending what dropped owned writes left, which goes before
    /// any byte written here.
    carried: Option<BoxFut<io::Result<()>>>,
}

// SAFETY: every method of `ReadSide` and `WriteSide` takes `&mut self`, and
// they have no field or method reachable through a shared reference: one
// gives access to nothing, so sharing it between threads cannot race (the
// argument of `std::sync::Exclusive`). The streams and halves holding them
// are thus `Sync`, which their `&self` methods need inside spawned tasks.
unsafe impl Sync for ReadSide {}
// SAFETY: as for `ReadSide` above.
unsafe impl Sync for WriteSide {}

/// The state of a stream's `AsyncRead`/`AsyncWrite` implementation.
pub(crate) struct Compat {
    read: ReadSide,
    write: WriteSide,
}

impl Compat {
    pub(crate) fn new() -> Compat {
        Compat {
            read: ReadSide::new(),
            write: WriteSide::default(),
        }
    }

    /// Whether the adapters hold nothing: no buffered read bytes and no
    /// operation under way but a wait for writability (which holds no
    /// data and is cancelled with the adapters).
    pub(crate) fn is_idle(&self) -> bool {
        matches!(&self.read, ReadSide::Idle { buf, pos } if *pos >= buf.len())
            && self.write.carried.is_none()
    }

    /// A stream's adapters put back together from those of its owned
    /// halves.
    pub(crate) fn join(read: ReadSide, write: WriteSide) -> Compat {
        Compat { read, write }
    }

    /// The two sides, for a stream's owned halves (what the read side
    /// buffered goes on to the read half).
    pub(crate) fn into_halves(self) -> (ReadSide, WriteSide) {
        (self.read, self.write)
    }

    /// Both sides, for a stream's borrowed halves.
    pub(crate) fn sides(&mut self) -> (&mut ReadSide, &mut WriteSide) {
        (&mut self.read, &mut self.write)
    }

    pub(crate) fn poll_read(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.read.poll_read(sock, cx, out)
    }

    pub(crate) fn poll_write(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write.poll_write(sock, cx, data)
    }

    pub(crate) fn poll_flush(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        self.write.poll_flush(sock, cx)
    }

    pub(crate) fn poll_close(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        self.write.poll_close(sock, cx)
    }
}

impl ReadSide {
    pub(crate) fn new() -> ReadSide {
        ReadSide::Idle {
            buf: Vec::new(),
            pos: 0,
        }
    }

    pub(crate) fn poll_read(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if !sock.is_uring() {
            return sock.poll_recv_slice(cx, out);
        }
        if out.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            match self {
                ReadSide::Idle { buf, pos } if *pos < buf.len() => {
                    let n = (buf.len() - *pos).min(out.len());
                    out[..n].copy_from_slice(&buf[*pos..*pos + n]);
                    *pos += n;
                    return Poll::Ready(Ok(n));
                }
                ReadSide::Idle { buf, .. } => {
                    let mut buf = std::mem::take(buf);
                    buf.clear();
                    buf.reserve(READ_CHUNK);
                    let sock = sock.clone();
                    *self = ReadSide::Busy(Box::pin(async move { sock.recv(buf).await }));
                }
                ReadSide::Busy(op) => {
                    let (result, buf) = std::task::ready!(op.as_mut().poll(cx));
                    *self = ReadSide::Idle { buf, pos: 0 };
                    match result {
                        Ok(0) => return Poll::Ready(Ok(0)),
                        Ok(_) => {}
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
            }
        }
    }
}

impl WriteSide {
    /// io_uring: sends what dropped owned writes left, if anything (at
    /// once `Ready` otherwise, and in the fallback backend).
    fn poll_carried(&mut self, sock: &Arc<Socket>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.carried.is_none() {
            if !sock.has_carried_writes() {
                return Poll::Ready(Ok(()));
            }
            let sock = sock.clone();
            self.carried = Some(Box::pin(async move { sock.flush_carried().await }));
        }
        let carried = self.carried.as_mut().expect("set above");
        let result = std::task::ready!(carried.as_mut().poll(cx));
        self.carried = None;
        Poll::Ready(result)
    }

    pub(crate) fn poll_write(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_carried(sock, cx))?;
        sock.poll_send_slice(cx, &mut self.wait, data)
    }

    /// Nothing waits in the runtime but what dropped owned writes left.
    pub(crate) fn poll_flush(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_carried(sock, cx)
    }

    /// Shuts the write side down once what dropped owned writes left is
    /// sent; immediate otherwise (bytes already written are in the kernel,
    /// which sends them before the end of the stream). A connection the
    /// peer already reset (`NotConnected`) counts as shut down, as with
    /// tokio's `poll_shutdown`.
    pub(crate) fn poll_close(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_carried(sock, cx))?;
        Poll::Ready(match sock.shutdown(std::net::Shutdown::Write) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        })
    }
}

/// A stream's descriptor for `into_std`, or its parts back if the adapters
/// or the socket hold data or operations (see [`Socket::into_fd`]).
pub(crate) fn stream_into_fd(
    sock: Arc<Socket>,
    compat: Compat,
) -> Result<std::os::fd::OwnedFd, (Arc<Socket>, Compat)> {
    if !compat.is_idle() {
        return Err((sock, compat));
    }
    let sock = Arc::try_unwrap(sock).map_err(|sock| (sock, Compat::new()))?;
    sock.into_fd().map_err(|sock| (Arc::new(sock), compat))
}

/// Implements `futures_io::AsyncRead` (and, with the `tokio-io` and `hyper`
/// features, tokio's `AsyncRead` and hyper's `Read`) for a type with fields
/// `sock` (an `Arc<Socket>` or a reference to one) and `compat` (a
/// `Compat`, or a `ReadSide` or a reference to one).
macro_rules! impl_async_read {
    ($t:ty) => {
        impl futures_io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let this = self.get_mut();
                this.compat.poll_read(&this.sock, cx, buf)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let this = self.get_mut();
                let out = buf.initialize_unfilled();
                let n = std::task::ready!(this.compat.poll_read(&this.sock, cx, out))?;
                buf.advance(n);
                std::task::Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Read for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                mut buf: hyper::rt::ReadBufCursor<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let this = self.get_mut();
                let out = buf.initialize_unfilled();
                let n = std::task::ready!(this.compat.poll_read(&this.sock, cx, out))?;
                // SAFETY: the first `n` unfilled bytes were initialised
                // above and then written by the read.
                unsafe { buf.advance(n) };
                std::task::Poll::Ready(Ok(()))
            }
        }
    };
}

/// Implements `futures_io::AsyncWrite` (and, with the `tokio-io` and
/// `hyper` features, tokio's `AsyncWrite` and hyper's `Write`) for a type
/// with fields `sock` (as for [`impl_async_read`]) and `compat` (a
/// `Compat`, or a `WriteSide` or a reference to one).
macro_rules! impl_async_write {
    ($t:ty) => {
        $crate::net::stream::impl_write_trait!($t, futures_io::AsyncWrite, poll_close);
        $crate::net::stream::impl_write_trait!(
            #[cfg(feature = "tokio-io")]
            $t,
            tokio::io::AsyncWrite,
            poll_shutdown
        );
        $crate::net::stream::impl_write_trait!(
            #[cfg(feature = "hyper")]
            $t,
            hyper::rt::Write,
            poll_shutdown
        );
    };
}

/// One write trait (the three share their shape; `$close` is the name of
/// their shutdown method) for [`impl_async_write`].
macro_rules! impl_write_trait {
    ($(#[$attr:meta])* $t:ty, $trait:path, $close:ident) => {
        $(#[$attr])*
        impl $trait for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let this = self.get_mut();
                this.compat.poll_write(&this.sock, cx, buf)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let this = self.get_mut();
                this.compat.poll_flush(&this.sock, cx)
            }

            fn $close(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let this = self.get_mut();
                this.compat.poll_close(&this.sock, cx)
            }
        }
    };
}

/// Both of the above, for a stream.
macro_rules! impl_async_io {
    ($t:ty) => {
        $crate::net::stream::impl_async_read!($t);
        $crate::net::stream::impl_async_write!($t);
    };
}

pub(crate) use {impl_async_io, impl_async_read, impl_async_write, impl_write_trait};
