//! The free functions of `tokio::fs`: whole-file helpers and operations on
//! paths. Which engine runs each is in the [module](super) documentation.

use std::fs::{Metadata, Permissions};
use std::io;
use std::path::{Path, PathBuf};

use io_uring::{opcode, types};

use super::{blocking, c_path, path_cstring, path_op, File, PathOpcode};
use crate::io::IoBuf;

/// Runs `f` on `path` on the blocking pool (after checking the path has no
/// NUL byte, so that every operation reports that the same way).
pub(super) async fn on_path<R: Send + 'static>(
    path: &Path,
    f: impl FnOnce(&Path) -> io::Result<R> + Send + 'static,
) -> io::Result<R> {
    let c = path_cstring(path)?;
    blocking(move || f(c_path(&c))).await
}

/// Runs `f` on two paths on the blocking pool, as [`on_path`].
async fn on_paths<R: Send + 'static>(
    from: &Path,
    to: &Path,
    f: impl FnOnce(&Path, &Path) -> io::Result<R> + Send + 'static,
) -> io::Result<R> {
    let (from, to) = (path_cstring(from)?, path_cstring(to)?);
    blocking(move || f(c_path(&from), c_path(&to))).await
}

/// Reads a whole file.
///
/// # Errors
/// `NotFound` for a missing file, `IsADirectory` for a directory,
/// `PermissionDenied`, ...
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
    // Only a hint: the file may change size meanwhile.
    let hint = file.size_hint().await.unwrap_or(0).min(1 << 30) as usize;
    let (r, buf) = file.read_to_end_owned(Vec::with_capacity(hint)).await;
    r.map(|_| buf)
}

/// Reads a whole file as UTF-8 text.
///
/// # Errors
/// As [`read`]; `InvalidData` if the contents are not UTF-8.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let path = std::env::temp_dir().join(format!("fairlane-rts-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::write(&path, "text").await?;
///     assert_eq!(fairlane::fs::read_to_string(&path).await?, "text");
///     fairlane::fs::remove_file(&path).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn read_to_string<P: AsRef<Path>>(path: P) -> io::Result<String> {
    let bytes = read(path).await?;
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the file's contents are not valid UTF-8",
        )
    })
}

/// Writes `contents` to `path`, creating or truncating it.
///
/// The bytes are copied into a buffer the operation owns (the kernel or a
/// pool thread reads them after this call may have been dropped); to hand
/// over a buffer without the copy, use [`write_owned`].
///
/// # Errors
/// `NotFound` for a missing parent directory; `IsADirectory`;
/// `PermissionDenied`; `StorageFull`, ...
///
/// # Example
/// See the [module](super) example.
/// ```
/// async fn f() -> std::io::Result<()> { fairlane::fs::write("out.txt", b"contents").await }
/// ```
pub async fn write<P: AsRef<Path>, C: AsRef<[u8]>>(path: P, contents: C) -> io::Result<()> {
    write_owned(path, contents.as_ref().to_vec()).await
}

/// Writes the owned buffer `contents` to `path`, creating or truncating
/// it: [`write`](fn@write) without copying the bytes (with io_uring the
/// kernel writes straight from `contents`).
///
/// # Errors
/// As [`write`](fn@write).
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let path = std::env::temp_dir().join(format!("fairlane-write-owned-doc-{}", std::process::id()));
/// rt.block_on(async {
///     let data: Vec<u8> = vec![7; 1 << 20];
///     fairlane::fs::write_owned(&path, data).await?;
///     assert_eq!(fairlane::fs::metadata(&path).await?.len(), 1 << 20);
///     fairlane::fs::remove_file(&path).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn write_owned<P: AsRef<Path>, B: IoBuf>(path: P, contents: B) -> io::Result<()> {
    let file = File::create(path).await?;
    file.write_all_at(contents, 0).await.0
}

/// Removes a file (or a symbolic link; not a directory: see
/// [`remove_dir`]).
///
/// # Errors
/// `NotFound`; `IsADirectory` for a directory; `PermissionDenied`, ...
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let err = rt.block_on(fairlane::fs::remove_file("/no/such/file")).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn remove_file<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let c = path_cstring(path.as_ref())?;
    path_op(
        PathOpcode::Unlink,
        c,
        |c| opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), c.as_ptr()).build(),
        |c| std::fs::remove_file(c_path(&c)),
    )
    .await
}

/// Removes an empty directory.
///
/// # Errors
/// `NotFound`; `DirectoryNotEmpty`; `NotADirectory` for a file;
/// `PermissionDenied`, ...
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let dir = std::env::temp_dir().join(format!("fairlane-rmdir-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::create_dir(&dir).await?;
///     fairlane::fs::remove_dir(&dir).await
/// })?;
/// assert!(!dir.exists());
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn remove_dir<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let c = path_cstring(path.as_ref())?;
    path_op(
        PathOpcode::Unlink,
        c,
        |c| {
            opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), c.as_ptr())
                .flags(libc::AT_REMOVEDIR)
                .build()
        },
        |c| std::fs::remove_dir(c_path(&c)),
    )
    .await
}

