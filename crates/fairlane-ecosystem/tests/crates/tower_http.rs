//! tower-http's `TimeoutLayer` (a tokio timer around each request) on an
//! axum application served by `fairlane::axum::serve`: a slow handler gets
//! 408, a fast one 200, and the connection stays usable after a timeout.

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{Request, StatusCode};
use tower_http::timeout::TimeoutLayer;

use crate::common::{assert_on_fairlane_task, serve};

/// Long enough that the fast handler never meets it, even on a loaded
/// machine; the slow one never answers.
const TIMEOUT: Duration = Duration::from_secs(2);

fn app() -> Router {
    Router::new()
        .route(
            "/fast",
            get(|| async {
                // The handler, and the timeout around it, run in the
                // connection's fairlane task.
                assert_on_fairlane_task();
                "fast"
            }),
        )
        .route(
            "/slow",
            get(|| async {
                assert_on_fairlane_task();
                std::future::pending::<()>().await;
                "never"
            }),
        )
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            TIMEOUT,
        ))
}

/// Requests on one HTTP/1 connection: fast, slow, fast, slow, fast.
async fn slow_gets_408_fast_gets_200_on_one_connection() {
    let addr = serve(app()).await;
    let client = fairlane::spawn(async move {
        assert_on_fairlane_task();
        let stream = fairlane::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
        let conn = fairlane::spawn(conn);
        let mut statuses = Vec::new();
        for path in ["/fast", "/slow", "/fast", "/slow", "/fast"] {
            sender.ready().await.unwrap();
            let request = Request::get(path)
                .header("host", "localhost")
                .body(Empty::<Bytes>::new())
                .unwrap();
            let response = sender.send_request(request).await.unwrap();
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            if status == StatusCode::OK {
                assert_eq!(body, "fast");
            }
            statuses.push(status);
        }
        drop(sender);
        conn.await.unwrap().unwrap();
        statuses
    });
    let timeout = StatusCode::REQUEST_TIMEOUT;
    let ok = StatusCode::OK;
    assert_eq!(client.await.unwrap(), [ok, timeout, ok, timeout, ok]);
}

#[fairlane::test(processors = 2)]
async fn timeout_layer_multi_thread() {
    slow_gets_408_fast_gets_200_on_one_connection().await;
}

#[fairlane::test(flavor = "current_thread")]
async fn timeout_layer_current_thread() {
    slow_gets_408_fast_gets_200_on_one_connection().await;
}
