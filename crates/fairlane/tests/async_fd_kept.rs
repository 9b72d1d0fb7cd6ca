//! `AsyncFd` keeps readiness as tokio's does: what a wait reported stays
//! until a guard clears it or a `try_io` finds `WouldBlock`; `try_io`
//! runs its closure only when the descriptor is ready.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;

use fairlane::io::unix::AsyncFd;
use fairlane::io::{Interest, IoBackend};
use futures_lite::future::poll_once;

fn runtimes() -> Vec<fairlane::Runtime> {
    [IoBackend::IoUring, IoBackend::Fallback]
        .into_iter()
        .map(|backend| {
            fairlane::runtime::Builder::new_current_thread()
                .io_backend(backend)
                .build()
                .unwrap()
        })
        .collect()
}

fn pair() -> (AsyncFd<UnixStream>, UnixStream) {
    let (a, b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    (AsyncFd::new(a).unwrap(), b)
}

#[test]
fn readiness_stays_until_cleared() {
    for rt in runtimes() {
        rt.block_on(async {
            let (fd, mut peer) = pair();
            peer.write_all(b"0").unwrap();
            let mut guard = fd.readable().await.unwrap();
            fd.get_ref().read_exact(&mut [0]).unwrap();
            // Drained, but not cleared: a wait still reports it.
            let _ = guard.try_io(|_| Ok(()));
            let _ = fd.readable().await.unwrap();
            // Cleared by a try_io that would block: the next wait waits.
            let _ = guard.try_io(|_| std::io::Result::<()>::Err(ErrorKind::WouldBlock.into()));
            let mut readable = Box::pin(fd.readable());
            assert!(poll_once(&mut readable).await.is_none());
            peer.write_all(b"0").unwrap();
            assert!(readable.await.unwrap().ready().is_readable());
        });
    }
}

#[test]
fn try_io_runs_only_when_ready_and_clears_on_would_block() {
    for rt in runtimes() {
        let _entered = rt.enter();
        let (mut fd, mut peer) = pair();
        let mut called = false;
        let err = fd
            .try_io_mut(Interest::READABLE, |_| {
                called = true;
                Ok(())
            })
            .unwrap_err();
        assert!(!called, "nothing to read: the closure must not run");
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        peer.write_all(&[0]).unwrap();
        let mut called = false;
        fd.try_io(Interest::READABLE, |_| {
            called = true;
            Ok(())
        })
        .unwrap();
        assert!(called, "readable: the closure runs");
        let _ = fd.try_io(Interest::READABLE, |_| {
            std::io::Result::<()>::Err(ErrorKind::WouldBlock.into())
        });
        // The kept readiness was cleared; the descriptor itself still has
        // the byte, so the closure runs again (asked afresh).
        let mut called = false;
        fd.try_io(Interest::READABLE, |_| {
            called = true;
            Ok(())
        })
        .unwrap();
        assert!(called);
    }
}
