//! Files and directories, with the shapes of `tokio::fs`: [`File`] (with
//! tokio's and futures-io's `AsyncRead`, `AsyncWrite` and `AsyncSeek`),
//! [`OpenOptions`], [`DirBuilder`], directory listing ([`read_dir`],
//! [`ReadDir`], [`DirEntry`]) and the free functions ([`read`],
//! [`write`](fn@write), [`read_to_string`], [`metadata`], [`rename`],
//! [`copy`], ...). They return the standard library's types
//! ([`std::fs::Metadata`], [`std::fs::Permissions`], [`std::fs::FileType`],
//! [`FileTimes`]).
//!
//! # Owned buffers
//! tokio's names take borrowed bytes and copy them where an operation
//! outlives the call: [`write`](fn@write) takes `impl AsRef<[u8]>`, and a
//! [`File`]'s `AsyncWrite` copies into an internal buffer written in the
//! background. The completion-based forms take an owned buffer
//! ([`IoBuf`](crate::io::IoBuf), [`IoBufMut`](crate::io::IoBufMut): `Vec<u8>`,
//! `Box<[u8]>`, `String`, `&'static [u8]`), which the kernel reads or
//! writes in place, and hand it back: [`write_owned`],
//! [`File::read_owned`], [`File::write_owned`], [`File::write_all_owned`],
//! [`File::read_to_end_owned`], and the positioned [`File::read_at`],
//! [`File::write_at`], [`File::write_all_at`].
//!
//! # Which engine runs what
//! In the fallback backend every operation runs on the runtime's blocking
//! pool. With io_uring:
//!
//! | operation | io_uring opcode | kernel |
//! |---|---|---|
//! | [`OpenOptions::open`] (not of options made from std's), [`File::open`], [`File::create`] | `OPENAT` | always |
//! | [`File`]'s `AsyncRead`, [`File::read_owned`], [`File::read_at`], [`File::read_to_end_owned`] | `READ` | always |
//! | [`read`], [`read_to_string`] | `OPENAT`, `STATX` (the size), `READ` | always |
//! | [`File`]'s `AsyncWrite`, [`File::write_owned`], [`File::write_all_owned`], [`File::write_at`], [`write`](fn@write), [`write_owned`] | `WRITE` | always |
//! | [`File::sync_all`], [`File::sync_data`] | `FSYNC` | always |
//! | [`remove_file`], [`remove_dir`] | `UNLINKAT` | always |
//! | [`rename`] | `RENAMEAT` | Linux 5.11 |
//! | [`create_dir`], [`DirBuilder::create`] (not recursive) | `MKDIRAT` | Linux 5.15 |
//! | [`hard_link`] | `LINKAT` | Linux 5.15 |
//! | [`symlink`] | `SYMLINKAT` | Linux 5.15 |
//!
//! "Always": the io_uring backend is chosen only where the kernel has the
//! opcode. The others are probed once per process, the first time one of
//! them is used; where the kernel lacks one, that operation runs on the
//! blocking pool instead.
//!
//! The rest runs on the blocking pool in both backends: [`metadata`],
//! [`symlink_metadata`], [`File::metadata`] and [`DirEntry::metadata`]
//! (io_uring's `STATX` result cannot be turned into a
//! [`std::fs::Metadata`], which has no public constructor), a [`File`]'s
//! seeks, [`File::set_len`], [`File::set_permissions`] and
//! [`File::set_times`], [`read_dir`] and [`ReadDir::next_entry`],
//! [`canonicalize`], [`copy`], [`create_dir_all`] and recursive
//! [`DirBuilder::create`], [`read_link`], [`remove_dir_all`],
//! [`set_permissions`] and [`try_exists`].
//!
//! A [`File`]'s cursor is the kernel's file offset: its I/O traits and its
//! `*_owned` methods read and write there (and take turns: each waits for
//! the other's operation), the `*_at` methods at explicit positions.
//!
//! # Errors
//! Every operation gives the operating system's error as an [`io::Error`]
//! (`NotFound`, `PermissionDenied`, `AlreadyExists`, `IsADirectory`,
//! `NotADirectory`, `DirectoryNotEmpty`, ...; [`io::Error::raw_os_error`]
//! has the `errno`), the same on both backends. A path containing a NUL
//! byte is an `InvalidInput` error, as are contradictory [`OpenOptions`].
//! Used outside a fairlane runtime, an operation fails with an error saying
//! so.
//!
//! # Cancellation
//! A file operation dropped before it completes may still take effect: the
//! kernel (io_uring) or a pool thread (blocking pool) finishes or abandons
//! it on its own, and its buffers and paths are kept until then, so no
//! memory is written or read after it was freed. Positioned reads and
//! writes ([`File::read_at`], [`File::write_at`]) leave no other state
//! behind, so dropping one is safe but says nothing about whether it
//! happened; a dropped owned-buffer cursor call ([`File::read_to_end_owned`],
//! [`File::write_all_owned`], ...) leaves the cursor wherever its completed
//! steps moved it. A [`File`]'s `AsyncWrite` is not affected: its
//! background write is a task of its own, which runs to its end even if
//! the file is dropped (`flush` waits for it). A dropped [`OpenOptions::open`] closes the file it may have
//! opened (and a file it created stays created). A dropped path operation
//! ([`rename`], [`remove_file`], [`create_dir`], ...) may or may not have
//! happened. [`ReadDir::next_entry`] is cancel-safe: the entries a dropped
//! call was fetching are returned by the next one.
//!
//! # Example
//! ```
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! let dir = std::env::temp_dir().join(format!("fairlane-fs-doc-{}", std::process::id()));
//! rt.block_on(async {
//!     fairlane::fs::create_dir(&dir).await?;
//!     fairlane::fs::write(dir.join("a"), b"hello").await?;
//!     fairlane::fs::rename(dir.join("a"), dir.join("b")).await?;
//!     assert_eq!(fairlane::fs::read_to_string(dir.join("b")).await?, "hello");
//!     let mut entries = fairlane::fs::read_dir(&dir).await?;
//!     let entry = entries.next_entry().await?.expect("one entry");
//!     assert_eq!(entry.file_name(), "b");
//!     assert!(entries.next_entry().await?.is_none());
//!     fairlane::fs::remove_file(dir.join("b")).await?;
//!     fairlane::fs::remove_dir(&dir).await
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod cursor;
mod dir;
mod dir_builder;
mod exclusive;
mod file;
mod file_io;
mod file_owned;
mod open_options;
mod ops;
mod rw;

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use io_uring::{opcode, squeue};

