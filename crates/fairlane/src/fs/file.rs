//! [`File`]: an open file, read and written with owned buffers.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use io_uring::{opcode, types};

use super::{blocking, on_pool, OpenOptions};
use crate::io::driver::Driver;
use crate::io::{submit_and_wait, IoBackend, IoBuf, IoBufMut};

/// An open file.
///
/// # Example
/// ```
/// use fairlane::fs::File;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let path = std::env::temp_dir().join(format!("fairlane-file-doc-{}", std::process::id()));
/// rt.block_on(async {
///     let file = File::create(&path).await?;
///     file.write_at(b"world".to_vec(), 6).await.0?;
///     file.write_at(b"hello ".to_vec(), 0).await.0?;
///     file.sync_all().await?;
///     let file = File::open(&path).await?;
///     let (n, buf) = file.read_at(Vec::with_capacity(64), 0).await;
///     assert_eq!(&buf[..n?], b"hello world");
///     assert_eq!(file.metadata().await?.len(), 11);
///     fairlane::fs::remove_file(&path).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct File {
    std: Arc<std::fs::File>,
    driver: Arc<Driver>,
    cursor: AtomicU64,
}

impl File {
    /// An opened file, its cursor at the start.
    pub(super) fn new(std: std::fs::File, driver: Arc<Driver>) -> File {
        File {
            std: Arc::new(std),
            driver,
            cursor: AtomicU64::new(0),
        }
    }

