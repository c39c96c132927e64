//! The charts, as SVG text: a Gantt chart of lanes over time and the
//! utilisation curve under it.
//!
//! Up to [`MAX_BARS`] bars every attempt is drawn, one rectangle per run of
//! adjacent lanes it held, carrying its task id (`data-task`) and a tooltip.
//! Beyond that a browser would choke and a person could not tell bars
//! apart, so each lane becomes an occupancy strip over [`BUCKETS`] time
//! buckets, shaded by how busy it was; attempts that did not succeed are
//! still drawn one by one on top (up to [`MAX_BARS`] of them), because they
//! are what a person looks for.

use std::fmt::Write;

use crate::timeline::{Outcome, TimeUnit, Timeline};

/// The most bars drawn one by one.
pub const MAX_BARS: usize = 20_000;
/// Time buckets of an aggregated chart and of the utilisation curve.
pub const BUCKETS: usize = 600;

const WIDTH: f64 = 1100.0;
const LEFT: f64 = 80.0;
const TOP: f64 = 8.0;
const AXIS: f64 = 24.0;

/// Where time `t` lies on the x axis.
fn x_of(t: u64, horizon: u64) -> f64 {
    LEFT + WIDTH * t as f64 / horizon.max(1) as f64
}

/// Height of one lane: the chart stays between ~100 and ~700 px.
fn lane_height(lanes: usize) -> f64 {
    (640.0 / lanes.max(1) as f64).clamp(0.5, 18.0)
}

/// Runs of consecutive lane indices: `[0,1,2,5]` → `[(0,3),(5,1)]`.
fn runs(lanes: &[u32]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &l in lanes {
        match out.last_mut() {
            Some((start, len)) if *start + *len == l => *len += 1,
            _ => out.push((l, 1)),
        }
    }
    out
}

/// Tick labels of the time axis.
fn ticks(horizon: u64, unit: TimeUnit) -> Vec<(u64, String)> {
    let ms = match unit {
        TimeUnit::Millis => 1.0,
        TimeUnit::Seconds => 1000.0,
    };
    let span_s = horizon as f64 * ms / 1000.0;
    let steps = [
        0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
        60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 21600.0, 43200.0,
        86400.0, 172800.0, 604800.0,
    ];
    let step = steps
        .iter()
        .copied()
        .find(|s| span_s / s <= 10.0)
        .unwrap_or(span_s / 10.0);
    let mut out = Vec::new();
    let mut k = 0.0;
    while k * step <= span_s + 1e-9 {
        let secs = k * step;
        out.push(((secs * 1000.0 / ms) as u64, duration(secs)));
        k += 1.0;
    }
    out
}

/// A duration in seconds, short: `750ms`, `12s`, `3m20s`, `5h`, `2d4h`.
pub fn duration(secs: f64) -> String {
    if secs < 1.0 && secs > 0.0 {
        return format!("{}ms", (secs * 1000.0).round());
    }
    if secs < 60.0 {
        let rounded = (secs * 10.0).round() / 10.0;
        return if rounded.fract() == 0.0 {
            format!("{rounded:.0}s")
        } else {
            format!("{rounded:.1}s")
        };
    }
    let s = secs.round() as u64;
    let (d, h, m, s) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m, s) {
        (0, 0, m, 0) => format!("{m}m"),
        (0, 0, m, s) => format!("{m}m{s}s"),
        (0, h, 0, _) => format!("{h}h"),
        (0, h, m, _) => format!("{h}h{m}m"),
        (d, 0, _, _) => format!("{d}d"),
        (d, h, _, _) => format!("{d}d{h}h"),
    }
}

pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// How many rectangles drawing every attempt would take.
pub fn bar_count(timeline: &Timeline) -> usize {
    timeline
        .tasks
        .iter()
        .filter(|t| !t.group)
        .flat_map(|t| &t.attempts)
        .map(|a| runs(&a.lanes).len())
        .sum()
}

