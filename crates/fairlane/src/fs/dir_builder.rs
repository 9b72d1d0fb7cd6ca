//! [`DirBuilder`]: how to create a directory, as `tokio::fs::DirBuilder`.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use super::ops::{mkdir, on_path};

/// Creates directories with options: whether missing parents are created
/// too ([`recursive`](Self::recursive)) and the permission bits
/// ([`mode`](Self::mode)).
///
/// # Example
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let dir = std::env::temp_dir().join(format!("fairlane-dir-builder-doc-{}", std::process::id()));
/// rt.block_on(async {
///     fairlane::fs::DirBuilder::new()
///         .recursive(true)
///         .mode(0o700)
///         .create(dir.join("a/b"))
///         .await?;
///     let mode = fairlane::fs::metadata(dir.join("a/b")).await?.permissions().mode();
///     assert_eq!(mode & 0o777, 0o700);
///     fairlane::fs::remove_dir_all(&dir).await
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct DirBuilder {
    recursive: bool,
    mode: Option<u32>,
}

impl DirBuilder {
    /// Options to create one directory (not its parents) with permission
    /// bits `0o777` less the umask.
    ///
    /// # Example
    /// ```
    /// let builder = fairlane::fs::DirBuilder::new();
    /// # drop(builder);
    /// ```
    pub fn new() -> DirBuilder {
        DirBuilder::default()
    }

    /// Whether to create the missing parents as well (then a directory
    /// already there is fine, as with [`create_dir_all`](super::create_dir_all)).
    ///
    /// # Example
    /// ```
    /// fairlane::fs::DirBuilder::new().recursive(true);
    /// ```
    pub fn recursive(&mut self, recursive: bool) -> &mut Self {
        self.recursive = recursive;
        self
    }

    /// The permission bits of the directories created (less the umask).
    ///
    /// # Example
    /// ```
    /// fairlane::fs::DirBuilder::new().mode(0o750);
    /// ```
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = Some(mode);
        self
    }

    /// Creates the directory `path` with these options. Not recursive, an
    /// io_uring `MKDIRAT` where the kernel has it, else the blocking pool;
    /// recursive, on the blocking pool.
    ///
    /// # Errors
    /// Not recursive: `AlreadyExists` if something is there, `NotFound`
    /// for a missing parent. Recursive: `AlreadyExists` only if a file
    /// (not a directory) is in the way. Both: `PermissionDenied`,
    /// `NotADirectory` if a parent is a file, ...
    ///
    /// # Example
    /// See [`DirBuilder`].
    /// ```
    /// async fn f() -> std::io::Result<()> {
    ///     fairlane::fs::DirBuilder::new().recursive(true).create("a/b/c").await
    /// }
    /// ```
    pub async fn create<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        let mode = self.mode.unwrap_or(0o777);
        if !self.recursive {
            return mkdir(path.as_ref(), mode).await;
        }
        on_path(path.as_ref(), move |path| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(path)
        })
        .await
    }
}
