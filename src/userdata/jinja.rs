//! `## template: jinja` user-data, as Cluster API renders it: cloud-init runs the rest of the
//! file through Jinja with the instance data. kubestrap renders only the plain variables such
//! user-data uses (`{{ ds.meta_data.local_hostname }}`, `{{ ds.meta_data["local-hostname"] }}`,
//! `{{ v1.availability_zone }}`, ...) from the variable table (`datasource::vars`), with an
//! optional `| default("x")`, and refuses every other variable, filter or statement by name
//! rather than guess.

use super::{Notices, Parsed, cloud_config, decode};
use crate::config::ConfigError;
use crate::datasource::vars::Vars;

/// The header line that turns templating on (cloud-init's rule: the first line).
pub(super) const HEADER: &str = "## template: jinja";

/// Is this a Jinja template by cloud-init's rule?
pub(super) fn is_template(text: &str) -> bool {
    text.lines().next().is_some_and(|l| l.trim_end().eq_ignore_ascii_case(HEADER))
}

/// One `{{ ... }}`: the variable's value, or its `default("x")` when the table has none.
fn expression(inner: &str, vars: &Vars) -> Result<String, String> {
    let (name, filter) = match inner.split_once('|') {
        Some((n, f)) => (n.trim(), Some(f.trim())),
        None => (inner.trim(), None),
    };
    let default = match filter {
        None => None,
        Some(f) => match default_of(f) {
            Some(d) => Some(d),
            None => {
                return Err(format!(
                    "the Jinja filter `| {f}` in {{{{{inner}}}}} is not supported: kubestrap fills plain variables, \
                     with at most `| default(\"text\")`"
                ));
            }
        },
    };
    match (vars.jinja(name), default) {
        (Ok(v), _) => Ok(v),
        (Err(_), Some(d)) => Ok(d.to_string()),
        (Err(e), None) => Err(format!("{{{{ {name} }}}}: {e}")),
    }
}

/// The text of `default("x")` / `default('x')` (also `d(...)`, Jinja's short name).
fn default_of(filter: &str) -> Option<&str> {
    let args = filter.strip_prefix("default").or_else(|| filter.strip_prefix('d'))?.trim();
    let arg = args.strip_prefix('(')?.strip_suffix(')')?.trim();
    let q = arg.chars().next().filter(|c| matches!(c, '"' | '\''))?;
    let text = arg.strip_prefix(q)?.strip_suffix(q)?;
    (!text.contains(q)).then_some(text)
}

/// A template renders to `#cloud-config`, which is then read as such; any other text is refused.
pub(super) fn read(
    src: &str,
    text: &str,
    vars: &Vars,
    from_credential: bool,
    notices: &mut Notices,
) -> Result<Parsed, ConfigError> {
    let text = render(src, text, vars)?;
    if !decode::is_cloud_config(&text) {
        return Err(ConfigError::file(
            src,
            "is a `## template: jinja` whose next line is not #cloud-config; kubestrap renders only cloud-config templates"
                .into(),
        ));
    }
    cloud_config::read(src, &text, from_credential, notices)
}

