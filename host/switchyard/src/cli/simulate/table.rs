//! The tables `simulate` prints: one row per run, rows of change against the first run,
//! completion time per job, and the legend that says what each column holds. The columns
//! of times share one unit, picked for the largest of them and named in each header, so
//! `4296` never stands beside `2.1` of another unit; a run whose jobs did not all finish says so
//! (`end`) instead of showing a makespan.

use switchyard_sim::{RunOutcome, RunResult, Summary};

use crate::cli::terminal::escaped;

/// The unit of a column of durations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeUnit {
    Seconds,
    Hours,
    Days,
}

impl TimeUnit {
    /// The unit that shows `largest` seconds readably: seconds up to two hours, hours up to
    /// two days, days beyond.
    pub(crate) fn for_largest(largest: f64) -> Self {
        if largest >= 2.0 * 86_400.0 {
            TimeUnit::Days
        } else if largest >= 2.0 * 3_600.0 {
            TimeUnit::Hours
        } else {
            TimeUnit::Seconds
        }
    }

    pub(crate) fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "s",
            TimeUnit::Hours => "h",
            TimeUnit::Days => "d",
        }
    }

    pub(crate) fn seconds(self) -> f64 {
        match self {
            TimeUnit::Seconds => 1.0,
            TimeUnit::Hours => 3_600.0,
            TimeUnit::Days => 86_400.0,
        }
    }

    /// `seconds` in this unit, without the unit (the header names it).
    pub(crate) fn format(self, seconds: f64) -> String {
        match self {
            TimeUnit::Seconds => format!("{seconds:.0}"),
            _ => format!("{:.2}", seconds / self.seconds()),
        }
    }
}

/// What one column shows of a run.
enum Cell {
    /// A duration in seconds, or none (`n/a`).
    Time(Option<f64>),
    /// A share in [0, 1], shown in per cent.
    Share(f64),
    /// A count.
    Count(u64),
    /// Text.
    Text(String),
}

/// One column: its header and what it shows of a run's summary.
struct Column {
    header: &'static str,
    cell: fn(&Summary) -> Cell,
}

/// Completion figures are over finished jobs only: none finished, none to show (a 0 s
/// average would read as a perfect run).
fn over_finished(s: &Summary, value: f64) -> Cell {
    Cell::Time((s.finished > 0).then_some(value))
}

const COLUMNS: &[Column] = &[
    Column {
        header: "jobs",
        cell: |s| Cell::Count(s.jobs as u64),
    },
    Column {
        header: "done",
        cell: |s| Cell::Count(s.finished as u64),
    },
    Column {
        header: "avg JCT",
        cell: |s| over_finished(s, s.avg_completion),
    },
    Column {
        header: "p50 JCT",
        cell: |s| over_finished(s, s.p50_completion),
    },
    Column {
        header: "p95 JCT",
        cell: |s| over_finished(s, s.p95_completion),
    },
    Column {
        header: "makespan",
        // Only a run whose jobs all finished has a makespan; `end` says why not.
        cell: |s| Cell::Time((s.outcome == RunOutcome::Finished).then_some(s.makespan)),
    },
    Column {
        header: "avg wait",
        cell: |s| Cell::Time((s.jobs > s.never_started).then_some(s.avg_wait)),
    },
    Column {
        header: "CPU",
        cell: |s| Cell::Share(s.cpu_utilisation),
    },
    Column {
        header: "GPU",
        cell: |s| Cell::Share(s.gpu_utilisation),
    },
    Column {
        header: "migr",
        cell: |s| Cell::Count(s.migrations),
    },
    Column {
        header: "rescale",
        cell: |s| Cell::Count(s.rescales),
    },
    Column {
        header: "preempt",
        cell: |s| Cell::Count(s.preemptions),
    },
    Column {
        header: "deadlock",
        cell: |s| Cell::Count(s.deadlocked as u64),
    },
    Column {
        header: "unstarted",
        cell: |s| Cell::Count(s.never_started as u64),
    },
    Column {
        header: "fails",
        cell: |s| Cell::Count(s.policy_failures),
    },
    Column {
        header: "end",
        cell: |s| Cell::Text(s.outcome.word().to_string()),
    },
];

/// What the columns mean, printed under the table.
pub(crate) const LEGEND: &str = "\
JCT: job completion time (finish - submit), over finished jobs; avg wait: start - submit,
  over started jobs; makespan: when the last job finished (n/a unless `end` is done);
  times in the unit of their header: s seconds, h hours, d days; n/a: no job to count.
CPU, GPU: mean share of the cluster's cores in use and of its GPUs allocated to running
  jobs, over the run (a stranded gang holds resources but uses none).
migr, rescale, preempt: actions applied; fails: rounds in which the policy failed and
  the fallback decided.
deadlock: unfinished jobs that held resources at the end (a stranded gang); unstarted:
  unfinished jobs that never started.
