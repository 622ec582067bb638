//! The HTML report end to end: small real runs of every workload write `--export-html`,
//! `report saved.json --format html` renders a saved report, and the page is checked in
//! Rust (self-contained, balanced SVG, the expected charts with their axis labels) and
//! then opened in a real browser, headless chromium: no console message, the charts in
//! the DOM after the page's script ran, and screenshots in the light and the dark theme
//! that show the charts' colours on the right background.
//!
//! Every chart is also read back, from the page as written and from the DOM the browser
//! made of it: each marker, line point, bar, whisker and histogram step is turned into a
//! value through the chart's own labelled ticks and legend, and must be the JSON report's
//! figure of the same run (within the pixel the SVG rounds to). Every cell of the tables
//! (the terminal's, Markdown's and the page's; a sweep's pivot and the wide rows, in bits
//! and bytes) is parsed as a person reads it and must be the JSON's figure within its
//! printed rounding; a column the test cannot tie to a JSON value fails it.
//!
//! The browser checks skip, saying so, only when chromium is not installed
//! (`apt-get install chromium` on Debian).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::common::{assert_success, browser, chromium, f, u, Sandbox};
use serde_json::Value;

/// Run sockbench with `args`, writing the page to `name` in the sandbox; return the page.
fn run_page(sb: &Sandbox, name: &str, args: &[&str]) -> String {
    let path = sb.path().join(name);
    let out = sb
        .sockbench()
        .args(args)
        .args(["-q", "--export-html"])
        .arg(&path)
        .output()
        .unwrap();
    assert_success(&out);
    std::fs::read_to_string(&path).expect("the page was written")
}

/// The page of a saved JSON report, from `sockbench report FILE --format html`.
fn report_page(sb: &Sandbox, json: &Path) -> String {
    let out = sb
        .sockbench()
        .arg("report")
        .arg(json)
        .args(["--format", "html"])
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

/// The `data-chart` ids of the page's SVGs, in order.
fn chart_ids(page: &str) -> Vec<String> {
    page.split("<svg data-chart=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .collect()
}

/// The SVG element with this `data-chart` id.
fn svg<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<svg data-chart=\"{id}\""))
        .unwrap_or_else(|| panic!("no chart {id} in {:?}", chart_ids(page)));
    let end = start + page[start..].find("</svg>").unwrap();
    &page[start..end]
}

/// The page is one self-contained, well-formed enough document: nothing fetched from
/// another host, every `<svg>` closed, the theme switch and nothing else as script.
fn assert_self_contained(page: &str) {
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    for needle in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "url(http",
        "url(\"http",
        "@import",
        "src=\"//",
        "href=\"//",
        "<link",
        "<iframe",
    ] {
        assert!(
            !page.contains(needle),
            "the page refers elsewhere: {needle}"
        );
    }
    // The only http(s) text is the SVG namespace.
    let http = page.matches("http://").count() + page.matches("https://").count();
    let ns = page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    assert_eq!(
        http, ns,
        "an http(s) reference other than the SVG namespace"
    );
    assert_eq!(
        page.matches("<svg ").count(),
        page.matches("</svg>").count(),
        "unbalanced <svg>"
    );
    assert_eq!(page.matches("<script>").count(), 1);
    assert_eq!(page.matches("<script").count(), 1, "no script from a file");
    assert_eq!(
        page.matches("<table>").count(),
        page.matches("</table>").count()
    );
}

/// What the browser made of a page.
struct Opened {
    /// The DOM after the page's script ran.
    dom: String,
    /// Console messages (errors, warnings, logs) the page produced.
    console: Vec<String>,
}

/// Open `page` in headless chromium: its DOM and what it logged on the console.
fn open(sb: &Sandbox, tool: &str, page: &Path) -> Opened {
    let out = browser(sb, tool, "profile-dom")
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(url(page))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    Opened {
        dom: String::from_utf8(out.stdout).unwrap(),
        console,
    }
}

fn url(page: &Path) -> String {
    format!("file://{}", page.display())
}

/// A screenshot of `page`, 1200 pixels wide, as RGB pixels; `dark` asks for the dark
/// colour scheme.
fn screenshot(sb: &Sandbox, tool: &str, page: &Path, dark: bool) -> (u32, u32, Vec<[u8; 3]>) {
    let png_path: PathBuf = sb.path().join(if dark { "dark.png" } else { "light.png" });
    let mut c = browser(
        sb,
        tool,
        if dark {
            "profile-dark"
        } else {
            "profile-light"
        },
    );
    if dark {
        c.arg("--force-dark-mode")
            .arg("--blink-settings=preferredColorScheme=0");
    }
    let out = c
        .arg("--window-size=1200,1600")
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(url(page))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    decode(&std::fs::read(&png_path).expect("a screenshot"))
}

/// A PNG's pixels as RGB.
fn decode(bytes: &[u8]) -> (u32, u32, Vec<[u8; 3]>) {
    let mut decoder = png::Decoder::new(bytes);
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| match channels {
            1 | 2 => [p[0]; 3],
            _ => [p[0], p[1], p[2]],
        })
        .collect();
    (info.width, info.height, pixels)
}

/// Pixels within a small distance of `hex` (`#RRGGBB`).
fn near(pixels: &[[u8; 3]], hex: &str) -> usize {
    let c = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    let want = [(c >> 16) as u8, (c >> 8) as u8, c as u8];
    pixels
        .iter()
        .filter(|p| (0..3).all(|i| p[i].abs_diff(want[i]) <= 12))
        .count()
}

fn luminance(p: [u8; 3]) -> u32 {
    (u32::from(p[0]) * 299 + u32::from(p[1]) * 587 + u32::from(p[2]) * 114) / 1000
}

/// The browser checks every page gets: no console message, the script ran, every chart
/// the page holds is in the DOM with its axis titles. Returns the DOM the browser made of
/// the page (None without chromium), for reading the charts back from it.
fn check_in_browser(
    sb: &Sandbox,
    page_path: &Path,
    ids: &[String],
    axis_titles: &[&str],
) -> Option<String> {
    let tool = chromium()?;
    let opened = open(sb, tool, page_path);
    assert!(
        opened.console.is_empty(),
        "the page logged on the console: {:?}",
        opened.console
    );
    assert!(
        opened.dom.contains("data-mode=\"auto\""),
        "the theme switch's script did not run"
    );
    assert_eq!(chart_ids(&opened.dom), ids, "the charts in the DOM");
    for t in axis_titles {
        assert!(opened.dom.contains(t), "no axis title {t:?} in the DOM");
    }
    Some(opened.dom)
}

/// Screenshots in both themes show the charts: many colours, the first two series
/// colours, a light background in the light theme and a dark one in the dark theme.
fn check_screenshots(sb: &Sandbox, page_path: &Path) {
    let Some(tool) = chromium() else {
        return;
    };
    for dark in [false, true] {
        let (w, h, pixels) = screenshot(sb, tool, page_path, dark);
        assert_eq!((w, h), (1200, 1600));
        let distinct: std::collections::HashSet<[u8; 3]> = pixels.iter().copied().collect();
        assert!(
            distinct.len() > 200,
            "a blank-looking screenshot: {} colours",
            distinct.len()
        );
        for series in &sockbench::report::chart::PALETTE[..2] {
            assert!(
                near(&pixels, series) > 200,
                "the series colour {series} is missing (dark: {dark})"
            );
        }
        let corner = luminance(pixels[0]);
        if dark {
            assert!(corner < 60, "dark theme background is light: {corner}");
        } else {
            assert!(corner > 200, "light theme background is dark: {corner}");
        }
    }
}

