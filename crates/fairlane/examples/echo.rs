//! A TCP echo server.
//!
//! ```text
//! cargo run --release --example echo -- [ADDRESS] [PROCESSORS]
//! ```
//! `ADDRESS` defaults to `127.0.0.1:7000`, `PROCESSORS` to one per core.
//! `FAIRLANE_IO_BACKEND=fallback` selects the epoll backend.
//!
//! Out of descriptors (`ulimit -n`), it reports the error once per
//! back-off and waits before accepting again, instead of retrying at once:
//! the waiting connections stay queued, and those that finish free
//! descriptors meanwhile.

use std::io;
use std::time::Duration;

use fairlane::net::{TcpListener, TcpStream};

/// How long the server waits after an accept error that does not concern
/// a single connection (out of descriptors or memory, or unknown) before it
/// accepts again.
const BACKOFF: Duration = Duration::from_millis(100);

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

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7000".to_string());
    let mut builder = fairlane::Runtime::builder();
    if let Some(p) = args.next() {
        let p: usize = p.parse().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the number of processors must be a number, not {p:?}"),
            )
        })?;
        builder.processors(p);
    }
    let rt = builder.build()?;
    rt.block_on(async {
        let listener = TcpListener::bind(addr.as_str()).await?;
        eprintln!(
            "echo: listening on {} ({} backend)",
            listener.local_addr()?,
            fairlane::Handle::current().io_backend()
        );
        accept_loop(
            &listener,
            |stream| drop(fairlane::spawn(serve(stream))),
            |e| {
                if affects_one_connection(e) {
                    eprintln!("echo: accept failed: {e}");
                } else {
                    eprintln!("echo: accept failed: {e}; retrying in {BACKOFF:?}");
                }
            },
        )
        .await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    //! Run with `cargo test -p fairlane --example echo` (also part of
    //! `cargo test -p fairlane`: the example is built with `test = true`).

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use fairlane::io::IoBackend;
    use fairlane::net::TcpListener;

    use super::{accept_loop, BACKOFF};

    fn nofile() -> libc::rlimit {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one `rlimit` into the live local.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        lim
    }

    fn set_nofile(lim: libc::rlimit) {
        // SAFETY: setrlimit reads one `rlimit` from the live local.
        let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
        assert_eq!(r, 0, "setrlimit: {}", std::io::Error::last_os_error());
    }

    /// The lowest descriptor number free now: with the soft limit set to
    /// it, the process can open no new descriptor.
    fn lowest_free_fd() -> libc::rlim_t {
        // SAFETY: dup of standard input and close of the duplicate, which
        // nobody else knows of.
        unsafe {
            let fd = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 0);
            assert!(fd >= 0, "dup: {}", std::io::Error::last_os_error());
            libc::close(fd);
            fd as libc::rlim_t
        }
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
}
