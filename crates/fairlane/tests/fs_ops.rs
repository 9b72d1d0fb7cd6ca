//! The `tokio::fs`-shaped operations (paths, directories, links, metadata,
//! [`OpenOptions`] rules) on both I/O backends, success and every error
//! case, each test in a temporary directory of its own.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, ErrorKind};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fairlane::fs::{self, OpenOptions};
use fairlane::io::IoBackend;
use fairlane::Runtime;
use futures_lite::future::poll_once;

fn runtime(backend: IoBackend) -> Runtime {
    common::backend_runtime(backend, 2)
}

/// A directory of its own for one test (process id, test name, backend),
/// removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str, backend: IoBackend) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "fairlane-fs-ops-{}-{name}-{backend}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).expect("create the test directory");
        TempDir(path)
    }

    fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Permission tests leave directories without write or search
        // access: give them back before removing.
        fn open_up(dir: &Path) {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    open_up(&entry.path());
                }
            }
        }
        open_up(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

common::on_both_backends!(
    directories,
    rename_cases,
    hard_links,
    symlinks,
    metadata_and_existence,
    read_to_string_cases,
    copy_cases,
    permissions,
    permission_denied,
    read_dir_lists_everything,
    read_dir_errors,
    read_dir_next_entry_is_cancel_safe,
    open_options_rules,
    open_options_custom_flags,
    nul_bytes_are_invalid_input,
    dropped_path_operations,
    outside_a_runtime_is_an_error,
);

fn kind<T: std::fmt::Debug>(r: io::Result<T>) -> ErrorKind {
    r.expect_err("the operation must fail").kind()
}

fn directories(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("dirs", backend);
    rt.block_on(async {
        let dir = tmp.join("d");
        fs::create_dir(&dir).await.unwrap();
        assert!(fs::metadata(&dir).await.unwrap().is_dir());
        assert_eq!(kind(fs::create_dir(&dir).await), ErrorKind::AlreadyExists);
        assert_eq!(
            kind(fs::create_dir(tmp.join("missing/d")).await),
            ErrorKind::NotFound
        );
        fs::write(tmp.join("file"), "x").await.unwrap();
        assert_eq!(
            kind(fs::create_dir(tmp.join("file")).await),
            ErrorKind::AlreadyExists
        );
        assert_eq!(
            kind(fs::create_dir(tmp.join("file/d")).await),
            ErrorKind::NotADirectory
        );

        // create_dir_all: parents made, existing directory fine, a file in
        // the way is an error.
        fs::create_dir_all(dir.join("a/b/c")).await.unwrap();
        fs::create_dir_all(dir.join("a/b/c")).await.unwrap();
        assert_eq!(
            kind(fs::create_dir_all(tmp.join("file")).await),
            ErrorKind::AlreadyExists
        );
        assert_eq!(
            kind(fs::create_dir_all(tmp.join("file/a/b")).await),
            ErrorKind::NotADirectory
        );

        // remove_dir: only empty directories.
        assert_eq!(
            kind(fs::remove_dir(&dir).await),
            ErrorKind::DirectoryNotEmpty
        );
        assert_eq!(
            kind(fs::remove_dir(tmp.join("file")).await),
            ErrorKind::NotADirectory
        );
        assert_eq!(
            kind(fs::remove_dir(tmp.join("missing")).await),
            ErrorKind::NotFound
        );
        fs::remove_dir(dir.join("a/b/c")).await.unwrap();
        assert!(!fs::try_exists(dir.join("a/b/c")).await.unwrap());

        // remove_file does not remove directories.
        assert_eq!(kind(fs::remove_file(&dir).await), ErrorKind::IsADirectory);
        assert_eq!(
            kind(fs::remove_file(tmp.join("missing")).await),
            ErrorKind::NotFound
        );

        // remove_dir_all: everything inside, links removed, not followed.
        fs::write(dir.join("a/b/f"), "x").await.unwrap();
        fs::symlink(tmp.join("file"), dir.join("a/link"))
            .await
            .unwrap();
        fs::remove_dir_all(&dir).await.unwrap();
        assert!(!fs::try_exists(&dir).await.unwrap());
        assert_eq!(fs::read(tmp.join("file")).await.unwrap(), b"x");
        assert_eq!(kind(fs::remove_dir_all(&dir).await), ErrorKind::NotFound);
        assert_eq!(
            kind(fs::remove_dir_all(tmp.join("file")).await),
            ErrorKind::NotADirectory
        );
    });
}

fn rename_cases(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("rename", backend);
    rt.block_on(async {
        fs::write(tmp.join("a"), "aaa").await.unwrap();
        fs::rename(tmp.join("a"), tmp.join("b")).await.unwrap();
        assert!(!fs::try_exists(tmp.join("a")).await.unwrap());
        assert_eq!(fs::read(tmp.join("b")).await.unwrap(), b"aaa");
        // Replaces an existing file.
        fs::write(tmp.join("c"), "ccc").await.unwrap();
        fs::rename(tmp.join("b"), tmp.join("c")).await.unwrap();
        assert_eq!(fs::read(tmp.join("c")).await.unwrap(), b"aaa");
        assert_eq!(
            kind(fs::rename(tmp.join("missing"), tmp.join("x")).await),
            ErrorKind::NotFound
        );
        assert_eq!(
            kind(fs::rename(tmp.join("c"), tmp.join("missing/x")).await),
            ErrorKind::NotFound
        );
        // Directories.
        fs::create_dir(tmp.join("d")).await.unwrap();
        fs::create_dir(tmp.join("e")).await.unwrap();
        fs::write(tmp.join("e/inside"), "").await.unwrap();
        assert_eq!(
            kind(fs::rename(tmp.join("c"), tmp.join("d")).await),
            ErrorKind::IsADirectory
        );
        assert_eq!(
            kind(fs::rename(tmp.join("d"), tmp.join("c")).await),
            ErrorKind::NotADirectory
        );
        assert_eq!(
            kind(fs::rename(tmp.join("d"), tmp.join("e")).await),
            ErrorKind::DirectoryNotEmpty
        );
        // An empty directory may be replaced by a directory.
        fs::rename(tmp.join("e"), tmp.join("d")).await.unwrap();
        assert!(fs::try_exists(tmp.join("d/inside")).await.unwrap());
    });
}

fn hard_links(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("hardlink", backend);
    rt.block_on(async {
        fs::write(tmp.join("a"), "data").await.unwrap();
        fs::hard_link(tmp.join("a"), tmp.join("b")).await.unwrap();
        let a = fs::metadata(tmp.join("a")).await.unwrap();
        let b = fs::metadata(tmp.join("b")).await.unwrap();
        assert_eq!(a.ino(), b.ino());
        assert_eq!(a.nlink(), 2);
        assert_eq!(fs::read(tmp.join("b")).await.unwrap(), b"data");
        assert_eq!(
            kind(fs::hard_link(tmp.join("a"), tmp.join("b")).await),
            ErrorKind::AlreadyExists
        );
        assert_eq!(
            kind(fs::hard_link(tmp.join("missing"), tmp.join("c")).await),
            ErrorKind::NotFound
        );
        // Directories cannot be hard-linked (EPERM, even for root).
        fs::create_dir(tmp.join("d")).await.unwrap();
        let err = fs::hard_link(tmp.join("d"), tmp.join("e"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    });
}

fn symlinks(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("symlink", backend);
    rt.block_on(async {
        fs::write(tmp.join("target"), "abc").await.unwrap();
        // A relative target resolves against the link's directory.
        fs::symlink("target", tmp.join("link")).await.unwrap();
        assert_eq!(
            fs::read_link(tmp.join("link")).await.unwrap(),
            Path::new("target")
        );
        assert_eq!(fs::read_to_string(tmp.join("link")).await.unwrap(), "abc");
        let own = fs::symlink_metadata(tmp.join("link")).await.unwrap();
        assert!(own.file_type().is_symlink());
        let followed = fs::metadata(tmp.join("link")).await.unwrap();
        assert!(followed.is_file());
        assert_eq!(followed.len(), 3);
        assert_eq!(
            kind(fs::symlink("target", tmp.join("link")).await),
            ErrorKind::AlreadyExists
        );
        assert_eq!(
            kind(fs::symlink("target", tmp.join("missing/link")).await),
            ErrorKind::NotFound
        );
        // A dangling link: its own metadata exists, what it names does not.
        fs::symlink(tmp.join("nothing"), tmp.join("dangling"))
            .await
            .unwrap();
        assert!(fs::symlink_metadata(tmp.join("dangling")).await.is_ok());
        assert_eq!(
            kind(fs::metadata(tmp.join("dangling")).await),
            ErrorKind::NotFound
        );
        assert!(!fs::try_exists(tmp.join("dangling")).await.unwrap());
        // read_link on something that is not a link.
        assert_eq!(
            kind(fs::read_link(tmp.join("target")).await),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            kind(fs::read_link(tmp.join("missing")).await),
            ErrorKind::NotFound
        );
        // remove_file removes the link, not its target.
        fs::remove_file(tmp.join("link")).await.unwrap();
        assert!(fs::try_exists(tmp.join("target")).await.unwrap());
    });
}

fn metadata_and_existence(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("metadata", backend);
    rt.block_on(async {
        fs::write(tmp.join("file"), "12345").await.unwrap();
        let m = fs::metadata(tmp.join("file")).await.unwrap();
        assert!(m.is_file());
        assert_eq!(m.len(), 5);
        assert_eq!(
            kind(fs::metadata(tmp.join("missing")).await),
            ErrorKind::NotFound
        );
        assert_eq!(
            kind(fs::metadata(tmp.join("file/below")).await),
            ErrorKind::NotADirectory
        );
        assert_eq!(
            kind(fs::symlink_metadata(tmp.join("missing")).await),
            ErrorKind::NotFound
        );
        assert!(fs::try_exists(tmp.join("file")).await.unwrap());
        assert!(!fs::try_exists(tmp.join("missing")).await.unwrap());
        // Not "not found": an error, not `false`.
        assert_eq!(
            kind(fs::try_exists(tmp.join("file/below")).await),
            ErrorKind::NotADirectory
        );

        fs::create_dir(tmp.join("d")).await.unwrap();
        fs::symlink(tmp.join("d"), tmp.join("to-d")).await.unwrap();
        let real = std::fs::canonicalize(&tmp.0).unwrap();
        assert_eq!(
            fs::canonicalize(tmp.join("to-d/../file")).await.unwrap(),
            real.join("file")
        );
        assert_eq!(
            fs::canonicalize(tmp.join("missing"))
                .await
                .unwrap_err()
                .kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            kind(fs::canonicalize(tmp.join("file/..")).await),
            ErrorKind::NotADirectory
        );
    });
}

fn read_to_string_cases(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("read-to-string", backend);
    rt.block_on(async {
        fs::write(tmp.join("text"), "héllo").await.unwrap();
        assert_eq!(fs::read_to_string(tmp.join("text")).await.unwrap(), "héllo");
        fs::write(tmp.join("binary"), vec![0xff, 0xfe, 0x00])
            .await
            .unwrap();
        assert_eq!(
            kind(fs::read_to_string(tmp.join("binary")).await),
            ErrorKind::InvalidData
        );
        assert_eq!(
            kind(fs::read_to_string(tmp.join("missing")).await),
            ErrorKind::NotFound
        );
        // A directory where a file is expected.
        assert_eq!(
            kind(fs::read_to_string(&tmp.0).await),
            ErrorKind::IsADirectory
        );
        assert_eq!(kind(fs::read(&tmp.0).await), ErrorKind::IsADirectory);
        assert_eq!(kind(fs::write(&tmp.0, "x").await), ErrorKind::IsADirectory);
        fs::write(tmp.join("empty"), "").await.unwrap();
        assert_eq!(fs::read_to_string(tmp.join("empty")).await.unwrap(), "");
    });
}

fn copy_cases(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("copy", backend);
    rt.block_on(async {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(tmp.join("a"), data.clone()).await.unwrap();
        fs::set_permissions(tmp.join("a"), std::fs::Permissions::from_mode(0o640))
            .await
            .unwrap();
        assert_eq!(
            fs::copy(tmp.join("a"), tmp.join("b")).await.unwrap(),
            data.len() as u64
        );
        assert!(fs::read(tmp.join("b")).await.unwrap() == data);
        let mode = fs::metadata(tmp.join("b"))
            .await
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640, "permission bits are copied");
        // Onto an existing file: truncated first.
        fs::write(tmp.join("short"), "xy").await.unwrap();
        fs::copy(tmp.join("short"), tmp.join("b")).await.unwrap();
        assert_eq!(fs::read(tmp.join("b")).await.unwrap(), b"xy");
        assert_eq!(
            kind(fs::copy(tmp.join("missing"), tmp.join("c")).await),
            ErrorKind::NotFound
        );
        fs::create_dir(tmp.join("d")).await.unwrap();
        assert_eq!(
            kind(fs::copy(tmp.join("d"), tmp.join("c")).await),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            kind(fs::copy(tmp.join("a"), tmp.join("d")).await),
            ErrorKind::IsADirectory
        );
    });
}

fn permissions(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("permissions", backend);
    rt.block_on(async {
        fs::write(tmp.join("f"), "x").await.unwrap();
        let mut perms = fs::metadata(tmp.join("f")).await.unwrap().permissions();
        perms.set_readonly(true);
        fs::set_permissions(tmp.join("f"), perms).await.unwrap();
        assert!(fs::metadata(tmp.join("f"))
            .await
            .unwrap()
            .permissions()
            .readonly());
        fs::set_permissions(tmp.join("f"), std::fs::Permissions::from_mode(0o600))
            .await
            .unwrap();
        let mode = fs::metadata(tmp.join("f"))
            .await
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            kind(
                fs::set_permissions(tmp.join("missing"), std::fs::Permissions::from_mode(0o600))
                    .await
            ),
            ErrorKind::NotFound
        );
        // The mode of a file OpenOptions creates (0o600 survives any
        // usual umask).
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(tmp.join("g"))
            .await
            .unwrap();
        let mode = fs::metadata(tmp.join("g"))
            .await
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    });
}

/// Whether this process bypasses file permission checks (root, or a
/// capability such as `CAP_DAC_OVERRIDE`): then permission-denied cases
/// cannot be produced.
fn bypasses_permissions(dir: &Path) -> bool {
    let probe = dir.join("permission-probe");
    std::fs::write(&probe, "x").unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o000)).unwrap();
    let bypass = std::fs::File::open(&probe).is_ok();
    std::fs::remove_file(&probe).unwrap();
    bypass
}