/// Removes a directory and everything in it (symbolic links are removed,
/// not followed), as [`std::fs::remove_dir_all`].
///
/// # Errors
/// `NotFound`; `NotADirectory` for a file; the first error met removing
/// what is inside.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let dir = std::env::temp_dir().join(format!("fairlane-rmall-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::create_dir_all(dir.join("a/b")).await?;
///     fairlane::fs::write(dir.join("a/file"), "x").await?;
///     fairlane::fs::remove_dir_all(&dir).await
/// })?;
/// assert!(!dir.exists());
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn remove_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    on_path(path.as_ref(), |path| std::fs::remove_dir_all(path)).await
}

/// Creates a directory (permission bits `0o777` less the umask); its parent
/// must exist.
///
/// # Errors
/// `AlreadyExists` if something is there; `NotFound` for a missing
/// parent; `PermissionDenied`, ...
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let dir = std::env::temp_dir().join(format!("fairlane-mkdir-doc-{}", std::process::id()));
/// rt.block_on(fairlane::fs::create_dir(&dir))?;
/// assert!(dir.is_dir());
/// # std::fs::remove_dir(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn create_dir<P: AsRef<Path>>(path: P) -> io::Result<()> {
    mkdir(path.as_ref(), 0o777).await
}

/// `mkdir(path, mode)` (`mode` less the umask): an io_uring `MKDIRAT`
/// where the kernel has it, else on the blocking pool.
pub(super) async fn mkdir(path: &Path, mode: u32) -> io::Result<()> {
    let c = path_cstring(path)?;
    path_op(
        PathOpcode::MkDir,
        c,
        |c| {
            opcode::MkDirAt::new(types::Fd(libc::AT_FDCWD), c.as_ptr())
                .mode(mode)
                .build()
        },
        move |c| {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().mode(mode).create(c_path(&c))
        },
    )
    .await
}

/// Creates a directory and all its missing parents; a directory already
/// there is fine.
///
/// # Errors
/// `AlreadyExists` if a file (not a directory) is in the way;
/// `NotADirectory` if a parent is a file; `PermissionDenied`, ...
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
    on_path(path.as_ref(), |path| std::fs::create_dir_all(path)).await
}

/// Renames `from` to `to`, replacing `to` if it exists (a file may replace
/// a file, an empty directory a directory), as [`std::fs::rename`].
///
/// # Errors
/// `NotFound` for a missing `from`; `IsADirectory` moving a file onto a
/// directory, `NotADirectory` the other way round; `DirectoryNotEmpty`;
/// `CrossesDevices` across file systems; `PermissionDenied`, ...
///
/// # Example
/// See the [module](super) example.
/// ```
/// async fn f() -> std::io::Result<()> { fairlane::fs::rename("old.txt", "new.txt").await }
/// ```
pub async fn rename<P: AsRef<Path>, Q: AsRef<Path>>(from: P, to: Q) -> io::Result<()> {
    let paths = (path_cstring(from.as_ref())?, path_cstring(to.as_ref())?);
    path_op(
        PathOpcode::Rename,
        paths,
        |(from, to)| {
            opcode::RenameAt::new(
                types::Fd(libc::AT_FDCWD),
                from.as_ptr(),
                types::Fd(libc::AT_FDCWD),
                to.as_ptr(),
            )
            .build()
        },
        |(from, to)| std::fs::rename(c_path(&from), c_path(&to)),
    )
    .await
}

