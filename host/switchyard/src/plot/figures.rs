//! The three figures: what each shows of the runs, laid out for any backend. Times are
//! drawn in seconds, hours or days, whichever keeps the longest axis readable.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::Figure;
use super::style::{Unit, colour, error, tick};
use switchyard_sim::{Results, RunOutcome, RunResult, UtilPoint};

/// Jobs shown by name at each end of the per-job plot when there are too many for all.
pub(super) const JOBS_AT_EACH_END: usize = 20;

/// Most points of one distribution line (a trace of 100,000 jobs stays a small file).
const CDF_POINTS: usize = 1_000;

/// What every title says: the workload and the seed.
pub(super) struct Context {
    subtitle: String,
}

impl Context {
    pub(super) fn of(results: &Results) -> Self {
        let workload = std::path::Path::new(&results.workload)
            .file_name()
            .map_or(results.workload.clone(), |n| {
                n.to_string_lossy().into_owned()
            });
        Self {
            subtitle: format!("{workload}, seed {}", results.seed),
        }
    }

    fn title(&self, what: &str) -> String {
        format!("{what} \u{2014} {}", self.subtitle)
    }
}

/// A run's name in legends; a run whose jobs did not all finish says how it ended.
fn label(run: &RunResult) -> String {
    let s = &run.summary;
    match s.outcome {
        RunOutcome::Finished => run.policy.clone(),
        outcome => format!(
            "{} ({}: {} of {} jobs done)",
            run.policy,
            outcome.word(),
            s.finished,
            s.jobs
        ),
    }
}

/// Line widths that keep overlapping lines visible: the first run's is the widest, so a
/// later run drawn on top of it leaves its edges showing.
fn width(run: usize, runs: usize) -> u32 {
    (2 + 3 * runs.saturating_sub(run + 1) / 2).min(6) as u32
}

fn caption<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
) -> Result<DrawingArea<DB, Shift>, String> {
    root.titled(title, ("sans-serif", 20)).map_err(error)
}

/// How a run is drawn, for its entry in the key.
#[derive(Clone, Copy)]
enum Marker {
    Line(u32),
    Dashed(u32),
    Dot,
    Cross,
}

/// One entry of a figure's key.
struct Key {
    text: String,
    colour: RGBColor,
    marker: Marker,
}

/// For each run, the first earlier run whose drawing (`drawn`, one per run) is the same:
/// its line would hide under that run's, so it is drawn dashed and the key says so.
fn coinciding<T: PartialEq>(drawn: &[T]) -> Vec<Option<usize>> {
    (0..drawn.len())
        .map(|i| (0..i).find(|&j| drawn[i] == drawn[j]))
        .collect()
}

/// A run's key text, naming the run it is identical to.
fn keyed(runs: &[RunResult], identical: &[Option<usize>], i: usize) -> String {
    match identical[i] {
        Some(j) => format!("{} (identical to {})", label(&runs[i]), runs[j].policy),
        None => label(&runs[i]),
    }
}

/// A key entry per run drawn as a line: dashed for a run identical to an earlier one.
fn line_keys(runs: &[RunResult], identical: &[Option<usize>]) -> Vec<Key> {
    (0..runs.len())
        .map(|i| Key {
            text: keyed(runs, identical, i),
            colour: colour(i),
            marker: if identical[i].is_some() {
                Marker::Dashed(width(i, runs.len()))
            } else {
                Marker::Line(width(i, runs.len()))
            },
        })
        .collect()
}

/// The chart every line figure draws on.
type LineChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Draws run `i`'s line: solid, or dashed when it repeats an earlier run, so the
/// earlier run's colour shows between the dashes.
fn run_line(
    chart: &mut LineChart<'_, '_>,
    points: Vec<(f64, f64)>,
    i: usize,
    runs: usize,
    dashed: bool,
) -> Result<(), String> {
    let style = colour(i).stroke_width(width(i, runs));
    if dashed {
        chart
            .draw_series(DashedLineSeries::new(points, 10, 8, style))
            .map_err(error)?;
    } else {
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(error)?;
    }
    Ok(())
}

