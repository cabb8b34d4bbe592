// Validates deploy/ offline (docs/deploy.md, "Kubernetes"): every manifest against Kubernetes' own
// schemas, with unknown fields refused as `kubectl apply` refuses them, then what the schemas
// cannot say: the facts execbox's pods and the router depend on.
//
// node validate.cjs NODE_PREFIX REPO KUSTOMIZE_OUTPUT|- EXECBOX|-
// (run by run.sh; ends with `N passed, M failed`)
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");
const { createRequire } = require("module");

const [prefix, repo, built, execbox] = process.argv.slice(2).map((a, i) => (i < 2 || a !== "-" ? path.resolve(a) : a));
const need = createRequire(path.join(prefix, "node_modules", "_"));
const YAML = need("yaml");

let passed = 0;
let failed = 0;
function check(name, ok, detail) {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${ok || detail === undefined ? "" : ": " + JSON.stringify(detail).slice(0, 1500)}`);
  return ok;
}

// ---- Kubernetes' schemas ------------------------------------------------------------------------

// kubernetes-models names each schema after its OpenAPI definition: io.k8s.api.<group>.<version>.<kind>.
const GROUPS = { v1: "IoK8sApiCoreV1", "apps/v1": "IoK8sApiAppsV1", "policy/v1": "IoK8sApiPolicyV1" };

// The schemas leave objects open (as Kubernetes' OpenAPI document does); the API server refuses
// unknown fields all the same. The compiled validators read every property the schema knows, so
// a field of the manifest that no validator read is unknown: each object is watched through a
// Proxy while it is validated.
function watched(value, reads, where) {
  if (value === null || typeof value !== "object") return value;
  let entry = reads.get(value);
  if (!entry) {
    const seen = new Set();
    const proxy = new Proxy(value, {
      get(target, key) {
        if (typeof key === "string") seen.add(key);
        return watched(target[key], reads, `${where}/${String(key)}`);
      },
    });
    entry = { where, seen, proxy };
    reads.set(value, entry);
  }
  return entry.proxy;
}

function validate(doc) {
  const prefixName = GROUPS[doc.apiVersion];
  const file = prefixName && path.join(prefix, "node_modules", "kubernetes-models", "_schemas", `${prefixName}${doc.kind}.js`);
  if (!file || !fs.existsSync(file)) return [`no schema for ${doc.apiVersion} ${doc.kind}`];
  const fn = need(file).validate;
  const reads = new Map();
  if (!fn(watched(doc, reads, ""))) {
    return fn.errors.map((e) => `${e.instancePath || "/"}: ${e.message || `${e.keyword} ${JSON.stringify(e.params)}`}`);
  }
  const unknown = [];
  for (const [value, { where, seen }] of reads) {
    if (Array.isArray(value)) continue;
    for (const key of Object.keys(value)) if (!seen.has(key)) unknown.push(`${where}/${key}: unknown field`);
  }
  return [...new Set(unknown)];
}

function readDocs(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
    return d.toJS();
  }).filter((d) => d !== null);
}

const kubeDir = path.join(repo, "deploy", "kubernetes");
const plain = [];
for (const name of fs.readdirSync(kubeDir).filter((n) => n.endsWith(".yaml")).sort()) {
  for (const doc of readDocs(path.join(kubeDir, name))) {
    plain.push(doc);
    const errors = validate(doc);
    check(`${name}: ${doc.kind} ${doc.metadata.name} matches Kubernetes' schema`, errors.length === 0, errors);
  }
}
// Self-test of the unknown-field check: a misspelt field must be caught.
const typo = JSON.parse(JSON.stringify(plain.find((d) => d.kind === "StatefulSet")));
typo.spec.template.spec.containers[0].readinesProbe = typo.spec.template.spec.containers[0].readinessProbe;
check("the validator refuses an unknown field (readinesProbe)",
  validate(typo).some((e) => e.includes("readinesProbe")), validate(typo));

let docs = plain;
if (built !== "-") {
  docs = readDocs(built);
  for (const doc of docs) {
    const errors = validate(doc);
    check(`kustomize build: ${doc.kind} ${doc.metadata.name} matches Kubernetes' schema`, errors.length === 0, errors);
  }
}

