//! The module paths a module's code names: after `crate::`, `super::` (once per `super`),
//! `self::` or the name of one of its child modules, in any spelling (`a::b`, `a::{b, c::d}`,
//! `a::*`). Inside an inline module (`mod tests { use super::*; }`) `super` and `self` count
//! from that module, so a test module's `use super::*` names its own file.

use super::tree::ModPath;
use std::collections::BTreeSet;
use std::ops::Range;

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The absolute paths (`crate`-relative, not yet resolved to modules) that the code of
/// `module` names. `code` has neither comments nor literals (see
/// [`strip_comments_and_literals`](super::lex::strip_comments_and_literals)); `children` are
/// the names of `module`'s child modules.
pub fn references(module: &[String], code: &str, children: &BTreeSet<String>) -> Vec<ModPath> {
    let inline = inline_modules(code);
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (i, _) in code.match_indices("::") {
        // The identifier just before `::`, starting a path (not preceded by `::` or an ident).
        let start = code[..i].rfind(|c: char| !is_ident(c)).map_or(0, |j| j + 1);
        if start == i || (start >= 2 && &code[start - 2..start] == "::") {
            continue;
        }
        if start > 0 && bytes[start - 1] == b'$' {
            continue; // `$crate::` in macros
        }
        // The module the code at `start` is in: the file's, or an inline one within it.
        let here = || -> ModPath {
            let mut here = module.to_vec();
            here.extend(
                inline
                    .iter()
                    .filter(|(_, body)| body.contains(&start))
                    .map(|(name, _)| name.clone()),
            );
            here
        };
        let (base, at) = match &code[start..i] {
            "crate" => (Vec::new(), i + 2),
            "self" => (here(), i + 2),
            "super" => {
                // `super::super::...` climbs once per segment.
                let (mut base, mut at) = (here(), start);
                while code[at..].starts_with("super::") {
                    base.pop();
                    at += "super::".len();
                }
                (base, at)
            }
            child if children.contains(child) => {
                out.push(module.iter().cloned().chain([child.to_string()]).collect());
                continue;
            }
            _ => continue,
        };
        for path in paths_after(code, at) {
            out.push(base.iter().cloned().chain(path).collect());
        }
    }
    out
}

/// The inline modules of `code` (`mod name { ... }`), each as its name and the byte range of
/// its body, outermost first.
fn inline_modules(code: &str) -> Vec<(String, Range<usize>)> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("mod") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(is_ident) {
            continue;
        }
        let rest = &code[at + 3..];
        let name_at = rest.len() - rest.trim_start().len();
        if name_at == 0 {
            continue; // `module`, `mod_path`, ...
        }
        let rest = &rest[name_at..];
        let name_len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let after = rest[name_len..].trim_start();
        if name_len == 0 || !after.starts_with('{') {
            continue; // `mod name;`: a file of its own
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((rest[..name_len].to_string(), open..open + i));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The paths written at `at` in `src` (`a::b`, `a::{b, c::d}`), each as its segments.
fn paths_after(src: &str, at: usize) -> Vec<Vec<String>> {
    let rest = &src[at..];
    let ident_len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
    if ident_len > 0 {
        let head = rest[..ident_len].to_string();
        let after = &rest[ident_len..];
        if let Some(tail) = after.strip_prefix("::") {
            let next = at + ident_len + 2;
            let tails = paths_after(src, next + (tail.len() - tail.trim_start().len()));
            return tails
                .into_iter()
                .map(|t| std::iter::once(head.clone()).chain(t).collect())
                .collect();
        }
        return vec![vec![head]];
    }
    if rest.starts_with('{') {
        // The items of the group, split at its top-level commas, each a path of its own.
        let mut out = Vec::new();
        let (mut depth, mut item) = (0usize, at + 1);
        for (i, c) in rest.char_indices().skip(1) {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 0 => {
                    let text = &src[item..at + i];
                    if !text.trim().is_empty() {
                        out.extend(paths_after(
                            src,
                            item + text.len() - text.trim_start().len(),
                        ));
                    }
                    if c == '}' {
                        break;
                    }
                    item = at + i + 1;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        return out;
    }
    vec![Vec::new()]
}
