//! A TCP echo server.
//!
//! ```text
//! cargo run --release --example echo -- [ADDRESS] [PROCESSORS] [GRACE_MS]
//! ```
//! `ADDRESS` defaults to `127.0.0.1:7000`, `PROCESSORS` to one per core,
//! `GRACE_MS` to 10000. `FAIRLANE_IO_BACKEND=fallback` selects the epoll
//! backend.
//!
//! On SIGINT or SIGTERM it shuts down gracefully: it stops accepting, serves
//! the connections already open until their clients close them, for at most
//! `GRACE_MS` milliseconds, then closes those left and exits with status 0.
//!
//! Out of descriptors (`ulimit -n`), it reports the error once per
//! back-off and waits before accepting again, instead of retrying at once:
//! the waiting connections stay queued, and those that finish free
//! descriptors meanwhile.

use std::io;
use std::time::Duration;

use fairlane::net::{TcpListener, TcpStream};
use fairlane::signal::unix::{signal, SignalKind};

/// How long the server waits after an accept error that does not concern
/// a single connection (out of descriptors or memory, or unknown) before it
/// accepts again.
const BACKOFF: Duration = Duration::from_millis(100);

/// How long open connections may go on after a shutdown signal, unless
/// the command line says otherwise.
const GRACE: Duration = Duration::from_secs(10);

/// Whether an accept error concerns only the connection being accepted (the
/// network errors `accept(2)` says to treat as "try again"), so that the
/// next accept can follow at once. Anything else, above all `EMFILE`,
/// `ENFILE`, `ENOBUFS` and `ENOMEM`, would fail again right away.
fn affects_one_connection(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ECONNABORTED
                | libc::EINTR
                | libc::EPERM
                | libc::EPROTO
                | libc::ENOPROTOOPT
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETDOWN
                | libc::ENETUNREACH
        )
    )
}

/// Accepts connections for ever, handing each to `serve`. Every error is
/// passed to `report`; after one that is not about a single connection the
/// loop sleeps for [`BACKOFF`] first, so an error that persists is reported
/// at most once per back-off and costs no CPU meanwhile.
async fn accept_loop(
    listener: &TcpListener,
    mut serve: impl FnMut(TcpStream),
    mut report: impl FnMut(&io::Error),
) {
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => serve(stream),
            Err(e) if affects_one_connection(&e) => report(&e),
            Err(e) => {
                report(&e);
                fairlane::time::sleep(BACKOFF).await;
            }
        }
    }
}

async fn serve(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        let (n, b) = stream.read_owned(buf).await;
        match n {
            Ok(n) if n > 0 => {}
            // End of stream or an error (reset): this connection is done.
            _ => return,
        }
        let (written, b) = stream.write_all_owned(b).await;
        if written.is_err() {
            return;
        }
        buf = b;
    }
}

/// The command line's number `arg`, named `what` in the error.
fn number(arg: &str, what: &str) -> io::Result<u64> {
    arg.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} must be a number, not {arg:?}"),
        )
    })
}

/// The server: `[ADDRESS] [PROCESSORS] [GRACE_MS]`, until a shutdown
/// signal and the grace period after it.
fn run(mut args: impl Iterator<Item = String>) -> io::Result<()> {
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7000".to_string());
    let mut builder = fairlane::Runtime::builder();
    if let Some(p) = args.next() {
        builder.processors(number(&p, "the number of processors")? as usize);
    }
    let grace = match args.next() {
        Some(ms) => Duration::from_millis(number(&ms, "the grace period in milliseconds")?),
        None => GRACE,
    };
    let rt = builder.build()?;
    rt.block_on(async {
        // Listening before the server is announced: from then on, SIGINT
        // and SIGTERM no longer end the process, they stop the server.
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let listener = TcpListener::bind(addr.as_str()).await?;
        eprintln!(
            "echo: listening on {} ({} backend)",
            listener.local_addr()?,
            fairlane::Handle::current().io_backend()
        );
        // Every connection's task holds a sender; `recv` fails once all
        // are dropped, that is when every connection is closed.
        let (open, all_closed) = async_channel::bounded::<()>(1);
        let stop = futures_lite::future::or(
            async {
                interrupt.recv().await;
                "SIGINT"
            },
            async {
                terminate.recv().await;
                "SIGTERM"
            },
        );
        let accepting = accept_loop(
            &listener,
            |stream| {
                let open = open.clone();
                drop(fairlane::spawn(async move {
                    serve(stream).await;
                    drop(open);
                }));
            },
            |e| {
                if affects_one_connection(e) {
                    eprintln!("echo: accept failed: {e}");
                } else {
                    eprintln!("echo: accept failed: {e}; retrying in {BACKOFF:?}");
                }
            },
        );
        let signal = futures_lite::future::or(stop, async {
            accepting.await;
            unreachable!("the accept loop never returns")
        })
        .await;
        drop(listener);
        eprintln!(
            "echo: {signal}: no longer accepting; waiting up to {grace:?} for {} open connections",
            open.sender_count() - 1
        );
        drop(open);
        if fairlane::time::timeout(grace, all_closed.recv())
            .await
            .is_err()
        {
            eprintln!(
                "echo: closing the {} connections still open",
                all_closed.sender_count()
            );
        }
        Ok::<(), io::Error>(())
    })?;
    // Cancels the connections still open.
    rt.shutdown_timeout(Duration::from_secs(1));
    eprintln!("echo: stopped");
    Ok(())
}

