//! Light Markdown for streamed text: headings, `**bold**`, `*emphasis*`, `` `code` ``, bullets,
//! quotes and fenced code blocks are styled as the text streams, holding back only the few
//! characters that decide a marker (`#`, `` ``` ``, `*`, `-`), so the answer never waits.
//!
//! Each [`Markdown::push`] turns a piece of text into what to write; styles never bleed past the
//! end of a line. It draws with SGR codes only (no cursor movement), so the terminal's own
//! wrapping and scrollback stay intact. It knows nothing of terminals, themes or events; with
//! `color` off the text passes through unchanged.

/// SGR codes of the styles the text is drawn in.
mod sgr {
    pub const RESET: &str = "\x1b[0m";
    pub const BOLD: &str = "1";
    pub const ITALIC: &str = "3";
    pub const DIM: &str = "2";
    pub const CODE: &str = "36";
    pub const HEADING: &str = "1;35";
}

/// The longest prefix held back at the start of a line to decide a block marker (`###### `).
const MAX_BLOCK_PREFIX: usize = 8;

/// The streaming renderer of one answer.
#[derive(Debug)]
pub struct Markdown {
    color: bool,
    /// At the start of a line: characters that may still become a block marker.
    prefix: String,
    line_start: bool,
    /// A `*` seen, waiting for the next character to say whether it is bold, emphasis or text.
    star: bool,
    in_fence: bool,
    /// The style of the whole line (heading, quote, code line), if any.
    line_style: Option<&'static str>,
    bold: bool,
    italic: bool,
    code: bool,
    /// The character written last, for telling an opening `*` from a closing one.
    last: char,
}

impl Markdown {
    /// A renderer that styles (`color`) or passes the text through unchanged.
    pub fn new(color: bool) -> Markdown {
        Markdown {
            color,
            prefix: String::new(),
            line_start: true,
            star: false,
            in_fence: false,
            line_style: None,
            bold: false,
            italic: false,
            code: false,
            last: ' ',
        }
    }

    /// What to write for the next piece of the answer.
    pub fn push(&mut self, text: &str) -> String {
        if !self.color {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len() + 16);
        for c in text.chars() {
            self.char(c, &mut out);
        }
        out
    }

    /// What to write at the end of the answer: anything held back, and the styles reset.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if self.color {
            self.flush_prefix(&mut out);
            self.flush_star(&mut out);
            if self.styled() {
                out.push_str(sgr::RESET);
            }
        }
        *self = Markdown {
            in_fence: false,
            ..Markdown::new(self.color)
        };
        out
    }

    fn styled(&self) -> bool {
        self.line_style.is_some() || self.bold || self.italic || self.code
    }

    fn char(&mut self, c: char, out: &mut String) {
        if c == '\n' {
            self.flush_prefix(out);
            self.flush_star(out);
            self.end_line(out);
            return;
        }
        if self.line_start {
            self.prefix.push(c);
            if self.prefix_undecided() {
                return;
            }
            self.line_start = false;
            let prefix = std::mem::take(&mut self.prefix);
            self.start_line(&prefix, out);
            return;
        }
        self.inline(c, out);
    }

    /// Whether the held-back start of the line may still turn into a block marker.
    fn prefix_undecided(&self) -> bool {
        let p = self.prefix.as_str();
        if p.len() > MAX_BLOCK_PREFIX {
            return false;
        }
        let rest = p.trim_start_matches(' ');
        if rest.is_empty() {
            return true;
        }
        if self.in_fence {
            return "```".starts_with(rest);
        }
        let hashes = rest.len() - rest.trim_start_matches('#').len();
        (hashes == rest.len() && hashes <= 6)
            || "```".starts_with(rest)
            || matches!(rest, "-" | "*" | "+" | ">")
    }

    /// Style the line whose start `prefix` decided, and write the prefix.
    fn start_line(&mut self, prefix: &str, out: &mut String) {
        let indent = prefix.len() - prefix.trim_start_matches(' ').len();
        let rest = &prefix[indent..];
        if rest.starts_with("```") {
            self.in_fence = !self.in_fence;
            self.line_style = Some(sgr::DIM);
            open(out, sgr::DIM);
            out.push_str(prefix);
            return;
        }
        if self.in_fence {
            self.line_style = Some(sgr::CODE);
            open(out, sgr::CODE);
            out.push_str(prefix);
            return;
        }
        let hashes = rest.len() - rest.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) && rest[hashes..].starts_with(' ') {
            self.line_style = Some(sgr::HEADING);
            open(out, sgr::HEADING);
            return;
        }
        match rest {
            "- " | "* " | "+ " => {
                out.push_str(&prefix[..indent]);
                out.push_str("• ");
                self.last = ' ';
            }
            "> " => {
                self.line_style = Some(sgr::DIM);
                open(out, sgr::DIM);
                out.push_str(&prefix[..indent]);
                out.push_str("│ ");
            }
            _ => {
                out.push_str(&prefix[..indent]);
                for c in rest.chars() {
                    self.inline(c, out);
                }
            }
        }
    }

    fn inline(&mut self, c: char, out: &mut String) {
        if self.in_fence {
            out.push(c);
            return;
        }
        if self.star {
            self.star = false;
            if c == '*' {
                self.bold = !self.bold;
                self.restyle(out);
                self.last = '*';
                return;
            }
            let closing = self.italic && !self.last.is_whitespace();
            let opening = !self.italic && !c.is_whitespace();
            if closing || opening {
                self.italic = !self.italic;
                self.restyle(out);
            } else {
                out.push('*');
            }
        }
        match c {
            '*' if !self.code => self.star = true,
            '`' => {
                self.code = !self.code;
                self.restyle(out);
            }
            c => out.push(c),
        }
        self.last = c;
    }

    /// Reset, then open every style in force.
    fn restyle(&self, out: &mut String) {
        out.push_str(sgr::RESET);
        for (on, code) in [
            (self.line_style.is_some(), self.line_style.unwrap_or("")),
            (self.bold, sgr::BOLD),
            (self.italic, sgr::ITALIC),
            (self.code, sgr::CODE),
        ] {
            if on {
                open(out, code);
            }
        }
    }

    fn flush_prefix(&mut self, out: &mut String) {
        if self.line_start && !self.prefix.is_empty() {
            let prefix = std::mem::take(&mut self.prefix);
            self.start_line(&prefix, out);
        }
    }

    fn flush_star(&mut self, out: &mut String) {
        if self.star {
            self.star = false;
            out.push('*');
        }
    }

    fn end_line(&mut self, out: &mut String) {
        if self.styled() {
            out.push_str(sgr::RESET);
        }
        out.push('\n');
        self.line_style = None;
        self.bold = false;
        self.italic = false;
        self.code = false;
        self.line_start = true;
        self.last = ' ';
    }
}

