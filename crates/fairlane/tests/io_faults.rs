//! Faults of the io_uring system calls, injected with strace: each test runs
//! this binary's `faults_child_workload` (real socket I/O, then exit) under
//! `strace -e inject=...` and asserts that the child exits successfully. A
//! runtime that lost a submission to a transient error would hang; one that
//! picked io_uring where `io_uring_enter` is denied would hang or fail.
//!
//! Skipped (with a message) where strace is missing or cannot trace here.

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream};
use fairlane::Runtime;

/// How long a child may run: generous, since strace slows every system call;
/// it only tells a hang from slowness.
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

/// The environment variable that makes `faults_child_workload` run; its
/// value is the backend the child must end up with.
const CHILD_ENV: &str = "FAIRLANE_FAULT_CHILD_EXPECTS";

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
    if !strace_works() {
        println!("skipped: strace not found or not permitted here");
        return false;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("trace={syscall}"))
        .arg("-e")
        .arg(format!("inject={syscall}:{inject}"))
        .arg("--")
        .arg(exe)
        .args([
            "--exact",
            "faults_child_workload",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, expects.to_string())
        .env_remove("FAIRLANE_IO_BACKEND")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a hung child is killed with strace.
        .process_group(0)
        .spawn()
        .expect("run strace");
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 passed"),
        "the child under inject={syscall}:{inject} did not run the workload:\n{stdout}"
    );
    true
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