/// Draws `keys` in rows across the top of `area` (outside the chart, so the key never
/// hides data) and returns the area below them.
fn key_strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    keys: &[Key],
) -> Result<DrawingArea<DB, Shift>, String> {
    const ROW: i32 = 20;
    let font = ("sans-serif", 14)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let (width, _) = area.dim_in_pixel();
    let mut rows: Vec<Vec<(i32, &Key)>> = vec![Vec::new()];
    let mut x = 70;
    for key in keys {
        let (text_width, _) = area.estimate_text_size(&key.text, &font).map_err(error)?;
        let needed = 28 + text_width as i32 + 24;
        if x + needed > width as i32 - 10 && rows.last().is_some_and(|r| !r.is_empty()) {
            rows.push(Vec::new());
            x = 70;
        }
        if let Some(row) = rows.last_mut() {
            row.push((x, key));
        }
        x += needed;
    }
    let (strip, rest) = area.split_vertically(rows.len() as i32 * ROW + 6);
    for (r, row) in rows.iter().enumerate() {
        let y = r as i32 * ROW + ROW / 2 + 2;
        for &(x, key) in row {
            let c = key.colour;
            match key.marker {
                Marker::Line(w) => strip.draw(&PathElement::new(
                    vec![(x, y), (x + 22, y)],
                    c.stroke_width(w),
                )),
                Marker::Dashed(w) => strip
                    .draw(&PathElement::new(
                        vec![(x, y), (x + 8, y)],
                        c.stroke_width(w),
                    ))
                    .and_then(|()| {
                        strip.draw(&PathElement::new(
                            vec![(x + 14, y), (x + 22, y)],
                            c.stroke_width(w),
                        ))
                    }),
                Marker::Dot => strip.draw(&Circle::new((x + 11, y), 4, c.filled())),
                Marker::Cross => strip.draw(&Cross::new((x + 11, y), 5, c.stroke_width(2))),
            }
            .map_err(error)?;
            strip
                .draw_text(&key.text, &font, (x + 28, y))
                .map_err(error)?;
        }
    }
    Ok(rest)
}

/// Completion time (finish - submit) of a finished job.
fn completion(run: &RunResult, job: usize) -> Option<f64> {
    let j = &run.jobs[job];
    Some(j.finish_time? - j.submit_time)
}

/// What a panel shows of a utilisation sample.
type Share = fn(&UtilPoint) -> f64;

/// Utilisation over time: a panel for CPU and, when any run used GPUs, one for GPU.
pub(super) struct Utilisation<'a> {
    title: String,
    runs: &'a [RunResult],
    gpu: bool,
}

impl<'a> Utilisation<'a> {
    pub(super) fn new(context: &Context, results: &'a Results) -> Self {
        Self {
            title: context.title("utilisation over time"),
            runs: &results.runs,
            gpu: results
                .runs
                .iter()
                .any(|r| r.utilisation.iter().any(|p| p.gpu > 0.0)),
        }
    }

    /// The step line of one resource of a run: a share holds from its sample until the
    /// next, and the last until the run's end.
    fn steps(run: &RunResult, unit: Unit, share: Share) -> Vec<(f64, f64)> {
        let mut points = Vec::with_capacity(run.utilisation.len() * 2 + 1);
        for (i, p) in run.utilisation.iter().enumerate() {
            let x = p.time / unit.seconds;
            if i > 0 {
                points.push((x, share(&run.utilisation[i - 1])));
            }
            points.push((x, share(p)));
        }
        if let Some(last) = run.utilisation.last() {
            let end = run.summary.makespan.max(last.time) / unit.seconds;
            points.push((end, share(last)));
        }
        points
    }
}