fn open(out: &mut String, code: &str) {
    out.push_str("\x1b[");
    out.push_str(code);
    out.push('m');
}

#[cfg(test)]
mod tests {
    use super::Markdown;

    /// The rendering with each SGR sequence written as `<codes>` and the reset as `<>`.
    fn shown(pieces: &[&str]) -> String {
        let mut md = Markdown::new(true);
        let mut out: String = pieces.iter().map(|p| md.push(p)).collect();
        out.push_str(&md.finish());
        let mut shown = String::new();
        let mut rest = out.as_str();
        while let Some(at) = rest.find("\x1b[") {
            shown.push_str(&rest[..at]);
            let end = rest[at..].find('m').expect("an SGR sequence ends with m") + at;
            let codes = &rest[at + 2..end];
            shown.push('<');
            shown.push_str(if codes == "0" { "" } else { codes });
            shown.push('>');
            rest = &rest[end + 1..];
        }
        shown.push_str(rest);
        shown
    }

    #[test]
    fn markdown_is_styled_however_the_stream_is_split() {
        let cases: &[(&str, &str)] = &[
            ("plain text\n", "plain text\n"),
            ("# Title\nbody\n", "<1;35>Title<>\nbody\n"),
            ("### Three\n", "<1;35>Three<>\n"),
            ("#hashtag\n", "#hashtag\n"),
            ("a **b** c\n", "a <><1>b<> c\n"),
            ("an *em* word\n", "an <><3>em<> word\n"),
            ("x * y * z\n", "x * y * z\n"),
            ("use `cargo`\n", "use <><36>cargo<>\n"),
            ("- one\n  - two\n", "• one\n  • two\n"),
            ("* star item\n", "• star item\n"),
            ("> quoted\n", "<2>│ quoted<>\n"),
            (
                "```rust\nlet *x* = 1;\n```\nafter\n",
                "<2>```rust<>\n<36>let *x* = 1;<>\n<2>```<>\nafter\n",
            ),
            ("**unclosed\nnext\n", "<><1>unclosed<>\nnext\n"),
        ];
        for (text, want) in cases {
            let whole = shown(&[text]);
            assert_eq!(whole, *want, "whole {text:?}");
            let chars: Vec<String> = text.chars().map(String::from).collect();
            let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
            assert_eq!(shown(&pieces), *want, "char by char {text:?}");
        }
    }

    #[test]
    fn without_color_text_passes_through() {
        let mut md = Markdown::new(false);
        assert_eq!(md.push("# a **b**\n"), "# a **b**\n");
        assert_eq!(md.finish(), "");
    }

    #[test]
    fn finish_writes_what_was_held_back() {
        let mut md = Markdown::new(true);
        assert_eq!(md.push("##"), "");
        assert_eq!(md.finish(), "##");
    }
}
