//! `fairlane::signal` with real signals sent to this test process, on both
//! I/O backends. Each test listens for signals of its own, so tests of
//! this binary may run at once.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::signal::unix::{signal, SignalKind};
use fairlane::Runtime;

fn runtime(backend: IoBackend) -> Runtime {
    Runtime::builder()
        .processors(2)
        .io_backend(backend)
        .build()
        .expect("build runtime")
}

fn raise(signum: i32) {
    // SAFETY: kill on our own process id has no memory preconditions; every
    // signal sent here has fairlane's handler installed first.
    assert_eq!(unsafe { libc::kill(libc::getpid(), signum) }, 0);
}

/// Raises `signum` until `done` holds: a delivery can race the listener's
/// registration only in the test, never in what it checks (a listener made
/// before a delivery sees it), but the receiving task may not be waiting
/// yet; repeating keeps the test independent of that timing.
async fn raise_until(signum: i32, done: impl Fn() -> bool) {
    while !done() {
        raise(signum);
        fairlane::time::sleep(Duration::from_millis(5)).await;
    }
}

fn delivery_wakes_every_listener(backend: IoBackend) {
    let rt = runtime(backend);
    rt.block_on(async {
        let received = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let mut sig = signal(SignalKind::user_defined1()).unwrap();
            let r = received.clone();
            tasks.push(fairlane::spawn(async move {
                sig.recv().await.unwrap();
                r.fetch_add(1, Ordering::SeqCst);
            }));
        }
        raise_until(libc::SIGUSR1, || received.load(Ordering::SeqCst) == 3).await;
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn delivery_wakes_every_listener_io_uring() {
    delivery_wakes_every_listener(IoBackend::IoUring);
}

#[test]
fn delivery_wakes_every_listener_fallback() {
    delivery_wakes_every_listener(IoBackend::Fallback);
}

fn a_delivery_before_recv_is_not_missed(backend: IoBackend, kind: SignalKind) {
    let rt = runtime(backend);
    rt.block_on(async {
        let mut sig = signal(kind).unwrap();
        // Sent and dispatched before anyone waits.
        raise(kind.as_raw_value());
        let got = fairlane::time::timeout(common::DEADLINE, sig.recv()).await;
        assert_eq!(got, Ok(Some(())), "a delivery before recv was lost");
    });
}

#[test]
fn a_delivery_before_recv_is_not_missed_io_uring() {
    a_delivery_before_recv_is_not_missed(IoBackend::IoUring, SignalKind::user_defined2());
}

#[test]
fn a_delivery_before_recv_is_not_missed_fallback() {
    a_delivery_before_recv_is_not_missed(IoBackend::Fallback, SignalKind::window_change());
}

#[test]
fn sigterm_reaches_a_server_loop() {
    // The shape of a graceful server: serve until SIGTERM.
    let rt = runtime(IoBackend::IoUring);
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate()).unwrap();
        let stop = Arc::new(AtomicUsize::new(0));
        let s = stop.clone();
        let server = fairlane::spawn(async move {
            term.recv().await;
            s.store(1, Ordering::SeqCst);
        });
        raise_until(libc::SIGTERM, || stop.load(Ordering::SeqCst) == 1).await;
        server.await.unwrap();
    });
}

/// `ctrl_c()` listens from the call on, not from the future's first poll:
/// a SIGINT sent right after the call is seen. Run in a child process of
/// its own (this test binary, with `CTRL_C_CHILD` set), where SIGINT has no
/// handler before the call, so a late installation lets SIGINT end it.
#[test]
fn ctrl_c_listens_from_the_call_on() {
    if std::env::var_os("CTRL_C_CHILD").is_some() {
        let rt = runtime(IoBackend::Fallback);
        let ctrl_c = fairlane::signal::ctrl_c();
        raise(libc::SIGINT);
        rt.block_on(fairlane::time::timeout(Duration::from_secs(30), ctrl_c))
            .expect("the SIGINT was not seen")
            .unwrap();
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "ctrl_c_listens_from_the_call_on",
            "--test-threads=1",
        ])
        .env("CTRL_C_CHILD", "1")
        .status()
        .unwrap();
    assert!(status.success(), "the child test ended with {status}");
}

/// A delivery while no listener exists (one was made and dropped) reaches
/// the next listener made, as tokio's does.
#[test]
fn a_delivery_with_no_listener_reaches_the_next_listener() {
    let kind = SignalKind::from_raw(libc::SIGRTMIN() + 3);
    drop(signal(kind).unwrap());
    raise(libc::SIGRTMIN() + 3);
    // Time for the signal thread to pass the delivery on while nobody
    // listens (the case this test is about; if it has not yet, the new
    // listener sees the delivery as any listener made before it would).
    std::thread::sleep(Duration::from_millis(50));
    let mut sig = signal(kind).unwrap();
    let rt = runtime(IoBackend::Fallback);
    rt.block_on(fairlane::time::timeout(Duration::from_secs(30), sig.recv()))
        .expect("the delivery was lost");
}

/// Signals need no runtime: a listener made and awaited outside any
/// fairlane runtime (here by futures-lite's `block_on`) gets its delivery.
#[test]
fn a_listener_works_outside_a_runtime() {
    let mut sig = signal(SignalKind::from_raw(libc::SIGRTMIN() + 4)).unwrap();
    raise(libc::SIGRTMIN() + 4);
    assert_eq!(futures_lite::future::block_on(sig.recv()), Some(()));
}

#[test]
fn ctrl_c_returns_on_sigint() {
    let rt = runtime(IoBackend::Fallback);
    rt.block_on(async {
        // Installed before any SIGINT is sent, so none ends the process.
        let _installed = signal(SignalKind::interrupt()).unwrap();
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        let waiter = fairlane::spawn(async move {
            fairlane::signal::ctrl_c().await.unwrap();
            d.store(1, Ordering::SeqCst);
        });
        raise_until(libc::SIGINT, || done.load(Ordering::SeqCst) == 1).await;
        waiter.await.unwrap();
    });
}

#[test]
fn signals_that_cannot_be_handled_are_errors() {
    for signum in [libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV, 0, -3, 1000] {
        let err = signal(SignalKind::from_raw(signum)).unwrap_err();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::InvalidInput,
            "signal {signum}"
        );
        assert!(err.to_string().contains("signal"), "{err}");
    }
}