fn main() -> io::Result<()> {
    run(std::env::args().skip(1))
}

#[cfg(test)]
#[path = "../tests/common/nofile.rs"]
mod nofile;

#[cfg(test)]
mod tests {
    //! Run with `cargo test -p fairlane --example echo` (also part of
    //! `cargo test -p fairlane`: the example is built with `test = true`).

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use fairlane::io::IoBackend;
    use fairlane::net::TcpListener;

    use super::nofile::{lowest_free_fd, nofile, set_nofile};
    use super::{accept_loop, BACKOFF};

    /// The tests of this binary one at a time: one lowers the process's
    /// descriptor limit, under which the others could not start a child.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Out of descriptors, with connections waiting: each error is
    /// reported at most once per back-off (the loop without one reports
    /// hundreds of thousands a second), nothing is accepted, and once
    /// descriptors are available again every waiting connection is.
    ///
    /// The one bound that involves time follows from the loop's structure,
    /// not from the machine's speed: between two reports the loop sleeps
    /// `BACKOFF`, and sleeps never end early, so `k` reports take at least
    /// `(k - 1) * BACKOFF`.
    #[test]
    fn out_of_descriptors_backs_off_and_recovers() {
        let _serial = serial();
        // One test in this binary, because the descriptor limit is the
        // process's; both backends in turn.
        for backend in [IoBackend::IoUring, IoBackend::Fallback] {
            let rt = fairlane::Runtime::builder()
                .processors(1)
                .io_backend(backend)
                .build()
                .unwrap();
            let reports = Arc::new(AtomicUsize::new(0));
            let accepted = Arc::new(Mutex::new(Vec::new()));
            let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
            let addr = listener.local_addr().unwrap();
            let clients: Vec<_> = (0..4)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();

            let saved = nofile();
            set_nofile(libc::rlimit {
                rlim_cur: lowest_free_fd(),
                ..saved
            });
            let start = Instant::now();
            let server = {
                let (reports, accepted) = (reports.clone(), accepted.clone());
                rt.spawn(async move {
                    accept_loop(
                        &listener,
                        |stream| accepted.lock().unwrap().push(stream),
                        |e| {
                            assert!(
                                matches!(e.raw_os_error(), Some(libc::EMFILE)),
                                "unexpected accept error: {e}"
                            );
                            reports.fetch_add(1, Ordering::SeqCst);
                        },
                    )
                    .await
                })
            };
            std::thread::sleep(Duration::from_millis(500));
            let seen = reports.load(Ordering::SeqCst);
            let elapsed = start.elapsed();
            let bound = (elapsed.as_millis() / BACKOFF.as_millis()) as usize + 2;
            assert!(seen >= 1, "{backend}: accept never hit EMFILE");
            assert!(
                seen <= bound,
                "{backend}: {seen} reports in {elapsed:?}, more than one per back-off ({bound})"
            );
            assert_eq!(accepted.lock().unwrap().len(), 0, "{backend}");

            set_nofile(saved);
            // Generous: only a server that stopped accepting takes this long.
            let deadline = Instant::now() + Duration::from_secs(60);
            while accepted.lock().unwrap().len() < clients.len() {
                assert!(
                    Instant::now() < deadline,
                    "{backend}: accepted {} of {} after the limit was raised",
                    accepted.lock().unwrap().len(),
                    clients.len()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            server.abort();
            drop(rt);
        }
    }

    /// The environment variable that makes [`child_server`] run the server
    /// with the arguments it holds (separated by spaces).
    const CHILD_ARGS: &str = "FAIRLANE_ECHO_CHILD_ARGS";

    /// The server half of the signal tests: this test binary, started
    /// again by them with [`CHILD_ARGS`] set, runs the example's server as
    /// its `main` does, and exits with status 0 if it returns `Ok`.
    #[test]
    #[ignore = "the server of the signal tests, which start it in a child process"]
    fn child_server() {
        match std::env::var(CHILD_ARGS) {
            Ok(args) => super::run(args.split_whitespace().map(String::from)).expect("the server"),
            Err(_) => {
                eprintln!("child_server: {CHILD_ARGS} is not set; only the signal tests run this")
            }
        }
    }

    /// A server in a child process, and its standard error line by line.
    struct Child {
        process: std::process::Child,
        stderr: std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
    }

    impl Child {
        /// Starts the server on a port of its choosing; returns it and its
        /// address once it listens.
        fn start(backend: IoBackend, grace_ms: u64) -> (Child, std::net::SocketAddr) {
            use std::io::BufRead;
            let mut process = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "tests::child_server", "--ignored", "--nocapture"])
                .env(CHILD_ARGS, format!("127.0.0.1:0 1 {grace_ms}"))
                .env("FAIRLANE_IO_BACKEND", backend.to_string())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start the server");
            let stderr = process.stderr.take().expect("piped");
            let mut child = Child {
                stderr: std::io::BufReader::new(stderr).lines(),
                process,
            };
            let line = child.wait_for("listening on ");
            let addr = line["echo: listening on ".len()..]
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            (child, addr)
        }

        /// Reads the server's standard error up to the line that contains
        /// `what`, and returns it.
        fn wait_for(&mut self, what: &str) -> String {
            for line in self.stderr.by_ref() {
                let line = line.expect("read the server's standard error");
                if line.contains(what) {
                    return line;
                }
            }
            panic!("the server's standard error ended before a line with {what:?}");
        }

        fn signal(&self, signum: libc::c_int) {
            let pid = self.process.id() as libc::pid_t;
            // SAFETY: kill has no memory preconditions; the child is ours and
            // not yet waited for, so its pid is not reused.
            assert_eq!(unsafe { libc::kill(pid, signum) }, 0);
        }

        /// Waits for the server to exit (within a generous deadline).
        fn wait(mut self) -> std::process::ExitStatus {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(status) = self.process.try_wait().unwrap() {
                    return status;
                }
                if Instant::now() > deadline {
                    let _ = self.process.kill();
                    panic!("the server did not exit within 60 s of the signal");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn round_trip(client: &mut std::net::TcpStream, message: &[u8]) {
        use std::io::{Read, Write};
        client.write_all(message).unwrap();
        let mut reply = vec![0; message.len()];
        client.read_exact(&mut reply).unwrap();
        assert_eq!(reply, message);
    }

    /// SIGTERM and SIGINT stop the server gracefully on both backends: a
    /// connection open at the signal is still served until its client
    /// closes it, new connections are no longer accepted, and the process
    /// exits with status 0.
    #[test]
    fn a_signal_stops_accepting_and_lets_open_connections_finish() {
        let _serial = serial();
        for backend in [IoBackend::IoUring, IoBackend::Fallback] {
            for signum in [libc::SIGTERM, libc::SIGINT] {
                let (mut child, addr) = Child::start(backend, 60_000);
                let mut client = std::net::TcpStream::connect(addr).unwrap();
                round_trip(&mut client, b"before the signal");
                child.signal(signum);
                child.wait_for("no longer accepting");
                round_trip(&mut client, b"after the signal");
                // The listener is closed: new connections are refused.
                let deadline = Instant::now() + Duration::from_secs(60);
                while std::net::TcpStream::connect(addr).is_ok() {
                    assert!(Instant::now() < deadline, "{backend}: still accepting");
                    std::thread::sleep(Duration::from_millis(10));
                }
                drop(client);
                let status = child.wait();
                assert!(status.success(), "{backend}, signal {signum}: {status}");
            }
        }
    }

    /// A connection whose client never closes it holds the shutdown for the
    /// grace period only: then it is closed and the server exits with 0.
    #[test]
    fn connections_still_open_after_the_grace_period_are_closed() {
        use std::io::Read;
        let _serial = serial();
        for backend in [IoBackend::IoUring, IoBackend::Fallback] {
            let (mut child, addr) = Child::start(backend, 100);
            let mut client = std::net::TcpStream::connect(addr).unwrap();
            round_trip(&mut client, b"hello");
            child.signal(libc::SIGTERM);
            child.wait_for("closing the 1 connections still open");
            let status = child.wait();
            assert!(status.success(), "{backend}: {status}");
            // The server closed it: end of stream.
            assert_eq!(client.read(&mut [0; 8]).unwrap(), 0, "{backend}");
        }
    }
}
