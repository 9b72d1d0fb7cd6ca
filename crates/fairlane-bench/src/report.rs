//! Turning raw runs into the table, the JSON samples, and the `--report`
//! directory (markdown summary and SVG plots).
//!
//! Every figure is the median over a runtime's successful runs, with the
//! minimum and maximum beside it. Ratios say how many times *better*
//! fairlane is than a peer: every reported metric is a cost (time per
//! operation, latency, bytes, CPU), so the ratio is peer / fairlane; above 1
//! fairlane is ahead, below 1 it is behind. Descriptive percentages (churn's
//! blocked share, locality's moves, cycle's rings apart) get no ratio.

use crate::spec::{RuntimeKind, Status, Workload};
use crate::suite::{Cell, Config, Results, RunRecord};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// What a runtime scored on one row.
#[derive(Debug, Clone, Default)]
pub struct Figure {
    /// Values of the successful runs.
    pub values: Vec<f64>,
    /// The run (round) of each value, for paired ratios.
    pub runs: Vec<usize>,
    /// Runs that did not succeed, and the first such status.
    pub failed: usize,
    pub failure: Option<Status>,
}

impl Figure {
    /// Median of the successful runs.
    pub fn median(&self) -> Option<f64> {
        if self.values.is_empty() {
            return None;
        }
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        Some(if v.len() % 2 == 1 {
            v[m]
        } else {
            (v[m - 1] + v[m]) / 2.0
        })
    }

    fn min_max(&self) -> Option<(f64, f64)> {
        let min = self.values.iter().copied().reduce(f64::min)?;
        let max = self.values.iter().copied().reduce(f64::max)?;
        Some((min, max))
    }

    /// "median (min–max)", or the failure, as shown in the table.
    pub fn text(&self) -> String {
        match (self.median(), self.min_max(), self.failure) {
            (Some(med), Some((lo, hi)), failure) => {
                let mut s = if self.values.len() == 1 {
                    num(med)
                } else {
                    format!("{} ({}–{})", num(med), num(lo), num(hi))
                };
                if let Some(f) = failure {
                    let _ = write!(s, " +{} {}", self.failed, f.name());
                }
                s
            }
            (_, _, Some(f)) => f.name().to_string(),
            _ => "-".to_string(),
        }
    }
}

/// One line of the table: one metric of one cell.
#[derive(Debug, Clone)]
pub struct Row {
    pub cell: Cell,
    pub metric: String,
    pub unit: String,
    pub figures: BTreeMap<RuntimeKind, Figure>,
}

impl Row {
    /// The metric's label with its unit.
    pub fn label(&self) -> String {
        if self.metric.contains('/') || self.unit.is_empty() {
            self.metric.clone()
        } else {
            format!("{} ({})", self.metric, self.unit)
        }
    }

    /// Whether ratios make sense (a cost, not a descriptive share or
    /// count).
    pub fn is_cost(&self) -> bool {
        !(matches!(
            self.metric.as_str(),
            "blocked" | "moved" | "apart" | "req/s" | "ops/s" | "handoffs"
        ) || self.metric.starts_with("moved "))
    }

    /// The paired ratios peer / fairlane of the rounds in which both
    /// succeeded: each round's runs ran back to back, so slow drift of the
    /// machine cancels out of each ratio.
    pub fn paired_ratios(&self, peer: RuntimeKind) -> Vec<f64> {
        let (Some(fl), Some(other)) = (
            self.figures.get(&RuntimeKind::Fairlane),
            self.figures.get(&peer),
        ) else {
            return Vec::new();
        };
        fl.runs
            .iter()
            .zip(&fl.values)
            .filter_map(|(run, &f)| {
                let i = other.runs.iter().position(|r| r == run)?;
                let o = other.values[i];
                (f > 0.0 && f.is_finite() && o.is_finite()).then(|| o / f)
            })
            .collect()
    }

