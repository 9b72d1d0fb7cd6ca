//! What the tokio bridge costs an HTTP client: reqwest requests per second
//! issued from fairlane tasks through the bridge, against the same client
//! code on tokio runtimes, on the same local HTTP server (axum on a
//! fairlane runtime of its own, one processor), in rounds.
//!
//! ```sh
//! cargo run --release -p fairlane-ecosystem --features heavy --example reqwest_bridge -- [THREADS] [ROUNDS]
//! ```
//!
//! Three clients: fairlane with THREADS processors (default 2) and its
//! bridge (one tokio thread more, which runs reqwest's connections); tokio
//! with THREADS worker threads; tokio with THREADS + 1, as many threads as
//! the first. Each round measures the three in turn, starting with the
//! next one each round, with a fresh client each time; the program prints
//! each round's rates and the ratios fairlane/tokio, then the medians and
//! the spread (smallest and largest ratio).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;

/// Concurrent client tasks, and the requests each makes in sequence.
const TASKS: usize = 32;
const REQUESTS: usize = 100;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let threads: usize = args
        .next()
        .map_or(2, |a| a.parse().expect("THREADS: a number"));
    let rounds: usize = args
        .next()
        .map_or(7, |a| a.parse().expect("ROUNDS: a number"));
    let more = threads + 1;

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
    let tokio_rt = |workers| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
    };
    let tokio_same = tokio_rt(threads)?;
    let tokio_more = tokio_rt(more)?;
    let on_fairlane = || {
        fairlane_rt.block_on(load(addr, |f| {
            let task = fairlane::spawn(f);
            Box::pin(async move { task.await.expect("a client task failed") })
        }))
    };
    let on_tokio = |rt: &tokio::runtime::Runtime| {
        rt.block_on(load(addr, |f| {
            let task = tokio::spawn(f);
            Box::pin(async move { task.await.expect("a client task failed") })
        }))
    };

    println!(
        "reqwest GET http://{addr}/ from {TASKS} tasks x {REQUESTS} requests, {rounds} rounds; \
         clients: fairlane+bridge ({threads} processors and the bridge's tokio thread), \
         tokio {threads}w ({threads} workers), tokio {more}w ({more} workers)"
    );
    println!("round  fairlane+bridge  tokio {threads}w  tokio {more}w   (req/s)   f/t{threads}w   f/t{more}w");
    let mut rates: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        let mut r = [0.0; 3];
        for k in 0..3 {
            let which = (round + k) % 3;
            r[which] = match which {
                0 => on_fairlane(),
                1 => on_tokio(&tokio_same),
                _ => on_tokio(&tokio_more),
            };
        }
        println!(
            "{round:>5}  {:>15.0}  {:>8.0}  {:>8.0}             {:>6.3}   {:>6.3}",
            r[0],
            r[1],
            r[2],
            r[0] / r[1],
            r[0] / r[2]
        );
        for (rate, all) in r.iter().zip(&mut rates) {
            all.push(*rate);
        }
    }
    println!(
        "median req/s: fairlane+bridge {:.0}, tokio {threads}w {:.0}, tokio {more}w {:.0}",
        median(&rates[0]),
        median(&rates[1]),
        median(&rates[2]),
    );
    for (name, tokio) in [(threads, &rates[1]), (more, &rates[2])] {
        let ratios: Vec<f64> = rates[0].iter().zip(tokio).map(|(f, t)| f / t).collect();
        let lo = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "ratio fairlane+bridge / tokio {name}w: median {:.3} (min {lo:.3}, max {hi:.3})",
            median(&ratios)
        );
    }
    Ok(())
}

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

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    sorted[sorted.len() / 2]
}
