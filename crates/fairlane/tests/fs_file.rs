//! `fairlane::fs::File` with tokio's shape, on both I/O backends: tokio's
//! and futures-io's I/O traits over the internal cursor, background writes
//! (their errors, their completion after the file is dropped), bytes read
//! ahead given back to the cursor, `&self` calls from several tasks, the
//! conversions to and from `std::fs::File`, and the other methods.

mod common;

use std::ffi::CString;
use std::io::{self, ErrorKind, IoSlice, Read, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime};

use fairlane::fs::{self, File, OpenOptions};
use fairlane::io::IoBackend;
use futures_lite::future::poll_once;

/// A path of its own for one test; the file is removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str, backend: IoBackend) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        Scratch(std::env::temp_dir().join(format!(
            "fairlane-fs-file-{}-{tag}-{backend}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )))
    }

    /// A named pipe at this path.
    fn fifo(tag: &str, backend: IoBackend) -> Scratch {
        let scratch = Scratch::new(tag, backend);
        let c = CString::new(scratch.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        scratch
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path).await
}

common::on_both_backends!(
    tokio_traits,
    futures_traits,
    read_ahead_is_given_back,
    random_operations_match_a_model,
    background_write_errors_come_back,
    a_dropped_file_finishes_its_write,
    shared_file_calls_take_turns,
    max_buf_size_bounds_each_operation,
    conversions_to_and_from_std,
    open_options_from_std,
    other_methods,
);

fn tokio_traits(backend: IoBackend) {
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
    let rt = common::backend_runtime(backend, 2);
    let path = Scratch::new("tokio", backend);
    rt.block_on(async {
        let mut file = File::create_new(&*path).await.unwrap();
        file.write_all(b"hello ").await.unwrap();
        let n = file
            .write_vectored(&[IoSlice::new(b"wor"), IoSlice::new(b"ld")])
            .await
            .unwrap();
        assert_eq!(n, 5);
        file.flush().await.unwrap();
        assert_eq!(std::fs::read(&*path).unwrap(), b"hello world");
        assert_eq!(file.stream_position().await.unwrap(), 11);
        assert_eq!(file.seek(SeekFrom::End(-5)).await.unwrap(), 6);
        let mut word = [0; 5];
        file.read_exact(&mut word).await.unwrap();
        assert_eq!(&word, b"world");
        let mut rest = Vec::new();
        assert_eq!(file.read_to_end(&mut rest).await.unwrap(), 0, "at the end");
        file.rewind().await.unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "hello world");
        // Past the end: a hole of zeros.
        file.seek(SeekFrom::Start(13)).await.unwrap();
        file.write_all(b"!").await.unwrap();
        file.shutdown().await.unwrap();
        assert_eq!(std::fs::read(&*path).unwrap(), b"hello world\0\0!");
        let err = file.seek(SeekFrom::Current(-100)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            file.stream_position().await.unwrap(),
            14,
            "a failed seek moves nothing"
        );
        // A read of nothing is ready at once and is not the end.
        file.rewind().await.unwrap();
        assert_eq!(file.read(&mut []).await.unwrap(), 0);
        assert_eq!(file.read_u8().await.unwrap(), b'h');
    });
}

fn futures_traits(backend: IoBackend) {
    use futures_lite::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
    let rt = common::backend_runtime(backend, 2);
    let path = Scratch::new("futures", backend);
    rt.block_on(async {
        let mut file = File::create_new(&*path).await.unwrap();
        file.write_all(b"hello").await.unwrap();
        let n = file
            .write_vectored(&[IoSlice::new(b" "), IoSlice::new(b"world")])
            .await
            .unwrap();
        assert_eq!(n, 6);
        file.close().await.unwrap();
        assert_eq!(std::fs::read(&*path).unwrap(), b"hello world");
        assert_eq!(file.seek(SeekFrom::Current(0)).await.unwrap(), 11);
        assert_eq!(file.seek(SeekFrom::Start(6)).await.unwrap(), 6);
        let mut word = String::new();
        file.read_to_string(&mut word).await.unwrap();
        assert_eq!(word, "world");
        file.seek(SeekFrom::Start(0)).await.unwrap();
        file.write_all(b"J").await.unwrap();
        file.flush().await.unwrap();
        assert_eq!(std::fs::read(&*path).unwrap(), b"Jello world");
        // A seek while a write is in flight waits for it.
        file.write_all(b"E").await.unwrap();
        assert_eq!(file.seek(SeekFrom::End(0)).await.unwrap(), 11);
        assert_eq!(std::fs::read(&*path).unwrap(), b"JEllo world");
    });
}