    /// How many times better fairlane is than `peer` on this row, as text.
    pub fn ratio_text(&self, peer: RuntimeKind) -> String {
        if !self.is_cost() {
            return "-".to_string();
        }
        let (Some(fl), Some(other)) = (
            self.figures.get(&RuntimeKind::Fairlane),
            self.figures.get(&peer),
        ) else {
            return "-".to_string();
        };
        // A ratio of the successful runs would hide that some runs failed:
        // any failure is shown instead.
        let failed = |who: &str, f: &Figure| {
            f.failure.map(|s| {
                let total = f.values.len() + f.failed;
                if f.failed == total {
                    format!("{who} {}", s.name())
                } else {
                    format!("{who} {} {}/{total}", s.name(), f.failed)
                }
            })
        };
        if let Some(text) = failed("fairlane", fl).or_else(|| failed(peer.name(), other)) {
            return text;
        }
        let paired = Figure {
            values: self.paired_ratios(peer),
            ..Figure::default()
        };
        match (paired.median(), paired.min_max()) {
            (Some(m), Some((lo, hi))) if paired.values.len() > 1 => {
                format!("{m:.2}× ({lo:.2}–{hi:.2})")
            }
            (Some(m), _) => format!("{m:.2}×"),
            _ => "-".to_string(),
        }
    }
}

/// Groups the runs into table rows, in cell order then metric order.
pub fn rows(cfg: &Config, results: &Results) -> Vec<Row> {
    let mut rows = Vec::new();
    for cell in cfg.cells() {
        let runs: Vec<&RunRecord> = results.runs.iter().filter(|r| r.cell == cell).collect();
        let mut metrics: Vec<(String, String)> = Vec::new();
        for r in &runs {
            for m in &r.outcome.metrics {
                if !metrics.iter().any(|(n, _)| *n == m.name) {
                    metrics.push((m.name.clone(), m.unit.clone()));
                }
            }
        }
        if metrics.is_empty() && !runs.is_empty() {
            metrics.push((primary_metric(cell.workload).to_string(), String::new()));
        }
        for (metric, unit) in metrics {
            let mut figures: BTreeMap<RuntimeKind, Figure> = BTreeMap::new();
            for r in &runs {
                let f = figures.entry(r.runtime).or_default();
                if r.outcome.status == Status::Ok {
                    if let Some(m) = r.outcome.metrics.iter().find(|m| m.name == metric) {
                        f.values.push(m.value);
                        f.runs.push(r.run);
                    }
                } else {
                    f.failed += 1;
                    f.failure.get_or_insert(r.outcome.status);
                }
            }
            rows.push(Row {
                cell,
                metric,
                unit,
                figures,
            });
        }
    }
    rows
}

/// The metric a workload is plotted and known by.
pub fn primary_metric(w: Workload) -> &'static str {
    match w {
        Workload::Transfer | Workload::TransferPark => "us/transfer",
        Workload::Spawn => "ns/spawn",
        Workload::Wake => "wake p50",
        Workload::Idle => "cpu",
        Workload::Echo | Workload::Http | Workload::HttpAxum => "ns/req",
        _ => "ns/op",
    }
}

