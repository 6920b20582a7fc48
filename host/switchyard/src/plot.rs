//! Plots of a comparison, each written as SVG and as PNG: utilisation over time (a panel
//! for CPU, one for GPU, step lines: the share holds until the next change), each job's
//! completion time, and the distribution of completion times. Every title names the
//! workload and the seed; a run whose jobs did not all finish is marked in every legend.
//! It draws what `results.json` holds and decides nothing.
//!
//! Each figure is drawn once, as SVG; the PNG is that SVG rasterised. Text is laid out
//! and drawn with a font embedded in the binary (DejaVu Sans, licence beside it in
//! `assets/fonts/`), so a machine without system fonts draws the same image.

mod figures;

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use switchyard_sim::Results;

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

/// One plot: its size and how to draw it.
trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>;
}

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
        let file = |extension: &str| dir.join(format!("{name}.{extension}"));
        let failed = |extension: &str, message: String| PlotError {
            file: file(extension).display().to_string(),
            message,
        };
        let svg = draw_svg(figure).map_err(|message| failed("svg", message))?;
        let png = rasterise(&svg).map_err(|message| failed("png", message))?;
        for (extension, bytes) in [("svg", svg.as_bytes()), ("png", png.as_slice())] {
            std::fs::write(file(extension), bytes).map_err(|e| failed(extension, e.to_string()))?;
            written.push(format!("{name}.{extension}"));
        }
    }
    Ok(written)
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
