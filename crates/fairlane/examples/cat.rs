//! Copies a file with `fairlane::fs`, or prints it.
//!
//! ```text
//! cargo run --release --example cat -- SOURCE [DESTINATION]
//! ```
//! Without `DESTINATION` the file goes to standard output.

use std::io::Write;

use fairlane::fs::File;

/// Bytes per read.
const CHUNK: usize = 1 << 20;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(source) = args.next() else {
        eprintln!("usage: cat SOURCE [DESTINATION]");
        std::process::exit(2);
    };
    let destination = args.next();
    let rt = fairlane::Runtime::new()?;
    let copied = rt.block_on(async move {
        let input = File::open(&source).await?;
        let output = match &destination {
            Some(d) => Some(File::create(d).await?),
            None => None,
        };
        let mut stdout = std::io::stdout().lock();
        let mut pos = 0u64;
        let mut buf = Vec::with_capacity(CHUNK);
        loop {
            buf.clear();
            let (n, b) = input.read_at(buf, pos).await;
            let n = n?;
            if n == 0 {
                break;
            }
            buf = match &output {
                Some(out) => {
                    let (r, b) = out.write_all_at(b, pos).await;
                    r?;
                    b
                }
                None => {
                    stdout.write_all(&b)?;
                    b
                }
            };
            pos += n as u64;
        }
        if let Some(out) = &output {
            out.sync_all().await?;
        }
        Ok::<u64, std::io::Error>(pos)
    })?;
    eprintln!("cat: {copied} bytes");
    Ok(())
}