// Reading the figures back. Each chart is read through its own axes (the labelled
// ticks give pixel -> value), each table cell is parsed as a person reads it, and both
// are compared with the JSON report of the same run: the figures sockbench wrote for
// machines, in base units, never through the code that draws or formats for people.

/// One element of a chart's SVG: its tag, its attributes and the text right after it.
#[derive(Debug)]
struct Node {
    tag: String,
    attrs: HashMap<String, String>,
    text: String,
}

impl Node {
    fn attr(&self, name: &str) -> &str {
        self.attrs.get(name).map_or("", String::as_str)
    }

    fn num(&self, name: &str) -> f64 {
        self.attr(name)
            .parse()
            .unwrap_or_else(|_| panic!("{name} of {self:?} is not a number"))
    }

    /// A polyline's points.
    fn points(&self) -> Vec<(f64, f64)> {
        self.attr("points")
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').expect("x,y");
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }

    /// What it is drawn in: a line's stroke, a shape's fill (upper case, `#4E79A7`).
    fn colour(&self) -> String {
        match self.tag.as_str() {
            "polyline" | "line" => self.attr("stroke"),
            _ => self.attr("fill"),
        }
        .to_ascii_uppercase()
    }

    fn is_line(&self, colour: &str, width: &str) -> bool {
        self.tag == "polyline" && self.colour() == colour && self.attr("stroke-width") == width
    }
}

/// Text with the character references the page (or the browser) writes decoded.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The elements of a piece of markup in order (closing tags left out), each with its
/// attributes and the text up to the next tag.
fn nodes(markup: &str) -> Vec<Node> {
    markup
        .split('<')
        .skip(1)
        .filter(|c| !c.starts_with('/') && !c.starts_with('!'))
        .map(|chunk| {
            let (head, text) = chunk.split_once('>').unwrap_or((chunk, ""));
            let head = head.trim_end_matches('/');
            let (tag, mut rest) = head.split_once(char::is_whitespace).unwrap_or((head, ""));
            let mut attrs = HashMap::new();
            while let Some((key, after)) = rest.split_once("=\"") {
                let (value, tail) = after.split_once('"').unwrap_or((after, ""));
                attrs.insert(key.trim().to_string(), unescape(value));
                rest = tail;
            }
            Node {
                tag: tag.to_string(),
                attrs,
                text: unescape(text.trim()),
            }
        })
        .collect()
}

/// A chart as drawn: its axis titles, its labelled ticks (pixel, label), its marks, and
/// the legend under it (colour, series name).
struct Drawn {
    x_title: String,
    y_title: String,
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<(f64, String)>,
    marks: Vec<Node>,
    legend: Vec<(String, String)>,
}

impl Drawn {
    /// Chart `id` of `page`: the page as written, or the DOM a browser made of it.
    fn read(page: &str, id: &str) -> Drawn {
        let start = page
            .find(&format!("<svg data-chart=\"{id}\""))
            .unwrap_or_else(|| panic!("no chart {id} in {:?}", chart_ids(page)));
        let figure = &page[start..start + page[start..].find("</figure>").unwrap()];
        let (svg, after) = figure.split_at(figure.find("</svg>").unwrap());
        let mut d = Drawn {
            x_title: String::new(),
            y_title: String::new(),
            x_ticks: Vec::new(),
            y_ticks: Vec::new(),
            marks: Vec::new(),
            legend: Vec::new(),
        };
        // plotters writes the y title turned on its side, tick labels left of the plot
        // anchored at their end, those under it one line down, the x title last.
        for n in nodes(svg) {
            match n.tag.as_str() {
                "text" if n.attr("transform").contains("rotate") => d.y_title = n.text,
                "text" if n.attr("text-anchor") == "end" => d.y_ticks.push((n.num("y"), n.text)),
                "text" if n.attr("dy") == "0.76em" => d.x_ticks.push((n.num("x"), n.text)),
                "text" => d.x_title = n.text,
                _ => d.marks.push(n),
            }
        }
        for item in after.split("<li>").skip(1) {
            let colour = item
                .split_once("background:")
                .and_then(|(_, c)| c.split(['"', ';']).next())
                .expect("a swatch colour");
            let name = item
                .split_once("</span>")
                .and_then(|(_, n)| n.split_once("</li>"))
                .expect("a series name")
                .0;
            d.legend
                .push((colour.trim().to_ascii_uppercase(), unescape(name.trim())));
        }
        d
    }

    /// The series name of a colour, from the legend.
    fn series(&self, colour: &str) -> &str {
        self.legend
            .iter()
            .find(|(c, _)| c == colour)
            .map(|(_, n)| n.as_str())
            .unwrap_or_else(|| panic!("{colour} is in no legend entry: {:?}", self.legend))
    }

    /// The one line of width `width` in `colour`.
    fn line(&self, colour: &str, width: &str) -> Vec<(f64, f64)> {
        let lines: Vec<&Node> = self
            .marks
            .iter()
            .filter(|n| n.is_line(colour, width))
            .collect();
        assert_eq!(lines.len(), 1, "lines in {colour}: {lines:?}");
        lines[0].points()
    }

    fn of(&self, tag: &str) -> impl Iterator<Item = &Node> {
        let tag = tag.to_string();
        self.marks.iter().filter(move |n| n.tag == tag)
    }
}

/// Ticks whose labels are plain numbers, as (pixel, value).
fn numeric(ticks: &[(f64, String)]) -> Vec<(f64, f64)> {
    ticks
        .iter()
        .map(|(px, l)| (*px, l.parse().unwrap_or_else(|_| panic!("tick {l:?}"))))
        .collect()
}

/// How far a reading may be from the truth, in pixels: the SVG rounds every coordinate
/// (the point's and each tick's) to a whole pixel, which puts a point at most one pixel
/// from where the ticks say its value is.
const PIXEL: f64 = 1.0 + 1e-9;

/// An axis read back from its labelled ticks: the line through the two farthest apart,
/// linear in the value or in its logarithm.
#[derive(Debug)]
struct Scale {
    px0: f64,
    v0: f64,
    per_px: f64,
    log: bool,
}

impl Scale {
    /// Every other tick must sit on that line too (within its rounding).
    fn new(ticks: &[(f64, f64)], log: bool) -> Scale {
        let f = |v: f64| if log { v.log10() } else { v };
        let lo = ticks.iter().min_by(|a, b| a.0.total_cmp(&b.0));
        let hi = ticks.iter().max_by(|a, b| a.0.total_cmp(&b.0));
        let (Some(&lo), Some(&hi)) = (lo, hi) else {
            panic!("no ticks")
        };
        assert!(hi.0 > lo.0, "an axis needs two ticks apart: {ticks:?}");
        let s = Scale {
            px0: lo.0,
            v0: f(lo.1),
            per_px: (f(hi.1) - f(lo.1)) / (hi.0 - lo.0),
            log,
        };
        for &(px, v) in ticks {
            assert!(
                (s.px(v) - px).abs() <= PIXEL,
                "tick {v} at {px} is off its axis {s:?}"
            );
        }
        s
    }