// ---- What execbox needs -------------------------------------------------------------------------

const find = (kind, name) => docs.find((d) => d.kind === kind && d.metadata.name === name);
const matches = (selector, labels) => Object.entries(selector || {}).every(([k, v]) => (labels || {})[k] === v);

// A small reader for execbox.toml: [tables] and key = number | "string" | bool, # comments.
function readToml(text) {
  const out = {};
  let table = "";
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\s+#.*$/, "").replace(/^#.*$/, "").trim();
    if (!line) continue;
    const t = line.match(/^\[([^\]]+)\]$/);
    if (t) { table = t[1] + "."; continue; }
    const kv = line.match(/^([A-Za-z0-9_]+)\s*=\s*(.+)$/);
    if (kv) out[table + kv[1]] = JSON.parse(kv[2]);
  }
  return out;
}
const toml = readToml(fs.readFileSync(path.join(kubeDir, "execbox.toml"), "utf8"));

const ns = find("Namespace", "execbox");
check("Namespace execbox; every object in it",
  ns && docs.every((d) => d.kind === "Namespace" || d.metadata.namespace === "execbox"),
  docs.map((d) => [d.kind, d.metadata.namespace]));

const sts = find("StatefulSet", "execbox");
const pod = sts && sts.spec.template;
const c = pod && pod.spec.containers.find((x) => x.name === "execbox");
if (check("StatefulSet execbox with its container", c)) {
  const headless = find("Service", sts.spec.serviceName);
  check("replicas 3, serviceName execbox-pods, a headless Service of that name selecting the pods",
    sts.spec.replicas === 3 && sts.spec.serviceName === "execbox-pods" && headless &&
    headless.spec.clusterIP === "None" && matches(headless.spec.selector, pod.metadata.labels) &&
    matches(sts.spec.selector.matchLabels, pod.metadata.labels),
    { spec: sts.spec.serviceName, headless });
  check("image execbox:0.1.0, IfNotPresent, command execbox serve",
    c.image === "execbox:0.1.0" && c.imagePullPolicy === "IfNotPresent" &&
    JSON.stringify(c.command) === '["execbox","serve"]', c);
  const env = Object.fromEntries((c.env || []).map((e) => [e.name, e]));
  check("EXECBOX_INSTANCE is the pod's metadata.name",
    env.EXECBOX_INSTANCE && env.EXECBOX_INSTANCE.valueFrom.fieldRef.fieldPath === "metadata.name", env.EXECBOX_INSTANCE);
  const key = env.EXECBOX_API_KEYS && env.EXECBOX_API_KEYS.valueFrom.secretKeyRef;
  check("EXECBOX_API_KEYS from Secret execbox-keys, key EXECBOX_API_KEYS",
    key && key.name === "execbox-keys" && key.key === "EXECBOX_API_KEYS", env.EXECBOX_API_KEYS);
  const probe = (p, want) => p && p.httpGet && p.httpGet.path === want && p.httpGet.port === 8080;
  check("startup and liveness probes GET /livez, readiness GET /readyz, on 8080",
    probe(c.startupProbe, "/livez") && probe(c.livenessProbe, "/livez") && probe(c.readinessProbe, "/readyz"), c);
  check("the server listens where the probes and Services look (0.0.0.0:8080)",
    toml.listen === "0.0.0.0:8080" && c.ports.some((p) => p.containerPort === 8080 && p.name === "http"),
    [toml.listen, c.ports]);
  const sc = c.securityContext || {};
  const caps = sc.capabilities || {};
  check("securityContext: root, drop ALL, add exactly SETUID, SETGID and SETFCAP, no escalation, not privileged",
    sc.runAsUser === 0 && JSON.stringify(caps.drop) === '["ALL"]' &&
    JSON.stringify([...(caps.add || [])].sort()) === '["SETFCAP","SETGID","SETUID"]' &&
    sc.allowPrivilegeEscalation === false && sc.privileged === false, sc);
  check("securityContext: seccomp and AppArmor Unconfined, read-only root, default /proc",
    sc.seccompProfile && sc.seccompProfile.type === "Unconfined" &&
    sc.appArmorProfile && sc.appArmorProfile.type === "Unconfined" && sc.readOnlyRootFilesystem === true &&
    sc.procMount === undefined && !(pod.spec.securityContext || {}).procMount, sc);
  check("no service links (the router's Service is named execbox: EXECBOX_* variables)",
    pod.spec.enableServiceLinks === false);
  const volume = (m) => pod.spec.volumes.find((v) => v.name === m.name);
  const mounts = Object.fromEntries(c.volumeMounts.map((m) => [m.mountPath, volume(m)]));
  const cm = mounts["/etc/execbox"] && mounts["/etc/execbox"].configMap;
  const config = cm && docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === cm.name);
  const tomlText = fs.readFileSync(path.join(kubeDir, "execbox.toml"), "utf8");
  check("/etc/execbox is a ConfigMap holding execbox.toml",
    cm && (built === "-" || (config && config.data["execbox.toml"] === tomlText)), cm);
  check("emptyDirs at /var/cache/execbox and /tmp",
    ["/var/cache/execbox", "/tmp"].every((p) => mounts[p] && mounts[p].emptyDir), Object.keys(mounts));
  check(`terminationGracePeriodSeconds above shutdown_grace_seconds (${toml.shutdown_grace_seconds})`,
    pod.spec.terminationGracePeriodSeconds > toml.shutdown_grace_seconds, pod.spec.terminationGracePeriodSeconds);
  const gib = (q) => Number(q.replace(/Gi$/, "")) * 1024;
  const need = 1024 + toml["admission.max_running"] * toml["limits.max.memory_mb"];
  check(`memory limit above the zygote (1 GiB) + max_running x [limits.max] memory_mb = ${need} MiB`,
    /Gi$/.test(c.resources.limits.memory) && gib(c.resources.limits.memory) > need &&
    c.resources.requests && c.resources.requests.cpu && c.resources.limits.cpu, c.resources);
  const pdb = find("PodDisruptionBudget", "execbox");
  check("PodDisruptionBudget execbox: maxUnavailable 1 over the StatefulSet's pods",
    pdb && pdb.spec.maxUnavailable === 1 && matches(pdb.spec.selector.matchLabels, pod.metadata.labels), pdb);
}