fn permission_denied(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("denied", backend);
    if bypasses_permissions(&tmp.0) {
        eprintln!(
            "skipped permission_denied ({backend}): this process bypasses file permission \
             checks (it runs as root or with CAP_DAC_OVERRIDE)"
        );
        return;
    }
    rt.block_on(async {
        let denied = |r: io::Result<()>| {
            assert_eq!(r.unwrap_err().kind(), ErrorKind::PermissionDenied);
        };
        fs::write(tmp.join("secret"), "x").await.unwrap();
        fs::set_permissions(tmp.join("secret"), std::fs::Permissions::from_mode(0o000))
            .await
            .unwrap();
        assert_eq!(
            kind(fs::read(tmp.join("secret")).await),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            kind(fs::read_to_string(tmp.join("secret")).await),
            ErrorKind::PermissionDenied
        );
        denied(fs::write(tmp.join("secret"), "y").await);
        assert_eq!(
            kind(fs::copy(tmp.join("secret"), tmp.join("copy")).await),
            ErrorKind::PermissionDenied
        );
        // A directory without write permission: nothing is created,
        // removed or renamed in it.
        let ro = tmp.join("ro");
        fs::create_dir(&ro).await.unwrap();
        fs::write(ro.join("f"), "x").await.unwrap();
        fs::create_dir(ro.join("sub")).await.unwrap();
        fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500))
            .await
            .unwrap();
        denied(fs::create_dir(ro.join("new")).await);
        denied(fs::create_dir_all(ro.join("new/deeper")).await);
        denied(fs::write(ro.join("new-file"), "x").await);
        denied(fs::remove_file(ro.join("f")).await);
        denied(fs::remove_dir(ro.join("sub")).await);
        denied(fs::rename(ro.join("f"), ro.join("g")).await);
        denied(fs::hard_link(ro.join("f"), ro.join("g")).await);
        denied(fs::symlink("f", ro.join("g")).await);
        denied(fs::remove_dir_all(ro.join("sub")).await);
        // A directory without search permission: nothing below is reached.
        fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o000))
            .await
            .unwrap();
        assert_eq!(
            kind(fs::metadata(ro.join("f")).await),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            kind(fs::try_exists(ro.join("f")).await),
            ErrorKind::PermissionDenied
        );
        assert_eq!(kind(fs::read_dir(&ro).await), ErrorKind::PermissionDenied);
        // Not the owner: chmod is refused. (The permissions asked are the
        // ones "/" has, so nothing would change if it were allowed.)
        let root = std::fs::metadata("/").unwrap();
        if root.uid() != geteuid() {
            denied(fs::set_permissions("/", root.permissions()).await);
        }
    });
}

