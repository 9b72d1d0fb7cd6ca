//! The owned-buffer methods of [`File`]: completion-based reads and writes
//! that take the buffer by value and hand it back with the result, at a
//! position (`*_at`, the cursor does not move) or at the cursor
//! (`*_owned`). With io_uring each is a ring operation on the caller's
//! buffer, with no copy into an internal one.
//!
//! The cursor methods take turns with the file's other `&self` methods
//! and first wait for the background operation of the I/O traits (a
//! write's error is returned by the next write); bytes read ahead by
//! `AsyncRead` are handed out first by the reads and moved back over by
//! the writes, so both kinds of call can be mixed on one file.

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use io_uring::{opcode, types};

use super::rw::{self, At};
use super::File;
use crate::io::driver::Driver;
use crate::io::{current_driver, submit_and_wait, IoBackend, IoBuf, IoBufMut};

impl File {
    /// Reads into `buf` (from its start, up to its capacity) from file
    /// position `pos`. `Ok(0)` at the end of the file; a buffer without
    /// room (zero capacity) also reads `Ok(0)`, at once, which looks the
    /// same as the end of the file (as with tokio), so give it capacity.
    ///
    /// # Errors
    /// The operating system's; `InvalidInput` for a position from 2^63 on.
    ///
    /// # Example
    /// See [`File`].
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<Vec<u8>> {
    ///     let (n, buf) = file.read_at(Vec::with_capacity(4096), 0).await;
    ///     n.map(|_| buf)
    /// }
    /// ```
    pub async fn read_at<B: IoBufMut>(&self, buf: B, pos: u64) -> (io::Result<usize>, B) {
        let driver = match current_driver() {
            Ok(driver) => driver,
            Err(e) => return (Err(e), buf),
        };
        let len = buf.bytes_total();
        rw::read_some(&driver, &self.std, buf, len, At::Pos(pos)).await
    }

    /// Writes some of `buf`'s bytes at file position `pos`; how many is the
    /// result.
    ///
    /// # Errors
    /// As [`read_at`](Self::read_at).
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<usize> {
    ///     file.write_at(b"data".to_vec(), 0).await.0
    /// }
    /// ```
    pub async fn write_at<B: IoBuf>(&self, buf: B, pos: u64) -> (io::Result<usize>, B) {
        let driver = match current_driver() {
            Ok(driver) => driver,
            Err(e) => return (Err(e), buf),
        };
        rw::write_some(&driver, &self.std, buf, 0, At::Pos(pos)).await
    }

    /// Writes all of `buf`'s bytes at `pos`.
    ///
    /// # Errors
    /// As [`read_at`](Self::read_at); `WriteZero` if the file takes no more.
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<()> {
    ///     file.write_all_at(vec![0u8; 1 << 20], 4096).await.0
    /// }
    /// ```
    pub async fn write_all_at<B: IoBuf>(&self, buf: B, pos: u64) -> (io::Result<()>, B) {
        let driver = match current_driver() {
            Ok(driver) => driver,
            Err(e) => return (Err(e), buf),
        };
        rw::write_all(&driver, &self.std, buf, At::Pos(pos)).await
    }

    /// Reads into `buf` (from its start, up to its capacity) at the cursor
    /// and advances it: the owned-buffer form of `AsyncReadExt::read`.
    /// `Ok(0)` at the end of the file (or for a buffer without room).
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<Vec<u8>> {
    ///     let (n, buf) = file.read_owned(Vec::with_capacity(4096)).await;
    ///     n.map(|_| buf)
    /// }
    /// ```
    pub async fn read_owned<B: IoBufMut>(&self, mut buf: B) -> (io::Result<usize>, B) {
        let _turn = self.settled_turn().await;
        let copied = self.cursor().read_ahead_into(&mut buf);
        if copied > 0 || buf.bytes_total() == 0 {
            return (Ok(copied), buf);
        }
        let driver = match current_driver() {
            Ok(driver) => driver,
            Err(e) => return (Err(e), buf),
        };
        let len = buf.bytes_total();
        rw::read_some(&driver, &self.std, buf, len, At::Cursor).await
    }

    /// Moves the cursor back over bytes read ahead, for a write at the
    /// caller's position; first the error a background write left, if any.
    /// The driver to write with.
    fn prepare_write(&self) -> io::Result<Arc<Driver>> {
        let mut cursor = self.cursor();
        if let Some(e) = cursor.take_write_error() {
            return Err(e);
        }
        rw::rewind(&self.std, cursor.discard_read_ahead())?;
        current_driver()
    }

    /// Writes some of `buf`'s bytes at the cursor and advances it: the
    /// owned-buffer form of `AsyncWriteExt::write`, carried out before it
    /// returns (no flush needed).
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<usize> {
    ///     file.write_owned(b"data".to_vec()).await.0
    /// }
    /// ```
    pub async fn write_owned<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        let _turn = self.settled_turn().await;
        match self.prepare_write() {
            Ok(driver) => rw::write_some(&driver, &self.std, buf, 0, At::Cursor).await,
            Err(e) => (Err(e), buf),
        }
    }

    /// Writes all of `buf`'s bytes at the cursor and advances it: the
    /// owned-buffer form of `AsyncWriteExt::write_all`, carried out before
    /// it returns (no flush needed).
    ///
    /// A dropped call may have written part of the bytes, and an operation
    /// already in the kernel may still write its part afterwards.
    ///
    /// # Errors
    /// The operating system's error, e.g. `StorageFull` (`ENOSPC`) on a full
    /// disk, `EBADF` for a file opened read-only; the error of an earlier
    /// background write.
    ///
    /// # Example
    /// See [`OpenOptions`](super::OpenOptions).
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<()> {
    ///     file.write_all_owned("line\n").await.0
    /// }
    /// ```
    pub async fn write_all_owned<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        let _turn = self.settled_turn().await;
        match self.prepare_write() {
            Ok(driver) => rw::write_all(&driver, &self.std, buf, At::Cursor).await,
            Err(e) => (Err(e), buf),
        }
    }

    /// Reads from the cursor to the end of the file, appending to `buf`;
    /// the count read. Advances the cursor.
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<Vec<u8>> {
    ///     let (n, buf) = file.read_to_end_owned(Vec::new()).await;
    ///     n.map(|_| buf)
    /// }
    /// ```
    pub async fn read_to_end_owned(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let _turn = self.settled_turn().await;
        let start = buf.len();
        self.cursor().drain_read_ahead(&mut buf);
        let driver = match current_driver() {
            Ok(driver) => driver,
            Err(e) => return (Err(e), buf),
        };
        let mut chunk: Vec<u8> = Vec::with_capacity(64 * 1024);
        loop {
            chunk.clear();
            let len = chunk.capacity();
            let (r, c) = rw::read_some(&driver, &self.std, chunk, len, At::Cursor).await;
            chunk = c;
            match r {
                Ok(0) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    // Grow the chunk for large files: fewer operations.
                    if n == chunk.capacity() && chunk.capacity() < 4 << 20 {
                        chunk.reserve(chunk.capacity() * 2);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        let n = buf.len() - start;
        (Ok(n), buf)
    }

    /// The file's size, to size a buffer by: with io_uring a `STATX` ring
    /// operation (no [`std::fs::Metadata`] is needed), else
    /// [`metadata`](Self::metadata) on the pool. `None` if it is unknown.
    pub(super) async fn size_hint(&self) -> Option<u64> {
        let driver = current_driver().ok()?;
        if driver.backend() != IoBackend::IoUring {
            return self.metadata().await.ok().map(|m| m.len());
        }
        let fd = self.std.as_raw_fd();
        // The kernel writes the buffer and reads the (empty) path: both
        // are heap memory owned by the operation, as is the file.
        // SAFETY: `statx` is plain integers, for which zero is valid.
        let buf: Box<libc::statx> = Box::new(unsafe { std::mem::zeroed() });
        let data = (CString::default(), buf, self.std.clone());
        let (r, (_, buf, _)) = submit_and_wait(&driver, data, |(path, buf, _)| {
            let buf: *mut libc::statx = &mut **buf;
            opcode::Statx::new(types::Fd(fd), path.as_ptr(), buf.cast())
                .flags(libc::AT_EMPTY_PATH)
                .mask(libc::STATX_SIZE)
                .build()
        })
        .await;
        r.ok()?;
        (buf.stx_mask & libc::STATX_SIZE != 0).then_some(buf.stx_size)
    }
}