/// The Gantt chart: lanes top to bottom, time left to right.
pub fn gantt(timeline: &Timeline) -> String {
    let lanes = timeline.lanes.len();
    let h = lane_height(lanes);
    let plot_h = h * lanes as f64;
    let horizon = timeline.horizon.max(1);
    let mut svg = String::with_capacity(64 * 1024);
    let total_h = TOP + plot_h + AXIS;
    let _ = write!(
        svg,
        r#"<svg class="gantt" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{total_h:.0}" viewBox="0 0 {w} {total_h:.0}" role="img" aria-label="Gantt chart: tasks on cores and GPUs over time">"#,
        w = LEFT + WIDTH + 10.0
    );
    // Lane labels, thinned so they never overlap.
    let every = (12.0 / h).ceil().max(1.0) as usize;
    for (i, lane) in timeline.lanes.iter().enumerate() {
        let y = TOP + h * i as f64;
        if i % 2 == 1 && h >= 2.0 {
            let _ = write!(
                svg,
                r#"<rect class="lane" x="{LEFT}" y="{y:.2}" width="{WIDTH}" height="{h:.2}"/>"#
            );
        }
        if i % every == 0 {
            let _ = write!(
                svg,
                r#"<text class="lane-label" x="{:.0}" y="{:.2}">{}</text>"#,
                LEFT - 4.0,
                y + h.min(12.0) * 0.85,
                lane.label()
            );
        }
    }
    // Nested instances: the slice each owned, outlined behind its tasks.
    for task in timeline.tasks.iter().filter(|t| t.group) {
        for a in &task.attempts {
            for (first, len) in runs(&a.lanes) {
                let _ = write!(
                    svg,
                    r#"<rect class="group" data-task="{id}" x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{hh:.2}"><title>{id} (nested instance)</title></rect>"#,
                    id = escape(&task.id),
                    x = x_of(a.start, horizon),
                    y = TOP + h * first as f64,
                    w = (x_of(a.end, horizon) - x_of(a.start, horizon)).max(0.5),
                    hh = h * len as f64,
                );
            }
        }
    }
    let one_by_one = bar_count(timeline) <= MAX_BARS;
    if !one_by_one {
        strips(&mut svg, timeline, h);
    }
    let mut drawn = 0;
    for task in timeline.tasks.iter().filter(|t| !t.group) {
        for (n, a) in task.attempts.iter().enumerate() {
            if !one_by_one && (a.outcome == Outcome::Succeeded || drawn >= MAX_BARS) {
                continue;
            }
            let x0 = x_of(a.start, horizon);
            let w = (x_of(a.end, horizon) - x0).max(1.0);
            for (first, len) in runs(&a.lanes) {
                drawn += 1;
                let _ = write!(
                    svg,
                    r#"<rect class="bar {class}" data-task="{id}" x="{x0:.2}" y="{y:.2}" width="{w:.2}" height="{hh:.2}"><title>{id}{try_} {class}: {from} → {to}</title></rect>"#,
                    class = a.outcome.class(),
                    id = escape(&task.id),
                    y = TOP + h * first as f64 + if h >= 3.0 { 0.5 } else { 0.0 },
                    hh = (h * len as f64 - if h >= 3.0 { 1.0 } else { 0.0 }).max(0.3),
                    try_ = if task.attempts.len() > 1 {
                        format!(" (attempt {})", n + 1)
                    } else {
                        String::new()
                    },
                    from = stamp(a.start, timeline.unit),
                    to = stamp(a.end, timeline.unit),
                );
            }
        }
    }
    // Tasks that never ran (skipped, or cancelled before they started):
    // a tick on the time axis where it happened.
    for task in timeline.tasks.iter().filter(|t| t.attempts.is_empty()) {
        let Some(state) = task.state else { continue };
        if !state.is_final() {
            continue;
        }
        let x = x_of(task.at, horizon);
        let y = TOP + plot_h;
        let _ = write!(
            svg,
            r#"<path class="never {state}" data-task="{id}" d="M{x:.2},{y:.2} l-4,7 h8 z"><title>{id} {state} without running: {detail}</title></path>"#,
            state = state.name(),
            id = escape(&task.id),
            detail = escape(&task.detail),
        );
    }
    axis(&mut svg, TOP + plot_h, horizon, timeline.unit);
    svg.push_str("</svg>");
    svg
}

/// Each lane's busy fraction per time bucket, shaded in five steps.
fn strips(svg: &mut String, timeline: &Timeline, h: f64) {
    let horizon = timeline.horizon.max(1);
    let lanes = timeline.lanes.len();
    let mut busy = vec![0f32; lanes * BUCKETS];
    let width = horizon as f64 / BUCKETS as f64;
    for a in timeline
        .tasks
        .iter()
        .filter(|t| !t.group)
        .flat_map(|t| &t.attempts)
    {
        cover(a.start, a.end, width, |b, part| {
            for &l in &a.lanes {
                busy[l as usize * BUCKETS + b] += part as f32;
            }
        });
    }
    let bw = WIDTH / BUCKETS as f64;
    for lane in 0..lanes {
        let row = &busy[lane * BUCKETS..(lane + 1) * BUCKETS];
        let level = |b: usize| ((row[b].min(1.0) * 4.0).round()) as u8;
        let mut b = 0;
        while b < BUCKETS {
            let l = level(b);
            let mut e = b + 1;
            while e < BUCKETS && level(e) == l {
                e += 1;
            }
            if l > 0 {
                let _ = write!(
                    svg,
                    r#"<rect class="strip o{l}" x="{:.2}" y="{:.2}" width="{:.2}" height="{h:.2}"/>"#,
                    LEFT + bw * b as f64,
                    TOP + h * lane as f64,
                    bw * (e - b) as f64,
                );
            }
            b = e;
        }
    }
}

