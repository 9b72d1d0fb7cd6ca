//! SVG plots for `--report`, drawn with plotters' SVG backend only (no
//! system fonts or libraries needed: text is left to the SVG viewer).

use crate::report::{num, primary_metric, Row};
use crate::spec::{RuntimeKind, Status, Workload};
use crate::suite::{Config, Results};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

type PlotResult<T> = Result<T, Box<dyn std::error::Error>>;

/// One line of a scaling plot: a runtime at one load (tasks per processor);
/// its points are (processors, cost × processors).
type LineKey = (RuntimeKind, Option<usize>);

fn color(r: RuntimeKind) -> RGBColor {
    match r {
        RuntimeKind::Fairlane => RGBColor(0xd6, 0x27, 0x28),
        RuntimeKind::FairlaneFallback => RGBColor(0xff, 0x7f, 0x0e),
        RuntimeKind::Tokio => RGBColor(0x1f, 0x77, 0xb4),
        RuntimeKind::Monoio => RGBColor(0x94, 0x67, 0xbd),
        RuntimeKind::AsyncExecutor => RGBColor(0x2c, 0xa0, 0x2c),
        RuntimeKind::ThreadFloor => RGBColor(0x55, 0x55, 0x55),
        RuntimeKind::Memcached => RGBColor(0x8c, 0x56, 0x4b),
    }
}

/// Per-processor cost (`metric × processors`) against processor count for
/// workload `w`: one line per runtime and load level. A flat line is perfect
/// scaling. Returns false (writing nothing) when there is nothing to draw.
pub fn scaling(path: &Path, cfg: &Config, rows: &[Row], w: Workload) -> PlotResult<bool> {
    let metric = primary_metric(w);
    let mut lines: BTreeMap<LineKey, Vec<(f64, f64)>> = BTreeMap::new();
    for row in rows.iter().filter(|r| {
        r.cell.workload == w && r.metric == metric && r.cell.shape == crate::spec::Shape::SUITE
    }) {
        for (&rt, fig) in &row.figures {
            if let Some(m) = fig.median().filter(|m| m.is_finite()) {
                lines
                    .entry((rt, row.cell.tasks_per_processor))
                    .or_default()
                    .push((row.cell.processors as f64, m * row.cell.processors as f64));
            }
        }
    }
    if lines.is_empty() {
        return Ok(false);
    }
    let unit = metric.split('/').next().unwrap_or("ns");
    let per = metric.split('/').nth(1).unwrap_or("op");
    let max_p = cfg.processors.iter().copied().max().unwrap_or(1).max(2) as f64;
    let max_y = lines
        .values()
        .flatten()
        .map(|&(_, y)| y)
        .fold(0.0, f64::max)
        * 1.15;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: {unit} per {per} × processors (flat = perfect scaling)",
                w.name()
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.5f64..max_p + 0.5, 0f64..max_y.max(1e-9))?;
    chart
        .configure_mesh()
        .x_desc("processors")
        .y_desc(format!("{unit}/{per} × processors"))
        .y_label_formatter(&|y| num(*y))
        .x_labels((max_p as usize + 1).min(17))
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 1.0 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .draw()?;
    for ((rt, load), mut points) in lines {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let c = color(rt);
        let style = match load {
            Some(t) if t < 20 => c.mix(0.5).stroke_width(2),
            _ => c.stroke_width(2),
        };
        let label = match load {
            Some(t) => format!("{} ({t} tasks/p)", rt.name()),
            None => rt.name().to_string(),
        };
        chart
            .draw_series(LineSeries::new(points.clone(), style))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, style.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(true)
}

/// Wake-from-idle latency against percentile, one line per runtime plus the
/// std-thread floor (log scale; each point is the median over the runs).
pub fn wake_distribution(path: &Path, results: &Results) -> PlotResult<bool> {
    let mut per_rt: BTreeMap<RuntimeKind, Vec<Vec<(f64, u64)>>> = BTreeMap::new();
    for r in results.runs.iter().filter(|r| {
        r.cell.workload == Workload::Wake
            && r.outcome.status == Status::Ok
            && !r.outcome.latency_percentiles.is_empty()
    }) {
        per_rt
            .entry(r.runtime)
            .or_default()
            .push(r.outcome.latency_percentiles.clone());
    }
    if per_rt.is_empty() {
        return Ok(false);
    }
    let lines: Vec<(RuntimeKind, Vec<(f64, f64)>)> = per_rt
        .into_iter()
        .map(|(rt, runs)| {
            let points = (0..runs[0].len())
                .map(|i| {
                    let mut v: Vec<u64> =
                        runs.iter().filter_map(|r| r.get(i).map(|p| p.1)).collect();
                    v.sort_unstable();
                    (runs[0][i].0, v[v.len() / 2].max(1) as f64)
                })
                .collect();
            (rt, points)
        })
        .collect();
    let (lo, hi) = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold((f64::MAX, 1.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "wake-from-idle latency distribution (median over runs)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..100f64, ((lo / 1.5).max(1.0)..hi * 1.5).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (ns, log scale)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| num(*y))
        .draw()?;
    for (rt, points) in lines {
        let style = color(rt).stroke_width(2);
        chart
            .draw_series(LineSeries::new(points.clone(), style))?
            .label(rt.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 2, style.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(true)
}
