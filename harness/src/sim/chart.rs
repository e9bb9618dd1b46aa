//! An SVG chart of a simulation: queue depth and oldest message age per channel, deliveries
//! per minute, and the reminders not delivered per minute by outcome (on a scale of their
//! own, so a few dozen deaths do not hide on the baseline of thousands delivered), over
//! simulated time. Each panel has a time axis, a value axis with gridlines, and the provider
//! outage shaded. One colour per meaning: a channel's colour is never an outcome's. Plain
//! SVG, no dependencies.

use std::fmt::Write;

use super::report::Sample;
use reminders_core::domain::Channel;

const W: f64 = 960.0;
const PANEL_H: f64 = 180.0;
const LEFT: f64 = 70.0;
/// push, email, sms: none of them an outcome's colour.
const COLORS: [&str; 3] = ["#1f77b4", "#ff7f0e", "#8c564b"];
/// The outage's shading: grey, as no line is.
const SHADE: &str = "#7f7f7f";
const GRID: &str = "#e5e5e5";

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

/// The value axis' top: the first of 1, 2, 2.5, 5 × 10^k at or above `max` (4 even steps).
fn nice_max(max: f64) -> f64 {
    let mut scale = 1.0;
    loop {
        for m in [1.0, 2.0, 2.5, 5.0] {
            if m * scale >= max {
                return m * scale;
            }
        }
        scale *= 10.0;
    }
}