/// Calls `f(bucket, covered part of it)` for each bucket `[start, end)`
/// covers, buckets being `width` long.
fn cover(start: u64, end: u64, width: f64, mut f: impl FnMut(usize, f64)) {
    let (s, e) = (start as f64 / width, end as f64 / width);
    let mut b = s.floor() as usize;
    while (b as f64) < e && b < BUCKETS {
        let lo = s.max(b as f64);
        let hi = e.min(b as f64 + 1.0);
        if hi > lo {
            f(b, hi - lo);
        }
        b += 1;
    }
}

fn stamp(t: u64, unit: TimeUnit) -> String {
    match unit {
        TimeUnit::Millis => duration(t as f64 / 1000.0),
        TimeUnit::Seconds => duration(t as f64),
    }
}

fn axis(svg: &mut String, y: f64, horizon: u64, unit: TimeUnit) {
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{LEFT}" y1="{y:.2}" x2="{:.2}" y2="{y:.2}"/>"#,
        LEFT + WIDTH
    );
    for (t, label) in ticks(horizon, unit) {
        let x = x_of(t, horizon);
        let _ = write!(
            svg,
            r#"<line class="tick" x1="{x:.2}" y1="{y:.2}" x2="{x:.2}" y2="{:.2}"/><text class="tick-label" x="{x:.2}" y="{:.2}">{label}</text>"#,
            y + 4.0,
            y + 16.0
        );
    }
}

/// Busy cores (and GPUs, when there are any) over time, as a fraction of
/// all, averaged per bucket.
pub fn utilisation(timeline: &Timeline) -> String {
    let horizon = timeline.horizon.max(1);
    let width = horizon as f64 / BUCKETS as f64;
    let cores = timeline.lanes.iter().filter(|l| !l.gpu).count().max(1);
    let gpus = timeline.lanes.iter().filter(|l| l.gpu).count();
    let mut core_busy = vec![0f64; BUCKETS];
    let mut gpu_busy = vec![0f64; BUCKETS];
    for a in timeline
        .tasks
        .iter()
        .filter(|t| !t.group)
        .flat_map(|t| &t.attempts)
    {
        let g = a
            .lanes
            .iter()
            .filter(|&&l| timeline.lanes[l as usize].gpu)
            .count();
        let c = a.lanes.len() - g;
        cover(a.start, a.end, width, |b, part| {
            core_busy[b] += part * c as f64;
            gpu_busy[b] += part * g as f64;
        });
    }
    let plot_h = 120.0;
    let total_h = TOP + plot_h + AXIS;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="utilisation" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{total_h:.0}" viewBox="0 0 {w} {total_h:.0}" role="img" aria-label="Utilisation over time">"#,
        w = LEFT + WIDTH + 10.0
    );
    for (frac, label) in [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")] {
        let y = TOP + plot_h * (1.0 - frac);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{LEFT}" y1="{y:.2}" x2="{:.2}" y2="{y:.2}"/><text class="lane-label" x="{:.0}" y="{:.2}">{label}</text>"#,
            LEFT + WIDTH,
            LEFT - 4.0,
            y + 4.0
        );
    }
    let bw = WIDTH / BUCKETS as f64;
    let mut path = |busy: &[f64], total: usize, class: &str| {
        let mut d = format!("M{LEFT},{:.2}", TOP + plot_h);
        for (b, v) in busy.iter().enumerate() {
            let frac = (v / total as f64).min(1.0);
            let y = TOP + plot_h * (1.0 - frac);
            let _ = write!(
                d,
                " L{:.2},{y:.2} L{:.2},{y:.2}",
                LEFT + bw * b as f64,
                LEFT + bw * (b + 1) as f64
            );
        }
        let _ = write!(d, " L{:.2},{:.2} Z", LEFT + WIDTH, TOP + plot_h);
        let _ = write!(svg, r#"<path class="{class}" d="{d}"/>"#);
    };
    path(&core_busy, cores, "use-cores");
    if gpus > 0 {
        path(&gpu_busy, gpus, "use-gpus");
    }
    axis(&mut svg, TOP + plot_h, horizon, timeline.unit);
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_lanes_make_one_bar() {
        assert_eq!(runs(&[0, 1, 2, 5, 7, 8]), vec![(0, 3), (5, 1), (7, 2)]);
        assert_eq!(runs(&[]), vec![]);
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(duration(0.25), "250ms");
        assert_eq!(duration(12.0), "12s");
        assert_eq!(duration(1.5), "1.5s");
        assert_eq!(duration(200.0), "3m20s");
        assert_eq!(duration(3600.0 * 5.0), "5h");
        assert_eq!(duration(86400.0 * 2.0 + 3600.0 * 4.0), "2d4h");
    }

    #[test]
    fn a_task_split_over_buckets_adds_up_to_its_length() {
        let mut total = 0.0;
        cover(15, 95, 10.0, |_, part| total += part);
        assert!((total - 8.0).abs() < 1e-9, "{total}");
    }

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
