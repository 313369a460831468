//! The label-selector lexer: turns a selector string into tokens the way
//! `k8s.io/apimachinery/pkg/labels`' lexer does.

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Ident(String),
    In,
    NotIn,
    Bang,
    NotEq,
    Eq,
    DoubleEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
    End,
    Error(String),
}

impl Tok {
    pub(super) fn literal(&self) -> String {
        match self {
            Tok::Ident(s) | Tok::Error(s) => s.clone(),
            Tok::In => "in".into(),
            Tok::NotIn => "notin".into(),
            Tok::Bang => "!".into(),
            Tok::NotEq => "!=".into(),
            Tok::Eq => "=".into(),
            Tok::DoubleEq => "==".into(),
            Tok::Gt => ">".into(),
            Tok::Lt => "<".into(),
            Tok::Open => "(".into(),
            Tok::Close => ")".into(),
            Tok::Comma => ",".into(),
            Tok::End => String::new(),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn symbol(s: &str) -> Option<Tok> {
    Some(match s {
        "!" => Tok::Bang,
        "!=" => Tok::NotEq,
        "=" => Tok::Eq,
        "==" => Tok::DoubleEq,
        ">" => Tok::Gt,
        "<" => Tok::Lt,
        "(" => Tok::Open,
        ")" => Tok::Close,
        "," => Tok::Comma,
        _ => return None,
    })
}

pub(super) fn lex(s: &str) -> Vec<Tok> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\r' | '\n') {
            i += 1;
        }
        if i >= chars.len() {
            out.push(Tok::End);
            return out;
        }
        if is_special(chars[i]) {
            let mut buf = String::new();
            let mut last: Option<(Tok, usize)> = None;
            while i < chars.len() && is_special(chars[i]) {
                buf.push(chars[i]);
                if let Some(t) = symbol(&buf) {
                    last = Some((t, i + 1));
                } else if last.is_some() {
                    break;
                }
                i += 1;
            }
            match last {
                Some((t, end)) => {
                    i = end;
                    out.push(t);
                }
                None => {
                    out.push(Tok::Error(format!("error expected: keyword found '{buf}'")));
                    out.push(Tok::End);
                    return out;
                }
            }
        } else {
            let mut buf = String::new();
            while i < chars.len() && !is_special(chars[i]) && !matches!(chars[i], ' ' | '\t' | '\r' | '\n') {
                buf.push(chars[i]);
                i += 1;
            }
            out.push(match buf.as_str() {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Ident(buf),
            });
        }
    }
}
