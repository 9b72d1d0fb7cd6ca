//! Faults of the io_uring system calls, injected with strace: each test runs
//! one of this binary's child workloads (real socket I/O, then exit) under
//! `strace -e inject=...` and asserts that the child exits successfully. A
//! runtime that lost a submission to a transient error would hang; one that
//! picked io_uring where `io_uring_enter` is denied would hang or fail; one
//! that left operations waiting for entries an error kept from the kernel
//! would hang (`faults_child_tolerant_workload`, whose operations may fail
//! with the injected error). strace counts a thread's calls: `when=5+`
//! fails every thread's calls from its fifth on.
//!
//! Skipped (with a message) where strace is missing or cannot trace here.

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream};
use fairlane::Runtime;

/// How long a child may run: generous, since strace slows every system call;
/// it only tells a hang from slowness.
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

/// The environment variable that makes the child workloads run; its value
/// is the backend the child must end up with.
const CHILD_ENV: &str = "FAIRLANE_FAULT_CHILD_EXPECTS";

/// The error number `faults_child_tolerant_workload` accepts from its
/// operations (the one injected).
const ERRNO_ENV: &str = "FAIRLANE_FAULT_CHILD_ERRNO";

fn strace_works() -> bool {
    Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs the child workload under strace with `inject` (an `-e inject=`
/// argument) and asserts it exits successfully within `CHILD_DEADLINE`.
/// Returns false if strace is unavailable (the test is then skipped).
fn child_survives(syscall: &str, inject: &str, expects: IoBackend) -> bool {
    run_child(syscall, inject, "faults_child_workload", expects, None).is_some()
}

/// Runs this binary's test `workload` under strace with `inject`, with
/// `errno` (if any) in `ERRNO_ENV`; asserts that it exits successfully
/// within `CHILD_DEADLINE` and returns its standard output, or `None` if
/// strace is unavailable (the test is then skipped).
fn run_child(
    syscall: &str,
    inject: &str,
    workload: &str,
    expects: IoBackend,
    errno: Option<i32>,
) -> Option<String> {
    if !strace_works() {
        println!("skipped: strace not found or not permitted here");
        return None;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let mut command = Command::new("strace");
    command
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("trace={syscall}"))
        .arg("-e")
        .arg(format!("inject={syscall}:{inject}"))
        .arg("--")
        .arg(exe)
        .args([
            "--exact",
            workload,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, expects.to_string())
        .env_remove("FAIRLANE_IO_BACKEND")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a hung child is killed with strace.
        .process_group(0);
    if let Some(errno) = errno {
        command.env(ERRNO_ENV, errno.to_string());
    }
    let mut child = command.spawn().expect("run strace");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if start.elapsed() > CHILD_DEADLINE {
            // SAFETY: signals the process group made for this child above.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            panic!("the child under inject={syscall}:{inject} still ran after {CHILD_DEADLINE:?}: hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("child output");
    assert!(
        status.success(),
        "the child under inject={syscall}:{inject} failed ({status}):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("1 passed"),
        "the child under inject={syscall}:{inject} did not run the workload:\n{stdout}"
    );
    Some(stdout)
}

/// The child: an echo server and clients over TCP, from tasks on two
/// processors and from the `block_on` thread (whose submissions go through
/// the submission thread). Does nothing unless run by the tests below.
#[test]
#[ignore = "run under strace by the fault-injection tests of this file"]
fn faults_child_workload() {
    let Ok(expects) = std::env::var(CHILD_ENV) else {
        return;
    };
    let rt = Runtime::builder()
        .processors(2)
        .build()
        .expect("build runtime");
    assert_eq!(rt.io_backend().to_string(), expects);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = fairlane::spawn(common::echo_server(listener));
        let clients: Vec<_> = (0..20u32)
            .map(|c| {
                fairlane::spawn(async move {
                    let stream = TcpStream::connect(addr).await.unwrap();
                    common::echo_round_trips(&stream, c, 20).await;
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        // From this thread, which is not a processor.
        let stream = TcpStream::connect(addr).await.unwrap();
        for _ in 0..20 {
            let (r, _) = stream
                .write_all_owned(&b"from the block_on thread"[..])
                .await;
            r.unwrap();
            let mut got = Vec::new();
            while got.len() < 24 {
                let (n, buf) = stream.read_owned(vec![0u8; 64]).await;
                let n = n.unwrap();
                assert!(n > 0, "echo closed early");
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"from the block_on thread");
        }
        server.abort();
    });
}

/// The child of the tests of errors that are not ridden out: echo clients
/// on two processors and on the `block_on` thread (through the submission
/// thread), as in `faults_child_workload`, but each operation may fail with
/// the injected error, after which its task gives up (its peer then sees
/// the end of the stream, a reset, or a cancelled connect). What does
/// complete must be exact: every echo equals its message. Prints how many
/// operations failed. Does nothing unless run by the tests below.
#[test]
#[ignore = "run under strace by the fault-injection tests of this file"]
fn faults_child_tolerant_workload() {
    let (Ok(expects), Ok(errno)) = (std::env::var(CHILD_ENV), std::env::var(ERRNO_ENV)) else {
        return;
    };
    let errno: i32 = errno.parse().expect("an error number");
    let rt = Runtime::builder()
        .processors(2)
        .build()
        .expect("build runtime");
    assert_eq!(rt.io_backend().to_string(), expects);
    let errors = Arc::new(AtomicUsize::new(0));
    let completed = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = fairlane::spawn(common::echo_server(listener));
        let clients: Vec<_> = (0..20u32)
            .map(|c| {
                let (errors, completed) = (errors.clone(), completed.clone());
                fairlane::spawn(async move {
                    tolerant_round_trips(addr, c, errno, &errors, &completed).await;
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        // From this thread, which is not a processor.
        tolerant_round_trips(addr, 20, errno, &errors, &completed).await;
        server.abort();
    });
    drop(rt);
    println!(
        "round trips completed: {}, io errors: {}",
        completed.load(Ordering::SeqCst),
        errors.load(Ordering::SeqCst)
    );
}

/// Up to 20 round trips of `client` through the echo server at `addr`;
/// stops at the first error, which must be `errno` (counted in `errors`)
/// or what a peer that gave up leaves.
async fn tolerant_round_trips(
    addr: std::net::SocketAddr,
    client: u32,
    errno: i32,
    errors: &AtomicUsize,
    completed: &AtomicUsize,
) {
    let failed = |e: std::io::Error| {
        let allowed = [errno, libc::ECONNRESET, libc::EPIPE, libc::ECANCELED];
        assert!(
            e.raw_os_error().is_some_and(|n| allowed.contains(&n)),
            "an operation failed with {e}, not the injected error {errno}"
        );
        errors.fetch_add(1, Ordering::SeqCst);
    };
    let stream = match TcpStream::connect(addr).await {
        Ok(stream) => stream,
        Err(e) => return failed(e),
    };
    for i in 0..20 {
        let msg = format!("client {client} message {i}").into_bytes();
        let (r, msg) = stream.write_all_owned(msg).await;
        if let Err(e) = r {
            return failed(e);
        }
        let mut got = Vec::new();
        while got.len() < msg.len() {
            let (n, buf) = stream.read_owned(Vec::with_capacity(64)).await;
            match n {
                Ok(0) => return, // the server's side gave up
                Ok(_) => got.extend_from_slice(&buf),
                Err(e) => return failed(e),
            }
        }
        assert_eq!(got, msg, "an echo differs from its message");
        completed.fetch_add(1, Ordering::SeqCst);
    }
}

/// The number the tolerant child printed after `io errors: `.
fn io_errors(stdout: &str) -> usize {
    stdout
        .split("io errors: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the child printed no error count:\n{stdout}"))
}

/// An `io_uring_enter` error that is not transient (the ring's descriptor is
/// bad, an argument is, the kernel is out of memory), from one call on
/// (every thread's calls from the `when`-th on fail) or once: the ring it
/// hit breaks, what the kernel had not consumed is done on another ring,
/// and once every ring broke operations fail with that error. The child
/// ends instead of waiting forever for operations whose entries never
/// reached the kernel; with the error persisting, some operations failed.
#[test]
fn enter_errors_that_are_not_transient_fail_operations() {
    let errors = [
        ("EBADF", libc::EBADF),
        ("EINVAL", libc::EINVAL),
        ("EFAULT", libc::EFAULT),
        ("ENOMEM", libc::ENOMEM),
    ];
    for (name, errno) in errors {
        for when in ["4+", "12+", "8"] {
            let inject = format!("error={name}:when={when}");
            let Some(stdout) = run_child(
                "io_uring_enter",
                &inject,
                "faults_child_tolerant_workload",
                IoBackend::IoUring,
                Some(errno),
            ) else {
                return;
            };
            if when.ends_with('+') {
                assert!(
                    io_errors(&stdout) > 0,
                    "under inject={inject} every operation succeeded:\n{stdout}"
                );
            }
        }
    }
}

/// A transient error that persists (every call from the fifth on) is not
/// retried forever: it breaks the ring like any other error.
#[test]
fn persistent_transient_enter_errors_fail_operations() {
    for (name, errno) in [
        ("EBUSY", libc::EBUSY),
        ("EAGAIN", libc::EAGAIN),
        ("EINTR", libc::EINTR),
    ] {
        let inject = format!("error={name}:when=5+");
        let Some(stdout) = run_child(
            "io_uring_enter",
            &inject,
            "faults_child_tolerant_workload",
            IoBackend::IoUring,
            Some(errno),
        ) else {
            return;
        };
        assert!(
            io_errors(&stdout) > 0,
            "under inject={inject} every operation succeeded:\n{stdout}"
        );
    }
}

/// One transient `io_uring_enter` failure (at several points of the run) is
/// ridden out: `EINTR` retried, `EBUSY`/`EAGAIN` retried after reaping.
#[test]
fn transient_enter_errors_are_ridden_out() {
    for error in ["EBUSY", "EINTR", "EAGAIN"] {
        for when in [3, 5, 8, 13, 21, 34] {
            let inject = format!("error={error}:when={when}");
            if !child_survives("io_uring_enter", &inject, IoBackend::IoUring) {
                return;
            }
        }
    }
}

/// Repeated transient failures (every third call from the fifth on) are
/// ridden out too.
#[test]
fn repeated_transient_enter_errors_are_ridden_out() {
    for error in ["EBUSY", "EINTR", "EAGAIN"] {
        let inject = format!("error={error}:when=5+3");
        if !child_survives("io_uring_enter", &inject, IoBackend::IoUring) {
            return;
        }
    }
}

/// With `io_uring_enter` denied (as some seccomp profiles do) the probe
/// fails and the runtime runs on the fallback backend.
#[test]
fn denied_enter_falls_back() {
    child_survives("io_uring_enter", "error=EPERM", IoBackend::Fallback);
}

/// A ring that cannot be set up after the probe passed (the probe's ring is
/// the first `io_uring_setup`, the first processor's ring the second): the
/// runtime runs on the fallback backend instead of failing to build.
#[test]
fn ring_setup_failing_after_the_probe_falls_back() {
    child_survives("io_uring_setup", "error=EPERM:when=3+", IoBackend::Fallback);
}

/// The child of `requested_io_uring_names_the_ring_that_failed`: asks for
/// io_uring, whose rings cannot be set up, and checks the error. Does
/// nothing unless run by that test.
#[test]
#[ignore = "run under strace by the fault-injection tests of this file"]
fn faults_child_requested_io_uring() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let err = Runtime::builder()
        .processors(2)
        .io_backend(IoBackend::IoUring)
        .build()
        .expect_err("io_uring was asked for and cannot be set up: build must fail");
    let message = err.to_string();
    assert!(
        message.contains("cannot set up the io_uring ring of processor"),
        "the error does not say which ring failed: {message}"
    );
}

/// io_uring asked for (not chosen by the probe) and a ring that cannot be
/// set up: no fallback, and the error says which processor's ring failed and
/// why (every `io_uring_setup` from the second on fails, so whether or not
/// a probe ring comes first, a processor's ring does).
#[test]
fn requested_io_uring_names_the_ring_that_failed() {
    run_child(
        "io_uring_setup",
        "error=EPERM:when=2+",
        "faults_child_requested_io_uring",
        IoBackend::IoUring,
        None,
    );
}