/// Occupies the runtime's one processor until the returned sender is used
/// (or dropped), so that no task (a file's background operation included)
/// runs meanwhile.
fn occupy_the_processor() -> mpsc::Sender<()> {
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    drop(fairlane::spawn(async move {
        started_tx.send(()).unwrap();
        let _ = released.recv_timeout(common::DEADLINE);
    }));
    started.recv_timeout(common::DEADLINE).unwrap();
    release
}

/// Leaves `file`'s next bytes (up to 64) read ahead: a read is started
/// while its background operation cannot finish, and its future dropped,
/// so that the operation's bytes stay in the file's buffer and the
/// kernel's offset is past them. Needs a one-processor runtime.
async fn leave_read_ahead(file: &mut File) {
    use tokio::io::AsyncReadExt;
    let release = occupy_the_processor();
    let mut buf = [0u8; 64];
    assert!(
        poll_once(file.read(&mut buf)).await.is_none(),
        "the read cannot finish while the processor is occupied"
    );
    drop(release);
}

/// After a read whose bytes the caller never took, every way of going on
/// works from the caller's position, not the kernel's offset past them.
fn read_ahead_is_given_back(backend: IoBackend) {
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
    let rt = common::backend_runtime(backend, 1);
    let path = Scratch::new("read-ahead", backend);
    rt.block_on(async {
        let reset = || std::fs::write(&*path, b"0123456789").unwrap();
        // A write lands at the caller's position.
        reset();
        let mut file = open_rw(&path).await.unwrap();
        file.read_exact(&mut [0; 2]).await.unwrap();
        leave_read_ahead(&mut file).await;
        file.write_all(b"ab").await.unwrap();
        file.flush().await.unwrap();
        assert_eq!(std::fs::read(&*path).unwrap(), b"01ab456789");
        // So does an owned-buffer write.
        reset();
        let mut file = open_rw(&path).await.unwrap();
        leave_read_ahead(&mut file).await;
        file.write_all_owned(b"xy".to_vec()).await.0.unwrap();
        assert_eq!(std::fs::read(&*path).unwrap(), b"xy23456789");
        // Reads hand the read-ahead out first, whichever kind.
        reset();
        let mut file = open_rw(&path).await.unwrap();
        leave_read_ahead(&mut file).await;
        let (n, buf) = file.read_owned(vec![0u8; 3].into_boxed_slice()).await;
        assert_eq!((n.unwrap(), &buf[..]), (3, &b"012"[..]));
        let mut rest = Vec::new();
        file.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"3456789");
        // A relative seek counts from the caller's position.
        let mut file = open_rw(&path).await.unwrap();
        file.read_exact(&mut [0; 1]).await.unwrap();
        leave_read_ahead(&mut file).await;
        assert_eq!(file.stream_position().await.unwrap(), 1);
        assert_eq!(file.seek(SeekFrom::Current(2)).await.unwrap(), 3);
        assert_eq!(file.read_u8().await.unwrap(), b'3');
        // ... also when it fails: the position stays the caller's.
        leave_read_ahead(&mut file).await;
        let err = file.seek(SeekFrom::Current(-5)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(file.read_u8().await.unwrap(), b'4');
        // A clone, the standard file, and truncation start there too.
        let mut file = open_rw(&path).await.unwrap();
        file.read_exact(&mut [0; 4]).await.unwrap();
        leave_read_ahead(&mut file).await;
        let mut clone = file.try_clone().await.unwrap();
        assert_eq!(clone.read_u8().await.unwrap(), b'4');
        leave_read_ahead(&mut file).await;
        file.set_len(8).await.unwrap();
        let mut rest = Vec::new();
        file.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"567");
        let mut file = open_rw(&path).await.unwrap();
        file.read_exact(&mut [0; 3]).await.unwrap();
        leave_read_ahead(&mut file).await;
        let mut std_file = file.into_std().await;
        let mut rest = String::new();
        std_file.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "34567");
    });
}

