//! The supervising side: plans the configurations, runs every measurement
//! in a child process (runtimes alternating run by run), and collects raw
//! samples.
//!
//! A *cell* is one workload at one processor count and load. For each cell
//! the runs go: run 0 in runtime order A B C, run 1 as B C A, run 2 as C A B,
//! ..., so slow machine drift lands on every runtime alike. In the quick
//! suite a runtime that starved (or timed out, or crashed) in a cell is not
//! run again in that cell.

use crate::cli::Cli;
use crate::spec::{
    ChildSpec, FairlaneKnobs, Metric, Outcome, RuntimeKind, Shape, SpawnFrom, Status, Workload,
};
use crate::supervisor::{run_child, ChildRun};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

/// The resolved settings of one suite invocation.
#[derive(Debug, Clone)]
pub struct Config {
    pub workloads: Vec<Workload>,
    pub runtimes: Vec<RuntimeKind>,
    pub processors: Vec<usize>,
    pub tasks_per_processor: Vec<usize>,
    pub warmup: Duration,
    pub duration: Duration,
    pub runs: usize,
    pub starve_threshold: Duration,
    /// Run again a runtime that starved or failed in a cell (`--full`).
    pub rerun_failed: bool,
    pub child_slack: Duration,
    pub seed: u64,
    pub fairlane: FairlaneKnobs,
    pub exe: PathBuf,
    /// Whether real memcached is installed (the memcached workload's
    /// `memcached` column).
    pub memcached_installed: bool,
    /// The shapes cycle, churn and yield are measured in.
    pub shapes: Vec<Shape>,
    /// Shapes other than the suite's own are measured at the first load
    /// level only (the default shapes; shapes asked for run at every load).
    pub extra_shapes_first_load_only: bool,
}

