//! The sweep's figure: per workload, each run's mean completion time and makespan over
//! the seeds, as a point with its 95 % confidence interval as a bar, runs side by side,
//! so overlapping intervals are seen at a glance. It draws what `results.json` holds; the
//! file it goes to is `plot`'s.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{Unit, colour, error, tick};
use switchyard_control::Estimate;
use switchyard_sim::{SweepResults, SweepRow as Row};

/// What a panel shows of a row.
type Measure = fn(&Row) -> Option<Estimate>;

/// The figure's size: a row of two panels per workload.
pub(super) fn size(results: &SweepResults) -> (u32, u32) {
    let workloads = results.plan.workloads.len().max(1) as u32;
    (1100, 80 + 360 * workloads)
}

/// Mean completion time and makespan with intervals, a row of two panels per workload.
pub(super) fn draw(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    results: &SweepResults,
) -> Result<(), String> {
    let plan = &results.plan;
    let title = format!(
        "mean over {} seeds with 95 % confidence intervals",
        plan.seeds.len()
    );
    let area = root.titled(&title, ("sans-serif", 20)).map_err(error)?;
    let rows = area.split_evenly((plan.workloads.len().max(1), 2));
    let measures: [(&str, Measure); 2] = [
        ("mean completion time", |r| r.mean_completion),
        ("makespan", |r| r.makespan),
    ];
    for (w, workload) in plan.workloads.iter().enumerate() {
        let name = std::path::Path::new(workload)
            .file_name()
            .map_or(workload.clone(), |n| n.to_string_lossy().into_owned());
        let mine: Vec<&Row> = results
            .rows
            .iter()
            .filter(|r| &r.workload == workload)
            .collect();
        for (m, (what, measure)) in measures.iter().enumerate() {
            panel(
                &rows[w * 2 + m],
                &format!("{name}: {what}"),
                &mine,
                *measure,
            )?;
        }
    }
    Ok(())
}

/// One panel: a run per position on the x axis, its point and interval.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    rows: &[&Row],
    measure: Measure,
) -> Result<(), String> {
    let estimates: Vec<Option<Estimate>> = rows.iter().map(|r| measure(r)).collect();
    let highest = estimates
        .iter()
        .flatten()
        .map(|e| e.high.unwrap_or(e.value))
        .fold(1.0, f64::max);
    let lowest = estimates
        .iter()
        .flatten()
        .map(|e| e.low.unwrap_or(e.value))
        .fold(highest, f64::min);
    let unit = Unit::for_largest(highest);
    let (top, bottom) = (highest / unit.seconds, lowest / unit.seconds);
    // A little room around the intervals; not from zero, or a few per cent apart is
    // one flat line.
    let pad = ((top - bottom) * 0.15).max(top * 0.01);
    let n = rows.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(70)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, (bottom - pad).max(0.0)..top + pad)
        .map_err(error)?;
    let names: Vec<String> = rows.iter().map(|r| r.run.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_label_style(("sans-serif", 13))
        .y_desc(format!("[{}]", unit.symbol))
        .y_label_formatter(&tick)
        .label_style(("sans-serif", 13))
        .max_light_lines(0)
        .draw()
        .map_err(error)?;
    for (i, estimate) in estimates.iter().enumerate() {
        let Some(e) = estimate else { continue };
        let c = colour(i);
        let x = i as f64;
        let v = e.value / unit.seconds;
        // An interval of no width (every seed gave the same figure) is the point alone:
        // a bar of no length is nothing to draw.
        if let (Some(low), Some(high)) = (e.low, e.high)
            && high - low > (high.abs() + low.abs()) * 1e-9
        {
            // The interval: a vertical bar with a cap at each end.
            let (low, high) = (low / unit.seconds, high / unit.seconds);
            let cap = 0.12;
            let style = c.stroke_width(2);
            chart
                .draw_series([
                    PathElement::new(vec![(x, low), (x, high)], style),
                    PathElement::new(vec![(x - cap, low), (x + cap, low)], style),
                    PathElement::new(vec![(x - cap, high), (x + cap, high)], style),
                ])
                .map_err(error)?;
        }
        chart
            .draw_series(std::iter::once(Circle::new((x, v), 5, c.filled())))
            .map_err(error)?;
    }
    Ok(())
}
