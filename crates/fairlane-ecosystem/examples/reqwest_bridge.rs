//! What the tokio bridge costs an HTTP client: reqwest requests per second
//! issued from fairlane tasks through the bridge, against the same client
//! code on a tokio runtime, on the same local HTTP server (axum on a
//! fairlane runtime of its own), in alternating rounds.
//!
//! ```sh
//! cargo run --release -p fairlane-ecosystem --features heavy --example reqwest_bridge -- [THREADS] [ROUNDS]
//! ```
//!
//! THREADS (default 2) is the client runtime's size: fairlane's processors
//! (plus the bridge's one tokio thread) or tokio's worker threads. Each
//! round measures both, in turn (the first to go alternates), with a fresh
//! client; the program prints each round's rates and the ratio
//! fairlane/tokio, then the median and the spread.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;

/// Concurrent client tasks, and the requests each makes in sequence.
const TASKS: usize = 32;
const REQUESTS: usize = 100;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let threads: usize = args
        .next()
        .map_or(2, |a| a.parse().expect("THREADS: a number"));
    let rounds: usize = args
        .next()
        .map_or(7, |a| a.parse().expect("ROUNDS: a number"));

    // The server: its own fairlane runtime, one processor.
    let server_rt = fairlane::Runtime::builder().processors(1).build()?;
    let addr: SocketAddr = server_rt.block_on(async {
        let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new().route("/", get(|| async { "hello" }));
        fairlane::spawn(async move { fairlane::axum::serve(listener, app).await });
        Ok::<_, std::io::Error>(addr)
    })?;

    let fairlane_rt = fairlane::Runtime::builder().processors(threads).build()?;
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;

    println!(
        "reqwest GET http://{addr}/ from {TASKS} tasks x {REQUESTS} requests, \
         client runtime of {threads} threads, {rounds} rounds"
    );
    println!("round  fairlane+bridge req/s  tokio req/s  ratio");
    let mut ratios = Vec::new();
    let mut fairlane_rates = Vec::new();
    let mut tokio_rates = Vec::new();
    for round in 0..rounds {
        let on_fairlane = || {
            fairlane_rt.block_on(load(addr, |f| {
                let task = fairlane::spawn(f);
                Box::pin(async move { task.await.expect("a client task failed") })
            }))
        };
        let on_tokio = || {
            tokio_rt.block_on(load(addr, |f| {
                let task = tokio::spawn(f);
                Box::pin(async move { task.await.expect("a client task failed") })
            }))
        };
        let (f, t) = if round % 2 == 0 {
            let f = on_fairlane();
            (f, on_tokio())
        } else {
            let t = on_tokio();
            (on_fairlane(), t)
        };
        println!("{round:>5}  {f:>21.0}  {t:>11.0}  {:.3}", f / t);
        ratios.push(f / t);
        fairlane_rates.push(f);
        tokio_rates.push(t);
    }
    println!(
        "median: fairlane+bridge {:.0} req/s, tokio {:.0} req/s; ratio {:.3} (min {:.3}, max {:.3})",
        median(&mut fairlane_rates),
        median(&mut tokio_rates),
        median(&mut ratios),
        ratios.iter().cloned().fold(f64::INFINITY, f64::min),
        ratios.iter().cloned().fold(0.0, f64::max),
    );
    Ok(())
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One measurement: a fresh client, a warm-up request from each task, then
/// `TASKS` tasks (started by `spawn`, whose future awaits the task) each
/// making `REQUESTS` requests. Returns requests per second.
async fn load(addr: SocketAddr, spawn: impl Fn(BoxFuture<usize>) -> BoxFuture<usize>) -> f64 {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://{addr}/");
    let run = |count: usize| {
        (0..TASKS)
            .map(|_| {
                let client = client.clone();
                let url = url.clone();
                spawn(Box::pin(async move {
                    for _ in 0..count {
                        let response = client.get(&url).send().await.unwrap();
                        let body = response.bytes().await.unwrap();
                        assert_eq!(&body[..], b"hello");
                    }
                    count
                }))
            })
            .collect::<Vec<_>>()
    };
    futures_util::future::join_all(run(1)).await;
    let start = Instant::now();
    let done: usize = futures_util::future::join_all(run(REQUESTS))
        .await
        .into_iter()
        .sum();
    let elapsed = start.elapsed().max(Duration::from_micros(1));
    done as f64 / elapsed.as_secs_f64()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}