/// One step of [`random_operations_match_a_model`].
enum Step {
    Write(Vec<u8>),
    WriteAll(Vec<u8>),
    WriteAllOwned(Vec<u8>),
    Read(usize),
    ReadOwned(usize),
    /// A read polled once and dropped: it may or may not have happened.
    CancelledRead(usize),
    Seek(SeekFrom),
    SetLen(u64),
    Flush,
}

impl std::fmt::Debug for Step {
    /// The written bytes by their count only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Write(data) => write!(f, "Write({} bytes)", data.len()),
            Step::WriteAll(data) => write!(f, "WriteAll({} bytes)", data.len()),
            Step::WriteAllOwned(data) => write!(f, "WriteAllOwned({} bytes)", data.len()),
            Step::Read(len) => write!(f, "Read({len})"),
            Step::ReadOwned(len) => write!(f, "ReadOwned({len})"),
            Step::CancelledRead(len) => write!(f, "CancelledRead({len})"),
            Step::Seek(to) => write!(f, "Seek({to:?})"),
            Step::SetLen(size) => write!(f, "SetLen({size})"),
            Step::Flush => write!(f, "Flush"),
        }
    }
}

fn random_step(rng: &mut common::Rng, len: u64) -> Step {
    let bytes = |rng: &mut common::Rng| -> Vec<u8> {
        (0..rng.below(3000)).map(|_| rng.below(256) as u8).collect()
    };
    match rng.below(9) {
        0 => Step::Write(bytes(rng)),
        1 => Step::WriteAll(bytes(rng)),
        2 => Step::WriteAllOwned(bytes(rng)),
        3 => Step::Read(1 + rng.below(3000)),
        4 => Step::ReadOwned(1 + rng.below(3000)),
        5 => Step::CancelledRead(1 + rng.below(3000)),
        6 => Step::Seek(match rng.below(3) {
            0 => SeekFrom::Start(rng.below(len as usize + 100) as u64),
            1 => SeekFrom::Current(rng.below(200) as i64 - 50),
            _ => SeekFrom::End(-(rng.below(len as usize + 1) as i64)),
        }),
        7 => Step::SetLen(rng.below(len as usize + 500) as u64),
        _ => Step::Flush,
    }
}

/// Checks that a read into a buffer of `len` bytes that gave `got` gave
/// the model's next bytes, and something unless at the end; moves the
/// model past them.
fn model_read(model: &mut io::Cursor<Vec<u8>>, got: &[u8], len: usize, context: &str) {
    assert!(got.len() <= len, "{context}");
    let at = (model.position() as usize).min(model.get_ref().len());
    let left = model.get_ref().len() - at;
    assert_eq!(got.is_empty(), left == 0, "{context}: {} bytes left", left);
    assert!(got == &model.get_ref()[at..at + got.len()], "{context}");
    // A read at or past the end moves nothing.
    model.set_position(model.position() + got.len() as u64);
}