/// Makes `link` a new name (hard link) for the file `original`. A symbolic
/// `original` is linked itself, not followed (as [`std::fs::hard_link`]
/// on Linux).
///
/// # Errors
/// `NotFound` for a missing `original`; `AlreadyExists` if `link` exists;
/// `PermissionDenied` (also for a directory `original`), ...
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let dir = std::env::temp_dir().join(format!("fairlane-link-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::create_dir(&dir).await?;
///     fairlane::fs::write(dir.join("a"), "x").await?;
///     fairlane::fs::hard_link(dir.join("a"), dir.join("b")).await?;
///     assert_eq!(fairlane::fs::read(dir.join("b")).await?, b"x");
///     fairlane::fs::remove_dir_all(&dir).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn hard_link<P: AsRef<Path>, Q: AsRef<Path>>(original: P, link: Q) -> io::Result<()> {
    let paths = (
        path_cstring(original.as_ref())?,
        path_cstring(link.as_ref())?,
    );
    path_op(
        PathOpcode::Link,
        paths,
        |(original, link)| {
            opcode::LinkAt::new(
                types::Fd(libc::AT_FDCWD),
                original.as_ptr(),
                types::Fd(libc::AT_FDCWD),
                link.as_ptr(),
            )
            .build()
        },
        |(original, link)| std::fs::hard_link(c_path(&original), c_path(&link)),
    )
    .await
}

/// Creates a symbolic link at `link` pointing to `original` (which need
/// not exist; a relative `original` is relative to `link`'s directory).
///
/// # Errors
/// `AlreadyExists` if `link` exists; `NotFound` if its parent does not;
/// `PermissionDenied`, ...
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let link = std::env::temp_dir().join(format!("fairlane-symlink-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::symlink("target", &link).await?;
///     assert_eq!(fairlane::fs::read_link(&link).await?, std::path::Path::new("target"));
///     fairlane::fs::remove_file(&link).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn symlink<P: AsRef<Path>, Q: AsRef<Path>>(original: P, link: Q) -> io::Result<()> {
    let paths = (
        path_cstring(original.as_ref())?,
        path_cstring(link.as_ref())?,
    );
    path_op(
        PathOpcode::Symlink,
        paths,
        |(original, link)| {
            opcode::SymlinkAt::new(types::Fd(libc::AT_FDCWD), original.as_ptr(), link.as_ptr())
                .build()
        },
        |(original, link)| std::os::unix::fs::symlink(c_path(&original), c_path(&link)),
    )
    .await
}

/// Copies the contents and permission bits of the file `from` to `to`
/// (created or truncated); the number of bytes copied.
///
/// # Errors
/// `NotFound` for a missing `from`; `InvalidInput` if `from` is not a
/// regular file (a directory, say); `IsADirectory` if `to` is a
/// directory; `PermissionDenied`, ...
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let dir = std::env::temp_dir().join(format!("fairlane-copy-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::create_dir(&dir).await?;
///     fairlane::fs::write(dir.join("a"), "abc").await?;
///     assert_eq!(fairlane::fs::copy(dir.join("a"), dir.join("b")).await?, 3);
///     fairlane::fs::remove_dir_all(&dir).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn copy<P: AsRef<Path>, Q: AsRef<Path>>(from: P, to: Q) -> io::Result<u64> {
    on_paths(from.as_ref(), to.as_ref(), |from, to| {
        std::fs::copy(from, to)
    })
    .await
}

/// The absolute form of `path`, every symbolic link and `.`/`..` resolved;
/// it must exist.
///
/// # Errors
/// `NotFound` if `path` (or a link on the way) does not exist;
/// `NotADirectory` if a non-final component is a file.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let root = rt.block_on(fairlane::fs::canonicalize("/tmp/../"))?;
/// assert_eq!(root, std::path::Path::new("/"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn canonicalize<P: AsRef<Path>>(path: P) -> io::Result<PathBuf> {
    on_path(path.as_ref(), |path| std::fs::canonicalize(path)).await
}

/// The metadata of what `path` names, following symbolic links.
///
/// # Errors
/// `NotFound`; `NotADirectory` if a non-final component is a file;
/// `PermissionDenied`, ...
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// assert!(rt.block_on(fairlane::fs::metadata("/"))?.is_dir());
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    on_path(path.as_ref(), |path| std::fs::metadata(path)).await
}

/// The metadata of what `path` names, not following a final symbolic link
/// (the link's own metadata).
///
/// # Errors
/// As [`metadata`].
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let link = std::env::temp_dir().join(format!("fairlane-lstat-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::symlink("/", &link).await?;
///     assert!(fairlane::fs::symlink_metadata(&link).await?.file_type().is_symlink());
///     assert!(fairlane::fs::metadata(&link).await?.is_dir());
///     fairlane::fs::remove_file(&link).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn symlink_metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    on_path(path.as_ref(), |path| std::fs::symlink_metadata(path)).await
}

/// Where the symbolic link `path` points.
///
/// # Errors
/// `NotFound`; `InvalidInput` if `path` is not a symbolic link.
///
/// # Example
/// See [`symlink`].
/// ```
/// async fn f() -> std::io::Result<std::path::PathBuf> { fairlane::fs::read_link("link").await }
/// ```
pub async fn read_link<P: AsRef<Path>>(path: P) -> io::Result<PathBuf> {
    on_path(path.as_ref(), |path| std::fs::read_link(path)).await
}

/// Sets the permissions of what `path` names (following symbolic links).
///
/// # Errors
/// `NotFound`; `PermissionDenied` if the caller does not own it, ...
///
/// # Example
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let path = std::env::temp_dir().join(format!("fairlane-chmod-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::write(&path, "x").await?;
///     fairlane::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).await?;
///     let mode = fairlane::fs::metadata(&path).await?.permissions().mode();
///     assert_eq!(mode & 0o777, 0o600);
///     fairlane::fs::remove_file(&path).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn set_permissions<P: AsRef<Path>>(path: P, permissions: Permissions) -> io::Result<()> {
    on_path(path.as_ref(), move |path| {
        std::fs::set_permissions(path, permissions)
    })
    .await
}

/// Whether `path` names something (following symbolic links: a dangling
/// link is `Ok(false)`). Unlike [`Path::exists`], an error other than
/// "not found" (`PermissionDenied` on a parent, say) is returned, not
/// taken for `false`.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// assert!(rt.block_on(fairlane::fs::try_exists("/"))?);
/// assert!(!rt.block_on(fairlane::fs::try_exists("/no/such/file"))?);
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn try_exists<P: AsRef<Path>>(path: P) -> io::Result<bool> {
    on_path(path.as_ref(), |path| path.try_exists()).await
}