const router = find("Deployment", "execbox-router");
const rpod = router && router.spec.template;
const rc = rpod && rpod.spec.containers[0];
if (check("Deployment execbox-router", rc)) {
  const svc = find("Service", "execbox");
  check("Service execbox: ClusterIP on 8080, selecting the router's pods only",
    svc && (svc.spec.type || "ClusterIP") === "ClusterIP" && svc.spec.ports[0].port === 8080 &&
    matches(svc.spec.selector, rpod.metadata.labels) && !(pod && matches(svc.spec.selector, pod.metadata.labels)),
    svc);
  check("the router has readiness and liveness probes", rc.readinessProbe && rc.livenessProbe, rc);
  const pdb = find("PodDisruptionBudget", "execbox-router");
  check("PodDisruptionBudget execbox-router over the router's pods",
    pdb && matches(pdb.spec.selector.matchLabels, rpod.metadata.labels), pdb);
  const vol = rpod.spec.volumes.find((v) => v.configMap);
  const conf = rc.command.join(" ").match(/-c (\S+)/);
  const mount = rc.volumeMounts.find((m) => m.name === vol.name);
  check("nginx reads nginx.conf from the router's ConfigMap",
    conf && mount && conf[1] === `${mount.mountPath}/nginx.conf`, rc.command);
  const routing = fs.readFileSync(path.join(repo, "deploy", "nginx", "execbox-routing.conf"), "utf8");
  const nginxConf = fs.readFileSync(path.join(kubeDir, "router-nginx.conf"), "utf8");
  const kust = YAML.parse(fs.readFileSync(path.join(repo, "deploy", "kustomization.yaml"), "utf8"));
  const gen = kust.configMapGenerator.find((g) => vol.configMap.name.replace(/-[a-z0-9]{10}$/, "") === g.name);
  check("kustomization.yaml makes the router's ConfigMap from deploy/nginx/execbox-routing.conf itself",
    gen && gen.files.includes("execbox-routing.conf=nginx/execbox-routing.conf") &&
    gen.files.includes("nginx.conf=kubernetes/router-nginx.conf"), gen);
  if (built !== "-") {
    const cm = docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === vol.configMap.name);
    check("kustomize build: the router's ConfigMap holds execbox-routing.conf byte for byte",
      cm && cm.data["execbox-routing.conf"] === routing && cm.data["nginx.conf"] === nginxConf,
      cm && Object.keys(cm.data));
  }
  // The router finds pod NAME as NAME.<serviceName>.<namespace>.svc...:<port> of the StatefulSet.
  const target = sts ? `.${sts.spec.serviceName}.execbox.svc.cluster.local:8080` : "?";
  check(`router-nginx.conf: only names ${sts && sts.metadata.name}-N, sent to NAME${target}`,
    nginxConf.includes(`"~^(?<execbox_pod>${sts && sts.metadata.name}-[0-9]{1,5})$" $execbox_pod${target};`) &&
    nginxConf.includes(`default execbox-pods.execbox.svc.cluster.local:8080;`), target);
}

