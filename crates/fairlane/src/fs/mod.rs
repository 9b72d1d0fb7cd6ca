//! Files: [`File`], [`OpenOptions`], and the whole-file helpers [`read`],
//! [`write`](fn@write), [`remove_file`], [`create_dir_all`].
//!
//! With io_uring, opening, reading, writing, syncing and removing are ring
//! operations (the kernel runs the blocking parts on its own workers); in
//! the fallback backend they run on the runtime's blocking pool. Metadata
//! and directory creation use the blocking pool in both backends.
//!
//! A [`File`] has a cursor used by [`File::read_to_end`] and
//! [`File::write_all`]; [`File::read_at`] and [`File::write_at`] take
//! explicit positions. Concurrent cursor calls on one file race for the
//! cursor, as they would on a shared descriptor.
//!
//! # Cancellation
//! A file operation dropped before it completes may still take effect: the
//! kernel (io_uring) or a pool thread (fallback) finishes or abandons it on
//! its own, and its buffer is kept until then, so no memory is written
//! after it was freed. Positioned reads and writes ([`File::read_at`],
//! [`File::write_at`]) leave no other state behind, so dropping one is
//! safe but says nothing about whether it happened; a dropped cursor call
//! ([`File::read_to_end`], [`File::write_all`]) leaves the cursor wherever
//! its completed steps moved it. A dropped [`OpenOptions::open`] closes
//! the file it may have opened (and a file it created stays created).
//!
//! # Example
//! ```
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! let path = std::env::temp_dir().join(format!("fairlane-fs-doc-{}", std::process::id()));
//! rt.block_on(async {
//!     fairlane::fs::write(&path, b"hello".to_vec()).await?;
//!     assert_eq!(fairlane::fs::read(&path).await?, b"hello");
//!     fairlane::fs::remove_file(&path).await
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use io_uring::{opcode, types};

use crate::io::driver::Driver;
use crate::io::uring::Op;
use crate::io::{IoBackend, IoBuf, IoBufMut};
use crate::net::socket::current_driver;

fn path_cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a file path must not contain a NUL byte",
        )
    })
}

/// Runs `f` on the blocking pool and waits for it.
async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> io::Result<R> + Send + 'static,
) -> io::Result<R> {
    crate::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("blocking file operation failed: {e}")))?
}

/// Runs `f` on `buf` on the blocking pool and hands `buf` back, even if
/// the job never ran (the runtime is shutting down).
async fn on_pool<B: Send + 'static, R: Send + 'static>(
    buf: B,
    f: impl FnOnce(&mut B) -> io::Result<R> + Send + 'static,
) -> (io::Result<R>, B) {
    let slot = Arc::new(std::sync::Mutex::new(Some(buf)));
    let job_slot = slot.clone();
    let result = blocking(move || {
        let mut guard = job_slot.lock().unwrap_or_else(|e| e.into_inner());
        let buf = guard
            .as_mut()
            .expect("the buffer is in its slot until the job ends");
        f(buf)
    })
    .await;
    let buf = slot
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .expect("the job borrows the buffer and leaves it in its slot");
    (result, buf)
}

