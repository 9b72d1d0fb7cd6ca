//! axum on fairlane by hand: a `Router` called as a tower service from
//! hyper's `http1::Builder` (with `fairlane::hyper::Timer`) on fairlane
//! streams, the way to serve one with hyper settings that
//! `fairlane::axum::serve` (tests/axum_serve.rs) does not take. Routes,
//! extractors and shared state over one keep-alive connection, and an idle
//! keep-alive connection closed by hyper's graceful shutdown, asked for
//! directly or through the runtime's graceful shutdown; on both backends.

mod common;

use std::convert::Infallible;
use std::io::{Read, Write};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::future::RouteFuture;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use futures_lite::future;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::{Method, Request, StatusCode};
use tower_service::Service;

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream};

use common::backend_runtime as runtime;
use common::Signal;

common::on_both_backends!(
    router_serves_routes_over_one_keep_alive_connection,
    graceful_shutdown_closes_an_idle_keep_alive_connection,
    runtime_graceful_shutdown_closes_an_idle_connection,
);

/// The application: a static page, a path parameter, a body echo, and a
/// hit counter in the router's state (`hits`, shared with the test).
fn app(hits: Arc<AtomicU64>) -> Router {
    Router::new()
        .route("/", get(|| async { "hello from fairlane" }))
        .route(
            "/users/{id}",
            get(|Path(id): Path<u32>| async move { format!("user {id}") }),
        )
        .route("/echo", post(|body: Bytes| async move { body }))
        .route(
            "/count",
            get(|State(hits): State<Arc<AtomicU64>>| async move {
                (hits.fetch_add(1, Ordering::SeqCst) + 1).to_string()
            }),
        )
        .with_state(hits)
}

/// The function behind hyper's `service_fn` for `app`: each request goes to
/// a clone of the router, called as a tower service (a `Router` is always
/// ready, and takes hyper's `Incoming` body as it is).
fn router_call(
    app: Router,
) -> impl Fn(Request<Incoming>) -> RouteFuture<Infallible> + Clone + Send + 'static {
    move |req| app.clone().call(req)
}

/// hyper's HTTP/1 server connection for `stream`, serving `app`, its header
/// read timeout (generous: only a hang reaches it) on fairlane's timer.
fn connection(
    stream: TcpStream,
    app: Router,
) -> http1::Connection<
    TcpStream,
    impl hyper::service::HttpService<
            Incoming,
            ResBody = axum::body::Body,
            Error = Infallible,
            Future = RouteFuture<Infallible>,
        > + Send,
> {
    http1::Builder::new()
        .timer(fairlane::hyper::Timer)
        .header_read_timeout(Duration::from_secs(60))
        .serve_connection(stream, hyper::service::service_fn(router_call(app)))
}

/// Sends one request on a hyper client connection and collects the answer.
async fn send(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    method: Method,
    path: &str,
    body: &[u8],
) -> (StatusCode, HeaderMap, Bytes) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "fairlane.test")
        .body(Full::new(Bytes::copy_from_slice(body)))
        .unwrap();
    // HTTP/1: one request at a time; the connection is ready again once the
    // last response was read.
    sender.ready().await.unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, body)
}

/// One request of a scenario and what must come back: method, path, request
/// body; status, response body, content type (when there is one to check).
type Case<'a> = (
    Method,
    &'a str,
    &'a [u8],
    StatusCode,
    &'a [u8],
    Option<&'a str>,
);

fn router_serves_routes_over_one_keep_alive_connection(backend: IoBackend) {
    let rt = runtime(backend, 2);
    let hits = Arc::new(AtomicU64::new(0));
    let app = app(hits.clone());
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // One connection accepted, and served until the client is done.
        let server = fairlane::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            connection(stream, app).await
        });
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
        let client_conn = fairlane::spawn(conn);

        let echoed: Vec<u8> = (0..65_537u32).map(|i| (i % 251) as u8).collect();
        let text = "text/plain; charset=utf-8";
        let octets = "application/octet-stream";
        #[rustfmt::skip]
        let cases: [Case; 10] = [
            (Method::GET, "/", b"", StatusCode::OK, b"hello from fairlane", Some(text)),
            (Method::GET, "/count", b"", StatusCode::OK, b"1", Some(text)),
            (Method::GET, "/users/42", b"", StatusCode::OK, b"user 42", Some(text)),
            (Method::GET, "/count", b"", StatusCode::OK, b"2", Some(text)),
            (Method::POST, "/echo", &echoed, StatusCode::OK, &echoed, Some(octets)),
            (Method::POST, "/echo", b"", StatusCode::OK, b"", Some(octets)),
            (Method::GET, "/no/such/page", b"", StatusCode::NOT_FOUND, b"", None),
            (Method::POST, "/", b"x", StatusCode::METHOD_NOT_ALLOWED, b"", None),
            (Method::GET, "/users/7", b"", StatusCode::OK, b"user 7", Some(text)),
            (Method::GET, "/count", b"", StatusCode::OK, b"3", Some(text)),
        ];
        for (i, (method, path, body, status, want, content_type)) in cases.into_iter().enumerate() {
            let (got_status, headers, got) = send(&mut sender, method.clone(), path, body).await;
            let what = format!("request {i} ({method} {path})");
            assert_eq!(got_status, status, "{what}");
            assert!(
                got == want,
                "{what}: body {:?}",
                String::from_utf8_lossy(&got[..got.len().min(200)])
            );
            if let Some(content_type) = content_type {
                assert_eq!(headers[CONTENT_TYPE], content_type, "{what}");
            }
        }
        // A path parameter that is not a `u32` is the extractor's rejection.
        let (status, _, _) = send(&mut sender, Method::GET, "/users/abc", b"").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);

        // Every request went over the one connection the server accepted;
        // dropping the sender ends it cleanly on both sides.
        drop(sender);
        client_conn.await.unwrap().unwrap();
        server.await.unwrap().unwrap();
    });
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