    /// Where `v` belongs on this axis, in pixels.
    fn px(&self, v: f64) -> f64 {
        let l = if self.log { v.log10() } else { v };
        self.px0 + (l - self.v0) / self.per_px
    }

    /// The value at pixel `px`.
    fn value(&self, px: f64) -> f64 {
        let l = self.v0 + (px - self.px0) * self.per_px;
        if self.log {
            10f64.powf(l)
        } else {
            l
        }
    }

    /// `px` is where `want` belongs, within the rounding.
    fn assert_at(&self, px: f64, want: f64, what: &str) {
        assert!(
            (self.px(want) - px).abs() <= PIXEL,
            "{what}: drawn at {px} (reads {}), the JSON has {want} (at {})",
            self.value(px),
            self.px(want)
        );
    }
}

/// The multiplier of an SI prefix.
fn si(prefix: &str) -> f64 {
    match prefix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        other => panic!("SI prefix {other:?}"),
    }
}

/// The multiplier of a binary prefix (`Ki`, `Mi`...).
fn binary(prefix: &str) -> f64 {
    match prefix {
        "" => 1.0,
        "K" | "Ki" => 1024.0,
        "M" | "Mi" => 1024f64.powi(2),
        "G" | "Gi" => 1024f64.powi(3),
        "T" | "Ti" => 1024f64.powi(4),
        other => panic!("binary prefix {other:?}"),
    }
}

/// Nanoseconds per unit of time.
fn ns_per(unit: &str) -> f64 {
    match unit {
        "ns" => 1.0,
        "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => panic!("time unit {other:?}"),
    }
}

/// An axis title's unit, as a multiplier to base units: `throughput (Gbit/s)` -> 1e9,
/// `round trips per second (k round trips/s)` -> 1e3, `latency (µs, log scale)` -> 1e3
/// (ns), `lost (% of messages sent)` -> 1.
fn title_unit(title: &str) -> f64 {
    let inside = title
        .rsplit_once('(')
        .and_then(|(_, r)| r.split_once(')'))
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("no unit in {title:?}"));
    let first = inside.split([',', ' ']).next().unwrap();
    if let Some(prefix) = first.strip_suffix("bit/s") {
        si(prefix)
    } else if ["ns", "µs", "ms", "s"].contains(&first) {
        ns_per(first)
    } else if ["k", "M", "G", "T"].contains(&first) {
        si(first)
    } else {
        1.0
    }
}

/// A size as printed: `64 B`, `16 KiB`.
fn bytes(text: &str) -> u64 {
    let (n, unit) = text.trim().split_once(' ').expect("NUMBER UNIT");
    let n: f64 = n.parse().unwrap();
    (n * binary(unit.trim_end_matches('B').trim_end_matches('i'))).round() as u64
}

/// A scenario's name in a chart or a table, as (transport, size, engine):
/// `tcp 64 KiB (epoll)`, `unix 1 KiB`, or a series across sizes, `tcp`.
fn scenario_name(name: &str) -> (String, Option<u64>, Option<String>) {
    let words: Vec<&str> = name.split_whitespace().collect();
    let engine = words
        .last()
        .and_then(|w| w.strip_prefix('('))
        .and_then(|w| w.strip_suffix(')'))
        .map(str::to_string);
    let size = (words.len() >= 3).then(|| bytes(&format!("{} {}", words[1], words[2])));
    (words[0].to_string(), size, engine)
}

/// The results of one workload in the report.
fn results<'a>(report: &'a Value, workload: &str) -> Vec<&'a Value> {
    report["body"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["workload"] == workload)
        .collect()
}

/// The one result of `workload` a chart or table names (the size given apart when the
/// name has none), the engine only when the name gives one.
fn named<'a>(report: &'a Value, workload: &str, name: &str, size: Option<u64>) -> &'a Value {
    let (transport, named_size, engine) = scenario_name(name);
    let size = named_size.or(size).expect("a size");
    let found: Vec<&Value> = results(report, workload)
        .into_iter()
        .filter(|r| {
            r["transport"] == transport.as_str()
                && r["size_bytes"] == size
                && engine.as_ref().map_or(true, |e| r["engine"] == e.as_str())
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} at {size} bytes: {found:?}");
    found[0]
}

/// The results a chart must show: those that did not fail and finished a run.
fn plottable<'a>(report: &'a Value, workload: &str) -> Vec<&'a Value> {
    results(report, workload)
        .into_iter()
        .filter(|r| r["error"].is_null() && r["runs"].as_array().is_some_and(|a| !a.is_empty()))
        .collect()
}

/// A throughput-against-size chart read back: each marker, in its series' colour at its
/// size, is that scenario's bits_per_second; each series' line joins its markers; each
/// whisker spans its runs' lowest and highest.
fn check_throughput_chart(page: &str, report: &Value) {
    let d = Drawn::read(page, "throughput-size");
    let unit = title_unit(&d.y_title);
    let y = Scale::new(&numeric(&d.y_ticks), false);
    let sizes: Vec<(f64, u64)> = d.x_ticks.iter().map(|(px, l)| (*px, bytes(l))).collect();
    let mut drawn = Vec::new();
    for c in d.of("circle") {
        let (colour, cx, cy) = (c.colour(), c.num("cx"), c.num("cy"));
        let name = d.series(&colour);
        let size = sizes
            .iter()
            .find(|(px, _)| (px - cx).abs() < 0.5)
            .unwrap_or_else(|| panic!("a marker at x {cx}, at no size tick {sizes:?}"))
            .1;
        let r = named(report, "stream", name, Some(size));
        let what = format!("{name} at {size} bytes");
        y.assert_at(cy, f(r, "/bits_per_second") / unit, &what);
        let stats = &r["statistics"]["bits_per_second"];
        if u(stats, "/runs") >= 2 {
            let whisker: Vec<(f64, f64)> = d
                .marks
                .iter()
                .filter(|n| n.is_line(&colour, "1"))
                .map(Node::points)
                .find(|p| p.len() == 2 && p[0].0 == cx && p[1].0 == cx)
                .unwrap_or_else(|| panic!("no whisker for {what}"));
            let (top, bottom) = (
                whisker[0].1.min(whisker[1].1),
                whisker[0].1.max(whisker[1].1),
            );
            y.assert_at(
                bottom,
                f(stats, "/min") / unit,
                &format!("{what}: lowest run"),
            );
            y.assert_at(
                top,
                f(stats, "/max") / unit,
                &format!("{what}: highest run"),
            );
        }
        drawn.push((name.to_string(), size));
    }
    let mut want: Vec<(String, u64)> = plottable(report, "stream")
        .iter()
        .map(|r| {
            (
                r["transport"].as_str().unwrap().to_string(),
                u(r, "/size_bytes"),
            )
        })
        .collect();
    want.sort();
    drawn.sort();
    assert_eq!(drawn, want, "every scenario drawn once");
    for (colour, name) in &d.legend {
        let mut markers: Vec<(f64, f64)> = d
            .of("circle")
            .filter(|c| &c.colour() == colour)
            .map(|c| (c.num("cx"), c.num("cy")))
            .collect();
        markers.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(
            d.line(colour, "2"),
            markers,
            "{name}'s line joins its markers"
        );
    }
}

