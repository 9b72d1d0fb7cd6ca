//! Helpers shared by the integration tests: a deadline that fails a test
//! instead of hanging it, a lock that keeps the heavy tests of one binary from
//! running at the same time, a tiny random number generator, a one-shot
//! signal that tasks and plain threads can wait on, and a drop counter.
//! [`wake_load`] holds the exactly-once and ping-pong workloads,
//! [`clusters`] the resizer and the checks of where a task runs,
//! [`nofile`] the descriptor limit.
//!
//! Every test binary includes this module but uses only part of it.
#![allow(dead_code)]

pub mod clusters;
pub mod nofile;
pub mod wake_load;

use std::future::{poll_fn, Future};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::task::{Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

/// A deadline for scenarios that, if the runtime loses a wake-up or starves a
/// task, would otherwise hang: generous, so that only a real hang trips it.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// `deadline` times `FAIRLANE_TEST_SLOWDOWN` (a whole number, 1 if unset):
/// under valgrind (`.ci/valgrind` sets it) everything runs tens of times
/// slower, and a deadline that only a hang should reach must stretch with it.
pub fn scaled(deadline: Duration) -> Duration {
    let factor = std::env::var("FAIRLANE_TEST_SLOWDOWN")
        .ok()
        .and_then(|f| f.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    deadline * factor
}

/// Runs `f` on its own thread and waits at most `deadline` (times the
/// slowdown factor, see [`scaled`]) for it. A panic in
/// `f` is re-raised here; a scenario still running at the deadline fails the
/// test with `progress()` in the message (the thread is left behind: the test
/// process is failing anyway).
pub fn with_deadline<T, F, P>(name: &str, deadline: Duration, progress: P, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
    P: Fn() -> String,
{
    let (tx, rx) = mpsc::channel();
    let scenario = thread::Builder::new()
        .name(format!("scenario-{name}"))
        .spawn(move || {
            let _ = tx.send(panic::catch_unwind(AssertUnwindSafe(f)));
        })
        .expect("spawn the scenario thread");
    let deadline = scaled(deadline);
    match rx.recv_timeout(deadline) {
        Ok(Ok(value)) => {
            scenario.join().expect("scenario thread exits");
            value
        }
        Ok(Err(payload)) => panic::resume_unwind(payload),
        Err(_) => panic!(
            "{name}: still running after {deadline:?} (a lost wake-up or a starved task); \
             progress: {}",
            progress()
        ),
    }
}

/// Waits (sleeping 200 µs between looks) until `done` holds, failing the
/// test after [`DEADLINE`]. Not a timing assertion: only a condition that
/// never comes true trips it.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let limit = scaled(DEADLINE);
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "still waiting for {what} after {limit:?}"
        );
        thread::sleep(Duration::from_micros(200));
    }
}

/// Serialises the CPU-heavy tests of one test binary: on a 2-core machine, two
/// of them at once mostly measure the operating system's scheduler.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Builds a runtime with `processors` processors and default settings.
pub fn runtime(processors: usize) -> fairlane::Runtime {
    fairlane::Runtime::builder()
        .processors(processors)
        .build()
        .expect("build runtime")
}

/// A runtime of `processors` processors on `backend` (asserted active).
pub fn backend_runtime(backend: fairlane::io::IoBackend, processors: usize) -> fairlane::Runtime {
    let rt = fairlane::Runtime::builder()
        .processors(processors)
        .io_backend(backend)
        .build()
        .expect("build runtime");
    assert_eq!(rt.io_backend(), backend);
    rt
}

/// Runs `scenario` on `backend` under [`DEADLINE`] (see `on_both_backends`).
pub fn run_on(name: &str, backend: fairlane::io::IoBackend, scenario: fn(fairlane::io::IoBackend)) {
    with_deadline(name, DEADLINE, String::new, move || scenario(backend));
}

/// Makes each named scenario `fn(IoBackend)` two tests, `NAME::io_uring`
/// and `NAME::fallback`, each run under the deadline.
#[allow(unused_macros)]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn io_uring() {
                $crate::common::run_on(stringify!($name), fairlane::io::IoBackend::IoUring, super::$name);
            }
            #[test]
            fn fallback() {
                $crate::common::run_on(stringify!($name), fairlane::io::IoBackend::Fallback, super::$name);
            }
        }
    )*};
}
#[allow(unused_imports)]
pub(crate) use on_both_backends;

/// Echoes every connection `listener` accepts, each in a task of its own,
/// until accepting fails.
pub async fn echo_server(listener: fairlane::net::TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        fairlane::spawn(echo_stream(stream, || {}));
    }
}

