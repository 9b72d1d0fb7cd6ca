//! `AsyncFd::{register, register_with_interest, try_new, try_with_interest}`:
//! a refused value comes back in the error with the cause; an accepted one
//! works as `AsyncFd::new`'s.

use std::io::{ErrorKind, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use fairlane::io::unix::AsyncFd;
use fairlane::io::{Interest, IoBackend};

/// A descriptor number nothing has open.
#[derive(Debug)]
struct Closed;

impl AsRawFd for Closed {
    fn as_raw_fd(&self) -> RawFd {
        -1
    }
}

fn runtimes() -> Vec<fairlane::Runtime> {
    [IoBackend::IoUring, IoBackend::Fallback]
        .into_iter()
        .map(|b| {
            fairlane::runtime::Builder::new_current_thread()
                .io_backend(b)
                .build()
                .unwrap()
        })
        .collect()
}

#[test]
fn a_refused_value_comes_back_with_its_cause() {
    for rt in runtimes() {
        rt.block_on(async {
            let original = Arc::new(Closed);
            let err = unsafe { AsyncFd::register(original.clone()) }.unwrap_err();
            let (back, cause) = err.into_parts();
            assert!(Arc::ptr_eq(&original, &back));
            assert_eq!(cause.raw_os_error(), Some(libc::EBADF), "{cause}");

            let err = AsyncFd::try_with_interest(original.clone(), Interest::READABLE).unwrap_err();
            assert!(Arc::ptr_eq(&original, &err.into_parts().0));

            // A blocking descriptor: refused with InvalidInput, not dropped.
            let (a, _b) = UnixStream::pair().unwrap();
            let err = AsyncFd::try_new(a).unwrap_err();
            assert!(err.to_string().contains("non-blocking"), "{err}");
            let (a, cause) = err.into_parts();
            assert_eq!(cause.kind(), ErrorKind::InvalidInput);
            assert!(a.peer_addr().is_ok(), "the stream came back open");
            let err =
                unsafe { AsyncFd::register_with_interest(a, Interest::WRITABLE) }.unwrap_err();
            let io_err: std::io::Error = err.into();
            assert_eq!(io_err.kind(), ErrorKind::InvalidInput);
        });
    }
}

#[test]
fn outside_a_runtime_the_value_comes_back() {
    let (a, _b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let (a, cause) = AsyncFd::try_new(a).unwrap_err().into_parts();
    assert!(cause.to_string().contains("runtime"), "{cause}");
    assert!(a.peer_addr().is_ok());
}

#[test]
fn a_registered_descriptor_reports_readiness() {
    for rt in runtimes() {
        rt.block_on(async {
            let (a, mut b) = UnixStream::pair().unwrap();
            a.set_nonblocking(true).unwrap();
            let fd = unsafe { AsyncFd::register_with_interest(a, Interest::READABLE) }.unwrap();
            b.write_all(b"x").unwrap();
            let mut guard = fd.readable().await.unwrap();
            assert!(guard.ready().is_readable());
            let mut buf = [0u8; 4];
            let n = guard
                .try_io(|inner| std::io::Read::read(&mut inner.get_ref(), &mut buf))
                .unwrap()
                .unwrap();
            assert_eq!(&buf[..n], b"x");
            // Registered for reading only.
            assert_eq!(
                fd.writable().await.unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
        });
    }
}
