//! The manifests of kubernetes/ agree with the code and with each other: the base
//! is plain Kubernetes (it applies on a cluster without the KEDA and Prometheus
//! Operator CRDs) and lists every manifest; each optional component lists its own,
//! and the base's commented `components:` lines name every one; KEDA's query is the
//! example queue's own count and, run on the example table, gives `tableq count`'s
//! number; the generated files are not stale; the Deployment stops tableq
//! gracefully, probes the endpoints it serves, runs it without root on a read-only
//! root file system with sized scratch space, mounts the files its environment names
//! and the queue files kustomize generates. (.ci/validate-kubernetes renders the
//! base and every component and validates them against the Kubernetes and CRD
//! schemas.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq};
use crate::support::TestDb;
use tableq::commands::cli::{DEFAULT_METRICS_ADDR, DEFAULT_SHUTDOWN_TIMEOUT};
use yaml_rust2::{Yaml, YamlLoader};

/// The example queue: the ConfigMap holds this copy, the ScaledObject counts it.
const EXAMPLE_QUEUE: &str = "kubernetes/queues.d/email-outbox.toml";
/// Where the copy comes from.
const EXAMPLE_SOURCE: &str = "config/email-outbox.toml";
const KEDA: &str = "kubernetes/components/keda/keda.yaml";
const PODMONITOR: &str = "kubernetes/components/podmonitor/podmonitor.yaml";
const PROMETHEUSRULE: &str = "kubernetes/components/prometheusrule/prometheusrule.yaml";
/// The API groups of the kinds the base may hold: Kubernetes' own.
const CORE_API_VERSIONS: [&str; 3] = ["v1", "apps/v1", "policy/v1"];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every object of a manifest file.
fn objects(path: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The object of `kind` in `path`.
fn object(path: &str, kind: &str) -> Yaml {
    objects(path)
        .into_iter()
        .find(|o| o["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("{path} holds no {kind}"))
}

fn text<'a>(yaml: &'a Yaml, what: &str) -> &'a str {
    yaml.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {yaml:?}"))
}

fn env_value<'a>(container: &'a Yaml, name: &str) -> &'a str {
    let env = container["env"].as_vec().expect("the container's env");
    let found = env.iter().find(|e| e["name"].as_str() == Some(name));
    text(&found.unwrap_or_else(|| panic!("no {name}"))["value"], name)
}

fn metrics_port() -> i64 {
    let addr: std::net::SocketAddr = DEFAULT_METRICS_ADDR.parse().unwrap();
    i64::from(addr.port())
}

/// The ScaledObject's query is `tableq count --print-sql` of the example queue, and
/// run as it stands on the example table it returns one number: the rows
/// `tableq count` finds waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scaled_object_counts_what_tableq_count_counts() {
    let scaled = object(KEDA, "ScaledObject");
    let trigger = &scaled["spec"]["triggers"][0];
    assert_eq!(trigger["type"].as_str(), Some("mysql"));
    let query = text(&trigger["metadata"]["query"], "the trigger's query");

    let printed = run_to_end(
        tableq(&[
            "count",
            "--print-sql",
            repo(EXAMPLE_QUEUE).to_str().unwrap(),
        ]),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(printed.code(), Some(0), "{}", printed.stderr);
    assert_eq!(
        query.trim_end(),
        printed.stdout.trim_end(),
        "{KEDA} is stale: run scripts/kubernetes-manifests.sh"
    );

    let db = TestDb::new().await;
    db.exec(&read("config/email.sql")).await;
    db.fill(
        "email",
        "recipient, subject, body, status, retry_at",
        60,
        |i| {
            let (status, retry_at) = match i % 6 {
                0 => ("sent", "NULL"),
                1 => ("failed", "NULL"),
                2 => ("waiting", "UNIX_TIMESTAMP() + 3600"), // due later: not waiting yet
                3 => ("waiting", "UNIX_TIMESTAMP() - 60"),
                _ => ("waiting", "NULL"),
            };
            format!("'user{i}@example.com', 'Hello', 'Body', '{status}', {retry_at}")
        },
    )
    .await;
    let rows: Vec<Vec<u64>> = db
        .rows::<mysql_async::Row>(query)
        .await
        .into_iter()
        .map(|row| {
            (0..row.len())
                .map(|i| row.get::<u64, _>(i).unwrap())
                .collect()
        })
        .collect();
    assert_eq!(rows, [vec![30]], "one row of one number");

    let mut count = tableq(&[
        "count",
        "--cap",
        "100000",
        repo(EXAMPLE_QUEUE).to_str().unwrap(),
    ]);
    count.env("TABLEQ_DATABASE_URL", &db.url);
    let counted = run_to_end(count, Duration::from_secs(60)).await;
    assert_eq!(counted.stdout, "email-outbox\t30\n", "{}", counted.stderr);
}