/// Echoes what `stream` receives until it closes or fails, calling
/// `after_echo` after each echo is written.
pub async fn echo_stream(stream: fairlane::net::TcpStream, mut after_echo: impl FnMut()) {
    let mut buf = Vec::with_capacity(4096);
    loop {
        let (n, b) = stream.read_owned(buf).await;
        if !matches!(n, Ok(n) if n > 0) {
            return;
        }
        let (r, mut b) = stream.write_all_owned(b).await;
        if r.is_err() {
            return;
        }
        b.clear();
        buf = b;
        after_echo();
    }
}

/// `messages` round trips of client `client` through an echo server,
/// each message checked.
pub async fn echo_round_trips(stream: &fairlane::net::TcpStream, client: u32, messages: u32) {
    for i in 0..messages {
        echo_once(stream, format!("client {client} message {i}")).await;
    }
}

/// One round trip of `msg` through an echo server, the echo checked.
pub async fn echo_once(stream: &fairlane::net::TcpStream, msg: String) {
    let (r, msg) = stream.write_all_owned(msg.into_bytes()).await;
    r.unwrap();
    let mut got = Vec::new();
    while got.len() < msg.len() {
        let (n, buf) = stream.read_owned(Vec::with_capacity(64)).await;
        assert!(n.unwrap() > 0, "echo closed early");
        got.extend_from_slice(&buf);
    }
    assert_eq!(got, msg, "the echo of {:?}", String::from_utf8_lossy(&msg));
}

/// The workspace's one small random-number generator (xorshift64*).
pub use fairlane_core::rand::Rng;

/// A binary semaphore that a task (`wait().await`) or a plain thread
/// (`wait_blocking()`) waits on. The flag and the waker live under one lock,
/// so the primitive itself cannot lose a notification: if the runtime fails
/// to run a woken task, that is the runtime's fault.
#[derive(Default)]
pub struct Signal {
    state: Mutex<SignalState>,
}

#[derive(Default)]
struct SignalState {
    set: bool,
    waker: Option<Waker>,
}

