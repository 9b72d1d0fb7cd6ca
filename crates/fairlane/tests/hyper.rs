//! hyper on fairlane (`hyper` feature, on for the crate's tests): HTTP/1 and
//! HTTP/2 servers and clients on fairlane streams with no adapter, hyper's
//! timeouts on fairlane's timer, its background tasks on fairlane's
//! executor; on both backends.

mod common;

use std::convert::Infallible;
use std::io::{Read, Write};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream};

use common::backend_runtime as runtime;

common::on_both_backends!(
    http1_keep_alive_echoes_bodies,
    http1_header_read_timeout_closes_a_stalled_connection,
    http2_serves_concurrent_streams,
);

/// Echoes the request body, prefixed with the path.
async fn echo(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let mut out = path.into_bytes();
    out.extend_from_slice(&body);
    Ok(Response::new(Full::new(Bytes::from(out))))
}

fn http1_keep_alive_echoes_bodies(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        fairlane::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                fairlane::spawn(async move {
                    hyper::server::conn::http1::Builder::new()
                        .timer(fairlane::hyper::Timer)
                        .header_read_timeout(Duration::from_secs(30))
                        .serve_connection(stream, hyper::service::service_fn(echo))
                        .await
                        .unwrap();
                });
            }
        });
        let clients: Vec<_> = (0..4)
            .map(|c| {
                fairlane::spawn(async move {
                    let stream = TcpStream::connect(addr).await.unwrap();
                    let (mut sender, conn) =
                        hyper::client::conn::http1::handshake(stream).await.unwrap();
                    fairlane::spawn(conn);
                    for i in 0..50u32 {
                        let body: Vec<u8> =
                            (0..(i as usize * 997)).map(|j| (j % 251) as u8).collect();
                        let req = Request::post(format!("/c{c}/r{i}"))
                            .body(Full::new(Bytes::from(body.clone())))
                            .unwrap();
                        // HTTP/1: one request at a time; the connection is
                        // ready again once the last response was read.
                        sender.ready().await.unwrap();
                        let resp = sender.send_request(req).await.unwrap();
                        assert!(resp.status().is_success());
                        let got = resp.into_body().collect().await.unwrap().to_bytes();
                        let mut want = format!("/c{c}/r{i}").into_bytes();
                        want.extend_from_slice(&body);
                        assert!(got == want, "request {i} of client {c}: wrong body");
                    }
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
    });
}

fn http1_header_read_timeout_closes_a_stalled_connection(backend: IoBackend) {
    // Without a timer hyper panics when a header read timeout is set; with
    // fairlane's, a client that never finishes its header is disconnected.
    let rt = runtime(backend, 1);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        hyper::server::conn::http1::Builder::new()
            .timer(fairlane::hyper::Timer)
            .header_read_timeout(Duration::from_millis(200))
            .serve_connection(stream, hyper::service::service_fn(echo))
            .await
    });
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    client.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    // Blocks until the server gives up on the header and closes (a 408
    // response may come first); a missing timer would leave this hanging
    // until the test's deadline.
    let mut rest = Vec::new();
    let _ = client.read_to_end(&mut rest);
    let served = rt.block_on(server).unwrap();
    assert!(
        served.is_err(),
        "the stalled connection ended without an error"
    );
    if !rest.is_empty() {
        assert!(
            rest.starts_with(b"HTTP/1.1 408"),
            "{:?}",
            String::from_utf8_lossy(&rest)
        );
    }
}

fn http2_serves_concurrent_streams(backend: IoBackend) {
    let rt = runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        fairlane::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            hyper::server::conn::http2::Builder::new(fairlane::hyper::Executor)
                .timer(fairlane::hyper::Timer)
                .keep_alive_interval(Duration::from_secs(30))
                .serve_connection(stream, hyper::service::service_fn(echo))
                .await
                .unwrap();
        });
        let stream = TcpStream::connect(addr).await.unwrap();
        let (sender, conn) = hyper::client::conn::http2::Builder::new(fairlane::hyper::Executor)
            .timer(fairlane::hyper::Timer)
            .handshake(stream)
            .await
            .unwrap();
        fairlane::spawn(conn);
        let requests: Vec<_> = (0..32u32)
            .map(|i| {
                let mut sender = sender.clone();
                fairlane::spawn(async move {
                    let body = vec![i as u8; 10_000 + i as usize];
                    let req = Request::post(format!("/s{i}"))
                        .body(Full::new(Bytes::from(body.clone())))
                        .unwrap();
                    let resp = sender.send_request(req).await.unwrap();
                    let got = resp.into_body().collect().await.unwrap().to_bytes();
                    let mut want = format!("/s{i}").into_bytes();
                    want.extend_from_slice(&body);
                    assert!(got == want, "stream {i}: wrong body");
                })
            })
            .collect();
        for r in requests {
            r.await.unwrap();
        }
    });
}