/// The generated files are what scripts/kubernetes-manifests.sh makes of their
/// sources now: the example queue, its count for KEDA, and the alerts.
#[test]
fn the_generated_manifests_are_not_stale() {
    let out = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("bash")
        .arg(repo("scripts/kubernetes-manifests.sh"))
        .arg(out.path())
        .env("TABLEQ", env!("CARGO_BIN_EXE_tableq"))
        .status()
        .expect("bash runs");
    assert!(status.success());
    for file in [
        "queues.d/email-outbox.toml",
        "components/keda/keda.yaml",
        "components/prometheusrule/prometheusrule.yaml",
    ] {
        let fresh = std::fs::read_to_string(out.path().join(file)).unwrap();
        assert!(
            fresh == read(&format!("kubernetes/{file}")),
            "kubernetes/{file} is stale: run scripts/kubernetes-manifests.sh"
        );
    }
    // The copy is the example but for its schema line, which still finds the schema.
    let copy = read(EXAMPLE_QUEUE);
    let (schema_line, rest) = copy.split_once('\n').unwrap();
    assert_eq!(rest, read(EXAMPLE_SOURCE).split_once('\n').unwrap().1);
    let schema = schema_line.strip_prefix("#:schema ").expect("#:schema");
    assert_eq!(
        std::fs::canonicalize(repo("kubernetes/queues.d").join(schema)).unwrap(),
        std::fs::canonicalize(repo("tableq.schema.json")).unwrap()
    );
    let rule = object(PROMETHEUSRULE, "PrometheusRule");
    let alerts = &YamlLoader::load_from_str(&read("monitoring/tableq-alerts.yml")).unwrap()[0];
    assert_eq!(rule["spec"]["groups"], alerts["groups"]);
}

/// The container's port is the metrics port; the probes, the Service and the
/// PodMonitor name it.
fn the_probes_and_the_service_use_the_metrics_port(container: &Yaml) {
    let port = &container["ports"][0];
    assert_eq!(port["containerPort"].as_i64(), Some(metrics_port()));
    let port_name = text(&port["name"], "the port's name");
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(container[probe]["httpGet"]["path"].as_str(), Some(path));
        assert_eq!(
            container[probe]["httpGet"]["port"].as_str(),
            Some(port_name)
        );
    }
    let service = object("kubernetes/service.yaml", "Service");
    assert_eq!(
        service["spec"]["ports"][0]["targetPort"].as_str(),
        Some(port_name)
    );
    assert_eq!(
        service["spec"]["ports"][0]["port"].as_i64(),
        Some(metrics_port())
    );
    let monitor = object(PODMONITOR, "PodMonitor");
    assert_eq!(
        monitor["spec"]["podMetricsEndpoints"][0]["port"].as_str(),
        Some(port_name)
    );
}

