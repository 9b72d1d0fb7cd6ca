//! `fairlane-bench`: fairlane's evaluation suite.
//!
//! `cargo run --release -p fairlane-bench` runs the quick suite (about two and
//! a half minutes on a 2-core machine) and prints one table comparing fairlane with
//! tokio's multi-thread runtime and async-executor on the scheduler
//! workloads (`--help` lists them), and with monoio (thread-per-core, io_uring) on the echo
//! workload. `--help` lists the options.
//!
//! The crate is two programs in one binary:
//! * the **supervisor** ([`suite`], [`supervisor`], [`report`], [`plot`])
//!   plans the configurations, runs each measurement as a child process with a
//!   deadline, and aggregates;
//! * the **child** ([`child`], [`workloads`], [`runtimes`], [`sync`],
//!   [`harness`]), started as `fairlane-bench __child <spec-json>`, builds one
//!   runtime, measures one workload on it and answers with one JSON line.
//!
//! A starving, hanging or crashing runtime therefore costs at most one
//! child's deadline and shows up in the table as `starved`, `timeout` or
//! `crashed`.

mod alloc;
mod child;
mod cli;
mod harness;
mod plot;
mod report;
mod runtimes;
mod spec;
mod suite;
mod supervisor;
mod sync;
mod workloads;

use clap::Parser;
use std::process::ExitCode;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Some(cli::Hidden::Child { spec }) = &cli.child {
        child::main(spec);
    }
    let cfg = match suite::Config::from_cli(&cli) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("fairlane-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    eprintln!(
        "fairlane-bench: {} | {} | processors {:?} | {} run(s), window {:?}, warm-up {:?}, starvation threshold {:?} | fairlane: {}",
        report::machine(),
        cfg.runtimes.iter().map(|r| r.name()).collect::<Vec<_>>().join(", "),
        cfg.processors,
        cfg.runs,
        cfg.duration,
        cfg.warmup,
        cfg.starve_threshold,
        cfg.fairlane.describe(),
    );
    let results = suite::run(&cfg);
    let rows = report::rows(&cfg, &results);
    print!("{}", report::table(&cfg, &rows));
    println!();
    print!("{}", report::notes(&cfg, &rows, &results));

    let mut ok = true;
    if let Some(path) = &cli.json {
        if let Err(e) = report::write_json(path, &results) {
            eprintln!("fairlane-bench: writing {}: {e}", path.display());
            ok = false;
        }
    }
    if let Some(dir) = &cli.report {
        match report::write_report(dir, &cfg, &results, &rows, &command) {
            Ok(plots) => eprintln!(
                "fairlane-bench: report in {} (summary.md, {} plot(s))",
                dir.display(),
                plots.len()
            ),
            Err(e) => {
                eprintln!("fairlane-bench: writing report to {}: {e}", dir.display());
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