/// A figure of a scenario in the JSON, if it has one.
type Figure<'a> = &'a dyn Fn(&Value) -> Option<f64>;

/// A bar chart read back: each bar, named by the label beside it, is as long as the
/// figure `value` of that scenario (in the x axis' unit), and with `spread` (a
/// `statistics` key) its whisker spans the runs' lowest to highest; a scenario without
/// the figure has no bar.
fn check_bars(
    page: &str,
    id: &str,
    report: &Value,
    workload: &str,
    value: Figure<'_>,
    spread: Option<&str>,
) {
    let d = Drawn::read(page, id);
    let unit = title_unit(&d.x_title);
    let x = Scale::new(&numeric(&d.x_ticks), false);
    let mut named_bars = Vec::new();
    for bar in d.of("rect") {
        let middle = bar.num("y") + bar.num("height") / 2.0;
        let (_, name) = d
            .y_ticks
            .iter()
            .find(|(py, _)| (py - middle).abs() <= 1.0)
            .unwrap_or_else(|| panic!("no label beside the bar at {middle}: {:?}", d.y_ticks));
        let r = named(report, workload, name, None);
        x.assert_at(bar.num("x"), 0.0, &format!("{id}: {name} starts at zero"));
        let want =
            value(r).unwrap_or_else(|| panic!("{id}: a bar for {name}, which has no figure"));
        x.assert_at(
            bar.num("x") + bar.num("width"),
            want / unit,
            &format!("{id}: {name}"),
        );
        let whiskers: Vec<Vec<(f64, f64)>> = d
            .marks
            .iter()
            .filter(|n| n.tag == "polyline" && n.attr("stroke-width") == "2")
            .map(Node::points)
            .filter(|p| p.len() == 2 && p[0].1 == p[1].1 && (p[0].1 - middle).abs() <= 1.0)
            .collect();
        match spread.map(|k| &r["statistics"][k]) {
            Some(s) if u(s, "/runs") >= 2 => {
                assert_eq!(whiskers.len(), 1, "{id}: {name}'s whisker");
                let (lo, hi) = (
                    whiskers[0][0].0.min(whiskers[0][1].0),
                    whiskers[0][0].0.max(whiskers[0][1].0),
                );
                x.assert_at(
                    lo,
                    f(s, "/min") / unit,
                    &format!("{id}: {name}'s lowest run"),
                );
                x.assert_at(
                    hi,
                    f(s, "/max") / unit,
                    &format!("{id}: {name}'s highest run"),
                );
            }
            _ => assert!(
                whiskers.is_empty(),
                "{id}: {name} has a whisker but one run"
            ),
        }
        named_bars.push(name.clone());
    }
    let want = plottable(report, workload)
        .into_iter()
        .filter(|r| value(r).is_some())
        .count();
    assert_eq!(
        named_bars.len(),
        want,
        "{id}: one bar per scenario: {named_bars:?}"
    );
}

/// The JSON key of the percentile at `nines` decades along the percentile axis.
const PERCENTILE_KEYS: [&str; 5] = ["min_ns", "p90_ns", "p99_ns", "p99_9_ns", "p99_99_ns"];

/// A percentile chart read back: where each series' curve meets the 0%, 90%, 99%...
/// ticks it reads the JSON's min, p90, p99... of that distribution (`name`). `exact`:
/// one point of the curve sits on each tick (a live run's curve, a point every 0.02
/// decade); else some point at the tick must (a saved report's curve also passes its
/// histogram's bucket bounds, which can round to the same pixel).
fn check_percentiles(page: &str, report: &Value, workload: &str, name: &str, exact: bool) {
    let id = format!("{workload}-{name}-percentiles");
    let d = Drawn::read(page, &id);
    let unit = title_unit(&d.y_title);
    let y = Scale::new(&numeric(&d.y_ticks), d.y_title.contains("log scale"));
    // 0%, 90%, 99%, 99.9%: as many nines as decades along the axis.
    let ticks: Vec<(f64, usize)> = d
        .x_ticks
        .iter()
        .map(|(px, l)| {
            let p: f64 = l.trim_end_matches('%').parse().expect("a percentile");
            let nines = -(1.0 - p / 100.0).log10();
            assert!((nines - nines.round()).abs() < 1e-6, "{id}: a tick at {l}");
            (*px, nines.round() as usize)
        })
        .collect();
    for (colour, series) in &d.legend {
        let r = named(report, workload, series, None);
        let lat = &r["latencies"][name];
        let curve = d.line(colour, "2");
        let mut read = 0;
        for &(px, nines) in ticks.iter().filter(|t| t.1 < PERCENTILE_KEYS.len()) {
            let at: Vec<f64> = curve
                .iter()
                .filter(|p| (p.0 - px).abs() < 0.5)
                .map(|p| p.1)
                .collect();
            // A saved report's curve goes as far as its sample count resolves: it ends at
            // the max, at 1 - 1/count (and at 90% for ten samples or fewer).
            let resolved = u(lat, "/count") as f64 > 10f64.powi(nines as i32);
            let key = if exact || resolved {
                PERCENTILE_KEYS[nines]
            } else {
                "max_ns"
            };
            if at.is_empty() {
                // Too few samples for the curve to reach this tick; a saved report's
                // summary percentile is a point at its own tick whenever its count resolves
                // it (one a pixel off once went unread here).
                assert!(
                    exact || !resolved,
                    "{id}: {series}'s {key}: no point at its tick"
                );
                continue;
            }
            let want = f(lat, &format!("/{key}")) / unit;
            let what = format!("{id}: {series}'s {key}");
            if exact {
                assert_eq!(at.len(), 1, "{what}: {at:?}");
                y.assert_at(at[0], want, &what);
            } else {
                assert!(
                    at.iter().any(|&py| (y.px(want) - py).abs() <= PIXEL),
                    "{what}: the curve reads {:?} at the tick, the JSON has {want}",
                    at.iter().map(|&py| y.value(py)).collect::<Vec<_>>()
                );
            }
            read += 1;
        }
        assert!(read >= 2, "{id}: {series}: 0% and 90% at least ({read})");
    }
    assert_eq!(
        d.legend.len(),
        plottable(report, workload).len(),
        "{id}: a curve per scenario"
    );
}

/// A histogram chart read back: each series' outline has a step per bucket of the
/// JSON's latency_buckets, as high as the bucket's share of the samples and ending at
/// its upper bound.
fn check_histogram(page: &str, report: &Value, workload: &str, name: &str) {
    let id = format!("{workload}-{name}-histogram");
    let d = Drawn::read(page, &id);
    let x = Scale::new(&numeric(&d.x_ticks), true);
    let unit = title_unit(&d.x_title);
    let y = Scale::new(&numeric(&d.y_ticks), false);
    for (colour, series) in &d.legend {
        let r = named(report, workload, series, None);
        let buckets = r["latency_buckets"][name].as_array().expect("buckets");
        let total: u64 = buckets.iter().map(|b| u(b, "/count")).sum();
        let outline = d.line(colour, "2");
        // Up from the floor, then for each bucket along its top to its bound, and down.
        assert_eq!(outline.len(), 2 * buckets.len() + 2, "{id}: {series}");
        let zero = y.px(0.0);
        assert!(
            (outline[0].1 - zero).abs() <= PIXEL
                && (outline[outline.len() - 1].1 - zero).abs() <= PIXEL
        );
        for (k, b) in buckets.iter().enumerate() {
            let (from, to) = (outline[2 * k + 1], outline[2 * k + 2]);
            let what = format!("{id}: {series}'s bucket up to {} ns", u(b, "/le_ns"));
            assert_eq!(from.1, to.1, "{what}: a flat top");
            y.assert_at(to.1, u(b, "/count") as f64 * 100.0 / total as f64, &what);
            x.assert_at(to.0, u(b, "/le_ns") as f64 / unit, &what);
        }
    }
}