impl Figure for Utilisation<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, if self.gpu { 760 } else { 440 })
    }

    fn draw(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String> {
        let area = caption(root, &self.title)?;
        let end = self
            .runs
            .iter()
            .map(|r| r.summary.makespan)
            .fold(1.0, f64::max);
        let unit = Unit::for_largest(end);
        let panels: Vec<(&str, Share)> = if self.gpu {
            vec![
                ("CPU cores in use", |p| p.cpu),
                ("GPUs allocated", |p| p.gpu),
            ]
        } else {
            vec![("CPU cores in use", |p| p.cpu)]
        };
        let lines: Vec<Vec<Vec<(f64, f64)>>> = self
            .runs
            .iter()
            .map(|run| {
                panels
                    .iter()
                    .map(|(_, share)| Self::steps(run, unit, *share))
                    .collect()
            })
            .collect();
        let identical = coinciding(&lines);
        let area = key_strip(&area, &line_keys(self.runs, &identical))?;
        let areas = area.split_evenly((panels.len(), 1));
        for (p, ((what, _), panel)) in panels.into_iter().zip(&areas).enumerate() {
            let mut chart = ChartBuilder::on(panel)
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..end / unit.seconds * 1.01, 0.0..1.05)
                .map_err(error)?;
            chart
                .configure_mesh()
                .x_desc(format!("time since the first submission [{}]", unit.symbol))
                .x_label_formatter(&tick)
                .y_desc(format!("{what} [%]"))
                .y_label_formatter(&|y: &f64| format!("{:.0}", y * 100.0))
                .label_style(("sans-serif", 14))
                .max_light_lines(0)
                .draw()
                .map_err(error)?;
            for (i, run_lines) in lines.iter().enumerate() {
                run_line(
                    &mut chart,
                    run_lines[p].clone(),
                    i,
                    self.runs.len(),
                    identical[i].is_some(),
                )?;
            }
        }
        Ok(())
    }
}

/// Each shown job's completion time under every run, a row per job named on the axis:
/// every job when they are few, else the first run's slowest and fastest.
pub(super) struct PerJob<'a> {
    title: String,
    runs: &'a [RunResult],
    /// Rows from the top: a job's index, or `None` for the gap between the two ends.
    rows: Vec<Option<usize>>,
    hidden: usize,
}

impl<'a> PerJob<'a> {
    pub(super) fn new(context: &Context, results: &'a Results) -> Self {
        let runs = &results.runs[..];
        let jobs = runs.first().map_or(0, |r| r.jobs.len());
        let (rows, hidden, what) = if jobs <= 2 * JOBS_AT_EACH_END {
            (
                (0..jobs).map(Some).collect(),
                0,
                "completion time per job".to_string(),
            )
        } else {
            // Slowest first: an unfinished job is slower than any finished one.
            let mut order: Vec<usize> = (0..jobs).collect();
            let key = |j: usize| completion(&runs[0], j).unwrap_or(f64::INFINITY);
            order.sort_by(|a, b| key(*b).total_cmp(&key(*a)).then(a.cmp(b)));
            let mut rows: Vec<Option<usize>> = order[..JOBS_AT_EACH_END]
                .iter()
                .copied()
                .map(Some)
                .collect();
            rows.push(None);
            rows.extend(order[jobs - JOBS_AT_EACH_END..].iter().copied().map(Some));
            (
                rows,
                jobs - 2 * JOBS_AT_EACH_END,
                format!(
                    "completion time of the {JOBS_AT_EACH_END} slowest and fastest of {jobs} jobs under {}",
                    runs[0].policy
                ),
            )
        };
        Self {
            title: context.title(&what),
            runs,
            rows,
            hidden,
        }
    }
}

