//! The HTML report end to end: small real runs of every workload write `--export-html`,
//! `report saved.json --format html` renders a saved report, and the page is checked in
//! Rust (self-contained, balanced SVG, the expected charts with their axis labels) and
//! then opened in a real browser, headless chromium: no console message, the charts in
//! the DOM after the page's script ran, and screenshots in the light and the dark theme
//! that show the charts' colours on the right background.
//!
//! The browser checks skip, saying so, only when chromium is not installed
//! (`apt-get install chromium` on Debian).

mod common;

use std::path::{Path, PathBuf};

use common::{assert_success, browser, chromium, Sandbox};

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
/// the page holds is in the DOM with its axis titles.
fn check_in_browser(sb: &Sandbox, page_path: &Path, ids: &[String], axis_titles: &[&str]) {
    let Some(tool) = chromium() else {
        return;
    };
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
    check_in_browser(&sb, &path, &chart_ids(&page), &["share of samples (%)"]);

    // The saved report has no full histograms: the same charts, from its summary.
    let again = report_page(&sb, &json);
    assert_self_contained(&again);
    assert_eq!(chart_ids(&again), ids);
    assert!(again.contains("from the report&#39;s summary percentiles"));
    let saved = sb.path().join("saved.html");
    std::fs::write(&saved, &again).unwrap();
    check_in_browser(
        &sb,
        &saved,
        &chart_ids(&again),
        &["percentile (log scale of 1/(1-p))"],
    );
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
    check_in_browser(
        &sb,
        &path,
        &chart_ids(&page),
        &["throughput (", "latency ("],
    );
}

#[test]
fn rate_draws_message_rate_and_loss() {
    let sb = Sandbox::new();
    let page = run_page(
        &sb,
        "rate.html",
        &["rate", "-t", "udp", "-d", "0.2", "-w", "0"],
    );
    assert_self_contained(&page);
    assert_eq!(chart_ids(&page), ["rate-rate", "rate-loss"]);
    assert!(svg(&page, "rate-rate").contains("messages per second ("));
    assert!(svg(&page, "rate-loss").contains("lost (% of messages sent)"));
    check_in_browser(
        &sb,
        &sb.path().join("rate.html"),
        &chart_ids(&page),
        &["lost (% of messages sent)"],
    );
}

#[test]
fn connect_draws_each_of_its_four_distributions() {
    let sb = Sandbox::new();
    let page = run_page(
        &sb,
        "connect.html",
        &["connect", "-t", "tcp", "-d", "0.2", "-w", "0"],
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
    check_in_browser(
        &sb,
        &sb.path().join("connect.html"),
        &ids,
        &["share of samples (%)"],
    );
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
    check_in_browser(
        &sb,
        &sb.path().join("engines.html"),
        &chart_ids(&page),
        &["(epoll)"],
    );
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
    report["results"] = serde_json::json!([]);
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

#[test]
fn models_refuses_the_table_exports_it_has_no_rows_for() {
    let sb = Sandbox::new();
    for flag in ["--export-csv", "--export-markdown", "--export-openmetrics"] {
        let out = sb
            .sockbench()
            .args(["models", "--model", "thread", "-n", "10", "-c", "1", flag])
            .arg(sb.path().join("x"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--export-html PATH"), "{flag}: {err}");
        assert!(!sb.path().join("x").exists());
    }
}
