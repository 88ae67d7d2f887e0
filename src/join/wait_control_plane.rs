//! `wait-control-plane`, the last phase of a control-plane join (kubeadm ≥ 1.31): wait for the
//! kubelet's healthz, then for this node's own API server's `/livez` at its advertise address and
//! bind port, so the join ends with a serving control plane, not just files on disk. kubeadm also
//! polls the controller-manager and scheduler; their health ports are loopback-only and nothing
//! here depends on them, so they are left to their own probes.

use std::net::SocketAddr;
use std::time::Duration;

use log::info;

use super::JoinContext;
use crate::clock::Clock;
use crate::error::Result;
use crate::kube::{Auth, Client, Trust};
use crate::paths;
use crate::retry::{Attempt, GaveUp, Retry};
use crate::timeouts::{CONTROL_PLANE_CHECK_RETRY, REQUEST};

/// One endpoint to wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    /// "kubelet" or "kube-apiserver".
    pub component: &'static str,
    pub url: String,
    pub timeout: Duration,
}

/// The kubelet's healthz from its config on disk (kubelet-start wrote it); `None` when the
/// config turns it off (`healthzPort: 0`).
pub(crate) fn kubelet_check(config_yaml: &str, timeout: Duration) -> Option<Check> {
    let kc: serde_yaml::Mapping = serde_yaml::from_str(config_yaml).unwrap_or_default();
    crate::objects::kubelet::healthz_url(&kc).map(|url| Check { component: "kubelet", url, timeout })
}

/// This node's API server, where its manifest makes it listen.
pub(crate) fn apiserver_check(local: SocketAddr, timeout: Duration) -> Check {
    Check { component: "kube-apiserver", url: format!("https://{local}/livez"), timeout }
}

/// Waits for each check in turn (kubeadm: the kubelet first), polling (`CONTROL_PLANE_CHECK_RETRY`)
/// until its own timeout; `probe` answers one attempt. Each first healthy answer goes in the boot
/// timeline when `report` is given.
pub(crate) fn wait_all(
    checks: &[Check],
    clock: &dyn Clock,
    report: Option<&crate::status::Reporter>,
    probe: &dyn Fn(&Check) -> std::result::Result<(), String>,
) -> Result<()> {
    for c in checks {
        info!(
            "[wait-control-plane] Waiting for a healthy {} at {}. This can take up to {:?}",
            c.component, c.url, c.timeout
        );
        let what = format!("waiting for the {} at {}", c.component, c.url);
        let retry = Retry {
            what: &what,
            tag: "wait-control-plane",
            timeout: c.timeout,
            backoff: &CONTROL_PLANE_CHECK_RETRY,
            clock,
        };
        let (t, since) = (clock.now(), crate::clock::boot_ms());
        retry.run::<_, GaveUp>(|| match probe(c) {
            Ok(()) => Attempt::Done(()),
            Err(e) => Attempt::Wait(e),
        })?;
        info!("[wait-control-plane] The {} is healthy after {:.3?}", c.component, clock.now() - t);
        if let Some(r) = report {
            r.span(&format!("{} healthy", c.component), since);
        }
    }
    Ok(())
}

