//! The files a Pipe task's init container writes, read from its shell script: the
//! fallback for a pipe pod whose containers do not run (a simulated pod of opkit's local
//! cluster, whose image is neither loaded nor built in), which `pods/exec` cannot copy
//! the files out of. It understands
//! the forms pipe pods use to write a file — `echo [-n] WORDS > FILE` (or `>>`),
//! `printf FORMAT [ARGS] > FILE`, `cat > FILE <<EOF` … `EOF` here-documents and
//! `touch FILE` (an empty file) — in a
//! `sh -c` / `bash -c` script, with shell quoting but without variable expansion; a file
//! written any other way is reported as not produced.

use std::collections::BTreeMap;

/// Splits a command line into words (single and double quotes, backslash escapes).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                if !matches!(n, '"' | '\\' | '$' | '`') {
                                    cur.push('\\');
                                }
                                cur.push(n);
                            }
                        }
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '>' => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
                if chars.peek() == Some(&'>') {
                    chars.next();
                    out.push(">>".into());
                } else {
                    out.push(">".into());
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// Expands `printf`'s escapes and `%s` conversions.
fn printf(format: &str, args: &[String]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            },
            '%' => match chars.next() {
                Some('s' | 'd') => out.push_str(args.next().map(String::as_str).unwrap_or_default()),
                Some('%') => out.push('%'),
                Some(o) => {
                    out.push('%');
                    out.push(o);
                }
                None => out.push('%'),
            },
            c => out.push(c),
        }
    }
    out
}

/// The script of a container's `command` + `args` when it is `SHELL -c SCRIPT`.
pub(crate) fn shell_script(argv: &[String]) -> Option<String> {
    let shell = argv.first()?;
    let base = shell.rsplit('/').next().unwrap_or_default();
    if !matches!(base, "sh" | "bash" | "ash" | "dash") {
        return None;
    }
    let i = argv.iter().position(|a| a == "-c")?;
    argv.get(i + 1).cloned()
}

/// The files `script` writes, by path.
pub(crate) fn files_written(script: &str) -> BTreeMap<String, String> {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut lines = script.lines();
    while let Some(line) = lines.next() {
        for command in line.split("&&").flat_map(|c| c.split(';')) {
            let w = words(command);
            // `touch FILE...` makes empty files (and leaves existing ones).
            if w.first().is_some_and(|c| c == "touch") {
                for file in w[1..].iter().filter(|f| !f.starts_with('-')) {
                    files.entry(file.clone()).or_default();
                }
                continue;
            }
            let Some(redirect) = w.iter().position(|t| t == ">" || t == ">>") else { continue };
            let Some(target) = w.get(redirect + 1).cloned() else { continue };
            let append = w[redirect] == ">>";
            let (head, tail) = (&w[..redirect], &w[redirect + 2..]);
            let content = match head.first().map(String::as_str) {
                Some("echo") => {
                    let mut args: Vec<String> = head[1..].iter().chain(tail).cloned().collect();
                    let newline = if args.first().is_some_and(|a| a == "-n") {
                        args.remove(0);
                        false
                    } else {
                        true
                    };
                    let mut s = args.join(" ");
                    if newline {
                        s.push('\n');
                    }
                    s
                }
                Some("printf") => {
                    let args: Vec<String> = head[1..].iter().chain(tail).cloned().collect();
                    match args.split_first() {
                        Some((format, rest)) => printf(format, rest),
                        None => String::new(),
                    }
                }
                Some("cat") => {
                    let marker = command.split("<<").nth(1).map(|m| {
                        m.split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .trim_matches(|c| c == '\'' || c == '"' || c == '-')
                            .to_string()
                    });
                    let Some(marker) = marker.filter(|m| !m.is_empty()) else { continue };
                    let mut body = String::new();
                    for l in lines.by_ref() {
                        if l.trim() == marker {
                            break;
                        }
                        body.push_str(l);
                        body.push('\n');
                    }
                    body
                }
                _ => continue,
            };
            let entry = files.entry(target).or_default();
            if append {
                entry.push_str(&content);
            } else {
                *entry = content;
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_echo_printf_and_heredocs() {
        let script = "mkdir -p /tmp/out && echo \"hello world\" > /tmp/out/a.txt; echo -n 'x=1' >> /tmp/out/env\nprintf 'k=%s\\n' v > /tmp/out/p\ncat > /tmp/out/h <<EOF\nline 1\nline 2\nEOF\n";
        let files = files_written(script);
        assert_eq!(files["/tmp/out/a.txt"], "hello world\n");
        assert_eq!(files["/tmp/out/env"], "x=1");
        assert_eq!(files["/tmp/out/p"], "k=v\n");
        assert_eq!(files["/tmp/out/h"], "line 1\nline 2\n");
        let touched = files_written("touch /tmp/tls.key && touch /tmp/tls.crt");
        assert_eq!(touched.get("/tmp/tls.key").map(String::as_str), Some(""));
    }

    #[test]
    fn finds_the_shell_script() {
        let argv: Vec<String> = ["/bin/sh", "-c", "echo a > /f"].map(String::from).to_vec();
        assert_eq!(shell_script(&argv).as_deref(), Some("echo a > /f"));
        assert_eq!(shell_script(&["python".to_string()]), None);
    }
}
