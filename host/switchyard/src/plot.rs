//! Plots of a comparison, each written as SVG and as PNG: utilisation over time (a panel
//! for CPU, one for GPU, step lines: the share holds until the next change), each job's
//! completion time, and the distribution of completion times. Every title names the
//! workload and the seed; a run whose jobs did not all finish is marked in every legend,
//! and a run drawn exactly as an earlier one is dashed over it and named "identical to"
//! it, so neither hides the other. A sweep has a figure of its own: each run's means over
//! seeds with their intervals. It draws what `results.json` holds and decides nothing.
//!
//! Each figure is drawn once, as SVG; the PNG is that SVG rasterised. Text is laid out
//! and drawn with a font embedded in the binary (DejaVu Sans, licence beside it in
//! `assets/fonts/`), so a machine without system fonts draws the same image.

mod figure;
mod figures;
mod style;
mod sweep;

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use switchyard_sim::{Results, SweepResults};

use figure::Figure;

/// A plot that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {file}: {message}")]
pub struct PlotError {
    /// The file.
    pub file: String,
    /// What went wrong.
    pub message: String,
}

/// The plots [`write_plots`] writes, each as `NAME.svg` and `NAME.png`.
pub const PLOTS: [&str; 3] = ["utilisation", "completion", "completion-cdf"];

/// Writes every plot of [`PLOTS`] into `dir` as SVG and PNG; returns the files' names.
pub fn write_plots(dir: &Path, results: &Results) -> Result<Vec<String>, PlotError> {
    let context = figures::Context::of(results);
    let mut written = Vec::new();
    let figures: [(&str, &dyn Figure); 3] = [
        (PLOTS[0], &figures::Utilisation::new(&context, results)),
        (PLOTS[1], &figures::PerJob::new(&context, results)),
        (PLOTS[2], &figures::Distribution::new(&context, results)),
    ];
    for (name, figure) in figures {
        written.extend(write_figure(dir, name, figure)?);
    }
    Ok(written)
}

/// The plot a sweep writes, as `SWEEP_PLOT.svg` and `.png`.
pub const SWEEP_PLOT: &str = "sweep";

/// Writes a sweep's plot (each run's means over seeds with their intervals) into `dir`
/// as SVG and PNG; returns the files' names.
pub fn write_sweep(dir: &Path, results: &SweepResults) -> Result<Vec<String>, PlotError> {
    Ok(write_figure(dir, SWEEP_PLOT, &SweepFigure(results))?.into())
}

/// A sweep's figure, drawn by [`sweep`]. (It draws through functions rather than
/// implementing [`Figure`] there, so `sweep` needs nothing of this module.)
struct SweepFigure<'a>(&'a SweepResults);

impl Figure for SweepFigure<'_> {
    fn size(&self) -> (u32, u32) {
        sweep::size(self.0)
    }

    fn draw(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String> {
        sweep::draw(root, self.0)
    }
}

/// Draws `figure` and writes it as `name.svg` and `name.png`; returns the two names.
fn write_figure(dir: &Path, name: &str, figure: &dyn Figure) -> Result<[String; 2], PlotError> {
    let file = |extension: &str| dir.join(format!("{name}.{extension}"));
    let failed = |extension: &str, message: String| PlotError {
        file: file(extension).display().to_string(),
        message,
    };
    let svg = draw_svg(figure).map_err(|message| failed("svg", message))?;
    let png = rasterise(&svg).map_err(|message| failed("png", message))?;
    for (extension, bytes) in [("svg", svg.as_bytes()), ("png", png.as_slice())] {
        std::fs::write(file(extension), bytes).map_err(|e| failed(extension, e.to_string()))?;
    }
    Ok([format!("{name}.svg"), format!("{name}.png")])
}

/// Draws a figure as SVG text.
fn draw_svg(figure: &dyn Figure) -> Result<String, String> {
    register_font();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, figure.size()).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        figure.draw(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The PNG of a figure, rasterised from its SVG by resvg, so both files show the same
/// picture. (plotters' own bitmap text drops each glyph's left side bearing, which put a
/// gap after every `1`.)
fn rasterise(svg: &str) -> Result<Vec<u8>, String> {
    let mut options = resvg::usvg::Options {
        font_family: FONT_FAMILY.to_string(),
        ..Default::default()
    };
    options.fontdb_mut().load_font_data(FONT.to_vec());
    options.fontdb_mut().set_sans_serif_family(FONT_FAMILY);
    let tree = resvg::usvg::Tree::from_str(svg, &options).map_err(|e| e.to_string())?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or_else(|| {
            format!(
                "a {}x{} image cannot be allocated",
                size.width(),
                size.height()
            )
        })?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| e.to_string())
}

/// DejaVu Sans, embedded so a machine without system fonts draws the same image.
const FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
/// The family name inside [`FONT`].
const FONT_FAMILY: &str = "DejaVu Sans";

/// The embedded font, registered once as the `sans-serif` the figures name: plotters
/// measures text with it to lay the SVG out.
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is a fixed, valid file: a failure here is a broken build.
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .unwrap_or_else(|_| panic!("the embedded DejaVu Sans does not parse"));
    });
}