/// A table for people: its headers and rows of cells.
#[derive(Debug)]
struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn from_lines(lines: Vec<Vec<String>>) -> Table {
        let mut it = lines.into_iter();
        Table {
            headers: it.next().expect("a header"),
            rows: it.collect(),
        }
    }
}

/// The tables of a terminal (box-drawn) or Markdown text, in order.
fn text_tables(text: &str) -> Vec<Table> {
    let mut tables = Vec::new();
    let mut lines: Vec<Vec<String>> = Vec::new();
    for line in text.lines().map(str::trim) {
        let cells: Vec<String> = if line.starts_with('│') {
            line.trim_matches('│')
                .split(['│', '┆'])
                .map(|c| c.trim().to_string())
                .collect()
        } else if line.starts_with('|') {
            line.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        } else if line.starts_with(['┌', '╞', '├', '└']) {
            continue; // a box-drawn table's rules
        } else {
            if !lines.is_empty() {
                tables.push(Table::from_lines(std::mem::take(&mut lines)));
            }
            continue;
        };
        // Markdown's alignment line.
        if !cells
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            lines.push(cells);
        }
    }
    if !lines.is_empty() {
        tables.push(Table::from_lines(lines));
    }
    tables
}

/// The tables of an HTML page.
fn html_tables(page: &str) -> Vec<Table> {
    let cells = |row: &str, tag: &str| -> Vec<String> {
        row.split(&format!("<{tag}"))
            .skip(1)
            .map(|c| {
                let body = c.split_once('>').unwrap().1;
                unescape(body.split_once(&format!("</{tag}>")).unwrap().0)
            })
            .collect()
    };
    page.split("<table>")
        .skip(1)
        .map(|t| {
            let t = t.split_once("</table>").unwrap().0;
            let rows = t.split("<tr>").skip(1);
            Table::from_lines(
                rows.map(|r| {
                    let th = cells(r, "th");
                    if th.is_empty() {
                        cells(r, "td")
                    } else {
                        th
                    }
                })
                .collect(),
            )
        })
        .collect()
}

/// A figure as a table prints it, in base units (bit/s, bytes, B/s, per second, ns, %),
/// with half its last printed digit, the most its rounding may have moved it:
/// `1.79 Gbit/s` -> (1.79e9, 0.005e9).
fn reading(cell: &str) -> (f64, f64) {
    let cell = cell.trim();
    let end = cell
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(cell.len());
    let (number, unit) = (&cell[..end], cell[end..].trim());
    let value: f64 = number
        .parse()
        .unwrap_or_else(|_| panic!("no number in the cell {cell:?}"));
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let scale = if unit.is_empty() || unit == "%" {
        1.0
    } else if let Some(prefix) = unit.strip_suffix("bit/s") {
        si(prefix)
    } else if let Some(prefix) = unit.strip_suffix("B/s") {
        binary(prefix)
    } else if let Some(prefix) = unit.strip_suffix("/s") {
        si(prefix)
    } else if let Some(prefix) = unit.strip_suffix('B') {
        binary(prefix)
    } else {
        ns_per(unit)
    };
    (value * scale, 0.5 * 10f64.powi(-decimals) * scale)
}

/// The cell shows `want` (in base units), rounded as printed (`slack` more for a figure
/// cut before it was rounded).
fn assert_cell(cell: &str, want: f64, slack: f64, what: &str) {
    let (read, half) = reading(cell);
    assert!(
        (read - want).abs() <= half * (1.0 + 1e-9) + slack,
        "{what}: the cell {cell:?} reads {read}, the JSON has {want}"
    );
}

/// A cell that is a count, or `-` for none.
fn assert_count(cell: &str, want: &Value, what: &str) {
    match want.as_u64() {
        Some(n) => assert_eq!(cell, n.to_string(), "{what}"),
        None => assert_eq!(cell, "-", "{what}: the JSON has {want}"),
    }
}

/// A throughput cell in bits, bytes or both (`1.79 Gbit/s (214 MiB/s)`).
fn assert_throughput(cell: &str, bits_per_second: f64, what: &str) {
    let (first, second) = match cell.split_once(" (") {
        Some((a, b)) => (a, Some(b.trim_end_matches(')'))),
        None => (cell, None),
    };
    for part in std::iter::once(first).chain(second) {
        let want = if part.ends_with("bit/s") {
            bits_per_second
        } else {
            bits_per_second / 8.0
        };
        assert_cell(part, want, 0.0, what);
    }
}

/// The run whose throughput is the median, the lower middle for an even count (what the
/// table's per-run cells describe).
fn median_run(r: &Value) -> &Value {
    let mut runs: Vec<&Value> = r["runs"].as_array().unwrap().iter().collect();
    runs.sort_by(|a, b| f(a, "/bits_per_second").total_cmp(&f(b, "/bits_per_second")));
    runs[(runs.len() - 1) / 2]
}

