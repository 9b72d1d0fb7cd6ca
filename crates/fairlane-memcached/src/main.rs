//! The server: `fairlane-memcached [ADDRESS] [PROCESSORS] [-m MEGABYTES]
//! [-I SIZE] [-c CONNECTIONS] [-b BACKLOG] [--grace-ms MS]`.
//! `FAIRLANE_IO_BACKEND=fallback` selects the epoll backend.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use fairlane_memcached::server::{run, Options};
use fairlane_memcached::store::Config;

/// A memcached server (text protocol) on fairlane. SIGINT or SIGTERM stops
/// it gracefully.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Where to listen.
    #[arg(default_value = "127.0.0.1:11211")]
    address: String,
    /// The runtime's processors (default: one per core).
    processors: Option<usize>,
    /// Memory for items, in megabytes; past it the least recently used are
    /// evicted.
    #[arg(short = 'm', long, default_value_t = 64)]
    memory_limit: usize,
    /// The largest item, counted as memcached counts it (key, value and
    /// about 60 bytes), in bytes or with a k or m suffix; at most half the
    /// memory limit.
    #[arg(short = 'I', long, default_value = "1m", value_parser = size)]
    max_item_size: usize,
    /// The most connections open at once; more are refused.
    #[arg(short = 'c', long, default_value_t = 1024)]
    conn_limit: usize,
    /// The queue of connections not yet accepted.
    #[arg(short = 'b', long, default_value_t = 1024)]
    listen_backlog: u32,
    /// How long open connections may take to finish after SIGINT/SIGTERM,
    /// in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    grace_ms: u64,
}

/// A size as memcached's `-I` takes it: bytes, or kilobytes or megabytes
/// with a `k` or `m` suffix.
fn size(text: &str) -> Result<usize, String> {
    let (digits, unit) = match text.char_indices().last() {
        Some((i, 'k' | 'K')) => (&text[..i], 1 << 10),
        Some((i, 'm' | 'M')) => (&text[..i], 1 << 20),
        _ => (text, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{text:?} is not a size (bytes, or a number with k or m)"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let memory_limit = args.memory_limit << 20;
    // memcached's limits on -I.
    if args.max_item_size < 1024 {
        eprintln!("fairlane-memcached: -I: items must be allowed at least 1024 bytes");
        return ExitCode::FAILURE;
    }
    if args.max_item_size > memory_limit / 2 {
        eprintln!(
            "fairlane-memcached: -I: the item size limit may be at most half the memory limit (-m)"
        );
        return ExitCode::FAILURE;
    }
    let options = Options {
        address: args.address,
        processors: args.processors,
        store: Config {
            memory_limit,
            item_size_max: args.max_item_size,
            ..Config::default()
        },
        max_connections: args.conn_limit,
        backlog: args.listen_backlog,
        grace: Duration::from_millis(args.grace_ms),
    };
    match run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fairlane-memcached: {e}");
            ExitCode::FAILURE
        }
    }
}
