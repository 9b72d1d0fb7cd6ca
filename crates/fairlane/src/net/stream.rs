//! `futures-io` adapters for the stream sockets. In the fallback backend
//! they call the non-blocking system calls on the caller's slice directly;
//! with io_uring, whose operations need owned buffers, reads go through an
//! internal buffer that is refilled by one `recv` at a time, and writes are
//! copied into an internal buffer that is sent in the background (its error,
//! if any, is reported by the next write, flush or close).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::socket::Socket;

/// Bytes the internal read buffer asks the kernel for at a time.
const READ_CHUNK: usize = 16 * 1024;
/// Most bytes one `poll_write` takes into the internal buffer.
const WRITE_CHUNK: usize = 64 * 1024;

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

enum ReadSide {
    Idle { buf: Vec<u8>, pos: usize },
    Busy(BoxFut<(io::Result<usize>, Vec<u8>)>),
}

enum WriteSide {
    Idle(Vec<u8>),
    Busy(BoxFut<(io::Result<()>, Vec<u8>)>),
}

/// The state of a stream's `AsyncRead`/`AsyncWrite` implementation.
pub(crate) struct Compat {
    read: ReadSide,
    write: WriteSide,
}

// SAFETY: every method of `Compat` takes `&mut self`, and it has no field
// or method reachable through `&Compat`: a shared reference gives access to
// nothing, so sharing one between threads cannot race (the argument of
// `std::sync::Exclusive`). The streams holding it are thus `Sync`, which
// their `&self` owned-buffer methods need inside spawned tasks.
unsafe impl Sync for Compat {}

impl Compat {
    pub(crate) fn new() -> Compat {
        Compat {
            read: ReadSide::Idle {
                buf: Vec::new(),
                pos: 0,
            },
            write: WriteSide::Idle(Vec::new()),
        }
    }

    /// Whether the adapters hold nothing: no buffered read bytes and no
    /// operation under way.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(&self.read, ReadSide::Idle { buf, pos } if *pos >= buf.len())
            && matches!(self.write, WriteSide::Idle(_))
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
            match &mut self.read {
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
                    self.read = ReadSide::Busy(Box::pin(async move { sock.recv(buf).await }));
                }
                ReadSide::Busy(op) => {
                    let (result, buf) = std::task::ready!(op.as_mut().poll(cx));
                    self.read = ReadSide::Idle { buf, pos: 0 };
                    match result {
                        Ok(0) => return Poll::Ready(Ok(0)),
                        Ok(_) => {}
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
            }
        }
    }

    /// Waits for the background write, if any; its error comes back.
    fn poll_write_done(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let WriteSide::Busy(op) = &mut self.write {
            let (result, buf) = std::task::ready!(op.as_mut().poll(cx));
            self.write = WriteSide::Idle(buf);
            result?;
        }
        Poll::Ready(Ok(()))
    }

    pub(crate) fn poll_write(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !sock.is_uring() {
            return sock.poll_send_slice(cx, data);
        }
        std::task::ready!(self.poll_write_done(cx))?;
        let WriteSide::Idle(buf) = &mut self.write else {
            unreachable!("poll_write_done leaves the write side idle")
        };
        let mut buf = std::mem::take(buf);
        buf.clear();
        let n = data.len().min(WRITE_CHUNK);
        buf.extend_from_slice(&data[..n]);
        let sock = sock.clone();
        self.write = WriteSide::Busy(Box::pin(async move { sock.send_all(buf).await }));
        // Start the send now, so that it runs while the caller goes on.
        if let Poll::Ready(Err(e)) = self.poll_write_done(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    pub(crate) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_write_done(cx)
    }

    pub(crate) fn poll_close(
        &mut self,
        sock: &Arc<Socket>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_write_done(cx))?;
        Poll::Ready(sock.shutdown(std::net::Shutdown::Write))
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
/// features, tokio's `AsyncRead` and hyper's `Read`) for a type with fields `sock: Arc<Socket>` and
/// `compat: Compat`.
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
/// with fields `sock: Arc<Socket>` and `compat: Compat`.
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
                self.get_mut().compat.poll_flush(cx)
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
