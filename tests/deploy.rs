//! deploy/kubernetes/ and the Dockerfile, checked offline.
//!
//! Two kinds of check:
//! - The manifests against the Kubernetes API's own JSON schemas, with kubernetes-validate
//!   (`pip install kubernetes-validate`: it bundles the schemas of every Kubernetes
//!   release, so it runs without a cluster or a network), in strict mode (an unknown or
//!   misspelled field fails). `kubectl kustomize` (offline too) renders
//!   kustomization.yaml. A test whose tool is missing says so and skips.
//! - What no schema knows, by the checker below: every kind/apiVersion is a known pair;
//!   names, namespaces, labels and selectors agree (Service, DaemonSet and NetworkPolicy
//!   selectors match the pod templates; the Job's --hosts-from-dns is the headless
//!   Service's DNS name); each port and protocol of the containerPorts, the Service, the
//!   NetworkPolicy and the readiness probe is the one the agent's command line sets; every
//!   flag of the agent's and the coordinator's command lines is one that the built
//!   binary's `server --help` / `mesh --help` lists; the key Secret is mounted read-only
//!   where --key-file reads it, and no key is committed; the pods run as non-root with a
//!   read-only root filesystem and no capabilities; the hostNetwork variant is the
//!   DaemonSet plus hostNetwork and dnsPolicy only; the Dockerfile is multi-stage, runs as
//!   a user that is not root, has ENTRYPOINT sockbench and EXPOSEs the same ports.
//!
//! The YAML is parsed by PyYAML (`python3 -c 'import yaml'`; apt-get install
//! python3-yaml, or pip install pyyaml): without it the tests say so and skip.
//! `SOCKBENCH_PYTHON` names the Python to use. The checker is also fed broken copies of
//! the manifests (a misspelled flag, a port that disagrees, ...) and must report each.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The (apiVersion, kind) pairs the manifests may use.
const KNOWN: &[(&str, &str)] = &[
    ("v1", "Namespace"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
];

/// Manifests that kustomization.yaml leaves out on purpose (applied by hand, see README).
const NOT_IN_KUSTOMIZATION: &[&str] = &["agent-hostnetwork.yaml", "mesh-job.yaml"];

/// The Secret holding the pre-shared key (created by the user, never committed).
const KEY_SECRET: &str = "sockbench-key";

/// The non-root user of the image and the pods.
const USER: i64 = 65532;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn deploy_dir() -> PathBuf {
    root().join("deploy/kubernetes")
}

/// A Python with PyYAML, or None (with why printed).
fn python() -> Option<String> {
    crate::common::python_with(
        "yaml",
        "to parse the manifests: apt-get install python3-yaml, or pip install pyyaml",
    )
}

/// Every YAML document of each text (safe loader, YAML 1.1 as Kubernetes reads it), as
/// JSON: stdin {name: text}, stdout {name: {"docs": [...]} or {"error": why}}.
const TO_JSON: &str = r#"
import json, sys, yaml
out = {}
for name, text in json.load(sys.stdin).items():
    try:
        out[name] = {"docs": [d for d in yaml.safe_load_all(text) if d is not None]}
    except yaml.YAMLError as e:
        out[name] = {"error": str(e)}
json.dump(out, sys.stdout)
"#;

/// Parse YAML streams (by name) into their documents, in one run of Python.
fn parse_all(
    python: &str,
    texts: &BTreeMap<String, String>,
) -> BTreeMap<String, Result<Vec<Value>, String>> {
    use std::io::Write;
    let mut child = Command::new(python)
        .args(["-c", TO_JSON])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let input = serde_json::to_vec(texts).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{python}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: BTreeMap<String, Value> = serde_json::from_slice(&out.stdout).unwrap();
    parsed
        .into_iter()
        .map(|(name, v)| {
            let r = match v.get("docs") {
                Some(Value::Array(docs)) => Ok(docs.clone()),
                _ => Err(v["error"].as_str().unwrap_or("?").to_string()),
            };
            (name, r)
        })
        .collect()
}

/// Parse one YAML stream into its documents.
fn parse_yaml(python: &str, text: &str) -> Result<Vec<Value>, String> {
    let texts = BTreeMap::from([(String::new(), text.to_string())]);
    parse_all(python, &texts).remove("").unwrap()
}

/// What the checker reads: each manifest's text by file name, and the Dockerfile.
#[derive(Clone)]
struct Bundle {
    manifests: BTreeMap<String, String>,
    dockerfile: String,
}

impl Bundle {
    fn load() -> Bundle {
        let mut manifests = BTreeMap::new();
        for entry in std::fs::read_dir(deploy_dir()).expect("deploy/kubernetes/") {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".yaml") || name.ends_with(".yml") {
                manifests.insert(name, std::fs::read_to_string(&path).unwrap());
            }
        }
        assert!(!manifests.is_empty(), "no manifests in deploy/kubernetes/");
        let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
        Bundle {
            manifests,
            dockerfile,
        }
    }

    /// The same bundle with `from` replaced by `to` in one file (which must contain it).
    fn mutated(&self, file: &str, from: &str, to: &str) -> Bundle {
        let mut b = self.clone();
        let text = if file == "Dockerfile" {
            &mut b.dockerfile
        } else {
            b.manifests.get_mut(file).expect("no such manifest")
        };
        assert!(text.contains(from), "{file} has no {from:?} to mutate");
        *text = text.replacen(from, to, 1);
        b
    }
}

