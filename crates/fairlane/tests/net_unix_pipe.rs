//! `net::unix::pipe`: anonymous pipes, FIFOs opened with `OpenOptions`
//! (reader first; sender first fails with ENXIO unless read-write; a
//! read-write receiver waits for the next writer), the checks of
//! `from_file`, the descriptors' modes, and the non-blocking and trait
//! I/O, on both I/O backends.

mod common;

use std::fs::File;
use std::io::{ErrorKind, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use fairlane::io::{Interest, IoBackend};
use fairlane::net::unix::pipe;
use futures_lite::future::poll_once;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

common::on_both_backends!(
    anonymous_pipe_to_the_end,
    fifo_reader_first,
    fifo_sender_first,
    fifo_read_write_receiver_outlives_writers,
    open_and_from_file_check_the_file,
    descriptor_modes,
    try_calls_and_vectored,
);

/// A FIFO in the temporary directory, removed on drop.
struct Fifo(PathBuf);

impl Fifo {
    fn new(name: &str, backend: IoBackend) -> Fifo {
        let path = std::env::temp_dir().join(format!(
            "fairlane-fifo-{name}-{}-{backend:?}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        Fifo(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A FIFO opened read-only without waiting for a writer.
fn open_nonblocking_read(path: &Path) -> File {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap()
}

fn is_nonblocking(fd: &impl AsFd) -> bool {
    // SAFETY: fcntl on a live descriptor, no pointers.
    let flags = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0);
    flags & libc::O_NONBLOCK != 0
}

fn anonymous_pipe_to_the_end(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 2);
    rt.block_on(async {
        let (mut tx, mut rx) = pipe::pipe().unwrap();
        let mut read = std::pin::pin!(async {
            let mut got = Vec::new();
            rx.read_to_end(&mut got).await.unwrap();
            got
        });
        assert!(poll_once(&mut read).await.is_none(), "nothing written yet");
        // More than a pipe holds: the writer waits for the reader.
        let big: Vec<u8> = (0..512 * 1024u32).map(|i| i as u8).collect();
        let writer = fairlane::spawn({
            let big = big.clone();
            async move {
                tx.write_all(&big).await.unwrap();
                tx.close().await.unwrap();
            }
        });
        assert_eq!(read.await, big);
        writer.await.unwrap();
    });
}

fn fifo_reader_first(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let fifo = Fifo::new("reader-first", backend);
    rt.block_on(async {
        let mut rx = pipe::OpenOptions::new().open_receiver(fifo.path()).unwrap();
        let mut buf = [0u8; 4];
        {
            let mut read = std::pin::pin!(rx.read_exact(&mut buf));
            assert!(poll_once(&mut read).await.is_none(), "no writer yet");
            let mut tx = pipe::OpenOptions::new().open_sender(fifo.path()).unwrap();
            tx.write_all(b"fifo").await.unwrap();
            read.await.unwrap();
        }
        assert_eq!(&buf, b"fifo");
        // The writer is gone: the end of the stream.
        assert_eq!(rx.read(&mut buf).await.unwrap(), 0);
    });
}

fn fifo_sender_first(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let fifo = Fifo::new("sender-first", backend);
    rt.block_on(async {
        let err = pipe::OpenOptions::new()
            .open_sender(fifo.path())
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENXIO));
        let mut tx = pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(fifo.path())
            .unwrap();
        tx.write_all(b"early").await.unwrap();
        let mut rx = pipe::OpenOptions::new().open_receiver(fifo.path()).unwrap();
        let mut buf = [0u8; 5];
        rx.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"early");
    });
}

fn fifo_read_write_receiver_outlives_writers(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let fifo = Fifo::new("resilient", backend);
    rt.block_on(async {
        let mut rx = pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(fifo.path())
            .unwrap();
        let write_and_close = |msg: &'static [u8]| {
            let path = fifo.path().to_owned();
            async move {
                let mut tx = pipe::OpenOptions::new().open_sender(&path).unwrap();
                tx.write_all(msg).await.unwrap();
            }
        };
        write_and_close(b"one").await;
        let ready = rx.ready(Interest::READABLE).await.unwrap();
        assert!(!ready.is_read_closed(), "the receiver holds a write end");
        let mut buf = [0u8; 3];
        rx.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"one");
        {
            let mut next = std::pin::pin!(rx.read_exact(&mut buf));
            assert!(poll_once(&mut next).await.is_none(), "waits for a writer");
            write_and_close(b"two").await;
            next.await.unwrap();
        }
        assert_eq!(&buf, b"two");
    });
}

