//! The mesh's HTML page end to end: three agents on 127.0.0.1, `sockbench mesh
//! --export-html` beside `--format json`, the page checked in Rust (self-contained, one
//! heat map per figure of the JSON) and then opened in headless chromium with every
//! host name resolving nowhere: no request of the page's in chromium's net log (a
//! control page with a remote image shows the check would see one), no console
//! message, the heat maps in the rendered DOM with a number in every off-diagonal cell,
//! and a screenshot that shows the scale's colours.
//!
//! The browser checks skip, saying so, only when chromium is not installed
//! (`apt-get install chromium` on Debian).

use std::path::Path;
use std::process::Command;

use crate::common::{chromium, Sandbox};
use serde_json::Value;

/// Agents in the mesh.
const HOSTS: usize = 3;

/// Headless chromium (see `crate::common::browser`) with every host name mapped to nothing and
/// no proxy: nothing leaves the machine, whatever a page asks for.
fn browser(sb: &Sandbox, tool: &str, profile: &str) -> Command {
    let mut c = crate::common::browser(sb, tool, profile);
    c.arg("--host-resolver-rules=MAP * ~NOTFOUND")
        .arg("--no-proxy-server");
    c
}

fn url(page: &Path) -> String {
    format!("file://{}", page.display())
}

/// What chromium made of a page.
struct Opened {
    /// The DOM as rendered.
    dom: String,
    /// Console messages the page produced.
    console: Vec<String>,
    /// The URLs the page asked the network for, from chromium's net log: the requests
    /// whose network isolation key is the page's (`file://`), not the browser's own
    /// background requests.
    fetched: Vec<String>,
}

/// Open `page` (a profile of its own named `profile`) and dump its DOM.
fn open(sb: &Sandbox, tool: &str, page: &Path, profile: &str) -> Opened {
    let net_log = sb.path().join(format!("{profile}.netlog"));
    let out = browser(sb, tool, profile)
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("--log-net-log={}", net_log.display()))
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
    // One event a line; a request's event names its URL beside its isolation key.
    let log = std::fs::read_to_string(&net_log).expect("chromium wrote its net log");
    let fetched = log
        .lines()
        .filter(|l| l.contains("\"network_isolation_key\":\"file://"))
        .filter_map(|l| {
            let rest = &l[l.find("\"url\":\"")? + 7..];
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect();
    Opened {
        dom: String::from_utf8(out.stdout).unwrap(),
        console,
        fetched,
    }
}

/// A screenshot of `page`, 1200 pixels wide, as RGB pixels.
fn screenshot(sb: &Sandbox, tool: &str, page: &Path) -> Vec<[u8; 3]> {
    let png_path = sb.path().join("mesh.png");
    let out = browser(sb, tool, "profile-shot")
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
    let bytes = std::fs::read(&png_path).expect("a screenshot");
    let mut decoder = png::Decoder::new(bytes.as_slice());
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| match channels {
            1 | 2 => [p[0]; 3],
            _ => [p[0], p[1], p[2]],
        })
        .collect()
}

/// Pixels within a small distance of `rgb`.
fn near(pixels: &[[u8; 3]], rgb: [u8; 3]) -> usize {
    pixels
        .iter()
        .filter(|p| (0..3).all(|i| p[i].abs_diff(rgb[i]) <= 12))
        .count()
}

/// The heat maps of a page or DOM: (test, figure, rows of (cell class, cell text)).
type HeatMap = (String, String, Vec<Vec<(String, String)>>);

fn heat_maps(html: &str) -> Vec<HeatMap> {
    let attr = |tag: &str, name: &str| -> String {
        let key = format!("{name}=\"");
        tag.find(&key)
            .map(|i| {
                let rest = &tag[i + key.len()..];
                rest[..rest.find('"').unwrap()].to_string()
            })
            .unwrap_or_default()
    };
    html.split("<table class=\"heat\"")
        .skip(1)
        .map(|rest| {
            let table = &rest[..rest.find("</table>").unwrap()];
            let tag = &table[..table.find('>').unwrap()];
            let body = &table[table.find("<tbody>").expect("a tbody")..];
            let rows = body
                .split("<tr>")
                .skip(1)
                .map(|row| {
                    row.split("<td")
                        .skip(1)
                        .map(|cell| {
                            let tag_end = cell.find('>').unwrap();
                            let text_end = cell.find("</td>").unwrap();
                            (
                                attr(&cell[..tag_end], "class"),
                                cell[tag_end + 1..text_end].to_string(),
                            )
                        })
                        .collect()
                })
                .collect();
            (attr(tag, "data-test"), attr(tag, "data-figure"), rows)
        })
        .collect()
}

/// Every off-diagonal cell holds a number with its unit, the diagonal is blank.
fn assert_all_measured(maps: &[HeatMap], where_: &str) {
    for (test, figure, rows) in maps {
        assert_eq!(rows.len(), HOSTS, "{test} {figure} rows ({where_})");
        for (s, row) in rows.iter().enumerate() {
            assert_eq!(row.len(), HOSTS, "{test} {figure} row {s} ({where_})");
            for (d, (class, text)) in row.iter().enumerate() {
                if s == d {
                    assert_eq!(
                        (class.as_str(), text.as_str()),
                        ("diagonal", ""),
                        "{where_}"
                    );
                    continue;
                }
                assert_eq!(class, "value", "{test} {figure} {s}->{d} ({where_})");
                let number = text.split(' ').next().unwrap().trim_end_matches('%');
                assert!(
                    number.parse::<f64>().is_ok_and(f64::is_finite),
                    "{test} {figure} {s}->{d}: {text:?} ({where_})"
                );
            }
        }
    }
}

