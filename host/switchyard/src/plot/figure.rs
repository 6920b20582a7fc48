//! What every plot is to the writer: a size and a way to draw itself on an SVG area. Kept
//! apart from the writer so that the figures depend on it and not on their parent.

use plotters::coord::Shift;
use plotters::prelude::*;

/// One plot: its size and how to draw it.
pub(super) trait Figure {
    /// Width and height, in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws the plot on `root`; an error is the drawing library's, as text.
    fn draw(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>;
}