impl Figure for PerJob<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 150 + 20 * self.rows.len().max(4) as u32)
    }

    fn draw(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String> {
        let area = caption(root, &self.title)?;
        let shown = || self.rows.iter().flatten().copied();
        let mut keys = Vec::new();
        let times: Vec<Vec<Option<f64>>> = self
            .runs
            .iter()
            .map(|run| shown().map(|j| completion(run, j)).collect())
            .collect();
        let identical = coinciding(&times);
        for (i, run) in self.runs.iter().enumerate() {
            let finished = shown().any(|j| completion(run, j).is_some());
            if finished {
                keys.push(Key {
                    text: keyed(self.runs, &identical, i),
                    colour: colour(i),
                    marker: Marker::Dot,
                });
            }
            if shown().any(|j| completion(run, j).is_none()) {
                keys.push(Key {
                    text: if finished {
                        format!("{}: unfinished", run.policy)
                    } else {
                        format!("{}: unfinished", label(run))
                    },
                    colour: colour(i),
                    marker: Marker::Cross,
                });
            }
        }
        let area = key_strip(&area, &keys)?;
        let times = || {
            self.runs
                .iter()
                .flat_map(move |r| shown().filter_map(move |j| completion(r, j)))
        };
        let largest = times().fold(1.0, f64::max);
        let unit = Unit::for_largest(largest);
        let x_end = largest / unit.seconds * 1.08;
        // Times that span orders of magnitude (a trace's seconds-long and weeks-long
        // jobs) go on a log axis, or the fast end is one blur at zero.
        let smallest = times().filter(|t| *t > 0.0).fold(largest, f64::min) / unit.seconds;
        if x_end / smallest > 100.0 {
            let start = smallest / 1.5;
            self.rows_on(
                root,
                &area,
                (start..x_end).log_scale(),
                start,
                x_end,
                unit,
                "log scale, ",
            )
        } else {
            self.rows_on(root, &area, 0.0..x_end, 0.0, x_end, unit, "")
        }
    }
}

impl PerJob<'_> {
    /// Draws the rows on an x axis of `x` (linear or log), from `x_start` to `x_end`.
    #[allow(clippy::too_many_arguments)]
    fn rows_on<DB: DrawingBackend, X>(
        &self,
        root: &DrawingArea<DB, Shift>,
        area: &DrawingArea<DB, Shift>,
        x: X,
        x_start: f64,
        x_end: f64,
        unit: Unit,
        scale: &str,
    ) -> Result<(), String>
    where
        X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
        X::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
    {
        let n = self.rows.len() as f64;
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(220)
            .build_cartesian_2d(x, 0.0..n.max(1.0))
            .map_err(error)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .max_light_lines(0)
            .x_desc(format!(
                "completion time (finish - submit) [{scale}{}]",
                unit.symbol
            ))
            .x_label_formatter(&tick)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(error)?;
        // Row r from the top is drawn between y = n - r - 1 and n - r.
        let centre = |row: usize| n - row as f64 - 0.5;
        let names = ("sans-serif", 13)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Right, VPos::Center));
        for (row, job) in self.rows.iter().enumerate() {
            let text = match job {
                Some(j) => truncate(&self.runs[0].jobs[*j].id, 28),
                None => format!("\u{22ef} {} more jobs \u{22ef}", self.hidden),
            };
            let (x, y) = chart.backend_coord(&(x_start, centre(row)));
            root.draw_text(&text, &names, (x - 6, y)).map_err(error)?;
        }
        let offset = |i: usize| (i as f64 + 1.0) / (self.runs.len() as f64 + 1.0) - 0.5;
        for (i, run) in self.runs.iter().enumerate() {
            let c = colour(i);
            let rows = self
                .rows
                .iter()
                .enumerate()
                .filter_map(|(row, job)| Some((row, (*job)?)));
            let done: Vec<(f64, f64)> = rows
                .clone()
                .filter_map(|(row, j)| {
                    let t = completion(run, j)? / unit.seconds;
                    Some((t.max(x_start), centre(row) + offset(i)))
                })
                .collect();
            chart
                .draw_series(done.iter().map(|p| Circle::new(*p, 4, c.filled())))
                .map_err(error)?;
            // An unfinished job sits at the right edge (0.985 of the way on either axis).
            let edge = if x_start > 0.0 {
                x_start * (x_end / x_start).powf(0.985)
            } else {
                x_end * 0.985
            };
            let unfinished: Vec<(f64, f64)> = rows
                .filter(|(_, j)| completion(run, *j).is_none())
                .map(|(row, _)| (edge, centre(row) + offset(i)))
                .collect();
            chart
                .draw_series(
                    unfinished
                        .iter()
                        .map(|p| Cross::new(*p, 5, c.stroke_width(2))),
                )
                .map_err(error)?;
        }
        Ok(())
    }
}