/// Random reads, writes (through the traits and the owned-buffer methods),
/// seeks, truncations, flushes and cancelled reads, with a small
/// `max_buf_size`, give the same bytes as the same steps on an in-memory
/// file: no byte is lost, duplicated or reordered.
fn random_operations_match_a_model(backend: IoBackend) {
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
    let rt = common::backend_runtime(backend, 2);
    let path = Scratch::new("model", backend);
    rt.block_on(async {
        let mut file = File::create_new(&*path).await.unwrap();
        file.set_max_buf_size(1000);
        let mut model = io::Cursor::new(Vec::new());
        let mut rng = common::Rng::new(0x5eed_f11e);
        for i in 0..400 {
            let step = random_step(&mut rng, model.get_ref().len() as u64);
            let context = format!("step {i}: {step:?}");
            match step {
                Step::Write(data) => {
                    let n = file.write(&data).await.unwrap();
                    assert_eq!(n, data.len().min(1000), "{context}");
                    io::Write::write_all(&mut model, &data[..n]).unwrap();
                }
                Step::WriteAll(data) => {
                    file.write_all(&data).await.unwrap();
                    io::Write::write_all(&mut model, &data).unwrap();
                }
                Step::WriteAllOwned(data) => {
                    let (r, data) = file.write_all_owned(data).await;
                    r.unwrap();
                    io::Write::write_all(&mut model, &data).unwrap();
                }
                Step::Read(len) => {
                    let mut got = vec![0; len];
                    let n = file.read(&mut got).await.unwrap();
                    model_read(&mut model, &got[..n], len, &context);
                }
                Step::ReadOwned(len) => {
                    let (n, got) = file.read_owned(vec![0u8; len].into_boxed_slice()).await;
                    model_read(&mut model, &got[..n.unwrap()], len, &context);
                }
                Step::CancelledRead(len) => {
                    let mut got = vec![0; len];
                    if let Some(n) = poll_once(file.read(&mut got)).await {
                        model_read(&mut model, &got[..n.unwrap()], len, &context);
                    }
                }
                Step::Seek(to) => match (file.seek(to).await, io::Seek::seek(&mut model, to)) {
                    (Ok(got), Ok(want)) => assert_eq!(got, want, "{context}"),
                    (Err(got), Err(want)) => assert_eq!(got.kind(), want.kind(), "{context}"),
                    (got, want) => panic!("{context}: {got:?}, the model {want:?}"),
                },
                Step::SetLen(size) => {
                    file.set_len(size).await.unwrap();
                    model.get_mut().resize(size as usize, 0);
                }
                Step::Flush => file.flush().await.unwrap(),
            }
            // Not after every step: asking moves back over the read-ahead
            // a cancelled read leaves, which the next step should meet.
            if i % 5 == 0 {
                let position = file.stream_position().await.unwrap();
                assert_eq!(position, model.position(), "{context}");
            }
        }
        file.flush().await.unwrap();
        assert!(std::fs::read(&*path).unwrap() == *model.get_ref());
    });
}

fn background_write_errors_come_back(backend: IoBackend) {
    use tokio::io::AsyncWriteExt;
    if !Path::new("/dev/full").exists() {
        return;
    }
    let rt = common::backend_runtime(backend, 2);
    rt.block_on(async {
        async fn full() -> io::Result<File> {
            File::options().write(true).open("/dev/full").await
        }
        let is_full = |e: io::Error| {
            assert_eq!(e.kind(), ErrorKind::StorageFull);
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        };
        // Taken into the buffer: done, as far as the write goes.
        let mut file = full().await.unwrap();
        assert_eq!(file.write(b"x").await.unwrap(), 1);
        is_full(file.flush().await.unwrap_err());
        file.flush().await.unwrap(); // reported once
                                     // The next write reports it.
        assert_eq!(file.write(b"x").await.unwrap(), 1);
        is_full(file.write(b"y").await.unwrap_err());
        // ... and so does sync_all (rather than succeed), and the
        // owned-buffer writes.
        file.write_all(b"z").await.unwrap();
        is_full(file.sync_all().await.unwrap_err());
        file.write_all(b"z").await.unwrap();
        is_full(file.write_all_owned(b"w".to_vec()).await.0.unwrap_err());
    });
}

/// Reads `n` bytes from the named pipe `path` on a plain thread (opening
/// its read end) and hands them back.
fn drain_fifo(path: &Path, n: usize) -> std::thread::JoinHandle<Vec<u8>> {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut reader = std::fs::File::open(path).unwrap();
        let mut got = vec![0; n];
        reader.read_exact(&mut got).unwrap();
        got
    })
}

