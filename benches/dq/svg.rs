//! lateness.svg: scenario 3's lateness as a histogram. Only its look is
//! decided here; the samples and their percentiles are the report's.

use crate::report::percentile;

/// A histogram of lateness on logarithmic axes: 10 bins per decade from
/// 10 µs to 100 ms, counts on a log scale, the percentiles marked.
pub fn lateness_svg(sorted_us: &[i64], quick: bool) -> String {
    // Canvas and margins: left, right, top, bottom.
    let (w, h) = (820.0, 380.0);
    let (l, r, t, b) = (70.0, 180.0, 40.0, 55.0);
    let (lo, hi) = (1.0_f64, 5.0_f64); // log10 of µs
    let bins = ((hi - lo) * 10.0) as usize;
    let mut counts = vec![0u64; bins];
    for &us in sorted_us {
        let bin = ((((us.max(1) as f64).log10() - lo) * 10.0).floor()).max(0.0) as usize;
        counts[bin.min(bins - 1)] += 1;
    }
    let decades = (counts.iter().copied().max().unwrap_or(1).max(1) as f64)
        .log10()
        .ceil()
        .max(1.0);
    let x = |log_us: f64| l + (log_us.clamp(lo, hi) - lo) / (hi - lo) * (w - l - r);
    let y = |count: f64| h - b - count.max(1.0).log10() / decades * (h - t - b);
    let mut svg = String::new();
    let mut put = |line: String| {
        svg.push_str(&line);
        svg.push('\n');
    };
    put(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    ));
    put(format!(
        "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">dq lateness \
         (delivery − due) at 10k msg/s, {} messages{}</text>",
        (l + w - r) / 2.0,
        sorted_us.len(),
        if quick { ", quick run" } else { "" }
    ));
    for (i, &c) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
        let (x0, x1) = (x(lo + i as f64 / 10.0), x(lo + (i + 1) as f64 / 10.0));
        put(format!(
            "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#4a7ebb\">\
             <title>{c}</title></rect>",
            y(c as f64),
            x1 - x0 - 1.0,
            h - b - y(c as f64)
        ));
    }
    put(format!(
        "<path d=\"M{l} {t} V{} H{}\" stroke=\"black\" fill=\"none\"/>",
        h - b,
        w - r
    ));
    for (d, label) in ["0.01 ms", "0.1 ms", "1 ms", "10 ms", "100 ms"]
        .iter()
        .enumerate()
    {
        let xd = x(lo + d as f64);
        put(format!(
            "<line x1=\"{xd}\" y1=\"{}\" x2=\"{xd}\" y2=\"{}\" stroke=\"black\"/>\
             <text x=\"{xd}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
            h - b,
            h - b + 5.0,
            h - b + 18.0
        ));
    }
    for d in 0..=decades as u32 {
        let yd = y(10f64.powi(d as i32));
        put(format!(
            "<line x1=\"{}\" y1=\"{yd:.1}\" x2=\"{l}\" y2=\"{yd:.1}\" stroke=\"black\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            l - 5.0,
            l - 8.0,
            yd + 4.0,
            10u64.pow(d)
        ));
    }
    put(format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">lateness (log scale)</text>",
        (l + w - r) / 2.0,
        h - 15.0
    ));
    put(format!(
        "<text transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\">messages per \
         bin (log scale)</text>",
        (t + h - b) / 2.0
    ));
    if sorted_us.is_empty() {
        put("</svg>".into());
        return svg;
    }
    // The percentiles as dashed lines, named in a legend on the right.
    let p = |q: f64| percentile(sorted_us, q).max(1.0);
    let marks = [
        ("p50", p(0.5), "#2a2"),
        ("p99", p(0.99), "#d80"),
        ("p999", p(0.999), "#c22"),
        ("max", p(1.0), "#808"),
        ("p99 target", 2000.0, "#888"),
    ];
    for (i, (name, us, colour)) in marks.iter().enumerate() {
        let xm = x(us.log10());
        let ly = t + 10.0 + 18.0 * i as f64;
        put(format!(
            "<line x1=\"{xm:.1}\" y1=\"{t}\" x2=\"{xm:.1}\" y2=\"{}\" stroke=\"{colour}\" \
             stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\
             <line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{colour}\" \
             stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{colour}\">{name} {:.2} ms</text>",
            h - b,
            w - r + 12.0,
            w - r + 36.0,
            w - r + 42.0,
            ly + 4.0,
            us / 1000.0
        ));
    }
    put("</svg>".into());
    svg
}