impl Signal {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Sets the flag and wakes the waiter, if one is registered.
    pub fn notify(&self) {
        let waker = {
            let mut state = self.state.lock().unwrap();
            state.set = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Waits until the flag is set, and clears it.
    pub fn wait(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            let mut state = self.state.lock().unwrap();
            if state.set {
                state.set = false;
                state.waker = None;
                Poll::Ready(())
            } else {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }

    /// `wait` for a thread that is not part of any runtime: parks it.
    pub fn wait_blocking(&self) {
        let waker = thread_waker();
        loop {
            {
                let mut state = self.state.lock().unwrap();
                if state.set {
                    state.set = false;
                    state.waker = None;
                    return;
                }
                state.waker = Some(waker.clone());
            }
            // A notification between the unlock and the park unparks first,
            // which makes this park return at once.
            thread::park();
        }
    }
}

/// A waker that unparks the calling thread.
pub fn thread_waker() -> Waker {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    Waker::from(Arc::new(Unpark(thread::current())))
}

/// Counts its own drops: put one in a future to prove the future was dropped.
pub struct DropCounter(pub Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The message of a panic payload (`&str` or `String`).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    }
}

/// CPU time (user + system) this process used, from `getrusage`.
pub fn cpu_time() -> std::time::Duration {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed local.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// How long to wait for a runtime's processors to fall asleep before
/// declaring that they never do. Not a timing assertion: asleep they must
/// get, eventually; generous so that only a processor that never sleeps
/// trips it.
pub const SETTLE: Duration = Duration::from_secs(30);

/// The processor counters that must not move while a runtime is idle.
pub fn idle_snapshot(rt: &fairlane::Runtime) -> Vec<(u64, u64, u64, u64, u64)> {
    rt.metrics()
        .processors
        .iter()
        .map(|p| (p.iterations, p.wakeups, p.polls, p.parks, p.host_parks))
        .collect()
}

/// Waits until every processor sleeps (it bumps `parks` before it sleeps
/// and `wakeups` after) and the counters have been still for a moment: a
/// processor just woken still looks asleep until the operating system runs
/// it. Counts, not a fixed pause, so a slow machine only waits longer.
pub fn settle_asleep(rt: &fairlane::Runtime, what: &str) {
    let all_asleep = || {
        rt.metrics()
            .processors
            .iter()
            .all(|p| p.parks == p.wakeups + 1)
    };
    let start = std::time::Instant::now();
    loop {
        assert!(
            start.elapsed() < SETTLE,
            "{what}: processors never all went to sleep and stayed still (a host \
             whose park keeps returning shows in host_parks): {:?}",
            rt.metrics()
        );
        if all_asleep() {
            let before = idle_snapshot(rt);
            thread::sleep(Duration::from_millis(100));
            if all_asleep() && idle_snapshot(rt) == before {
                return;
            }
        } else {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Asserts that no processor ran a scheduling iteration, woke up, polled,
/// went to sleep again or saw its host's park return between `before` (an `idle_snapshot`) and now.
pub fn assert_still_idle(rt: &fairlane::Runtime, before: &[(u64, u64, u64, u64, u64)], what: &str) {
    let after = idle_snapshot(rt);
    assert_eq!(
        after, before,
        "{what}: a processor was busy while the runtime was idle \
         (iterations, wakeups, polls, parks, host parks per processor)"
    );
}

/// A runtime whose processors all sleep (see [`settle_asleep`]) stays idle
/// for a second: no processor runs an iteration, wakes up, polls, or sees
/// its host's park return (a park that returns early without a wake-up is
/// counted too). The counters cannot see a runtime thread that is not a
/// processor (the submission thread, the signal thread) spinning without
/// blocking: only CPU time shows that, so a generous bound backs the counts
/// (busy polling uses a whole core; 5% is allowed). Callers hold the serial
/// lock of their binary, so nothing else of theirs runs meanwhile.
pub fn assert_idle_for_a_second(rt: &fairlane::Runtime, what: &str) {
    let counters = idle_snapshot(rt);
    let wall = std::time::Instant::now();
    let before = cpu_time();
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_time() - before;
    let wall = wall.elapsed();
    assert_still_idle(rt, &counters, what);
    assert!(
        used < wall / 20,
        "{what}: idle runtime used {used:?} of CPU in {wall:?}"
    );
}

/// A connected pair of std TCP streams over loopback, neither in a
/// runtime: a test hands one to `fairlane::net::TcpStream::from_std` on the
/// processor whose engine it wants the socket in.
pub fn std_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (stream, _) = listener.accept().unwrap();
    (stream, peer)
}

/// A connected pair: a fairlane stream and the std peer it talks to.
pub async fn pair() -> (fairlane::net::TcpStream, std::net::TcpStream) {
    let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (stream, _) = listener.accept().await.unwrap();
    (stream, peer)
}

/// A connected pair of fairlane streams: the client and the server's side.
pub async fn fairlane_pair() -> (fairlane::net::TcpStream, fairlane::net::TcpStream) {
    let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let client = fairlane::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

/// Polls `read` once; if it is not ready, lets its processor submit it and
/// reap its completion (the task sleeps meanwhile, so nobody looks), then
/// drops it. Returns its output if the first poll had it. The peer's data,
/// end or reset must already be there: the kernel completes the read as
/// soon as the processor submits it, before the sleep ends.
pub async fn drop_after_completion<F: Future>(read: F) -> Option<F::Output> {
    let mut read = std::pin::pin!(read);
    let first = futures_lite::future::poll_once(&mut read).await;
    if first.is_none() {
        sleep_ms(50).await;
    }
    first
}

/// Polls `read` once while nothing has arrived (with io_uring this submits
/// it), lets the processor hand it to the kernel, `deliver`s its data, lets
/// the processor reap the completion (the task sleeps, so nobody looks),
/// then drops it: with io_uring the read's outcome is carried (or, if the
/// drop came first, still in flight); with the fallback backend nothing was
/// read.
pub async fn drop_after_delivery<F: Future>(read: F, deliver: impl FnOnce()) {
    let mut read = std::pin::pin!(read);
    assert!(
        futures_lite::future::poll_once(&mut read).await.is_none(),
        "nothing was sent yet"
    );
    sleep_ms(20).await;
    deliver();
    sleep_ms(50).await;
}

/// The next read after a dropped one: its outcome must be there at once
/// (carried), not waiting for a new submission.
pub async fn at_once<F: Future>(read: F) -> F::Output {
    futures_lite::future::poll_once(read)
        .await
        .expect("the dropped read's outcome was not handed to the next read")
}

async fn sleep_ms(ms: u64) {
    fairlane::time::sleep(Duration::from_millis(ms)).await;
}

/// What a peer read after a write of `first` was dropped in flight and
/// `second` was written: a prefix of `first` (with the fallback backend a
/// dropped write may have sent part of it; with io_uring the runtime
/// finishes it, so all of it), then `second`: no hole, no reordering.
pub fn assert_dropped_write_then(
    all: &[u8],
    first: &[u8],
    second: &[u8],
    backend: fairlane::io::IoBackend,
) {
    let (head, tail) = all.split_at(all.len() - second.len());
    assert_eq!(tail, second);
    assert_eq!(head, &first[..head.len()], "a hole or reordering");
    if backend == fairlane::io::IoBackend::IoUring {
        assert_eq!(head.len(), first.len(), "the dropped send was not finished");
    }
}
