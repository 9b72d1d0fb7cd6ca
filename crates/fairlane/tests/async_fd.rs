//! `io::unix::AsyncFd` on descriptors fairlane does not wrap itself (a
//! pipe, an eventfd, a socket), on both I/O backends: readiness arrives
//! when the other end acts, `try_io` clears it on `WouldBlock`, a pending
//! wait can be dropped, and a blocking descriptor is refused; `ready` with
//! an `Interest` reports what the descriptor has (`Ready`: readable,
//! writable, closed sides, urgent data, errors), and `with_interest`
//! refuses waits for anything else. The poll-based waits
//! (`poll_read_ready`, `poll_write_ready` and their `_mut` forms) drive
//! `AsyncRead`/`AsyncWrite` implementations, wake the task that polled
//! last, and a wait left armed goes with the `AsyncFd`.

mod common;

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use fairlane::io::unix::AsyncFd;
use fairlane::io::{Interest, IoBackend, Ready};
use futures_lite::future::poll_once;
use futures_lite::{AsyncReadExt, AsyncWriteExt};

common::on_both_backends!(
    pipe_readable_when_the_writer_writes,
    pipe_writable_when_the_reader_drains,
    eventfd_readiness_from_another_task,
    dropping_a_pending_wait_is_fine,
    a_blocking_descriptor_is_refused,
    mut_guards_give_mutable_access,
    ready_reports_what_the_descriptor_has,
    pipe_ends_report_their_closed_sides,
    with_interest_refuses_other_waits,
    priority_data_is_reported,
    urgent_data_arriving_during_the_wait_is_reported,
    an_error_alone_is_reported,
    a_wait_for_both_directions_ends_on_either,
    poll_read_ready_drives_an_async_read,
    poll_write_ready_waits_for_room,
    poll_ready_mut_gives_mutable_access,
    poll_ready_refuses_what_with_interest_left_out,
    the_task_that_polled_last_is_woken,
    a_poll_based_wait_left_armed_is_cancelled_with_the_fd,
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

/// Writes to the non-blocking `w` until it would block (a full pipe or
/// send buffer); how many bytes that took.
fn fill(mut w: impl Write) -> usize {
    let chunk = [7u8; 4096];
    let mut written = 0;
    loop {
        match w.write(&chunk) {
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return written,
            Err(e) => panic!("write: {e}"),
        }
    }
}

fn pipe_writable_when_the_reader_drains(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut r, w) = pipe(libc::O_NONBLOCK);
        let fd = AsyncFd::new(w).unwrap();
        let written = fill(fd.get_ref());
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
        // All of it read: the kept readiness is stale, as with tokio.
        guard.clear_ready();
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

fn ready_reports_what_the_descriptor_has(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let fd = AsyncFd::new(a).unwrap();
        let both = Interest::READABLE | Interest::WRITABLE;
        // Writable at once, nothing to read.
        let guard = fd.ready(both).await.unwrap();
        assert!(guard.ready().is_writable(), "{:?}", guard.ready());
        assert!(!guard.ready().is_readable(), "{:?}", guard.ready());
        assert!(!guard.ready().is_read_closed(), "{:?}", guard.ready());
        // Kept until cleared: a second wait reports it again at once.
        guard.retain_ready();
        let mut guard = fd.ready(Interest::WRITABLE).await.unwrap();
        assert!(guard.ready().is_writable(), "{:?}", guard.ready());
        guard.clear_ready();
        {
            let mut readable = std::pin::pin!(fd.ready(Interest::READABLE));
            assert!(poll_once(&mut readable).await.is_none(), "nothing written");
            b.write_all(b"x").unwrap();
            let mut guard = readable.await.unwrap();
            assert!(guard.ready().is_readable(), "{:?}", guard.ready());
            assert!(!guard.ready().is_writable(), "only what was asked for");
            guard.clear_ready_matching(Ready::READABLE);
            assert!(!guard.ready().is_readable());
            assert!(!guard.is_ready());
        }
        // Both at once; then the peer goes: the read side is closed.
        let mut guard = fd.ready(both).await.unwrap();
        assert!(guard.ready().is_readable() && guard.ready().is_writable());
        guard.clear_ready();
        drop(b);
        let guard = fd.ready(Interest::READABLE).await.unwrap();
        assert!(guard.ready().is_read_closed(), "{:?}", guard.ready());
        // `readable` reports it the same way.
        let guard = fd.readable().await.unwrap();
        assert!(guard.ready().is_read_closed(), "{:?}", guard.ready());
    });
}