/// The results table, as markdown (it reads as plain text too).
pub fn table(cfg: &Config, rows: &[Row]) -> String {
    let peers: Vec<RuntimeKind> = if cfg.runtimes.contains(&RuntimeKind::Fairlane) {
        cfg.runtimes
            .iter()
            .copied()
            .filter(|&r| r != RuntimeKind::Fairlane)
            .collect()
    } else {
        Vec::new()
    };
    let mut header: Vec<String> = ["workload", "p", "tasks", "metric"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(cfg.runtimes.iter().map(|r| r.name().to_string()));
    header.extend(peers.iter().map(|p| format!("fairlane vs {}", p.name())));
    let mut lines: Vec<Vec<String>> = Vec::new();
    for row in rows {
        let mut line = vec![
            row.cell.workload_label(),
            row.cell.processors.to_string(),
            row.cell.tasks_label(),
            row.label(),
        ];
        line.extend(cfg.runtimes.iter().map(|r| {
            row.figures
                .get(r)
                .map_or_else(|| "-".to_string(), Figure::text)
        }));
        line.extend(peers.iter().map(|&p| row.ratio_text(p)));
        lines.push(line);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let fmt_line = |cells: &[String]| {
        let mut s = String::from("|");
        for (i, c) in cells.iter().enumerate() {
            let pad = widths[i] - c.chars().count();
            // Text columns left, numbers right.
            if i < 4 {
                let _ = write!(s, " {c}{} |", " ".repeat(pad));
            } else {
                let _ = write!(s, " {}{c} |", " ".repeat(pad));
            }
        }
        s.push('\n');
        s
    };
    let mut out = fmt_line(&header);
    out.push('|');
    for (i, w) in widths.iter().enumerate() {
        let dashes = "-".repeat(*w);
        if i < 4 {
            let _ = write!(out, " {dashes} |");
        } else {
            let _ = write!(out, " {}: |", &dashes[1..]);
        }
    }
    out.push('\n');
    for l in &lines {
        out.push_str(&fmt_line(l));
    }
    out
}

/// The lines printed under the table: the wake floor and what the ratios mean.
pub fn notes(cfg: &Config, rows: &[Row], results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Figures: median (min–max) over {} run(s); \"+k starved\" = k further runs starved. \
         Ratios: peer / fairlane (>1× fairlane ahead, <1× behind), the median (min–max) of the \
         rounds' paired ratios (runtimes alternate round by round). p = processors; tasks per processor.",
        cfg.runs
    );
    if rows.iter().any(|r| r.metric.starts_with("moved ")) {
        let _ = writeln!(
            out,
            "moved <cause> (fairlane only): polls of a task that the other processor polled last, \
             per 1000 operations, by how it came: help (rescue of a late processor's work), \
             rebalance, steal, wake (placed on the processor by a wake there, a sleeping \
             processor's hand-off, or an outside push); handoffs: tasks a sleeping processor \
             handed to an awake one, per 1000 operations. Shapes: (spread) one spawner per \
             processor, else all spawned from the block_on future; (plain) unpadded semaphores \
             sharing cache lines; (boxed) futures boxed as Pin<Box<dyn Future + Send>>."
        );
    }
    let wake = |rt: RuntimeKind, metric: &str| {
        rows.iter()
            .find(|r| r.cell.workload == Workload::Wake && r.metric == metric)
            .and_then(|r| r.figures.get(&rt))
            .and_then(Figure::median)
    };
    if let Some(p50) = wake(RuntimeKind::ThreadFloor, "wake p50") {
        let others = ["wake p99", "wake max"]
            .iter()
            .filter_map(|m| {
                wake(RuntimeKind::ThreadFloor, m).map(|v| format!(", {} {} ns", &m[5..], num(v)))
            })
            .collect::<String>();
        let ratio = wake(RuntimeKind::Fairlane, "wake p50")
            .map(|f| format!("; fairlane's p50 is {:.2}× the floor", f / p50))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "Physical floor of a wake (a std thread woken by park/unpark, i.e. a futex, same run): \
             p50 {} ns{others}{ratio}.",
            num(p50)
        );
    }
    for r in &results.runs {
        if r.outcome.status != Status::Ok {
            let _ = writeln!(
                out,
                "- {} {} p={} tasks={} run {}: {}{}",
                r.runtime.name(),
                r.cell.workload_label(),
                r.cell.processors,
                r.cell.tasks_label(),
                r.run + 1,
                r.outcome.status.name(),
                r.outcome
                    .detail
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            );
        }
    }
    for p in &results.problems {
        let _ = writeln!(out, "- problem: {p}");
    }
    if cfg.workloads.contains(&Workload::Memcached) && !cfg.memcached_installed {
        let _ = writeln!(
            out,
            "memcached: real memcached is not installed (Debian package memcached): its \
             column is skipped."
        );
    }
    if cfg.workloads.iter().any(|w| w.is_io()) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let _ = writeln!(
            out,
            "echo, http, http-axum, memcached: cpu/req and cpu/op = the server's CPU time per request or \
             operation (us), all its threads but the load generator's; server and load \
             generator pinned to different cores where p < {cores} cores, unpinned otherwise."
        );
    }
    out
}

/// Writes every raw sample to `path` as a JSON array.
pub fn write_json(path: &Path, results: &Results) -> io::Result<()> {
    let file = io::BufWriter::new(std::fs::File::create(path)?);
    serde_json::to_writer_pretty(file, &results.samples()).map_err(io::Error::other)
}

/// One line on the machine: CPU model and core count.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU", str::trim)
        .to_string();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}, {cores} cores available, {}", std::env::consts::OS)
}

