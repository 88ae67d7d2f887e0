use super::*;
use serde_json::json;

const VECTORS: &str = include_str!("../../tests/fixtures/test-vectors.json");
const CERT1: &str = include_str!("../../tests/fixtures/pubkeypin-testCert.pem");
const CERT2: &str = include_str!("../../tests/fixtures/pubkeypin-testCert2.pem");
const PIN1: &str = "sha256:345959acb2c3b2feb87d281961c893f62a314207ef02599f1cc4a5fb255480b3";
const PIN2: &str = "sha256:d1ef16989563fe7775f81a7dc55ce16a467ca9baedae2d081cb0a068b6a81971";

/// Test vectors use ids/secrets outside the token format (e.g. "joshua", an empty secret).
fn raw_token(id: &str, secret: &str) -> Token {
    Token { id: id.into(), secret: secret.into() }
}

fn token() -> Token {
    Token::parse("abcdef.0123456789abcdef").unwrap()
}

fn der_of(pem: &str) -> Vec<u8> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    p.contents
}

/// A kubeconfig shaped like clientcmd.Write's output for cluster-info.
fn ci_kubeconfig(server: &str, ca_pem: &str) -> String {
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: {server}\n  \
         name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n",
        B64.encode(ca_pem)
    )
}

fn configmap(kubeconfig: &str, signers: &[&Token]) -> Value {
    let mut data = serde_json::Map::new();
    data.insert("kubeconfig".into(), json!(kubeconfig));
    for t in signers {
        data.insert(format!("jws-kubeconfig-{}", t.id), json!(jws_sign(kubeconfig, t)));
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": data})
}

fn good_cm() -> (String, Value) {
    let kc = ci_kubeconfig("https://10.0.0.10:6443", CERT1);
    let cm = configmap(&kc, &[&token()]);
    (kc, cm)
}

fn pin1() -> Vec<CaPin> {
    vec![CaPin::parse(PIN1).unwrap()]
}

// --- tokens

#[test]
fn token_parse_accepts_the_format() {
    let t = Token::parse("abcdef.0123456789abcdef").unwrap();
    assert_eq!(t.id(), "abcdef");
    assert_eq!(t.secret(), "0123456789abcdef");
    assert_eq!(t.bearer(), "abcdef.0123456789abcdef");
}

#[test]
fn token_parse_errors_never_contain_the_secret() {
    let secret = "0123456789abcdeZ";
    for bad in [
        format!("abcdef.{secret}"),
        format!("ABCDEF.{secret}"),
        format!("abcdef{secret}"),
        format!("abcdef.{secret}x"),
        format!("abcdef.{secret}\n"),
        format!("abc.{secret}"),
        format!("{secret}.abcdef"),
        "abcdef.0123456789abcde".to_string(),
        String::new(),
    ] {
        let err = Token::parse(&bad).unwrap_err().to_string();
        assert!(!err.contains(secret) && !err.contains("0123456789abcde"), "{err}");
        assert!(err.contains("6 characters"), "{err}");
    }
    assert_eq!(Token::parse("abcdef.0123456789abcdef\n").unwrap_err(), BadToken::Whitespace);
    let e = Token::parse("abcdef.0123").unwrap_err();
    assert_eq!(e, BadToken::BadSecret { id: "abcdef".into(), chars: 4 });
    assert!(e.to_string().starts_with("the secret of token \"abcdef\" (after the '.') is malformed (4 characters)"));
}

#[test]
fn token_debug_redacts_the_secret() {
    let d = format!("{:?}", token());
    assert!(d.contains("abcdef") && d.contains("redacted"), "{d}");
    assert!(!d.contains("0123456789abcdef"), "{d}");
}

// --- JWS

#[test]
fn jws_vectors_from_test_vectors_json() {
    let v: Value = serde_json::from_str(VECTORS).unwrap();
    let mut checked = 0;
    for case in v["jws_detached_hs256"].as_array().unwrap() {
        let t = raw_token(case["token_id"].as_str().unwrap(), case["token_secret"].as_str().unwrap());
        let content = case["content"].as_str().unwrap();
        if let Some(want) = case["expected"].as_str() {
            assert_eq!(jws_sign(content, &t), want, "{}", case["origin"]);
            assert!(jws_verify(content, &t, want), "{}", case["origin"]);
            if let Some(h) = case["protected_header_b64"].as_str() {
                assert!(want.starts_with(&format!("{h}..")));
            }
            checked += 1;
        }
        if let Some(bad) = case["must_not_validate"].as_str() {
            assert!(!jws_verify(content, &t, bad), "{}", case["origin"]);
            checked += 1;
        }
    }
    assert_eq!(checked, 7);
}

#[test]
fn jws_rejects_foo_appended() {
    let t = raw_token("joshua", "my voice is my passcode");
    let content = "Hello from the other side. I must have called a thousand times.";
    let good = "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8";
    assert!(jws_verify(content, &t, good));
    assert!(!jws_verify(content, &t, &format!("{good}foo")));
}

#[test]
fn jws_header_is_exact() {
    let sig = jws_sign("x", &raw_token("joshua", "s"));
    assert!(sig.starts_with("eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9.."), "{sig}");
    let header = B64URL.decode(sig.split('.').next().unwrap()).unwrap();
    assert_eq!(header, br#"{"alg":"HS256","kid":"joshua"}"#);
}

#[test]
fn jws_verify_rejects_every_other_form() {
    let t = token();
    let content = "apiVersion: v1\n";
    let good = jws_sign(content, &t);
    assert!(jws_verify(content, &t, &good));
    let (header, sig) = good.split_once("..").unwrap();
    let other_header = B64URL.encode(r#"{"alg":"HS256", "kid":"abcdef"}"#);
    let none_header = B64URL.encode(r#"{"alg":"none","kid":"abcdef"}"#);
    let attached = format!("{header}.{}.{sig}", B64URL.encode(content));
    let padded = format!("{good}=");
    let mut flipped = good.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    for bad in [
        format!("{other_header}..{sig}"),
        format!("{none_header}.."),
        format!("{header}.."),
        attached,
        padded,
        flipped,
        format!("{header}...{sig}"),
        format!("{header}.{sig}"),
        format!(" {good}"),
        sig.to_string(),
        String::new(),
    ] {
        assert!(!jws_verify(content, &t, &bad), "accepted {bad:?}");
    }
    // Wrong secret, other id, other content.
    assert!(!jws_verify(content, &Token::parse("abcdef.0123456789abcdee").unwrap(), &good));
    assert!(!jws_verify(content, &Token::parse("abcdeg.0123456789abcdef").unwrap(), &good));
    assert!(!jws_verify("apiVersion: v1", &t, &good));
}

// --- pins

#[test]
fn pin_vectors() {
    assert_eq!(CaPin::of_cert_der(&der_of(CERT1)).unwrap().to_string(), PIN1);
    assert_eq!(CaPin::of_cert_der(&der_of(CERT2)).unwrap().to_string(), PIN2);
    assert!(CaPin::of_cert_der(b"not a cert").is_err());
}

#[test]
fn pin_parse_accepts_and_rejects_as_kubeadm() {
    let p = CaPin::parse(PIN1).unwrap();
    assert_eq!(p.to_string(), PIN1);
    let upper = "SHA256:345959ACB2C3B2FEB87D281961C893F62A314207EF02599F1CC4A5FB255480B3";
    assert_eq!(CaPin::parse(upper).unwrap(), p);
    assert_eq!(CaPin::parse(&PIN1.replace("sha256", "Sha256")).unwrap(), p);
    let hash = PIN1.strip_prefix("sha256:").unwrap();
    for (bad, why) in [
        ("xyz".to_string(), "malformed"),
        ("sha256:xyz".to_string(), "hex characters"),
        ("0011223344".to_string(), "malformed"),
        ("sha256:0011223344".to_string(), "hex characters"),
        (format!("sha256:{hash}{hash}"), "hex characters"),
        (hash.to_string(), "malformed"),
        (format!("md5:{hash}"), "unsupported format"),
        (format!("sha256:{hash}:x"), "malformed"),
        (format!("sha256:{}g", &hash[..63]), "not valid hex"),
        (format!("sha256: {}", &hash[..63]), "not valid hex"),
        (String::new(), "malformed"),
    ] {
        let err = CaPin::parse(&bad).unwrap_err().to_string();
        assert!(err.contains(why), "{bad:?}: {err}");
        assert!(err.starts_with(&format!("CA cert hash {bad:?} ")), "{err}");
    }
}

#[test]
fn check_any_passes_on_any_match_and_lists_pins_otherwise() {
    let c1 = der_of(CERT1);
    let c2 = der_of(CERT2);
    let p1 = CaPin::parse(PIN1).unwrap();
    let p2 = CaPin::parse(PIN2).unwrap();
    let both = vec![c1, c2];
    let (only1, only2) = (&both[..1], &both[1..]);
    check_any(&[p1], only1).unwrap();
    check_any(&[p1], &[both[1].clone(), both[0].clone()]).unwrap();
    check_any(&[p2, p1], only2).unwrap();
    let err = check_any(&[p1], only2).unwrap_err().to_string();
    assert!(err.contains(PIN2) && !err.contains(PIN1), "{err}");
    let err = check_any(&[], &both).unwrap_err().to_string();
    assert!(err.contains(&format!("{PIN1}:{PIN2}")), "{err}");
    let err = check_any(&[p1], &[both[1].clone(), b"junk".to_vec()]).unwrap_err().to_string();
    assert!(err.starts_with("CA certificate #2 is not an X.509 certificate"), "{err}");
}

// --- cluster-info

#[test]
fn cluster_info_good() {
    let (kc, cm) = good_cm();
    let info = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
    assert_eq!(info.server, "https://10.0.0.10:6443");
    assert_eq!(info.ca_pem, CERT1.as_bytes());
    assert_eq!(info.kubeconfig, kc);
    // Several signers: only ours matters.
    let other = Token::parse("zzzzzz.zzzzzzzzzzzzzzzz").unwrap();
    let cm = configmap(&kc, &[&other, &token()]);
    validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
}

#[test]
fn cluster_info_unsigned() {
    let (kc, _) = good_cm();
    let other = Token::parse("zzzzzz.zzzzzzzzzzzzzzzz").unwrap();
    for cm in [configmap(&kc, &[]), configmap(&kc, &[&other])] {
        let err = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap_err();
        assert_eq!(err, DiscoveryProblem::NotSignedYet { token_id: "abcdef".into() });
        assert!(err.to_string().contains("jws-kubeconfig-abcdef"), "{err}");
    }
    let mut cm = configmap(&kc, &[]);
    cm["data"]["jws-kubeconfig-abcdef"] = json!("");
    assert!(matches!(validate_cluster_info(&cm, &token(), &pin1(), false), Err(DiscoveryProblem::NotSignedYet { .. })));
}

#[test]
fn cluster_info_tampered() {
    let (kc, mut cm) = good_cm();
    // Tampered signature.
    let sig = cm["data"]["jws-kubeconfig-abcdef"].as_str().unwrap().to_string();
    let mut cm_sig = cm.clone();
    cm_sig["data"]["jws-kubeconfig-abcdef"] = json!(format!("{}A", &sig[..sig.len() - 1]));
    let err = validate_cluster_info(&cm_sig, &token(), &pin1(), false).unwrap_err();
    assert_eq!(err, DiscoveryProblem::BadSignature { token_id: "abcdef".into() });
    assert!(err.to_string().contains("secret is wrong"), "{err}");
    // Tampered content (server swapped), signature kept.
    cm["data"]["kubeconfig"] = json!(kc.replace("10.0.0.10", "10.6.6.6"));
    assert!(matches!(validate_cluster_info(&cm, &token(), &pin1(), false), Err(DiscoveryProblem::BadSignature { .. })));
}

#[test]
fn cluster_info_wrong_secret() {
    let (_, cm) = good_cm();
    let wrong = Token::parse("abcdef.0123456789abcdee").unwrap();
    assert_eq!(
        validate_cluster_info(&cm, &wrong, &pin1(), false).unwrap_err(),
        DiscoveryProblem::BadSignature { token_id: "abcdef".into() }
    );
}

#[test]
fn cluster_info_pin_mismatch_lists_the_served_pin() {
    let (_, cm) = good_cm();
    let err = validate_cluster_info(&cm, &token(), &[CaPin::parse(PIN2).unwrap()], false).unwrap_err();
    assert_eq!(err, DiscoveryProblem::PinMismatch { got: vec![PIN1.to_string()] });
    assert!(err.to_string().contains(PIN1), "{err}");
    // No pins at all, without the explicit skip: refused, naming the served pin.
    let err = validate_cluster_info(&cm, &token(), &[], false).unwrap_err();
    assert_eq!(err, DiscoveryProblem::NoPins { got: vec![PIN1.to_string()] });
}

#[test]
fn cluster_info_bundle_matches_on_any_cert() {
    let kc = ci_kubeconfig("https://cp.example:6443", &format!("{CERT2}{CERT1}"));
    let cm = configmap(&kc, &[&token()]);
    validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
    let err = validate_cluster_info(&cm, &token(), &[CaPin([7; 32])], false).unwrap_err();
    assert_eq!(err, DiscoveryProblem::PinMismatch { got: vec![PIN2.to_string(), PIN1.to_string()] });
}

#[test]
fn cluster_info_skip_ca_verification() {
    let (_, cm) = good_cm();
    let info = validate_cluster_info(&cm, &token(), &[], true).unwrap();
    assert_eq!(info.ca_pem, CERT1.as_bytes());
    validate_cluster_info(&cm, &token(), &[CaPin::parse(PIN2).unwrap()], true).unwrap();
    // Skipping the pin never skips the signature.
    let wrong = Token::parse("abcdef.0123456789abcdee").unwrap();
    assert!(matches!(validate_cluster_info(&cm, &wrong, &[], true), Err(DiscoveryProblem::BadSignature { .. })));
}

#[test]
fn cluster_info_two_clusters() {
    let one = ci_kubeconfig("https://a:6443", CERT1);
    let (head, tail) = one.split_once("contexts:").unwrap();
    let cluster = head.strip_prefix("apiVersion: v1\nclusters:\n").unwrap().replace("name: \"\"", "name: b");
    let two = format!("{head}{cluster}contexts:{tail}");
    let cm = configmap(&two, &[&token()]);
    let err = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap_err();
    assert!(matches!(&err, DiscoveryProblem::BadKubeconfig(m) if m.contains("2 clusters")), "{err}");
    // And none.
    let none = "apiVersion: v1\nclusters: null\nkind: Config\n";
    let err = validate_cluster_info(&configmap(none, &[&token()]), &token(), &pin1(), false).unwrap_err();
    assert!(matches!(&err, DiscoveryProblem::BadKubeconfig(m) if m.contains("0 clusters")), "{err}");
}

#[test]
fn cluster_info_garbage_kubeconfig() {
    let cases = [
        ("{{{ not yaml", "not valid YAML"),
        ("apiVersion: v1\nkind: Pod\nclusters: []\n", "kind \"Pod\""),
        (
            "apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    server: https://a\n",
            "no certificate-authority-data",
        ),
        (
            "apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    certificate-authority-data: AAAA\n",
            "no server",
        ),
        (
            "kind: Config\nclusters:\n- name: x\n  cluster:\n    server: https://a\n    certificate-authority-data: '%%%'\n",
            "not base64",
        ),
    ];
    for (kc, want) in cases {
        let err = validate_cluster_info(&configmap(kc, &[&token()]), &token(), &pin1(), false).unwrap_err();
        assert!(matches!(&err, DiscoveryProblem::BadKubeconfig(m) if m.contains(want)), "{kc:?}: {err}");
    }
    // CA data that is base64 but not a certificate.
    let kc = ci_kubeconfig("https://a:6443", "hello");
    let err = validate_cluster_info(&configmap(&kc, &[&token()]), &token(), &[], true).unwrap_err();
    assert!(matches!(&err, DiscoveryProblem::BadKubeconfig(m) if m.contains("no PEM CERTIFICATE")), "{err}");
    let broken = CERT1.replace("MII", "MIX");
    let kc = ci_kubeconfig("https://a:6443", &broken);
    assert!(matches!(
        validate_cluster_info(&configmap(&kc, &[&token()]), &token(), &[], true),
        Err(DiscoveryProblem::BadKubeconfig(_))
    ));
    // No kubeconfig key at all.
    let cm = json!({"data": {"jws-kubeconfig-abcdef": "x"}});
    assert!(matches!(validate_cluster_info(&cm, &token(), &pin1(), false), Err(DiscoveryProblem::BadKubeconfig(_))));
    assert!(matches!(
        validate_cluster_info(&json!({}), &token(), &pin1(), false),
        Err(DiscoveryProblem::BadKubeconfig(_))
    ));
}

#[test]
fn second_fetch_must_be_identical() {
    let (kc, cm) = good_cm();
    let info = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
    same_kubeconfig(&info, &cm).unwrap();
    // Signatures may change between fetches; only the kubeconfig counts.
    let other = Token::parse("zzzzzz.zzzzzzzzzzzzzzzz").unwrap();
    same_kubeconfig(&info, &configmap(&kc, &[&other])).unwrap();
    for changed in [format!("{kc}\n"), kc.replace("10.0.0.10", "10.0.0.11")] {
        assert_eq!(same_kubeconfig(&info, &configmap(&changed, &[&token()])), Err(DiscoveryProblem::Changed));
    }
    assert!(same_kubeconfig(&info, &json!({})).is_err());
}

#[test]
fn tls_bootstrap_kubeconfig_shape() {
    let (_, cm) = good_cm();
    let info = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
    let k = tls_bootstrap_kubeconfig(&info, &token());
    assert_eq!(k.current_context, "tls-bootstrap-token-user@kubernetes");
    let (cluster, user) = k.current().unwrap();
    assert_eq!(cluster.server, "https://10.0.0.10:6443");
    assert_eq!(B64.decode(&cluster.certificate_authority_data).unwrap(), CERT1.as_bytes());
    assert_eq!(user.unwrap().token, "abcdef.0123456789abcdef");
    assert_eq!(k.clusters[0].name, "kubernetes");
    assert_eq!(k.users[0].name, "tls-bootstrap-token-user");
    // It round-trips through our own loader.
    assert_eq!(Kubeconfig::parse(k.to_yaml().unwrap().as_bytes()).unwrap(), k);
}

#[test]
fn problems_read_as_advice() {
    for p in [
        DiscoveryProblem::Transport("connection refused".into()),
        DiscoveryProblem::NoClusterInfo,
        DiscoveryProblem::Changed,
    ] {
        assert!(p.to_string().contains("cluster-info"), "{p}");
    }
}
