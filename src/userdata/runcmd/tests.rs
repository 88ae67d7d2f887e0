use super::*;

fn entries(yaml: &str) -> Result<Vec<Entry>, ConfigError> {
    parse("u", "runcmd", &serde_yaml::from_str(yaml).unwrap(), &mut Notices::default())
}

fn kubeadm(e: &Entry) -> (&[String], &[Command], &[Command]) {
    match e {
        Entry::Kubeadm { argv, before, after, .. } => (argv, before, after),
        other => panic!("not the kubeadm step: {other:?}"),
    }
}

fn sh(origin: &str, line: &str) -> Command {
    Command { origin: origin.into(), action: Action::Shell(line.into()) }
}

#[test]
fn runcmd_finds_cluster_api_kubeadm_lines() {
    // Cluster API's init line (single-quoted, two spaces for an empty verbosity) and join line.
    let e = entries(
        "- \"swapoff -a\"\n- 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'\n- \"echo done\"\n",
    )
    .unwrap();
    assert_eq!(e[0], Entry::Commands(vec![sh("runcmd[0]", "swapoff -a")]));
    let (argv, before, after) = kubeadm(&e[1]);
    assert_eq!(argv, ["kubeadm", "init", "--config", "/run/kubeadm/kubeadm.yaml"]);
    assert!(before.is_empty());
    let sentinel = Action::Echo {
        path: "/run/cluster-api/bootstrap-success.complete".into(),
        text: "success\n".into(),
        append: false,
    };
    assert_eq!(after, [Command { origin: "runcmd[1]".into(), action: sentinel }]);
    assert_eq!(e[2], Entry::Commands(vec![sh("runcmd[2]", "echo done")]));
    let e = entries("- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml --v 5 && mkdir -p /run/a && echo ok >> /run/a/b\n")
        .unwrap();
    let (argv, _, after) = kubeadm(&e[0]);
    assert_eq!(argv.len(), 6);
    assert_eq!(after[0].action, Action::Mkdir(vec!["/run/a".into()]));
    assert_eq!(after[1].action, Action::Echo { path: "/run/a/b".into(), text: "ok\n".into(), append: true });
}

#[test]
fn runcmd_unwraps_sh_c_argv_lists_and_sudo() {
    let e = entries("- [sh, -c, 'modprobe br_netfilter && sudo kubeadm join 10.0.0.1:6443 --token=x']\n").unwrap();
    let (argv, before, _) = kubeadm(&e[0]);
    assert_eq!(argv, ["kubeadm", "join", "10.0.0.1:6443", "--token=x"]);
    assert_eq!(before, [sh("runcmd[0]", "modprobe br_netfilter")]);
    let e = entries("- [/usr/bin/kubeadm, init, --config, /k.yaml]\n- [echo, 'a b', \"it's\"]\n").unwrap();
    assert_eq!(kubeadm(&e[0]).0[0], "kubeadm");
    assert_eq!(e[1], Entry::Commands(vec![sh("runcmd[1]", "echo 'a b' \"it's\"")]));
    // Other kubeadm commands run by a shell; image pulls are skipped.
    let mut n = Notices::default();
    let v = serde_yaml::from_str("[kubeadm config images pull, kubeadm token list]").unwrap();
    let e = parse("u", "runcmd", &v, &mut n).unwrap();
    assert_eq!(e[0], Entry::Commands(vec![]));
    assert_eq!(e[1], Entry::Commands(vec![sh("runcmd[1]", "kubeadm token list")]));
    assert!(n[0].contains("skipped"), "{n:?}");
}