/// The head (up to the blank line) and `content-length` body of the next
/// response on `client`; a connection that ends first fails the test.
fn read_response(client: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(got[..end].to_vec()).unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .unwrap_or_else(|| panic!("no content-length in {head:?}"));
            let body = &got[end + 4..];
            if body.len() >= len {
                assert_eq!(body.len(), len, "bytes after the response: {head:?}");
                return (head, body.to_vec());
            }
        }
        let n = client.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the connection closed mid-response: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
}

/// Two `GET /count` requests on `client`, answered `1` and `2` over the same
/// connection, which stays open (idle, kept alive) afterwards.
fn two_counts_kept_alive(client: &mut std::net::TcpStream) {
    for want in ["1", "2"] {
        client
            .write_all(b"GET /count HTTP/1.1\r\nhost: fairlane.test\r\n\r\n")
            .unwrap();
        let (head, body) = read_response(client);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head:?}");
        assert!(
            !head.to_ascii_lowercase().contains("connection: close"),
            "{head:?}"
        );
        assert_eq!(String::from_utf8_lossy(&body), want);
    }
}

/// After the server's graceful close: the client reads the end of the
/// stream, with nothing before it.
fn assert_closed(client: &mut std::net::TcpStream) {
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    assert!(
        rest.is_empty(),
        "bytes before the end: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

fn graceful_shutdown_closes_an_idle_keep_alive_connection(backend: IoBackend) {
    let rt = runtime(backend, 2);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Signal::new();
    let server = rt.spawn({
        let stop = stop.clone();
        async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut conn = pin!(connection(stream, app(Arc::default())));
            let ended = future::or(async { Some(conn.as_mut().await) }, async {
                stop.wait().await;
                None
            })
            .await;
            assert!(
                ended.is_none(),
                "the connection ended on its own: {ended:?}"
            );
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    });
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    two_counts_kept_alive(&mut client);
    stop.notify();
    // serve_connection returns Ok, and the client sees the stream end.
    rt.block_on(server).unwrap().unwrap();
    assert_closed(&mut client);
}

fn runtime_graceful_shutdown_closes_an_idle_connection(backend: IoBackend) {
    // The accept loop and each connection are background tasks: the
    // runtime's graceful shutdown raises `shutdown_requested` for them,
    // whereupon a connection asks hyper for its graceful shutdown and reports
    // how serve_connection ended. A task still running at the end of the
    // grace period is cancelled, and reports nothing.
    let rt = runtime(backend, 2);
    let (served_tx, served) = mpsc::channel();
    let addr = rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = app(Arc::default());
        fairlane::task::Builder::new()
            .background()
            .spawn(async move {
                loop {
                    let accepted = future::or(async { Some(listener.accept().await) }, async {
                        fairlane::task::shutdown_requested().await;
                        None
                    })
                    .await;
                    let Some(accepted) = accepted else { return };
                    let (stream, _) = accepted.unwrap();
                    let (app, served) = (app.clone(), served_tx.clone());
                    fairlane::task::Builder::new()
                        .background()
                        .spawn(async move {
                            let mut conn = pin!(connection(stream, app));
                            let ended = future::or(async { Some(conn.as_mut().await) }, async {
                                fairlane::task::shutdown_requested().await;
                                None
                            })
                            .await;
                            let result = match ended {
                                Some(ended) => Err(format!("ended on its own: {ended:?}")),
                                None => {
                                    conn.as_mut().graceful_shutdown();
                                    conn.await.map_err(|e| e.to_string())
                                }
                            };
                            served.send(result).unwrap();
                        })
                        .unwrap();
                }
            })
            .unwrap();
        addr
    });
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    two_counts_kept_alive(&mut client);
    // The grace period ends before the header read timeout could close the
    // idle connection: without the signal, the task is cancelled.
    rt.shutdown_graceful(Duration::from_secs(30));
    let result = served
        .recv()
        .expect("the connection task was cancelled before it finished");
    result.unwrap();
    assert_closed(&mut client);
}