impl Config {
    /// Settings from the command line, filling in the quick or full defaults.
    pub fn from_cli(cli: &Cli) -> std::io::Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut processors = if cli.processors.is_empty() {
            vec![1, cores]
        } else {
            cli.processors.clone()
        };
        processors.retain(|&p| p > 0);
        processors.sort_unstable();
        processors.dedup();
        let mut tasks = cli.tasks_per_processor.clone();
        tasks.retain(|&t| t > 0);
        tasks.dedup();
        let pick =
            |quick: u64, full: u64| Duration::from_millis(if cli.full { full } else { quick });
        let shaped = !(cli.spawn.is_empty() && cli.padded.is_empty() && cli.boxed.is_empty());
        let shapes = if shaped {
            let or = |v: Vec<bool>, d: bool| if v.is_empty() { vec![d] } else { v };
            let spawns = if cli.spawn.is_empty() {
                vec![SpawnFrom::Main]
            } else {
                cli.spawn.clone()
            };
            let padded = or(cli.padded.iter().map(|p| p.yes()).collect(), true);
            let boxed = or(cli.boxed.iter().map(|b| b.yes()).collect(), false);
            let mut shapes = Vec::new();
            for &spawn in &spawns {
                for &padded in &padded {
                    for &boxed in &boxed {
                        let shape = Shape {
                            spawn,
                            padded,
                            boxed,
                        };
                        if !shapes.contains(&shape) {
                            shapes.push(shape);
                        }
                    }
                }
            }
            shapes
        } else {
            vec![Shape::SUITE, Shape::USER]
        };
        Ok(Config {
            shapes,
            extra_shapes_first_load_only: !shaped,
            workloads: if cli.workloads.is_empty() {
                Workload::ALL.to_vec()
            } else {
                cli.workloads.clone()
            },
            runtimes: if cli.runtimes.is_empty() {
                RuntimeKind::ALL.to_vec()
            } else {
                let mut r = cli.runtimes.clone();
                r.dedup();
                r
            },
            processors: if processors.is_empty() {
                vec![1]
            } else {
                processors
            },
            tasks_per_processor: if tasks.is_empty() { vec![100] } else { tasks },
            warmup: cli.warmup.unwrap_or(pick(50, 200)),
            duration: cli.duration.unwrap_or(pick(200, 1000)),
            runs: cli.runs.unwrap_or(if cli.full { 9 } else { 5 }).max(1),
            starve_threshold: cli.starve_threshold.unwrap_or(pick(1000, 5000)),
            rerun_failed: cli.full,
            child_slack: cli.child_slack,
            seed: cli.seed,
            fairlane: FairlaneKnobs {
                lanes_per_processor: cli.fairlane_lanes,
                help_period: cli.fairlane_help_period,
                help_factor_log2: cli.fairlane_help_factor,
                spin_rounds: cli.fairlane_spin_rounds,
                grow_after: cli.fairlane_grow_after,
            },
            exe: std::env::current_exe()?,
            memcached_installed: crate::runtimes::RealMemcached::program().is_some(),
        })
    }

    /// Every cell to measure, in table order.
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        let max_p = *self.processors.iter().max().expect("at least one");
        let min_p = *self.processors.iter().min().expect("at least one");
        for &w in &self.workloads {
            let mut procs: Vec<usize> = match w {
                Workload::Wake | Workload::Idle | Workload::Echo => vec![max_p],
                // The serve implementations side by side; how the server
                // scales is the http row's.
                Workload::HttpAxum => vec![min_p],
                _ => self.processors.clone(),
            };
            for p in &mut procs {
                *p = (*p).max(w.min_processors());
            }
            procs.dedup();
            for &p in &procs {
                let loads: Vec<Option<usize>> = if w.uses_load() {
                    self.tasks_per_processor.iter().map(|&t| Some(t)).collect()
                } else {
                    vec![None]
                };
                for tpp in loads {
                    for shape in self.shapes_for(w) {
                        if shape != Shape::SUITE
                            && self.extra_shapes_first_load_only
                            && tpp != self.tasks_per_processor.first().copied()
                        {
                            continue;
                        }
                        cells.push(Cell {
                            workload: w,
                            processors: p,
                            tasks_per_processor: tpp,
                            shape,
                        });
                    }
                }
            }
        }
        cells
    }

    /// The shapes workload `w` is measured in: [`Config::shapes`] for the
    /// shaped workloads (yield has no semaphores to pad, and by default
    /// only its suite shape is measured), the suite's own for the others.
    pub fn shapes_for(&self, w: Workload) -> Vec<Shape> {
        if !Shape::applies_to(w) || (w == Workload::Yield && self.extra_shapes_first_load_only) {
            return vec![Shape::SUITE];
        }
        let mut shapes: Vec<Shape> = Vec::new();
        for &s in &self.shapes {
            let s = if w == Workload::Yield {
                Shape { padded: true, ..s }
            } else {
                s
            };
            if !shapes.contains(&s) {
                shapes.push(s);
            }
        }
        shapes
    }

    /// The runtimes measured in `cell` (wake adds the std-thread floor;
    /// fairlane's fallback backend and monoio only run I/O workloads, which
    /// only the runtimes with a network API run).
    pub fn runtimes_for(&self, cell: &Cell) -> Vec<RuntimeKind> {
        let mut r = self.runtimes.clone();
        if cell.workload == Workload::Memcached || cell.workload.is_http() {
            r.retain(|&k| !matches!(k, RuntimeKind::AsyncExecutor | RuntimeKind::Monoio));
            if cell.workload.is_http() || !self.memcached_installed {
                r.retain(|&k| k != RuntimeKind::Memcached);
            }
            return r;
        }
        r.retain(|&k| k != RuntimeKind::Memcached);
        if cell.workload.is_io() {
            r.retain(|&k| k != RuntimeKind::AsyncExecutor);
        } else {
            r.retain(|&k| !matches!(k, RuntimeKind::FairlaneFallback | RuntimeKind::Monoio));
        }
        if cell.workload == Workload::Wake {
            r.push(RuntimeKind::ThreadFloor);
        }
        r
    }

    fn spec(&self, cell: &Cell, runtime: RuntimeKind, run: usize) -> ChildSpec {
        let duration = match cell.workload {
            Workload::Wake => self.duration.mul_f64(2.5),
            _ => self.duration,
        };
        ChildSpec {
            workload: cell.workload,
            runtime,
            processors: cell.processors,
            tasks: cell.tasks(),
            warmup_ms: self.warmup.as_millis() as u64,
            duration_ms: duration.as_millis().max(1) as u64,
            starve_threshold_ms: self.starve_threshold.as_millis().max(1) as u64,
            seed: self.seed.wrapping_add(run as u64),
            fairlane: self.fairlane,
            shape: cell.shape,
        }
    }

    /// How long a child may take before it is killed: its planned time, the
    /// starvation threshold twice over (a slow transfer may stretch its
    /// window by one), and slack for start-up, spawning and teardown.
    fn deadline(&self, spec: &ChildSpec) -> Duration {
        let planned = Duration::from_millis(spec.warmup_ms + spec.duration_ms);
        let starve = if spec.workload.can_starve() {
            2 * self.starve_threshold
        } else {
            Duration::ZERO
        };
        planned + starve + self.child_slack
    }
}

/// Client connections of the echo workload.
pub const ECHO_CONNECTIONS: usize = 100;

/// One workload at one processor count and load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    pub workload: Workload,
    pub processors: usize,
    /// `None` for workloads without load levels.
    pub tasks_per_processor: Option<usize>,
    /// How the tasks are built ([`Shape::SUITE`] for workloads without
    /// shapes).
    pub shape: Shape,
}

impl Cell {
    /// The workload as shown in tables: its name, and the shape where it
    /// is not the suite's own, e.g. `cycle (plain,boxed)`.
    pub fn workload_label(&self) -> String {
        let shape = self.shape.label();
        if shape.is_empty() {
            self.workload.name().to_string()
        } else {
            format!("{} ({shape})", self.workload.name())
        }
    }