fn geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn read_dir_lists_everything(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("read-dir", backend);
    rt.block_on(async {
        // More entries than one batch of the blocking pool.
        let mut expected = BTreeMap::new();
        for i in 0..100 {
            let name = format!("file-{i:03}");
            fs::write(tmp.join(&name), vec![b'x'; i]).await.unwrap();
            expected.insert(OsString::from(name), "file");
        }
        fs::create_dir(tmp.join("sub")).await.unwrap();
        expected.insert("sub".into(), "dir");
        fs::symlink("sub", tmp.join("link")).await.unwrap();
        expected.insert("link".into(), "symlink");

        let mut dir = fs::read_dir(&tmp.0).await.unwrap();
        let mut seen = BTreeMap::new();
        while let Some(entry) = dir.next_entry().await.unwrap() {
            let name = entry.file_name();
            assert_eq!(entry.path(), tmp.0.join(&name));
            let file_type = entry.file_type().await.unwrap();
            let metadata = entry.metadata().await.unwrap();
            // Not followed: a link's own type and metadata.
            assert_eq!(metadata.file_type(), file_type);
            assert_eq!(metadata.ino(), entry.ino());
            let what = if file_type.is_symlink() {
                "symlink"
            } else if file_type.is_dir() {
                "dir"
            } else {
                assert!(file_type.is_file());
                let n: u64 = name.to_str().unwrap()[5..].parse().unwrap();
                assert_eq!(metadata.len(), n);
                "file"
            };
            assert!(seen.insert(name, what).is_none(), "an entry listed twice");
        }
        assert_eq!(seen, expected);
        // Finished stays finished.
        assert!(dir.next_entry().await.unwrap().is_none());

        // An empty directory.
        let mut dir = fs::read_dir(tmp.join("sub")).await.unwrap();
        assert!(dir.next_entry().await.unwrap().is_none());

        // An entry removed after listing: its metadata is NotFound.
        let mut dir = fs::read_dir(&tmp.0).await.unwrap();
        let entry = dir.next_entry().await.unwrap().unwrap();
        if entry.file_type().await.unwrap().is_dir() {
            fs::remove_dir(entry.path()).await.unwrap();
        } else {
            fs::remove_file(entry.path()).await.unwrap();
        }
        assert_eq!(kind(entry.metadata().await), ErrorKind::NotFound);
    });
}

