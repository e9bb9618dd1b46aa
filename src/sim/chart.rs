//! An SVG chart of a simulation: queue depth and oldest message age per channel, and
//! deliveries per minute, over simulated time. Plain SVG, no dependencies.

use std::fmt::Write;

use super::report::Sample;
use crate::domain::Channel;

const W: f64 = 960.0;
const PANEL_H: f64 = 180.0;
const LEFT: f64 = 70.0;
const COLORS: [&str; 3] = ["#1f77b4", "#ff7f0e", "#2ca02c"];

/// One line of a panel: name, colour, (time, value) points.
type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

fn panel(out: &mut String, top: f64, title: &str, unit: &str, series: &[Series<'_>], t_max: f64) {
    let y_max = series
        .iter()
        .flat_map(|(_, _, pts)| pts.iter().map(|p| p.1))
        .fold(1.0_f64, f64::max);
    let x = |t: f64| LEFT + (t / t_max.max(1.0)) * (W - LEFT - 20.0);
    let y = |v: f64| top + PANEL_H - (v / y_max) * PANEL_H;
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{title}</text>"#,
        top - 8.0
    );
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{}" height="{PANEL_H}" fill="none" stroke="#999"/>"##,
        W - LEFT - 20.0
    );
    let _ = writeln!(
        out,
        r#"<text x="4" y="{}" font-size="11">{y_max:.0} {unit}</text>"#,
        top + 10.0
    );
    let _ = writeln!(
        out,
        r#"<text x="4" y="{}" font-size="11">0</text>"#,
        top + PANEL_H
    );
    for (i, (name, color, pts)) in series.iter().enumerate() {
        let points: Vec<String> = pts
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" font-size="12" fill="{color}">{name}</text>"#,
            W - 200.0 + i as f64 * 60.0,
            top - 8.0
        );
    }
}

/// The chart as an SVG document.
pub fn svg(samples: &[Sample]) -> String {
    let t_max = samples.last().map_or(1.0, |s| s.t_secs as f64);
    let per_channel = |f: &dyn Fn(&Sample, Channel) -> u64| -> Vec<Series<'static>> {
        Channel::ALL
            .iter()
            .zip(COLORS)
            .map(|(c, color)| {
                let pts = samples
                    .iter()
                    .map(|s| (s.t_secs as f64, f(s, *c) as f64))
                    .collect();
                (c.as_str(), color, pts)
            })
            .collect()
    };
    let mut per_minute: Vec<(f64, f64)> = Vec::new();
    for chunk in samples.chunks(6) {
        let t = chunk[0].t_secs as f64;
        per_minute.push((t, chunk.iter().map(|s| s.delivered).sum::<u64>() as f64));
    }
    let height = 3.0 * (PANEL_H + 60.0) + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    panel(
        &mut out,
        40.0,
        "Queue depth (messages)",
        "msgs",
        &per_channel(&|s, c| *s.depth.get(c)),
        t_max,
    );
    panel(
        &mut out,
        40.0 + PANEL_H + 60.0,
        "Oldest message age (s)",
        "s",
        &per_channel(&|s, c| *s.oldest_age_secs.get(c)),
        t_max,
    );
    panel(
        &mut out,
        40.0 + 2.0 * (PANEL_H + 60.0),
        "Deliveries per minute",
        "/min",
        &[("all", "#d62728", per_minute)],
        t_max,
    );
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="11">simulated time: 0 – {t_max:.0} s</text>"#,
        height - 10.0
    );
    out.push_str("</svg>\n");
    out
}
