//! Command-line options.
//!
//! With no options the suite runs its quick configuration (about two and a
//! half minutes on a 2-core machine); `--full` lengthens every setting, and each option
//! overrides one.

use crate::spec::{RuntimeKind, SpawnFrom, Workload, YesNo};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

const ABOUT: &str = "fairlane's evaluation suite: fairlane side by side with tokio \
(multi-thread runtime), async-executor (one executor run on N threads) and, on echo, monoio \
(thread-per-core, io_uring)";

const LONG_ABOUT: &str = "\
fairlane's evaluation suite: fairlane side by side with tokio (multi-thread runtime, \
worker_threads = N), async-executor (one Executor run on N threads) and, on the echo workload \
only, monoio (thread-per-core on io_uring: N threads with a runtime each).

Every measurement runs in a child process with a deadline, so a starving, hanging or \
crashing runtime is reported as such and never stops the suite. Runtimes alternate run \
by run. The table shows, for each workload and configuration, the median over the runs \
with (min-max), and how many times better fairlane is than each peer (peer / fairlane \
for costs: >1x means fairlane is ahead, <1x behind): the median (min-max) of the paired \
ratios of each round's runs.

Workloads: cycle, yield, churn, locality, transfer, \
transfer-park run loaded and lightly loaded at each processor count (transfer needs at \
least 2 processors); spawn at each processor count; wake (with the std-thread \
park/unpark floor), idle and echo (a TCP echo server, 100 loopback connections; fairlane on io_uring and on its fallback backend, tokio, monoio; runtimes without a network API skip it) at the largest one; \
memcached (the fairlane-memcached server, 64 loopback connections, get/set 9:1, with server CPU \
per operation; fairlane on both backends, the same protocol code on tokio, and real memcached \
-t N where it is installed) and http (a hyper HTTP/1.1 server, 32 keep-alive loopback connections \
GETting a small body, with server CPU per request; fairlane on both backends and tokio, the \
same hyper code on each) at each processor count; http-axum (the same clients against one \
axum route served by fairlane::axum::serve and by axum::serve on tokio) at the smallest.

cycle and churn also run, loaded, in the shape ordinary programs have: every task spawned \
from the block_on future, plain (unpadded) semaphores sharing cache lines, futures boxed \
(rows `cycle (plain,boxed)`, `churn (plain,boxed)`); --spawn, --padded and --boxed choose \
the shapes instead. For fairlane, cycle, churn and yield report where its tasks moved \
between processors per 1000 operations, by cause (moved help, rebalance, steal, wake; \
handoffs).";