fn read_dir_errors(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("read-dir-errors", backend);
    rt.block_on(async {
        assert_eq!(
            kind(fs::read_dir(tmp.join("missing")).await),
            ErrorKind::NotFound
        );
        fs::write(tmp.join("file"), "x").await.unwrap();
        assert_eq!(
            kind(fs::read_dir(tmp.join("file")).await),
            ErrorKind::NotADirectory
        );
    });
}

fn read_dir_next_entry_is_cancel_safe(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("read-dir-cancel", backend);
    rt.block_on(async {
        for i in 0..70 {
            fs::write(tmp.join(format!("f{i}")), "").await.unwrap();
        }
        let mut dir = fs::read_dir(&tmp.0).await.unwrap();
        let mut names = Vec::new();
        loop {
            // Every other call is polled once and dropped: a batch being
            // read for it must not be lost.
            {
                let mut dropped = Box::pin(dir.next_entry());
                if let Some(entry) = poll_once(&mut dropped).await {
                    match entry.unwrap() {
                        Some(entry) => names.push(entry.file_name()),
                        None => break,
                    }
                }
            }
            match dir.next_entry().await.unwrap() {
                Some(entry) => names.push(entry.file_name()),
                None => break,
            }
        }
        names.sort();
        let mut expected: Vec<OsString> = (0..70).map(|i| format!("f{i}").into()).collect();
        expected.sort();
        assert_eq!(names, expected);
    });
}

