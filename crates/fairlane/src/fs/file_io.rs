//! [`File`]'s I/O traits: futures-io's `AsyncRead`, `AsyncWrite` and
//! `AsyncSeek`, and with the `tokio-io` feature tokio's. All are the
//! [`Cursor`](super::cursor::Cursor)'s steps.

use std::io::{self, IoSlice, SeekFrom};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::File;

impl futures_io::AsyncRead for File {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let (cursor, file, max) = self.get_mut().cursor_mut();
        let want = out.len();
        cursor.poll_read(cx, file, max, want, |bytes| {
            out[..bytes.len()].copy_from_slice(bytes)
        })
    }
}

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncRead for File {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let (cursor, file, max) = self.get_mut().cursor_mut();
        let want = buf.remaining();
        cursor
            .poll_read(cx, file, max, want, |bytes| buf.put_slice(bytes))
            .map_ok(drop)
    }
}

/// One write trait (futures-io's and tokio's share their shape; `$close`
/// is the name of their shutdown method, which for a file is a flush).
macro_rules! impl_write {
    ($(#[$attr:meta])* $trait:path, $close:ident) => {
        $(#[$attr])*
        impl $trait for File {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                let (cursor, file, max) = self.get_mut().cursor_mut();
                cursor.poll_write(cx, file, max, &[buf])
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let (cursor, file, max) = self.get_mut().cursor_mut();
                cursor.poll_write(cx, file, max, bufs)
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.get_mut().cursor_mut().0.poll_flush(cx)
            }

            fn $close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.get_mut().cursor_mut().0.poll_flush(cx)
            }
        }
    };
}

impl_write!(futures_io::AsyncWrite, poll_close);
impl_write!(
    #[cfg(feature = "tokio-io")]
    tokio::io::AsyncWrite,
    poll_shutdown
);

impl futures_io::AsyncSeek for File {
    fn poll_seek(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        pos: SeekFrom,
    ) -> Poll<io::Result<u64>> {
        let (cursor, file, _) = self.get_mut().cursor_mut();
        cursor.poll_seek(cx, file, pos)
    }
}

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncSeek for File {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        let (cursor, file, _) = self.get_mut().cursor_mut();
        cursor.start_seek(file, position)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        self.get_mut().cursor_mut().0.poll_complete(cx)
    }
}
