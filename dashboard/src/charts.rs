//! Small line charts drawn on the server as inline SVG: they need no
//! script and no image request. Colours come from the stylesheet (a class
//! per series), so the page's CSP needs no inline style.

use maud::{html, Markup};

pub struct Series<'a> {
    pub label: &'a str,
    /// A CSS class: s-ready, s-delayed, s-inflight, s-dead, s-added, s-acked.
    pub class: &'a str,
    pub values: Vec<f64>,
}

/// A chart `w`×`h` of `series`, all on one y scale from 0 to their maximum.
/// With `legend`, the series' names and last values underneath.
pub fn chart(title: &str, series: &[Series], w: u32, h: u32, legend: bool, unit: &str) -> Markup {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .fold(0.0f64, f64::max);
    let top = nice_max(max);
    let (wf, hf) = (f64::from(w), f64::from(h));
    let pad = 2.0;
    let points = |values: &[f64]| -> String {
        let n = values.len();
        if n == 0 {
            return String::new();
        }
        let step = if n > 1 {
            (wf - 2.0 * pad) / (n - 1) as f64
        } else {
            0.0
        };
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let x = pad + step * i as f64;
                let y = hf - pad - (v / top) * (hf - 2.0 * pad);
                format!("{x:.1},{y:.1}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let samples = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    html! {
        figure.chart {
            @if !title.is_empty() {
                figcaption {
                    (title)
                    span.scale { "max " (format_value(top)) (unit) }
                }
            }
            svg viewBox=(format!("0 0 {w} {h}")) width=(w) height=(h) role="img"
                aria-label=(title) preserveAspectRatio="none" {
                line.grid x1="0" y1=(format!("{:.1}", hf / 2.0)) x2=(w) y2=(format!("{:.1}", hf / 2.0)) {}
                line.axis x1="0" y1=(format!("{:.1}", hf - 1.0)) x2=(w) y2=(format!("{:.1}", hf - 1.0)) {}
                @if samples < 2 {
                    text.empty x=(w / 2) y=(h / 2) text-anchor="middle" { "collecting samples…" }
                } @else {
                    @for s in series {
                        polyline class=(format!("line {}", s.class)) points=(points(&s.values)) {}
                    }
                }
            }
            @if legend {
                ul.legend {
                    @for s in series {
                        li {
                            span class=(format!("swatch {}", s.class)) {}
                            (s.label) " "
                            b { (format_value(s.values.last().copied().unwrap_or(0.0))) (unit) }
                        }
                    }
                }
            }
        }
    }
}

/// A tiny chart for a table cell: no title, no legend.
pub fn spark(series: &[Series]) -> Markup {
    chart("", series, 120, 28, false, "")
}

fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if max <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

fn format_value(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        crate::render::count(v as u64)
    } else {
        crate::render::rate(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(120.0), 200.0);
        assert_eq!(nice_max(0.3), 0.5);
    }

    #[test]
    fn a_chart_is_svg_with_a_line_per_series() {
        let s = [Series {
            label: "ready",
            class: "s-ready",
            values: vec![0.0, 5.0, 10.0],
        }];
        let html = chart("Messages", &s, 300, 80, true, "").into_string();
        assert!(html.contains("<svg"));
        assert!(html.contains("class=\"line s-ready\""));
        assert!(html.contains("2.0,78.0"));
        let empty = chart("x", &[], 300, 80, false, "").into_string();
        assert!(empty.contains("collecting samples"));
    }
}