/// The median of some figures (the mean of the middle two for an even count).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// A table of one row per scenario (`--wide`, or the page's) read back: the row's
/// scenario from its transport, engine and size, then every other cell against the
/// JSON. A column this test does not know fails it: say which JSON value it shows.
fn check_rows(t: &Table, report: &Value, workload: &str) {
    assert_eq!(
        t.rows.len(),
        results(report, workload).len(),
        "a row per scenario: {t:?}"
    );
    let col = |row: &[String], h: &str| -> Option<String> {
        t.headers
            .iter()
            .position(|x| x == h)
            .map(|i| row[i].clone())
    };
    for row in &t.rows {
        let name = match col(row, "engine") {
            Some(e) => format!("{} {} ({e})", row[0], col(row, "size").unwrap()),
            None => format!("{} {}", row[0], col(row, "size").unwrap()),
        };
        let r = named(report, workload, &name, None);
        let run = median_run(r);
        let tcp = &run["tcp"];
        let lat = &r["latencies"]["round_trip"];
        for (h, cell) in t.headers.iter().zip(row) {
            let what = format!("{name}: {h}");
            let pct = |v: f64| v * 100.0;
            match h.as_str() {
                // What names the row (the size read back is the JSON's by the lookup).
                "transport" | "engine" | "size" => {}
                "throughput" => assert_throughput(cell, f(r, "/bits_per_second"), &what),
                "±CV" => match r["statistics"]["bits_per_second"]["cv"].as_f64() {
                    Some(cv) => assert_cell(cell, pct(cv), 0.0, &what),
                    None => assert_eq!(cell, "-", "{what}"),
                },
                "messages/s" | "round trips/s" => {
                    assert_cell(cell, f(r, "/messages_per_second"), 0.0, &what)
                }
                "retr" => assert_count(cell, &r["tcp_retransmits"], &what),
                "cwnd" => match tcp["snd_cwnd_bytes_max"].as_u64() {
                    Some(b) => assert_cell(cell, b as f64, 0.0, &what),
                    None => assert_eq!(cell, "-", "{what}"),
                },
                "srtt" => match tcp["srtt_us_mean"].as_u64() {
                    Some(0) => assert_eq!(cell, "<1 µs", "{what}"),
                    Some(us) => assert_cell(cell, us as f64 * 1e3, 0.0, &what),
                    None => assert_eq!(cell, "-", "{what}"),
                },
                "CPU snd/rcv" => {
                    let (s, v) = cell.split_once('/').expect("SND/RCV");
                    assert_cell(s, pct(f(run, "/sender/cpu_utilization")), 0.0, &what);
                    assert_cell(v, pct(f(run, "/receiver/cpu_utilization")), 0.0, &what);
                }
                "CPU s/GB snd+rcv" => assert_cell(
                    cell,
                    f(r, "/sender_cpu_seconds_per_gb") + f(r, "/receiver_cpu_seconds_per_gb"),
                    0.0,
                    &what,
                ),
                "RTT min" => assert_cell(cell, f(lat, "/min_ns"), 0.0, &what),
                "RTT p50" => assert_cell(cell, f(lat, "/p50_ns"), 0.0, &what),
                "RTT p90" => assert_cell(cell, f(lat, "/p90_ns"), 0.0, &what),
                "RTT p99" => assert_cell(cell, f(lat, "/p99_ns"), 0.0, &what),
                "RTT p99.9" => assert_cell(cell, f(lat, "/p99_9_ns"), 0.0, &what),
                "RTT max" => assert_cell(cell, f(lat, "/max_ns"), 0.0, &what),
                // Whole nanoseconds, cut before they are printed.
                "CPU/op" => {
                    assert_cell(cell, f(r, "/cpu_seconds_per_round_trip") * 1e9, 1.0, &what)
                }
                "lost" => match r["messages_lost"].as_u64() {
                    Some(lost) => {
                        let (n, share) = cell.split_once(" (").expect("N (P%)");
                        assert_eq!(n, lost.to_string(), "{what}");
                        let sent = f(r, "/messages_sent");
                        assert_cell(
                            share.trim_end_matches(')'),
                            lost as f64 * 100.0 / sent,
                            0.0,
                            &what,
                        );
                    }
                    None => assert_eq!(cell, "-", "{what}"),
                },
                "reordered/dup" => match (
                    r["messages_reordered"].as_u64(),
                    r["messages_duplicated"].as_u64(),
                ) {
                    (Some(a), Some(b)) => assert_eq!(cell, &format!("{a}/{b}"), "{what}"),
                    _ => assert_eq!(cell, "-", "{what}"),
                },
                "req/reply/late" => match r["messages_lost"].as_u64() {
                    Some(_) => {
                        let want: Vec<String> = ["requests_lost", "replies_lost", "replies_late"]
                            .iter()
                            .map(|k| r[k].to_string())
                            .collect();
                        assert_eq!(cell, &want.join("/"), "{what}");
                    }
                    None => assert_eq!(cell, "-", "{what}"),
                },
                other => panic!(
                    "a column this test does not read: {other:?} (say which JSON value it shows)"
                ),
            }
        }
    }
}

/// A sweep's pivot read back: a row per transport, a column per size, each cell that
/// scenario's throughput; every scenario in one cell.
fn check_pivot(t: &Table, report: &Value) {
    assert_eq!(t.headers[0], "transport", "{t:?}");
    let mut cells = 0;
    for row in &t.rows {
        for (size, cell) in t.headers[1..].iter().zip(&row[1..]) {
            if cell == "n/a" {
                // The suite's cell for a combination it left out, with its reason.
                let skipped = report["body"]["skipped"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| {
                        k["workload"] == "stream"
                            && k["transport"] == row[0].as_str()
                            && k["size_bytes"] == bytes(size)
                    });
                assert!(skipped, "{} {size}: n/a but not skipped", row[0]);
                continue;
            }
            let r = named(report, "stream", &row[0], Some(bytes(size)));
            assert_throughput(
                cell,
                f(r, "/bits_per_second"),
                &format!("{} {size}", row[0]),
            );
            cells += 1;
        }
    }
    assert_eq!(cells, results(report, "stream").len(), "{t:?}");
}

#[test]
fn a_stream_sweep_draws_throughput_against_size_and_opens_in_a_browser() {
    let sb = Sandbox::new();
    let page = run_page(
        &sb,
        "stream.html",
        &[
            "stream",
            "-t",
            "tcp,unix",
            "-s",
            "1K,16K,64K",
            "-d",
            "0.2",
            "-w",
            "0",
        ],
    );
    assert_self_contained(&page);
    assert_eq!(chart_ids(&page), ["throughput-size"]);
    let chart = svg(&page, "throughput-size");
    for text in [
        "throughput (Gbit/s)",
        "message size (bytes, log scale)",
        "1 KiB",
        "16 KiB",
        "64 KiB",
    ] {
        assert!(chart.contains(text), "{text} missing");
    }
    assert!(!chart.contains("#0A0B0C"), "the ink follows the theme");
    // Two series (tcp, unix), a point per size each.
    assert_eq!(chart.matches("<circle").count(), 6);
    assert!(page.contains("<dt>kernel</dt>"));
    assert!(page.contains("<h2 id=\"tables\">Tables</h2>"));
    let path = sb.path().join("stream.html");
    check_in_browser(
        &sb,
        &path,
        &chart_ids(&page),
        &["throughput (Gbit/s)", "message size (bytes, log scale)"],
    );
    check_screenshots(&sb, &path);
}

/// What a run printed on stdout, and its JSON report and HTML page (exported by the same
/// run).
fn run_exported(sb: &Sandbox, args: &[&str]) -> (String, Value, String) {
    let (json, html) = (sb.path().join("run.json"), sb.path().join("run.html"));
    let out = sb
        .sockbench()
        .args(args)
        .args(["-q", "--export-json"])
        .arg(&json)
        .arg("--export-html")
        .arg(&html)
        .output()
        .unwrap();
    assert_success(&out);
    (
        String::from_utf8(out.stdout).unwrap(),
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap(),
        std::fs::read_to_string(&html).unwrap(),
    )
}

