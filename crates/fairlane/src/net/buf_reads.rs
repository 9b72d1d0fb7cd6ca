//! tokio's `BufMut` forms of the reads: `try_read_buf` on the streams and
//! the pipe receiver, `try_recv_buf`, `try_recv_buf_from`, `recv_buf` and
//! `recv_buf_from` on the datagram sockets. Each reads into the unfilled
//! part of a [`bytes::BufMut`] (zeroed first: the slice forms hand the
//! kernel initialised bytes) and advances it by what was read.

use std::io;
use std::net::SocketAddr;
use std::os::unix::net::SocketAddr as UnixSocketAddr;

use bytes::BufMut;

use super::unix::pipe::Receiver;
use super::{TcpStream, UdpSocket, UnixDatagram, UnixStream};

/// At most this many unfilled bytes are offered to one read: zeroing them
/// costs in proportion.
const MAX_CHUNK: usize = 64 * 1024;

/// Runs `read` on the start of `buf`'s unfilled part and advances `buf` by
/// what it read.
fn read_into<B: BufMut + ?Sized, R>(
    buf: &mut B,
    read: impl FnOnce(&mut [u8]) -> io::Result<(usize, R)>,
) -> io::Result<(usize, R)> {
    let (n, rest) = read(unfilled(buf))?;
    // SAFETY: `unfilled` initialised the bytes it offered, and a read
    // returns at most the length of the slice it was given.
    unsafe { buf.advance_mut(n) };
    Ok((n, rest))
}

/// The start of `buf`'s unfilled part (at most `MAX_CHUNK` bytes), zeroed.
fn unfilled<B: BufMut + ?Sized>(buf: &mut B) -> &mut [u8] {
    let chunk = buf.chunk_mut();
    let len = chunk.len().min(MAX_CHUNK);
    let ptr = chunk.as_mut_ptr();
    // SAFETY: `chunk` is `chunk.len()` writable bytes at `ptr`, owned by
    // `buf`, which the returned slice borrows mutably; the first `len` of
    // them are written (zeroed) before the slice is made, so it only
    // covers initialised bytes.
    unsafe {
        std::ptr::write_bytes(ptr, 0, len);
        std::slice::from_raw_parts_mut(ptr, len)
    }
}

/// `try_read` into a `BufMut`, for a stream type.
macro_rules! try_read_buf {
    ($t:ty, $example:literal) => {
        impl $t {
            /// As `try_read`, into the unfilled part of `buf` (a
            /// `bytes::BufMut`, such as a `Vec<u8>` or `BytesMut`), which
            /// is advanced by what was read, as tokio's method of that
            /// name.
            ///
            /// # Example
            #[doc = $example]
            pub fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
                read_into(buf, |slice| self.try_read(slice).map(|n| (n, ()))).map(|(n, ())| n)
            }
        }
    };
}

try_read_buf!(
    TcpStream,
    "```\nfn f(s: &fairlane::net::TcpStream) -> std::io::Result<Vec<u8>> {\n    let mut buf = Vec::with_capacity(4096);\n    s.try_read_buf(&mut buf)?;\n    Ok(buf)\n}\n```"
);
try_read_buf!(
    UnixStream,
    "```\nfn f(s: &fairlane::net::UnixStream) -> std::io::Result<Vec<u8>> {\n    let mut buf = Vec::with_capacity(4096);\n    s.try_read_buf(&mut buf)?;\n    Ok(buf)\n}\n```"
);
try_read_buf!(
    Receiver,
    "```\nfn f(rx: &fairlane::net::unix::pipe::Receiver) -> std::io::Result<Vec<u8>> {\n    let mut buf = Vec::with_capacity(4096);\n    rx.try_read_buf(&mut buf)?;\n    Ok(buf)\n}\n```"
);