/// A write into a pipe nobody reads stays in flight; the file is dropped
/// meanwhile; the reader that comes later gets every byte, in order.
fn a_dropped_file_finishes_its_write(backend: IoBackend) {
    use tokio::io::AsyncWriteExt;
    let rt = common::backend_runtime(backend, 2);
    let fifo = Scratch::fifo("dropped", backend);
    // More than a pipe holds.
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let got = rt.block_on(async {
        // Read and write: opening does not wait for a reader.
        let mut file = open_rw(&fifo).await.unwrap();
        file.write_all(&data).await.unwrap();
        // The write is in flight: no standard file yet.
        let file = file.try_into_std().unwrap_err();
        drop(file);
        let reader = drain_fifo(&fifo, data.len());
        fairlane::task::spawn_blocking(move || reader.join().unwrap())
            .await
            .unwrap()
    });
    assert!(got == data);
}

/// `&self` calls from several tasks: each waits for the background write
/// in flight (none is left waiting when it ends), and the owned-buffer
/// writes of different tasks do not interleave.
fn shared_file_calls_take_turns(backend: IoBackend) {
    use tokio::io::AsyncWriteExt;
    let rt = common::backend_runtime(backend, 2);
    let fifo = Scratch::fifo("turns", backend);
    let path = Scratch::new("turns", backend);
    rt.block_on(async {
        let mut file = open_rw(&fifo).await.unwrap();
        let data = vec![7u8; 200_000];
        file.write_all(&data).await.unwrap();
        let file = Arc::new(file);
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let file = file.clone();
                fairlane::spawn(async move { file.try_clone().await.map(drop) })
            })
            .collect();
        let reader = drain_fifo(&fifo, data.len());
        for waiter in waiters {
            waiter.await.unwrap().unwrap();
        }
        assert!(reader.join().unwrap() == data);

        let file = Arc::new(File::create_new(&*path).await.unwrap());
        let writers: Vec<_> = (0..4u8)
            .map(|t| {
                let file = file.clone();
                fairlane::spawn(async move {
                    for _ in 0..50 {
                        file.write_all_owned(vec![b'a' + t; 300]).await.0.unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
    });
    let written = std::fs::read(&*path).unwrap();
    assert_eq!(written.len(), 4 * 50 * 300);
    for chunk in written.chunks(300) {
        assert!(chunk.iter().all(|&b| b == chunk[0]), "a write was split");
    }
}

fn max_buf_size_bounds_each_operation(backend: IoBackend) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = common::backend_runtime(backend, 2);
    let path = Scratch::new("max-buf", backend);
    rt.block_on(async {
        let mut file = File::create_new(&*path).await.unwrap();
        assert_eq!(file.max_buf_size(), 2 * 1024 * 1024);
        file.set_max_buf_size(3);
        assert_eq!(file.write(b"hello").await.unwrap(), 3);
        file.write_all(b"lo world").await.unwrap();
        file.flush().await.unwrap();
        let mut file = File::open(&*path).await.unwrap();
        file.set_max_buf_size(4);
        let mut buf = [0; 64];
        assert_eq!(file.read(&mut buf).await.unwrap(), 4);
        assert_eq!(&buf[..4], b"hell");
        let clone = file.try_clone().await.unwrap();
        assert_eq!(clone.max_buf_size(), 4);
        let panic =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.set_max_buf_size(0)))
                .unwrap_err();
        let message = panic.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(message.contains("must be greater than 0"), "{message}");
    });
}

fn conversions_to_and_from_std(backend: IoBackend) {
    use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = common::backend_runtime(backend, 2);
    let path = Scratch::new("std", backend);
    std::fs::write(&*path, b"0123456789").unwrap();
    // Made outside the runtime; the standard file's cursor is kept.
    let mut std_file = std::fs::File::open(&*path).unwrap();
    std_file.read_exact(&mut [0; 5]).unwrap();
    let mut file = File::from_std(std_file);
    rt.block_on(async {
        let mut rest = String::new();
        file.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "56789");
        let fd = file.into_std().await.into_raw_fd();
        // SAFETY: `fd` was just released by its owner.
        let file = unsafe { File::from_raw_fd(fd) };
        let owned: OwnedFd = file.try_into_std().unwrap().into();
        let mut file = File::from(owned);
        assert_eq!(file.read(&mut [0; 8]).await.unwrap(), 0, "still at the end");
        assert!(format!("{file:?}").starts_with("fairlane::fs::File { std: File { fd:"));
        // into_std waits for the write.
        let mut file = File::create(&*path).await.unwrap();
        file.write_all(b"written").await.unwrap();
        let std_file = file.into_std().await;
        assert_eq!(std::fs::read(&*path).unwrap(), b"written");
        assert!(std_file.as_raw_fd() >= 0);
    });
}

