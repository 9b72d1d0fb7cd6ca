//! `fairlane::fs::DirBuilder` on both I/O backends: one level or
//! recursive, the permission bits asked for, and the error cases.

mod common;

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fairlane::fs::{self, DirBuilder};
use fairlane::io::IoBackend;

/// This process's umask, from `/proc/self/status` (reading it with
/// `umask(2)` would change it for the other tests' threads meanwhile).
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A directory of its own for one test, removed when dropped.
struct Base(PathBuf);

impl Drop for Base {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

common::on_both_backends!(dir_builder);

fn dir_builder(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 2);
    let base = Base(std::env::temp_dir().join(format!(
        "fairlane-fs-dir-builder-{}-{backend}",
        std::process::id()
    )));
    let dir = |name: &str| base.0.join(name);
    let umask = umask();
    rt.block_on(async {
        std::fs::create_dir(&base.0).unwrap();
        // One level.
        DirBuilder::new().create(dir("a")).await.unwrap();
        assert!(dir("a").is_dir());
        assert_eq!(mode_of(&dir("a")), 0o777 & !umask);
        let err = DirBuilder::new().create(dir("a")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        let err = DirBuilder::new()
            .recursive(false)
            .create(dir("x/y"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        // Recursive: parents too, and what is there already is fine.
        let mut recursive = DirBuilder::new();
        recursive.recursive(true);
        recursive.create(dir("x/y/z")).await.unwrap();
        assert!(dir("x/y/z").is_dir());
        recursive.create(dir("x/y/z")).await.unwrap();
        recursive.create(dir("x")).await.unwrap();
        // A file in the way.
        fs::write(dir("file"), b"x").await.unwrap();
        let err = recursive.create(dir("file")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        let err = recursive.create(dir("file/sub")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotADirectory);
        let err = DirBuilder::new().create(dir("file/sub")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotADirectory);
        // The mode, less the umask, one level and recursive.
        DirBuilder::new()
            .mode(0o750)
            .create(dir("m"))
            .await
            .unwrap();
        assert_eq!(mode_of(&dir("m")), 0o750 & !umask);
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir("r1/r2"))
            .await
            .unwrap();
        assert_eq!(mode_of(&dir("r1")), 0o700 & !umask);
        assert_eq!(mode_of(&dir("r1/r2")), 0o700 & !umask);
        // A NUL byte is bad input, both ways.
        for recursive in [false, true] {
            let err = DirBuilder::new()
                .recursive(recursive)
                .create("bad\0dir")
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
        }
    });
}