    /// Total tasks handed to the workload.
    pub fn tasks(&self) -> usize {
        match (self.workload, self.tasks_per_processor) {
            (_, Some(t)) => t * self.processors,
            (Workload::Spawn, None) => self.processors,
            (Workload::Idle, None) => crate::workloads::idle::TASKS,
            (Workload::Echo, None) => ECHO_CONNECTIONS,
            (Workload::Memcached, None) => crate::workloads::memcached::CONNECTIONS,
            (w, None) if w.is_http() => crate::workloads::http::CONNECTIONS,
            _ => 1,
        }
    }

    /// The task count as shown in tables.
    pub fn tasks_label(&self) -> String {
        match (self.workload, self.tasks_per_processor) {
            (_, Some(t)) => format!("{t}/p"),
            (Workload::Spawn, None) => "1/p".to_string(),
            (Workload::Idle, None) => "10k".to_string(),
            (Workload::Echo, None) => format!("{ECHO_CONNECTIONS} conn"),
            (Workload::Memcached, None) => {
                format!("{} conn", crate::workloads::memcached::CONNECTIONS)
            }
            (w, None) if w.is_http() => {
                format!("{} conn", crate::workloads::http::CONNECTIONS)
            }
            _ => "1".to_string(),
        }
    }
}

/// One raw sample, as written by `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub runtime: &'static str,
    pub workload: &'static str,
    pub processors: usize,
    /// Total tasks of the run.
    pub tasks: usize,
    pub tasks_per_processor: Option<usize>,
    /// Where the tasks were spawned from, whether the semaphores were
    /// padded and the futures boxed (cycle, churn, yield).
    pub spawn: SpawnFrom,
    pub padded: bool,
    pub boxed: bool,
    pub run: usize,
    pub metric: String,
    /// `null` where the run produced no value for the metric.
    pub value: Option<f64>,
    pub unit: String,
    pub status: &'static str,
    /// Why a run did not end `ok` (what crashed, who starved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One child run in its context.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub cell: Cell,
    pub runtime: RuntimeKind,
    pub run: usize,
    pub outcome: Outcome,
}

/// Everything a suite invocation measured.
#[derive(Debug, Default)]
pub struct Results {
    pub runs: Vec<RunRecord>,
    /// Runs that answered but misbehaved around it (teardown hangs, ...).
    pub problems: Vec<String>,
}

impl Results {
    /// Every raw sample, one per metric per run (non-ok runs without metrics
    /// give one record with a `null` value).
    pub fn samples(&self) -> Vec<Sample> {
        let mut out = Vec::new();
        for r in &self.runs {
            let sample = |m: Option<&Metric>| Sample {
                runtime: r.runtime.name(),
                workload: r.cell.workload.name(),
                processors: r.cell.processors,
                tasks: r.cell.tasks(),
                tasks_per_processor: r.cell.tasks_per_processor,
                spawn: r.cell.shape.spawn,
                padded: r.cell.shape.padded,
                boxed: r.cell.shape.boxed,
                run: r.run,
                metric: m.map_or_else(|| "-".to_string(), |m| m.name.clone()),
                value: m.map(|m| m.value).filter(|v| v.is_finite()),
                unit: m.map_or_else(String::new, |m| m.unit.clone()),
                status: r.outcome.status.name(),
                detail: r.outcome.detail.clone(),
            };
            if r.outcome.metrics.is_empty() {
                out.push(sample(None));
            }
            out.extend(r.outcome.metrics.iter().map(|m| sample(Some(m))));
        }
        out
    }
}

/// Runs the whole suite, with a progress bar on stderr.
pub fn run(cfg: &Config) -> Results {
    let cells = cfg.cells();
    let total: usize = cells
        .iter()
        .map(|c| cfg.runtimes_for(c).len() * cfg.runs)
        .sum();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30.cyan/blue} {pos}/{len} [{elapsed}, ~{eta} left] {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut results = Results::default();
    for cell in &cells {
        let runtimes = cfg.runtimes_for(cell);
        let mut given_up: HashSet<RuntimeKind> = HashSet::new();
        for run in 0..cfg.runs {
            for k in 0..runtimes.len() {
                let runtime = runtimes[(k + run) % runtimes.len()];
                bar.set_message(format!(
                    "{} p={} tasks={} {} run {}/{}",
                    cell.workload_label(),
                    cell.processors,
                    cell.tasks_label(),
                    runtime.name(),
                    run + 1,
                    cfg.runs
                ));
                if given_up.contains(&runtime) {
                    bar.inc(1);
                    continue;
                }
                let spec = cfg.spec(cell, runtime, run);
                let ChildRun { outcome, problem } = run_child(&cfg.exe, &spec, cfg.deadline(&spec));
                if let Some(p) = problem {
                    let line = format!(
                        "{} {} p={} tasks={} run {}: {p}",
                        runtime.name(),
                        cell.workload_label(),
                        cell.processors,
                        cell.tasks_label(),
                        run + 1
                    );
                    bar.suspend(|| eprintln!("warning: {line}"));
                    results.problems.push(line);
                }
                if outcome.status != Status::Ok && !cfg.rerun_failed {
                    given_up.insert(runtime);
                }
                results.runs.push(RunRecord {
                    cell: *cell,
                    runtime,
                    run,
                    outcome,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    results
}