fn open_options_rules(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("open-options", backend);
    rt.block_on(async {
        let path = tmp.join("f");
        let invalid = |o: &OpenOptions| {
            let o = o.clone();
            let path = path.clone();
            async move { o.open(&path).await.map(drop).unwrap_err().kind() }
        };
        // std's rules: an access mode is needed; creating or truncating
        // needs write access; truncate and append exclude each other
        // (unless create_new, which ignores truncate).
        assert_eq!(invalid(&OpenOptions::new()).await, ErrorKind::InvalidInput);
        assert_eq!(
            invalid(OpenOptions::new().create(true)).await,
            ErrorKind::InvalidInput
        );
        assert_eq!(
            invalid(OpenOptions::new().read(true).create(true)).await,
            ErrorKind::InvalidInput
        );
        assert_eq!(
            invalid(OpenOptions::new().read(true).truncate(true)).await,
            ErrorKind::InvalidInput
        );
        assert_eq!(
            invalid(OpenOptions::new().read(true).create_new(true)).await,
            ErrorKind::InvalidInput
        );
        assert_eq!(
            invalid(OpenOptions::new().append(true).truncate(true)).await,
            ErrorKind::InvalidInput
        );
        assert_eq!(
            invalid(OpenOptions::new().append(true).create(true).truncate(true)).await,
            ErrorKind::InvalidInput
        );
        assert!(!fs::try_exists(&path).await.unwrap(), "nothing was created");

        // Without create: missing is NotFound.
        assert_eq!(
            kind(OpenOptions::new().write(true).open(&path).await),
            ErrorKind::NotFound
        );
        // append + truncate + create_new: a new file, appended to.
        let f = OpenOptions::new()
            .append(true)
            .truncate(true)
            .create_new(true)
            .open(&path)
            .await
            .unwrap();
        f.write_all_owned("ab").await.0.unwrap();
        f.write_at("cd", 0).await.0.unwrap(); // O_APPEND: at the end anyway
        assert_eq!(fs::read(&path).await.unwrap(), b"abcd");
        // create_new on something existing, truncate or not.
        assert_eq!(
            kind(
                OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .create_new(true)
                    .open(&path)
                    .await
            ),
            ErrorKind::AlreadyExists
        );
        assert_eq!(fs::read(&path).await.unwrap(), b"abcd", "not truncated");
        // ... also a dangling symbolic link.
        fs::symlink(tmp.join("nothing"), tmp.join("dangling"))
            .await
            .unwrap();
        assert_eq!(
            kind(
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(tmp.join("dangling"))
                    .await
            ),
            ErrorKind::AlreadyExists
        );
        // read + append: reads anywhere, writes at the end.
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .await
            .unwrap();
        f.write_all_owned("e").await.0.unwrap();
        let (n, buf) = f.read_at(Vec::with_capacity(16), 0).await;
        assert_eq!(&buf[..n.unwrap()], b"abcde");
        // write + truncate on an existing file: emptied.
        OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .await
            .unwrap();
        assert_eq!(fs::read(&path).await.unwrap(), b"");
        // write without truncate: overwrites in place.
        fs::write(&path, "12345").await.unwrap();
        let f = OpenOptions::new().write(true).open(&path).await.unwrap();
        f.write_all_owned("ab").await.0.unwrap();
        assert_eq!(fs::read(&path).await.unwrap(), b"ab345");
        // A read-only file cannot be written; a write-only one not read.
        let f = OpenOptions::new().read(true).open(&path).await.unwrap();
        assert_eq!(
            f.write_at("x", 0).await.0.unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
        let f = OpenOptions::new().write(true).open(&path).await.unwrap();
        let (r, _) = f.read_at(Vec::with_capacity(4), 0).await;
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EBADF));
        // A directory where a file is expected.
        assert_eq!(
            kind(OpenOptions::new().write(true).open(&tmp.0).await),
            ErrorKind::IsADirectory
        );
        assert_eq!(
            kind(
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .open(tmp.join("missing/f"))
                    .await
            ),
            ErrorKind::NotFound
        );
    });
}

