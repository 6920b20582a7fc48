//! SVG plots of a comparison: completion time per job, its cumulative distribution, and
//! utilisation over time, one line per policy. SVG only (no system fonts needed).

use std::path::Path;

use plotters::prelude::*;

use switchyard_sim::report::RunResult;

/// A plot that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {file}: {message}")]
pub struct PlotError {
    /// The SVG file.
    pub file: String,
    /// What went wrong.
    pub message: String,
}

const COLOURS: [RGBColor; 6] = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];

type Lines = Vec<(String, Vec<(f64, f64)>)>;

/// Writes `completion.svg`, `completion-cdf.svg` and `utilisation.svg` into `dir`.
pub fn write_all(dir: &Path, runs: &[RunResult]) -> Result<(), PlotError> {
    let per_job: Lines = runs
        .iter()
        .map(|r| {
            let pts = r
                .jobs
                .iter()
                .enumerate()
                .filter_map(|(i, j)| Some((i as f64, j.finish_time? - j.submit_time)))
                .collect();
            (r.policy.clone(), pts)
        })
        .collect();
    lines(
        &dir.join("completion.svg"),
        "completion time per job",
        "job (submission order)",
        "seconds",
        &per_job,
    )?;
    let cdf: Lines = runs
        .iter()
        .map(|r| {
            let mut c: Vec<f64> = r
                .jobs
                .iter()
                .filter_map(|j| Some(j.finish_time? - j.submit_time))
                .collect();
            c.sort_by(f64::total_cmp);
            let n = r.jobs.len().max(1) as f64;
            (
                r.policy.clone(),
                c.iter()
                    .enumerate()
                    .map(|(i, t)| (*t, (i + 1) as f64 / n))
                    .collect(),
            )
        })
        .collect();
    lines(
        &dir.join("completion-cdf.svg"),
        "completion time CDF",
        "seconds",
        "fraction of jobs",
        &cdf,
    )?;
    let mut util: Lines = Vec::new();
    for r in runs {
        util.push((
            format!("{} CPU", r.policy),
            r.utilisation.iter().map(|p| (p.time, p.cpu)).collect(),
        ));
        if r.utilisation.iter().any(|p| p.gpu > 0.0) {
            util.push((
                format!("{} GPU", r.policy),
                r.utilisation.iter().map(|p| (p.time, p.gpu)).collect(),
            ));
        }
    }
    lines(
        &dir.join("utilisation.svg"),
        "utilisation over time",
        "seconds",
        "fraction in use",
        &util,
    )
}

fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &Lines,
) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError {
        file: path.display().to_string(),
        message: e.to_string(),
    };
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_max, mut y_max) = (1e-9_f64, 1e-9_f64);
    for &(x, y) in all {
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..y_max * 1.05)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                colour.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
