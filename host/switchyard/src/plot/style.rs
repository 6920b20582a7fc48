//! What every figure draws alike: the runs' colours, time units for axes, tick labels,
//! and drawing errors as text. It draws nothing itself and knows no figure.

use plotters::prelude::*;

/// Colours of the runs, in command-line order (distinguishable, and in grey print).
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The colour of the run at position `run`.
pub(super) fn colour(run: usize) -> RGBColor {
    COLOURS[run % COLOURS.len()]
}

/// The unit of a time axis whose largest value is `largest` seconds.
#[derive(Clone, Copy)]
pub(super) struct Unit {
    pub(super) symbol: &'static str,
    pub(super) seconds: f64,
}

impl Unit {
    pub(super) fn for_largest(largest: f64) -> Self {
        if largest >= 2.0 * 86_400.0 {
            Unit {
                symbol: "days",
                seconds: 86_400.0,
            }
        } else if largest >= 2.0 * 3_600.0 {
            Unit {
                symbol: "hours",
                seconds: 3_600.0,
            }
        } else {
            Unit {
                symbol: "seconds",
                seconds: 1.0,
            }
        }
    }
}

/// An axis label with the digits its size needs and no trailing zeros.
pub(super) fn tick(value: &f64) -> String {
    let size = value.abs();
    let decimals = if size == 0.0 || size >= 10.0 {
        0
    } else if size >= 1.0 {
        1
    } else {
        (-size.log10()).ceil() as usize + 1
    };
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A drawing error as the text a [`super::PlotError`] carries.
pub(super) fn error(e: impl std::fmt::Display) -> String {
    e.to_string()
}