#[test]
fn runcmd_runs_entries_that_only_mention_kubeadm_as_the_shell_would() {
    // Data, not commands: a heredoc writing a join script for later, echo's arguments, quoted
    // text, and a kubeadm subcommand kubestrap does not perform.
    let yaml = r#"
- |
  cat > /root/join-later.sh <<'EOF'
  #!/bin/sh
  kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef; echo joined
  EOF
- echo kubeadm join 10.0.0.1:6443 >> /root/notes.txt
- ["echo", "kubeadm", "init"]
- printf '%s\n' "kubeadm init; done" > /root/x
- |
  cat <<-EOT >> /etc/motd
  	run: kubeadm join ... | tee
  	EOT
  chmod 0600 /etc/motd
- cat <<< "kubeadm init"
"#;
    let got = entries(yaml).unwrap();
    assert_eq!(got.len(), 6);
    for (i, e) in got.iter().enumerate() {
        let Entry::Commands(cmds) = e else { panic!("entry {i} taken for the kubeadm step: {e:?}") };
        assert_eq!(cmds.len(), 1, "entry {i}");
    }
    // The heredoc entry runs whole through the shell, as cloud-init would run it.
    let Entry::Commands(c) = &got[0] else { unreachable!() };
    assert!(matches!(&c[0].action, Action::Shell(l) if l.contains("<<'EOF'") && l.contains("kubeadm join")));
    // Executed, it is still the kubeadm step (or refused when it cannot be split).
    let sudo = entries("- sudo -E kubeadm join 10.0.0.1:6443 --token t\n").unwrap();
    assert!(matches!(sudo[0], Entry::Kubeadm { .. }));
    let e = entries("- FOO=1 kubeadm init\n").unwrap_err().to_string();
    assert!(e.contains("through \"FOO=1\""), "an environment kubestrap cannot honour: {e}");
    let e = entries("- |\n  cat > /tmp/x <<EOF\n  data\n  EOF\n  kubeadm init\n").unwrap_err().to_string();
    assert!(e.contains("line break"), "a kubeadm line after a heredoc still runs: {e}");
    let e = entries("- if true; then kubeadm init; fi\n").unwrap_err().to_string();
    assert!(e.contains("`;`"), "{e}");
}

#[test]
fn runcmd_refuses_kubeadm_lines_it_cannot_split() {
    for (line, what) in [
        ("kubeadm init | tee /root/init.log", "pipe"),
        ("kubeadm init; echo done", "`;`"),
        ("kubeadm init || true", "`||`"),
        ("kubeadm join --token $TOKEN 10.0.0.1:6443", "`$`"),
        ("kubeadm init --node-name=`hostname`", "backtick"),
        ("kubeadm init > /root/init.log", "redirect"),
        ("(cd /root && kubeadm init)", "subshell"),
        ("timeout 600 kubeadm init", "\"timeout\""),
    ] {
        let e = entries(&format!("- '{}'\n", line.replace('\'', "''"))).unwrap_err().to_string();
        assert!(e.contains("runcmd[0]") && e.contains(what), "{line}: {e}");
    }
    let e = entries("- kubeadm init && kubeadm join\n").unwrap_err().to_string();
    assert!(e.contains("twice"), "{e}");
    let e = parse("u", "bootcmd", &serde_yaml::from_str("[kubeadm init]").unwrap(), &mut Notices::default());
    assert!(e.unwrap_err().to_string().contains("belongs in runcmd"));
}

#[test]
fn runcmd_native_echo_and_mkdir_only_when_nothing_expands() {
    assert_eq!(
        native("echo success > /run/x"),
        Some(Action::Echo { path: "/run/x".into(), text: "success\n".into(), append: false })
    );
    assert_eq!(
        native("echo \"a  b\" c >/x"),
        Some(Action::Echo { path: "/x".into(), text: "a  b c\n".into(), append: false })
    );
    assert!(!mentions_kubeadm_step("echo 'kubeadm init done' | tee /x"));
    assert!(mentions_kubeadm_step("(cd /root && kubeadm init)"));
    for shell_only in [
        "echo $HOME > /x",
        "echo -n a > /x",
        "echo a > x",
        "echo a > /x/../y",
        "echo a > /x; ls",
        "echo 'a\\n' > /x",
        "mkdir -p $HOME/.kube",
        "mkdir /etc/docker/",
        "echo a | tee /x",
    ] {
        assert_eq!(native(shell_only), None, "{shell_only}");
    }
}