/// Options made from std's open as std's would, setters applied after
/// included, with std's errors.
fn open_options_from_std(backend: IoBackend) {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let rt = common::backend_runtime(backend, 2);
    let path = Scratch::new("std-options", backend);
    rt.block_on(async {
        let mut std_options = std::fs::OpenOptions::new();
        std_options.write(true).create_new(true).mode(0o600);
        let options = OpenOptions::from(std_options);
        let file = options.open(&*path).await.unwrap();
        file.write_all_owned("std").await.0.unwrap();
        let mode = std::fs::metadata(&*path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "no bits for others than the owner");
        let err = options.open(&*path).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        let mut options = OpenOptions::from(std::fs::OpenOptions::new());
        let err = options.open(&*path).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "no access mode");
        let file = options.read(true).open(&*path).await.unwrap();
        let (n, buf) = file.read_to_end_owned(Vec::new()).await;
        assert_eq!((n.unwrap(), &buf[..]), (3, &b"std"[..]));
    });
}

fn other_methods(backend: IoBackend) {
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::AsyncWriteExt;
    let rt = common::backend_runtime(backend, 2);
    let path = Scratch::new("other", backend);
    rt.block_on(async {
        let mut file = File::create_new(&*path).await.unwrap();
        let err = File::create_new(&*path).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        file.write_all(b"data").await.unwrap();
        file.sync_data().await.unwrap();
        file.sync_all().await.unwrap();
        assert_eq!(std::fs::read(&*path).unwrap(), b"data");
        file.set_len(2).await.unwrap();
        assert_eq!(file.metadata().await.unwrap().len(), 2);
        let then = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
        let times = fs::FileTimes::new().set_accessed(then).set_modified(then);
        file.set_times(times).await.unwrap();
        let metadata = file.metadata().await.unwrap();
        assert_eq!(metadata.modified().unwrap(), then);
        assert_eq!(metadata.accessed().unwrap(), then);
        file.set_modified(SystemTime::UNIX_EPOCH).await.unwrap();
        assert_eq!(
            file.metadata().await.unwrap().modified().unwrap(),
            SystemTime::UNIX_EPOCH
        );
        file.set_permissions(std::fs::Permissions::from_mode(0o640))
            .await
            .unwrap();
        let mode = std::fs::metadata(&*path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        let appender = File::options().append(true).open(&*path).await.unwrap();
        appender.write_all_owned("!").await.0.unwrap();
        assert_eq!(std::fs::read(&*path).unwrap(), b"da!");
    });
}

/// Outside a runtime an operation that needs one is an error, not a
/// panic; the file works once inside.
#[test]
fn outside_a_runtime_is_an_error() {
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
    let mut file = File::from_std(std::fs::File::open("/proc/self/stat").unwrap());
    let no_runtime = |e: io::Error| {
        assert!(e.to_string().contains("inside a fairlane runtime"), "{e}");
    };
    futures_lite::future::block_on(async {
        no_runtime(file.read(&mut [0; 8]).await.unwrap_err());
        no_runtime(file.write(b"x").await.unwrap_err());
        no_runtime(file.seek(SeekFrom::Start(0)).await.unwrap_err());
        no_runtime(file.read_owned(Vec::with_capacity(8)).await.0.unwrap_err());
        file.flush().await.unwrap(); // nothing to wait for
    });
    let rt = common::runtime(1);
    let n = rt.block_on(file.read(&mut [0; 8])).unwrap();
    assert!(n > 0);
}