/// The Deployment stops tableq with time to drain, probes /healthz and /readyz on
/// the metrics port, runs it without root on a read-only root file system with
/// limits, and mounts the queue files and the URL file where its environment says.
#[test]
fn the_deployment_agrees_with_the_code() {
    let deployment = object("kubernetes/deployment.yaml", "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let shutdown =
        humantime::parse_duration(env_value(container, "TABLEQ_SHUTDOWN_TIMEOUT")).unwrap();
    assert_eq!(
        shutdown,
        humantime::parse_duration(DEFAULT_SHUTDOWN_TIMEOUT).unwrap()
    );
    let grace = pod["terminationGracePeriodSeconds"].as_i64().unwrap();
    assert!(
        grace as u64 > shutdown.as_secs(),
        "Kubernetes would SIGKILL mid-drain"
    );

    the_probes_and_the_service_use_the_metrics_port(container);
    assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(
        container["securityContext"]["readOnlyRootFilesystem"].as_bool(),
        Some(true)
    );
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"].as_bool(),
        Some(false)
    );
    assert!(container["resources"]["limits"]["memory"]
        .as_str()
        .is_some());
    // Commands write only to the working directory and /tmp: each has a size.
    for (name, path) in [("state", "/var/lib/tableq"), ("tmp", "/tmp")] {
        assert_eq!(mount(pod, container, name), path);
        assert!(
            volume(pod, name)["emptyDir"]["sizeLimit"]
                .as_str()
                .is_some(),
            "{path} has no sizeLimit"
        );
    }
    assert_eq!(
        container["args"][1].as_str(),
        Some(mount(pod, container, "queues").as_str())
    );
    let url_file = env_value(container, "TABLEQ_DATABASE_URL_FILE");
    let secret = volume(pod, "database");
    let item = &secret["secret"]["items"][0];
    assert_eq!(
        url_file,
        format!(
            "{}/{}",
            mount(pod, container, "database"),
            text(&item["path"], "the item's path")
        )
    );
    assert_eq!(
        secret["secret"]["defaultMode"].as_i64(),
        Some(0o440),
        "others must not read it"
    );
}

