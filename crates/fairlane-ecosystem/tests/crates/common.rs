//! What the tests share: an axum application served by fairlane, and the
//! check that code runs in a fairlane task.

use std::net::SocketAddr;

/// Panics unless the caller is a fairlane task (not a tokio task, not a
/// `block_on` future), so that a test cannot pass on tokio alone.
#[track_caller]
pub fn assert_on_fairlane_task() {
    assert!(
        fairlane::task::try_id().is_some(),
        "expected to run in a fairlane task"
    );
    assert!(
        tokio::task::try_id().is_none(),
        "a fairlane task is not a tokio task"
    );
}

/// Serves `app` with `fairlane::axum::serve` on a fresh loopback port, in
/// a fairlane task; returns the address.
pub async fn serve(app: axum::Router) -> SocketAddr {
    let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    fairlane::spawn(async move { fairlane::axum::serve(listener, app).await.unwrap() });
    addr
}

/// A reqwest client for servers on the loopback address: no proxy from
/// the environment.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}
