//! Files on both I/O backends (io_uring ring operations, and the blocking
//! pool of the fallback backend), each test asserting which is active.

mod common;

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use fairlane::fs::{self, File, OpenOptions};
use fairlane::io::IoBackend;
use fairlane::Runtime;

fn runtime(backend: IoBackend) -> Runtime {
    common::backend_runtime(backend, 2)
}

fn temp_path(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "fairlane-fs-test-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

common::on_both_backends!(
    small_round_trip,
    large_file_round_trip,
    positioned_reads_and_writes,
    many_files_from_many_tasks,
    error_cases,
);

fn small_round_trip(backend: IoBackend) {
    let rt = runtime(backend);
    let path = temp_path("small");
    rt.block_on(async {
        // Borrowed bytes (copied), and an owned buffer (not copied).
        let local = String::from("borrowed");
        fs::write(&path, &local[..]).await.unwrap();
        assert_eq!(fs::read(&path).await.unwrap(), b"borrowed");
        fs::write_owned(&path, b"owned".to_vec()).await.unwrap();
        assert_eq!(fs::read(&path).await.unwrap(), b"owned");
        fs::write(&path, "hello, files").await.unwrap();
        assert_eq!(fs::read(&path).await.unwrap(), b"hello, files");
        let file = File::open(&path).await.unwrap();
        assert_eq!(file.metadata().await.unwrap().len(), 12);
        let (n, buf) = file.read_to_end_owned(b"prefix:".to_vec()).await;
        assert_eq!(n.unwrap(), 12);
        assert_eq!(buf, b"prefix:hello, files");
        // At the end now.
        let (n, _) = file.read_to_end_owned(Vec::new()).await;
        assert_eq!(n.unwrap(), 0);
        fs::remove_file(&path).await.unwrap();
        assert!(!path.exists());
    });
}

fn large_file_round_trip(backend: IoBackend) {
    let rt = runtime(backend);
    let path = temp_path("large");
    let data: Vec<u8> = (0..12_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let expected = data.clone();
    rt.block_on(rt.spawn({
        let path = path.clone();
        async move {
            let file = File::create(&path).await.unwrap();
            // Several cursor writes.
            for chunk in data.chunks(5_000_000) {
                let (r, _) = file.write_all_owned(chunk.to_vec()).await;
                r.unwrap();
            }
            file.sync_all().await.unwrap();
            drop(file);
            let got = fs::read(&path).await.unwrap();
            assert_eq!(got.len(), expected.len());
            assert!(got == expected);
            fs::remove_file(&path).await.unwrap();
        }
    }))
    .unwrap();
}

fn positioned_reads_and_writes(backend: IoBackend) {
    let rt = runtime(backend);
    let path = temp_path("pos");
    rt.block_on(async {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .await
            .unwrap();
        let (r, _) = file.write_all_at(&b"world"[..], 6).await;
        r.unwrap();
        let (n, _) = file.write_at(b"hello ".to_vec(), 0).await;
        assert_eq!(n.unwrap(), 6);
        let (n, buf) = file.read_at(Vec::with_capacity(5), 6).await;
        assert_eq!(&buf[..n.unwrap()], b"world");
        let (n, buf) = file.read_at(vec![0u8; 3].into_boxed_slice(), 2).await;
        assert_eq!(n.unwrap(), 3);
        assert_eq!(&buf[..], b"llo");
        let (n, _) = file.read_at(Vec::with_capacity(8), 100).await;
        assert_eq!(n.unwrap(), 0, "reading past the end");
        // Append mode writes at the end whatever the cursor.
        let appender = OpenOptions::new().append(true).open(&path).await.unwrap();
        appender.write_all_owned("!").await.0.unwrap();
        assert_eq!(fs::read(&path).await.unwrap(), b"hello world!");
        fs::remove_file(&path).await.unwrap();
    });
}

fn many_files_from_many_tasks(backend: IoBackend) {
    let rt = runtime(backend);
    let dir = temp_path("dir").join("a/b/c");
    rt.block_on(async {
        fs::create_dir_all(&dir).await.unwrap();
        fs::create_dir_all(&dir).await.unwrap(); // exists: fine
        let tasks: Vec<_> = (0..32)
            .map(|i| {
                let path = dir.join(format!("file-{i}"));
                fairlane::spawn(async move {
                    let contents = format!("file number {i}").repeat(100);
                    fs::write(&path, contents.clone()).await.unwrap();
                    let got = fs::read(&path).await.unwrap();
                    assert_eq!(got, contents.as_bytes());
                    fs::remove_file(&path).await.unwrap();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let _ = std::fs::remove_dir_all(dir.parent().unwrap().parent().unwrap().parent().unwrap());
}

fn error_cases(backend: IoBackend) {
    let rt = runtime(backend);
    let path = temp_path("errors");
    rt.block_on(async {
        let err = File::open("/no/such/dir/file").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        let err = fs::remove_file(&path).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        // A file opened read-only: writing is a bad-descriptor error.
        fs::write(&path, "x").await.unwrap();
        let file = File::open(&path).await.unwrap();
        let (r, _) = file.write_at(b"y".to_vec(), 0).await;
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EBADF));
        // Positions from 2^63 on are bad input, on both backends (io_uring
        // would take all ones for "at the cursor").
        let (r, _) = file.read_at(Vec::with_capacity(4), u64::MAX).await;
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let (r, _) = file.write_all_at(b"y".to_vec(), 1 << 63).await;
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let err = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        // Contradictory options are bad input, not a panic.
        let err = OpenOptions::new().open(&path).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err = File::open("bad\0path").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        // A full disk: /dev/full refuses every write with ENOSPC.
        if std::path::Path::new("/dev/full").exists() {
            let full = OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .await
                .unwrap();
            let (r, _) = full.write_all_owned(vec![0u8; 4096]).await;
            let err = r.unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
            assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        }
        // Directories are not files.
        let err = OpenOptions::new()
            .write(true)
            .open("/tmp")
            .await
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EISDIR));
        fs::remove_file(&path).await.unwrap();
        // The runtime is unharmed.
        assert_eq!(fairlane::spawn(async { 5 }).await.unwrap(), 5);
    });
}