fn pipe_ends_report_their_closed_sides(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        // The writer goes: the reader sees a hang-up, nothing readable.
        let (r, w) = pipe(libc::O_NONBLOCK);
        let rfd = AsyncFd::with_interest(r, Interest::READABLE).unwrap();
        {
            let mut readable = std::pin::pin!(rfd.ready(Interest::READABLE));
            assert!(poll_once(&mut readable).await.is_none(), "writer open");
            drop(w);
            let guard = readable.await.unwrap();
            let ready = guard.ready();
            assert!(ready.is_read_closed(), "{ready:?}");
            assert!(!ready.is_readable(), "{ready:?}");
        }
        // The reader goes: the writer sees an error, its write side closed.
        let (r, w) = pipe(libc::O_NONBLOCK);
        let wfd = AsyncFd::with_interest(w, Interest::WRITABLE).unwrap();
        let mut guard = wfd.ready(Interest::WRITABLE).await.unwrap();
        assert!(guard.ready().is_writable(), "{:?}", guard.ready());
        assert!(!guard.ready().is_write_closed(), "{:?}", guard.ready());
        guard.clear_ready();
        drop(r);
        // A wait reports what its interest asks for, as tokio's: the closed
        // write side to a wait for writing, the error only to a wait that
        // asks for errors too.
        let guard = wfd.ready(Interest::WRITABLE).await.unwrap();
        let ready = guard.ready();
        assert!(ready.is_write_closed() && !ready.is_error(), "{ready:?}");
        guard.retain_ready();
        let guard = wfd
            .ready(Interest::WRITABLE | Interest::ERROR)
            .await
            .unwrap();
        let ready = guard.ready();
        assert!(ready.is_write_closed() && ready.is_error(), "{ready:?}");
    });
}

fn with_interest_refuses_other_waits(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (r, mut w) = pipe(libc::O_NONBLOCK);
        let fd = AsyncFd::with_interest(r, Interest::READABLE).unwrap();
        let err = fd.writable().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("with_interest"), "{err}");
        let err = fd
            .ready(Interest::READABLE | Interest::WRITABLE)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let err = fd.ready(Interest::PRIORITY).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        // Errors may always be waited for (none here: it waits).
        {
            let mut error = std::pin::pin!(fd.ready(Interest::ERROR));
            assert!(poll_once(&mut error).await.is_none());
        }
        // What it was made for works.
        w.write_all(b"x").unwrap();
        let mut guard = fd.readable().await.unwrap();
        assert!(guard.ready().is_readable());
        let mut buf = [0u8; 2];
        let n = guard.try_io(|f| f.get_ref().read(&mut buf)).unwrap();
        assert_eq!(n.unwrap(), 1);
    });
}

/// Sends `byte` on `to` as TCP urgent data (`MSG_OOB`).
fn send_urgent(to: &std::net::TcpStream, byte: u8) {
    use std::os::fd::AsRawFd;
    // SAFETY: sends one byte from a live local on a live socket.
    let n = unsafe {
        libc::send(
            to.as_raw_fd(),
            (&byte as *const u8).cast(),
            1,
            libc::MSG_OOB,
        )
    };
    assert_eq!(n, 1);
}

/// Receives the byte of TCP urgent data waiting on `from`.
fn recv_urgent(from: &std::net::TcpStream) -> u8 {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: receives one byte into a live local from a live socket.
    let n = unsafe {
        libc::recv(
            from.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_OOB,
        )
    };
    assert_eq!(n, 1);
    byte
}

/// A connected TCP pair of std streams (client, server side).
fn tcp_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