/// The phase: skipped on a worker join, like the other control-plane phases.
pub fn phase(ctx: &JoinContext) -> Result<()> {
    let Some(cp) = super::control_plane::control_plane(ctx, "wait-control-plane") else { return Ok(()) };
    let cfg = super::control_plane::node_config(ctx, cp)?;
    let mut checks = Vec::new();
    let kubelet_yaml = ctx.node.fs.read(&paths::KUBELET_CONFIG)?.unwrap_or_default();
    checks.extend(kubelet_check(&String::from_utf8_lossy(&kubelet_yaml), ctx.args.kubelet_health_timeout));
    let local = SocketAddr::new(cfg.advertise_address, cfg.bind_port);
    checks.push(apiserver_check(local, ctx.args.control_plane_health_timeout));
    // The API server's serving certificate is checked against the cluster CA (kubeadm skips
    // verification); /livez needs no credentials.
    let ca = ctx.node.fs.read(paths::cert(cfg.certs_dir(), "ca"))?.unwrap_or_default();
    let api = ctx.api(Client::new(&format!("https://{local}"), Trust::Ca(ca), Auth::Anonymous, REQUEST)?);
    wait_all(&checks, ctx.node.clock, ctx.node.report, &|c| {
        if c.component == "kubelet" {
            return match &ctx.dry_run_api {
                Some(r) => match r.exchange("GET", "/healthz", None, "kubelet healthz") {
                    (200, _) => Ok(()),
                    (code, _) => Err(format!("{} answered HTTP {code}", c.url)),
                },
                None => crate::kube::http_ok(&c.url, REQUEST).map_err(|e| e.to_string()),
            };
        }
        match api.request("GET", "/livez", None) {
            Ok((200, _)) => Ok(()),
            Ok((code, body)) => Err(format!("/livez answered HTTP {code}: {}", crate::kube::why_unhealthy(&body))),
            Err(e) => Err(e.to_string()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use std::sync::Mutex;

    #[test]
    fn the_kubelet_healthz_comes_from_its_config() {
        let t = Duration::from_secs(240);
        let c = kubelet_check("kind: KubeletConfiguration\nhealthzPort: 40123\n", t).unwrap();
        assert_eq!(c.url, "http://127.0.0.1:40123/healthz");
        let c = kubelet_check("healthzBindAddress: ::1\n", t).unwrap();
        assert_eq!(c.url, "http://[::1]:10248/healthz");
        assert_eq!(kubelet_check("healthzPort: 0\n", t), None);
        assert_eq!(kubelet_check("", t).unwrap().url, "http://127.0.0.1:10248/healthz");
        let api = apiserver_check("[fd00::3]:6443".parse().unwrap(), t);
        assert_eq!(api.url, "https://[fd00::3]:6443/livez");
    }

    #[test]
    fn the_kubelet_first_then_the_api_server_each_within_its_timeout() {
        let clock = FakeClock::new();
        let kubelet = Check { component: "kubelet", url: "k".into(), timeout: Duration::from_secs(240) };
        let api = Check { component: "kube-apiserver", url: "a".into(), timeout: Duration::from_secs(240) };
        let probes = Mutex::new(Vec::new());
        // The kubelet answers after 3 s, the API server 20 s after that.
        wait_all(&[kubelet.clone(), api.clone()], &clock, None, &|c| {
            probes.lock().unwrap().push(c.component);
            let up = if c.component == "kubelet" { 3 } else { 23 };
            if clock.elapsed() >= Duration::from_secs(up) { Ok(()) } else { Err(format!("{} down", c.component)) }
        })
        .unwrap();
        let probes = probes.into_inner().unwrap();
        let first_api = probes.iter().position(|p| *p == "kube-apiserver").unwrap();
        assert!(probes[..first_api].iter().all(|p| *p == "kubelet"), "{probes:?}");
        assert!(probes[first_api..].iter().all(|p| *p == "kube-apiserver"), "{probes:?}");
        let e = clock.elapsed();
        assert!(e >= Duration::from_secs(23) && e < Duration::from_secs(24), "{e:?}");
        // Every 50 ms for 100 attempts (5 s), then doubling to kubeadm's 500 ms poll (with our
        // ±25% jitter): a component coming up at first boot is seen within a poll, one that
        // takes a while is polled every ~500 ms.
        let waits = clock.waits();
        let ms = Duration::from_millis;
        assert!(waits[0].duration >= ms(37) && waits[0].duration <= ms(63), "{:?}", waits[0].duration);
        assert!(waits.iter().all(|w| w.duration >= ms(37) && w.duration <= ms(625)));
        let api_waits: Vec<Duration> =
            waits.iter().filter(|w| w.why == "kube-apiserver down").map(|w| w.duration).collect();
        assert!(api_waits.len() > 110, "{}", api_waits.len());
        assert!(api_waits[..100].iter().all(|d| *d <= ms(63)), "the first 100 polls are fast");
        assert!(api_waits[104..].iter().all(|d| *d >= ms(375)), "then at the 500 ms cap");
        assert!(waits.iter().any(|w| w.why == "kube-apiserver down"));

        // A kubelet that never comes up: the timeout names it and the API server is never asked.
        let clock = FakeClock::new();
        let asked = Mutex::new(0);
        let e = wait_all(&[kubelet, api], &clock, None, &|c| {
            assert_eq!(c.component, "kubelet");
            *asked.lock().unwrap() += 1;
            Err("connection refused".into())
        })
        .unwrap_err();
        assert!(e.message.contains("waiting for the kubelet at k: gave up after 240s"), "{}", e.message);
        assert!(e.message.contains("last reason: connection refused"), "{}", e.message);
        assert_eq!(clock.elapsed(), Duration::from_secs(240));
        assert!(*asked.lock().unwrap() > 300, "polled every ~500 ms for 240 s");
    }
}
