//! Go's text/tabwriter, as kubeadm's tables use it.

/// Go's text/tabwriter as kubeadm configures it (minwidth 10, padding 3, spaces): every
/// tab-terminated cell is padded to its column's width; a line's last cell is written as is;
/// an empty line ends the table (its columns are measured apart from the next one's).
pub fn tabwrite(lines: &[String]) -> String {
    let mut out = String::new();
    for block in lines.split(|l| l.is_empty()) {
        let rows: Vec<Vec<&str>> = block.iter().map(|l| l.split('\t').collect()).collect();
        let mut widths: Vec<usize> = Vec::new();
        for r in &rows {
            for (i, cell) in r.iter().take(r.len().saturating_sub(1)).enumerate() {
                let w = (cell.chars().count() + 3).max(10);
                if widths.len() <= i {
                    widths.push(w);
                } else if widths[i] < w {
                    widths[i] = w;
                }
            }
        }
        for r in &rows {
            let last = r.len().saturating_sub(1);
            for (i, cell) in r.iter().enumerate() {
                out.push_str(cell);
                if i < last {
                    let pad = widths[i].saturating_sub(cell.chars().count());
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push('\n');
        }
        out.push('\n');
    }
    // `split` yields one block more than there are separators: drop the last block's blank line.
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabwriter_pads_columns_per_table() {
        let lines = vec!["A\tBB\tlast".to_string(), "CCCC\t\tx".into(), String::new(), "Z\tq".into()];
        assert_eq!(tabwrite(&lines), "A         BB        last\nCCCC                x\n\nZ         q\n");
    }
}