fn truncate(name: &str, most: usize) -> String {
    if name.chars().count() <= most {
        name.to_string()
    } else {
        let kept: String = name.chars().take(most - 1).collect();
        format!("{kept}\u{2026}")
    }
}

/// The share of all jobs finished within each completion time, a step line per run (a
/// run whose jobs did not all finish stays below 1; one with none finished is named in
/// a note).
pub(super) struct Distribution<'a> {
    title: String,
    runs: &'a [RunResult],
}

impl<'a> Distribution<'a> {
    pub(super) fn new(context: &Context, results: &'a Results) -> Self {
        Self {
            title: context.title("completion time distribution"),
            runs: &results.runs,
        }
    }

    /// `(completion time, share of all jobs done within it)`, at most [`CDF_POINTS`]
    /// steps, always keeping the last.
    fn line(run: &RunResult, unit: Unit) -> Vec<(f64, f64)> {
        let mut times: Vec<f64> = (0..run.jobs.len())
            .filter_map(|j| completion(run, j))
            .collect();
        times.sort_by(f64::total_cmp);
        let total = run.jobs.len().max(1) as f64;
        let stride = times.len().div_ceil(CDF_POINTS).max(1);
        let mut points = vec![(0.0, 0.0)];
        let mut previous = 0.0;
        for (i, t) in times.iter().enumerate() {
            if i % stride == stride - 1 || i + 1 == times.len() {
                let x = t / unit.seconds;
                points.push((x, previous));
                previous = (i + 1) as f64 / total;
                points.push((x, previous));
            }
        }
        points
    }
}

impl Figure for Distribution<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 560)
    }

    fn draw(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String> {
        let area = caption(root, &self.title)?;
        let largest = self
            .runs
            .iter()
            .flat_map(|r| (0..r.jobs.len()).filter_map(|j| completion(r, j)))
            .fold(1.0, f64::max);
        let unit = Unit::for_largest(largest);
        let x_end = largest / unit.seconds * 1.02;
        let lines: Vec<Vec<(f64, f64)>> = self.runs.iter().map(|r| Self::line(r, unit)).collect();
        let identical = coinciding(&lines);
        let area = key_strip(&area, &line_keys(self.runs, &identical))?;
        let mut chart = ChartBuilder::on(&area)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_end, 0.0..1.05)
            .map_err(error)?;
        chart
            .configure_mesh()
            .x_desc(format!(
                "completion time (finish - submit) [{}]",
                unit.symbol
            ))
            .x_label_formatter(&tick)
            .y_desc("jobs done within it [% of all jobs]")
            .y_label_formatter(&|y: &f64| format!("{:.0}", y * 100.0))
            .label_style(("sans-serif", 14))
            .max_light_lines(0)
            .draw()
            .map_err(error)?;
        let mut notes = 0;
        for (i, (run, line)) in self.runs.iter().zip(lines).enumerate() {
            let c = colour(i);
            let mut line = line;
            if let Some(&(_, share)) = line.last() {
                line.push((x_end, share));
            }
            run_line(&mut chart, line, i, self.runs.len(), identical[i].is_some())?;
            if run.summary.finished == 0 {
                let (x, y) = chart.backend_coord(&(0.0, 1.0));
                let style = ("sans-serif", 15).into_font().color(&c);
                let text = format!(
                    "{}: no job finished ({})",
                    run.policy,
                    run.summary.outcome.word()
                );
                root.draw_text(&text, &style, (x + 10, y + 10 + 20 * notes))
                    .map_err(error)?;
                notes += 1;
            }
        }
        Ok(())
    }
}