use crate::io::current_driver;
use crate::io::{submit_and_wait, IoBackend};
use crate::task::JoinHandle;

pub use self::dir::{read_dir, DirEntry, ReadDir};
pub use self::dir_builder::DirBuilder;
pub use self::file::File;
pub use self::open_options::OpenOptions;
pub use self::ops::{
    canonicalize, copy, create_dir, create_dir_all, hard_link, metadata, read, read_link,
    read_to_string, remove_dir, remove_dir_all, remove_file, rename, set_permissions, symlink,
    symlink_metadata, try_exists, write, write_owned,
};
/// The times of a file to set with [`File::set_times`]: the standard
/// library's type, which has the shape of `tokio::fs::FileTimes`.
pub use std::fs::FileTimes;

/// `path` as a C string for the kernel; a NUL byte in it is bad input.
fn path_cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a file path must not contain a NUL byte",
        )
    })
}

/// The path a [`path_cstring`] result names.
fn c_path(c: &CStr) -> &Path {
    Path::new(OsStr::from_bytes(c.to_bytes()))
}

/// The error of a file operation used where no fairlane runtime is current.
fn no_runtime() -> io::Error {
    io::Error::other(
        "fairlane file operations must be used inside a fairlane runtime (a task or \
         Runtime::block_on)",
    )
}

/// Starts `f` on the current runtime's blocking pool; an error (not a
/// panic) where no runtime is current.
fn spawn_on_pool<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> io::Result<JoinHandle<R>> {
    crate::runtime::context::with_current(|h| h.spawn_blocking(f)).ok_or_else(no_runtime)
}

/// The error of a blocking-pool job that did not finish (it panicked, or
/// the runtime shut down before running it).
fn pool_error(e: crate::task::JoinError) -> io::Error {
    io::Error::other(format!("blocking file operation failed: {e}"))
}

/// Runs `f` on the blocking pool and waits for it.
async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> io::Result<R> + Send + 'static,
) -> io::Result<R> {
    spawn_on_pool(f)?.await.map_err(pool_error)?
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

/// The io_uring opcode of a path operation ([`path_op`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathOpcode {
    /// `unlinkat`: in the set the io_uring backend requires.
    Unlink,
    /// `renameat`, Linux 5.11.
    Rename,
    /// `mkdirat`, Linux 5.15.
    MkDir,
    /// `linkat`, Linux 5.15.
    Link,
    /// `symlinkat`, Linux 5.15.
    Symlink,
}

impl PathOpcode {
    const ALL: [PathOpcode; 5] = [
        PathOpcode::Unlink,
        PathOpcode::Rename,
        PathOpcode::MkDir,
        PathOpcode::Link,
        PathOpcode::Symlink,
    ];

