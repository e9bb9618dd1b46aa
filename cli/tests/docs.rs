//! The documentation holds together: README.md stays a front door (short), every relative
//! link in it and in docs/ leads somewhere (the file, and the heading when it names one), and
//! neither the docs nor the code cite what a reader of the repository cannot follow: tracker
//! numbers, or the shared design's old section numbers (docs/design.md has sections with titles).

use std::path::{Path, PathBuf};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const README_MAX_LINES: usize = 250;

/// README.md and every page under docs/.
fn doc_files() -> Vec<PathBuf> {
    let root = Path::new(ROOT);
    let mut files = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("a docs/ directory")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of a Markdown file outside fenced code blocks, with their numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// A line without its inline code spans, which may hold anything.
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// The targets of the `[text](target)` links of a line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        targets.push(after[..end].trim().to_owned());
        rest = &after[end..];
    }
    targets
}

/// The anchor GitHub gives a heading: lowercase, punctuation dropped except `-` and `_`, each
/// space a `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings; a repeated heading gets `-1`, `-2`, … as on
/// GitHub.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for (_, line) in prose_lines(text) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base = slug(title.trim_end_matches('#'));
        let repeats = seen
            .iter()
            .filter(|a| **a == base || a.strip_prefix(&format!("{base}-")).is_some_and(is_count))
            .count();
        seen.push(if repeats == 0 {
            base
        } else {
            format!("{base}-{repeats}")
        });
    }
    seen
}

fn is_count(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// What is wrong with a link from `from`, if anything.
fn broken(from: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else {
        from.parent().expect("a directory").join(path)
    };
    if !file.exists() {
        return Some(format!("{target}: no such file"));
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|x| x != "md") {
        return Some(format!(
            "{target}: an anchor into a file that is not Markdown"
        ));
    }
    if anchors(&read(&file)).iter().any(|a| a == anchor) {
        None
    } else {
        Some(format!("{target}: no heading with that anchor"))
    }
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut problems = Vec::new();
    for file in doc_files() {
        let text = read(&file);
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if let Some(problem) = broken(&file, &target) {
                    problems.push(format!("{}:{n}: {problem}", file.display()));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_stays_short() {
    let lines = read(&Path::new(ROOT).join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail into docs/"
    );
}

/// The shared design's old section numbers, as the code used to cite them (built from two
/// pieces so that this file does not cite one itself).
const OLD_DESIGN_CITATION: &str = concat!("design", " §");
/// Words that, followed by a number, cite a tracker: an issue, or a numbered part of one.
const TRACKER_WORDS: [&str; 3] = ["issue", "window", "turn"];

/// Whether a line cites a tracker number or an old design section (case-insensitive). A
/// tracker word counts only as a whole word followed by a space and a digit, so a `return`
/// of a number is not a citation.
fn cites_a_number(line: &str) -> bool {
    let line = line.to_lowercase();
    if line.contains(OLD_DESIGN_CITATION) {
        return true;
    }
    TRACKER_WORDS.iter().any(|word| {
        line.match_indices(word).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            let after = &line.as_bytes()[at + word.len()..];
            !before.is_some_and(char::is_alphanumeric)
                && after.len() >= 2
                && after[0] == b' '
                && after[1].is_ascii_digit()
        })
    })
}

/// Every file under `dir`, build output and virtual environments left out.
fn files_under(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name == "target" || name.starts_with(".venv") {
            continue;
        }
        if path.is_dir() {
            files_under(&path, into);
        } else {
            into.push(path);
        }
    }
}

/// Every file of the code: the crates, their tests and benches, and the scripts.
fn code_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in [
        "src",
        "core",
        "harness",
        "functions",
        "cli",
        "tests",
        "benches",
        "test-support",
        "infra",
    ] {
        files_under(&Path::new(ROOT).join(dir), &mut files);
    }
    files.sort();
    files
}