/// The names the objects use for each other are the names the objects have: the
/// generated ConfigMap and its queue files, the Secret and its keys, the Deployment
/// KEDA scales, the pods the Service, the PodMonitor and the PodDisruptionBudget
/// select.
#[test]
fn the_objects_name_each_other_rightly() {
    let deployment = object("kubernetes/deployment.yaml", "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let kustomization = &objects("kubernetes/kustomization.yaml")[0];
    let generator = &kustomization["configMapGenerator"][0];
    assert_eq!(
        volume(pod, "queues")["configMap"]["name"],
        generator["name"]
    );
    let files: Vec<&str> = generator["files"]
        .as_vec()
        .expect("the generator's files")
        .iter()
        .map(|f| text(f, "a file"))
        .collect();
    assert_eq!(files, ["queues.d/email-outbox.toml"]);
    assert!(repo("kubernetes").join(files[0]).is_file());
    let secret = object("kubernetes/secret.example.yaml", "Secret");
    let database = &volume(pod, "database")["secret"];
    assert_eq!(database["secretName"], secret["metadata"]["name"]);
    let url_key = text(&database["items"][0]["key"], "the Secret's key");
    assert!(
        !secret["stringData"][url_key].is_badvalue(),
        "the Secret has no {url_key}"
    );

    let auth = object(KEDA, "TriggerAuthentication");
    let reference = &auth["spec"]["secretTargetRef"][0];
    assert_eq!(reference["name"], secret["metadata"]["name"]);
    let key = text(&reference["key"], "the TriggerAuthentication's key");
    assert!(
        !secret["stringData"][key].is_badvalue(),
        "the Secret has no {key}"
    );
    let scaled = object(KEDA, "ScaledObject");
    assert_eq!(
        scaled["spec"]["scaleTargetRef"]["name"],
        deployment["metadata"]["name"]
    );
    assert_eq!(
        scaled["spec"]["triggers"][0]["authenticationRef"]["name"],
        auth["metadata"]["name"]
    );
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    assert_eq!(
        &deployment["spec"]["template"]["metadata"]["labels"],
        selector
    );
    let service = object("kubernetes/service.yaml", "Service");
    assert_eq!(&service["spec"]["selector"], selector);
    let monitor = object(PODMONITOR, "PodMonitor");
    assert_eq!(&monitor["spec"]["selector"]["matchLabels"], selector);
    let budget = object("kubernetes/poddisruptionbudget.yaml", "PodDisruptionBudget");
    assert_eq!(&budget["spec"]["selector"]["matchLabels"], selector);
    assert_eq!(
        budget["spec"]["maxUnavailable"].as_i64(),
        Some(1),
        "a drain takes one pod at a time, and goes through with one"
    );
}

/// The `.yaml` files of `dir` (relative to the repository) but kustomization.yaml
/// and the examples, sorted.
fn manifests_in(dir: &str) -> Vec<String> {
    let mut present: Vec<String> = std::fs::read_dir(repo(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.ends_with(".yaml") && n != "kustomization.yaml" && !n.ends_with(".example.yaml")
        })
        .collect();
    present.sort();
    present
}

/// The entries of `field` in a kustomization, sorted.
fn listed(kustomization: &Yaml, field: &str) -> Vec<String> {
    let mut listed: Vec<String> = kustomization[field]
        .as_vec()
        .unwrap_or_else(|| panic!("no {field}"))
        .iter()
        .map(|r| text(r, field).to_string())
        .collect();
    listed.sort();
    listed
}

/// The base lists every manifest of kubernetes/ but the example Secret (an apply
/// must not overwrite the real one), and holds only Kubernetes' own kinds: it
/// applies on a cluster without the KEDA and Prometheus Operator CRDs.
#[test]
fn the_base_lists_every_manifest_and_needs_no_crd() {
    let kustomization = &objects("kubernetes/kustomization.yaml")[0];
    assert_eq!(kustomization["kind"].as_str(), Some("Kustomization"));
    let resources = listed(kustomization, "resources");
    assert_eq!(resources, manifests_in("kubernetes"));
    assert!(
        kustomization["components"].is_badvalue(),
        "the base turns on no component"
    );
    for file in &resources {
        for object in objects(&format!("kubernetes/{file}")) {
            let api = text(&object["apiVersion"], "apiVersion");
            assert!(
                CORE_API_VERSIONS.contains(&api),
                "kubernetes/{file}: {api} {:?} needs a CRD: make it a component",
                object["kind"]
            );
        }
    }
}

/// Each component of kubernetes/components/ is a kustomize Component listing every
/// manifest of its folder, holding what needs a CRD; the base's commented
/// `components:` lines, which the book says to uncomment, name each one.
#[test]
fn every_component_lists_its_manifests_and_the_base_names_it() {
    let base = read("kubernetes/kustomization.yaml");
    assert!(
        base.lines().any(|l| l == "#components:"),
        "no #components: line"
    );
    let commented: Vec<&str> = base
        .lines()
        .filter_map(|l| l.strip_prefix("#  - components/"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    let mut components: Vec<String> = std::fs::read_dir(repo("kubernetes/components"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    components.sort();
    assert_eq!(commented, components);
    for component in &components {
        let dir = format!("kubernetes/components/{component}");
        let kustomization = &objects(&format!("{dir}/kustomization.yaml"))[0];
        assert_eq!(kustomization["kind"].as_str(), Some("Component"), "{dir}");
        assert_eq!(listed(kustomization, "resources"), manifests_in(&dir));
        for file in manifests_in(&dir) {
            for object in objects(&format!("{dir}/{file}")) {
                let api = text(&object["apiVersion"], "apiVersion");
                assert!(
                    !CORE_API_VERSIONS.contains(&api),
                    "{dir}/{file}: {api} belongs in the base"
                );
            }
        }
    }
}

fn volume<'a>(pod: &'a Yaml, name: &str) -> &'a Yaml {
    let volumes = pod["volumes"].as_vec().expect("volumes");
    volumes
        .iter()
        .find(|v| v["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no volume {name}"))
}

fn mount(pod: &Yaml, container: &Yaml, name: &str) -> String {
    volume(pod, name);
    let mounts = container["volumeMounts"].as_vec().expect("volumeMounts");
    let found = mounts.iter().find(|m| m["name"].as_str() == Some(name));
    text(
        &found.unwrap_or_else(|| panic!("{name} is not mounted"))["mountPath"],
        name,
    )
    .to_string()
}
