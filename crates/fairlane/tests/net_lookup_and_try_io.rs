//! `net::lookup_host` and `AsyncFd::{try_io, try_io_mut}`, on both I/O
//! backends.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;

use fairlane::io::unix::AsyncFd;
use fairlane::io::{Interest, IoBackend};

common::on_both_backends!(lookup_host_resolves, async_fd_try_io);

fn lookup_host_resolves(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let want: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let got: Vec<_> = fairlane::net::lookup_host("127.0.0.1:8080")
            .await
            .unwrap()
            .collect();
        assert_eq!(got, [want]);
        let got: Vec<_> = fairlane::net::lookup_host(want).await.unwrap().collect();
        assert_eq!(got, [want]);
        // A name looked up on the blocking pool.
        let got: Vec<_> = fairlane::net::lookup_host("localhost:9")
            .await
            .unwrap()
            .collect();
        assert!(
            got.iter().all(|a| a.port() == 9 && a.ip().is_loopback()),
            "{got:?}"
        );
        assert!(!got.is_empty());
        let err = fairlane::net::lookup_host("no port here")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    });
}

fn async_fd_try_io(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut fd = AsyncFd::new(a).unwrap();
        let mut buf = [0u8; 8];
        let err = fd
            .try_io(Interest::READABLE, |s| (&*s).read(&mut buf))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        b.write_all(b"ping").unwrap();
        // After a WouldBlock the wait still sees the data that came.
        fd.readable().await.unwrap().clear_ready();
        let n = fd
            .try_io(Interest::READABLE, |s| (&*s).read(&mut buf))
            .unwrap();
        assert_eq!(&buf[..n], b"ping");
        assert_eq!(
            fd.try_io_mut(Interest::WRITABLE, |s| s.write(b"pong"))
                .unwrap(),
            4
        );
        b.read_exact(&mut buf[..4]).unwrap();
        assert_eq!(&buf[..4], b"pong");
        // An interest the AsyncFd was not made for.
        let only_read = AsyncFd::with_interest(fd.into_inner(), Interest::READABLE).unwrap();
        let err = only_read
            .try_io(Interest::WRITABLE, |s| (&*s).write(b"x"))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    });
}
