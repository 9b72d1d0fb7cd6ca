//! The tokio bridge (feature `tokio-compat`): tokio's runtime items called
//! from fairlane tasks, blocking-pool threads and `block_on`, as crates
//! built on tokio call them; and, without the bridge, the error that says
//! how to get it.
//!
//! Run with the bridge: `cargo test -p fairlane --features tokio-compat --test tokio_compat`.

mod common;

/// Without the bridge, a task that calls `tokio::spawn` panics with tokio's
/// message; the `JoinError` says what to do.
#[test]
fn without_the_bridge_the_join_error_names_the_fix() {
    let mut builder = fairlane::Runtime::builder();
    builder.processors(1);
    #[cfg(feature = "tokio-compat")]
    builder.tokio_compat(false);
    let rt = builder.build().unwrap();
    let err = rt
        .block_on(rt.spawn(async {
            drop(tokio::spawn(async {}));
        }))
        .unwrap_err();
    assert!(err.is_panic());
    let message = err.to_string();
    assert!(message.contains("Tokio 1.x runtime"), "{message}");
    if cfg!(feature = "tokio-compat") {
        assert!(message.contains("tokio_compat(false)"), "{message}");
    } else {
        assert!(message.contains("`tokio-compat` feature"), "{message}");
    }
}

#[cfg(feature = "tokio-compat")]
mod bridged {
    use super::*;
    use fairlane::io::IoBackend;
    use std::time::Duration;

    fn runtime(backend: IoBackend) -> fairlane::Runtime {
        fairlane::Runtime::builder()
            .processors(2)
            .io_backend(backend)
            .build()
            .unwrap()
    }

    /// `tokio::spawn`, tokio's timer and `tokio::task::spawn_blocking`
    /// from fairlane tasks, and from the future in `block_on`.
    #[test]
    fn tokio_tasks_timers_and_blocking_from_fairlane_tasks() {
        let rt = runtime(IoBackend::Fallback);
        let sum = rt.block_on(async {
            let tasks: Vec<_> = (0..8u64)
                .map(|i| {
                    fairlane::spawn(async move {
                        let spawned = tokio::spawn(async move { i * 2 }).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        let blocking = tokio::task::spawn_blocking(move || i + 1).await.unwrap();
                        spawned + blocking
                    })
                })
                .collect();
            let mut sum = tokio::spawn(async { 100 }).await.unwrap();
            for task in tasks {
                sum += task.await.unwrap();
            }
            sum
        });
        assert_eq!(sum, 100 + (0..8).map(|i| i * 3 + 1).sum::<u64>());
    }

    /// A fairlane blocking-pool thread and a current-thread runtime's
    /// `block_on` have tokio's context too.
    #[test]
    fn blocking_threads_and_current_thread_runtimes_are_bridged() {
        let rt = runtime(IoBackend::Fallback);
        let flavor = rt
            .block_on(rt.spawn_blocking(|| tokio::runtime::Handle::current().runtime_flavor()))
            .unwrap();
        assert_eq!(flavor, tokio::runtime::RuntimeFlavor::MultiThread);
        let current = fairlane::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out =
            current.block_on(current.spawn(async { tokio::spawn(async { 7 }).await.unwrap() }));
        assert_eq!(out.unwrap(), 7);
    }

    /// tokio's TCP from fairlane tasks against a fairlane listener: a
    /// client crate's connection (as reqwest's or tonic's) to a fairlane
    /// server, in both directions of the bridge.
    fn tokio_net_against_a_fairlane_server(backend: IoBackend) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let rt = runtime(backend);
        rt.block_on(async {
            let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap();
            let addr = listener.local_addr().unwrap();
            let server = fairlane::spawn(common::echo_server(listener));
            let client = fairlane::spawn(async move {
                let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                stream.write_all(b"through the bridge").await.unwrap();
                let mut buf = [0u8; 18];
                stream.read_exact(&mut buf).await.unwrap();
                buf
            });
            assert_eq!(&client.await.unwrap(), b"through the bridge");
            server.abort();
        });
    }

    common::on_both_backends!(tokio_net_against_a_fairlane_server);

    /// The tokio runtime stops with fairlane's: a tokio task left running
    /// is dropped once the fairlane runtime is.
    #[test]
    fn the_tokio_runtime_stops_with_fairlanes() {
        struct Dropped(std::sync::mpsc::Sender<()>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let rt = runtime(IoBackend::Fallback);
        rt.block_on(async move {
            let held = Dropped(tx);
            tokio::spawn(async move {
                let _held = held;
                std::future::pending::<()>().await;
            });
        });
        drop(rt);
        rx.recv_timeout(common::scaled(common::DEADLINE))
            .expect("the tokio task was never dropped");
    }
}
