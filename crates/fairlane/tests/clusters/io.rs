//! Timers and I/O across resizing, on both backends: operations waiting on
//! a removed processor's engine carry on elsewhere, a reused slot gets an
//! engine of its own, and a removed processor's submissions on other rings
//! are done again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fairlane::Runtime;

use crate::common::clusters::{add_when_a_slot_is_free, build, Resizer};
use crate::common::{echo_once, echo_server, on_both_backends, with_deadline, DEADLINE};
use crate::resizing::MAX;

/// I/O under continuous resizing, on both backends: TCP round trips (an
/// echo server task per connection, clients that check every echo), short
/// sleeps, `block_in_place` and file reads, while processors are added and
/// removed every 0.5-2 ms.
/// Every operation waiting on a removed processor's engine must carry on
/// elsewhere: no round trip may fail, hang or return the wrong bytes.
#[test]
fn io_round_trips_under_continuous_resizing() {
    io_under_resizing(fairlane::io::IoBackend::IoUring, 41);
}

#[test]
fn io_round_trips_under_continuous_resizing_fallback() {
    io_under_resizing(fairlane::io::IoBackend::Fallback, 43);
}

fn io_under_resizing(backend: fairlane::io::IoBackend, seed: u64) {
    const CONNECTIONS: u32 = 16;
    const ROUNDS: u32 = 200;
    let done = Arc::new(AtomicU64::new(0));
    let progress = done.clone();
    let (log, ops) = with_deadline(
        "io_under_resizing",
        DEADLINE,
        move || format!("{} round trips done", progress.load(Ordering::Relaxed)),
        move || {
            let rt = build(
                Runtime::builder()
                    .processors(2)
                    .max_processors(MAX)
                    .io_backend(backend),
            );
            let cluster = rt.handle().cluster();
            let resizer = Resizer::start(cluster.clone(), MAX, seed);
            rt.block_on(async {
                let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .unwrap();
                let addr = listener.local_addr().unwrap();
                let server = fairlane::spawn(echo_server(listener));
                let clients: Vec<_> = (0..CONNECTIONS)
                    .map(|c| {
                        let done = done.clone();
                        fairlane::spawn(async move {
                            let stream = fairlane::net::TcpStream::connect(addr).await.unwrap();
                            for round in 0..ROUNDS {
                                echo_once(&stream, format!("connection {c} round {round}")).await;
                                match round % 16 {
                                    0 => fairlane::time::sleep(Duration::from_micros(200)).await,
                                    // The processor goes to a stand-in thread
                                    // and back (it may be removed meanwhile).
                                    5 => fairlane::task::block_in_place(|| {
                                        thread::sleep(Duration::from_micros(100))
                                    }),
                                    // A file read from a task: its operation
                                    // may land on a ring that goes next.
                                    9 => {
                                        let got = fairlane::fs::read(concat!(
                                            env!("CARGO_MANIFEST_DIR"),
                                            "/Cargo.toml"
                                        ))
                                        .await
                                        .unwrap();
                                        assert!(!got.is_empty());
                                    }
                                    _ => {}
                                }
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                        })
                    })
                    .collect();
                for c in clients {
                    c.await.unwrap();
                }
                server.abort();
            });
            let ops = resizer.ops();
            (resizer.finish(), ops)
        },
    );
    assert!(
        log.removes > 0 && ops > 0,
        "the cluster was resized while the I/O ran: {log:?}"
    );
}

/// A runtime of two processors (at most two) on io_uring.
fn two_processors_on_io_uring() -> Runtime {
    build(
        Runtime::builder()
            .processors(2)
            .max_processors(2)
            .io_backend(fairlane::io::IoBackend::IoUring),
    )
}

/// A slot reused after a removal has an engine of its own, and threads that
/// are not processors (here `block_on` threads reading a file) submit to it
/// through the driver's submission thread (whose engine table is indexed
/// by slot: were it indexed by arrival, a read after the reuse would go to
/// the stopped engine's ring and never reach the kernel).
#[test]
fn io_from_outside_threads_after_a_slot_is_reused() {
    with_deadline("outside_io_after_reuse", DEADLINE, String::new, || {
        let rt = two_processors_on_io_uring();
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        cluster.remove_processor(ids[1]).unwrap();
        let added = add_when_a_slot_is_free(&cluster);
        assert_eq!(added.index(), ids[1].index());
        let path =
            std::env::temp_dir().join(format!("fairlane-clusters-reuse-{}", std::process::id()));
        std::fs::write(&path, b"hello").unwrap();
        // Round-robin choice of engine for outside threads: several reads
        // reach both, the new one included.
        for _ in 0..8 {
            let got = rt.block_on(fairlane::fs::read(&path)).unwrap();
            assert_eq!(got, b"hello");
        }
        let _ = std::fs::remove_file(&path);
    });
}

/// Processor B, sleeping, helps processor A (busy in a long poll) by
/// submitting A's batched receive; then B is removed and its thread exits,
/// which makes the kernel cancel the requests that thread submitted, on
/// A's ring too. The receive is done again and gets its data.
#[test]
fn io_submitted_by_a_removed_rescuer_is_done_again() {
    use std::future::Future;
    use std::io::Write;
    use std::task::Context;
    with_deadline("helper_removed", DEADLINE, String::new, || {
        let rt = two_processors_on_io_uring();
        let cluster = rt.handle().cluster();
        let ids = cluster.processors();
        let (a, b) = (ids[0], ids[1]);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let task = fairlane::task::Builder::new()
            .affinity([a])
            .spawn_on(
                async move {
                    let conn = fairlane::net::TcpStream::connect(addr).await?;
                    let mut read = Box::pin(conn.read_owned(Vec::with_capacity(16)));
                    // Batched on A's ring, not yet submitted.
                    assert!(read
                        .as_mut()
                        .poll(&mut Context::from_waker(std::task::Waker::noop()))
                        .is_pending());
                    // B goes through park again, now watching A.
                    let _ = fairlane::task::Builder::new().affinity([b]).spawn(async {});
                    let until = Instant::now() + Duration::from_millis(100);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    ready_tx.send(()).unwrap();
                    let (n, buf) = read.await;
                    n?;
                    Ok::<_, std::io::Error>(buf)
                },
                rt.handle(),
            )
            .unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        ready_rx.recv().unwrap();
        thread::sleep(Duration::from_millis(20));
        cluster.remove_processor(b).unwrap();
        thread::sleep(Duration::from_millis(100));
        peer.write_all(b"data").unwrap();
        assert_eq!(rt.block_on(task).unwrap().unwrap(), b"data");
    });
}

on_both_backends!(timers_and_io_survive_resizing);

/// Timers and sockets on processors that are added and removed, on both I/O
/// backends: sleeps registered on a removed processor's wheel still fire
/// (they move to the remaining processors); an accept and a read waiting on
/// the removed processor's engine (its ring, or its poller) carry on
/// elsewhere and complete when their peer acts, with the data intact; a
/// processor added into a reused slot does I/O on an engine of its own.
fn timers_and_io_survive_resizing(backend: fairlane::io::IoBackend) {
    use std::io::Write;
    let rt = build(
        Runtime::builder()
            .processors(3)
            .max_processors(3)
            .io_backend(backend),
    );
    assert_eq!(rt.io_backend(), backend);
    let cluster = rt.handle().cluster();
    let ids = cluster.processors();
    // Sleepers restricted to the processor about to go: their timers are on
    // its wheel.
    let sleepers: Vec<_> = (0..20)
        .map(|i| {
            fairlane::task::Builder::new()
                .affinity([ids[2]])
                .spawn_on(
                    async move {
                        fairlane::time::sleep(std::time::Duration::from_millis(20 + i)).await;
                        i
                    },
                    rt.handle(),
                )
                .unwrap()
        })
        .collect();
    // On that processor: a listener with an accept waiting, and a connected
    // stream with a read waiting (a std client on the other side).
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (waiting_tx, waiting_rx) = std::sync::mpsc::channel();
    let server = fairlane::task::Builder::new()
        .affinity([ids[2]])
        .spawn_on(
            async move {
                let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
                addr_tx.send(listener.local_addr()?).unwrap();
                let (conn, _) = listener.accept().await?;
                waiting_tx.send(()).unwrap();
                let read = conn.read_owned(Vec::with_capacity(16));
                let second = listener.accept();
                // Both wait on this processor's engine when it goes.
                let ((n, buf), accepted) = futures_lite::future::zip(read, second).await;
                let mut got = buf;
                got.truncate(n?);
                accepted?;
                Ok::<_, std::io::Error>(got)
            },
            rt.handle(),
        )
        .unwrap();
    let addr = addr_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the listener never bound");
    let mut first = std::net::TcpStream::connect(addr).unwrap();
    waiting_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the first connection was never accepted");
    // Let the read and the second accept reach the engine.
    std::thread::sleep(std::time::Duration::from_millis(20));
    cluster.remove_processor(ids[2]).unwrap();
    first.write_all(b"after removal").unwrap();
    let _second = std::net::TcpStream::connect(addr).unwrap();
    let got = rt
        .block_on(server)
        .unwrap()
        .expect("the read and the accept carry on after their processor is removed");
    assert_eq!(got, b"after removal");
    drop(first);
    let total: u64 = rt.block_on(async {
        let mut total = 0;
        for s in sleepers {
            total += s.await.unwrap();
        }
        total
    });
    assert_eq!(total, (0..20).sum::<u64>());
    // The slot comes back with a fresh engine: a round trip through a task
    // restricted to the new processor.
    let added = cluster.add_processor().unwrap();
    assert_eq!(added.index(), ids[2].index());
    let echo = fairlane::task::Builder::new()
        .affinity([added])
        .spawn_on(
            async move {
                let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let client = fairlane::spawn(async move {
                    let s = fairlane::net::TcpStream::connect(addr).await?;
                    let (r, _) = s.write_all_owned(b"ping".to_vec()).await;
                    r
                });
                let (conn, _) = listener.accept().await?;
                let (n, buf) = conn.read_owned(vec![0u8; 4]).await;
                client.await.unwrap()?;
                Ok::<_, std::io::Error>(buf[..n?].to_vec())
            },
            rt.handle(),
        )
        .unwrap();
    assert_eq!(rt.block_on(echo).unwrap().unwrap(), b"ping");
}
