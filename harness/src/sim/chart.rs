//! An SVG chart of a simulation: queue depth and oldest message age per channel, and
//! deliveries per minute by outcome, over simulated time, with a time axis under each panel
//! and the provider outage shaded. Plain SVG, no dependencies.

use std::fmt::Write;

use super::report::Sample;
use reminders::domain::Channel;

const W: f64 = 960.0;
const PANEL_H: f64 = 180.0;
const LEFT: f64 = 70.0;
const COLORS: [&str; 3] = ["#1f77b4", "#ff7f0e", "#2ca02c"];

/// One line of a panel: name, colour, (time, value) points.
type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

/// A shaded time window: start and end (s) and its label.
pub type Window<'a> = (f64, f64, &'a str);

/// A tick step (s) giving at most ten ticks over `t_max`.
fn tick_step(t_max: f64) -> f64 {
    const STEPS: [f64; 12] = [
        10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1_800.0, 3_600.0, 7_200.0, 21_600.0, 43_200.0,
        86_400.0,
    ];
    STEPS
        .into_iter()
        .find(|s| t_max / s <= 10.0)
        .unwrap_or(172_800.0)
}

/// A tick label: seconds under two minutes, then minutes, then hours.
fn tick_label(t: f64) -> String {
    if t < 120.0 {
        format!("{t:.0} s")
    } else if t < 7_200.0 {
        format!("{:.0} min", t / 60.0)
    } else {
        format!("{:.0} h", t / 3_600.0)
    }
}

fn panel(
    out: &mut String,
    top: f64,
    title: &str,
    unit: &str,
    series: &[Series<'_>],
    t_max: f64,
    shade: Option<Window<'_>>,
) {
    let y_max = series
        .iter()
        .flat_map(|(_, _, pts)| pts.iter().map(|p| p.1))
        .fold(1.0_f64, f64::max);
    let x = |t: f64| LEFT + (t.min(t_max) / t_max.max(1.0)) * (W - LEFT - 20.0);
    let y = |v: f64| top + PANEL_H - (v / y_max) * PANEL_H;
    if let Some((from, to, label)) = shade.filter(|(from, _, _)| *from < t_max) {
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{top}" width="{:.1}" height="{PANEL_H}" fill="#d62728" fill-opacity="0.12"/>"##,
            x(from),
            (x(to) - x(from)).max(1.0)
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{}" font-size="10" fill="#d62728">{label}</text>"##,
            x(from) + 3.0,
            top + 12.0
        );
    }
    let step = tick_step(t_max);
    let mut t = 0.0;
    while t <= t_max {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#999"/><text x="{0:.1}" y="{3}" font-size="10" text-anchor="middle">{4}</text>"##,
            x(t),
            top + PANEL_H,
            top + PANEL_H + 4.0,
            top + PANEL_H + 15.0,
            tick_label(t)
        );
        t += step;
    }
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
            W - 300.0 + i as f64 * 70.0,
            top - 8.0
        );
    }
}

/// The chart as an SVG document; `outage` is shaded in every panel.
pub fn svg(samples: &[Sample], outage: Option<Window<'_>>) -> String {
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
    // Deliveries per minute by outcome (samples are ten seconds apart).
    let per_minute = |f: fn(&Sample) -> u64| -> Vec<(f64, f64)> {
        samples
            .chunks(6)
            .map(|chunk| {
                let t = chunk[0].t_secs as f64;
                (t, chunk.iter().map(f).sum::<u64>() as f64)
            })
            .collect()
    };
    let outcomes: Vec<Series<'static>> = vec![
        ("delivered", "#2ca02c", per_minute(|s| s.delivered)),
        ("expired", "#9467bd", per_minute(|s| s.expired)),
        // Failures only: a recipient's choice is no red line.
        ("dead", "#d62728", per_minute(|s| s.dead)),
        ("cancelled", "#7f7f7f", per_minute(|s| s.cancelled)),
    ];
    let height = 3.0 * (PANEL_H + 60.0) + 50.0;
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
        outage,
    );
    panel(
        &mut out,
        40.0 + PANEL_H + 60.0,
        "Oldest message age (s)",
        "s",
        &per_channel(&|s, c| *s.oldest_age_secs.get(c)),
        t_max,
        outage,
    );
    panel(
        &mut out,
        40.0 + 2.0 * (PANEL_H + 60.0),
        "Deliveries per minute, by outcome",
        "/min",
        &outcomes,
        t_max,
        outage,
    );
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="11">simulated time: 0 – {t_max:.0} s</text>"#,
        height - 10.0
    );
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reminders::domain::PerChannel;

    fn sample(t: u64) -> Sample {
        Sample {
            t_secs: t,
            depth: PerChannel::from_fn(|_| t),
            oldest_age_secs: PerChannel::from_fn(|_| 1),
            delivered: 3,
            expired: 1,
            dead: 1,
            cancelled: 0,
        }
    }

    #[test]
    fn the_chart_has_a_time_axis_the_outage_and_a_line_per_outcome() {
        let samples: Vec<Sample> = (0..=180).map(|i| sample(i * 10)).collect();
        let svg = svg(&samples, Some((600.0, 900.0, "sms provider outage")));
        // 1,800 s: a tick every 5 minutes, 0 to 30 min, under each of the three panels.
        assert_eq!(svg.matches("<line").count(), 3 * 7, "{svg}");
        assert!(svg.contains(">30 min<") && svg.contains(">0 s<"));
        assert_eq!(svg.matches("sms provider outage").count(), 3);
        for outcome in ["delivered", "expired", "dead", "cancelled"] {
            assert!(svg.contains(&format!(">{outcome}<")), "{outcome}");
        }
        // No outage, no shading.
        assert!(!svg_without_outage(&samples).contains("fill-opacity"));
    }

    fn svg_without_outage(samples: &[Sample]) -> String {
        svg(samples, None)
    }

    #[test]
    fn ticks_stay_few_and_readable_over_any_run() {
        assert_eq!(tick_step(1_800.0), 300.0);
        assert_eq!(tick_step(180_000.0), 21_600.0);
        assert_eq!(tick_step(50.0), 10.0);
        assert_eq!(tick_label(90.0), "90 s");
        assert_eq!(tick_label(600.0), "10 min");
        assert_eq!(tick_label(21_600.0), "6 h");
    }
}
