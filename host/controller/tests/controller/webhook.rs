//! The pod webhook over real HTTPS on loopback, with certificates made in the test and
//! the AdmissionReview the API server sends when the Job controller creates a pod of an
//! indexed Job (`webhook/pod-create-review.json`): what it patches, what it leaves alone,
//! what it refuses to read, and the certificate it presents as the kubelet swaps the
//! files of the mounted Secret.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use switchyard_controller::{
    CertReloads, DEFAULT_WEBHOOK_PORT, MAX_REVIEW_BYTES, REVIEW_PATH, Webhook, WebhookConfig,
    WebhookError,
};
use switchyard_kube::{DEFAULT_QUEUE, QUEUE_LABEL};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The Service name the webhook configuration in deploy/webhook/ calls.
const SERVICE_DNS: &str = "switchyard-webhook.switchyard.svc";
const REVIEW: &str = include_str!("webhook/pod-create-review.json");
/// How long a test waits for what must happen before it calls it a hang.
const HANG: Duration = Duration::from_secs(20);

/// A serving certificate and its key, as cert-manager writes them.
struct Pair {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
}

fn pair() -> Pair {
    let made = rcgen::generate_simple_self_signed(vec![SERVICE_DNS.to_string()]).unwrap();
    Pair {
        cert_pem: made.cert.pem(),
        key_pem: made.signing_key.serialize_pem(),
        der: made.cert.der().clone(),
    }
}

