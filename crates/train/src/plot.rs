//! The end-of-run plot: loss and learning rate over steps, as an SVG image in the train
//! directory.
//!
//! SVG because it needs no font: plotters' SVG backend writes text as text, and without a font
//! feature it only estimates text extents for layout. A PNG would need a font rasterizer and a
//! system font, which a headless training machine may not have.

use std::io::Write;
use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::log::LogEntry;
use towers_data::atomic_file::write_atomic;
use towers_multigpu::Cause;

/// Writes the plot of `entries` to `path` (atomically).
pub fn plot_log(entries: &[LogEntry], path: &Path) -> Result<()> {
    let svg = render(entries).map_err(|error| Error::File {
        path: path.to_path_buf(),
        reason: "plotting".into(),
        error: Some(error),
    })?;
    write_atomic(path, |w| w.write_all(svg.as_bytes())).map_err(Error::io(path))
}

/// The SVG text of the plot: loss above, learning rate below, steps across.
pub fn render(entries: &[LogEntry]) -> std::result::Result<String, Cause> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 640)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, bottom) = root.split_vertically(320);
        let loss: Vec<(f64, f64)> = entries.iter().map(|e| (e.step as f64, e.loss)).collect();
        let lr: Vec<(f64, f64)> = entries.iter().map(|e| (e.step as f64, e.lr)).collect();
        panel(&top, "loss", &loss, false, &BLUE)?;
        panel(&bottom, "learning rate", &lr, true, &RED)?;
        root.present()?;
    }
    Ok(svg)
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    points: &[(f64, f64)],
    from_zero: bool,
    color: &RGBColor,
) -> std::result::Result<(), Cause> {
    let finite: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.1.is_finite()).collect();
    let xs = span(finite.iter().map(|p| p.0));
    let ys = span(finite.iter().map(|p| p.1));
    let margin = (ys.end - ys.start) * 0.05;
    // A learning rate reads best against 0, a loss against its own range.
    let ys = match from_zero {
        true => {
            0.0..finite
                .iter()
                .fold(0.0, |m: f64, p| m.max(p.1 * 1.1))
                .max(f64::MIN_POSITIVE)
        }
        false => (ys.start - margin)..(ys.end + margin),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .margin_right(40)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(xs, ys)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc(title)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    chart.draw_series(LineSeries::new(finite, color))?;
    Ok(())
}

/// The range of `values`, widened when empty or a single value.
fn span(values: impl Iterator<Item = f64>) -> Range<f64> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    match (lo.is_finite(), hi > lo) {
        (true, true) => lo..hi,
        (true, false) => (lo - 1.0)..(lo + 1.0),
        (false, _) => 0.0..1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_both_curves_with_their_titles() {
        let entries: Vec<LogEntry> = (1..=20)
            .map(|i| LogEntry {
                step: i * 10,
                loss: 3.0 / i as f64,
                mean_loss: None,
                lr: if i < 10 { 0.1 } else { 0.01 },
                examples_per_sec: 1.0,
                sec_per_batch: 1.0,
                input_queue_fill: 1.0,
                batch_queue_fill: 1.0,
                corrupt_records_skipped: 0,
                metrics: Default::default(),
            })
            .collect();
        let svg = render(&entries).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split('>').nth(1))
            .map(|t| t.trim_end_matches("</text").trim())
            .collect();
        assert!(
            texts.contains(&"loss") && texts.contains(&"learning rate"),
            "titles: {texts:?}"
        );
        let curves = |color: &str| {
            svg.matches(&format!(
                "<polyline fill=\"none\" opacity=\"1\" stroke=\"{color}\""
            ))
            .count()
        };
        assert!(
            curves("#0000FF") >= 1 && curves("#FF0000") >= 1,
            "a blue and a red curve"
        );
        let dir = tempfile::tempdir().unwrap();
        plot_log(&entries, &dir.path().join("p.svg")).unwrap();
        assert!(render(&[]).is_ok(), "an empty log still plots");
    }
}
