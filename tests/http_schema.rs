//! Real output of `serve`, `load` and `models`, each a kind of the one document, validates
//! against schema/document.schema.json (which tests/schema.rs keeps equal to what the
//! code generates), failures included.

mod common;

use common::Sandbox;
use serde_json::Value;

fn path() -> String {
    format!("{}/schema/document.schema.json", env!("CARGO_MANIFEST_DIR"))
}

fn validate(name: &str, doc: &Value) {
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{name}: {errors:?}\n{doc}");
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

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
        validate("load", &json(&out));
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
    let failed = json(&out);
    assert!(failed["error"].is_string(), "{failed}");
    assert_eq!(failed["kind"], "load");
    validate("load", &failed);
    let out = server.wait_with_output().unwrap();
    let served = json(&out);
    assert_eq!(served["kind"], "serve");
    validate("serve", &served);
    // A serve that fails is a document of its kind too (it once lacked most fields).
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let out = (sb.cmd())
        .args(["serve", "--port", &port, "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let failed = json(&out);
    assert!(failed["error"].is_string(), "{failed}");
    assert_eq!(failed["kind"], "serve");
    validate("serve", &failed);
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
    validate("models", &json(&out));
}
