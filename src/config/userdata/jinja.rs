//! `## template: jinja` user-data, as Cluster API renders it: cloud-init runs the rest of the
//! file through Jinja with the instance data. kubestrap renders only the plain variables such
//! user-data uses (`{{ ds.meta_data.local_hostname }}` and friends) from the gathered meta-data,
//! and refuses every other variable, filter or statement by name rather than guess.

use crate::config::ConfigError;
use crate::datasource::MetaData;

/// The header line that turns templating on (cloud-init's rule: the first line).
pub(super) const HEADER: &str = "## template: jinja";

/// Is this a Jinja template by cloud-init's rule?
pub(super) fn is_template(text: &str) -> bool {
    text.lines().next().is_some_and(|l| l.trim_end().eq_ignore_ascii_case(HEADER))
}

/// The variables kubestrap can fill and the meta-data key each comes from. cloud-init exposes
/// `local-hostname` as `local_hostname` too, since a `-` cannot appear in a Jinja name.
fn lookup<'m>(name: &str, meta: &'m MetaData) -> Option<(&'static str, Option<&'m str>)> {
    let hostname = ("local-hostname", meta.local_hostname.as_deref());
    let instance = ("instance-id", meta.instance_id.as_deref());
    match name {
        "ds.meta_data.local_hostname" | "v1.local_hostname" | "local_hostname" => Some(hostname),
        "ds.meta_data.instance_id" | "v1.instance_id" | "instance_id" => Some(instance),
        _ => None,
    }
}

/// Renders the template (the text after the header line); errors name the line and what was not
/// understood.
pub(super) fn render(src: &str, text: &str, meta: &MetaData) -> Result<String, ConfigError> {
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
                         (ds.meta_data.local_hostname, v1.local_hostname, local_hostname, and the instance_id ones)"
                    ),
                ));
            }
            _ => {
                let name = inner.trim().trim_start_matches('-').trim_end_matches('-').trim();
                let Some((key, value)) = lookup(name, meta) else {
                    return Err(err(
                        line,
                        format!(
                            "the Jinja expression {{{{{inner}}}}} is not supported: kubestrap fills only \
                             ds.meta_data.local_hostname, v1.local_hostname, local_hostname (and the same for \
                             instance_id) from the meta-data"
                        ),
                    ));
                };
                let Some(value) = value else {
                    return Err(err(
                        line,
                        format!("{{{{ {name} }}}} needs {key} in the meta-data, and the datasource gave none"),
                    ));
                };
                out.push_str(value);
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

    fn meta() -> MetaData {
        MetaData { instance_id: Some("i-1".into()), local_hostname: Some("cp-0".into()) }
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
    fn jinja_refuses_what_it_cannot_fill_by_name() {
        let e =
            render("u", "## template: jinja\n#cloud-config\nx: {{ ds.meta_data.hostname }}\n", &meta()).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("line 3") && m.contains("ds.meta_data.hostname"), "{m}");
        let e = render("u", "## template: jinja\n{% if x %}a{% endif %}\n", &meta()).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("{% if x %}"), "{e}");
        let e = render("u", "## template: jinja\nx: {{ local_hostname | upper }}\n", &meta()).unwrap_err();
        assert!(e.to_string().contains("local_hostname | upper"), "{e}");
        let e = render("u", "## template: jinja\nx: {{ local_hostname\n", &meta()).unwrap_err();
        assert!(e.to_string().contains("not closed"), "{e}");
        let e = render("u", "## template: jinja\nx: {{ local_hostname }}\n", &MetaData::default()).unwrap_err();
        assert!(e.to_string().contains("needs local-hostname in the meta-data"), "{e}");
    }
}