    fn code(self) -> u8 {
        match self {
            PathOpcode::Unlink => opcode::UnlinkAt::CODE,
            PathOpcode::Rename => opcode::RenameAt::CODE,
            PathOpcode::MkDir => opcode::MkDirAt::CODE,
            PathOpcode::Link => opcode::LinkAt::CODE,
            PathOpcode::Symlink => opcode::SymlinkAt::CODE,
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }

    /// Whether the kernel has this opcode: probed once per process (the
    /// answer is the kernel's, the same for every runtime).
    fn supported(self) -> bool {
        static SUPPORTED: OnceLock<u8> = OnceLock::new();
        #[cfg(test)]
        if tests::POOL_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        SUPPORTED.get_or_init(probe_path_opcodes) & self.bit() != 0
    }
}

/// The [`PathOpcode`]s the kernel has, as a mask of their bits. A failed
/// probe counts as none (the blocking pool does them all).
fn probe_path_opcodes() -> u8 {
    let probe = || -> io::Result<io_uring::Probe> {
        let ring = io_uring::IoUring::new(2)?;
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        Ok(probe)
    };
    match probe() {
        Ok(probe) => {
            let mut mask = 0;
            for op in PathOpcode::ALL {
                if probe.is_supported(op.code()) {
                    mask |= op.bit();
                } else {
                    tracing::debug!(
                        opcode = ?op,
                        "io_uring opcode missing: that file operation uses the blocking pool"
                    );
                }
            }
            mask
        }
        Err(e) => {
            tracing::debug!(
                error = %e,
                "probing io_uring path opcodes failed: path operations use the blocking pool"
            );
            0
        }
    }
}

/// A path operation without a result but success: on io_uring, where the
/// kernel has `opcode`, the entry `build` makes from `paths` (the owned C
/// strings it points into, kept in the operation until the kernel is done
/// with them); otherwise `fallback(paths)` on the blocking pool.
async fn path_op<T: Send + 'static>(
    opcode: PathOpcode,
    paths: T,
    build: impl FnOnce(&mut T) -> squeue::Entry,
    fallback: impl FnOnce(T) -> io::Result<()> + Send + 'static,
) -> io::Result<()> {
    let driver = current_driver()?;
    if driver.backend() == IoBackend::IoUring && opcode.supported() {
        submit_and_wait(&driver, paths, build).await.0.map(drop)
    } else {
        blocking(move || fallback(paths)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::Runtime;

    /// Makes every [`PathOpcode`] look missing, as on an older kernel: the
    /// io_uring backend then runs path operations on the blocking pool.
    /// Tests that run meanwhile in this process take that path too, with
    /// the same results. `Relaxed`: only the flag itself is communicated.
    pub(super) static POOL_ONLY: AtomicBool = AtomicBool::new(false);

    #[test]
    fn the_probe_finds_the_required_opcode() {
        // UNLINKAT is in the set the io_uring backend requires.
        if crate::io::uring::Ring::probe().is_ok() {
            assert!(probe_path_opcodes() & PathOpcode::Unlink.bit() != 0);
        }
    }

    /// Path operations on an io_uring runtime whose kernel lacks their
    /// opcodes run on the blocking pool, with the same results.
    #[test]
    fn missing_opcodes_fall_back_to_the_blocking_pool() {
        let Ok(rt) = Runtime::builder()
            .processors(1)
            .io_backend(IoBackend::IoUring)
            .build()
        else {
            return; // io_uring is unavailable here: nothing to fall back from
        };
        let dir =
            std::env::temp_dir().join(format!("fairlane-fs-unit-pool-only-{}", std::process::id()));
        /// Clears the flag however the test ends.
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                POOL_ONLY.store(false, Ordering::Relaxed);
            }
        }
        POOL_ONLY.store(true, Ordering::Relaxed);
        let reset = Reset;
        let result = rt.block_on(async {
            create_dir(&dir).await?;
            let err = create_dir(&dir).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
            write(dir.join("a"), "x").await?;
            rename(dir.join("a"), dir.join("b")).await?;
            hard_link(dir.join("b"), dir.join("c")).await?;
            symlink("b", dir.join("d")).await?;
            assert_eq!(read_link(dir.join("d")).await?, Path::new("b"));
            assert_eq!(read_to_string(dir.join("d")).await?, "x");
            let err = remove_dir(&dir).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::DirectoryNotEmpty);
            for name in ["b", "c", "d"] {
                remove_file(dir.join(name)).await?;
            }
            remove_dir(&dir).await
        });
        drop(reset);
        let _ = std::fs::remove_dir_all(&dir);
        result.unwrap();
    }
}