/// `sockbench report run.json ARGS`: what it printed.
fn report_of(sb: &Sandbox, args: &[&str]) -> String {
    let out = sb
        .sockbench()
        .arg("report")
        .arg(sb.path().join("run.json"))
        .args(args)
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_stream_sweeps_chart_and_tables_show_the_figures_of_its_json_report() {
    let sb = Sandbox::new();
    let md = sb.path().join("run.md");
    let (stdout, report, page) = run_exported(
        &sb,
        &[
            "stream",
            "-t",
            "tcp,unix",
            "-s",
            "1K,64K",
            "--runs",
            "3",
            "-d",
            "0.1",
            "-w",
            "0",
            "--format",
            "table",
            "--export-markdown",
            md.to_str().unwrap(),
        ],
    );
    let all = results(&report, "stream");
    assert_eq!(all.len(), 4);
    // The headline is the median run (computed here from each run's figure), not the
    // mean: what every chart and table below must show.
    for r in &all {
        let runs: Vec<f64> = r["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| f(run, "/bits_per_second"))
            .collect();
        assert_eq!(runs.len(), 3);
        assert_eq!(f(r, "/bits_per_second"), median(runs), "{r}");
    }
    // The chart, as written and as the browser parsed it.
    check_throughput_chart(&page, &report);
    if let Some(tool) = chromium() {
        let dom = open(&sb, tool, &sb.path().join("run.html")).dom;
        check_throughput_chart(&dom, &report);
    }
    // The sweep's pivot on the terminal and in Markdown.
    for text in [stdout, std::fs::read_to_string(&md).unwrap()] {
        let tables = text_tables(&text);
        assert_eq!(tables.len(), 1, "{text}");
        check_pivot(&tables[0], &report);
    }
    // One row per scenario with every column: on the page, and the saved report's wide
    // tables, in bits and bytes.
    let tables = html_tables(&page);
    assert_eq!(tables.len(), 1);
    check_rows(&tables[0], &report, "stream");
    for args in [
        &["--format", "table", "--wide"][..],
        &["--format", "markdown", "--wide", "--units", "both"][..],
    ] {
        let text = report_of(&sb, args);
        let tables = text_tables(&text);
        assert_eq!(tables.len(), 1, "{args:?}: {text}");
        check_rows(&tables[0], &report, "stream");
    }
}

#[test]
fn pingpong_draws_percentiles_and_a_histogram_live_and_from_a_saved_report() {
    let sb = Sandbox::new();
    let json = sb.path().join("pingpong.json");
    let page = run_page(
        &sb,
        "pingpong.html",
        &[
            "pingpong",
            "-t",
            "tcp,udp",
            "-d",
            "0.2",
            "-w",
            "0",
            "--export-json",
            json.to_str().unwrap(),
        ],
    );
    assert_self_contained(&page);
    let ids = [
        "pingpong-rate",
        "pingpong-round_trip-percentiles",
        "pingpong-round_trip-histogram",
    ];
    assert_eq!(chart_ids(&page), ids);
    let pct = svg(&page, "pingpong-round_trip-percentiles");
    for tick in ["0%", "90%", "99%", "99.9%"] {
        assert!(pct.contains(&format!("\n{tick}\n")), "tick {tick} missing");
    }
    assert!(pct.contains("percentile (log scale of 1/(1-p))"));
    assert!(pct.contains("latency (µs") || pct.contains("latency (ms"));
    assert!(page.contains("from the full HDR histograms"));
    let hist = svg(&page, "pingpong-round_trip-histogram");
    assert!(hist.contains("share of samples (%)"));
    assert!(hist.contains("log scale)"));
    // tcp and udp each have a line in both latency charts.
    for id in &ids[1..] {
        assert_eq!(
            svg(&page, id)
                .matches("<polyline fill=\"none\" opacity=\"1\" stroke=\"#")
                .count(),
            2
        );
    }
    let path = sb.path().join("pingpong.html");
    let dom = check_in_browser(&sb, &path, &chart_ids(&page), &["share of samples (%)"]);
    // Every chart reads back as the JSON's figures, as written and as the browser parsed
    // it; so does every cell of the page's table.
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for p in std::iter::once(&page).chain(&dom) {
        check_pingpong_charts(p, &report, true);
    }
    let tables = html_tables(&page);
    assert_eq!(tables.len(), 1);
    check_rows(&tables[0], &report, "pingpong");

    // The saved report has no full histograms: the same charts, from its summary.
    let again = report_page(&sb, &json);
    assert_self_contained(&again);
    assert_eq!(chart_ids(&again), ids);
    assert!(again.contains("from the report&#39;s summary percentiles"));
    let saved = sb.path().join("saved.html");
    std::fs::write(&saved, &again).unwrap();
    let dom = check_in_browser(
        &sb,
        &saved,
        &chart_ids(&again),
        &["percentile (log scale of 1/(1-p))"],
    );
    for p in std::iter::once(&again).chain(&dom) {
        check_pingpong_charts(p, &report, false);
    }
}

/// A pingpong page's charts read back: round trips per second, and the round trip's
/// percentiles (`exact`: from full histograms) and histogram.
fn check_pingpong_charts(page: &str, report: &Value, exact: bool) {
    let rate = |r: &Value| r["messages_per_second"].as_f64();
    check_bars(
        page,
        "pingpong-rate",
        report,
        "pingpong",
        &rate,
        Some("messages_per_second"),
    );
    check_percentiles(page, report, "pingpong", "round_trip", exact);
    check_histogram(page, report, "pingpong", "round_trip");
}

#[test]
fn a_saved_suite_renders_every_workload_chart_and_table() {
    let sb = Sandbox::new();
    let json = sb.path().join("suite.json");
    let out = sb
        .sockbench()
        .args([
            "suite",
            "-t",
            "unix,udp",
            "-d",
            "0.1",
            "-w",
            "0",
            "-q",
            "--export-json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert_success(&out);
    let page = report_page(&sb, &json);
    assert_self_contained(&page);
    assert_eq!(
        chart_ids(&page),
        [
            "throughput-size",
            "pingpong-rate",
            "pingpong-round_trip-percentiles",
            "pingpong-round_trip-histogram",
            "rate-rate",
            "rate-loss"
        ]
    );
    // The suite's three tables, as the Markdown exporter titles them.
    assert!(page.contains("<h3>Throughput: one-way stream</h3>"));
    assert_eq!(page.matches("<table>").count(), 3);
    // udp cannot carry 64 KiB: left out, said so.
    assert!(page.contains("<h3>Left out</h3>"));
    let path = sb.path().join("suite.html");
    std::fs::write(&path, &page).unwrap();
    let dom = check_in_browser(
        &sb,
        &path,
        &chart_ids(&page),
        &["throughput (", "latency ("],
    );
    // Every chart and every table cell reads back as the saved report's figures.
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rate = |r: &Value| r["messages_per_second"].as_f64();
    let lost = |r: &Value| Some((1.0 - r["delivered_fraction"].as_f64()?) * 100.0);
    for p in std::iter::once(&page).chain(&dom) {
        check_throughput_chart(p, &report);
        check_pingpong_charts(p, &report, false);
        check_bars(
            p,
            "rate-rate",
            &report,
            "rate",
            &rate,
            Some("messages_per_second"),
        );
        check_bars(p, "rate-loss", &report, "rate", &lost, None);
    }
    let tables = html_tables(&page);
    check_pivot(&tables[0], &report);
    check_rows(&tables[1], &report, "pingpong");
    check_rows(&tables[2], &report, "rate");
}

#[test]
fn rate_draws_message_rate_and_loss() {
    let sb = Sandbox::new();
    let json = sb.path().join("rate.json");
    let page = run_page(
        &sb,
        "rate.html",
        &[
            "rate",
            "-t",
            "udp,unix-dgram",
            "-d",
            "0.2",
            "-w",
            "0",
            "--export-json",
            json.to_str().unwrap(),
        ],
    );
    assert_self_contained(&page);
    assert_eq!(chart_ids(&page), ["rate-rate", "rate-loss"]);
    assert!(svg(&page, "rate-rate").contains("messages per second ("));
    assert!(svg(&page, "rate-loss").contains("lost (% of messages sent)"));
    let dom = check_in_browser(
        &sb,
        &sb.path().join("rate.html"),
        &chart_ids(&page),
        &["lost (% of messages sent)"],
    );
    // The bars read back as the JSON's rates and losses (unix-dgram cannot lose: its
    // loss bar is no bar, and the caption says why).
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rate = |r: &Value| r["messages_per_second"].as_f64();
    let lost = |r: &Value| Some((1.0 - r["delivered_fraction"].as_f64()?) * 100.0);
    for p in std::iter::once(&page).chain(&dom) {
        check_bars(
            p,
            "rate-rate",
            &report,
            "rate",
            &rate,
            Some("messages_per_second"),
        );
        check_bars(p, "rate-loss", &report, "rate", &lost, None);
    }
}

#[test]
fn connect_draws_each_of_its_four_distributions() {
    let sb = Sandbox::new();
    let page = run_page(
        &sb,
        "connect.html",
        &[
            "connect",
            "-t",
            "tcp",
            "-d",
            "0.2",
            "-w",
            "0",
            "--export-json",
            sb.path().join("connect.json").to_str().unwrap(),
        ],
    );
    assert_self_contained(&page);
    let ids = chart_ids(&page);
    assert_eq!(ids[0], "connect-rate");
    for name in ["connect", "accept", "first_response", "close"] {
        for kind in ["percentiles", "histogram"] {
            let id = format!("connect-{name}-{kind}");
            assert!(ids.contains(&id), "{id} missing from {ids:?}");
        }
    }
    assert_eq!(ids.len(), 9);
    assert!(svg(&page, "connect-rate").contains("connections per second ("));
    let dom = check_in_browser(
        &sb,
        &sb.path().join("connect.html"),
        &ids,
        &["share of samples (%)"],
    );
    // Every chart reads back as the JSON's figures.
    let report: Value =
        serde_json::from_slice(&std::fs::read(sb.path().join("connect.json")).unwrap()).unwrap();
    let rate = |r: &Value| r["messages_per_second"].as_f64();
    for p in std::iter::once(&page).chain(&dom) {
        check_bars(
            p,
            "connect-rate",
            &report,
            "connect",
            &rate,
            Some("messages_per_second"),
        );
        for name in ["connect", "accept", "first_response", "close"] {
            check_percentiles(p, &report, "connect", name, true);
            check_histogram(p, &report, "connect", name);
        }
    }
}

#[test]
fn engines_side_by_side_get_bars_with_whiskers_over_three_runs() {
    let sb = Sandbox::new();
    let page = run_page(
        &sb,
        "engines.html",
        &[
            "stream",
            "-t",
            "tcp",
            "-s",
            "16K",
            "--engine",
            "blocking,epoll",
            "--runs",
            "3",
            "-d",
            "0.2",
            "-w",
            "0",
            "--export-json",
            sb.path().join("engines.json").to_str().unwrap(),
        ],
    );
    assert_self_contained(&page);
    assert_eq!(chart_ids(&page), ["throughput-bars"]);
    let bars = svg(&page, "throughput-bars");
    assert!(bars.contains("tcp 16 KiB (blocking)"));
    assert!(bars.contains("tcp 16 KiB (epoll)"));
    assert!(bars.contains("throughput ("));
    // Two bars, each with a whisker and its two end caps.
    assert_eq!(bars.matches("<rect").count(), 2);
    assert!(page.contains("whiskers: the lowest to the highest run"));
    let dom = check_in_browser(
        &sb,
        &sb.path().join("engines.html"),
        &chart_ids(&page),
        &["(epoll)"],
    );
    // Each bar is its engine's median run, its whisker the lowest to the highest.
    let report: Value =
        serde_json::from_slice(&std::fs::read(sb.path().join("engines.json")).unwrap()).unwrap();
    let bps = |r: &Value| r["bits_per_second"].as_f64();
    for p in std::iter::once(&page).chain(&dom) {
        check_bars(
            p,
            "throughput-bars",
            &report,
            "stream",
            &bps,
            Some("bits_per_second"),
        );
    }
}

#[test]
fn format_html_prints_the_page_on_stdout() {
    let sb = Sandbox::new();
    let out = sb
        .sockbench()
        .args([
            "stream", "-t", "unix", "-d", "0.1", "-w", "0", "-q", "--format", "html",
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let page = String::from_utf8(out.stdout).unwrap();
    assert_self_contained(&page);
    assert_eq!(chart_ids(&page), ["throughput-bars"]);
}

#[test]
fn a_report_without_results_still_makes_a_page_that_says_so() {
    let sb = Sandbox::new();
    let json = sb.path().join("r.json");
    let out = sb
        .sockbench()
        .args([
            "stream",
            "-t",
            "unix",
            "-n",
            "100",
            "-w",
            "0",
            "-q",
            "--export-json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert_success(&out);
    let mut report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    report["body"]["results"] = serde_json::json!([]);
    report["command"] = serde_json::json!(["sockbench", "stream", "--note", "<a & b>"]);
    std::fs::write(&json, serde_json::to_vec(&report).unwrap()).unwrap();
    let page = report_page(&sb, &json);
    assert_self_contained(&page);
    assert!(page.contains("No results"));
    assert!(chart_ids(&page).is_empty());
    assert!(
        page.contains("&lt;a &amp; b&gt;"),
        "the command line is escaped"
    );
    let path = sb.path().join("empty.html");
    std::fs::write(&path, &page).unwrap();
    check_in_browser(&sb, &path, &[], &["No results"]);
}

#[test]
fn models_export_html_draws_requests_per_second_and_latency_per_model() {
    let sb = Sandbox::new();
    let page = run_page(
        &sb,
        "models.html",
        &["models", "--model", "thread,epoll", "-n", "200", "-c", "2"],
    );
    assert_self_contained(&page);
    assert_eq!(chart_ids(&page), ["models-rate", "models-latency"]);
    let rate = svg(&page, "models-rate");
    assert!(rate.contains("requests per second ("));
    for model in ["thread", "epoll"] {
        assert!(rate.contains(&format!("\n{model}\n")), "{model} missing");
    }
    let latency = svg(&page, "models-latency");
    assert!(latency.contains("latency ("));
    assert!(latency.contains("\nepoll p99\n"));
    assert!(page.contains("<td>thread</td>"));
    check_in_browser(
        &sb,
        &sb.path().join("models.html"),
        &chart_ids(&page),
        &["requests per second ("],
    );
}

/// Every export, as every command (issue 30): a models run writes its rows as CSV,
/// Markdown and OpenMetrics too.
#[test]
fn models_writes_every_export() {
    let sb = Sandbox::new();
    for (flag, says) in [
        ("--export-csv", "model,"),
        ("--export-markdown", "| thread |"),
        (
            "--export-openmetrics",
            "sockbench_models_requests_per_second{model=\"thread\"}",
        ),
    ] {
        let path = sb.path().join("x");
        let out = sb
            .sockbench()
            .args([
                "models", "--model", "thread", "-n", "10", "-c", "1", "-q", flag,
            ])
            .arg(&path)
            .output()
            .unwrap();
        assert_success(&out);
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.contains(says), "{flag}: {written}");
        std::fs::remove_file(&path).unwrap();
    }
}
