//! Real output of `serve`, `load` and `models`, each a kind of the one document, validates
//! against schema/document.schema.json (which tests/schema.rs keeps equal to what the
//! code generates), failures included.

use crate::common::Sandbox;

#[test]
fn real_output_of_serve_load_and_models_validates() {
    let sb = Sandbox::new();
    let mut server = sb
        .sockbench()
        .args([
            "serve", "--port", "0", "-d", "3", "-v", "0", "--format", "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stderr.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    for args in [
        vec!["-n", "200", "-c", "4", "-k"],
        vec!["-d", "300ms", "--rate", "500"],
    ] {
        let out = sb
            .cmd()
            .arg("load")
            .args(&args)
            .args(["--format", "json", "-q", &url])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        crate::common::assert_valid(&crate::common::json_of(&out));
    }
    // A load that fails is a document too.
    let out = sb
        .cmd()
        .args([
            "load",
            "-n",
            "5",
            "--format",
            "json",
            "-q",
            "http://127.0.0.1:1/",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let failed = crate::common::stdout_json(&out);
    assert!(failed["error"].is_string(), "{failed}");
    assert_eq!(failed["kind"], "load");
    crate::common::assert_valid(&failed);
    let out = server.wait_with_output().unwrap();
    let served = crate::common::stdout_json(&out);
    assert_eq!(served["kind"], "serve");
    crate::common::assert_valid(&served);
    // A serve that fails is a document of its kind too (it once lacked most fields).
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let out = (sb.cmd())
        .args(["serve", "--port", &port, "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let failed = crate::common::stdout_json(&out);
    assert!(failed["error"].is_string(), "{failed}");
    assert_eq!(failed["kind"], "serve");
    crate::common::assert_valid(&failed);
    let out = sb
        .cmd()
        .args([
            "models",
            "--model",
            "epoll,thread",
            "-n",
            "200",
            "-c",
            "4",
            "--format",
            "json",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    crate::common::assert_valid(&crate::common::json_of(&out));
}
