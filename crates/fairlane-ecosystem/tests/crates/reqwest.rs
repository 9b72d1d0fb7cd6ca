//! reqwest, an HTTP client that runs its connections as tokio tasks on
//! `tokio::net` sockets, resolves host names with `spawn_blocking` and
//! times out with tokio's timers, against an axum application served by
//! `fairlane::axum::serve`.

use std::net::SocketAddr;

use axum::routing::{get, post};
use axum::Router;

use crate::common::{assert_on_fairlane_task, http_client, serve};

fn app() -> Router {
    Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/upper",
            post(|body: String| async move { body.to_uppercase() }),
        )
}

/// A GET and a POST from a fairlane task, by IP address and by the host
/// name `localhost`.
async fn get_and_post(addr: SocketAddr) {
    let client = http_client();
    let task = fairlane::spawn(async move {
        assert_on_fairlane_task();
        for host in [addr.to_string(), format!("localhost:{}", addr.port())] {
            let response = client
                .get(format!("http://{host}/hello"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), reqwest::StatusCode::OK);
            assert_eq!(response.text().await.unwrap(), "hello");
            let response = client
                .post(format!("http://{host}/upper"))
                .body("through the bridge")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), reqwest::StatusCode::OK);
            assert_eq!(response.text().await.unwrap(), "THROUGH THE BRIDGE");
        }
    });
    task.await.unwrap();
}

#[fairlane::test(processors = 2)]
async fn get_and_post_by_ip_and_host_name_multi_thread() {
    get_and_post(serve(app()).await).await;
}

#[fairlane::test(flavor = "current_thread")]
async fn get_and_post_by_ip_and_host_name_current_thread() {
    get_and_post(serve(app()).await).await;
}

/// Many fairlane tasks share one client (one connection pool) and make
/// requests at the same time.
#[fairlane::test(processors = 2)]
async fn many_tasks_share_one_client() {
    const TASKS: usize = 64;
    const REQUESTS: usize = 8;
    let addr = serve(app()).await;
    let client = http_client();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            fairlane::spawn(async move {
                assert_on_fairlane_task();
                for r in 0..REQUESTS {
                    let body = format!("task {t} request {r}");
                    let response = client
                        .post(format!("http://{addr}/upper"))
                        .body(body.clone())
                        .send()
                        .await
                        .unwrap()
                        .error_for_status()
                        .unwrap();
                    assert_eq!(response.text().await.unwrap(), body.to_uppercase());
                }
                REQUESTS
            })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        done += task.await.unwrap();
    }
    assert_eq!(done, TASKS * REQUESTS);
}

/// reqwest's own timeout (a tokio timer) fires in a fairlane task.
#[fairlane::test(processors = 2)]
async fn request_timeout_fires() {
    let slow = Router::new().route(
        "/slow",
        get(|| async {
            fairlane::time::sleep(std::time::Duration::from_secs(30)).await;
            "late"
        }),
    );
    let addr = serve(slow).await;
    let client = http_client();
    let err = fairlane::spawn(async move {
        assert_on_fairlane_task();
        client
            .get(format!("http://{addr}/slow"))
            .timeout(std::time::Duration::from_millis(50))
            .send()
            .await
            .unwrap_err()
    })
    .await
    .unwrap();
    assert!(err.is_timeout(), "{err}");
}
