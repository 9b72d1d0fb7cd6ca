//! A loaded yield loop (100 tasks per processor), for profiling the fast path:
//! `cargo run --release -p fairlane --example yield_loop -- [processors] [yields per task] [help period]`.
fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let processors: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let yields: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let tasks = 100 * processors as u64;
    let help_period: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let rt = fairlane::Runtime::builder()
        .processors(processors)
        .help_period(help_period)
        .build()?;
    let start = std::time::Instant::now();
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                fairlane::spawn(async move {
                    for _ in 0..yields {
                        fairlane::yield_now().await;
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    let elapsed = start.elapsed();
    println!(
        "{:.1} ns per yield (all processors together)",
        elapsed.as_nanos() as f64 / (tasks * yields) as f64
    );
    for (p, m) in rt.metrics().processors.iter().enumerate() {
        println!("processor {p}: {m:?}");
    }
    Ok(())
}