end: done (every job finished), deadlocked, stuck (jobs waited for resources that never
  came) or time limit (the workload's simulator.max_time passed first).
change rows: relative change of each figure against the first run (negative = smaller),
  and the difference of counts.";

/// Lays out rows of cells under `header`, the first column left-aligned.
pub(crate) fn layout(header: &[String], rows: &[Vec<String>]) -> String {
    // Cells hold names from workloads, policies and controllers: escaped before they are
    // measured, so what is measured is what is printed.
    let safe = |cells: &[String]| -> Vec<String> {
        cells.iter().map(|c| escaped(c).into_owned()).collect()
    };
    let header = safe(header);
    let rows: Vec<Vec<String>> = rows.iter().map(|r| safe(r)).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let text: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == 0 {
                    format!("{v:<w$}", w = widths[c])
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect();
        text.join("  ").trim_end().to_string()
    };
    let mut out = line(&header);
    for row in &rows {
        out.push('\n');
        out.push_str(&line(row));
    }
    out
}

/// The summary table: a row per run, then (with more than one run) a row per other run
/// of its change against the first.
pub(crate) fn summary(runs: &[RunResult]) -> String {
    let cells: Vec<Vec<Cell>> = runs
        .iter()
        .map(|r| COLUMNS.iter().map(|c| (c.cell)(&r.summary)).collect())
        .collect();
    // One unit for every column of times, so that figures side by side compare at a
    // glance; it is named in each header.
    let largest = cells
        .iter()
        .flatten()
        .filter_map(|cell| match cell {
            Cell::Time(t) => Some(t.unwrap_or(0.0)),
            _ => None,
        })
        .fold(0.0, f64::max);
    let unit = TimeUnit::for_largest(largest);
    let units: Vec<Option<TimeUnit>> = (0..COLUMNS.len())
        .map(|c| {
            let times = cells
                .first()
                .is_some_and(|row| matches!(row[c], Cell::Time(_)));
            times.then_some(unit)
        })
        .collect();
    let mut header = vec!["policy".to_string()];
    header.extend(
        COLUMNS
            .iter()
            .zip(&units)
            .map(|(c, unit)| match (unit, c.header) {
                (Some(unit), h) => format!("{h} [{}]", unit.symbol()),
                (None, "CPU" | "GPU") => format!("{} [%]", c.header),
                (None, h) => h.to_string(),
            }),
    );
    let mut rows: Vec<Vec<String>> = runs
        .iter()
        .zip(&cells)
        .map(|(run, row)| {
            let mut out = vec![run.policy.clone()];
            out.extend(row.iter().zip(&units).map(|(cell, unit)| match cell {
                Cell::Time(Some(t)) => unit.unwrap_or(TimeUnit::Seconds).format(*t),
                Cell::Time(None) => "n/a".into(),
                Cell::Share(share) => format!("{:.0}", 100.0 * share),
                Cell::Count(n) => n.to_string(),
                Cell::Text(text) => text.clone(),
            }));
            out
        })
        .collect();
    if let Some((base, others)) = cells.split_first() {
        for (run, row) in runs.iter().zip(&cells).skip(1).take(others.len()) {
            let mut out = vec![format!("{} vs {}", run.policy, runs[0].policy)];
            out.extend(base.iter().zip(row).map(|(b, x)| change(b, x)));
            rows.push(out);
        }
    }
    layout(&header, &rows)
}

/// The change of one figure against the first run's.
fn change(base: &Cell, other: &Cell) -> String {
    let relative = |b: f64, x: f64| {
        if b > 0.0 {
            format!("{:+.1}%", 100.0 * (x - b) / b)
        } else if x == b {
            "0".into()
        } else {
            "n/a".into()
        }
    };
    match (base, other) {
        (Cell::Time(Some(b)), Cell::Time(Some(x))) => relative(*b, *x),
        (Cell::Share(b), Cell::Share(x)) => relative(*b, *x),
        (Cell::Count(b), Cell::Count(x)) => format!("{:+}", *x as i128 - *b as i128),
        (Cell::Text(b), Cell::Text(x)) if b == x => "same".into(),
        (Cell::Text(_), Cell::Text(x)) => x.clone(),
        _ => "n/a".into(),
    }
}

/// Most jobs listed in the per-job table.
const JOBS_SHOWN: usize = 20;

/// Completion time per job under the first run and its change under the others, for the
/// first [`JOBS_SHOWN`] jobs; `None` with a single run.
pub(crate) fn per_job(runs: &[RunResult]) -> Option<String> {
    let (base, others) = runs.split_first()?;
    if others.is_empty() {
        return None;
    }
    let shown = base.jobs.len().min(JOBS_SHOWN);
    let jct = |r: &RunResult, i: usize| r.jobs[i].finish_time.map(|f| f - r.jobs[i].submit_time);
    let unit = TimeUnit::for_largest((0..shown).filter_map(|i| jct(base, i)).fold(0.0, f64::max));
    let mut header = vec![
        "job".to_string(),
        format!("{} [{}]", base.policy, unit.symbol()),
    ];
    header.extend(
        others
            .iter()
            .map(|o| format!("{} vs {}", o.policy, base.policy)),
    );
    let rows: Vec<Vec<String>> = (0..shown)
        .map(|i| {
            let b = jct(base, i);
            let mut row = vec![
                base.jobs[i].id.clone(),
                b.map_or("unfinished".into(), |t| unit.format(t)),
            ];
            row.extend(others.iter().map(|o| match (b, jct(o, i)) {
                (Some(b), Some(x)) if b > 0.0 => format!("{:+.1}%", 100.0 * (x - b) / b),
                (None, Some(x)) => format!("done in {}{}", unit.format(x), unit.symbol()),
                (_, None) => "unfinished".into(),
                _ => "n/a".into(),
            }));
            row
        })
        .collect();
    let mut out = format!(
        "completion time per job under {}, and its change under the others (negative = faster):\n{}",
        base.policy,
        layout(&header, &rows)
    );
    if base.jobs.len() > shown {
        out.push_str(&format!(
            "\n... {} more jobs in results.json (--out DIR)",
            base.jobs.len() - shown
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_control::RunEnd;
    use switchyard_control::{CompletionStats, Observation};
    use switchyard_sim::JobOutcome;

    /// A run of `jobs` jobs submitted at 0, of which those with a time finished then.
    fn run(name: &str, finish: &[Option<f64>], deadlocked: usize) -> RunResult {
        let jobs: Vec<JobOutcome> = finish
            .iter()
            .enumerate()
            .map(|(i, f)| JobOutcome {
                id: format!("j{i}"),
                submit_time: 0.0,
                start_time: Some(0.0),
                finish_time: *f,
                deadlocked: f.is_none() && i < deadlocked,
                migrations: 0,
                rescales: 0,
                preemptions: 0,
                work_lost: 0.0,
                policy_labels: Default::default(),
            })
            .collect();
        let done: Vec<f64> = finish.iter().flatten().copied().collect();
        let finished = done.len();
        let avg = done.iter().sum::<f64>() / finished.max(1) as f64;
        let last = done.iter().copied().fold(13.0, f64::max);
        let summary = Summary {
            jobs: jobs.len(),
            finished,
            avg_completion: avg,
            p50_completion: avg,
            p95_completion: avg,
            makespan: last,
            avg_wait: 0.0,
            cpu_utilisation: 0.5,
            gpu_utilisation: 0.0,
            migrations: 0,
            rescales: 0,
            preemptions: 0,
            deadlocked,
            never_started: 0,
            rounds: 1,
            policy_failures: 0,
            ended: RunEnd::Idle,
            outcome: RunOutcome::of(jobs.len(), finished, deadlocked, RunEnd::Idle),
            completion: CompletionStats::of(
                &jobs
                    .iter()
                    .map(|j| Observation::of(j.submit_time, j.finish_time, last))
                    .collect::<Vec<_>>(),
            ),
        };
        RunResult {
            policy: name.into(),
            source: name.into(),
            settings: Default::default(),
            summary,
            jobs,
            utilisation: Vec::new(),
        }
    }

    fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
            .split_whitespace()
            .collect()
    }

    #[test]
    fn the_columns_of_times_share_one_unit_named_in_each_header() {
        let table = summary(&[
            run("fast", &[Some(4296.0)], 0),
            run("slow", &[Some(7560.0)], 0),
        ]);
        let header = table.lines().next().unwrap();
        assert!(
            header.contains("avg JCT [h]") && header.contains("makespan [h]"),
            "{table}"
        );
        assert_eq!(row(&table, "fast")[3], "1.19", "{table}");
        assert_eq!(row(&table, "slow")[3], "2.10", "{table}");
    }

    #[test]
    fn a_deadlocked_run_shows_no_makespan_and_says_it_deadlocked() {
        let table = summary(&[run("default", &[None, None], 2)]);
        let cells = row(&table, "default");
        assert_eq!(&cells[3..7], ["n/a", "n/a", "n/a", "n/a"], "{table}");
        assert_eq!(cells.last(), Some(&"deadlocked"), "{table}");
    }

    #[test]
    fn each_other_run_has_a_row_of_change_against_the_first() {
        let table = summary(&[
            run("a", &[Some(100.0)], 0),
            run("b", &[Some(80.0)], 0),
            run("c", &[None], 1),
        ]);
        let b = row(&table, "b vs a");
        assert_eq!(b[5], "-20.0%", "{table}");
        assert_eq!(b.last(), Some(&"same"), "{table}");
        let c = row(&table, "c vs a");
        assert_eq!(c[5], "n/a", "{table}");
        assert_eq!(c[4], "-1", "{table}");
        assert_eq!(c.last(), Some(&"deadlocked"), "{table}");
    }

    #[test]
    fn the_per_job_table_keeps_one_unit_and_marks_unfinished_jobs() {
        let table = per_job(&[
            run("a", &[Some(100.0), Some(9000.0), None], 0),
            run("b", &[Some(50.0), None, Some(3600.0)], 0),
        ])
        .unwrap();
        assert!(table.contains("a [h]"), "{table}");
        assert_eq!(row(&table, "j0")[1..], ["0.03", "-50.0%"], "{table}");
        assert_eq!(row(&table, "j1")[2], "unfinished", "{table}");
        assert!(
            row(&table, "j2")
                .join(" ")
                .contains("unfinished done in 1.00h")
        );
    }
}
