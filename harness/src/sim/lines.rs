//! The reports' line layout: a label, then its text wrapped under itself.

/// A report line: `label` in the first 20 columns, `text` after it, wrapped at 100 columns
/// under itself.
pub fn hanging(label: &str, text: &str) -> String {
    const INDENT: usize = 20;
    const WIDTH: usize = 100;
    let mut out = format!("{label:<INDENT$}");
    let mut col = out.chars().count();
    for (i, word) in text.split(' ').enumerate() {
        let len = word.chars().count();
        if i > 0 && col + 1 + len > WIDTH {
            out += &format!("\n{:INDENT$}", "");
            col = INDENT;
        } else if i > 0 {
            out.push(' ');
            col += 1;
        }
        out += word;
        col += len;
    }
    out + "\n"
}
