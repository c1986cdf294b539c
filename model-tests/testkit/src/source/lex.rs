//! Rust source without its prose: comments out, and for the import reader the contents of
//! string and character literals too. What goes out becomes spaces, byte for byte, newlines
//! kept: every byte keeps its offset, so a rule can find a thing in the stripped text and read
//! it, or report its line, in the original.
//!
//! A small scanner, not a parser: it knows where comments and literals start and end (`//`,
//! nested `/* */`, `"..."` with escapes, raw strings `r#"..."#` and their `b`/`c` forms,
//! `'x'` and `'\n'` as opposed to a lifetime `'a`), which is all the rules need.

/// `text` with every comment (line, doc and nested block comments) blanked. Literals stay as
/// written.
pub fn strip_comments(text: &str) -> String {
    scrub(text, false)
}

/// [`strip_comments`], and the contents of every string and character literal blanked too (the
/// quotes stay): a path written in a message is no reference.
pub fn strip_comments_and_literals(text: &str) -> String {
    scrub(text, true)
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn scrub(text: &str, blank_literals: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Scrubbed {
        text: String::with_capacity(text.len()),
        blank_literals,
    };
    let mut i = 0;
    while i < chars.len() {
        let next = chars.get(i + 1).copied();
        i = match chars[i] {
            '/' if next == Some('/') => {
                let end = chars[i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(chars.len(), |n| i + n);
                chars[i..end].iter().for_each(|&c| out.blank(c));
                end
            }
            '/' if next == Some('*') => block_comment(&chars, i, &mut out),
            '"' => string(&chars, i, None, &mut out),
            '\'' => char_or_lifetime(&chars, i, &mut out),
            c if is_ident_start(c) => {
                let end = chars[i..]
                    .iter()
                    .position(|&c| !is_ident(c))
                    .map_or(chars.len(), |n| i + n);
                let word: String = chars[i..end].iter().collect();
                out.text.push_str(&word);
                let hashes = chars[end..].iter().take_while(|&&c| c == '#').count();
                let raw = matches!(word.as_str(), "r" | "br" | "cr")
                    && chars.get(end + hashes) == Some(&'"');
                if raw {
                    out.text.extend(std::iter::repeat_n('#', hashes));
                    string(&chars, end + hashes, Some(hashes), &mut out)
                } else {
                    end
                }
            }
            c => {
                out.text.push(c);
                i + 1
            }
        };
    }
    out.text
}

/// The text being written, and whether literals' contents go.
struct Scrubbed {
    text: String,
    blank_literals: bool,
}

impl Scrubbed {
    /// Writes `c` as blanks of its length (a newline as itself).
    fn blank(&mut self, c: char) {
        if c == '\n' {
            self.text.push('\n');
        } else {
            self.text.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    }

    /// Writes a character inside a literal: itself, or blanks.
    fn literal_char(&mut self, c: char) {
        if self.blank_literals {
            self.blank(c);
        } else {
            self.text.push(c);
        }
    }
}

/// The block comment at `at` (nested ones inside it), blanked; returns where it ends.
fn block_comment(chars: &[char], at: usize, out: &mut Scrubbed) -> usize {
    let (mut depth, mut i) = (0usize, at);
    while i < chars.len() {
        let step = match (chars[i], chars.get(i + 1)) {
            ('/', Some('*')) => {
                depth += 1;
                2
            }
            ('*', Some('/')) => {
                depth -= 1;
                2
            }
            _ => 1,
        };
        chars[i..i + step].iter().for_each(|&c| out.blank(c));
        i += step;
        if depth == 0 {
            return i;
        }
    }
    i
}

/// The string literal whose opening quote is at `at`; `raw`: a raw string with that many `#`s
/// (no escapes). Returns where it ends.
fn string(chars: &[char], at: usize, raw: Option<usize>, out: &mut Scrubbed) -> usize {
    let hashes = raw.unwrap_or(0);
    out.text.push('"');
    let mut i = at + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if raw.is_none() => {
                out.literal_char('\\');
                if let Some(&escaped) = chars.get(i + 1) {
                    out.literal_char(escaped);
                }
                i += 2;
            }
            '"' if chars[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes =>
            {
                out.text.push('"');
                out.text.extend(std::iter::repeat_n('#', hashes));
                return i + 1 + hashes;
            }
            c => {
                out.literal_char(c);
                i += 1;
            }
        }
    }
    i
}

/// A character literal (`'x'`, `'\''`, `'\u{..}'`) at `at`, or the quote of a lifetime or
/// label; returns where it ends.
fn char_or_lifetime(chars: &[char], at: usize, out: &mut Scrubbed) -> usize {
    let close = match (chars.get(at + 1), chars.get(at + 2)) {
        // An escape: the closing quote is the first one after the escaped character.
        (Some('\\'), _) => chars
            .get(at + 3..)
            .and_then(|rest| rest.iter().position(|&c| c == '\''))
            .map(|n| at + 3 + n),
        (Some(_), Some('\'')) => Some(at + 2),
        _ => None,
    };
    out.text.push('\'');
    let Some(close) = close else {
        return at + 1;
    };
    for &c in &chars[at + 1..close] {
        out.literal_char(c);
    }
    out.text.push('\'');
    close + 1
}