/// Writes `summary.md` and the SVG plots to `dir`.
pub fn write_report(
    dir: &Path,
    cfg: &Config,
    results: &Results,
    rows: &[Row],
    command: &str,
) -> io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut plots = Vec::new();
    for &w in &cfg.workloads {
        if matches!(
            w,
            Workload::Wake
                | Workload::Idle
                | Workload::Echo
                | Workload::Memcached
                | Workload::Http
                | Workload::HttpAxum
                | Workload::Hang
        ) {
            continue;
        }
        let name = format!("{}.svg", w.name());
        if crate::plot::scaling(&dir.join(&name), cfg, rows, w)
            .map_err(|e| io::Error::other(e.to_string()))?
        {
            plots.push(name);
        }
    }
    if cfg.workloads.contains(&Workload::Wake) {
        let name = "wake-latency.svg".to_string();
        if crate::plot::wake_distribution(&dir.join(&name), results)
            .map_err(|e| io::Error::other(e.to_string()))?
        {
            plots.push(name);
        }
    }
    let mut md = String::new();
    let _ = writeln!(md, "# fairlane-bench report\n");
    let _ = writeln!(md, "- Machine: {}", machine());
    let _ = writeln!(md, "- Command: `{command}`");
    let _ = writeln!(
        md,
        "- Settings: {} run(s) per runtime and configuration, warm-up {:?}, window {:?} \
         (wake: 2.5×), starvation threshold {:?}, runtimes alternating run by run; \
         fairlane scheduler settings: {}\n",
        cfg.runs,
        cfg.warmup,
        cfg.duration,
        cfg.starve_threshold,
        cfg.fairlane.describe()
    );
    md.push_str(&table(cfg, rows));
    md.push('\n');
    md.push_str(&notes(cfg, rows, results));
    if !plots.is_empty() {
        let _ = writeln!(md, "\n## Plots\n");
        for p in &plots {
            let _ = writeln!(md, "![{p}]({p})");
        }
    }
    std::fs::write(dir.join("summary.md"), md)?;
    Ok(plots)
}

/// A number with about three significant digits.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "∞".to_string()
    } else if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_text_shows_median_range_and_failures() {
        let f = Figure {
            values: vec![3.0, 1.0, 2.0],
            runs: vec![0, 1, 2],
            failed: 0,
            failure: None,
        };
        assert_eq!(f.text(), "2.00 (1.00–3.00)");
        let g = Figure {
            values: vec![],
            runs: vec![],
            failed: 1,
            failure: Some(Status::Starved),
        };
        assert_eq!(g.text(), "starved");
        assert_eq!(Figure::default().text(), "-");
    }

    #[test]
    fn ratios_pair_runs_of_the_same_round() {
        use crate::spec::Shape;
        let figure = |values: Vec<f64>, runs: Vec<usize>| Figure {
            values,
            runs,
            ..Figure::default()
        };
        let mut figures = BTreeMap::new();
        // fairlane failed round 1; tokio's round 2 is slow: paired, the
        // rounds give 2, 3 and (round 3) 1.5.
        figures.insert(
            RuntimeKind::Fairlane,
            figure(vec![10.0, 10.0, 20.0], vec![0, 2, 3]),
        );
        figures.insert(
            RuntimeKind::Tokio,
            figure(vec![20.0, 5.0, 30.0, 30.0], vec![0, 1, 2, 3]),
        );
        let row = Row {
            cell: Cell {
                workload: Workload::Cycle,
                processors: 2,
                tasks_per_processor: Some(100),
                shape: Shape::USER,
            },
            metric: "ns/op".to_string(),
            unit: "ns".to_string(),
            figures,
        };
        assert_eq!(row.paired_ratios(RuntimeKind::Tokio), [2.0, 3.0, 1.5]);
        assert_eq!(row.ratio_text(RuntimeKind::Tokio), "2.00× (1.50–3.00)");
        assert_eq!(row.cell.workload_label(), "cycle (plain,boxed)");
        let moved = Row {
            metric: "moved steal".to_string(),
            ..row
        };
        assert_eq!(moved.ratio_text(RuntimeKind::Tokio), "-");
    }

    #[test]
    fn numbers_keep_three_digits() {
        assert_eq!(num(1234.4), "1234");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(0.01234), "0.012");
        assert_eq!(num(f64::INFINITY), "∞");
    }
}