    /// Opens `path` for reading.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt.block_on(fairlane::fs::File::open("/no/such/file")).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn open<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new().read(true).open(path).await
    }

    /// Creates (or truncates) `path` for writing.
    ///
    /// # Example
    /// See [`File`].
    /// ```
    /// async fn f() -> std::io::Result<fairlane::fs::File> { fairlane::fs::File::create("out.txt").await }
    /// ```
    pub async fn create<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .await
    }

    fn uring(&self) -> bool {
        self.driver.backend() == IoBackend::IoUring
    }

    /// Reads into `buf` (from its start, up to its capacity) from file
    /// position `pos`. `Ok(0)` at the end of the file; a buffer without
    /// room (zero capacity) also reads `Ok(0)`, at once, which looks the
    /// same as the end of the file (as with tokio), so give it capacity.
    ///
    /// # Example
    /// See [`File`].
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<Vec<u8>> {
    ///     let (n, buf) = file.read_at(Vec::with_capacity(4096), 0).await;
    ///     n.map(|_| buf)
    /// }
    /// ```
    pub async fn read_at<B: IoBufMut>(&self, mut buf: B, pos: u64) -> (io::Result<usize>, B) {
        let result = if self.uring() {
            let fd = self.std.as_raw_fd();
            let (r, b) = submit_and_wait(&self.driver, buf, |b| {
                let len = b.bytes_total().min(u32::MAX as usize) as u32;
                opcode::Read::new(types::Fd(fd), b.stable_mut_ptr(), len)
                    .offset(pos)
                    .build()
            })
            .await;
            buf = b;
            r
        } else {
            let file = self.std.clone();
            let (r, b) = on_pool(buf, move |buf| {
                let offset = libc::off64_t::try_from(pos).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a file position must be below 2^63",
                    )
                })?;
                // The kernel writes into the raw pointer: the bytes past
                // `bytes_init` may be uninitialised, so no `&mut [u8]` is
                // made over them.
                let ptr = buf.stable_mut_ptr();
                let len = buf.bytes_total();
                // SAFETY: `ptr .. ptr + len` is `buf`'s writable memory
                // (initialised or not), which `buf` keeps alive across the
                // call; the file descriptor is owned by `file`, alive here.
                let n = unsafe { libc::pread64(file.as_raw_fd(), ptr.cast(), len, offset) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            })
            .await;
            buf = b;
            r
        };
        if let Ok(n) = result {
            // SAFETY: the kernel wrote `n` bytes from the buffer's start.
            unsafe { buf.set_init(n) };
        }
        (result, buf)
    }

    /// Writes some of `buf`'s bytes at file position `pos`; how many is the
    /// result.
    ///
    /// # Example
    /// See [`File`].
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<usize> {
    ///     file.write_at(b"data".to_vec(), 0).await.0
    /// }
    /// ```
    pub async fn write_at<B: IoBuf>(&self, buf: B, pos: u64) -> (io::Result<usize>, B) {
        self.write_range(buf, 0, pos).await
    }

    /// Writes `buf[start..]` at `pos`.
    async fn write_range<B: IoBuf>(
        &self,
        buf: B,
        start: usize,
        pos: u64,
    ) -> (io::Result<usize>, B) {
        let start = start.min(buf.bytes_init());
        if self.uring() {
            let fd = self.std.as_raw_fd();
            submit_and_wait(&self.driver, buf, |b| {
                let len = (b.bytes_init() - start).min(u32::MAX as usize) as u32;
                // SAFETY: `start <= bytes_init`: inside the buffer.
                let ptr = unsafe { b.stable_ptr().add(start) };
                opcode::Write::new(types::Fd(fd), ptr, len)
                    .offset(pos)
                    .build()
            })
            .await
        } else {
            let file = self.std.clone();
            on_pool(buf, move |buf| {
                file.write_at(&crate::io::init_slice(buf)[start..], pos)
            })
            .await
        }
    }

    /// Writes all of `buf`'s bytes at `pos`.
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<()> {
    ///     file.write_all_at(vec![0u8; 1 << 20], 4096).await.0
    /// }
    /// ```
    pub async fn write_all_at<B: IoBuf>(&self, buf: B, pos: u64) -> (io::Result<()>, B) {
        crate::io::write_all_with(buf, |buf, done| {
            self.write_range(buf, done, pos + done as u64)
        })
        .await
    }

    /// Writes all of `buf`'s bytes at the cursor and advances it.
    ///
    /// # Errors
    /// The operating system's error, e.g. `StorageFull` (`ENOSPC`) on a full
    /// disk, `BadFileDescriptor`-class `EBADF` for a file opened read-only.
    ///
    /// # Example
    /// See [`OpenOptions`].
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<()> {
    ///     file.write_all_owned("line\n").await.0
    /// }
    /// ```
    pub async fn write_all_owned<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        let pos = self.cursor.load(Ordering::Relaxed);
        let len = buf.bytes_init() as u64;
        let (r, buf) = self.write_all_at(buf, pos).await;
        if r.is_ok() {
            self.cursor.store(pos + len, Ordering::Relaxed);
        }
        (r, buf)
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
        let start = buf.len();
        let mut pos = self.cursor.load(Ordering::Relaxed);
        let mut chunk: Vec<u8> = Vec::with_capacity(64 * 1024);
        loop {
            chunk.clear();
            let (r, c) = self.read_at(chunk, pos).await;
            chunk = c;
            match r {
                Ok(0) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    pos += n as u64;
                    // Grow the chunk for large files: fewer operations.
                    if n == chunk.capacity() && chunk.capacity() < 4 << 20 {
                        chunk.reserve(chunk.capacity() * 2);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.cursor.store(pos, Ordering::Relaxed);
                    return (Err(e), buf);
                }
            }
        }
        self.cursor.store(pos, Ordering::Relaxed);
        let n = buf.len() - start;
        (Ok(n), buf)
    }

    /// Flushes data and metadata to the device (`fsync`).
    ///
    /// # Example
    /// See [`File`].
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<()> { file.sync_all().await }
    /// ```
    pub async fn sync_all(&self) -> io::Result<()> {
        if self.uring() {
            let fd = self.std.as_raw_fd();
            submit_and_wait(&self.driver, (), |_| {
                opcode::Fsync::new(types::Fd(fd)).build()
            })
            .await
            .0
            .map(drop)
        } else {
            let file = self.std.clone();
            blocking(move || file.sync_all()).await
        }
    }

    /// The file's size, to size a buffer by: with io_uring a `STATX` ring
    /// operation (no [`std::fs::Metadata`] is needed), else
    /// [`metadata`](Self::metadata) on the pool. `None` if it is unknown.
    pub(super) async fn size_hint(&self) -> Option<u64> {
        if !self.uring() {
            return self.metadata().await.ok().map(|m| m.len());
        }
        let fd = self.std.as_raw_fd();
        // The kernel writes the buffer and reads the (empty) path: both
        // are heap memory owned by the operation.
        // SAFETY: `statx` is plain integers, for which zero is valid.
        let buf: Box<libc::statx> = Box::new(unsafe { std::mem::zeroed() });
        let data = (CString::default(), buf);
        let (r, (_, buf)) = submit_and_wait(&self.driver, data, |(path, buf)| {
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

    /// The file's metadata (on the blocking pool in both backends).
    ///
    /// # Example
    /// See [`File`].
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<u64> { Ok(file.metadata().await?.len()) }
    /// ```
    pub async fn metadata(&self) -> io::Result<std::fs::Metadata> {
        let file = self.std.clone();
        blocking(move || file.metadata()).await
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File")
            .field("fd", &self.std.as_raw_fd())
            .finish()
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.std.as_raw_fd()
    }
}
