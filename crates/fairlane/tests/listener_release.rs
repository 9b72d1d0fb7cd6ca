//! A listener's port is free again as soon as its process is gone or the
//! listener is dropped, on both backends, even with an `accept` waiting:
//! a server restarted at once binds the same port.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener as StdTcpListener;
use std::os::unix::process::ExitStatusExt;
use std::pin::pin;
use std::process::{Command, Stdio};

use fairlane::io::IoBackend;
use fairlane::net::TcpListener;
use futures_lite::future::poll_once;

common::on_both_backends!(
    the_port_is_free_once_a_killed_server_is_gone,
    the_port_is_free_once_a_listener_is_dropped,
);

/// Names the backend of the child process `listener_child`.
const CHILD_ENV: &str = "FAIRLANE_TEST_LISTENER_CHILD";

/// Tries per scenario: a listener held a little longer than its process
/// shows only in some of them.
const TRIES: usize = 10;

/// The child of `the_port_is_free_once_a_killed_server_is_gone`: a server
/// that does not handle `SIGTERM`, waiting in `accept`; it prints its port
/// once the accept is waiting. Does nothing unless run by that test.
#[test]
#[ignore = "run as a child process by the_port_is_free_once_a_killed_server_is_gone"]
fn listener_child() {
    let Ok(backend) = std::env::var(CHILD_ENV) else {
        return;
    };
    let backend = if backend == IoBackend::Fallback.to_string() {
        IoBackend::Fallback
    } else {
        IoBackend::IoUring
    };
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let server = fairlane::spawn(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let mut accept = pin!(listener.accept());
            assert!(poll_once(&mut accept).await.is_none(), "nobody connects");
            println!("listening on port {port}");
            let _ = accept.await;
        });
        let _ = server.await;
    });
}

/// A server killed by `SIGTERM`'s default action while it waits in
/// `accept`: once the process is gone, its port can be bound again.
fn the_port_is_free_once_a_killed_server_is_gone(backend: IoBackend) {
    // Alone: a child forked while another scenario's listener is open
    // holds that listener until it execs.
    let _serial = common::serial();
    let mut taken = Vec::new();
    for _ in 0..TRIES {
        let mut child = Command::new(std::env::current_exe().expect("test binary path"))
            .args([
                "--exact",
                "listener_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, backend.to_string())
            .env_remove("FAIRLANE_IO_BACKEND")
            .stdout(Stdio::piped())
            .spawn()
            .expect("run the child");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let port: u16 = stdout
            .lines()
            .map_while(Result::ok)
            // The harness may have printed on the same line first.
            .find_map(|line| line.split_once("listening on port ")?.1.parse().ok())
            .expect("the child printed its port");
        // SAFETY: signals our own child, which has not been waited for.
        let r = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
        let status = child.wait().expect("wait for the child");
        assert_eq!(status.signal(), Some(libc::SIGTERM), "the child: {status}");
        if let Err(e) = StdTcpListener::bind(("127.0.0.1", port)) {
            taken.push(format!("port {port}: {e}"));
        }
    }
    assert!(
        taken.is_empty(),
        "in {} of {TRIES} tries the port was still taken after its server's process was gone: {taken:?}",
        taken.len()
    );
}

/// A listener dropped after an `accept` on it was dropped while waiting,
/// on a processor and on the `block_on` thread: once the drop returns, its
/// port can be bound again.
fn the_port_is_free_once_a_listener_is_dropped(backend: IoBackend) {
    let _serial = common::serial();
    let rt = common::backend_runtime(backend, 2);
    for _ in 0..TRIES {
        let on_processor = rt.block_on(rt.spawn(bind_wait_drop())).unwrap();
        let on_block_on = rt.block_on(bind_wait_drop());
        for port in [on_processor, on_block_on] {
            if let Err(e) = StdTcpListener::bind(("127.0.0.1", port)) {
                panic!("port {port} still taken after its listener was dropped: {e}");
            }
        }
    }
}

/// Binds a listener, leaves an `accept` waiting on it for a moment, drops
/// both; the port.
async fn bind_wait_drop() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    {
        let mut accept = pin!(listener.accept());
        assert!(poll_once(&mut accept).await.is_none(), "nobody connects");
        // Let the wait reach the kernel.
        fairlane::yield_now().await;
    }
    drop(listener);
    port
}