/// Renders the template (the text after the header line); errors name the line and what was not
/// understood.
pub(super) fn render(src: &str, text: &str, vars: &Vars) -> Result<String, ConfigError> {
    let body = text.split_once('\n').map_or("", |(_, rest)| rest);
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    let line_of = |rest: &str| body[..body.len() - rest.len()].matches('\n').count() + 2;
    let err = |line: usize, msg: String| ConfigError::doc(src, "## template: jinja", &format!("line {line}"), msg);
    while let Some(start) = find_open(rest) {
        out.push_str(&rest[..start]);
        let line = line_of(&rest[start..]);
        let tag = &rest[start..start + 2];
        let close = match tag {
            "{{" => "}}",
            "{%" => "%}",
            _ => "#}",
        };
        let Some(len) = rest[start + 2..].find(close) else {
            return Err(err(line, format!("{tag} is not closed with {close}")));
        };
        let inner = &rest[start + 2..start + 2 + len];
        rest = &rest[start + 2 + len + 2..];
        // Jinja's whitespace control: `{{-` eats the whitespace before, `-}}` the whitespace after.
        if inner.starts_with('-') {
            out.truncate(out.trim_end().len());
        }
        if inner.ends_with('-') {
            rest = rest.trim_start();
        }
        match tag {
            "{#" => {}
            "{%" => {
                return Err(err(
                    line,
                    format!(
                        "the Jinja statement {{%{inner}%}} is not supported: kubestrap fills only plain variables \
                         (ds.meta_data.KEY, ds.meta_data[\"KEY\"], v1.KEY; see docs/user-data.md)"
                    ),
                ));
            }
            _ => {
                let inner = inner.trim().trim_start_matches('-').trim_end_matches('-');
                out.push_str(&expression(inner, vars).map_err(|m| err(line, m))?);
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Where the next `{{`, `{%` or `{#` starts.
fn find_open(s: &str) -> Option<usize> {
    ["{{", "{%", "{#"].iter().filter_map(|t| s.find(t)).min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::{Gathered, MetaData};

    fn vars_of(source: &str, tree: serde_json::Value) -> Vars {
        let field = |k: &str| tree.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let meta = MetaData { instance_id: field("instance-id"), local_hostname: field("local-hostname"), tree };
        Vars::new(&Gathered { source: source.into(), meta, ..Default::default() })
    }

    fn meta() -> Vars {
        vars_of("nocloud", serde_json::json!({"instance-id": "i-1", "local-hostname": "cp-0"}))
    }

    #[test]
    fn jinja_fills_the_cluster_api_variables() {
        let t = "## template: jinja\n#cloud-config\na: '{{ ds.meta_data.local_hostname }}'\nb: {{v1.local_hostname}}\n\
                 c: {{- local_hostname -}}/{{ instance_id }}{# note #}\n";
        assert!(is_template(t));
        assert_eq!(render("u", t, &meta()).unwrap(), "#cloud-config\na: 'cp-0'\nb: cp-0\nc:cp-0/i-1\n");
        // Without the header nothing is a template (cloud-init leaves such text alone).
        assert!(!is_template("#cloud-config\n## template: jinja\n"));
    }

    #[test]
    fn jinja_bracket_nested_v1_and_default() {
        let v = vars_of(
            "ec2",
            serde_json::json!({"local-hostname": "ip-1", "placement": {"availability-zone": "us-east-1a"}}),
        );
        let t = "## template: jinja\n#cloud-config\na: {{ ds.meta_data[\"local-hostname\"] }}\n\
                 b: {{ ds.meta_data.placement.availability_zone }}\nc: {{ v1['availability-zone'] }}\n\
                 d: {{ ds.meta_data.public_ipv4 | default(\"none\") }}\ne: {{ v1.region|default('x') }}\n";
        assert_eq!(
            render("u", t, &v).unwrap(),
            "#cloud-config\na: ip-1\nb: us-east-1a\nc: us-east-1a\nd: none\ne: us-east-1\n"
        );
    }

    #[test]
    fn jinja_refuses_what_it_cannot_fill_by_name() {
        let e = render("u", "## template: jinja\n#cloud-config\nx: {{ ds.meta_data.region }}\n", &meta()).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("line 3") && m.contains("ds.meta_data.region is not supplied by the nocloud datasource"),
            "{m}"
        );
        let e = render("u", "## template: jinja\n{% if x %}a{% endif %}\n", &meta()).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("{% if x %}"), "{e}");
        let e = render("u", "## template: jinja\nx: {{ local_hostname | upper }}\n", &meta()).unwrap_err();
        assert!(e.to_string().contains("`| upper` in {{local_hostname | upper}} is not supported"), "{e}");
        let e = render("u", "## template: jinja\nx: {{ local_hostname\n", &meta()).unwrap_err();
        assert!(e.to_string().contains("not closed"), "{e}");
        let empty = Vars::new(&Gathered { source: "credentials".into(), ..Default::default() });
        let e = render("u", "## template: jinja\nx: {{ local_hostname }}\n", &empty).unwrap_err().to_string();
        assert!(e.contains("local_hostname is not supplied by the credentials datasource"), "{e}");
    }
}