/// A value label: whole numbers with a thousands separator, or up to two decimals below 10.
fn value_label(v: f64) -> String {
    if v.fract() != 0.0 && v < 10.0 {
        let s = format!("{v:.2}");
        return s.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    let n = v.round() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
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

/// A panel's title, and a line under it saying how to read it.
type Title<'a> = (&'a str, &'a str);

fn panel(
    out: &mut String,
    top: f64,
    (title, subtitle): Title<'_>,
    series: &[Series<'_>],
    t_max: f64,
    shade: Option<Window<'_>>,
) {
    let y_max = nice_max(
        series
            .iter()
            .flat_map(|(_, _, pts)| pts.iter().map(|p| p.1))
            .fold(1.0_f64, f64::max),
    );
    let x = |t: f64| LEFT + (t.min(t_max) / t_max.max(1.0)) * (W - LEFT - 20.0);
    let y = |v: f64| top + PANEL_H - (v / y_max) * PANEL_H;
    if let Some((from, to, label)) = shade.filter(|(from, _, _)| *from < t_max) {
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{top}" width="{:.1}" height="{PANEL_H}" fill="{SHADE}" fill-opacity="0.15"/>"##,
            x(from),
            (x(to) - x(from)).max(1.0)
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{}" font-size="10" fill="#404040">{label}</text>"##,
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
    // The value axis: five labelled levels, gridlines between.
    for i in 0..=4 {
        let v = y_max * f64::from(i) / 4.0;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="{GRID}"/><text x="{2}" y="{3:.1}" font-size="10" text-anchor="end">{4}</text>"##,
            y(v),
            W - 20.0,
            LEFT - 4.0,
            y(v) + 3.5,
            value_label(v)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{title}</text>"#,
        top - 22.0
    );
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="{}" font-size="10" fill="#404040">{subtitle}</text>"##,
        top - 8.0
    );
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{}" height="{PANEL_H}" fill="none" stroke="#999"/>"##,
        W - LEFT - 20.0
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
            top - 22.0
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
    let delivered: Vec<Series<'static>> =
        vec![("delivered", "#2ca02c", per_minute(|s| s.delivered))];
    let not_delivered: Vec<Series<'static>> = vec![
        ("expired", "#9467bd", per_minute(|s| s.expired)),
        // Failures only: a recipient's choice is no red line.
        ("dead", "#d62728", per_minute(|s| s.dead)),
        ("cancelled", "#17becf", per_minute(|s| s.cancelled)),
    ];
    let panels: [(Title<'_>, &[Series<'_>]); 4] = [
        (
            (
                "Queue depth (messages)",
                "every message in the channel's queue: visible, or held until its retry",
            ),
            &per_channel(&|s, c| *s.depth.get(c)),
        ),
        (
            (
                "Oldest message age (s)",
                "as CloudWatch's ApproximateAgeOfOldestMessage: it climbs while any one message waits, however few are left",
            ),
            &per_channel(&|s, c| *s.oldest_age_secs.get(c)),
        ),
        (
            (
                "Delivered per minute",
                "deliveries the provider accepted, every channel",
            ),
            &delivered,
        ),
        (
            (
                "Not delivered per minute",
                "on a scale of their own: expired (stale before sent), dead (failures an operator sees), cancelled",
            ),
            &not_delivered,
        ),
    ];
    let height = 4.0 * (PANEL_H + 75.0) + 50.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, (title, series)) in panels.into_iter().enumerate() {
        let top = 50.0 + i as f64 * (PANEL_H + 75.0);
        panel(&mut out, top, title, series, t_max, outage);
    }
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
    use reminders_core::domain::PerChannel;

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
        // 1,800 s: a tick every 5 minutes, 0 to 30 min, under each of the four panels, and
        // five value levels in each.
        assert_eq!(
            svg.matches(r##"stroke="#999"/><text"##).count(),
            4 * 7,
            "{svg}"
        );
        assert_eq!(svg.matches(GRID).count(), 4 * 5, "{svg}");
        assert!(svg.contains(">30 min<") && svg.contains(">0 s<"));
        assert_eq!(svg.matches("sms provider outage").count(), 4);
        for outcome in ["delivered", "expired", "dead", "cancelled"] {
            assert!(svg.contains(&format!(">{outcome}<")), "{outcome}");
        }
        // No outage, no shading.
        assert!(!svg_without_outage(&samples).contains("fill-opacity"));
    }

    /// A handful of deaths among thousands delivered stays visible: they have a panel and a
    /// scale of their own (3 dead in a minute here, under an axis topped at 5).
    #[test]
    fn the_few_not_delivered_have_a_scale_of_their_own() {
        let mut samples: Vec<Sample> = (0..=180).map(|i| sample(i * 10)).collect();
        for s in &mut samples {
            s.delivered = 500;
            s.expired = 0;
            s.dead = 0;
        }
        samples[60].dead = 3;
        let svg = svg(&samples, None);
        assert!(
            svg.contains(">5,000<"),
            "delivered: 3,000 a minute, under an axis topped at 5,000"
        );
        // Its axis is drawn between the panel above's lines and its own title.
        let above = svg
            .split("deliveries the provider accepted")
            .nth(1)
            .unwrap();
        let last_panel = above.split("Not delivered per minute").next().unwrap();
        assert!(
            last_panel.contains(r#"text-anchor="end">5<"#),
            "{last_panel}"
        );
    }

    #[test]
    fn each_colour_means_one_thing() {
        let svg = svg(&[sample(0), sample(10)], Some((0.0, 5.0, "outage")));
        let colours: Vec<&str> = ["#2ca02c", "#9467bd", "#d62728", "#17becf"]
            .into_iter()
            .chain(COLORS)
            .chain([SHADE])
            .collect();
        for (i, a) in colours.iter().enumerate() {
            assert!(svg.contains(a), "{a}");
            assert!(!colours[i + 1..].contains(a), "{a} twice");
        }
    }

    #[test]
    fn value_axes_end_on_round_numbers() {
        let tops = [
            (1.0, 1.0),
            (3.0, 5.0),
            (1_291.0, 2_000.0),
            (569.0, 1_000.0),
            (220.0, 250.0),
        ];
        for (max, top) in tops {
            assert_eq!(nice_max(max), top, "the axis over {max}");
        }
        for (v, label) in [
            (12_500.0, "12,500"),
            (250.0, "250"),
            (1.25, "1.25"),
            (2.5, "2.5"),
        ] {
            assert_eq!(value_label(v), label);
        }
    }

    fn svg_without_outage(samples: &[Sample]) -> String {
        svg(samples, None)
    }

    #[test]
    fn ticks_stay_few_and_readable_over_any_run() {
        for (run, step) in [(1_800.0, 300.0), (180_000.0, 21_600.0), (50.0, 10.0)] {
            assert_eq!(tick_step(run), step, "the ticks over a {run} s run");
        }
        for (t, label) in [(90.0, "90 s"), (600.0, "10 min"), (21_600.0, "6 h")] {
            assert_eq!(tick_label(t), label);
        }
    }
}
