//! Go's YAML quoting (sigs.k8s.io/yaml, which kubeadm writes every file with), applied to what
//! serde_yaml wrote, so files compare byte for byte with kubeadm's.

/// Rewrites each line of `text` with [`double_quoted`]; keeps the final newline.
pub(crate) fn go_quotes(text: &str) -> String {
    let mut out: String = text.lines().map(double_quoted).collect::<Vec<_>>().join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Go's YAML writer double-quotes a string that would otherwise read as another type
/// (`value: "2"`, `""`) and single-quotes the rest, where serde_yaml single-quotes both. Only a
/// scalar that ends its line and holds no quote or backslash is rewritten: its text is then the
/// same in both styles, so the document's meaning cannot change.
pub(crate) fn double_quoted(line: &str) -> String {
    let Some(body) = line.strip_suffix('\'') else {
        return quoted_if_bool_1_1(line);
    };
    let Some(open) = body.rfind(['\'', '"']) else {
        return line.to_string();
    };
    let (head, text) = (&body[..open], &body[open + 1..]);
    let starts_scalar = head.ends_with(": ") || head.trim_start().ends_with("- ");
    if body.as_bytes()[open] != b'\'' || !starts_scalar || text.contains('\\') || !reads_as_non_string(text) {
        return line.to_string();
    }
    format!("{head}\"{text}\"")
}

/// YAML 1.1's other booleans, which go-yaml resolves as bools and so quotes as strings; serde
/// (YAML 1.2) writes them plain.
const BOOLS_1_1: &[&str] =
    &["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"];

/// A plain scalar value that go-yaml would read as a bool gets Go's double quotes.
fn quoted_if_bool_1_1(line: &str) -> String {
    let split = line.rfind(": ").map(|i| i + 2).or_else(|| {
        let t = line.trim_start();
        t.starts_with("- ").then(|| line.len() - t.len() + 2)
    });
    match split {
        Some(i) if BOOLS_1_1.contains(&&line[i..]) => format!("{}\"{}\"", &line[..i], &line[i..]),
        _ => line.to_string(),
    }
}

/// go-yaml's resolve: would this text, unquoted, be a number, a bool (YAML 1.1's too) or null?
fn reads_as_non_string(text: &str) -> bool {
    text.is_empty()
        || BOOLS_1_1.contains(&text)
        || matches!(
            serde_yaml::from_str::<serde_yaml::Value>(text),
            Ok(serde_yaml::Value::Number(_) | serde_yaml::Value::Bool(_) | serde_yaml::Value::Null)
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn single_quoted_scalars_become_double_quoted() {
        assert_eq!(double_quoted("      value: '2'"), "      value: \"2\"");
        assert_eq!(double_quoted("    - 'true'"), "    - \"true\"");
        // Quoted for its syntax, not its type: Go single-quotes it too.
        assert_eq!(double_quoted("    k: '[fd00::10]:6443'"), "    k: '[fd00::10]:6443'");
        assert_eq!(double_quoted("    - '--x=a: b'"), "    - '--x=a: b'");
        // Anything with an escaped quote, a double quote or a backslash stays as serde_yaml wrote it.
        for keep in ["  a: 'it''s'", "  a: 'say \"hi\"'", "  a: '1\\x'", "  a: plain", "  a: 'x' # c'"] {
            assert_eq!(double_quoted(keep), keep);
        }
        let pod = json!({"a": "2", "b": ["true", "x: y"], "c": "it's", "d": "", "e": "plain"});
        let text = go_quotes(&crate::objects::to_yaml(&pod).unwrap());
        assert!(text.contains("a: \"2\"") && text.contains("- \"true\"") && text.contains("d: \"\""), "{text}");
        assert_eq!(serde_yaml::from_str::<serde_json::Value>(&text).unwrap(), pod);
    }

    #[test]
    fn go_quotes_double_quote_what_serde_yaml_single_quotes() {
        let text = "a: ''\nb:\n  c: '0'\nd:\n- 'true'\ne: 'it''s'\nf: plain\ng: yes\n- off\nh: 'x: no'\n";
        let want = "a: \"\"\nb:\n  c: \"0\"\nd:\n- \"true\"\ne: 'it''s'\nf: plain\ng: \"yes\"\n- \"off\"\nh: 'x: no'\n";
        assert_eq!(go_quotes(text), want);
    }
}
