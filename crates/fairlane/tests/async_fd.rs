//! `io::unix::AsyncFd` on descriptors fairlane does not wrap itself (a
//! pipe, an eventfd), on both I/O backends: readiness arrives when the
//! other end acts, `try_io` clears it on `WouldBlock`, a pending wait can
//! be dropped, and a blocking descriptor is refused.

mod common;

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

use fairlane::io::unix::AsyncFd;
use fairlane::io::IoBackend;
use futures_lite::future::poll_once;

common::on_both_backends!(
    pipe_readable_when_the_writer_writes,
    pipe_writable_when_the_reader_drains,
    eventfd_readiness_from_another_task,
    dropping_a_pending_wait_is_fine,
    a_blocking_descriptor_is_refused,
    mut_guards_give_mutable_access,
);

/// A pipe (read end, write end) with `flags` on both.
fn pipe(flags: libc::c_int) -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a live array of two descriptors for pipe2 to fill.
    assert_eq!(
        unsafe { libc::pipe2(fds.as_mut_ptr(), flags | libc::O_CLOEXEC) },
        0
    );
    // SAFETY: pipe2 just created both descriptors; nobody else owns them.
    unsafe {
        (
            File::from(OwnedFd::from_raw_fd(fds[0])),
            File::from(OwnedFd::from_raw_fd(fds[1])),
        )
    }
}

fn pipe_readable_when_the_writer_writes(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (r, mut w) = pipe(libc::O_NONBLOCK);
        let fd = AsyncFd::new(r).unwrap();
        let mut buf = [0u8; 3];
        {
            let mut readable = std::pin::pin!(fd.readable());
            assert!(
                poll_once(&mut readable).await.is_none(),
                "nothing written yet"
            );
            w.write_all(b"hello").unwrap();
            let mut guard = readable.await.unwrap();
            // Part of it, then the rest: readiness is still there.
            let n = guard
                .try_io(|f| f.get_ref().read(&mut buf))
                .unwrap()
                .unwrap();
            assert_eq!(&buf[..n], b"hel");
        }
        let mut guard = fd.readable().await.unwrap();
        let n = guard
            .try_io(|f| f.get_ref().read(&mut buf))
            .unwrap()
            .unwrap();
        assert_eq!(&buf[..n], b"lo");
        // Drained: `try_io` sees `WouldBlock` and clears the readiness.
        assert!(guard.is_ready());
        assert!(guard.try_io(|f| f.get_ref().read(&mut buf)).is_err());
        assert!(!guard.is_ready());
        {
            let mut readable = std::pin::pin!(fd.readable());
            assert!(poll_once(&mut readable).await.is_none(), "drained");
            drop(w);
            // The end of the input is readable too.
            let mut guard = readable.await.unwrap();
            let n = guard
                .try_io(|f| f.get_ref().read(&mut buf))
                .unwrap()
                .unwrap();
            assert_eq!(n, 0);
        }
        let r: File = fd.into_inner();
        assert_eq!(
            (&r).read(&mut buf).unwrap(),
            0,
            "still open after into_inner"
        );
    });
}

fn pipe_writable_when_the_reader_drains(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut r, w) = pipe(libc::O_NONBLOCK);
        let fd = AsyncFd::new(w).unwrap();
        let chunk = [7u8; 4096];
        let mut written = 0;
        // Fill the pipe (non-blocking writes until it would block).
        loop {
            match fd.get_ref().write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        assert!(written >= 4096);
        let mut writable = std::pin::pin!(fd.writable());
        assert!(poll_once(&mut writable).await.is_none(), "the pipe is full");
        let mut sink = vec![0u8; written];
        r.read_exact(&mut sink).unwrap();
        let mut guard = writable.await.unwrap();
        let n = guard.try_io(|f| f.get_ref().write(b"x")).unwrap().unwrap();
        assert_eq!(n, 1);
    });
}