/// Command line of `fairlane-bench`.
#[derive(Debug, Parser)]
#[command(name = "fairlane-bench", version, about = ABOUT, long_about = LONG_ABOUT)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub child: Option<Hidden>,

    /// Processor (worker thread) counts to measure at, e.g. `1,2,4`.
    /// Default: 1 and the number of cores.
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub processors: Vec<usize>,

    /// Load levels: tasks per processor for cycle, yield, churn, locality and
    /// transfer (100 = loaded, 5 = lightly loaded, one cycle ring per processor).
    #[arg(long, value_delimiter = ',', value_name = "T,..", default_values_t = [100, 5])]
    pub tasks_per_processor: Vec<usize>,

    /// Length of each measurement window, e.g. `200ms`, `1s`.
    /// Default: 200ms (quick), 1s (--full). wake measures 2.5x as long.
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    pub duration: Option<Duration>,

    /// Warm-up before each window opens. Default: 50ms (quick), 200ms (--full).
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    pub warmup: Option<Duration>,

    /// Runs (rounds) per runtime and configuration (at least 1; medians
    /// want 5 or more). Default: 5 (quick), 9 (--full). Runtimes alternate
    /// round by round, and the ratios are medians of each round's paired
    /// ratio.
    #[arg(long, value_name = "N")]
    pub runs: Option<usize>,

    /// cycle, churn, yield: where tasks are spawned from: `main` (all from
    /// the future given to `block_on`) or `spread` (one spawner task per
    /// processor). A list measures each. Giving any of --spawn, --padded,
    /// --boxed measures every combination of them (the others at the
    /// suite's shape: main, padded, unboxed); giving none measures the
    /// suite's shape and, loaded only, the ordinary program's
    /// (main, plain, boxed).
    #[arg(long, value_delimiter = ',', value_enum, value_name = "main|spread")]
    pub spawn: Vec<SpawnFrom>,

    /// cycle, churn: semaphores on cache lines of their own (`yes`) or
    /// plain consecutive objects that share lines (`no`). A list measures
    /// each.
    #[arg(long, value_delimiter = ',', value_enum, value_name = "yes|no")]
    pub padded: Vec<YesNo>,

    /// cycle, churn, yield: task futures boxed as `Pin<Box<dyn Future +
    /// Send>>` before spawning (`--boxed` alone: yes). A list measures each.
    #[arg(long, value_delimiter = ',', value_enum, num_args = 0..=1,
          default_missing_value = "yes", value_name = "yes|no")]
    pub boxed: Vec<YesNo>,

    /// Workloads to run (comma-separated). Default: all.
    #[arg(long, value_delimiter = ',', value_enum, value_name = "NAME,..")]
    pub workloads: Vec<Workload>,

    /// Runtimes to compare (comma-separated). Default: all of them
    /// (fairlane-fallback only runs echo, memcached, http and http-axum,
    /// monoio echo, memcached (real memcached) only memcached;
    /// async-executor skips all four).
    #[arg(long, value_delimiter = ',', value_enum, value_name = "NAME,..")]
    pub runtimes: Vec<RuntimeKind>,

    /// In transfer, a task waiting longer than this for its turn makes the run
    /// "starved". Default: 1s (quick), 5s (--full).
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    pub starve_threshold: Option<Duration>,

    /// The long suite: 1s windows, 5s starvation threshold, and runtimes that
    /// starved (or failed) are run again in every run instead of skipped.
    #[arg(long)]
    pub full: bool,

    /// Write every raw sample as a JSON array of records
    /// {runtime, workload, processors, tasks, tasks_per_processor, run,
    /// metric, value, unit, status}.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Write a report to DIR: summary.md (settings, machine, table) and SVG
    /// plots: ns/op per processor against processor count, one per workload,
    /// one line per runtime and load; and the wake-latency distribution.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,

    /// Seed of the workloads' random choices (run i uses seed + i).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,

    /// fairlane: lanes per processor (default: fairlane's own). For tuning.
    #[arg(long, value_name = "N")]
    pub fairlane_lanes: Option<usize>,

    /// fairlane: a help check every N pops, 0 disables helping (default:
    /// fairlane's own). For tuning.
    #[arg(long, value_name = "N")]
    pub fairlane_help_period: Option<u32>,

    /// fairlane: help when log2(target lane age) > log2(own age) + F
    /// (default: fairlane's own). For tuning.
    #[arg(long, value_name = "F")]
    pub fairlane_help_factor: Option<u32>,

    /// fairlane: rounds of a short spin before a processor sleeps, 0
    /// sleeps at once (default: fairlane's own). For tuning.
    #[arg(long, value_name = "N")]
    pub fairlane_spin_rounds: Option<u32>,

    /// fairlane: clock ticks that tasks kept on a processor's lanes may
    /// wait before a sleeping processor is woken to share them (default:
    /// fairlane's own). For tuning.
    #[arg(long, value_name = "TICKS")]
    pub fairlane_grow_after: Option<u64>,

    /// Time a child gets beyond its planned run time before it is killed.
    #[arg(long, value_parser = parse_duration, default_value = "5s", hide = true)]
    pub child_slack: Duration,
}

/// The hidden child-process entry.
#[derive(Debug, Subcommand)]
pub enum Hidden {
    /// Runs one measurement described by a JSON spec (internal).
    #[command(name = "__child", hide = true)]
    Child { spec: String },
}

/// Parses `250ms`, `1s`, `1.5s`, `500us`, `2m` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (try 200ms, 1s, 1.5s)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        other => return Err(format!("unknown unit `{other}` (use ns, us, ms, s or m)")),
    };
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("`{s}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 weeks").is_err());
    }

    #[test]
    fn cli_is_consistent_and_parses_lists() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "fairlane-bench",
            "--processors",
            "1,2,4",
            "--workloads",
            "cycle,transfer-park",
            "--runtimes",
            "fairlane,tokio",
        ])
        .unwrap();
        assert_eq!(cli.processors, [1, 2, 4]);
        assert_eq!(cli.workloads, [Workload::Cycle, Workload::TransferPark]);
        assert_eq!(cli.runtimes, [RuntimeKind::Fairlane, RuntimeKind::Tokio]);
        assert_eq!(cli.tasks_per_processor, [100, 5]);
        assert!(cli.spawn.is_empty() && cli.padded.is_empty() && cli.boxed.is_empty());
    }

    #[test]
    fn shape_options_parse() {
        let cli = Cli::try_parse_from([
            "fairlane-bench",
            "--spawn",
            "main,spread",
            "--padded",
            "no",
            "--boxed",
        ])
        .unwrap();
        assert_eq!(cli.spawn, [SpawnFrom::Main, SpawnFrom::Spread]);
        assert_eq!(cli.padded, [YesNo::No]);
        assert_eq!(cli.boxed, [YesNo::Yes]);
        let cli = Cli::try_parse_from(["fairlane-bench", "--boxed", "yes,no"]).unwrap();
        assert_eq!(cli.boxed, [YesNo::Yes, YesNo::No]);
    }
}
