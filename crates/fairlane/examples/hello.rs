//! Spawns tasks that yield and wake each other, and prints the processors'
//! counters.
fn main() -> std::io::Result<()> {
    let rt = fairlane::Runtime::builder().processors(2).build()?;
    let start = std::time::Instant::now();
    let total: u64 = rt.block_on(async {
        let tasks: Vec<_> = (0..200u64)
            .map(|i| {
                fairlane::spawn(async move {
                    for _ in 0..10_000 {
                        fairlane::yield_now().await;
                    }
                    i
                })
            })
            .collect();
        let mut sum = 0;
        for t in tasks {
            sum += t.await.unwrap();
        }
        sum
    });
    let el = start.elapsed();
    println!(
        "sum {total}, {:.1} ns per yield",
        el.as_nanos() as f64 / 2_000_000.0
    );
    for (p, m) in rt.metrics().processors.iter().enumerate() {
        println!("processor {p}: {m:?}");
    }
    Ok(())
}