fn eventfd_readiness_from_another_task(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 2);
    rt.block_on(async {
        // SAFETY: plain system call; the new descriptor is owned below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(efd >= 0);
        // SAFETY: eventfd just created it; nobody else owns it.
        let fd = std::sync::Arc::new(AsyncFd::new(unsafe { OwnedFd::from_raw_fd(efd) }).unwrap());
        let writer = fd.clone();
        let read_count = |fd: &AsyncFd<OwnedFd>| {
            let mut v = 0u64;
            // SAFETY: reads 8 bytes into the live local.
            let n = unsafe { libc::read(fd.get_ref_raw(), (&mut v as *mut u64).cast(), 8) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(v)
            }
        };
        let mut total = 0;
        let task = fairlane::spawn(async move {
            for _ in 0..3 {
                fairlane::time::sleep(std::time::Duration::from_millis(5)).await;
                let one = 1u64;
                // SAFETY: writes 8 bytes from the live local.
                let n =
                    unsafe { libc::write(writer.get_ref_raw(), (&one as *const u64).cast(), 8) };
                assert_eq!(n, 8);
            }
        });
        while total < 3 {
            let mut guard = fd.readable().await.unwrap();
            match guard.try_io(read_count) {
                Ok(v) => total += v.unwrap(),
                Err(_would_block) => {}
            }
        }
        assert_eq!(total, 3);
        task.await.unwrap();
    });
}

/// The raw descriptor of the wrapped `OwnedFd`.
trait RawOf {
    fn get_ref_raw(&self) -> std::os::fd::RawFd;
}

impl RawOf for AsyncFd<OwnedFd> {
    fn get_ref_raw(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.get_ref().as_raw_fd()
    }
}

fn dropping_a_pending_wait_is_fine(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (r, mut w) = pipe(libc::O_NONBLOCK);
        let fd = AsyncFd::new(r).unwrap();
        for _ in 0..3 {
            let mut readable = std::pin::pin!(fd.readable());
            assert!(poll_once(&mut readable).await.is_none());
        }
        w.write_all(b"x").unwrap();
        let mut guard = fd.readable().await.unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(
            guard
                .try_io(|f| f.get_ref().read(&mut buf))
                .unwrap()
                .unwrap(),
            1
        );
        // A wait still pending when the AsyncFd goes.
        let mut readable = Box::pin(fd.readable());
        assert!(poll_once(&mut readable).await.is_none());
        drop(readable);
        drop(fd);
        fairlane::time::sleep(std::time::Duration::from_millis(1)).await;
    });
}

fn a_blocking_descriptor_is_refused(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (r, _w) = pipe(0);
        let err = AsyncFd::new(r).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("non-blocking"), "{err}");
    });
    let (r, _w) = pipe(libc::O_NONBLOCK);
    let err = AsyncFd::new(r).unwrap_err();
    assert!(
        err.to_string().contains("inside a fairlane runtime"),
        "{err}"
    );
}

fn mut_guards_give_mutable_access(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (r, w) = pipe(libc::O_NONBLOCK);
        let mut rfd = AsyncFd::new(r).unwrap();
        let mut wfd = AsyncFd::new(w).unwrap();
        {
            let mut readable = std::pin::pin!(rfd.readable_mut());
            assert!(
                poll_once(&mut readable).await.is_none(),
                "nothing written yet"
            );
        }
        let mut guard = wfd.writable_mut().await.unwrap();
        let n = guard
            .try_io(|f| f.get_mut().write(b"mut"))
            .unwrap()
            .unwrap();
        assert_eq!(n, 3);
        let mut buf = [0u8; 8];
        let mut guard = rfd.readable_mut().await.unwrap();
        let n = guard
            .try_io(|f| f.get_mut().read(&mut buf))
            .unwrap()
            .unwrap();
        assert_eq!(&buf[..n], b"mut");
        assert!(guard.try_io(|f| f.get_mut().read(&mut buf)).is_err());
        assert!(!guard.is_ready());
    });
}