fn priority_data_is_reported(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (client, server) = tcp_pair();
        server.set_nonblocking(true).unwrap();
        let fd = AsyncFd::with_interest(server, Interest::READABLE | Interest::PRIORITY).unwrap();
        let mut urgent = std::pin::pin!(fd.ready(Interest::PRIORITY));
        assert!(poll_once(&mut urgent).await.is_none(), "nothing sent yet");
        // Out-of-band data: the receiver's `POLLPRI`.
        send_urgent(&client, b'!');
        let guard = urgent.await.unwrap();
        assert!(guard.ready().is_priority(), "{:?}", guard.ready());
        assert_eq!(recv_urgent(guard.get_inner()), b'!');
    });
}

/// A wait for urgent data already handed to the kernel when plain data
/// and then the urgent byte arrive: the plain data does not end it, the
/// urgent byte does. (The pauses only give the processor time to pass the
/// wait to the kernel first; nothing here is timed.)
fn urgent_data_arriving_during_the_wait_is_reported(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut client, server) = tcp_pair();
        server.set_nonblocking(true).unwrap();
        client.write_all(b"plain").unwrap();
        let fd = AsyncFd::with_interest(server, Interest::READABLE | Interest::PRIORITY).unwrap();
        let mut urgent = std::pin::pin!(fd.ready(Interest::PRIORITY));
        assert!(
            poll_once(&mut urgent).await.is_none(),
            "queued plain data is not urgent"
        );
        std::thread::sleep(Duration::from_millis(50));
        client.write_all(b"more plain").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            poll_once(&mut urgent).await.is_none(),
            "plain data is not urgent"
        );
        send_urgent(&client, b'!');
        let guard = urgent.await.unwrap();
        assert!(guard.ready().is_priority(), "{:?}", guard.ready());
        assert_eq!(recv_urgent(guard.get_inner()), b'!');
    });
}

fn an_error_alone_is_reported(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        // A connected UDP socket whose peer port is closed: a datagram sent
        // there comes back as an ICMP error, a pending socket error.
        let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let target = closed.local_addr().unwrap();
        drop(closed);
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(target).unwrap();
        sock.set_nonblocking(true).unwrap();
        let fd = AsyncFd::with_interest(sock, Interest::ERROR).unwrap();
        let mut error = std::pin::pin!(fd.ready(Interest::ERROR));
        assert!(poll_once(&mut error).await.is_none(), "no error yet");
        fd.get_ref().send(b"anyone?").unwrap();
        let guard = error.await.unwrap();
        assert!(guard.ready().is_error(), "{:?}", guard.ready());
        let err = guard.get_inner().take_error().unwrap().expect("an error");
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
    });
}

/// Neither readable nor writable, then one of them, done by another
/// thread while the task waits: a wait for both ends on either (the
/// fallback backend waits in both directions at once).
fn a_wait_for_both_directions_ends_on_either(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let fd = AsyncFd::new(a).unwrap();
        let both = Interest::READABLE | Interest::WRITABLE;
        let sent = fill(fd.get_ref());
        // The peer acts a little later, so that the task is asleep in its
        // wait by then (if not, the wait sees it at once: still correct).
        let later = |f: Box<dyn FnOnce() + Send>| {
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(30));
                f()
            })
        };
        let mut b2 = b.try_clone().unwrap();
        let writer = later(Box::new(move || b2.write_all(b"x").unwrap()));
        let mut guard = fd.ready(both).await.unwrap();
        assert!(guard.ready().is_readable(), "{:?}", guard.ready());
        assert!(!guard.ready().is_writable(), "{:?}", guard.ready());
        writer.join().unwrap();
        let mut one = [0u8; 1];
        assert_eq!(fd.get_ref().read(&mut one).unwrap(), 1);
        guard.clear_ready();
        // A clone drains, so the peer stays open (a hang-up would also
        // make `a` readable) until the checks are done.
        let mut b3 = b.try_clone().unwrap();
        let reader = later(Box::new(move || {
            let mut sink = vec![0u8; sent];
            b3.read_exact(&mut sink).unwrap();
        }));
        let guard = fd.ready(both).await.unwrap();
        assert!(guard.ready().is_writable(), "{:?}", guard.ready());
        assert!(!guard.ready().is_readable(), "{:?}", guard.ready());
        reader.join().unwrap();
        drop(b);
    });
}

/// A pipe end as `futures_io::AsyncRead`/`AsyncWrite`, the way a library
/// builds one on the poll-based waits.
struct PipeEnd(AsyncFd<File>);

