//! `process`: spawning, exit statuses, the pipes (1 MB through `cat`,
//! both output streams at once, one child's output as the next one's
//! input, tokio's traits), kill, `kill_on_drop`, the reaping of dropped
//! children, waits that leave the processor free (many children waited
//! for at once on one processor), `try_wait`, and errors, on both I/O
//! backends.

mod common;

use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::process::{Child, Command};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

common::on_both_backends!(
    echo_output,
    exit_status_codes,
    a_megabyte_through_cat,
    both_output_streams_are_read_at_once,
    one_childs_output_is_the_next_ones_input,
    tokio_traits_on_the_pipes,
    kill_ends_a_child,
    kill_on_drop_kills_and_reaps,
    a_dropped_child_runs_on_and_is_reaped,
    many_children_waited_for_on_one_processor,
    fifty_sleeping_children_on_one_processor,
    try_wait_sees_the_exit,
    a_missing_program_is_not_found,
    a_child_is_waited_for_in_another_runtime,
);

fn echo_output(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let out = Command::new("echo")
            .args(["hello", "world"])
            .output()
            .await
            .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"hello world\n");
        assert!(out.stderr.is_empty());
        // The command is left as it was: spawning it again inherits.
        let mut cmd = Command::new("true");
        cmd.output().await.unwrap();
        let child = cmd.spawn().unwrap();
        assert!(child.stdout.is_none() && child.stderr.is_none() && child.stdin.is_none());
    });
}

fn exit_status_codes(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        for code in [0, 1, 3, 42, 255] {
            let status = Command::new("sh")
                .args(["-c", &format!("exit {code}")])
                .status()
                .await
                .unwrap();
            assert_eq!(status.code(), Some(code));
            assert_eq!(status.success(), code == 0);
        }
        let status = Command::new("sh")
            .args(["-c", "kill -TERM $$"])
            .status()
            .await
            .unwrap();
        assert_eq!(status.code(), None);
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    });
}

/// `cat` with its stdin and stdout piped.
fn spawn_cat() -> Child {
    Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn a_megabyte_through_cat(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let mut rng = common::Rng::new(7);
        let data: Vec<u8> = (0..1 << 20).map(|_| rng.next_u64() as u8).collect();
        let mut child = spawn_cat();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let sent = data.clone();
        // The writer and the reader in tasks of their own: the pipes hold
        // far less than 1 MB, so each waits for the other on one processor.
        let writer = fairlane::spawn(async move {
            stdin.write_all(&sent).await.unwrap();
            stdin.flush().await.unwrap();
            // Dropped: cat reads the end of its input.
        });
        let reader = fairlane::spawn(async move {
            let mut got = Vec::new();
            stdout.read_to_end(&mut got).await.unwrap();
            got
        });
        writer.await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "bytes changed on the way");
        assert!(child.wait().await.unwrap().success());
    });
}

fn both_output_streams_are_read_at_once(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        // Each stream gets far more than a pipe holds, stdout first: read
        // one after the other, the child would block on stderr forever
        // while stdout is waited for to its end.
        let out = Command::new("sh")
            .args([
                "-c",
                "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2; exit 5",
            ])
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(5));
        assert_eq!(out.stdout.len(), 300_000);
        assert_eq!(out.stderr.len(), 200_000);
        assert!(out.stdout.iter().chain(&out.stderr).all(|&b| b == 0));
    });
}

fn one_childs_output_is_the_next_ones_input(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let mut first = Command::new("echo")
            .arg("lower case")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pipe: Stdio = first.stdout.take().unwrap().try_into().unwrap();
        let out = Command::new("tr")
            .args(["a-z", "A-Z"])
            .stdin(pipe)
            .output()
            .await
            .unwrap();
        assert_eq!(out.stdout, b"LOWER CASE\n");
        assert!(first.wait().await.unwrap().success());
    });
}

fn tokio_traits_on_the_pipes(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let mut child = spawn_cat();
        let mut stdin = child.stdin.take().unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut stdin, b"through tokio's traits")
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::shutdown(&mut stdin)
            .await
            .unwrap();
        drop(stdin);
        let mut got = String::new();
        let mut stdout = child.stdout.take().unwrap();
        tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut got)
            .await
            .unwrap();
        assert_eq!(got, "through tokio's traits");
        assert!(child.wait().await.unwrap().success());
    });
}

fn kill_ends_a_child(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let mut child = Command::new("sleep").arg("600").spawn().unwrap();
        let pid = child.id().unwrap();
        assert!(child.try_wait().unwrap().is_none());
        child.kill().await.unwrap();
        assert_eq!(child.id(), None, "reaped");
        let status = child.wait().await.unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(is_gone(pid), "reaped: no zombie left");
        // Killing a reaped child signals nothing.
        child.start_kill().unwrap();
    });
}