fn open_and_from_file_check_the_file(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let fifo = Fifo::new("checks", backend);
    let plain = std::env::temp_dir().join(format!(
        "fairlane-not-fifo-{}-{backend:?}",
        std::process::id()
    ));
    std::fs::write(&plain, b"").unwrap();
    rt.block_on(async {
        let err = pipe::OpenOptions::new().open_sender(&plain).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let err = pipe::OpenOptions::new().open_receiver(&plain).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(pipe::OpenOptions::new()
            .unchecked(true)
            .open_receiver(fifo.path())
            .is_ok());
        let err = pipe::Sender::from_file(File::open(&plain).unwrap()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        // The wrong access mode.
        let _rx = pipe::OpenOptions::new().open_receiver(fifo.path()).unwrap();
        let write_only = std::fs::OpenOptions::new()
            .write(true)
            .open(fifo.path())
            .unwrap();
        let err = pipe::Receiver::from_file(write_only).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let read_only = open_nonblocking_read(fifo.path());
        let err = pipe::Sender::from_file(read_only).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        // The right one, made non-blocking.
        let rx = pipe::Receiver::from_file(open_nonblocking_read(fifo.path())).unwrap();
        assert!(is_nonblocking(&rx));
        let tx = std::fs::OpenOptions::new()
            .write(true)
            .open(fifo.path())
            .unwrap();
        let tx = pipe::Sender::from_file(tx).unwrap();
        assert!(is_nonblocking(&tx));
    });
    std::fs::remove_file(&plain).unwrap();
}

fn descriptor_modes(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (tx, rx) = pipe::pipe().unwrap();
        let (tx, rx) = (
            tx.into_nonblocking_fd().unwrap(),
            rx.into_nonblocking_fd().unwrap(),
        );
        assert!(is_nonblocking(&tx) && is_nonblocking(&rx));
        let mut tx = pipe::Sender::from_owned_fd(tx).unwrap();
        let mut rx = pipe::Receiver::from_owned_fd(rx).unwrap();
        tx.write_all(b"again").await.unwrap();
        let mut buf = [0u8; 5];
        rx.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"again");
        let (tx, rx) = (
            tx.into_blocking_fd().unwrap(),
            rx.into_blocking_fd().unwrap(),
        );
        assert!(!is_nonblocking(&tx) && !is_nonblocking(&rx));
    });
}

fn try_calls_and_vectored(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (tx, rx) = pipe::pipe().unwrap();
        let err = rx.try_read(&mut [0u8; 4]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        let mut written = 0;
        {
            let mut readable = std::pin::pin!(rx.readable());
            assert!(poll_once(&mut readable).await.is_none());
            // Fill the pipe: then the writer is not writable.
            let chunk = [7u8; 4096];
            loop {
                match tx.try_write(&chunk) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            }
            readable.await.unwrap();
        }
        let mut writable = std::pin::pin!(tx.writable());
        assert!(poll_once(&mut writable).await.is_none(), "the pipe is full");
        let mut buf = vec![0u8; 64 * 1024];
        let mut read = 0;
        while read < written {
            match rx.try_read(&mut buf) {
                Ok(n) => read += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => rx.readable().await.unwrap(),
                Err(e) => panic!("{e}"),
            }
        }
        writable.await.unwrap();
        let n = tx
            .try_write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")])
            .unwrap();
        assert_eq!(n, 4);
        rx.readable().await.unwrap();
        let (mut a, mut b) = ([0u8; 1], [0u8; 8]);
        let n = rx
            .try_read_vectored(&mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)])
            .unwrap();
        assert_eq!((n, &a, &b[..3]), (4, b"a", &b"bcd"[..]));
        // No reader left: writes fail.
        drop(rx);
        assert_eq!(
            tx.try_write(b"x").unwrap_err().kind(),
            ErrorKind::BrokenPipe
        );
    });
}
