//! `runtime::is_rt_shutdown_err`: the error of I/O whose runtime was shut
//! down is recognised, and no other error is.

use std::io;

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream};
use fairlane::runtime::{is_rt_shutdown_err, Builder};

fn runtime(backend: IoBackend) -> fairlane::Runtime {
    Builder::new_current_thread()
        .io_backend(backend)
        .build()
        .unwrap()
}

#[test]
fn io_on_a_socket_of_a_dropped_runtime_is_a_shutdown_error() {
    for backend in [IoBackend::IoUring, IoBackend::Fallback] {
        let first = runtime(backend);
        let second = runtime(backend);
        let listener = first.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(addr).unwrap();
        let stream = first.block_on(async { listener.accept().await.unwrap().0 });
        drop(first);
        second.block_on(async {
            let err = listener.accept().await.unwrap_err();
            assert!(is_rt_shutdown_err(&err), "{backend:?}: {err}");
            let err = stream.read_owned(vec![0; 8]).await.0.unwrap_err();
            assert!(is_rt_shutdown_err(&err), "{backend:?}: {err}");
        });
        drop(client);
    }
}

#[test]
fn other_errors_are_not_shutdown_errors() {
    // The same message, made by someone else.
    let same_words = io::Error::other("the fairlane runtime was shut down");
    assert!(!is_rt_shutdown_err(&same_words));
    assert!(!is_rt_shutdown_err(&io::Error::from(io::ErrorKind::Other)));
    assert!(!is_rt_shutdown_err(&io::Error::new(
        io::ErrorKind::NotFound,
        "not found"
    )));
    // Join errors turned into I/O errors.
    let rt = runtime(IoBackend::Fallback);
    let panicked = rt.block_on(rt.spawn(async { panic!("boom") })).unwrap_err();
    assert!(!is_rt_shutdown_err(&io::Error::from(panicked)));
    let aborted = rt.spawn(std::future::pending::<()>());
    aborted.abort();
    let cancelled = rt.block_on(aborted).unwrap_err();
    assert!(!is_rt_shutdown_err(&io::Error::from(cancelled)));
    // A connection refused is an error of its own.
    let refused = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        TcpStream::connect(addr).await.unwrap_err()
    });
    assert!(!is_rt_shutdown_err(&refused));
}

#[test]
fn an_async_fd_of_a_dropped_runtime_fails_its_waits() {
    use fairlane::io::unix::AsyncFd;
    for backend in [IoBackend::IoUring, IoBackend::Fallback] {
        let rt = runtime(backend);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let fd = {
            let _entered = rt.enter();
            AsyncFd::new(a).unwrap()
        };
        drop(rt);
        // Writable at once, were the runtime there: the wait fails instead.
        let other = runtime(backend);
        other.block_on(async {
            let err = fd.writable().await.unwrap_err();
            assert!(is_rt_shutdown_err(&err), "{backend:?}: {err}");
            let err = std::future::poll_fn(|cx| fd.poll_read_ready(cx).map_ok(|_| ()))
                .await
                .unwrap_err();
            assert!(is_rt_shutdown_err(&err), "{backend:?}: {err}");
        });
    }
}