/// Whether process `pid` no longer exists (reaped; a zombie still does).
fn is_gone(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The state letter of process `pid` in `/proc` (`Z`: a zombie).
fn state_of(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the parenthesised command name.
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Waits (sleeping, so the reaper and the processors run) until `pid` is
/// gone; the test's deadline fails it if it never is.
async fn until_gone(pid: u32) {
    while !is_gone(pid) {
        fairlane::time::sleep(Duration::from_millis(5)).await;
    }
}

fn kill_on_drop_kills_and_reaps(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let child = Command::new("sleep")
            .arg("600")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        drop(child);
        until_gone(pid).await;
        // Dropped while a wait is in progress (the task aborted): the wait
        // is cancelled, the child killed and reaped.
        let mut child = Command::new("sleep")
            .arg("600")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let started = common::Signal::new();
        let waiter = {
            let started = started.clone();
            fairlane::spawn(async move {
                let mut wait = std::pin::pin!(child.wait());
                assert!(futures_lite::future::poll_once(&mut wait).await.is_none());
                started.notify();
                wait.await
            })
        };
        started.wait().await;
        waiter.abort();
        assert!(waiter.await.unwrap_err().is_cancelled());
        until_gone(pid).await;
    });
}

fn a_dropped_child_runs_on_and_is_reaped(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let child = Command::new("sleep").arg("600").spawn().unwrap();
        let pid = child.id().unwrap();
        drop(child);
        // Not killed: still running (not a zombie).
        let state = state_of(pid).expect("still there");
        assert_ne!(state, 'Z', "the dropped child was killed");
        // Once it ends, the reaper reaps it: no zombie stays.
        // SAFETY: a plain system call; `pid` is our unreaped child.
        assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) }, 0);
        until_gone(pid).await;
    });
}

/// `head -c 1`: exits once one byte arrives on its stdin.
fn spawn_waiting_child() -> Child {
    Command::new("head")
        .args(["-c", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn many_children_waited_for_on_one_processor(backend: IoBackend) {
    const CHILDREN: usize = 50;
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        // Each child exits only when the releaser task writes to it. The
        // waiters start first; a wait that held the only processor would
        // keep the releaser from ever running.
        let mut inputs = Vec::new();
        let mut waiters = Vec::new();
        let waiting = Arc::new(AtomicUsize::new(0));
        for _ in 0..CHILDREN {
            let mut child = spawn_waiting_child();
            inputs.push(child.stdin.take().unwrap());
            let waiting = waiting.clone();
            waiters.push(fairlane::spawn(async move {
                waiting.fetch_add(1, Ordering::SeqCst);
                child.wait().await.unwrap()
            }));
        }
        let releaser = fairlane::spawn(async move {
            // Every waiter has started waiting before any child is let go.
            while waiting.load(Ordering::SeqCst) < CHILDREN {
                fairlane::yield_now().await;
            }
            fairlane::yield_now().await;
            for mut stdin in inputs {
                stdin.write_all(b"x").await.unwrap();
            }
        });
        releaser.await.unwrap();
        for w in waiters {
            assert!(w.await.unwrap().success());
        }
    });
}

/// Fifty children sleeping at once on a one-processor runtime all finish,
/// while another task keeps running (its loop ends only after the last
/// one). How long they take is not asserted; that a wait leaves the
/// processor free is checked deterministically by
/// `many_children_waited_for_on_one_processor`.
fn fifty_sleeping_children_on_one_processor(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let done = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..50)
            .map(|_| {
                let mut child = Command::new("sleep").arg("0.1").spawn().unwrap();
                let done = done.clone();
                fairlane::spawn(async move {
                    let status = child.wait().await.unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                    status
                })
            })
            .collect();
        let ticker = {
            let done = done.clone();
            fairlane::spawn(async move {
                let mut ticks = 0u64;
                while done.load(Ordering::SeqCst) < 50 {
                    ticks += 1;
                    fairlane::time::sleep(Duration::from_millis(1)).await;
                }
                ticks
            })
        };
        for w in waiters {
            assert!(w.await.unwrap().success());
        }
        ticker.await.unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 50);
    });
}

fn try_wait_sees_the_exit(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let mut child = spawn_waiting_child();
        assert_eq!(child.try_wait().unwrap(), None);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"x").await.unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            fairlane::time::sleep(Duration::from_millis(2)).await;
        };
        assert!(status.success());
        assert_eq!(child.id(), None);
        assert_eq!(child.try_wait().unwrap(), Some(status));
        assert_eq!(child.wait().await.unwrap(), status);
    });
}

fn a_missing_program_is_not_found(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let err = Command::new("/no/such/dir/program").spawn().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let err = Command::new("fairlane-no-such-program-in-path")
            .status()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let err = Command::new("fairlane-no-such-program-in-path")
            .output()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
    });
}

/// A child spawned in one runtime, which is then dropped, is waited for in
/// another one (its pidfd moves to the waiting runtime's driver).
fn a_child_is_waited_for_in_another_runtime(backend: IoBackend) {
    let runtime = || {
        fairlane::Runtime::builder()
            .processors(1)
            .io_backend(backend)
            .build()
            .unwrap()
    };
    for _ in 0..10 {
        let mut child = runtime().block_on(async {
            Command::new("true")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        });
        let status = runtime().block_on(child.wait()).unwrap();
        assert!(status.success());
    }
}

#[test]
fn spawning_outside_a_runtime_is_an_error() {
    let err = Command::new("true").spawn().unwrap_err();
    assert!(
        err.to_string().contains("inside a fairlane runtime"),
        "{err}"
    );
}

#[test]
fn the_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Command>();
    check::<Child>();
    check::<fairlane::process::ChildStdin>();
    check::<fairlane::process::ChildStdout>();
    check::<fairlane::process::ChildStderr>();
}
