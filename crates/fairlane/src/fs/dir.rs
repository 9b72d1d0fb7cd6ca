//! Directory listing: [`read_dir`], [`ReadDir`], [`DirEntry`], on the
//! blocking pool.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::{FileType, Metadata};
use std::future::Future;
use std::io;
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use super::{blocking, c_path, path_cstring, pool_error, spawn_on_pool};
use crate::task::JoinHandle;

/// Entries read per trip to the blocking pool.
const BATCH: usize = 32;

/// Opens the directory `path` for listing with [`ReadDir::next_entry`].
/// The entries come in the order the file system gives, without `.` and
/// `..`.
///
/// # Errors
/// `NotFound`; `NotADirectory` for a file; `PermissionDenied`, ...
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let names = rt.block_on(async {
///     let mut dir = fairlane::fs::read_dir("/").await?;
///     let mut names = Vec::new();
///     while let Some(entry) = dir.next_entry().await? {
///         names.push(entry.file_name());
///     }
///     Ok::<_, std::io::Error>(names)
/// })?;
/// assert!(names.iter().any(|n| n == "tmp"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn read_dir<P: AsRef<Path>>(path: P) -> io::Result<ReadDir> {
    let c = path_cstring(path.as_ref())?;
    let dir = blocking(move || std::fs::read_dir(c_path(&c))).await?;
    Ok(ReadDir {
        state: State::Idle {
            dir: Some(dir),
            entries: VecDeque::new(),
        },
    })
}

/// An open directory's entries, from [`read_dir`]. They are read on the
/// blocking pool a batch at a time.
///
/// # Example
/// See [`read_dir`].
/// ```
/// async fn count(dir: &mut fairlane::fs::ReadDir) -> std::io::Result<usize> {
///     let mut n = 0;
///     while dir.next_entry().await?.is_some() {
///         n += 1;
///     }
///     Ok(n)
/// }
/// ```
pub struct ReadDir {
    state: State,
}

/// What a batch job hands back: the directory (`None` once it is read to
/// its end) and the entries it read.
type Batch = (Option<std::fs::ReadDir>, VecDeque<io::Result<DirEntry>>);

enum State {
    /// No job in flight: `entries` read and not yet returned; `dir` `None`
    /// once everything was read.
    Idle {
        dir: Option<std::fs::ReadDir>,
        entries: VecDeque<io::Result<DirEntry>>,
    },
    /// A job reads the next batch.
    Reading(JoinHandle<Batch>),
}

/// Reads up to [`BATCH`] entries of `dir`.
fn read_batch(mut dir: std::fs::ReadDir) -> Batch {
    let mut entries = VecDeque::with_capacity(BATCH);
    let mut more = true;
    while entries.len() < BATCH {
        match dir.next() {
            Some(entry) => entries.push_back(entry.map(DirEntry::new)),
            None => {
                more = false;
                break;
            }
        }
    }
    (more.then_some(dir), entries)
}

impl ReadDir {
    /// The next entry; `Ok(None)` once all were returned. An error reading
    /// one entry is returned in its place, and listing may go on.
    ///
    /// Cancel-safe: entries being read for a dropped call are kept for the
    /// next one.
    ///
    /// # Example
    /// See [`read_dir`].
    /// ```
    /// async fn first(dir: &mut fairlane::fs::ReadDir) -> std::io::Result<Option<std::ffi::OsString>> {
    ///     Ok(dir.next_entry().await?.map(|e| e.file_name()))
    /// }
    /// ```
    pub async fn next_entry(&mut self) -> io::Result<Option<DirEntry>> {
        std::future::poll_fn(|cx| self.poll_next_entry(cx)).await
    }

    /// Polls for the next entry, as [`next_entry`](Self::next_entry): the
    /// waker of the last poll is woken when it is ready.
    ///
    /// # Errors
    /// As [`next_entry`](Self::next_entry); also an error (not a panic)
    /// when polled outside a fairlane runtime with no entry read ahead.
    ///
    /// # Example
    /// ```
    /// fn poll(dir: &mut fairlane::fs::ReadDir, cx: &mut std::task::Context<'_>) -> bool {
    ///     dir.poll_next_entry(cx).is_ready()
    /// }
    /// ```
    pub fn poll_next_entry(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<DirEntry>>> {
        loop {
            match &mut self.state {
                State::Idle { dir, entries } => {
                    if let Some(entry) = entries.pop_front() {
                        return Poll::Ready(entry.map(Some));
                    }
                    let Some(d) = dir.take() else {
                        return Poll::Ready(Ok(None));
                    };
                    match spawn_on_pool(move || read_batch(d)) {
                        Ok(job) => self.state = State::Reading(job),
                        // The directory went into the closure, which was
                        // dropped: the listing ends here.
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
                State::Reading(job) => {
                    let (dir, entries) = match ready!(Pin::new(job).poll(cx)) {
                        Ok(batch) => batch,
                        Err(e) => {
                            self.state = State::Idle {
                                dir: None,
                                entries: VecDeque::new(),
                            };
                            return Poll::Ready(Err(pool_error(e)));
                        }
                    };
                    self.state = State::Idle { dir, entries };
                }
            }
        }
    }
}

impl std::fmt::Debug for ReadDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (done, read_ahead) = match &self.state {
            State::Idle { dir, entries } => (dir.is_none(), entries.len()),
            State::Reading(_) => (false, 0),
        };
        f.debug_struct("ReadDir")
            .field("read_ahead", &read_ahead)
            .field("done", &(done && read_ahead == 0))
            .finish()
    }
}

/// One entry of a directory listing ([`ReadDir::next_entry`]).
///
/// # Example
/// ```
/// async fn describe(entry: &fairlane::fs::DirEntry) -> std::io::Result<String> {
///     let kind = if entry.file_type().await?.is_dir() { "dir" } else { "other" };
///     Ok(format!("{} (inode {}): {kind}", entry.path().display(), entry.ino()))
/// }
/// ```
#[derive(Debug, Clone)]
pub struct DirEntry {
    std: Arc<std::fs::DirEntry>,
    /// The type, where the listing told it (most file systems do).
    file_type: Option<FileType>,
}

impl DirEntry {
    /// Runs on the blocking pool: `file_type` costs a system call where the
    /// file system's listing does not tell the type.
    fn new(std: std::fs::DirEntry) -> DirEntry {
        let file_type = std.file_type().ok();
        DirEntry {
            std: Arc::new(std),
            file_type,
        }
    }

    /// The entry's full path: the listed directory's path joined with
    /// [`file_name`](Self::file_name).
    ///
    /// # Example
    /// See [`DirEntry`].
    /// ```
    /// fn name(entry: &fairlane::fs::DirEntry) -> std::path::PathBuf { entry.path() }
    /// ```
    pub fn path(&self) -> PathBuf {
        self.std.path()
    }

    /// The entry's name in its directory.
    ///
    /// # Example
    /// See [`read_dir`].
    /// ```
    /// fn name(entry: &fairlane::fs::DirEntry) -> std::ffi::OsString { entry.file_name() }
    /// ```
    pub fn file_name(&self) -> OsString {
        self.std.file_name()
    }

    /// The entry's inode number, as the listing gave it.
    ///
    /// # Example
    /// See [`DirEntry`].
    /// ```
    /// fn inode(entry: &fairlane::fs::DirEntry) -> u64 { entry.ino() }
    /// ```
    pub fn ino(&self) -> u64 {
        self.std.ino()
    }

    /// The entry's metadata (on the blocking pool), not following a
    /// symbolic link: a link's own metadata.
    ///
    /// # Errors
    /// `NotFound` if the entry was removed since it was listed, ...
    ///
    /// # Example
    /// ```
    /// async fn size(entry: &fairlane::fs::DirEntry) -> std::io::Result<u64> {
    ///     Ok(entry.metadata().await?.len())
    /// }
    /// ```
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let std = self.std.clone();
        blocking(move || std.metadata()).await
    }

    /// The entry's type, not following a symbolic link. Usually known from
    /// the listing, at no cost; otherwise asked on the blocking pool.
    ///
    /// # Example
    /// See [`DirEntry`].
    /// ```
    /// async fn is_dir(entry: &fairlane::fs::DirEntry) -> std::io::Result<bool> {
    ///     Ok(entry.file_type().await?.is_dir())
    /// }
    /// ```
    pub async fn file_type(&self) -> io::Result<FileType> {
        if let Some(file_type) = self.file_type {
            return Ok(file_type);
        }
        let std = self.std.clone();
        blocking(move || std.file_type()).await
    }
}
