//! Without the bridge (`Builder::tokio_compat(false)`), a crate that calls
//! tokio's runtime panics in the fairlane task that uses it, and the
//! task's `JoinError` says to leave the bridge on. (A build without the
//! `tokio-compat` feature says to enable it: the fairlane crate's own
//! tests check that message.)

use axum::routing::get;
use axum::Router;

use crate::common::{assert_on_fairlane_task, http_client, serve};

fn runtime_without_bridge() -> fairlane::Runtime {
    fairlane::Runtime::builder()
        .processors(2)
        .tokio_compat(false)
        .build()
        .unwrap()
}

#[track_caller]
fn assert_names_the_bridge(err: fairlane::task::JoinError) {
    assert!(err.is_panic());
    let message = err.to_string();
    assert!(message.contains("it needs tokio's runtime"), "{message}");
    assert!(message.contains("tokio_compat(false)"), "{message}");
    assert!(message.contains("leave the tokio bridge on"), "{message}");
}

/// reqwest, by IP address (`tokio::net`) and by host name (the resolver's
/// `spawn_blocking`): the server is fairlane's own and works; the client
/// task fails with the message.
#[test]
fn reqwest_without_the_bridge_names_the_fix() {
    let rt = runtime_without_bridge();
    rt.block_on(async {
        let addr = serve(Router::new().route("/", get(|| async { "hello" }))).await;
        for url in [
            format!("http://{addr}/"),
            format!("http://localhost:{}/", addr.port()),
        ] {
            let client = http_client();
            let err = fairlane::spawn(async move {
                assert_on_fairlane_task();
                let _ = client.get(url).send().await;
            })
            .await
            .unwrap_err();
            assert_names_the_bridge(err);
        }
    });
}

/// sqlx's pool (its `runtime-tokio` feature finds no tokio context).
#[test]
fn sqlx_without_the_bridge_names_the_fix() {
    let rt = runtime_without_bridge();
    let err = rt
        .block_on(rt.spawn(async {
            assert_on_fairlane_task();
            let _ = sqlx::SqlitePool::connect("sqlite::memory:").await;
        }))
        .unwrap_err();
    assert_names_the_bridge(err);
}