/// Writes `tls.crt` and `tls.key` into `dir` the way the kubelet updates a mounted
/// Secret: both files into a new hidden directory, then the symlink `..data` swapped to
/// it in one rename; `tls.crt` and `tls.key` are symlinks through `..data`.
fn project_secret(dir: &Path, cert_pem: &str, key_pem: &str) {
    static VERSION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let version = format!(
        "..v{}",
        VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    std::fs::create_dir(dir.join(&version)).unwrap();
    std::fs::write(dir.join(&version).join("tls.crt"), cert_pem).unwrap();
    std::fs::write(dir.join(&version).join("tls.key"), key_pem).unwrap();
    std::os::unix::fs::symlink(&version, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for file in ["tls.crt", "tls.key"] {
        if !dir.join(file).exists() {
            std::os::unix::fs::symlink(Path::new("..data").join(file), dir.join(file)).unwrap();
        }
    }
}

fn write_pair(dir: &Path, pair: &Pair) {
    project_secret(dir, &pair.cert_pem, &pair.key_pem);
}

/// A webhook serving on a loopback port from a certificate directory of its own.
struct Served {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    first: Pair,
    reloads: watch::Receiver<CertReloads>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

async fn serve(queue: &str) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let first = pair();
    write_pair(dir.path(), &first);
    let webhook = Webhook::bind(&WebhookConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        cert_dir: dir.path().to_path_buf(),
        queue: queue.to_string(),
    })
    .await
    .unwrap();
    let (stop, stopped) = oneshot::channel();
    Served {
        addr: webhook.local_addr().unwrap(),
        reloads: webhook.reloads(),
        dir,
        first,
        stop: Some(stop),
        task: Some(tokio::spawn(webhook.serve(async {
            let _ = stopped.await;
        }))),
    }
}

impl Served {
    /// A TLS connection trusting `trusted`, and the certificate the server presented.
    async fn connect(&self, trusted: &[&Pair]) -> (TlsStream<TcpStream>, CertificateDer<'static>) {
        let mut roots = rustls::RootCertStore::empty();
        for pair in trusted {
            roots.add(pair.der.clone()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        let name = ServerName::try_from(SERVICE_DNS).unwrap();
        let tls = tokio::time::timeout(
            HANG,
            TlsConnector::from(Arc::new(config)).connect(name, tcp),
        )
        .await
        .expect("the handshake hangs")
        .expect("the handshake fails");
        let presented = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        (tls, presented)
    }

    /// POSTs `body` to `path` as the API server does, on a new connection.
    async fn post(&self, path: &str, body: &[u8]) -> (u16, Value) {
        let (tls, _) = self.connect(&[&self.first]).await;
        post_on(tls, path, body).await
    }

    async fn review(&self, review: &Value) -> Value {
        let (status, answer) = self.post(REVIEW_PATH, review.to_string().as_bytes()).await;
        allowed(status, &answer, review)
    }

    /// Waits until the reloads counted satisfy `done`.
    async fn reloads_until(&mut self, done: impl Fn(&CertReloads) -> bool) -> CertReloads {
        tokio::time::timeout(HANG, self.reloads.wait_for(|r| done(r)))
            .await
            .expect("the certificate directory's change was never taken")
            .unwrap()
            .clone()
    }

    async fn stop(mut self) {
        drop(self.stop.take());
        let task = self.task.take().unwrap();
        tokio::time::timeout(HANG, task)
            .await
            .expect("the webhook does not stop")
            .unwrap()
            .unwrap();
    }
}

/// POSTs `body` to `path` on `tls` as the API server does and reads the whole answer.
async fn post_on(mut tls: TlsStream<TcpStream>, path: &str, body: &[u8]) -> (u16, Value) {
    let head = format!(
        "POST {path}?timeout=5s HTTP/1.1\r\nhost: {SERVICE_DNS}:443\r\n\
         content-type: application/json\r\naccept: application/json, */*\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    // A server that answers before reading a too-large body may close first.
    let _ = tls.write_all(body).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(HANG, tls.read_to_end(&mut answer))
        .await
        .expect("the answer hangs");
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{answer}"));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = serde_json::from_str(body).unwrap_or_else(|_| panic!("{answer}"));
    (status, body)
}

/// The response of an answer that allows `review`'s request.
fn allowed(status: u16, answer: &Value, review: &Value) -> Value {
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1", "{answer}");
    assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
    assert_eq!(
        answer["response"]["uid"], review["request"]["uid"],
        "{answer}"
    );
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    answer["response"].clone()
}

fn review() -> Value {
    serde_json::from_str(REVIEW).unwrap()
}

/// The pod of `review` with the answer's patch applied, as the API server applies it.
fn patched_pod(review: &Value, answer: &Value) -> Value {
    assert_eq!(answer["patchType"], "JSONPatch", "{answer}");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["patch"].as_str().expect("the patch is base64 text"))
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    let mut pod = review["request"]["object"].clone();
    json_patch::patch(&mut pod, &patch).unwrap();
    pod
}

fn unpatched(answer: &Value) {
    assert!(answer.get("patch").is_none(), "{answer}");
    assert!(answer.get("patchType").is_none(), "{answer}");
}

#[tokio::test]
async fn a_pod_of_the_queue_created_without_the_gate_gets_it_and_nothing_else() {
    let served = serve("default").await;
    let review = review();
    let answer = served.review(&review).await;
    let pod = patched_pod(&review, &answer);
    assert_eq!(
        pod["spec"]["schedulingGates"],
        json!([{"name": "switchyard.dev/placement"}])
    );
    let mut without_gates = pod.clone();
    without_gates["spec"]
        .as_object_mut()
        .unwrap()
        .remove("schedulingGates");
    assert_eq!(
        without_gates, review["request"]["object"],
        "only the gates change"
    );
    served.stop().await;
}

#[tokio::test]
async fn a_pod_already_gated_is_not_gated_twice_and_other_gates_are_kept() {
    let served = serve("default").await;
    let mut gated = review();
    gated["request"]["object"]["spec"]["schedulingGates"] =
        json!([{"name": "example.com/quota"}, {"name": "switchyard.dev/placement"}]);
    unpatched(&served.review(&gated).await);

    let mut other_gate = review();
    other_gate["request"]["object"]["spec"]["schedulingGates"] =
        json!([{"name": "example.com/quota"}]);
    let answer = served.review(&other_gate).await;
    assert_eq!(
        patched_pod(&other_gate, &answer)["spec"]["schedulingGates"],
        json!([{"name": "example.com/quota"}, {"name": "switchyard.dev/placement"}])
    );
    served.stop().await;
}

#[tokio::test]
async fn a_pod_of_another_queue_or_bound_at_creation_is_allowed_unchanged() {
    let served = serve("team-a").await;
    unpatched(&served.review(&review()).await);

    let mut no_label = review();
    no_label["request"]["object"]["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("switchyard.dev/queue");
    unpatched(&served.review(&no_label).await);

    let mut bound = review();
    bound["request"]["object"]["metadata"]["labels"]["switchyard.dev/queue"] = json!("team-a");
    bound["request"]["object"]["spec"]["nodeName"] = json!("node-7");
    let answer = served.review(&bound).await;
    unpatched(&answer);
    let warning = answer["warnings"][0].as_str().unwrap();
    assert!(warning.contains("spec.nodeName"), "{warning}");
    served.stop().await;
}

#[tokio::test]
async fn a_review_of_another_kind_or_operation_is_allowed_unchanged() {
    let served = serve("default").await;
    let mut update = review();
    update["request"]["operation"] = json!("UPDATE");
    update["request"]["oldObject"] = update["request"]["object"].clone();
    unpatched(&served.review(&update).await);

    let mut job = review();
    job["request"]["kind"] = json!({"group": "batch", "version": "v1", "kind": "Job"});
    job["request"]["resource"] = json!({"group": "batch", "version": "v1", "resource": "jobs"});
    job["request"]["object"] = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "adopt-job", "namespace": "ml",
                     "labels": {"switchyard.dev/queue": "default"}},
        "spec": {"template": {"spec": {"containers": []}}}
    });
    unpatched(&served.review(&job).await);
    served.stop().await;
}

#[tokio::test]
async fn a_body_that_is_not_a_v1_admission_review_is_a_400_naming_what_is_wrong() {
    let served = serve("default").await;
    let cases: [(Vec<u8>, &str); 4] = [
        (b"{\"kind\": \"AdmissionReview\", ".to_vec(), "EOF"),
        (
            {
                let mut review = review();
                review["request"]["uid"] = json!(42);
                review.to_string().into_bytes()
            },
            "at request.uid: invalid type: integer `42`, expected a string",
        ),
        (
            {
                let mut review = review();
                review["apiVersion"] = json!("admission.k8s.io/v1beta1");
                review.to_string().into_bytes()
            },
            "apiVersion `admission.k8s.io/v1beta1`, kind `AdmissionReview`: the webhook answers apiVersion admission.k8s.io/v1",
        ),
        (
            {
                let mut review = review();
                review.as_object_mut().unwrap().remove("request");
                review.to_string().into_bytes()
            },
            "has no `request`",
        ),
    ];
    for (body, expected) in cases {
        let (status, answer) = served.post(REVIEW_PATH, &body).await;
        assert_eq!(status, 400, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(expected), "`{expected}` not in: {error}");
    }
    let (status, answer) = served.post("/mutate", b"{}").await;
    assert_eq!(status, 404, "{answer}");
    served.stop().await;
}

#[tokio::test]
async fn a_review_past_the_size_cap_is_refused_naming_the_cap() {
    let served = serve("default").await;
    let mut huge = review();
    huge["request"]["object"]["metadata"]["annotations"]["padding"] =
        json!("x".repeat(MAX_REVIEW_BYTES));
    let (status, answer) = served.post(REVIEW_PATH, huge.to_string().as_bytes()).await;
    assert_eq!(status, 413, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains(&MAX_REVIEW_BYTES.to_string()), "{error}");
    served.stop().await;
}

#[tokio::test]
async fn a_renewed_certificate_is_presented_from_the_next_handshake_on() {
    let mut served = serve("default").await;
    let (kept, presented) = served.connect(&[&served.first]).await;
    assert_eq!(presented, served.first.der);

    let renewed = pair();
    write_pair(served.dir.path(), &renewed);
    served.reloads_until(|r| r.loaded >= 2).await;
    let (_, presented) = served.connect(&[&served.first, &renewed]).await;
    assert_eq!(
        presented, renewed.der,
        "the renewed certificate is presented"
    );
    // Nothing was closed: a connection made before the renewal is still served.
    let (status, answer) = post_on(kept, REVIEW_PATH, REVIEW.as_bytes()).await;
    allowed(status, &answer, &review());
    served.stop().await;
}

#[tokio::test]
async fn a_bad_pair_on_renewal_keeps_the_previous_certificate_and_says_why() {
    let mut served = serve("default").await;
    // A key that does not belong to the certificate.
    project_secret(served.dir.path(), &served.first.cert_pem, &pair().key_pem);
    let reloads = served.reloads_until(|r| r.refused >= 1).await;
    let error = reloads.last_error.unwrap();
    assert!(
        error.contains("tls.key") && error.contains("do not form a pair"),
        "{error}"
    );
    let (_, presented) = served.connect(&[&served.first]).await;
    assert_eq!(
        presented, served.first.der,
        "the previous certificate stays"
    );

    // Not PEM at all.
    project_secret(
        served.dir.path(),
        "not a certificate",
        &served.first.key_pem,
    );
    let reloads = served.reloads_until(|r| r.refused >= 2).await;
    let error = reloads.last_error.unwrap();
    assert!(error.contains("tls.crt"), "{error}");
    let (_, presented) = served.connect(&[&served.first]).await;
    assert_eq!(presented, served.first.der);
    assert_eq!(served.reloads.borrow().loaded, 1);
    served.stop().await;
}

#[tokio::test]
async fn a_missing_or_bad_certificate_at_start_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = WebhookConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        cert_dir: dir.path().to_path_buf(),
        queue: "default".into(),
    };
    let error = Webhook::bind(&config).await.err().unwrap();
    assert!(matches!(error, WebhookError::Certificate { .. }));
    assert!(error.to_string().contains("tls.crt"), "{error}");

    let first = pair();
    write_pair(dir.path(), &first);
    project_secret(dir.path(), &first.cert_pem, "-----BEGIN PRIVATE KEY-----\n");
    let error = Webhook::bind(&config).await.err().unwrap().to_string();
    assert!(
        error.contains("tls.key") && error.contains("not a PEM private key"),
        "{error}"
    );
}

#[test]
fn the_deployed_webhook_calls_the_path_and_port_served_for_the_default_queue() {
    let configuration: Value = serde_norway::from_str(include_str!(
        "../../../../deploy/webhook/mutatingwebhook.yaml"
    ))
    .unwrap();
    let webhook = &configuration["webhooks"][0];
    assert_eq!(webhook["clientConfig"]["service"]["path"], REVIEW_PATH);
    assert_eq!(
        webhook["objectSelector"]["matchLabels"][QUEUE_LABEL],
        DEFAULT_QUEUE
    );
    let component = include_str!("../../../../deploy/webhook/kustomization.yaml");
    assert!(
        component.contains(&format!("containerPort: {DEFAULT_WEBHOOK_PORT}")),
        "{component}"
    );
    assert!(component.contains("--webhook-cert-dir="), "{component}");
}
