//! The order in which timers that `time::advance` made due and tasks woken
//! by socket I/O run: in each look a processor takes at its engine, due
//! timers fire first, so their tasks run before the tasks that I/O
//! reported in that same look woke (`time/clock.md`, "Due timers before
//! ready I/O").
//!
//! The ported server's expiry test relies on it: a key with an expiry, a
//! purge task sleeping until then, and a connection task serving requests;
//! the test moves the clock past the expiry, then asks for the key, and
//! the reply must say it expired, though the request and the due purge
//! reach the server's processor together.
//!
//! Deterministic: every task is in its wait before the clock moves, the
//! clock moves before the I/O's event can be looked at (or, in the second
//! scenario, no look happens between the socket becoming readable and the
//! clock moving), and only the order of runs is asserted. Each scenario
//! runs on both I/O backends, on a current-thread runtime and on a
//! one-processor multi-thread runtime (every task on the processor that
//! serves the socket and holds the timer; with several processors, a timer
//! and a socket on different processors are fired by each when it looks).

mod common;

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::on_both_backends;
use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream};
use fairlane::time::{self, sleep};
use fairlane::Runtime;

const EXPIRY: Duration = Duration::from_secs(1);

on_both_backends!(
    current_thread_request_after_advance_finds_the_key_expired,
    multi_thread_request_after_advance_finds_the_key_expired,
    current_thread_due_timer_runs_before_a_read_ready_in_the_same_look,
    multi_thread_due_timer_runs_before_a_read_ready_in_the_same_look,
);

fn current_thread(backend: IoBackend) -> Runtime {
    let rt = fairlane::runtime::Builder::new_current_thread()
        .io_backend(backend)
        .start_paused(true)
        .build()
        .expect("build runtime");
    assert_eq!(rt.io_backend(), backend);
    rt
}

fn one_processor(backend: IoBackend) -> Runtime {
    let rt = Runtime::builder()
        .processors(1)
        .io_backend(backend)
        .start_paused(true)
        .build()
        .expect("build runtime");
    assert_eq!(rt.io_backend(), backend);
    rt
}

/// Waits, in `block_on` (a plain thread on a multi-thread runtime), until
/// `flag` is set by a task.
async fn until_set(flag: &AtomicBool) {
    while !flag.load(Ordering::SeqCst) {
        fairlane::task::yield_now().await;
        std::thread::yield_now();
    }
}

/// A one-key server: a purge task that drops the key at `EXPIRY`, and a
/// connection task that answers each request with the key's value, or
/// `(nil)` once purged. The client asks once (the key is there), moves
/// the clock past the expiry, and asks again.
fn request_after_advance_finds_the_key_expired(rt: Runtime) {
    rt.block_on(async {
        let store: Arc<Mutex<Option<&'static str>>> = Arc::new(Mutex::new(Some("value")));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let purge_waits = Arc::new(AtomicBool::new(false));
        let purge = {
            let (store, purge_waits) = (store.clone(), purge_waits.clone());
            fairlane::spawn(async move {
                let expiry = sleep(EXPIRY);
                purge_waits.store(true, Ordering::SeqCst);
                expiry.await;
                store.lock().unwrap().take();
            })
        };
        let serve = {
            let store = store.clone();
            fairlane::spawn(async move {
                loop {
                    let (n, _) = server.read_owned(vec![0u8; 16]).await;
                    if n.unwrap() == 0 {
                        return;
                    }
                    let reply = match *store.lock().unwrap() {
                        Some(value) => value.as_bytes().to_vec(),
                        None => b"(nil)".to_vec(),
                    };
                    let (r, _) = server.write_all_owned(reply).await;
                    r.unwrap();
                }
            })
        };
        // The purge task is polled into its sleep (on one processor its
        // poll ends before the connection task's next one, which the round
        // trip below needs).
        until_set(&purge_waits).await;
        let get = || async {
            let (r, _) = client.write_all_owned(b"GET key".to_vec()).await;
            r.unwrap();
            let (n, reply) = client.read_owned(vec![0u8; 16]).await;
            String::from_utf8(reply[..n.unwrap()].to_vec()).unwrap()
        };
        assert_eq!(get().await, "value");
        time::advance(EXPIRY).await;
        assert_eq!(get().await, "(nil)", "served the key after its expiry");
        purge.await.unwrap();
        drop(client);
        serve.await.unwrap();
    });
}

fn current_thread_request_after_advance_finds_the_key_expired(backend: IoBackend) {
    request_after_advance_finds_the_key_expired(current_thread(backend));
}

fn multi_thread_request_after_advance_finds_the_key_expired(backend: IoBackend) {
    request_after_advance_finds_the_key_expired(one_processor(backend));
}

/// A task reading a socket and a task sleeping `EXPIRY`, both in their
/// waits. `make_due` makes the socket readable and moves the clock past
/// the sleep with no look at the engine in between. Returns the order in
/// which the two went on.
async fn timer_and_read<F, Fut>(make_due: F) -> Vec<&'static str>
where
    F: FnOnce(std::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = std::net::TcpStream>,
{
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiting = Arc::new(AtomicUsize::new(0));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    // A plain socket: its write is done when the call returns, without the
    // runtime.
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().await.unwrap();
    let reader = {
        let (order, waiting) = (order.clone(), waiting.clone());
        fairlane::spawn(async move {
            let read = server.read_owned(vec![0u8; 16]);
            waiting.fetch_add(1, Ordering::SeqCst);
            let (n, _) = read.await;
            assert!(n.unwrap() > 0);
            order.lock().unwrap().push("read");
        })
    };
    let sleeper = {
        let (order, waiting) = (order.clone(), waiting.clone());
        fairlane::spawn(async move {
            let expiry = sleep(EXPIRY);
            waiting.fetch_add(1, Ordering::SeqCst);
            expiry.await;
            order.lock().unwrap().push("timer");
        })
    };
    while waiting.load(Ordering::SeqCst) < 2 {
        fairlane::task::yield_now().await;
        std::thread::yield_now();
    }
    let client = make_due(client).await;
    reader.await.unwrap();
    sleeper.await.unwrap();
    drop(client);
    let order = order.lock().unwrap().clone();
    order
}

/// Current-thread: the `block_on` future writes and advances in one poll,
/// while the processor (its own thread's) does not look.
fn current_thread_due_timer_runs_before_a_read_ready_in_the_same_look(backend: IoBackend) {
    let order = current_thread(backend).block_on(timer_and_read(|mut client| async move {
        client.write_all(b"ping").unwrap();
        time::advance(EXPIRY).await;
        client
    }));
    assert_eq!(
        order,
        ["timer", "read"],
        "the ready read ran before the due timer"
    );
}

/// One processor: it runs a task that blocks its thread while `block_on`
/// writes and advances, so its next look finds both.
fn multi_thread_due_timer_runs_before_a_read_ready_in_the_same_look(backend: IoBackend) {
    let order = one_processor(backend).block_on(timer_and_read(|mut client| async move {
        let (release, released) = mpsc::channel::<()>();
        let blocking = Arc::new(AtomicBool::new(false));
        let blocker = {
            let blocking = blocking.clone();
            fairlane::spawn(async move {
                blocking.store(true, Ordering::SeqCst);
                released.recv().unwrap();
            })
        };
        until_set(&blocking).await;
        client.write_all(b"ping").unwrap();
        time::advance(EXPIRY).await;
        release.send(()).unwrap();
        blocker.await.unwrap();
        client
    }));
    assert_eq!(
        order,
        ["timer", "read"],
        "the ready read ran before the due timer"
    );
}