// ---- The configuration files, read by the programs that will read them -------------------------

// nginx -t on the Kubernetes variant as the ConfigMap lays it out (nginx.conf next to
// execbox-routing.conf), with a stand-in resolver (kube-dns is not here) and /tmp moved into a
// scratch directory; and on the static variant inside a minimal main configuration.
const nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"].find((p) => fs.existsSync(p));
if (!nginx) {
  console.log("skip nginx -t: nginx is not installed (scripts/install-cluster-deps.sh installs it)");
} else {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "execbox-deploy-"));
  try {
    const k8s = fs.readFileSync(path.join(kubeDir, "router-nginx.conf"), "utf8")
      .replace("resolver kube-dns.kube-system.svc.cluster.local", "resolver 127.0.0.1")
      .replaceAll("/tmp/", dir + "/");
    fs.writeFileSync(path.join(dir, "nginx.conf"), k8s);
    fs.copyFileSync(path.join(repo, "deploy", "nginx", "execbox-routing.conf"), path.join(dir, "execbox-routing.conf"));
    // Its access log is /dev/stdout, which cannot be opened on node's socket: stdout is /dev/null.
    const opts = { encoding: "utf8", stdio: ["ignore", "ignore", "pipe"] };
    let t = spawnSync(nginx, ["-t", "-p", dir + "/", "-c", path.join(dir, "nginx.conf"), "-e", "stderr"], opts);
    check("nginx -t: the Kubernetes router's configuration (stand-in resolver)", t.status === 0 && k8s.includes("resolver 127.0.0.1 "), t.stderr);
    const routing = path.join(repo, "deploy", "nginx", "execbox-routing.conf");
    const site = fs.readFileSync(path.join(repo, "deploy", "nginx", "execbox-static.conf"), "utf8").replace("/etc/nginx/execbox-routing.conf", routing);
    fs.writeFileSync(path.join(dir, "static.conf"), site);
    const temp = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((m) => `${m}_temp_path ${dir}/${m};`).join(" ");
    fs.writeFileSync(path.join(dir, "main.conf"), `pid ${dir}/nginx.pid; events {} http { access_log ${dir}/access.log; ${temp} include static.conf; }\n`);
    t = spawnSync(nginx, ["-t", "-p", dir + "/", "-c", path.join(dir, "main.conf"), "-e", "stderr"], opts);
    check("nginx -t: deploy/nginx/execbox-static.conf", t.status === 0, t.stderr);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// The pods' execbox.toml is accepted by this execbox (a key it does not know would stop every
// pod): a cold server (--no-pool) on loopback that must come up, then SIGTERM after 3 s.
if (execbox !== "-") {
  const r = spawnSync(execbox, ["serve", "--config", path.join(kubeDir, "execbox.toml"), "--listen", "127.0.0.1:0", "--no-pool"], {
    encoding: "utf8", timeout: 3000, killSignal: "SIGTERM",
    env: { ...process.env, EXECBOX_API_KEYS: "deploy-test-key-0123456789abcdef", EXECBOX_INSTANCE: "execbox-0" },
  });
  check("execbox serve starts with the pods' execbox.toml", /listening on http:\/\/127\.0\.0\.1:\d+/.test(r.stderr) && r.status === 0,
    { status: r.status, signal: r.signal, stderr: r.stderr });
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