fn open_options_custom_flags(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("custom-flags", backend);
    rt.block_on(async {
        fs::write(tmp.join("f"), "data").await.unwrap();
        fs::symlink("f", tmp.join("link")).await.unwrap();
        // O_NOFOLLOW: a final symbolic link is refused (ELOOP).
        let err = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(tmp.join("link"))
            .await
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(tmp.join("f"))
            .await
            .unwrap();
        // O_DIRECTORY: a file is refused.
        assert_eq!(
            kind(
                OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_DIRECTORY)
                    .open(tmp.join("f"))
                    .await
            ),
            ErrorKind::NotADirectory
        );
        // Access-mode bits in the custom flags are ignored: still
        // read-only.
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_RDWR)
            .open(tmp.join("f"))
            .await
            .unwrap();
        let (n, buf) = f.read_at(Vec::with_capacity(8), 0).await;
        assert_eq!(&buf[..n.unwrap()], b"data");
        assert_eq!(
            f.write_at("x", 0).await.0.unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
        // Close-on-exec is always set.
        // SAFETY: F_GETFD on a descriptor `f` owns.
        let fd_flags = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&f), libc::F_GETFD) };
        assert!(fd_flags & libc::FD_CLOEXEC != 0);
    });
}

fn nul_bytes_are_invalid_input(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("nul", backend);
    rt.block_on(async {
        let bad = Path::new("bad\0path");
        let good = tmp.join("good");
        fs::write(&good, "x").await.unwrap();
        let perms = std::fs::Permissions::from_mode(0o644);
        let kinds = [
            kind(fs::read(bad).await),
            kind(fs::read_to_string(bad).await),
            kind(fs::write(bad, "x").await),
            kind(fs::metadata(bad).await),
            kind(fs::symlink_metadata(bad).await),
            kind(fs::try_exists(bad).await),
            kind(fs::canonicalize(bad).await),
            kind(fs::read_link(bad).await),
            kind(fs::read_dir(bad).await),
            kind(fs::create_dir(bad).await),
            kind(fs::create_dir_all(bad).await),
            kind(fs::remove_file(bad).await),
            kind(fs::remove_dir(bad).await),
            kind(fs::remove_dir_all(bad).await),
            kind(fs::set_permissions(bad, perms).await),
            kind(fs::rename(&good, bad).await),
            kind(fs::rename(bad, &good).await),
            kind(fs::copy(&good, bad).await),
            kind(fs::copy(bad, &good).await),
            kind(fs::hard_link(&good, bad).await),
            kind(fs::hard_link(bad, &good).await),
            kind(fs::symlink(&good, bad).await),
            kind(fs::symlink(bad, tmp.join("link")).await),
            kind(OpenOptions::new().read(true).open(bad).await),
        ];
        for (i, k) in kinds.iter().enumerate() {
            assert_eq!(*k, ErrorKind::InvalidInput, "operation {i}");
        }
        // Nothing happened to the good path.
        assert_eq!(fs::read(&good).await.unwrap(), b"x");
        assert!(!fs::try_exists(tmp.join("link")).await.unwrap());
    });
}