impl futures_lite::AsyncRead for PipeEnd {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        loop {
            let mut guard = std::task::ready!(self.0.poll_read_ready(cx))?;
            if let Ok(result) = guard.try_io(|fd| fd.get_ref().read(buf)) {
                return Poll::Ready(result);
            }
        }
    }
}

impl futures_lite::AsyncWrite for PipeEnd {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        loop {
            let mut guard = std::task::ready!(self.0.poll_write_ready(cx))?;
            if let Ok(result) = guard.try_io(|fd| fd.get_ref().write(buf)) {
                return Poll::Ready(result);
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Many times a pipe's capacity, written by one task and read by another
/// through `poll_write_ready`/`poll_read_ready`: every byte arrives, in
/// order (each side waits on the other many times).
fn poll_read_ready_drives_an_async_read(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 2);
    rt.block_on(async {
        let (r, w) = pipe(libc::O_NONBLOCK);
        let mut reader = PipeEnd(AsyncFd::with_interest(r, Interest::READABLE).unwrap());
        let mut writer = PipeEnd(AsyncFd::with_interest(w, Interest::WRITABLE).unwrap());
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let task = fairlane::spawn(async move {
            for chunk in sent.chunks(7_001) {
                writer.write_all(chunk).await.unwrap();
            }
            // Dropped: the reader sees the end of the input.
        });
        let mut got = Vec::new();
        reader.read_to_end(&mut got).await.unwrap();
        task.await.unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "bytes lost or reordered");
    });
}

/// A full pipe: `poll_write_ready` is pending until the reader drains it,
/// then reports room to write.
fn poll_write_ready_waits_for_room(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (mut r, w) = pipe(libc::O_NONBLOCK);
        let fd = AsyncFd::new(w).unwrap();
        {
            let mut guard = poll_fn(|cx| fd.poll_write_ready(cx)).await.unwrap();
            assert!(guard.ready().is_writable(), "{:?}", guard.ready());
            // About to fill it: the readiness will be stale.
            guard.clear_ready();
        }
        let written = fill(fd.get_ref());
        let mut ready = std::pin::pin!(poll_fn(|cx| fd.poll_write_ready(cx).map_ok(|g| g.ready())));
        assert!(poll_once(&mut ready).await.is_none(), "the pipe is full");
        assert!(poll_once(&mut ready).await.is_none(), "still full");
        let mut sink = vec![0u8; written];
        r.read_exact(&mut sink).unwrap();
        assert!(ready.await.unwrap().is_writable());
    });
}

fn poll_ready_mut_gives_mutable_access(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (r, w) = pipe(libc::O_NONBLOCK);
        let mut rfd = AsyncFd::new(r).unwrap();
        let mut wfd = AsyncFd::new(w).unwrap();
        let pending = poll_fn(|cx| Poll::Ready(rfd.poll_read_ready_mut(cx).is_pending())).await;
        assert!(pending, "nothing written yet");
        let n = poll_fn(|cx| {
            let mut guard = std::task::ready!(wfd.poll_write_ready_mut(cx))?;
            Poll::Ready(
                guard
                    .try_io(|f| f.get_mut().write(b"mut"))
                    .expect("writable"),
            )
        })
        .await
        .unwrap();
        assert_eq!(n, 3);
        // The read's wait armed above completes now.
        let mut buf = [0u8; 8];
        let n = poll_fn(|cx| loop {
            let mut guard = std::task::ready!(rfd.poll_read_ready_mut(cx))?;
            assert!(guard.ready().is_readable(), "{:?}", guard.ready());
            if let Ok(result) = guard.try_io(|f| f.get_mut().read(&mut buf)) {
                return Poll::Ready(result);
            }
        })
        .await
        .unwrap();
        assert_eq!(&buf[..n], b"mut");
    });
}

