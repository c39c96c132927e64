//! The comparison as a picture: one bar chart per measure, a bar per
//! policy, in one self-contained SVG (plotters' SVG backend); and a
//! trainer's learning curve. Slowdowns and waits span orders of magnitude
//! across policies (FCFS's can be a hundred times EASY's), so their panels
//! are on a log scale, where a linear one would flatten every bar but the
//! tallest; utilisation stays linear.

use plotters::prelude::*;

use crate::PolicyResult;

/// Reads one measure from a result.
type Measure = fn(&PolicyResult) -> f64;

/// The measures drawn, with how to read each from a result, and whether
/// on a log scale.
const PANELS: [(&str, Measure, bool); 4] = [
    (
        "average bounded slowdown, log scale (lower is better)",
        |r| r.summary.avg_bounded_slowdown,
        true,
    ),
    (
        "worst user's bounded slowdown, log scale (lower is better)",
        |r| r.summary.worst_user_bounded_slowdown,
        true,
    ),
    (
        "average wait, hours, log scale (lower is better)",
        |r| r.summary.avg_wait / 3600.0,
        true,
    ),
    (
        "utilisation (higher is better)",
        |r| r.summary.utilisation,
        false,
    ),
];

/// A panel's vertical axis: linear from 0, or log10 of the values (bars
/// then start below the smallest one).
#[derive(Clone, Copy)]
struct Axis {
    log: bool,
}

impl Axis {
    fn y(self, v: f64) -> f64 {
        if self.log { v.log10() } else { v }
    }

    fn value(self, y: f64) -> f64 {
        if self.log { 10f64.powf(y) } else { y }
    }
}

/// Renders `results` under `title` as SVG text.
pub fn svg(title: &str, results: &[PolicyResult]) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1200, 800)).into_drawing_area();
        draw(&root, title, results).map_err(|e| format!("drawing the chart: {e}"))?;
        root.present()
            .map_err(|e| format!("drawing the chart: {e}"))?;
    }
    Ok(out)
}

type Failure = Box<dyn std::error::Error>;

fn draw(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    results: &[PolicyResult],
) -> Result<(), Failure> {
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 24))?;
    let names: Vec<String> = results.iter().map(|r| r.policy.clone()).collect();
    for (area, (caption, value, log)) in root.split_evenly((2, 2)).iter().zip(PANELS) {
        let values: Vec<f64> = results.iter().map(value).collect();
        let top = values
            .iter()
            .copied()
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE);
        let least = values
            .iter()
            .copied()
            .filter(|&v| v > 0.0)
            .fold(f64::INFINITY, f64::min);
        // A log scale needs positive values; all zero (no wait) stays linear.
        let axis = Axis {
            log: log && least.is_finite() && top > 0.0,
        };
        let (bottom, top) = if axis.log {
            (least.log10() - 0.3, top.log10() + 0.3)
        } else {
            (0.0, top * 1.15)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d((0..values.len()).into_segmented(), bottom..top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(values.len().max(1))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|y| format_value(axis.value(*y)))
            .draw()?;
        chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
            let colour = Palette99::pick(i).filled();
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), bottom),
                    (
                        SegmentValue::Exact(i + 1),
                        axis.y(v.max(f64::MIN_POSITIVE)).max(bottom),
                    ),
                ],
                colour,
            );
            bar.set_margin(0, 0, 8, 8);
            bar
        }))?;
        chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
            Text::new(
                format_value(v),
                (
                    SegmentValue::CenterOf(i),
                    axis.y(v.max(f64::MIN_POSITIVE)).max(bottom),
                ),
                ("sans-serif", 12).into_font().color(&BLACK),
            )
        }))?;
    }
    Ok(())
}

/// A learning curve: each epoch's `(epoch, reward)` and their moving mean
/// over `smooth` epochs, as SVG text.
pub fn curve(title: &str, points: &[(f64, f64)], smooth: usize) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 500)).into_drawing_area();
        draw_curve(&root, title, points, smooth.max(1))
            .map_err(|e| format!("drawing the curve: {e}"))?;
        root.present()
            .map_err(|e| format!("drawing the curve: {e}"))?;
    }
    Ok(out)
}

fn draw_curve(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    points: &[(f64, f64)],
    smooth: usize,
) -> Result<(), Failure> {
    root.fill(&WHITE)?;
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, y)| {
            (lo.min(y), hi.max(y))
        });
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (lo.min(0.0) - 1.0, hi.max(0.0) + 1.0)
    };
    let last = points.last().map_or(1.0, |p| p.0.max(1.0));
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..last, lo..hi)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("reward")
        .y_label_formatter(&|y| format_value(*y))
        .draw()?;
    chart.draw_series(LineSeries::new(
        points.iter().copied(),
        RGBColor(190, 190, 220),
    ))?;
    let mean: Vec<(f64, f64)> = (0..points.len())
        .map(|i| {
            let from = (i + 1).saturating_sub(smooth);
            let window = &points[from..=i];
            let y = window.iter().map(|p| p.1).sum::<f64>() / window.len() as f64;
            (points[i].0, y)
        })
        .collect();
    chart
        .draw_series(LineSeries::new(mean, BLUE.stroke_width(2)))?
        .label(format!("mean over {smooth} epochs"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Short numbers for labels: 3 significant digits, no exponent.
fn format_value(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}