/// The built binary's help for one subcommand.
fn help(sub: &str) -> String {
    let out = Command::new(assert_cmd::cargo::cargo_bin("sockbench"))
        .args([sub, "--help"])
        .output()
        .expect("run sockbench");
    assert!(out.status.success(), "sockbench {sub} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The long flags a help text defines (on its option lines only, not in examples or
/// descriptions), each with whether it takes a value.
fn help_flags(help: &str) -> BTreeMap<String, bool> {
    let mut flags = BTreeMap::new();
    for line in help.lines() {
        // clap puts an option at 2 spaces ("  -p, --port") or 6 ("      --once");
        // examples and wrapped descriptions are indented further.
        let t = line.trim_start();
        if !t.starts_with('-') || line.len() - t.len() > 6 {
            continue;
        }
        let mut words = t.split_whitespace().peekable();
        while let Some(w) = words.next() {
            let w = w.trim_end_matches(',');
            if let Some(long) = w.strip_prefix("--") {
                let takes = words.peek().is_some_and(|n| n.starts_with('<'));
                flags.entry(long.to_string()).or_insert(takes);
                break;
            }
            if !(w.starts_with('-') && w.len() == 2) {
                break;
            }
        }
    }
    flags
}

/// The `[default: N]` of a flag in a help text.
fn help_default(help: &str, flag: &str) -> Option<String> {
    let at = help.find(&format!("--{flag} <"))?;
    let rest = &help[at..];
    let next_flag = rest[2..].find("\n  -").map_or(rest.len(), |i| i + 2);
    let d = rest[..next_flag].find("[default: ")?;
    let v = &rest[d + "[default: ".len()..];
    Some(v[..v.find(']')?].to_string())
}

/// A container's command line split into the subcommand and its flags (flag -> value,
/// "" for a switch), or why it cannot be read. A flag the help does not define is a
/// problem.
fn command_line(
    what: &str,
    container: &Value,
    entrypoint: &[String],
    helps: &BTreeMap<String, String>,
    problems: &mut Vec<String>,
) -> Option<(String, BTreeMap<String, String>)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|s| match s {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut argv = match container.get("command") {
        Some(c) => strings(c),
        None => entrypoint.to_vec(),
    };
    argv.extend(strings(&container["args"]));
    if argv.first().map(String::as_str) != Some("sockbench") {
        problems.push(format!(
            "{what}: the command line {argv:?} does not run sockbench (the image's ENTRYPOINT)"
        ));
        return None;
    }
    let Some(sub) = argv.get(1).cloned() else {
        problems.push(format!("{what}: no subcommand"));
        return None;
    };
    let Some(help) = helps.get(&sub) else {
        problems.push(format!("{what}: unexpected subcommand {sub:?}"));
        return None;
    };
    let defined = help_flags(help);
    let mut flags = BTreeMap::new();
    let mut rest = argv[2..].iter();
    while let Some(a) = rest.next() {
        let Some(long) = a.strip_prefix("--") else {
            problems.push(format!(
                "{what}: {a:?} is not a long flag (sockbench {sub})"
            ));
            continue;
        };
        let (name, inline) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (long, None),
        };
        let Some(&takes) = defined.get(name) else {
            problems.push(format!(
                "{what}: flag --{name} is not in `sockbench {sub} --help`"
            ));
            continue;
        };
        let value = match (takes, inline) {
            (_, Some(v)) => v,
            (true, None) => match rest.next() {
                Some(v) => v.clone(),
                None => {
                    problems.push(format!("{what}: --{name} has no value"));
                    String::new()
                }
            },
            (false, None) => String::new(),
        };
        if flags.insert(name.to_string(), value).is_some() {
            problems.push(format!("{what}: --{name} given twice"));
        }
    }
    Some((sub, flags))
}

/// Every key/value of `sub` is in `labels`.
fn selects(sub: &Value, labels: &Value) -> bool {
    sub.as_object()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// (port, protocol) pairs of a port list, named ports resolved through `named`.
fn port_set(
    what: &str,
    ports: &Value,
    key: &str,
    named: &BTreeMap<String, i64>,
    problems: &mut Vec<String>,
) -> BTreeSet<(i64, String)> {
    let mut set = BTreeSet::new();
    for p in ports.as_array().into_iter().flatten() {
        let proto = p["protocol"].as_str().unwrap_or("TCP").to_string();
        let port = match &p[key] {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => named.get(s).copied(),
            _ => None,
        };
        match port {
            Some(n) => {
                set.insert((n, proto));
            }
            None => problems.push(format!("{what}: port {} does not resolve", p[key])),
        }
    }
    set
}

/// The Dockerfile's final stage's instructions (upper-case keyword, rest of the line),
/// line continuations joined, and the number of stages.
fn docker_stages(dockerfile: &str) -> (usize, Vec<(String, String)>) {
    let joined = dockerfile.replace("\\\n", " ");
    let mut stages = 0;
    let mut last = Vec::new();
    for line in joined.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let (kw, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
        let kw = kw.to_ascii_uppercase();
        if kw == "FROM" {
            stages += 1;
            last.clear();
        }
        last.push((kw, rest.trim().to_string()));
    }
    (stages, last)
}

/// Everything wrong with the bundle (empty when all is well).
fn check(python: &str, bundle: &Bundle, helps: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();

    // Parse every document; kinds and apiVersions.
    let mut docs: Vec<(String, Value)> = Vec::new();
    for (file, parsed) in parse_all(python, &bundle.manifests) {
        match parsed {
            Ok(ds) => {
                if ds.is_empty() {
                    problems.push(format!("{file}: no document"));
                }
                for d in ds {
                    let pair = (
                        d["apiVersion"].as_str().unwrap_or(""),
                        d["kind"].as_str().unwrap_or(""),
                    );
                    if !KNOWN.contains(&pair) {
                        problems.push(format!(
                            "{file}: unknown kind/apiVersion {} {}",
                            pair.1, pair.0
                        ));
                    }
                    docs.push((file.clone(), d));
                }
            }
            Err(e) => problems.push(format!("{file}: not YAML: {e}")),
        }
    }
    let of_kind = |kind: &str| -> Vec<&(String, Value)> {
        docs.iter().filter(|(_, d)| d["kind"] == kind).collect()
    };
    let one = |kind: &str, problems: &mut Vec<String>| -> Option<(String, Value)> {
        let all = of_kind(kind);
        if all.len() != 1 {
            problems.push(format!("expected one {kind}, found {}", all.len()));
        }
        all.first().map(|(f, d)| (f.clone(), d.clone()))
    };

    // The Dockerfile: multi-stage, non-root, ENTRYPOINT sockbench; its ports come below.
    let (stages, last) = docker_stages(&bundle.dockerfile);
    if stages < 2 {
        problems.push(format!(
            "Dockerfile: {stages} FROM line(s), expected a multi-stage build"
        ));
    }
    if !bundle.dockerfile.contains("cargo build --release --locked") {
        problems.push("Dockerfile: no `cargo build --release --locked`".into());
    }
    let instr = |kw: &str| -> Vec<String> {
        last.iter()
            .filter(|(k, _)| k == kw)
            .map(|(_, r)| r.clone())
            .collect()
    };
    match instr("USER").last() {
        Some(u) => {
            let user = u.split(':').next().unwrap_or("");
            if user == "root" || user == "0" || user.is_empty() {
                problems.push(format!("Dockerfile: the final stage runs as {u}"));
            }
        }
        None => problems.push("Dockerfile: the final stage sets no USER (root)".into()),
    }
    let entrypoint: Vec<String> = match instr("ENTRYPOINT").last() {
        Some(e) => match serde_json::from_str::<Vec<String>>(e) {
            Ok(v) => v,
            Err(_) => {
                problems.push(format!(
                    "Dockerfile: ENTRYPOINT {e} is not in exec form (a JSON array)"
                ));
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    if entrypoint != ["sockbench"] {
        problems.push(format!(
            "Dockerfile: ENTRYPOINT is {entrypoint:?}, expected [\"sockbench\"]"
        ));
    }
    let mut exposed = BTreeSet::new();
    for e in instr("EXPOSE") {
        for p in e.split_whitespace() {
            let (n, proto) = p.split_once('/').unwrap_or((p, "tcp"));
            match n.parse::<i64>() {
                Ok(n) => {
                    exposed.insert((n, proto.to_ascii_uppercase()));
                }
                Err(_) => problems.push(format!("Dockerfile: EXPOSE {p} is not a port")),
            }
        }
    }

    // The namespace, and every namespaced object in it.
    let ns = one("Namespace", &mut problems)
        .and_then(|(_, d)| d["metadata"]["name"].as_str().map(String::from))
        .unwrap_or_default();
    for (file, d) in &docs {
        let kind = d["kind"].as_str().unwrap_or("");
        if kind == "Namespace" || kind == "Kustomization" {
            continue;
        }
        if d["metadata"]["namespace"].as_str() != Some(ns.as_str()) {
            problems.push(format!(
                "{file}: {kind} {} is not in namespace {ns}",
                d["metadata"]["name"]
            ));
        }
    }

    // No key is committed: the user creates the Secret (README).
    for (file, d) in of_kind("Secret") {
        if d.get("data").is_some() || d.get("stringData").is_some() {
            problems.push(format!("{file}: a Secret with a key value is committed"));
        }
    }

    // kustomization.yaml lists every manifest but those applied by hand, and only files
    // that are there.
    if let Some((file, k)) = one("Kustomization", &mut problems) {
        if k["namespace"].as_str() != Some(ns.as_str()) {
            problems.push(format!("{file}: namespace is not {ns}"));
        }
        let listed: BTreeSet<String> = k["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(String::from))
            .collect();
        for r in &listed {
            if !bundle.manifests.contains_key(r) {
                problems.push(format!("{file}: resource {r} is not a manifest here"));
            }
            if NOT_IN_KUSTOMIZATION.contains(&r.as_str()) {
                problems.push(format!("{file}: {r} is to be applied by hand"));
            }
        }
        for m in bundle.manifests.keys() {
            if m != &file && !listed.contains(m) && !NOT_IN_KUSTOMIZATION.contains(&m.as_str()) {
                problems.push(format!("{file}: {m} is not listed in resources"));
            }
        }
    }

    // Pod security, resources and the key, for every pod template.
    let pod_checks = |what: &str, spec: &Value, problems: &mut Vec<String>| {
        let psc = &spec["securityContext"];
        let containers: Vec<&Value> = spec["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        if containers.is_empty() {
            problems.push(format!("{what}: no containers"));
        }
        for c in containers {
            let csc = &c["securityContext"];
            let field = |k: &str| csc.get(k).or_else(|| psc.get(k));
            let name = c["name"].as_str().unwrap_or("?");
            if field("runAsNonRoot") != Some(&Value::Bool(true)) {
                problems.push(format!("{what}/{name}: runAsNonRoot is not true"));
            }
            if field("runAsUser").and_then(Value::as_i64) != Some(USER) {
                problems.push(format!("{what}/{name}: runAsUser is not {USER}"));
            }
            if csc["readOnlyRootFilesystem"] != true {
                problems.push(format!("{what}/{name}: readOnlyRootFilesystem is not true"));
            }
            if csc["allowPrivilegeEscalation"] != false {
                problems.push(format!(
                    "{what}/{name}: allowPrivilegeEscalation is not false"
                ));
            }
            let drops = csc["capabilities"]["drop"].as_array();
            if !drops.is_some_and(|d| d.iter().any(|c| c == "ALL")) {
                problems.push(format!("{what}/{name}: capabilities do not drop ALL"));
            }
            if csc["capabilities"].get("add").is_some() {
                problems.push(format!("{what}/{name}: adds capabilities"));
            }
            for k in ["requests", "limits"] {
                for r in ["cpu", "memory"] {
                    if c["resources"][k].get(r).is_none() {
                        problems.push(format!("{what}/{name}: no resources.{k}.{r}"));
                    }
                }
            }
            if !c["image"].as_str().is_some_and(|i| i.contains("sockbench")) {
                problems.push(format!("{what}/{name}: image is not sockbench's"));
            }
        }
    };
    // Where a container reads the key Secret: the --key-file path it must be given.
    let key_path = |what: &str, spec: &Value, problems: &mut Vec<String>| -> Option<String> {
        let vol = spec["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["secret"]["secretName"] == KEY_SECRET);
        let Some(vol) = vol else {
            problems.push(format!("{what}: no volume of Secret {KEY_SECRET}"));
            return None;
        };
        let mount = spec["containers"][0]["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["name"] == vol["name"]);
        let Some(mount) = mount else {
            problems.push(format!("{what}: the key volume is not mounted"));
            return None;
        };
        if mount["readOnly"] != true {
            problems.push(format!("{what}: the key is not mounted read-only"));
        }
        let file = match vol["secret"]["items"].as_array() {
            Some(items) => match items.iter().find(|i| i["key"] == "key") {
                Some(i) => i["path"].as_str().unwrap_or("").to_string(),
                None => {
                    problems.push(format!("{what}: the key volume has no item `key`"));
                    return None;
                }
            },
            None => "key".to_string(),
        };
        let dir = mount["mountPath"].as_str().unwrap_or("");
        Some(format!("{}/{file}", dir.trim_end_matches('/')))
    };

    // The agents: the DaemonSet, its command line and ports.
    let ds_all = of_kind("DaemonSet");
    let base_ds = ds_all
        .iter()
        .find(|(f, _)| f != "agent-hostnetwork.yaml")
        .map(|(_, d)| d.clone());
    let hostnet_ds = ds_all
        .iter()
        .find(|(f, _)| f == "agent-hostnetwork.yaml")
        .map(|(_, d)| d.clone());
    if ds_all.len() != 2 || base_ds.is_none() || hostnet_ds.is_none() {
        problems.push(format!(
            "expected the agent DaemonSet and agent-hostnetwork.yaml's, found {} DaemonSet(s)",
            ds_all.len()
        ));
    }
    let mut agent_ports = BTreeSet::new();
    let mut control_port = None;
    let mut agent_labels = Value::Null;
    let mut agent_key = None;
    let mut named = BTreeMap::new();
    for (file, ds) in &ds_all {
        let what = format!("{file}: DaemonSet {}", ds["metadata"]["name"]);
        let tpl = &ds["spec"]["template"];
        let labels = &tpl["metadata"]["labels"];
        if !selects(&ds["spec"]["selector"]["matchLabels"], labels) {
            problems.push(format!(
                "{what}: selector does not match the pod template's labels"
            ));
        }
        let spec = &tpl["spec"];
        pod_checks(&what, spec, &mut problems);
        let key = key_path(&what, spec, &mut problems);
        if !spec["tolerations"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
        {
            problems.push(format!("{what}: no tolerations (not on every node)"));
        }
        let c = &spec["containers"][0];
        let Some((sub, flags)) = command_line(&what, c, &entrypoint, helps, &mut problems) else {
            continue;
        };
        if sub != "server" {
            problems.push(format!("{what}: runs `sockbench {sub}`, not server"));
            continue;
        }
        let num = |flag: &str, problems: &mut Vec<String>| -> Option<i64> {
            let v = flags
                .get(flag)
                .cloned()
                .or_else(|| help_default(&helps["server"], flag));
            match v.as_deref().map(str::parse::<i64>) {
                Some(Ok(n)) => Some(n),
                _ => {
                    problems.push(format!("{what}: no numeric --{flag}"));
                    None
                }
            }
        };
        let control = num("port", &mut problems);
        let data = num("data-port", &mut problems);
        let mut want = BTreeSet::new();
        if let Some(p) = control {
            want.insert((p, "TCP".to_string()));
        }
        if let Some(p) = data {
            want.insert((p, "TCP".to_string()));
            want.insert((p, "UDP".to_string()));
        }
        if flags.get("key-file") != key.as_ref() || key.is_none() {
            problems.push(format!(
                "{what}: --key-file {:?} is not where the Secret is mounted ({key:?})",
                flags.get("key-file")
            ));
        }
        // containerPorts, by name for the Service and probe.
        let mut by_name = BTreeMap::new();
        for p in c["ports"].as_array().into_iter().flatten() {
            if let (Some(n), Some(v)) = (p["name"].as_str(), p["containerPort"].as_i64()) {
                by_name.insert(n.to_string(), v);
            }
        }
        let container_ports =
            port_set(&what, &c["ports"], "containerPort", &by_name, &mut problems);
        if container_ports != want {
            problems.push(format!(
                "{what}: containerPorts {container_ports:?} are not the command line's {want:?}"
            ));
        }
        let probe = &c["readinessProbe"]["tcpSocket"]["port"];
        let probe_port = match probe {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => by_name.get(s).copied(),
            _ => None,
        };
        if probe_port.is_none() || probe_port != control {
            problems.push(format!(
                "{what}: the readiness probe (tcpSocket {probe}) is not the control port {control:?}"
            ));
        }
        if file != "agent-hostnetwork.yaml" {
            agent_ports = want;
            control_port = control;
            agent_labels = labels.clone();
            agent_key = key;
            named = by_name;
        }
    }

    // The hostNetwork variant: the same DaemonSet plus hostNetwork and its dnsPolicy.
    if let (Some(base), Some(hn)) = (&base_ds, &hostnet_ds) {
        let hspec = &hn["spec"]["template"]["spec"];
        if hspec["hostNetwork"] != true || hspec["dnsPolicy"] != "ClusterFirstWithHostNet" {
            problems.push(
                "agent-hostnetwork.yaml: not hostNetwork: true with dnsPolicy: ClusterFirstWithHostNet"
                    .into(),
            );
        }
        let mut stripped = hn.clone();
        if let Some(s) = stripped["spec"]["template"]["spec"].as_object_mut() {
            s.remove("hostNetwork");
            s.remove("dnsPolicy");
        }
        if &stripped != base {
            problems.push(
                "agent-hostnetwork.yaml: differs from the agent DaemonSet in more than hostNetwork and dnsPolicy"
                    .into(),
            );
        }
    }

    // The Dockerfile's EXPOSE is the agent's ports.
    if exposed != agent_ports {
        problems.push(format!(
            "Dockerfile: EXPOSE {exposed:?} is not the agent's ports {agent_ports:?}"
        ));
    }

    // The headless Service over the agents.
    let mut service_dns = None;
    if let Some((file, svc)) = one("Service", &mut problems) {
        let name = svc["metadata"]["name"].as_str().unwrap_or("");
        let what = format!("{file}: Service {name}");
        if svc["spec"]["clusterIP"] != "None" {
            problems.push(format!("{what}: not headless (clusterIP: None)"));
        }
        if svc["spec"]["publishNotReadyAddresses"] != false {
            problems.push(format!("{what}: publishNotReadyAddresses is not false"));
        }
        if !selects(&svc["spec"]["selector"], &agent_labels) {
            problems.push(format!("{what}: selector does not match the agents' pods"));
        }
        let ports = &svc["spec"]["ports"];
        for p in ports.as_array().into_iter().flatten() {
            let port = p["port"].as_i64();
            let target = match &p["targetPort"] {
                Value::Null => port,
                Value::Number(n) => n.as_i64(),
                Value::String(s) => named.get(s).copied(),
                _ => None,
            };
            if target.is_none() || target != port {
                problems.push(format!(
                    "{what}: port {} targets {} (the agents' port {target:?})",
                    p["port"], p["targetPort"]
                ));
            }
        }
        let set = port_set(&what, ports, "port", &named, &mut problems);
        if set != agent_ports {
            problems.push(format!(
                "{what}: ports {set:?} are not the agent's {agent_ports:?}"
            ));
        }
        service_dns = Some(format!("{name}.{ns}.svc"));
    }

    // The coordinator Job.
    let mut mesh_labels = Value::Null;
    if let Some((file, job)) = one("Job", &mut problems) {
        let what = format!("{file}: Job {}", job["metadata"]["name"]);
        if job["spec"]["backoffLimit"] != 0 {
            problems.push(format!("{what}: backoffLimit is not 0"));
        }
        if !job["spec"]["ttlSecondsAfterFinished"].is_number() {
            problems.push(format!("{what}: no ttlSecondsAfterFinished"));
        }
        let tpl = &job["spec"]["template"];
        mesh_labels = tpl["metadata"]["labels"].clone();
        let spec = &tpl["spec"];
        if spec["restartPolicy"] != "Never" {
            problems.push(format!("{what}: restartPolicy is not Never"));
        }
        pod_checks(&what, spec, &mut problems);
        let key = key_path(&what, spec, &mut problems);
        let c = &spec["containers"][0];
        if let Some((sub, flags)) = command_line(&what, c, &entrypoint, helps, &mut problems) {
            if sub != "mesh" {
                problems.push(format!("{what}: runs `sockbench {sub}`, not mesh"));
            }
            match (flags.get("hosts-from-dns"), &service_dns) {
                (Some(h), Some(dns))
                    if h.trim_end_matches('.') == dns
                        || h.trim_end_matches('.')
                            .strip_prefix(dns.as_str())
                            .is_some_and(|rest| rest.starts_with('.') && !rest[1..].is_empty()) => {
                }
                (h, dns) => problems.push(format!(
                    "{what}: --hosts-from-dns {h:?} is not the headless Service's name {dns:?}"
                )),
            }
            let port = flags
                .get("port")
                .cloned()
                .or_else(|| helps.get("mesh").and_then(|h| help_default(h, "port")))
                .and_then(|p| p.parse::<i64>().ok());
            if port.is_none() || port != control_port {
                problems.push(format!(
                    "{what}: the agents' port {port:?} is not their control port {control_port:?}"
                ));
            }
            if flags.get("key-file") != key.as_ref() || key.is_none() || key != agent_key {
                problems.push(format!(
                    "{what}: --key-file {:?} is not the mounted key {key:?}",
                    flags.get("key-file")
                ));
            }
            if flags.get("format").map(String::as_str) != Some("json") {
                problems.push(format!(
                    "{what}: --format is not json (the log is the result)"
                ));
            }
            match flags.get("export-json") {
                Some(path) => {
                    let mounted = c["volumeMounts"].as_array().into_iter().flatten().any(|m| {
                        m["readOnly"] != true
                            && m["mountPath"].as_str().is_some_and(|d| {
                                Path::new(path).parent() == Some(Path::new(d.trim_end_matches('/')))
                            })
                    });
                    if !mounted {
                        problems.push(format!(
                            "{what}: --export-json {path} is not in a writable volume"
                        ));
                    }
                }
                None => problems.push(format!("{what}: no --export-json")),
            }
        }
    }

    // The NetworkPolicy: agents reach each other on every agent port, the coordinator
    // reaches the control port.
    if let Some((file, np)) = one("NetworkPolicy", &mut problems) {
        let what = format!("{file}: NetworkPolicy {}", np["metadata"]["name"]);
        if !selects(&np["spec"]["podSelector"]["matchLabels"], &agent_labels) {
            problems.push(format!(
                "{what}: podSelector does not match the agents' pods"
            ));
        }
        let mut from_agents = BTreeSet::new();
        let mut from_mesh = BTreeSet::new();
        for rule in np["spec"]["ingress"].as_array().into_iter().flatten() {
            let ports = port_set(&what, &rule["ports"], "port", &named, &mut problems);
            for peer in rule["from"].as_array().into_iter().flatten() {
                let sel = &peer["podSelector"]["matchLabels"];
                if selects(sel, &agent_labels) {
                    from_agents.extend(ports.iter().cloned());
                }
                if selects(sel, &mesh_labels) {
                    from_mesh.extend(ports.iter().cloned());
                }
            }
        }
        if from_agents != agent_ports {
            problems.push(format!(
                "{what}: agents may reach each other on {from_agents:?}, not the agent's {agent_ports:?}"
            ));
        }
        let want: BTreeSet<_> = control_port
            .map(|p| (p, "TCP".to_string()))
            .into_iter()
            .collect();
        if from_mesh != want {
            problems.push(format!(
                "{what}: the coordinator may reach the agents on {from_mesh:?}, not their control port {want:?}"
            ));
        }
    }

    problems
}

fn helps() -> BTreeMap<String, String> {
    ["server", "mesh"]
        .into_iter()
        .map(|s| (s.to_string(), help(s)))
        .collect()
}

#[test]
fn the_manifests_and_the_dockerfile_agree_with_each_other_and_the_binary() {
    let Some(py) = python() else { return };
    let problems = check(&py, &Bundle::load(), &helps());
    assert!(
        problems.is_empty(),
        "deploy/kubernetes/ or the Dockerfile:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_checker_reports_each_kind_of_break() {
    let Some(py) = python() else { return };
    let helps = helps();
    let good = Bundle::load();
    // What the real bundle gets (nothing once the binary has every flag used), so that
    // each break must add a problem of its own.
    let base: BTreeSet<String> = check(&py, &good, &helps).into_iter().collect();
    let breaks: &[(&str, &str, &str, &str)] = &[
        // (file, from, to, a word the new problem must contain)
        (
            "agent-daemonset.yaml",
            "- --key-file",
            "- --key-fil",
            "--key-fil",
        ),
        (
            "mesh-job.yaml",
            "- --hosts-from-dns",
            "- --hosts-from-dn",
            "--hosts-from-dn",
        ),
        (
            "mesh-job.yaml",
            "- --quiet",
            "- --quiet\n            - --verbose",
            "--verbose",
        ),
        (
            "agent-service.yaml",
            "port: 5291\n      targetPort: data-udp",
            "port: 5292\n      targetPort: data-udp",
            "ports",
        ),
        (
            "agent-service.yaml",
            "protocol: UDP",
            "protocol: TCP",
            "ports",
        ),
        (
            "agent-service.yaml",
            "clusterIP: None",
            "clusterIP: \"\"",
            "headless",
        ),
        (
            "agent-service.yaml",
            "component: agent\n  ports",
            "component: agents\n  ports",
            "selector",
        ),
        (
            "networkpolicy.yaml",
            "port: 5291\n          protocol: UDP",
            "port: 5292\n          protocol: UDP",
            "reach each other",
        ),
        (
            "networkpolicy.yaml",
            "component: mesh",
            "component: coordinator",
            "coordinator may reach",
        ),
        (
            "agent-daemonset.yaml",
            "containerPort: 5291\n              protocol: UDP",
            "containerPort: 5291\n              protocol: TCP",
            "containerPorts",
        ),
        (
            "agent-daemonset.yaml",
            "- \"5291\"",
            "- \"5293\"",
            "containerPorts",
        ),
        (
            "agent-daemonset.yaml",
            "- /etc/sockbench/key",
            "- /etc/sockbench.key",
            "--key-file",
        ),
        (
            "agent-daemonset.yaml",
            "readOnlyRootFilesystem: true",
            "readOnlyRootFilesystem: false",
            "readOnlyRootFilesystem",
        ),
        (
            "agent-daemonset.yaml",
            "  selector:\n    matchLabels:\n      app.kubernetes.io/name: sockbench",
            "  selector:\n    matchLabels:\n      app.kubernetes.io/name: sockbenc",
            "selector",
        ),
        (
            "agent-daemonset.yaml",
            "port: control\n",
            "port: data-tcp\n",
            "readiness",
        ),
        ("agent-hostnetwork.yaml", "- \"4\"", "- \"8\"", "differs"),
        (
            "agent-hostnetwork.yaml",
            "hostNetwork: true",
            "hostNetwork: false",
            "hostNetwork",
        ),
        (
            "mesh-job.yaml",
            "sockbench-agent.sockbench.svc",
            "sockbench-agents.sockbench.svc",
            "--hosts-from-dns",
        ),
        (
            "mesh-job.yaml",
            "backoffLimit: 0",
            "backoffLimit: 6",
            "backoffLimit",
        ),
        (
            "mesh-job.yaml",
            "- /results/mesh.json",
            "- /tmp/out/mesh.json",
            "--export-json",
        ),
        (
            "mesh-job.yaml",
            "apiVersion: batch/v1",
            "apiVersion: batch/v1beta1",
            "unknown kind",
        ),
        (
            "kustomization.yaml",
            "  - networkpolicy.yaml\n",
            "",
            "not listed",
        ),
        (
            "namespace.yaml",
            "name: sockbench\n",
            "name: sockbench-ns\n",
            "namespace",
        ),
        ("Dockerfile", "USER 65532:65532", "USER root", "runs as"),
        (
            "Dockerfile",
            "EXPOSE 5290/tcp 5291/tcp 5291/udp",
            "EXPOSE 5290/tcp 5291/tcp",
            "EXPOSE",
        ),
        (
            "Dockerfile",
            "ENTRYPOINT [\"sockbench\"]",
            "ENTRYPOINT [\"/bin/sh\"]",
            "ENTRYPOINT",
        ),
        (
            "Dockerfile",
            "FROM rust:1-bookworm AS build",
            "# no build stage",
            "multi-stage",
        ),
    ];
    let mut missed = Vec::new();
    for (file, from, to, word) in breaks {
        let problems = check(&py, &good.mutated(file, from, to), &helps);
        let new: Vec<&String> = problems.iter().filter(|p| !base.contains(*p)).collect();
        if !new.iter().any(|p| p.contains(word)) {
            missed.push(format!(
                "{file}: {from:?} -> {to:?}: no new problem with {word:?} (new: {new:?})"
            ));
        }
    }
    assert!(
        missed.is_empty(),
        "the checker missed:\n  {}",
        missed.join("\n  ")
    );
}

#[test]
fn the_help_parser_finds_flags_and_defaults() {
    let help = "Usage: x\n\nOptions:\n  -p, --port <PORT>\n          The port\n          \n          [default: 5290]\n\n      --once\n          Serve one, then --not-a-flag\n\nExamples:\n  sockbench server --fake-flag 1\n                   --format json\n";
    let flags = help_flags(help);
    assert_eq!(
        flags,
        BTreeMap::from([("port".to_string(), true), ("once".to_string(), false)])
    );
    assert_eq!(help_default(help, "port").as_deref(), Some("5290"));
    assert_eq!(help_default(help, "once"), None);
}

/// kubernetes-validate (bundled schemas, offline), or None with why printed.
fn kubernetes_validate() -> Option<String> {
    let candidates = std::env::var("SOCKBENCH_KUBERNETES_VALIDATE")
        .ok()
        .into_iter()
        .chain(
            [
                "/opt/sockbench-venv/bin/kubernetes-validate",
                "kubernetes-validate",
            ]
            .map(String::from),
        );
    for c in candidates {
        if Command::new(&c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(c);
        }
    }
    eprintln!(
        "skipped: kubernetes-validate is not installed (pip install kubernetes-validate: \
         it carries the Kubernetes JSON schemas and runs offline)"
    );
    None
}

fn validate(tool: &str, path: &Path) -> Result<(), String> {
    let out = Command::new(tool)
        .arg("--strict")
        .arg(path)
        .output()
        .map_err(|e| e.to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && !text.contains("ERROR") {
        Ok(())
    } else {
        Err(text)
    }
}

#[test]
fn the_manifests_pass_the_kubernetes_schemas() {
    let Some(tool) = kubernetes_validate() else {
        return;
    };
    let mut failed = Vec::new();
    for (file, _) in Bundle::load().manifests {
        if file == "kustomization.yaml" {
            continue; // not a Kubernetes object: rendered by kubectl kustomize below
        }
        if let Err(e) = validate(&tool, &deploy_dir().join(&file)) {
            failed.push(format!("{file}: {e}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));

    // And the validator does fail a broken object: a misspelled field, strict mode.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("service.yaml");
    let text = std::fs::read_to_string(deploy_dir().join("agent-service.yaml")).unwrap();
    std::fs::write(&broken, text.replacen("targetPort:", "targetPorts:", 1)).unwrap();
    assert!(
        validate(&tool, &broken).is_err(),
        "kubernetes-validate passed a misspelled field"
    );
}

#[test]
fn kustomize_renders_the_listed_objects() {
    let kubectl = Command::new("kubectl")
        .args(["kustomize"])
        .arg(deploy_dir())
        .output();
    let out = match kubectl {
        Ok(o) => o,
        Err(_) => {
            eprintln!("skipped: no kubectl (kubectl kustomize renders offline)");
            return;
        }
    };
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/kubernetes/: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let Some(py) = python() else { return };
    let rendered = parse_yaml(&py, &String::from_utf8(out.stdout).unwrap()).unwrap();
    let got: BTreeSet<String> = rendered
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    let want: BTreeSet<String> = [
        "Namespace/sockbench",
        "DaemonSet/sockbench-agent",
        "Service/sockbench-agent",
        "NetworkPolicy/sockbench-agent",
    ]
    .map(String::from)
    .into();
    assert_eq!(got, want);
    for d in &rendered {
        if d["kind"] != "Namespace" {
            assert_eq!(d["metadata"]["namespace"], "sockbench", "{d}");
        }
        assert_ne!(d["spec"]["template"]["spec"]["hostNetwork"], true, "{d}");
    }
    if let Some(tool) = kubernetes_validate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rendered.yaml");
        let again = Command::new("kubectl")
            .args(["kustomize"])
            .arg(deploy_dir())
            .output()
            .unwrap();
        std::fs::write(&path, again.stdout).unwrap();
        if let Err(e) = validate(&tool, &path) {
            panic!("the rendered kustomization: {e}");
        }
    }
}