fn poll_ready_refuses_what_with_interest_left_out(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (r, w) = pipe(libc::O_NONBLOCK);
        let mut rfd = AsyncFd::with_interest(r, Interest::READABLE).unwrap();
        let mut wfd = AsyncFd::with_interest(w, Interest::WRITABLE).unwrap();
        let kind = |p: Poll<std::io::Result<Ready>>| match p {
            Poll::Ready(Err(e)) => e.kind(),
            other => panic!("not refused: {other:?}"),
        };
        poll_fn(|cx| {
            let map = |g: fairlane::io::unix::AsyncFdReadyGuard<'_, File>| g.ready();
            assert_eq!(
                kind(rfd.poll_write_ready(cx).map_ok(map)),
                ErrorKind::InvalidInput
            );
            assert_eq!(
                kind(wfd.poll_read_ready(cx).map_ok(map)),
                ErrorKind::InvalidInput
            );
            let map = |g: fairlane::io::unix::AsyncFdReadyMutGuard<'_, File>| g.ready();
            assert_eq!(
                kind(rfd.poll_write_ready_mut(cx).map_ok(map)),
                ErrorKind::InvalidInput
            );
            assert_eq!(
                kind(wfd.poll_read_ready_mut(cx).map_ok(map)),
                ErrorKind::InvalidInput
            );
            Poll::Ready(())
        })
        .await;
    });
}

/// Two tasks poll `poll_read_ready` in turn, then the writer writes: the
/// one that polled last is woken and sees the descriptor readable (as with
/// tokio; the other is not woken by this readiness).
fn the_task_that_polled_last_is_woken(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 2);
    rt.block_on(async {
        let (r, mut w) = pipe(libc::O_NONBLOCK);
        let fd = std::sync::Arc::new(AsyncFd::new(r).unwrap());
        let first_polled = common::Signal::new();
        let first = {
            let (fd, polled) = (fd.clone(), first_polled.clone());
            fairlane::spawn(async move {
                let mut polls = 0;
                poll_fn(|cx| {
                    polls += 1;
                    if polls == 1 {
                        assert!(fd.poll_read_ready(cx).is_pending(), "nothing written yet");
                        polled.notify();
                    }
                    // Woken again only if spuriously: stays pending.
                    Poll::<()>::Pending
                })
                .await
            })
        };
        first_polled.wait().await;
        let ready = {
            let mut armed = false;
            let fd = fd.clone();
            poll_fn(move |cx| {
                let r = fd.poll_read_ready(cx).map_ok(|g| g.ready());
                if !armed {
                    assert!(r.is_pending(), "nothing written yet");
                    armed = true;
                    w.write_all(b"x").unwrap();
                }
                r
            })
        };
        assert!(ready.await.unwrap().is_readable());
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
    });
}

/// A poll-based wait that nobody polls again stays armed (I/O in flight:
/// the paused clock holds) until the `AsyncFd` is dropped, which cancels
/// it: nothing is left in flight, so the clock moves on its own again and
/// the runtime shuts down without waiting for it. A wait the drop left in
/// the kernel would hold the clock for good: the sleep would never end and
/// the scenario's deadline fails the test.
fn a_poll_based_wait_left_armed_is_cancelled_with_the_fd(backend: IoBackend) {
    let rt = fairlane::Runtime::builder()
        .processors(2)
        .io_backend(backend)
        .start_paused(true)
        .build()
        .unwrap();
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let slept = rt.block_on(async move {
        // On a processor: its engine holds what it arms.
        fairlane::spawn(async move {
            let fd = AsyncFd::new(a).unwrap();
            let pending = poll_fn(|cx| Poll::Ready(fd.poll_read_ready(cx).is_pending())).await;
            assert!(pending, "nothing written yet");
            let both = poll_fn(|cx| {
                Poll::Ready(
                    fd.poll_read_ready(cx).is_pending() && fd.poll_write_ready(cx).is_ready(),
                )
            })
            .await;
            assert!(both, "still armed for reading; writable at once");
            // An operation that must reach the kernel and come back: the
            // processor submits its batch, the armed `POLL_ADD` in it, so
            // the wait is in the kernel (not still queued) when the
            // descriptor goes.
            fairlane::fs::read("/proc/self/stat").await.unwrap();
            drop(fd);
            let start = fairlane::time::Instant::now();
            fairlane::time::sleep(Duration::from_secs(3600)).await;
            fairlane::time::Instant::now() - start
        })
        .await
        .unwrap()
    });
    assert_eq!(slept, Duration::from_secs(3600));
    drop(b);
    drop(rt);
}