/// Path operations dropped after their first poll: each either happened or
/// did not (the runtime keeps the paths until the kernel or the pool is
/// done with them), and the runtime carries on.
fn dropped_path_operations(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("dropped", backend);
    rt.block_on(async {
        for round in 0..50 {
            let a = tmp.join(format!("a{round}"));
            let b = tmp.join(format!("b{round}"));
            let d = tmp.join(format!("d{round}"));
            fs::write(&a, "x").await.unwrap();
            {
                let mut ops: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = _>>>> = vec![
                    Box::pin(fs::rename(a.clone(), b.clone())),
                    Box::pin(fs::create_dir(d.clone())),
                    Box::pin(fs::symlink("target", tmp.join(format!("s{round}")))),
                ];
                for op in &mut ops {
                    let _ = poll_once(op.as_mut()).await;
                }
                // Dropped here, the paths with them.
            }
            // Each happened entirely or not at all.
            let moved = fs::try_exists(&b).await.unwrap();
            let left = fs::try_exists(&a).await.unwrap();
            // A rename still in flight may yet finish: wait for the file
            // to be in exactly one place (generous: only a lost operation
            // would never settle).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            let (mut moved, mut left) = (moved, left);
            while moved == left {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the file is in neither place"
                );
                fairlane::task::yield_now().await;
                moved = fs::try_exists(&b).await.unwrap();
                left = fs::try_exists(&a).await.unwrap();
            }
        }
        // The runtime is unharmed: path operations still work.
        fs::create_dir(tmp.join("after")).await.unwrap();
        assert!(fs::metadata(tmp.join("after")).await.unwrap().is_dir());
    });
}

/// Used where no fairlane runtime is current (here a plain executor on
/// the test's thread), operations fail with an error instead of
/// panicking.
fn outside_a_runtime_is_an_error(backend: IoBackend) {
    let rt = runtime(backend);
    let tmp = TempDir::new("outside", backend);
    let path = tmp.join("f");
    let file = rt.block_on(async {
        fs::write(&path, "x").await.unwrap();
        fs::File::open(&path).await.unwrap()
    });
    let outside = |r: io::Result<()>| {
        let err = r.unwrap_err();
        assert!(
            err.to_string().contains("fairlane runtime"),
            "unexpected error: {err}"
        );
    };
    futures_lite::future::block_on(async {
        outside(file.metadata().await.map(drop));
        outside(fs::metadata(&path).await.map(drop));
        outside(fs::read(&path).await.map(drop));
        outside(fs::rename(&path, tmp.join("g")).await);
        outside(fs::read_dir(&tmp.0).await.map(drop));
    });
    assert!(path.exists(), "nothing was renamed");
    drop(file);
}
