//! Runs kubestrap's static Pod manifests as the kubelet would, minus the container: the real
//! binary with exactly the manifest's command, the node root's /etc/kubernetes and
//! /var/lib/etcd over the host paths, every hostPath volume checked as the kubelet checks it,
//! and the manifest's own probes asked once the process is up.

use serde_yaml::Value;
use std::path::{Path, PathBuf};

use super::bins;
use super::net::Netns;
use super::proc::Proc;

pub struct StaticPod {
    pub file: PathBuf,
    pub doc: Value,
}

/// A probe as the manifest gives it: scheme, host, port (a named port resolved), path.
#[derive(Debug)]
pub struct Probe {
    pub kind: &'static str,
    pub url: String,
}

impl StaticPod {
    pub fn read(root: &Path, name: &str) -> StaticPod {
        let file = root.join("etc/kubernetes/manifests").join(format!("{name}.yaml"));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let doc = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        StaticPod { file, doc }
    }

    fn container(&self) -> &Value {
        &self.doc["spec"]["containers"][0]
    }

    pub fn argv(&self) -> Vec<String> {
        let c = self.container();
        let mut argv: Vec<String> = Vec::new();
        for key in ["command", "args"] {
            if let Some(list) = c[key].as_sequence() {
                argv.extend(list.iter().map(|v| v.as_str().expect("string arg").to_string()));
            }
        }
        assert!(!argv.is_empty(), "{}: no command", self.file.display());
        argv
    }

    fn str_list(v: &Value) -> Vec<&Value> {
        v.as_sequence().map(|s| s.iter().collect()).unwrap_or_default()
    }

    /// Checks what the kubelet would refuse or break on: every volumeMount names a hostPath
    /// volume; a `Directory`/`File` source exists (`...OrCreate` ones are created); every
    /// absolute path in the command lies under a mount, as it must to be seen in the container.
    pub fn check_volumes(&self, root: &Path) -> Result<(), String> {
        let f = self.file.display();
        let volumes = Self::str_list(&self.doc["spec"]["volumes"]);
        let mut mounts = Vec::new();
        for m in Self::str_list(&self.container()["volumeMounts"]) {
            let name = m["name"].as_str().expect("mount name");
            let vol = volumes
                .iter()
                .find(|v| v["name"].as_str() == Some(name))
                .ok_or_else(|| format!("{f}: volumeMount {name} has no volume"))?;
            let host = vol["hostPath"]["path"].as_str().expect("hostPath.path");
            let source = node_path(root, host);
            let ok = match vol["hostPath"]["type"].as_str().unwrap_or("") {
                "Directory" => source.is_dir(),
                "File" => source.is_file(),
                "DirectoryOrCreate" => std::fs::create_dir_all(&source).is_ok(),
                "FileOrCreate" if !source.exists() => std::fs::File::create(&source).is_ok(),
                "FileOrCreate" => source.is_file(),
                t => return Err(format!("{f}: unexpected hostPath type {t:?}")),
            };
            if !ok {
                return Err(format!("{f}: hostPath {host} ({:?}) is missing", vol["hostPath"]["type"]));
            }
            mounts.push(m["mountPath"].as_str().expect("mountPath").to_string());
        }
        for arg in self.argv() {
            for part in arg.split(['=', ',']) {
                if part.starts_with('/') && !mounts.iter().any(|m| Path::new(part).starts_with(m)) {
                    return Err(format!("{f}: {part} (in {arg}) is under no volumeMount"));
                }
            }
        }
        Ok(())
    }

    /// The probes, with a named port looked up in the container's ports.
    pub fn probes(&self) -> Vec<Probe> {
        let c = self.container();
        let mut out = Vec::new();
        for kind in ["livenessProbe", "readinessProbe", "startupProbe"] {
            let get = &c[kind]["httpGet"];
            if get.is_null() {
                continue;
            }
            let port = match &get["port"] {
                Value::Number(n) => n.as_u64().expect("port") as u16,
                Value::String(name) => {
                    let p = Self::str_list(&c["ports"])
                        .into_iter()
                        .find(|p| p["name"].as_str() == Some(name))
                        .unwrap_or_else(|| panic!("{}: {kind} names port {name}, not declared", self.file.display()));
                    p["containerPort"].as_u64().expect("containerPort") as u16
                }
                other => panic!("{}: {kind} port {other:?}", self.file.display()),
            };
            let scheme = get["scheme"].as_str().unwrap_or("HTTP").to_lowercase();
            let host = get["host"].as_str().unwrap_or("127.0.0.1");
            let path = get["path"].as_str().unwrap_or("/");
            out.push(Probe { kind, url: format!("{scheme}://{host}:{port}{path}") });
        }
        out
    }

    /// The container's image.
    pub fn image(&self) -> &str {
        self.container()["image"].as_str().unwrap_or("")
    }

    /// Starts the real binary the manifest names, of its image's version (a v1.36.3 image runs
    /// v1.36.3's binary), with its exact arguments.
    pub fn start(&self, netns: &Netns, root: &Path, logs: &Path) -> Result<Proc, String> {
        self.check_volumes(root)?;
        let mut argv = self.argv();
        argv[0] = bins::bin_for_image(self.image(), &argv[0]).display().to_string();
        let name = self.doc["metadata"]["name"].as_str().expect("name").to_string();
        Ok(Proc::start(netns, &name, &node_binds(root), &argv, &[], &logs.join(format!("{name}.log"))))
    }
}

/// A node path as seen from the host: kubestrap's own directories live under the node root.
pub fn node_path(root: &Path, path: &str) -> PathBuf {
    let owned = ["/etc/kubernetes", "/var/lib/etcd", "/var/lib/kubelet"];
    if owned.iter().any(|o| Path::new(path).starts_with(o)) {
        root.join(path.trim_start_matches('/'))
    } else {
        PathBuf::from(path)
    }
}

/// The node root's directories over the paths kubestrap's files name; only those that exist, so
/// binding never creates one (kubestrap makes /var/lib/etcd 0700 before etcd's manifest).
pub fn node_binds(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let binds = ["/etc/kubernetes", "/var/lib/etcd"].iter().map(|p| (root.join(&p[1..]), PathBuf::from(p)));
    binds.filter(|(src, _)| src.is_dir()).collect()
}

/// Every probe of the pod answers 200, asked the way the kubelet asks (no client certificate,
/// the server's certificate not verified); Err names the first that does not.
pub fn probe(netns: &Netns, pod: &StaticPod) -> Result<(), String> {
    for p in pod.probes() {
        let (code, out, _) = crate::common::capture(netns.command("curl").args([
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "2",
            &p.url,
        ]));
        if code != 0 || out != "200" {
            return Err(format!("{} {} {}: curl {code}, HTTP {out}", pod.file.display(), p.kind, p.url));
        }
    }
    Ok(())
}
