//! Plots of a comparison, each written as SVG and as PNG: utilisation over time (a panel
//! for CPU, one for GPU, step lines: the share holds until the next change), each job's
//! completion time, and the distribution of completion times. Every title names the
//! workload and the seed; a run whose jobs did not all finish is marked in every legend.
//! It draws what `results.json` holds and decides nothing.
//!
//! PNG text is drawn with a font embedded in the binary (DejaVu Sans, licence beside it
//! in `assets/fonts/`), so a machine without system fonts draws the same image.

mod figures;

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use switchyard_sim::report::Results;

/// A plot that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {file}: {message}")]
pub struct PlotError {
    /// The file.
    pub file: String,
    /// What went wrong.
    pub message: String,
}

/// The plots `write_all` writes, each as `NAME.svg` and `NAME.png`.
pub const PLOTS: [&str; 3] = ["utilisation", "completion", "completion-cdf"];

/// One plot: its size and how to draw it on any backend (SVG or bitmap).
trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Writes every plot of [`PLOTS`] into `dir` as SVG and PNG; returns the files' names.
pub fn write_all(dir: &Path, results: &Results) -> Result<Vec<String>, PlotError> {
    let context = figures::Context::of(results);
    let mut written = Vec::new();
    let figures: [(&str, &dyn ErasedFigure); 3] = [
        (PLOTS[0], &figures::Utilisation::new(&context, results)),
        (PLOTS[1], &figures::PerJob::new(&context, results)),
        (PLOTS[2], &figures::Distribution::new(&context, results)),
    ];
    for (name, figure) in figures {
        for (extension, write) in [("svg", write_svg as Writer), ("png", write_png)] {
            let file = dir.join(format!("{name}.{extension}"));
            write(&file, figure).map_err(|message| PlotError {
                file: file.display().to_string(),
                message,
            })?;
            written.push(format!("{name}.{extension}"));
        }
    }
    Ok(written)
}

/// A figure drawn on either backend, as an object (the generic `Figure::draw` is not).
trait ErasedFigure {
    fn size(&self) -> (u32, u32);
    fn draw_svg(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>;
    fn draw_bitmap(&self, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> Result<(), String>;
}

impl<F: Figure> ErasedFigure for F {
    fn size(&self) -> (u32, u32) {
        Figure::size(self)
    }
    fn draw_svg(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String> {
        self.draw(root)
    }
    fn draw_bitmap(&self, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> Result<(), String> {
        self.draw(root)
    }
}

type Writer = fn(&Path, &dyn ErasedFigure) -> Result<(), String>;

fn write_svg(file: &Path, figure: &dyn ErasedFigure) -> Result<(), String> {
    register_font();
    let root = SVGBackend::new(file, figure.size()).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    figure.draw_svg(&root)?;
    root.present().map_err(|e| e.to_string())
}

fn write_png(file: &Path, figure: &dyn ErasedFigure) -> Result<(), String> {
    register_font();
    let (width, height) = figure.size();
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        figure.draw_bitmap(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    let out = std::fs::File::create(file).map_err(|e| e.to_string())?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(out), width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Best);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer
        .write_image_data(&pixels)
        .map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())
}

/// The embedded font, registered once as the `sans-serif` the figures name.
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let font: &'static [u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
        // The font is a fixed, valid file: a failure here is a broken build.
        plotters::style::register_font("sans-serif", FontStyle::Normal, font)
            .unwrap_or_else(|_| panic!("the embedded DejaVu Sans does not parse"));
    });
}
