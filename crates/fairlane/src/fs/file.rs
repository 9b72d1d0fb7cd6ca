//! [`File`]: an open file with the shape of `tokio::fs::File`: opened with
//! [`File::open`], [`File::create`] or [`OpenOptions`], read, written and
//! sought through the I/O traits (internal buffer, background operations:
//! see the [`cursor`](super::cursor) module), and converted to and from
//! [`std::fs::File`]. The owned-buffer methods are in `file_owned`, the
//! trait implementations in `file_io`.

use std::fs::{File as StdFile, Metadata, Permissions};
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use io_uring::{opcode, types};

use super::cursor::{Cursor, Operation, DEFAULT_MAX_BUF_SIZE};
use super::exclusive::{Exclusive, Turn};
use super::{blocking, rw, FileTimes, OpenOptions};
use crate::io::{current_driver, submit_and_wait, IoBackend};

/// An open file, as `tokio::fs::File`.
///
/// It implements tokio's `AsyncRead`, `AsyncWrite` and `AsyncSeek` (with
/// the `tokio-io` feature) and futures-io's, with tokio's semantics: reads
/// and writes go through an internal buffer of at most
/// [`max_buf_size`](Self::max_buf_size) bytes, a write is reported done
/// once its bytes are in that buffer and is carried out in the background
/// (with io_uring, as ring operations; otherwise on the blocking pool), so
/// **call `flush` (or `shutdown`) to wait for it and see its error**. The
/// error of a background write comes back from the next write or flush. A
/// file dropped with a write in flight still completes it (while the
/// runtime runs).
///
/// The owned-buffer methods are completion-based, with no internal buffer:
/// [`read_owned`](Self::read_owned), [`write_owned`](Self::write_owned),
/// [`write_all_owned`](Self::write_all_owned) and
/// [`read_to_end_owned`](Self::read_to_end_owned) at the cursor, and
/// [`read_at`](Self::read_at), [`write_at`](Self::write_at) and
/// [`write_all_at`](Self::write_all_at) at a position (no cursor).
///
/// # Example
/// ```
/// use fairlane::fs::File;
/// use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
///
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let path = std::env::temp_dir().join(format!("fairlane-file-doc-{}", std::process::id()));
/// rt.block_on(async {
///     let mut file = File::options().read(true).write(true).create(true).open(&path).await?;
///     file.write_all(b"hello world").await?;
///     file.flush().await?;
///     file.rewind().await?;
///     let mut text = String::new();
///     file.read_to_string(&mut text).await?;
///     assert_eq!(text, "hello world");
///     // The owned-buffer forms: no copy into an internal buffer.
///     let (n, buf) = file.read_at(Vec::with_capacity(5), 6).await;
///     assert_eq!(&buf[..n?], b"world");
///     fairlane::fs::remove_file(&path).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct File {
    pub(super) std: Arc<StdFile>,
    cursor: Mutex<Cursor>,
    turn: Exclusive,
    max_buf_size: usize,
}

impl File {
    /// Opens `path` for reading.
    ///
    /// # Errors
    /// As [`OpenOptions::open`]: `NotFound`, `PermissionDenied`, ...
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
    /// # Errors
    /// As [`OpenOptions::open`].
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