/// `file:line: text` for each line of `files` that cites a number.
fn citations(files: &[PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let Ok(bytes) = std::fs::read(file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            if cites_a_number(line) {
                found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_readme_and_docs_cite_no_tracker_numbers_or_old_design_sections() {
    let found = citations(&doc_files());
    assert!(
        found.is_empty(),
        "name the concept (docs/design.md has titled sections):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_code_cites_no_tracker_numbers_or_old_design_sections() {
    let files = code_files();
    let found = citations(&files);
    assert!(
        found.is_empty(),
        "{} lines name a number, not a concept (docs/design.md has titled sections):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn headings_become_github_anchors() {
    assert_eq!(slug("Outages: the breaker"), "outages-the-breaker");
    assert_eq!(
        slug("Deliveries ledger (key `delivery_key`)"),
        "deliveries-ledger-key-delivery_key"
    );
    assert_eq!(
        anchors("# A\n```sh\n# not a heading\n```\n## A\n### B #\n"),
        ["a", "a-1", "b"]
    );
    // Built with format!, so that this file holds no citation of its own.
    assert!(cites_a_number(&format!("see Issue {}", 12)));
    assert!(cites_a_number(&format!("as DESIGN {}4 says", '§')));
    assert!(!cites_a_number(&format!("return {};", 0)));
    assert!(!cites_a_number("a window of 30 s"));
}

/// Every counter `remindctl chaos --json` prints is named in docs/testing.md, so a reader of the
/// JSON finds what each means.
#[test]
fn every_chaos_counter_is_named_in_the_testing_docs() {
    let page = read(&Path::new(ROOT).join("docs/testing.md"));
    let json = serde_json::to_value(reminders_harness::chaos::Tally::default()).unwrap();
    let unnamed: Vec<&String> = json
        .as_object()
        .expect("the tally is a JSON object")
        .keys()
        .filter(|k| !page.contains(&format!("`{k}`")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "docs/testing.md does not name these chaos counters: {unnamed:?}"
    );
}

/// The section titles a text names after `docs/design.md,`: each quoted title that follows,
/// joined by `,` or `and`, across the comment markers of a wrapped line.
fn named_design_sections(text: &str) -> Vec<String> {
    const CITE: &str = "docs/design.md,";
    let mut titles = Vec::new();
    for (at, _) in text.match_indices(CITE) {
        let rest: String = text[at + CITE.len()..].chars().take(400).collect();
        let flat: Vec<&str> = rest
            .lines()
            .map(|l| {
                l.trim_start()
                    .trim_start_matches(['/', '!', '#', '*'])
                    .trim()
            })
            .collect();
        let flat = flat.join(" ");
        let mut s = flat.trim_start();
        while let Some(quoted) = s.strip_prefix('"') {
            let Some(end) = quoted.find('"') else { break };
            titles.push(quoted[..end].to_owned());
            s = quoted[end + 1..].trim_start();
            s = s
                .strip_prefix(',')
                .or_else(|| s.strip_prefix("and "))
                .map_or(s, str::trim_start);
        }
    }
    titles
}

/// The titles of a Markdown file's headings, as written.
fn heading_titles(text: &str) -> Vec<String> {
    prose_lines(text)
        .into_iter()
        .filter_map(|(_, line)| {
            let title = line.strip_prefix('#')?.trim_start_matches('#');
            title.starts_with(' ').then(|| title.trim().to_owned())
        })
        .collect()
}

/// A design section the code names by title (`docs/design.md, "Fallback chain"`) is a heading
/// of docs/design.md: renaming a section fails here until its citations follow.
#[test]
fn every_design_section_the_code_names_is_a_heading_of_the_design() {
    let titles = heading_titles(&read(&Path::new(ROOT).join("docs/design.md")));
    let files = code_files();
    let (mut named, mut dangling) = (0, Vec::new());
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "rs"))
    {
        for title in named_design_sections(&read(file)) {
            named += 1;
            if !titles.contains(&title) {
                dangling.push(format!("{}: \"{title}\"", file.display()));
            }
        }
    }
    // The code names about a hundred sections: a reader that found none is broken.
    assert!(
        named >= 50,
        "only {named} design sections named in the code"
    );
    assert!(
        dangling.is_empty(),
        "sections docs/design.md has no heading for:\n{}",
        dangling.join("\n")
    );
}

#[test]
fn design_citations_are_read_across_wrapped_comment_lines() {
    let code = "// the chain (docs/design.md,\n    // \"Fallback chain\" and \"Ledger\"), then\n\
                //! see docs/design.md, \"Outages\".\n";
    assert_eq!(
        named_design_sections(code),
        ["Fallback chain", "Ledger", "Outages"]
    );
    assert_eq!(
        heading_titles("# Design\n```\n# no\n```\n## Fallback chain\n"),
        ["Design", "Fallback chain"]
    );
}

/// The names a YAML section lists at `indent` spaces (`  Name:` or `  NAME: value`), from
/// the line `section` to the next line at its indent or less.
fn yaml_keys(text: &str, section: &str, indent: usize) -> Vec<String> {
    let mut keys = Vec::new();
    let mut lines = text.lines().skip_while(|l| l.trim_end() != section);
    let Some(head) = lines.next() else {
        return keys;
    };
    let base = head.len() - head.trim_start().len();
    for line in lines {
        let depth = line.len() - line.trim_start().len();
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if depth <= base {
            break;
        }
        let key = line.trim().split_once(':').map(|(k, _)| k);
        let named =
            key.filter(|k| !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if let (true, Some(key)) = (depth == indent, named) {
            keys.push(key.to_owned());
        }
    }
    keys
}

/// Whether `docs` names `name` in code: as it is, or, for a channel's variable
/// (`SMS_PROVIDER`), as the channels' pattern (`<CHANNEL>_PROVIDER`).
fn named_in(docs: &str, name: &str) -> bool {
    let pattern = ["PUSH_", "EMAIL_", "SMS_"]
        .iter()
        .find_map(|c| name.strip_prefix(c))
        .map(|rest| format!("`<CHANNEL>_{rest}`"));
    docs.contains(&format!("`{name}`")) || pattern.is_some_and(|p| docs.contains(&p))
}

/// docs/configuration.md names every parameter `template.yaml` takes and every variable it
/// sets on a function (the template's tests hold those to what the code reads).
#[test]
fn the_configuration_docs_name_every_template_parameter_and_variable() {
    let template = read(&Path::new(ROOT).join("template.yaml"));
    let docs = read(&Path::new(ROOT).join("docs/configuration.md"));
    let parameters = yaml_keys(&template, "Parameters:", 2);
    let mut variables: Vec<String> = Vec::new();
    let lines: Vec<&str> = template.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_end().ends_with("Variables:") {
            let depth = line.len() - line.trim_start().len();
            for key in yaml_keys(&lines[i..].join("\n"), line.trim_end(), depth + 2) {
                if !variables.contains(&key) {
                    variables.push(key);
                }
            }
        }
    }
    assert!(parameters.len() >= 40, "parameters read: {parameters:?}");
    assert!(variables.len() >= 20, "variables read: {variables:?}");
    let missing: Vec<&String> = parameters
        .iter()
        .chain(&variables)
        .filter(|name| !named_in(&docs, name))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not name: {missing:?}"
    );
}

#[test]
fn yaml_keys_reads_one_section_at_its_indent() {
    let yaml = "A:\n  One:\n    Type: x\n  # a comment\n\n  Two: 3\nB:\n  Three:\n";
    assert_eq!(yaml_keys(yaml, "A:", 2), ["One", "Two"]);
    assert_eq!(yaml_keys(yaml, "B:", 2), ["Three"]);
    assert!(named_in("`<CHANNEL>_PROVIDER`", "SMS_PROVIDER"));
    assert!(named_in("`SMS_QUEUE_URL`", "SMS_QUEUE_URL"));
    assert!(!named_in("`<CHANNEL>_PROVIDER`", "SMS_QUEUE_URL"));
    assert!(!named_in("`FOO_BAR`", "FOO"));
}
