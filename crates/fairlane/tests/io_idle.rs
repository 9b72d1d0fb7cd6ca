//! An idle runtime with 10,000 pending accepts and 10,000 pending sleeps
//! uses no CPU: processors sleep in their ring (or poller) until a
//! completion or their earliest timer. Its own test binary, because it
//! measures the CPU time of the whole process.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairlane::io::IoBackend;
use fairlane::net::TcpListener;
use fairlane::Runtime;

#[test]
fn idle_runtime_with_pending_accepts_and_sleeps_uses_no_cpu() {
    for backend in [IoBackend::IoUring, IoBackend::Fallback] {
        let rt = Runtime::builder()
            .processors(2)
            .io_backend(backend)
            .build()
            .unwrap();
        assert_eq!(rt.io_backend(), backend);
        let accepted = Arc::new(AtomicUsize::new(0));
        let listeners: Vec<Arc<TcpListener>> = rt.block_on(async {
            let mut v = Vec::new();
            for _ in 0..1000 {
                v.push(Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap()));
            }
            v
        });
        let mut tasks = Vec::new();
        for listener in &listeners {
            for _ in 0..10 {
                let listener = listener.clone();
                let accepted = accepted.clone();
                tasks.push(rt.spawn(async move {
                    let _conn = listener.accept().await.unwrap();
                    accepted.fetch_add(1, Ordering::SeqCst);
                }));
            }
        }
        for i in 0..10_000u64 {
            tasks.push(rt.spawn(async move {
                fairlane::time::sleep(Duration::from_secs(3600 + i % 1000)).await;
            }));
        }
        // Every task has started its operation once it has been polled;
        // then wait until the processors sleep, by their counters.
        let spawned = tasks.len() as u64;
        rt.block_on(async {
            while rt.metrics().processors.iter().map(|p| p.polls).sum::<u64>() < spawned {
                fairlane::time::sleep(Duration::from_millis(1)).await;
            }
        });
        common::settle_asleep(&rt, &format!("{backend}"));
        common::assert_idle_for_a_second(&rt, &format!("{backend}"));
        // Still alive: a connection to one listener is accepted by exactly
        // one of its ten acceptors.
        let addr = listeners[500].local_addr().unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while accepted.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < deadline,
                "{backend}: the connection was never accepted"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "{backend}");
        for t in &tasks {
            t.abort();
        }
        drop(tasks);
        drop(rt);
    }
}
