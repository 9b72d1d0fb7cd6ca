//! [`OpenOptions`]: how to open a file.

use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use io_uring::{opcode, types};

use super::{blocking, path_cstring, File};
use crate::io::current_driver;
use crate::io::uring::Op;
use crate::io::IoBackend;

/// How to open a file, as [`std::fs::OpenOptions`] (and
/// `tokio::fs::OpenOptions`), with the same rules for which combinations
/// are valid.
///
/// # Example
/// ```
/// use fairlane::fs::OpenOptions;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let path = std::env::temp_dir().join(format!("fairlane-oo-doc-{}", std::process::id()));
/// rt.block_on(async {
///     let file = OpenOptions::new().write(true).create(true).truncate(true).open(&path).await?;
///     file.write_all_owned(b"abc".to_vec()).await.0?;
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
    custom_flags: i32,
    /// The same options as std's, kept in step by every setter.
    std: std::fs::OpenOptions,
    /// Whether the fields above are the whole recipe: not for options made
    /// from std's (which cannot be read back), opened through `std` on the
    /// blocking pool.
    known: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    /// Nothing set (as std: set at least `read`, `write` or `append`).
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
            custom_flags: 0,
            std: std::fs::OpenOptions::new(),
            known: true,
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
        self.std.read(on);
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
        self.std.write(on);
        self
    }

    /// Writes go to the end of the file (`O_APPEND`); implies writing.
    /// Cannot be combined with `truncate` unless `create_new` is set.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().append(true);
    /// ```
    pub fn append(&mut self, on: bool) -> &mut Self {
        self.append = on;
        self.std.append(on);
        self
    }

    /// Truncate to length 0 when opening; needs `write` (not `append`).
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().write(true).truncate(true);
    /// ```
    pub fn truncate(&mut self, on: bool) -> &mut Self {
        self.truncate = on;
        self.std.truncate(on);
        self
    }

    /// Create the file if it does not exist; needs `write` or `append`.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().write(true).create(true);
    /// ```
    pub fn create(&mut self, on: bool) -> &mut Self {
        self.create = on;
        self.std.create(on);
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists (a
    /// symbolic link there counts as existing, even a dangling one);
    /// needs `write` or `append`. When set, `create` and `truncate` are
    /// ignored.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().write(true).create_new(true);
    /// ```
    pub fn create_new(&mut self, on: bool) -> &mut Self {
        self.create_new = on;
        self.std.create_new(on);
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
        self.std.mode(mode);
        self
    }

    /// Extra `open(2)` flags (`libc::O_NOFOLLOW`, `libc::O_DIRECT`, ...),
    /// as `std::os::unix::fs::OpenOptionsExt::custom_flags`: the access
    /// mode bits (`O_ACCMODE`) are ignored, the other options still apply,
    /// and `O_CLOEXEC` is always set.
    ///
    /// # Example
    /// ```
    /// fairlane::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW);
    /// ```
    pub fn custom_flags(&mut self, flags: i32) -> &mut Self {
        self.custom_flags = flags;
        self.std.custom_flags(flags);
        self
    }

    /// The `open(2)` flags, checked as std checks them.
    fn flags(&self) -> io::Result<libc::c_int> {
        let access = match (self.read, self.write, self.append) {
            (true, false, false) => libc::O_RDONLY,
            (false, true, false) => libc::O_WRONLY,
            (true, true, false) => libc::O_RDWR,
            (false, _, true) => libc::O_WRONLY | libc::O_APPEND,
            (true, _, true) => libc::O_RDWR | libc::O_APPEND,
            (false, false, false) => {
                return Err(invalid(
                    if self.create || self.create_new || self.truncate {
                        "open: creating or truncating a file needs write or append access"
                    } else {
                        "open: set at least one of read, write or append"
                    },
                ))
            }
        };
        match (self.write, self.append) {
            (true, false) => {}
            (false, false) => {
                if self.truncate || self.create || self.create_new {
                    return Err(invalid(
                        "open: creating or truncating a file needs write or append access",
                    ));
                }
            }
            (_, true) => {
                if self.truncate && !self.create_new {
                    return Err(invalid(
                        "open: truncate and append cannot be combined (unless create_new)",
                    ));
                }
            }
        }
        let creation = match (self.create, self.truncate, self.create_new) {
            (false, false, false) => 0,
            (true, false, false) => libc::O_CREAT,
            (false, true, false) => libc::O_TRUNC,
            (true, true, false) => libc::O_CREAT | libc::O_TRUNC,
            (_, _, true) => libc::O_CREAT | libc::O_EXCL,
        };
        Ok(libc::O_CLOEXEC | access | creation | (self.custom_flags & !libc::O_ACCMODE))
    }

    /// Opens `path` with these options.
    ///
    /// # Errors
    /// The operating system's error (`NotFound`, `PermissionDenied`,
    /// `AlreadyExists`, `IsADirectory`, ...); `InvalidInput` for
    /// contradictory options (as std: no access mode; `create`,
    /// `create_new` or `truncate` without write access; `truncate` with
    /// `append` but without `create_new`) and for a path with a NUL byte.
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
        // Options made from std's are checked by std when opening.
        let flags = if self.known { self.flags()? } else { 0 };
        let driver = current_driver()?;
        let c = path_cstring(path.as_ref())?;
        let file = if self.known && driver.backend() == IoBackend::IoUring {
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
            let options = self.std.clone();
            blocking(move || options.open(super::c_path(&c))).await?
        };
        Ok(File::from_std(file))
    }
}

impl From<std::fs::OpenOptions> for OpenOptions {
    /// Options that open as `options` does. They open on the blocking pool
    /// in both backends (std's options cannot be read back to make an
    /// io_uring `OPENAT`); setters called afterwards change them as usual.
    ///
    /// # Example
    /// ```
    /// use std::os::unix::fs::OpenOptionsExt;
    /// let mut std_options = std::fs::OpenOptions::new();
    /// std_options.read(true).custom_flags(libc::O_NOFOLLOW);
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let file = rt.block_on(fairlane::fs::OpenOptions::from(std_options).open("/proc/self/stat"))?;
    /// # drop(file);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    fn from(options: std::fs::OpenOptions) -> OpenOptions {
        OpenOptions {
            std: options,
            known: false,
            ..OpenOptions::new()
        }
    }
}

fn invalid(message: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