/// How to open a file, as [`std::fs::OpenOptions`].
///
/// # Example
/// ```
/// use fairlane::fs::OpenOptions;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let path = std::env::temp_dir().join(format!("fairlane-oo-doc-{}", std::process::id()));
/// rt.block_on(async {
///     let file = OpenOptions::new().write(true).create(true).truncate(true).open(&path).await?;
///     file.write_all(b"abc".to_vec()).await.0?;
///     fairlane::fs::remove_file(&path).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    /// Nothing set (as std: set at least `read` or `write`).
    ///
    /// # Example
    /// ```
    /// let mut options = fairlane::fs::OpenOptions::new();
    /// options.read(true);
    /// ```
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: 0o666,
        }
    }

    /// Open for reading.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().read(true);
    /// ```
    pub fn read(&mut self, on: bool) -> &mut Self {
        self.read = on;
        self
    }

    /// Open for writing.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().write(true);
    /// ```
    pub fn write(&mut self, on: bool) -> &mut Self {
        self.write = on;
        self
    }

    /// Writes go to the end of the file.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().append(true);
    /// ```
    pub fn append(&mut self, on: bool) -> &mut Self {
        self.append = on;
        self
    }

    /// Truncate to length 0 when opening.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().write(true).truncate(true);
    /// ```
    pub fn truncate(&mut self, on: bool) -> &mut Self {
        self.truncate = on;
        self
    }

    /// Create the file if it does not exist.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().write(true).create(true);
    /// ```
    pub fn create(&mut self, on: bool) -> &mut Self {
        self.create = on;
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().write(true).create_new(true);
    /// ```
    pub fn create_new(&mut self, on: bool) -> &mut Self {
        self.create_new = on;
        self
    }

    /// Permission bits of a created file (default `0o666`, less the umask).
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().write(true).create(true).mode(0o600);
    /// ```
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    fn flags(&self) -> io::Result<libc::c_int> {
        let access = match (self.read, self.write || self.append) {
            (true, false) => libc::O_RDONLY,
            (false, true) => libc::O_WRONLY,
            (true, true) => libc::O_RDWR,
            (false, false) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "open: set read, write or append",
                ))
            }
        };
        if (self.truncate || self.create || self.create_new) && !(self.write || self.append) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "open: truncate and create need write or append",
            ));
        }
        let mut flags = access | libc::O_CLOEXEC;
        if self.append {
            flags |= libc::O_APPEND;
        }
        if self.truncate {
            flags |= libc::O_TRUNC;
        }
        if self.create_new {
            flags |= libc::O_CREAT | libc::O_EXCL;
        } else if self.create {
            flags |= libc::O_CREAT;
        }
        Ok(flags)
    }

    /// Opens `path` with these options.
    ///
    /// # Errors
    /// The operating system's error (`NotFound`, `PermissionDenied`,
    /// `AlreadyExists`, ...); `InvalidInput` for contradictory options.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt
    ///     .block_on(fairlane::fs::OpenOptions::new().read(true).open("/no/such/file"))
    ///     .unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn open<P: AsRef<Path>>(&self, path: P) -> io::Result<File> {
        let flags = self.flags()?;
        let driver = current_driver()?;
        let path = path.as_ref();
        let file = if driver.backend() == IoBackend::IoUring {
            let c = path_cstring(path)?;
            let mode = self.mode;
            let op = Op::submit(&driver, c, true, |c| {
                opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), c.as_ptr())
                    .flags(flags)
                    .mode(mode)
                    .build()
            })
            .map_err(|(e, _)| e)?;
            let fd = op.await.0? as RawFd;
            // SAFETY: a new descriptor nobody else owns.
            unsafe { std::fs::File::from_raw_fd(fd) }
        } else {
            let mut std_options = std::fs::OpenOptions::new();
            std_options
                .read(self.read)
                .write(self.write)
                .append(self.append)
                .truncate(self.truncate)
                .create(self.create)
                .create_new(self.create_new)
                .mode(self.mode);
            let path = path.to_path_buf();
            blocking(move || std_options.open(path)).await?
        };
        Ok(File {
            std: Arc::new(file),
            driver,
            cursor: AtomicU64::new(0),
        })
    }
}

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
            let op = Op::submit(&self.driver, buf, false, |b| {
                let len = b.bytes_total().min(u32::MAX as usize) as u32;
                opcode::Read::new(types::Fd(fd), b.stable_mut_ptr(), len)
                    .offset(pos)
                    .build()
            });
            match op {
                Ok(op) => {
                    let (r, b) = op.await;
                    buf = b;
                    r.map(|n| n as usize)
                }
                Err((e, b)) => return (Err(e), b),
            }
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
            let op = Op::submit(&self.driver, buf, false, |b| {
                let len = (b.bytes_init() - start).min(u32::MAX as usize) as u32;
                // SAFETY: `start <= bytes_init`: inside the buffer.
                let ptr = unsafe { b.stable_ptr().add(start) };
                opcode::Write::new(types::Fd(fd), ptr, len)
                    .offset(pos)
                    .build()
            });
            match op {
                Ok(op) => {
                    let (r, b) = op.await;
                    (r.map(|n| n as usize), b)
                }
                Err((e, b)) => (Err(e), b),
            }
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
    pub async fn write_all_at<B: IoBuf>(&self, mut buf: B, pos: u64) -> (io::Result<()>, B) {
        let mut done = 0;
        while done < buf.bytes_init() {
            let (r, b) = self.write_range(buf, done, pos + done as u64).await;
            buf = b;
            match r {
                Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
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
    ///     file.write_all("line\n").await.0
    /// }
    /// ```
    pub async fn write_all<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
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
    ///     let (n, buf) = file.read_to_end(Vec::new()).await;
    ///     n.map(|_| buf)
    /// }
    /// ```
    pub async fn read_to_end(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
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
            let op = Op::submit(&self.driver, (), false, |_| {
                opcode::Fsync::new(types::Fd(fd)).build()
            })
            .map_err(|(e, _)| e)?;
            op.await.0.map(drop)
        } else {
            let file = self.std.clone();
            blocking(move || file.sync_all()).await
        }
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

/// Reads a whole file.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let err = rt.block_on(fairlane::fs::read("/no/such/file")).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn read<P: AsRef<Path>>(path: P) -> io::Result<Vec<u8>> {
    let file = File::open(path).await?;
    let hint = file.metadata().await.map(|m| m.len() as usize).unwrap_or(0);
    let (r, buf) = file.read_to_end(Vec::with_capacity(hint)).await;
    r.map(|_| buf)
}

/// Writes `contents` to `path`, creating or truncating it.
///
/// # Example
/// See the [module](self) example.
/// ```
/// async fn f() -> std::io::Result<()> { fairlane::fs::write("out.txt", "contents").await }
/// ```
pub async fn write<P: AsRef<Path>, B: IoBuf>(path: P, contents: B) -> io::Result<()> {
    let file = File::create(path).await?;
    file.write_all(contents).await.0
}

/// Removes a file.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let err = rt.block_on(fairlane::fs::remove_file("/no/such/file")).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn remove_file<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let driver = current_driver()?;
    if driver.backend() == IoBackend::IoUring {
        let c = path_cstring(path.as_ref())?;
        let op = Op::submit(&driver, c, false, |c| {
            opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), c.as_ptr()).build()
        })
        .map_err(|(e, _)| e)?;
        op.await.0.map(drop)
    } else {
        let path: PathBuf = path.as_ref().to_path_buf();
        blocking(move || std::fs::remove_file(path)).await
    }
}

/// Creates a directory and all its missing parents (on the blocking pool).
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let dir = std::env::temp_dir().join(format!("fairlane-dir-doc-{}/a/b", std::process::id()));
/// rt.block_on(fairlane::fs::create_dir_all(&dir))?;
/// assert!(dir.is_dir());
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn create_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    current_driver()?;
    let path = path.as_ref().to_path_buf();
    blocking(move || std::fs::create_dir_all(path)).await
}