    /// Creates `path` for reading and writing; `AlreadyExists` if it
    /// exists (checked and created in one step by the kernel).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-create-new-doc-{}", std::process::id()));
    /// rt.block_on(async {
    ///     let _file = fairlane::fs::File::create_new(&path).await?;
    ///     let err = fairlane::fs::File::create_new(&path).await.unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    ///     fairlane::fs::remove_file(&path).await
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn create_new<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .await
    }

    /// A new [`OpenOptions`], as [`OpenOptions::new`].
    ///
    /// # Example
    /// ```
    /// async fn f() -> std::io::Result<fairlane::fs::File> {
    ///     fairlane::fs::File::options().append(true).open("log.txt").await
    /// }
    /// ```
    #[must_use]
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Wraps a standard file. Needs no runtime: the operations do, when
    /// they run. The cursor is the standard file's.
    ///
    /// # Example
    /// ```
    /// let std_file = std::fs::File::open("/proc/self/stat")?;
    /// let file = fairlane::fs::File::from_std(std_file);
    /// # drop(file);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std(std: StdFile) -> File {
        File {
            std: Arc::new(std),
            cursor: Mutex::new(Cursor::new()),
            turn: Exclusive::default(),
            max_buf_size: DEFAULT_MAX_BUF_SIZE,
        }
    }

    /// The cursor state, locked for one step (never across an `.await`).
    /// The steps do not panic while holding it (short of running out of
    /// memory), so a poisoned lock carries no broken invariant.
    pub(super) fn cursor(&self) -> MutexGuard<'_, Cursor> {
        self.cursor.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cursor state, through `&mut self` (the I/O traits).
    pub(super) fn cursor_mut(&mut self) -> (&mut Cursor, &Arc<StdFile>, usize) {
        let cursor = self.cursor.get_mut().unwrap_or_else(|e| e.into_inner());
        (cursor, &self.std, self.max_buf_size)
    }

    /// The turn of a `&self` method, once the operation in flight (if any)
    /// finished; a write error it left is kept for the next write or flush.
    pub(super) async fn settled_turn(&self) -> Turn<'_> {
        let turn = self.turn.turn().await;
        poll_fn(|cx| self.cursor().poll_settle(cx)).await;
        turn
    }

    /// `fsync` (`fdatasync` if `data_only`): an io_uring `FSYNC` or on the
    /// blocking pool. First waits for the background write; its error is
    /// returned instead.
    async fn fsync(&self, data_only: bool) -> io::Result<()> {
        let _turn = self.settled_turn().await;
        if let Some(e) = self.cursor().take_write_error() {
            return Err(e);
        }
        let driver = current_driver()?;
        if driver.backend() == IoBackend::IoUring {
            let fd = self.std.as_raw_fd();
            let flags = if data_only {
                types::FsyncFlags::DATASYNC
            } else {
                types::FsyncFlags::empty()
            };
            submit_and_wait(&driver, self.std.clone(), |_| {
                opcode::Fsync::new(types::Fd(fd)).flags(flags).build()
            })
            .await
            .0
            .map(drop)
        } else {
            let file = self.std.clone();
            blocking(move || {
                if data_only {
                    file.sync_data()
                } else {
                    file.sync_all()
                }
            })
            .await
        }
    }

    /// Flushes data and metadata to the device (`fsync`), after the
    /// background write (whose error, if any, is returned instead).
    ///
    /// # Example
    /// ```
    /// use tokio::io::AsyncWriteExt;
    /// async fn f(mut file: fairlane::fs::File) -> std::io::Result<()> {
    ///     file.write_all(b"durable").await?;
    ///     file.sync_all().await
    /// }
    /// ```
    pub async fn sync_all(&self) -> io::Result<()> {
        self.fsync(false).await
    }

    /// As [`sync_all`](Self::sync_all) without the metadata that reading
    /// the data back does not need (`fdatasync`).
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<()> { file.sync_data().await }
    /// ```
    pub async fn sync_data(&self) -> io::Result<()> {
        self.fsync(true).await
    }

    /// Truncates or extends (with zeros) the file to `size` bytes. The
    /// cursor stays where it is (past the end, if the file got shorter).
    ///
    /// # Errors
    /// `InvalidInput` for a file not open for writing, ...
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-set-len-doc-{}", std::process::id()));
    /// rt.block_on(async {
    ///     let file = fairlane::fs::File::create(&path).await?;
    ///     file.set_len(10).await?;
    ///     assert_eq!(file.metadata().await?.len(), 10);
    ///     fairlane::fs::remove_file(&path).await
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn set_len(&self, size: u64) -> io::Result<()> {
        let _turn = self.settled_turn().await;
        // A background operation of its own: a dropped call leaves the
        // cursor state consistent.
        self.cursor().start_set_len(&self.std, size)?;
        match poll_fn(|cx| self.cursor().poll_own(cx)).await? {
            Operation::SetLen(result) => result,
            _ => Err(io::Error::other(
                "a file operation's result was taken by another call",
            )),
        }
    }

    /// The file's metadata (on the blocking pool).
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<u64> { Ok(file.metadata().await?.len()) }
    /// ```
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let file = self.std.clone();
        blocking(move || file.metadata()).await
    }

    /// A second handle to the same open file (`dup`): it shares the cursor
    /// (the kernel's file offset) but not the internal buffer, and gets
    /// this one's [`max_buf_size`](Self::max_buf_size). Waits for the
    /// operation in flight first, and moves the cursor back over bytes read
    /// ahead (where the file allows: not a pipe's), so that the clone
    /// starts where this file's reader is.
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<fairlane::fs::File> {
    ///     file.try_clone().await
    /// }
    /// ```
    pub async fn try_clone(&self) -> io::Result<File> {
        let _turn = self.settled_turn().await;
        // Where the file cannot move back (a pipe), the read-ahead stays
        // this file's.
        let mut cursor = self.cursor();
        if rw::rewind(&self.std, cursor.read_ahead()).is_ok() {
            cursor.discard_read_ahead();
        }
        drop(cursor);
        let mut file = File::from_std(self.std.try_clone()?);
        file.max_buf_size = self.max_buf_size;
        Ok(file)
    }

    /// Waits for the operation in flight, moves the cursor back over bytes
    /// read ahead (where the file allows: not a pipe's), and hands back the
    /// standard file. An error left by a background write is dropped: call
    /// `flush` first to see it.
    ///
    /// # Panics
    /// Only if an operation whose future was dropped (a
    /// [`read_at`](Self::read_at), a [`metadata`](Self::metadata)) still
    /// holds the file and duplicating its descriptor fails (no descriptors
    /// left).
    ///
    /// # Example
    /// ```
    /// async fn f(file: fairlane::fs::File) -> std::fs::File { file.into_std().await }
    /// ```
    pub async fn into_std(mut self) -> StdFile {
        let cursor = self.cursor.get_mut().unwrap_or_else(|e| e.into_inner());
        poll_fn(|cx| cursor.poll_settle(cx)).await;
        // Moving back is best effort: the bytes cannot be un-read from a
        // pipe.
        let _ = rw::rewind(&self.std, cursor.discard_read_ahead());
        match Arc::try_unwrap(self.std) {
            Ok(file) => file,
            Err(shared) => shared
                .try_clone()
                .expect("fairlane::fs::File::into_std: duplicating the shared descriptor failed"),
        }
    }

    /// The standard file, at once, if no operation is in flight or holds
    /// it; else the file back. Bytes read ahead are given back to the
    /// cursor, and an error left by a background write is dropped, as by
    /// [`into_std`](Self::into_std).
    ///
    /// # Errors
    /// `Err(self)` while an operation is in flight.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let file = rt.block_on(fairlane::fs::File::open("/proc/self/stat"))?;
    /// let std_file: std::fs::File = file.try_into_std().expect("nothing in flight");
    /// # drop(std_file);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[allow(clippy::result_large_err)]
    pub fn try_into_std(mut self) -> Result<StdFile, File> {
        let cursor = self.cursor.get_mut().unwrap_or_else(|e| e.into_inner());
        if !cursor.settle_now() {
            return Err(self);
        }
        let _ = rw::rewind(&self.std, cursor.discard_read_ahead());
        let File {
            std,
            cursor,
            turn,
            max_buf_size,
        } = self;
        Arc::try_unwrap(std).map_err(|std| File {
            std,
            cursor,
            turn,
            max_buf_size,
        })
    }

    /// Sets the file's permissions (`fchmod`, on the blocking pool).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-file-perm-doc-{}", std::process::id()));
    /// rt.block_on(async {
    ///     let file = fairlane::fs::File::create(&path).await?;
    ///     let mut permissions = file.metadata().await?.permissions();
    ///     permissions.set_readonly(true);
    ///     file.set_permissions(permissions).await?;
    ///     assert!(file.metadata().await?.permissions().readonly());
    ///     fairlane::fs::remove_file(&path).await
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn set_permissions(&self, permissions: Permissions) -> io::Result<()> {
        let file = self.std.clone();
        blocking(move || file.set_permissions(permissions)).await
    }

    /// Sets the file's access and modification times (on the blocking
    /// pool), after the operation in flight, so that it cannot change them
    /// afterwards.
    ///
    /// # Example
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-set-times-doc-{}", std::process::id()));
    /// rt.block_on(async {
    ///     let file = fairlane::fs::File::create(&path).await?;
    ///     let then = SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    ///     file.set_times(fairlane::fs::FileTimes::new().set_modified(then)).await?;
    ///     assert_eq!(file.metadata().await?.modified()?, then);
    ///     fairlane::fs::remove_file(&path).await
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn set_times(&self, times: FileTimes) -> io::Result<()> {
        let _turn = self.settled_turn().await;
        let file = self.std.clone();
        blocking(move || file.set_times(times)).await
    }

    /// Sets the file's modification time, as [`set_times`](Self::set_times).
    ///
    /// # Example
    /// ```
    /// async fn f(file: &fairlane::fs::File) -> std::io::Result<()> {
    ///     file.set_modified(std::time::SystemTime::now()).await
    /// }
    /// ```
    pub async fn set_modified(&self, time: SystemTime) -> io::Result<()> {
        self.set_times(FileTimes::new().set_modified(time)).await
    }

    /// Sets the most bytes one background read or write moves (default
    /// 2 MiB): a read asks for at most this many, a write takes at most
    /// this many.
    ///
    /// # Panics
    /// If `max_buf_size` is 0 (as tokio).
    ///
    /// # Example
    /// ```
    /// async fn f(mut file: fairlane::fs::File) {
    ///     file.set_max_buf_size(64 * 1024);
    ///     assert_eq!(file.max_buf_size(), 64 * 1024);
    /// }
    /// ```
    #[track_caller]
    pub fn set_max_buf_size(&mut self, max_buf_size: usize) {
        assert!(max_buf_size > 0, "`max_buf_size` must be greater than 0");
        self.max_buf_size = max_buf_size;
    }

    /// The most bytes one background read or write moves; see
    /// [`set_max_buf_size`](Self::set_max_buf_size).
    ///
    /// # Example
    /// ```
    /// let file = fairlane::fs::File::from_std(std::fs::File::open("/proc/self/stat")?);
    /// assert_eq!(file.max_buf_size(), 2 * 1024 * 1024);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn max_buf_size(&self) -> usize {
        self.max_buf_size
    }
}

impl From<StdFile> for File {
    /// As [`File::from_std`].
    fn from(std: StdFile) -> File {
        File::from_std(std)
    }
}

impl From<OwnedFd> for File {
    /// A file from an open descriptor, as [`File::from_std`].
    fn from(fd: OwnedFd) -> File {
        File::from_std(StdFile::from(fd))
    }
}

impl FromRawFd for File {
    /// # Safety
    /// As [`FromRawFd::from_raw_fd`]: `fd` is open and owned by nobody
    /// else.
    unsafe fn from_raw_fd(fd: RawFd) -> File {
        // SAFETY: the caller's promise, passed on.
        File::from_std(unsafe { StdFile::from_raw_fd(fd) })
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.std.as_raw_fd()
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.std.as_fd()
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("fairlane::fs::File")
            .field("std", &self.std)
            .finish()
    }
}