/// The `BufMut` receives of a datagram socket type whose peer addresses
/// are `$addr`.
macro_rules! recv_buf {
    ($t:ty, $addr:ty, $example:literal) => {
        impl $t {
            /// As `try_recv`, into the unfilled part of `buf` (a
            /// `bytes::BufMut`), which is advanced by the datagram's
            /// length, as tokio's method of that name. A datagram longer
            /// than the unfilled part is cut to it.
            ///
            /// # Example
            #[doc = $example]
            pub fn try_recv_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
                read_into(buf, |slice| self.try_recv(slice).map(|n| (n, ()))).map(|(n, ())| n)
            }

            /// As `try_recv_from`, into the unfilled part of `buf`, as
            /// tokio's method of that name.
            ///
            /// # Example
            /// See [`try_recv_buf`](Self::try_recv_buf).
            /// ```
            #[doc = concat!("fn f(s: &fairlane::net::", stringify!($t), ", buf: &mut Vec<u8>) -> bool {")]
            ///     s.try_recv_buf_from(buf).is_ok()
            /// }
            /// ```
            pub fn try_recv_buf_from<B: BufMut>(&self, buf: &mut B) -> io::Result<(usize, $addr)> {
                read_into(buf, |slice| self.try_recv_from(slice))
            }

            /// As `recv`, into the unfilled part of `buf`, which is
            /// advanced by the datagram's length, as tokio's method of
            /// that name.
            ///
            /// # Example
            /// See [`try_recv_buf`](Self::try_recv_buf).
            /// ```
            #[doc = concat!("async fn f(s: &fairlane::net::", stringify!($t), ") -> std::io::Result<Vec<u8>> {")]
            ///     let mut buf = Vec::with_capacity(1500);
            ///     s.recv_buf(&mut buf).await?;
            ///     Ok(buf)
            /// }
            /// ```
            pub async fn recv_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
                let n = self.recv(unfilled(buf)).await?;
                // SAFETY: as in `read_into`.
                unsafe { buf.advance_mut(n) };
                Ok(n)
            }

            /// As `recv_from`, into the unfilled part of `buf`, as tokio's
            /// method of that name.
            ///
            /// # Example
            /// See [`try_recv_buf`](Self::try_recv_buf).
            /// ```
            #[doc = concat!("async fn f(s: &fairlane::net::", stringify!($t), ") -> std::io::Result<Vec<u8>> {")]
            ///     let mut buf = Vec::with_capacity(1500);
            ///     let (_n, _from) = s.recv_buf_from(&mut buf).await?;
            ///     Ok(buf)
            /// }
            /// ```
            pub async fn recv_buf_from<B: BufMut>(&self, buf: &mut B) -> io::Result<(usize, $addr)> {
                let (n, from) = self.recv_from(unfilled(buf)).await?;
                // SAFETY: as in `read_into`.
                unsafe { buf.advance_mut(n) };
                Ok((n, from))
            }
        }
    };
}

recv_buf!(
    UdpSocket,
    SocketAddr,
    "```\n# let rt = fairlane::Runtime::builder().processors(1).build()?;\n# rt.block_on(async {\nlet s = fairlane::net::UdpSocket::bind(\"127.0.0.1:0\").await?;\ns.send_to(b\"ping\", s.local_addr()?).await?;\nlet mut buf = Vec::with_capacity(64);\nlet n = s.recv_buf(&mut buf).await?;\nassert_eq!(&buf[..n], b\"ping\");\n# Ok::<(), std::io::Error>(()) })?;\n# Ok::<(), std::io::Error>(())\n```"
);
recv_buf!(
    UnixDatagram,
    UnixSocketAddr,
    "```\n# let rt = fairlane::Runtime::builder().processors(1).build()?;\n# rt.block_on(async {\nlet (a, b) = fairlane::net::UnixDatagram::pair()?;\na.send(b\"ping\").await?;\nlet mut buf = Vec::with_capacity(64);\nlet n = b.recv_buf(&mut buf).await?;\nassert_eq!(&buf[..n], b\"ping\");\n# Ok::<(), std::io::Error>(()) })?;\n# Ok::<(), std::io::Error>(())\n```"
);