#[test]
fn the_mesh_page_has_a_heat_map_per_figure_and_renders_in_a_browser_offline() {
    let sb = Sandbox::new();
    let mut agents = crate::common::Agents::start(&sb, HOSTS, &[]);
    let hosts = agents.list();
    let page_path = sb.path().join("mesh.html");
    let out = sb
        .sockbench()
        .args([
            "mesh",
            "--hosts",
            &hosts,
            "--tests",
            "tcp-pingpong",
            "-d",
            "0.2s",
            "-w",
            "0s",
            "--export-html",
        ])
        .arg(&page_path)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    // `--format html` prints the same page on stdout.
    let printed = sb
        .sockbench()
        .args([
            "mesh",
            "--hosts",
            &hosts,
            "--tests",
            "tcp-pingpong",
            "-d",
            "0.2s",
            "-w",
            "0s",
            "--format",
            "html",
            "-q",
        ])
        .output()
        .unwrap();
    agents.stop();
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let printed = String::from_utf8(printed.stdout).unwrap();
    assert!(printed.starts_with("<!DOCTYPE html>"), "{printed}");
    assert_all_measured(&heat_maps(&printed), "--format html");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc["body"]["failed"], 0, "{doc}");
    let figures: Vec<(String, String)> = doc["body"]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["test"].as_str().unwrap().to_string(),
                f["figure"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        figures.contains(&("tcp-pingpong".into(), "round_trip_p50_ns".into())),
        "{figures:?}"
    );
    assert!(figures.contains(&("tcp-pingpong".into(), "round_trip_p99_ns".into())));

    // The page as written: self-contained, a heat map per figure of the JSON.
    let page = std::fs::read_to_string(&page_path).expect("the page was written");
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    for needle in [
        "src=",
        "href=\"http",
        "url(",
        "@import",
        "<link",
        "<iframe",
        "<script src",
    ] {
        assert!(
            !page.contains(needle),
            "the page refers elsewhere: {needle}"
        );
    }
    let http = page.matches("http://").count() + page.matches("https://").count();
    assert_eq!(
        http,
        page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "an http(s) reference other than the SVG namespace"
    );
    assert_eq!(page.matches("<svg ").count(), 1, "the merged round trips");
    assert_eq!(page.matches("</svg>").count(), 1);
    let maps = heat_maps(&page);
    let names: Vec<(String, String)> = maps
        .iter()
        .map(|(t, f, _)| (t.clone(), f.clone()))
        .collect();
    assert_eq!(names, figures);
    assert_all_measured(&maps, "the page");
    for h in &agents.hosts {
        assert!(page.contains(&format!("<td>{h}</td>")), "host {h} listed");
    }

    // In the browser: nothing fetched, nothing logged, the same tables.
    let Some(tool) = chromium() else {
        return;
    };
    // First, that a page which does fetch something is caught.
    let control = sb.path().join("control.html");
    std::fs::write(
        &control,
        "<!DOCTYPE html><html><body><img src=\"http://example.invalid/x.png\"></body></html>",
    )
    .unwrap();
    let opened = open(&sb, tool, &control, "profile-control");
    assert_eq!(opened.fetched, ["http://example.invalid/x.png"]);
    let Opened {
        dom,
        console,
        fetched,
    } = open(&sb, tool, &page_path, "profile-dom");
    assert!(console.is_empty(), "the page logged: {console:?}");
    assert!(fetched.is_empty(), "the page fetched {fetched:?}");
    let rendered = heat_maps(&dom);
    let names: Vec<(String, String)> = rendered
        .iter()
        .map(|(t, f, _)| (t.clone(), f.clone()))
        .collect();
    assert_eq!(names, figures, "the heat maps in the DOM");
    assert_all_measured(&rendered, "the DOM");
    assert!(dom.contains("data-chart=\"merged-tcp-pingpong\""));

    // The scale's best colour, hsl(120,70%,80%), is on screen; its worst,
    // hsl(0,70%,80%), too when the pairs differ.
    let pixels = screenshot(&sb, tool, &page_path);
    assert!(near(&pixels, [168, 240, 168]) > 200, "no green cell");
    if page.contains("data-bad=\"100\"") {
        assert!(near(&pixels, [240, 168, 168]) > 200, "no red cell");
    }
}

/// Every format, as every command (issue 30): CSV and Markdown of a mesh whose agents
/// are not there are its document all the same (each pair failed, exit 1), never a
/// refusal.
#[test]
fn csv_and_markdown_of_a_mesh_are_its_document_too() {
    let sb = Sandbox::new();
    for (format, says) in [("csv", "source,"), ("markdown", "| host |")] {
        let out = sb
            .sockbench()
            .args(["mesh", "--hosts", "127.0.0.1:9,127.0.0.1:10", "-q"])
            .args(["--format", format])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{format}: {stdout}");
        assert!(stdout.contains(says), "{format}: {stdout}");
    }
}
