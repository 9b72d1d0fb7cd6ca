//! The memcached server: `fairlane-memcached [ADDRESS] [PROCESSORS]
//! [-m MEGABYTES] [-I BYTES] [--grace-ms MS]`. `FAIRLANE_IO_BACKEND=fallback`
//! selects the epoll backend.

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
    /// The largest value, in bytes.
    #[arg(short = 'I', long, default_value_t = 1 << 20)]
    max_item_size: usize,
    /// How long open connections may take to finish after SIGINT/SIGTERM,
    /// in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    grace_ms: u64,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    run(Options {
        address: args.address,
        processors: args.processors,
        store: Config {
            memory_limit: args.memory_limit << 20,
            item_size_max: args.max_item_size,
            ..Config::default()
        },
        grace: Duration::from_millis(args.grace_ms),
    })
}
